"""sort/argsort sort along an axis of the example: the axis shifts past the batch."""

from __future__ import annotations

from .._primitive import defbatch
from ..ops._rules.batching import fn, shift


def _sort(name):
    def rule(ns, dims, x, /, *, axis=-1, **kw):
        return fn(ns, name)(x, axis=shift(axis, x.ndim - 1), **kw)

    return rule


defbatch("sort", _sort("sort"))
defbatch("argsort", _sort("argsort"))
