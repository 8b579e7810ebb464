"""argmax/argmin/count_nonzero reduce; where broadcasts; searchsorted counts (a batched sorted
array has one search per example: the insertion point is the number of elements before it);
nonzero's output size depends on each example's data."""

from __future__ import annotations

from .._primitive import REGISTRY, defbatch, unbatchable
from ..ops._rules.batching import align, batch_size, batched, flat_reduction, reduction


def _where(ns, dims, condition, x1, x2):
    return ns.where(*align(ns, dims, condition, x1, x2))


def _searchsorted(ns, dims, x1, x2, /, *, side="left", sorter=None):
    s_b = getattr(sorter, "batched", False)
    sorter = getattr(sorter, "data", sorter)
    if not dims[0] and not s_b:  # one sorted array for every example: one search
        return ns.searchsorted(x1, x2, side=side, sorter=sorter)
    n = batch_size(dims, (x1, x2)) if (dims[0] or dims[1]) else sorter.shape[0]
    x1 = batched(ns, x1, dims[0], n)
    if sorter is not None:
        x1 = ns.take_along_axis(x1, batched(ns, sorter, s_b, n), axis=1)
    x2 = batched(ns, x2, dims[1], n)
    r = x2.ndim - 1
    a = ns.reshape(x1, (n, *(1,) * r, x1.shape[1]))
    v = x2[..., None]
    before = a < v if side == "left" else a <= v
    return ns.astype(ns.sum(ns.astype(before, ns.int64), axis=-1), ns.int64)


defbatch("argmax", flat_reduction(REGISTRY["argmax"]))
defbatch("argmin", flat_reduction(REGISTRY["argmin"]))
defbatch("count_nonzero", reduction(REGISTRY["count_nonzero"]))
defbatch("where", _where)
defbatch("searchsorted", _searchsorted)
unbatchable("its output's length depends on each example's data (the examples' results would "
            "not stack); use xp.where with a mask instead", "nonzero")  # fmt: skip
