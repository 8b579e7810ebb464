"""Elementwise rows batch by broadcasting: batched operands get ones after the batch axis up to
the common rank, unbatched ones broadcast as they are."""

from __future__ import annotations

from .._primitive import REGISTRY, defbatch
from ..ops._rules.batching import align, fn


def _unary(name):
    return lambda ns, dims, x: fn(ns, name)(x)


def _binary(name):
    def rule(ns, dims, x1, x2):
        return fn(ns, name)(*align(ns, dims, x1, x2))

    return rule


def _clip(ns, dims, x, min=None, max=None):
    x, lo, hi = align(ns, dims + (False,) * (3 - len(dims)), x, min, max)
    return ns.clip(x, lo, hi)


for _p in list(REGISTRY.values()):
    if _p.kind == "unary":
        defbatch(_p.name, _unary(_p.name))
    elif _p.kind == "binary":
        defbatch(_p.name, _binary(_p.name))
defbatch("clip", _clip)
