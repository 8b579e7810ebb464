"""Data-type rows: astype keeps the batch axis; the others read dtypes only (their result is
the same for every example)."""

from __future__ import annotations

from ..namespace._ops import defbatch
from ._helpers import fn


def _same(name):
    return lambda ns, dims, *args, **kw: fn(ns, name)(*args, **kw)


for _n in ("astype", "can_cast", "finfo", "iinfo", "isdtype", "result_type"):
    defbatch(_n, _same(_n))
