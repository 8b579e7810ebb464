"""Indexing functions: ``take``, ``take_along_axis``, and the Array methods ``__getitem__`` and
``__setitem__`` (rows of the table too, though they live on the Array class).

Gradients: gathers (``take``, ``take_along_axis``, ``x[key]``) scatter-add their cotangent back,
so duplicate indices accumulate; ``x[key] = v`` splits it between the overwritten array (zero at
``key``) and the value (``g[key]``, reduced to ``v``'s shape), where only the writes that
survived get a gradient (with duplicate indices, the backend's own write order decides which:
the last write on NumPy). Forward mode: gathers are linear in the array; ``x[key] = v`` is
derived from its VJP rule (it handles immutable backends and duplicate indices).

Batching: the batch axis is one more leading slice of the key. Integer index arrays of the
example (batched or not) become one gather over the whole batch (the batch indexed by an arange
beside them); a batched boolean mask selects a different number of elements per example and
cannot batch. take/take_along_axis gather along a shifted axis; a batched index into an
unbatched array is one take over the flattened indices.

Shapes: ``x[key]`` with ints, slices, ``...`` and ``None`` is a view; with integer arrays or
boolean masks (NumPy's advanced indexing) it is a new array, the broadcast index shape taking
the place of the indexed axes (or going first when they are not adjacent). A boolean mask
selects a data-dependent number of elements: the rule gives the upper bound, all of them.
``x[key] = v`` writes in place: nothing new.
"""

from __future__ import annotations

import functools
import inspect
import math
from typing import Any

import numpy as np

from .._primitive import Array, Primitive, UnbatchableError, _register, primitive
from ..namespace._backend import capabilities
from ._rules.batching import batched, constant_like, norm_axis, rank, shift, to_rank
from ._rules.jvp import TRANSPOSED, linear
from ._rules.keys import fancy_buffers, one_block, placed_selection, selection
from ._rules.shapes import (
    BUFFER_ELEMENTS,
    as_abstract,
    broadcast,
    broadcast_view,
    is_array,
    measured_layouts,
    new,
    size_bytes,
    view,
)
from ._rules.vjp import index_add, made_like, raw, zeros_beside

# -- kits shared by the rows below ---------------------------------------------------------------


def method(name: str, *params: str) -> Primitive:
    """A row for an Array method of the standard (``__getitem__``, ``__setitem__``)."""
    P = inspect.Parameter
    sig = inspect.Signature([P(p, P.POSITIONAL_ONLY) for p in params])
    return _register(Primitive(name, "method", None, None, (), signature=sig))


def _positions(ns, x):
    """Each element's flat index, laid out like ``x`` (in ``x``'s Spec on a chunked backend):
    gathering from it says where from."""
    return ns.reshape(ns.arange(x.size, dtype=ns.int64, **made_like(ns, x)), tuple(x.shape))


def _scatter(ns, x, g, where):
    """Sum ``g`` into a zero array shaped like ``x`` at the flat positions ``where``."""
    flat = index_add(ns, x.size, ns.reshape(where, (-1,)), ns.reshape(g, (-1,)))
    return ns.reshape(flat, tuple(x.shape))


def _is_index_array(p):
    return hasattr(p, "shape") and not isinstance(p, bool | int)


def _plain_key(T, key):
    parts = key if type(key) is tuple else (key,)
    return parts, tuple(p.data if type(p) is T else p for p in parts)


def _is_mask(p):
    return "bool" in str(p.dtype)


def _simple_key(T, parts, nd):
    """The key as one entry per axis of an example (an ellipsis becomes full slices) if each
    entry is a Python int, a full slice or a 0-d integer array (batched or not); else None."""
    out = []
    for p in parts:
        if p is Ellipsis:
            out += [slice(None)] * (nd - (len(parts) - 1))
            continue
        d = p.data if type(p) is T else p
        ok = (
            type(p) is int
            or (type(p) is slice and p == slice(None))
            or (
                hasattr(d, "shape")
                and d.ndim == (1 if type(p) is T and p.batched else 0)
                and not _is_mask(d)
                and "int" in str(d.dtype)
            )
        )
        if not ok:
            return None
        out.append(p)
    return out + [slice(None)] * (nd - len(out))


