"""VJP rules of indexing: gathers (``take``, ``take_along_axis``, ``x[key]``) scatter-add their
cotangent back, so duplicate indices accumulate; ``x[key] = v`` splits it between the
overwritten array (zero at ``key``) and the value (``g[key]``, reduced to ``v``'s shape), where
only the writes that survived get a gradient (with duplicate indices, the backend's own write
order decides which: the last write on NumPy)."""

from __future__ import annotations

from .._primitive import defvjp
from ..namespace._backend import capabilities
from ..ops._rules.vjp import index_add, raw, zeros_beside


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
            return _pad_back(ns, g, tuple(x.shape), picked, getattr(x, "chunks", None)), None
        ct = ns.zeros(tuple(x.shape), dtype=g.dtype)
        ct[picked] = ns.reshape(g, tuple(ct[picked].shape))
        return ct, None
    return _scatter(ns, x, g, _positions(ns, x)[key]), None


def _pad_back(ns, g, shape, key, chunks=None):
    """The cotangent of ``x[key]`` (ints, slices of any step, an ellipsis) built from ``g`` by
    padding with zeros along each axis (and, for a step ``s``, interleaving ``s - 1`` zeros after
    each element): lazy, and no writes into arrays. ``chunks`` are ``x``'s chunks on a chunked
    backend: the zeros take ``g``'s chunk size along the axis where ``g`` has several chunks
    there, else ``x``'s (Cubed 0.27's concat is exact only when its operands share one chunk
    size along the axis, a one-chunk operand being no longer than it)."""
    if Ellipsis in key:
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (len(shape) - len(key) + 1) + key[i + 1 :]
    key = key + (slice(None),) * (len(shape) - len(key))
    # drop the axes that None (newaxis) added: g then has the selection's shape
    g = ns.reshape(g, tuple(len(range(*k.indices(n))) for k, n in zip(key, shape, strict=True)
                            if isinstance(k, slice)))  # fmt: skip
    if g.size == 0:  # nothing picked: all zeros
        return _zeros_like_shape(ns, g, shape, chunks)
    for axis, (k, n) in enumerate(zip(key, shape, strict=True)):
        if isinstance(k, int):
            g = ns.expand_dims(g, axis=axis)
            start, stop = k % n, k % n + 1
        else:
            start, stop, step = k.indices(n)
            m = len(range(start, stop, step))
            if step == 1:
                stop = max(stop, start)
            else:
                if step < 0:  # the same elements, picked in increasing order from the last one
                    g = ns.flip(g, axis=axis)
                    start, step = start + (m - 1) * step, -step
                if m > 1:
                    g = _interleave(ns, g, axis, step)
                span = min(g.shape[axis], n - start)
                if span < g.shape[axis]:
                    g = g[(slice(None),) * axis + (slice(0, span),)]
                stop = start + span
        pieces = []
        for size in (start, None, n - stop):
            if size is None:
                pieces.append(g)
            elif size:
                pieces.append(_zeros_along(ns, g, axis, size,
                                           max(chunks[axis]) if chunks else None))
        g = ns.concat(pieces, axis=axis) if len(pieces) > 1 else pieces[0]
    return g


def _interleave(ns, g, axis, step):
    """``g`` with ``step - 1`` zeros after each element along ``axis``: element ``i`` lands at
    ``i * step``. ``g`` gets a new axis of ``step`` (``g`` at its first position, zeros after)
    that is one chunk on a chunked backend, so merging it into ``axis`` moves no data: chunk
    ``c`` becomes ``c * step``."""
    e = ns.expand_dims(g, axis=axis + 1)
    inter = ns.where(_first_of(ns, e, axis + 1, step), e, ns.zeros_like(e))
    shape = list(g.shape)
    shape[axis] *= step
    return ns.reshape(inter, tuple(shape))


def _first_of(ns, e, axis, size):
    """A constant boolean array, 1 long on every axis but ``axis``, where it is ``size`` long
    (one chunk) and True at index 0 only; made from ``e`` (its Spec on a chunked backend)."""
    b = capabilities(ns)
    xp, data = (b.xp, e if raw(ns) else e._data) if b.chunked else (ns, e)
    one = data[(slice(0, 1),) * data.ndim]
    shape = [1] * data.ndim
    shape[axis] = size - 1
    kw = {"chunks": tuple(shape)} if b.chunked else {}
    rest = xp.zeros_like(xp.broadcast_to(one, tuple(shape), **kw), dtype=xp.bool)
    shape[axis] = size
    kw = {"chunks": tuple(shape)} if b.chunked else {}
    mask = xp.concat([xp.ones_like(one, dtype=xp.bool), rest], axis=axis, **kw)
    return mask if raw(ns) or not b.chunked else ns._make(mask)


def _zeros_along(ns, g, axis, size, chunk):
    """Zeros shaped like ``g`` but ``size`` long on ``axis``, in ``g``'s Spec and chunking; along
    ``axis``, chunked like ``g`` where ``g`` has several chunks there, else in chunks of ``chunk``
    or ``g``'s length, whichever is longer. Over a chunked backend our namespace (higher order)
    gets the same zeros, as a constant."""
    b = capabilities(ns)
    if not b.chunked:
        return zeros_beside(ns, g, axis, size)
    data = g if raw(ns) else g._data
    c = data.chunksize[axis]
    if data.numblocks[axis] == 1:
        c = max(c, chunk or 1)
    edge = [slice(None)] * data.ndim
    edge[axis] = slice(0, 1)
    block = list(data.shape)
    block[axis] = size
    target = tuple(c if a == axis else s for a, s in enumerate(data.chunksize))
    z = b.xp.zeros_like(b.xp.broadcast_to(data[tuple(edge)], tuple(block), chunks=target))
    return z if raw(ns) else ns._make(z)


def _zeros_like_shape(ns, g, shape, chunks):
    """Zeros of ``shape`` made from the empty ``g`` (its Spec on a chunked backend), chunked
    like ``x`` (``chunks``) where known."""
    b = capabilities(ns)
    if not b.chunked:
        return ns.zeros(tuple(shape), dtype=g.dtype)
    data = g if raw(ns) else g._data
    zero = b.xp.reshape(b.xp.sum(data) * 0, (1,) * len(shape))
    z = b.xp.broadcast_to(zero, tuple(shape), chunks=chunks or "auto")
    return z if raw(ns) else ns._make(z)


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
