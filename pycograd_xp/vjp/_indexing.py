"""VJP rules of indexing: gathers (``take``, ``take_along_axis``, ``x[key]``) scatter-add their
cotangent back, so duplicate indices accumulate; ``x[key] = v`` splits it between the
overwritten array (zero at ``key``) and the value (``g[key]``, reduced to ``v``'s shape), where
only the writes that survived get a gradient (with duplicate indices, the backend's own write
order decides which: the last write on NumPy)."""

from __future__ import annotations

from ..namespace._backend import capabilities
from ..namespace._ops import defvjp
from ._helpers import index_add, zeros_beside


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
        parts = key if isinstance(key, tuple) else (key,)
        picked = tuple(k for k in parts if k is not None)  # new axes hold no elements
        if not capabilities(ns).mutable:  # immutable arrays (Cubed): pad instead
            return _pad_back(ns, g, tuple(x.shape), picked), None
        ct = ns.zeros(tuple(x.shape), dtype=g.dtype)
        ct[picked] = ns.reshape(g, tuple(ct[picked].shape))
        return ct, None
    return _scatter(ns, x, g, _positions(ns, x)[key]), None


def _pad_back(ns, g, shape, key):
    """The cotangent of ``x[key]`` (ints, unit-step slices, an ellipsis) built by padding ``g``
    with zeros along each axis: lazy, and no writes into arrays."""
    if Ellipsis in key:
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (len(shape) - len(key) + 1) + key[i + 1 :]
    key = key + (slice(None),) * (len(shape) - len(key))
    # drop the axes that None (newaxis) added: g then has the selection's shape
    g = ns.reshape(g, tuple(len(range(*k.indices(n))) for k, n in zip(key, shape, strict=True)
                            if isinstance(k, slice)))  # fmt: skip
    for axis, (k, n) in enumerate(zip(key, shape, strict=True)):
        if isinstance(k, int):
            g = ns.expand_dims(g, axis=axis)
            start, stop = k % n, k % n + 1
        else:
            start, stop, step = k.indices(n)
            if step != 1:
                raise NotImplementedError(
                    "x[key] backward on a backend with immutable arrays supports unit-step "
                    f"slices only, got {k}; use xp.take with explicit indices"
                )
            stop = max(stop, start)
        pieces = []
        for size in (start, None, n - stop):
            if size is None:
                pieces.append(g)
            elif size:
                pieces.append(zeros_beside(ns, g, axis, size))
        g = ns.concat(pieces, axis=axis) if len(pieces) > 1 else pieces[0]
    return g


def _has_array_index(ns, key):
    """Whether ``key`` holds an integer index array (which may repeat an index)."""
    parts = key if isinstance(key, tuple) else (key,)
    return any(hasattr(k, "dtype") and k.ndim > 0 and not ns.isdtype(k.dtype, "bool")
               for k in parts)  # fmt: skip


def _setitem(ns, g, out, x, key, value):
    gx = ns.asarray(g, copy=True)
    gx[key] = 0
    gv = g[key]
    if _has_array_index(ns, key):  # duplicate indices: only the surviving write gets a gradient
        gv = ns.where(_survivors(ns, x, key), gv, ns.zeros_like(gv))
    return gx, None, gv


def _survivors(ns, x, key):
    """For each element written by ``x[key] = ...``, whether its write is the one that stays.

    Writes each element's own number with the backend's own ``__setitem__`` and reads back
    which numbers stayed: whatever order the backend writes duplicates in, the answer follows
    it. A backend whose order for duplicates is unspecified is refused when there are any.
    """
    probe = ns.zeros(tuple(x.shape), dtype=ns.int64)
    n = probe[key]
    ids = ns.reshape(ns.arange(1, n.size + 1, dtype=ns.int64), tuple(n.shape))
    probe[key] = ids
    survived = probe[key] == ids
    if not capabilities(ns).ordered_writes and not bool(ns.all(survived)):
        raise NotImplementedError(
            "x[key] = value backward: key repeats an index, and on the "
            f"{capabilities(ns).name} backend which duplicate write lands is unspecified, so no "
            "gradient can say which value survived; deduplicate the indices first"
        )
    return survived


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