def _index_value(ns, T, p, d):
    """A 0-d integer key entry as an array of non-negative positions (batched: one per
    example, shaped ``(n,)``)."""
    i = p.data if type(p) is T else p
    return ns.where(i < 0, i + d, i)


# -- __getitem__ ---------------------------------------------------------------------------------


GETITEM = method("__getitem__", "x", "key")


def _is_basic(key):
    parts = key if isinstance(key, tuple) else (key,)
    return all(isinstance(k, int | slice | type(None) | type(Ellipsis)) for k in parts)


@GETITEM.defvjp(saves=("key",))
def GETITEM_vjp(ns, g, out, x, key):
    if _is_basic(key):  # a view: no element is picked twice
        parts = key if isinstance(key, tuple) else (key,)
        picked = tuple(k for k in parts if k is not None)  # new axes hold no elements
        if not capabilities(ns).mutable:  # immutable arrays (Cubed): pad instead
            return _pad_back(ns, g, tuple(x.shape), picked, getattr(x, "chunks", None)), None
        ct = ns.zeros(tuple(x.shape), dtype=g.dtype)
        ct[picked] = ns.reshape(g, tuple(ct[picked].shape))
        return ct, None
    return _scatter(ns, x, g, _index(ns, _positions(ns, x), key)), None


def _index(ns, a, key):
    """``a[key]``; on a raw backend with its own indexing (the Backend's ``getitem``: Cubed's
    lacks negative steps and mistakes an index as long as its axis for none), through it (our
    namespace's arrays go through it already)."""
    index = capabilities(ns).getitem
    return index(a, key) if index is not None and raw(ns) else a[key]


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
    g = ns.reshape(
        g,
        tuple(
            len(range(*k.indices(n)))
            for k, n in zip(key, shape, strict=True)
            if isinstance(k, slice)
        ),
    )
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
                pieces.append(
                    _zeros_along(ns, g, axis, size, max(chunks[axis]) if chunks else None)
                )
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


GETITEM.defjvp(lambda ns, t, out, x, key: _index(ns, t[0], key))


def _advanced(parts):
    """Positions of the key's advanced entries (index arrays, and ints beside them)."""
    arrays = [i for i, p in enumerate(parts) if _is_index_array(p)]
    if not arrays:
        return []
    return [i for i, p in enumerate(parts) if _is_index_array(p) or type(p) is int]


def _split(adv):
    """Whether the advanced entries at positions ``adv`` are apart (a slice, an ellipsis or a
    new axis between them): NumPy then puts the axes they make first in the result."""
    return bool(adv) and adv != list(range(adv[0], adv[-1] + 1))


def _index_rank(plain, adv):
    """How many axes the advanced entries at positions ``adv`` of the (unbatched) key make:
    their broadcast rank, a boolean mask counting as one (its nonzero positions)."""
    return max(
        (1 if _is_mask(plain[i]) else plain[i].ndim) if _is_index_array(plain[i]) else 0
        for i in adv
    )


def _before(parts, first, nd):
    """How many result axes the key's entries before position ``first`` make."""
    consumed = sum(
        getattr(p, "ndim", 1)
        if _is_index_array(p) and _is_mask(p)
        else (1 if p is not None and p is not Ellipsis else 0)
        for p in parts
    )
    n = 0
    for p in parts[:first]:
        if p is Ellipsis:
            n += nd - consumed
        elif p is None or type(p) is slice:
            n += 1
    return n


