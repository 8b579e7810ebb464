"""VJP rules of indexing: gathers (``take``, ``take_along_axis``, ``x[key]``) scatter-add their
cotangent back, so duplicate indices accumulate; ``x[key] = v`` splits it between the
overwritten array (zero at ``key``) and the value (``g[key]``, reduced to ``v``'s shape)."""

from __future__ import annotations

from ..namespace._ops import defvjp
from ._helpers import index_add


def _positions(ns, x):
    """Each element's flat index, laid out like ``x``: gathering from it says where from."""
    return ns.reshape(ns.arange(x.size, dtype=ns.int64), tuple(x.shape))


def _scatter(ns, x, g, where):
    """Sum ``g`` into a zero array shaped like ``x`` at the flat positions ``where``."""
    flat = index_add(ns, x.size, ns.reshape(where, (-1,)), ns.reshape(g, (-1,)))
    return ns.reshape(flat, tuple(x.shape))


def _is_basic(key):
    parts = key if isinstance(key, tuple) else (key,)
    return all(isinstance(k, int | slice | type(None) | type(Ellipsis)) for k in parts)


def _getitem(ns, g, out, x, key):
    if _is_basic(key):  # a view: no element is picked twice
        ct = ns.zeros(tuple(x.shape), dtype=g.dtype)
        parts = key if isinstance(key, tuple) else (key,)
        picked = tuple(k for k in parts if k is not None)  # new axes hold no elements
        ct[picked] = ns.reshape(g, tuple(ct[picked].shape))
        return ct, None
    return _scatter(ns, x, g, _positions(ns, x)[key]), None


def _setitem(ns, g, out, x, key, value):
    gx = ns.asarray(g, copy=True)
    gx[key] = 0
    return gx, None, g[key]


def _take(ns, g, out, x, indices, /, *, axis=None):
    axis = 0 if axis is None else axis
    return _scatter(ns, x, g, ns.take(_positions(ns, x), indices, axis=axis)), None


def _take_along_axis(ns, g, out, x, indices, /, *, axis=-1):
    where = ns.take_along_axis(_positions(ns, x), indices, axis=axis)
    return _scatter(ns, x, g, where), None


defvjp("__getitem__", _getitem, saves=("key",))
defvjp("__setitem__", _setitem, saves=("key",))
defvjp("take", _take, saves=("indices",))
defvjp("take_along_axis", _take_along_axis, saves=("indices",))
