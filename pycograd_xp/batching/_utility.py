"""all/any reduce like the statistical rows; diff shifts its axis and batches prepend/append."""

from __future__ import annotations

from .._primitive import REGISTRY, defbatch
from ..ops._rules.batching import batched, reduction, shift


def _diff(ns, dims, x, /, *, axis=-1, n=1, prepend=None, append=None):
    b = x.shape[0] if dims[0] else None
    parts = {}
    for k, v in (("prepend", prepend), ("append", append)):
        if v is None:
            continue
        vb = getattr(v, "batched", False)
        data = getattr(v, "data", v)
        if b is None and vb:
            b = data.shape[0]
        parts[k] = (data, vb)
    nd = (x.ndim - 1) if dims[0] else x.ndim
    x = batched(ns, x, dims[0], b)
    kw = {k: batched(ns, d, vb, b) for k, (d, vb) in parts.items()}
    return ns.diff(x, axis=shift(axis, nd), n=n, **kw)


for _n in ("all", "any"):
    defbatch(_n, reduction(REGISTRY[_n]))
defbatch("diff", _diff)