@GETITEM.defbatch
def GETITEM_batch(ns, T, x, key):
    parts, plain = _plain_key(T, key)
    batched_key = [i for i, p in enumerate(parts) if type(p) is T and p.batched]
    adv = _advanced(plain)
    whole = (
        bool(adv)
        and len(adv) == len(plain)
        and not any(_is_mask(plain[i]) for i in adv if _is_index_array(plain[i]))
    )  # only integer indices
    if not batched_key and not whole:
        if not x.batched:  # (a view of x where the key is basic: linked, see BatchedArray)
            out = x.data[plain if type(key) is tuple else plain[0]]
            return x.viewed(out, lambda: x._mod.__getitem__(x, key))
        if len(plain) == 1 and _is_index_array(plain[0]) and _is_mask(plain[0]):
            return T(_masked(ns, x.data, plain[0]), True)
        out = x.data[(slice(None), *plain)]
        if _split(adv):  # NumPy puts the index axes first, before the batch axis
            out = ns.moveaxis(out, _index_rank(plain, adv), 0)
        return T(out, True)
    if not x.batched and not batched_key:
        return T(x.data[plain if type(key) is tuple else plain[0]], False)
    if batched_key:
        entries = _simple_key(T, parts, x.ndim)
        if entries is not None:
            return T(
                _gather_simple(
                    ns,
                    T,
                    batched(ns, x.data, x.batched, parts[batched_key[0]].data.shape[0]),
                    entries,
                ),
                True,
            )
    if any(_is_mask(parts[i].data) for i in batched_key):
        raise UnbatchableError(
            "vmap: __getitem__ with a batched boolean mask cannot be batched: each example "
            "would select a different number of elements; use xp.where(mask, x, 0) instead"
        )
    n = x.data.shape[0] if x.batched else parts[batched_key[0]].data.shape[0]
    k = max(
        p.ndim - 1
        if type(p) is T and p.batched
        else getattr(p.data if type(p) is T else p, "ndim", 0)
        for p in (parts[i] for i in adv)
    )
    new = []
    for i, p in enumerate(parts):
        v = p.data if type(p) is T else p
        if i in adv and type(p) is T and p.batched:
            v = to_rank(ns, v, k)
        new.append(v)
    ar = ns.reshape(ns.arange(n), (n, *(1,) * k))
    data = batched(ns, x.data, x.batched, n)
    out = data[(ar, *new)]
    contiguous = adv == list(range(adv[0], adv[-1] + 1))
    if contiguous and adv[0] > 0:
        pre = _before(plain, adv[0], data.ndim - 1)
        if pre:
            out = ns.moveaxis(out, tuple(range(1, 1 + k)), tuple(range(1 + pre, 1 + pre + k)))
    return T(out, True)


def _masked(ns, data, mask):
    """``data[:, mask]`` (a mask of each example's leading axes) as one take of the flattened
    positions (the standard allows a mask only as the sole index)."""
    each = tuple(data.shape[1 : 1 + mask.ndim])
    if tuple(mask.shape) != each:  # as NumPy refuses one example's x[mask]
        raise IndexError(
            f"a boolean mask of shape {tuple(mask.shape)} does not match the "
            f"indexed axes {each} of an array of shape {tuple(data.shape[1:])}"
        )
    idx = ns.nonzero(ns.reshape(mask, (-1,)))[0]
    rows = math.prod(data.shape[1 : 1 + mask.ndim])  # (no -1: a batch of 0 leaves it unsolved)
    flat = ns.reshape(data, (data.shape[0], rows, *data.shape[1 + mask.ndim :]))
    return ns.take(flat, idx, axis=1)


def _gather_simple(ns, T, data, entries):
    """``data[key]`` per example for a simple key (see :func:`_simple_key`): one
    ``take_along_axis`` per batched entry, basic indexing for the others (standard functions
    only: the standard has no integer arrays beside slices). Axes are taken last to first."""
    n = data.shape[0]
    for axis in reversed(range(len(entries))):
        p = entries[axis]
        if type(p) is slice:
            continue
        d = data.shape[1 + axis]
        if type(p) is int:
            data = data[(slice(None),) * (1 + axis) + (p,)]
            continue
        i = _index_value(ns, T, p, d)
        if not (type(p) is T and p.batched):
            i = ns.broadcast_to(i, (n,))
        shape = list(data.shape)
        shape[1 + axis] = 1
        i = ns.broadcast_to(ns.reshape(i, (n, *(1,) * (data.ndim - 1))), tuple(shape))
        data = ns.squeeze(ns.take_along_axis(data, i, axis=1 + axis), axis=1 + axis)
    return data


