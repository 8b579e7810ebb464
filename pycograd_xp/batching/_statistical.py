"""Reductions and scans batch by shifting their axes past the batch axis (axis=None: every
axis of an example)."""

from __future__ import annotations

from ..namespace._ops import defbatch
from ._helpers import all_axes, fn, shift


def reduction(name):
    def rule(ns, dims, x, /, *, axis=None, **kw):
        nd = x.ndim - 1
        return fn(ns, name)(x, axis=all_axes(nd) if axis is None else shift(axis, nd), **kw)

    return rule


def flat_reduction(name):
    """A row whose axis=None means "the flattened array" (argmax, cumulative_sum)."""

    def rule(ns, dims, x, /, *, axis=None, **kw):
        nd = x.ndim - 1
        if axis is not None:
            return fn(ns, name)(x, axis=shift(axis, nd), **kw)
        r = fn(ns, name)(ns.reshape(x, (x.shape[0], -1)), axis=1, **kw)
        if kw.get("keepdims"):
            r = ns.reshape(r, (x.shape[0], *(1,) * nd))
        return r

    return rule


for _n in ("max", "mean", "min", "prod", "std", "sum", "var"):
    defbatch(_n, reduction(_n))
for _n in ("cumulative_prod", "cumulative_sum"):
    defbatch(_n, flat_reduction(_n))
