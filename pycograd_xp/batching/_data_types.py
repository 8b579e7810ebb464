"""Data-type rows: astype keeps the batch axis; the others read dtypes only (their result is
the same for every example)."""

from __future__ import annotations

from .._primitive import defbatch
from ..ops._rules.batching import fn


def _same(name):
    return lambda ns, dims, *args, **kw: fn(ns, name)(*args, **kw)


for _n in ("astype", "can_cast", "finfo", "iinfo", "isdtype", "result_type"):
    defbatch(_n, _same(_n))