def GETITEM_shape(a, x, key):
    (shape, is_view), k, first = placed_selection(x.shape, key)
    if not is_view:
        if math.prod(shape[:first]) == 1 or math.prod(shape[first : first + k]) == 1:
            return new(shape, x.dtype)
        # NumPy makes the result with the index axes first and hands back a transposed view
        # of it when they stay in place after other axes (x[:, i]): no C order, so a reshape
        # of it copies (docs/calibration.md#advanced-indexing)
        made = new(shape[first : first + k] + shape[:first] + shape[first + k :], x.dtype)
        return view(made, shape, contiguous=False)
    # a basic index keeps the axes' order (slices, steps and new axes of size 1)
    return view(x, shape, contiguous=one_block(x.shape, key), ordered=True)


def _getitem_memory(out, x, key):
    return fancy_buffers(x, key)


GETITEM.defshape(GETITEM_shape, memory=_getitem_memory)


# -- __setitem__ ---------------------------------------------------------------------------------


SETITEM = method("__setitem__", "x", "key", "value")


def _has_array_index(ns, key):
    """Whether ``key`` holds an integer index array (which may repeat an index)."""
    parts = key if isinstance(key, tuple) else (key,)
    return any(
        hasattr(k, "dtype") and k.ndim > 0 and not ns.isdtype(k.dtype, "bool") for k in parts
    )


@SETITEM.defvjp(saves=("key",))
def SETITEM_vjp(ns, g, out, x, key, value):
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


SETITEM.defjvp(TRANSPOSED)


@SETITEM.defbatch
def SETITEM_batch(ns, T, x, key, value):
    parts, plain = _plain_key(T, key)
    if any(type(p) is T and p.batched for p in parts):
        _setitem_batched_key(ns, T, x, parts, value)
        return
    vb = type(value) is T and value.batched
    v = value.data if type(value) is T else value
    if not x.batched and not vb:
        x.data[plain if type(key) is tuple else plain[0]] = v
        return
    if not x.batched:  # each example gets its own copy to write into (and what x views,
        x.promote(v.shape[0])  # and its views: BatchedArray.promote)
    if len(plain) == 1 and _is_index_array(plain[0]) and _is_mask(plain[0]) and rank(v, vb) == 0:
        mask = plain[0]
        mask = ns.reshape(mask, (*mask.shape, *(1,) * (x.data.ndim - 1 - mask.ndim)))
        x.store(ns.where(mask, to_rank(ns, v, x.data.ndim - 1) if vb else v, x.data))
        return
    bkey = (slice(None), *plain)
    adv = _advanced(plain)
    if _split(adv):  # x.data[bkey] has the index axes first, then the batch axis
        k, nd = _index_rank(plain, adv), x.data[bkey].ndim - 1
        if vb:
            v = ns.moveaxis(to_rank(ns, v, nd), 0, k)
        elif hasattr(v, "shape"):
            v = ns.expand_dims(ns.reshape(v, (*(1,) * (nd - v.ndim), *v.shape)), axis=k)
    elif vb:
        v = to_rank(ns, v, x.data[bkey].ndim - 1)
    x.data[bkey] = v


def _arange(d: int, bk: Any, kw: dict) -> Any:
    """``bk.arange(d)``: positions along an axis of ``d``, made beside an array (its kwargs)."""
    return bk.arange(d, **kw)


def _setitem_batched_key(ns, T, x, parts, value):
    """``x[key] = value`` with a key that differs per example, as one ``where`` over a mask of
    the positions written (standard functions only; no scatter): a batched boolean mask as the
    sole key with a value of rank 0 per example, or batched 0-d integer indices beside Python
    ints, full slices and an ellipsis (each example writes its own row, column, element)."""
    vb = type(value) is T and value.batched
    v = value.data if type(value) is T else value
    n = next(p.data.shape[0] for p in parts if type(p) is T and p.batched)
    x.promote(n)  # (a copy per example, with what x views and its views)
    data = x.data
    nd = data.ndim - 1
    if len(parts) == 1 and _is_mask(parts[0].data):
        if rank(v, vb) != 0:
            raise UnbatchableError(
                "vmap: __setitem__ with a batched boolean mask cannot be batched with a value "
                "of rank > 0: each example would take a different number of values; write a "
                "scalar per example, or use xp.where(mask, values, x)"
            )
        mask = parts[0].data
        mask = ns.reshape(mask, (*mask.shape, *(1,) * (nd - (mask.ndim - 1))))
        x.store(ns.where(mask, to_rank(ns, v, nd) if vb else v, data))
        return
    entries = _simple_key(T, parts, nd)
    if entries is None:
        raise UnbatchableError(
            "vmap: __setitem__ with a batched index cannot be batched with this key: a "
            "batched key may hold 0-d integer indices, Python ints, full slices and an "
            "ellipsis, or be a boolean mask alone (the standard has no integer-array "
            "writes); build the result with xp.where(mask, value, x) instead"
        )
    mask, written = None, []
    for axis, p in enumerate(entries):
        if type(p) is slice and p == slice(None):
            continue
        d = data.shape[1 + axis]
        view = (*(1,) * (1 + axis), d, *(1,) * (nd - axis - 1))
        pos = ns.reshape(constant_like(data, functools.partial(_arange, d)), view)
        if type(p) is int:
            eq = pos == (p + d if p < 0 else p)
        else:
            i = _index_value(ns, T, p, d)
            if type(p) is T and p.batched:
                i = ns.reshape(i, (n, *(1,) * nd))
            eq = pos == i
        mask = eq if mask is None else ns.logical_and(mask, eq)
        written.append(axis)
    # the value broadcasts against x[key] of one example: the written axes become length 1
    if vb:
        v = to_rank(ns, v, nd - len(written))
        for axis in written:
            v = ns.expand_dims(v, axis=1 + axis)
    elif hasattr(v, "shape"):
        v = ns.reshape(v, (*(1,) * (nd - len(written) - v.ndim), *v.shape))
        for axis in written:
            v = ns.expand_dims(v, axis=axis)
    if hasattr(v, "dtype") and v.dtype != data.dtype:  # written values take x's dtype
        v = ns.astype(v, data.dtype)
    x.store(ns.where(mask, v, data))


def SETITEM_shape(a, x, key, value):
    # one value written through a mask (x[mask] = 0.0) needs no count of the selected elements
    shape, _ = selection(x.shape, key, exact=is_array(value) and value.size != 1)
    if is_array(value):
        broadcast(value.shape, shape)


def _setitem_memory(out, x, key, value):
    # the index arrays' buffers, the values' and the written elements' beside them
    return fancy_buffers(x, key, itemsize=x.dtype.itemsize, operands=2)


SETITEM.defshape(SETITEM_shape, memory=_setitem_memory)


# -- take ----------------------------------------------------------------------------------------


@primitive()
def take(bk: Any, x: Array, indices: Array, /, *, axis: int | None = None) -> Any:
    _take_axis(x.ndim, axis)
    return bk.take(x, indices, axis=axis)


def _take_axis(ndim: int, axis: Any) -> None:
    """The standard requires ``axis`` for an ``x`` of more than one dimension (NumPy's take
    flattens it instead, which its gradient and batching would not follow)."""
    if axis is None and ndim > 1:
        raise ValueError(
            f"take(): axis must be given for an array of {ndim} dimensions, got None; "
            "flatten first (take(reshape(x, (-1,)), indices)) to take from all the elements"
        )


@take.defvjp(saves=("indices",))
def take_vjp(ns, g, out, x, indices, /, *, axis=None):
    axis = 0 if axis is None else axis
    return _scatter(ns, x, g, ns.take(_positions(ns, x), indices, axis=axis)), None


take.defjvp(linear(take))


@take.defbatch
def take_batch(ns, dims, x, indices, /, *, axis=None):
    bx, bi = dims
    _take_axis(x.ndim - bx, axis)  # one example's x
    a = 0 if axis is None else axis
    if bx and not bi:
        return ns.take(x, indices, axis=shift(a, x.ndim - 1))
    n, k = indices.shape[0], indices.shape[1]
    if bi and not bx:
        a = norm_axis(a, x.ndim)
        y = ns.take(x, ns.reshape(indices, (-1,)), axis=a)
        return ns.moveaxis(ns.reshape(y, (*x.shape[:a], n, k, *x.shape[a + 1 :])), a, 0)
    nd = x.ndim - 1
    a = norm_axis(a, nd)
    idx = ns.reshape(indices, (n, *(1,) * a, k, *(1,) * (nd - 1 - a)))
    shape = (n, *x.shape[1 : a + 1], k, *x.shape[a + 2 :])
    return ns.take_along_axis(x, ns.broadcast_to(idx, shape), axis=a + 1)


def _take_shape(a, x, indices, /, *, axis=None):
    _take_axis(x.ndim, axis)
    indices = as_abstract(indices)
    if axis is None:
        return new(indices.shape, x.dtype)
    ax = axis % x.ndim
    return new(x.shape[:ax] + indices.shape + x.shape[ax + 1 :], x.dtype)


@measured_layouts
def _take_memory(out, x, indices, /, *, axis=None):
    """NumPy's take reads a C-ordered ``x`` and C-ordered intp indices: a copy of each that is
    not (``PyArray_TakeFrom``)."""
    copies = 0 if x.contiguous and not broadcast_view(x) else size_bytes(x)
    if is_array(indices) and not (
        indices.contiguous and indices.dtype == np.intp and not broadcast_view(indices)
    ):
        copies += indices.size * np.dtype(np.intp).itemsize
    return copies


take.defshape(_take_shape, memory=_take_memory)


# -- take_along_axis -----------------------------------------------------------------------------


@primitive()
def take_along_axis(bk: Any, x: Array, indices: Array, /, *, axis: int = -1) -> Any:
    return bk.take_along_axis(x, indices, axis=axis)


@take_along_axis.defvjp(saves=("indices",))
def take_along_axis_vjp(ns, g, out, x, indices, /, *, axis=-1):
    where = ns.take_along_axis(_positions(ns, x), indices, axis=axis)
    return _scatter(ns, x, g, where), None


take_along_axis.defjvp(linear(take_along_axis))


@take_along_axis.defbatch
def take_along_axis_batch(ns, dims, x, indices, /, *, axis=-1):
    n = x.shape[0] if dims[0] else indices.shape[0]
    x, indices = batched(ns, x, dims[0], n), batched(ns, indices, dims[1], n)
    return ns.take_along_axis(x, indices, axis=shift(axis, x.ndim - 1))


def _take_along_axis_shape(a, x, indices, /, *, axis=-1):
    indices = as_abstract(indices)
    return new(
        broadcast(x.shape[: axis % x.ndim] + (1,) + x.shape[axis % x.ndim + 1 :], indices.shape),
        x.dtype,
    )


def _take_along_axis_memory(out, x, indices, /, *, axis=-1):
    # NumPy indexes x with the indices and one arange per other axis (broadcast): the iterator
    # buffers 8192 indices; indices of another dtype than intp, or not in C order of the
    # output's shape, are first cast or copied whole; x not in C order is copied whole
    # (measured: a transposed x costs its size, a broadcast one nothing; the abstract arrays
    # tell neither apart, so both count).
    indices = as_abstract(indices)
    ax = axis % x.ndim
    total = sum(s for i, s in enumerate(out.shape) if i != ax) * 8
    # one iterator buffer per index array (the indices and an arange per other axis, which
    # broadcast against each other) and the result's: measured 0.67 of this at most over 1,500
    # random shapes of 1 to 6 axes, layouts and dtypes (one buffer alone: up to 3.6 times short)
    total += (x.ndim + 1) * min(out.size, BUFFER_ELEMENTS) * 8
    if indices.dtype != np.intp:
        total += out.size * 8 + min(out.size, BUFFER_ELEMENTS) * 8
    elif not indices.contiguous or indices.shape != out.shape:
        total += out.size * 8
    if not x.contiguous:
        total += size_bytes(x)
    return total


take_along_axis.defshape(_take_along_axis_shape, memory=_take_along_axis_memory)
