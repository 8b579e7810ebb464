"""Indexing: the batch axis is one more leading slice of the key. Integer index arrays of the
example (batched or not) become one gather over the whole batch (the batch indexed by an
arange beside them); a batched boolean mask selects a different number of elements per example
and cannot batch. take/take_along_axis gather along a shifted axis; a batched index into an
unbatched array is one take over the flattened indices."""

from __future__ import annotations

from .._primitive import UnbatchableError, defbatch
from ..ops._rules.batching import batched, constant_like, norm_axis, rank, shift, to_rank


def _take(ns, dims, x, indices, /, *, axis=None):
    bx, bi = dims
    a = 0 if axis is None else axis
    if bx and not bi:
        return ns.take(x, indices, axis=shift(a, x.ndim - 1))
    n, k = indices.shape[0], indices.shape[1]
    if bi and not bx:
        a = norm_axis(a, x.ndim)
        y = ns.take(x, ns.reshape(indices, (-1,)), axis=a)
        return ns.moveaxis(ns.reshape(y, (*x.shape[:a], n, k, *x.shape[a + 1:])), a, 0)
    nd = x.ndim - 1
    a = norm_axis(a, nd)
    idx = ns.reshape(indices, (n, *(1,) * a, k, *(1,) * (nd - 1 - a)))
    shape = (n, *x.shape[1:a + 1], k, *x.shape[a + 2:])
    return ns.take_along_axis(x, ns.broadcast_to(idx, shape), axis=a + 1)


def _take_along_axis(ns, dims, x, indices, /, *, axis=-1):
    n = x.shape[0] if dims[0] else indices.shape[0]
    x, indices = batched(ns, x, dims[0], n), batched(ns, indices, dims[1], n)
    return ns.take_along_axis(x, indices, axis=shift(axis, x.ndim - 1))


def _is_index_array(p):
    return hasattr(p, "shape") and not isinstance(p, bool | int)


def _plain_key(T, key):
    parts = key if type(key) is tuple else (key,)
    return parts, tuple(p.data if type(p) is T else p for p in parts)


def _advanced(parts):
    """Positions of the key's advanced entries (index arrays, and ints beside them)."""
    arrays = [i for i, p in enumerate(parts) if _is_index_array(p)]
    if not arrays:
        return []
    return [i for i, p in enumerate(parts) if _is_index_array(p) or type(p) is int]


def _before(parts, first, nd):
    """How many result axes the key's entries before position ``first`` make."""
    consumed = sum(getattr(p, "ndim", 1) if _is_index_array(p) and _is_mask(p) else
                   (1 if p is not None and p is not Ellipsis else 0) for p in parts)  # fmt: skip
    n = 0
    for p in parts[:first]:
        if p is Ellipsis:
            n += nd - consumed
        elif p is None or type(p) is slice:
            n += 1
    return n


def _is_mask(p):
    return "bool" in str(p.dtype)


def _getitem(ns, T, x, key):
    parts, plain = _plain_key(T, key)
    batched_key = [i for i, p in enumerate(parts) if type(p) is T and p.batched]
    adv = _advanced(plain)
    whole = bool(adv) and len(adv) == len(plain) and not any(
        _is_mask(plain[i]) for i in adv if _is_index_array(plain[i]))  # only integer indices
    if not batched_key and not whole:
        if not x.batched:
            return T(x.data[plain if type(key) is tuple else plain[0]], False)
        if len(plain) == 1 and _is_index_array(plain[0]) and _is_mask(plain[0]):
            return T(_masked(ns, x.data, plain[0]), True)
        out = x.data[(slice(None), *plain)]
        if adv and adv != list(range(adv[0], adv[-1] + 1)):  # NumPy puts them first
            k = max(getattr(plain[i], "ndim", 0) for i in adv)
            out = ns.moveaxis(out, k, 0)
        return T(out, True)
    if not x.batched and not batched_key:
        return T(x.data[plain if type(key) is tuple else plain[0]], False)
    if batched_key:
        entries = _simple_key(T, parts, x.ndim)
        if entries is not None:
            return T(_gather_simple(ns, T, batched(ns, x.data, x.batched, parts[
                batched_key[0]].data.shape[0]), entries), True)
    if any(_is_mask(parts[i].data) for i in batched_key):
        raise UnbatchableError(
            "vmap: __getitem__ with a batched boolean mask cannot be batched: each example "
            "would select a different number of elements; use xp.where(mask, x, 0) instead"
        )
    n = x.data.shape[0] if x.batched else parts[batched_key[0]].data.shape[0]
    k = max(p.ndim - 1 if type(p) is T and p.batched else getattr(p.data if type(p) is T else p,
                                                                    "ndim", 0)
            for p in (parts[i] for i in adv))  # fmt: skip
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
    idx = ns.nonzero(ns.reshape(mask, (-1,)))[0]
    flat = ns.reshape(data, (data.shape[0], -1, *data.shape[1 + mask.ndim:]))
    return ns.take(flat, idx, axis=1)


def _setitem(ns, T, x, key, value):
    parts, plain = _plain_key(T, key)
    if any(type(p) is T and p.batched for p in parts):
        _setitem_batched_key(ns, T, x, parts, value)
        return
    vb = type(value) is T and value.batched
    v = value.data if type(value) is T else value
    if not x.batched and not vb:
        x.data[plain if type(key) is tuple else plain[0]] = v
        return
    if not x.batched:  # each example gets its own copy to write into
        x.data = ns.asarray(ns.broadcast_to(x.data, (v.shape[0], *x.data.shape)), copy=True)
        x.batched = True
    if (len(plain) == 1 and _is_index_array(plain[0]) and _is_mask(plain[0])
            and rank(v, vb) == 0):  # fmt: skip
        mask = plain[0]
        mask = ns.reshape(mask, (*mask.shape, *(1,) * (x.data.ndim - 1 - mask.ndim)))
        x.data = ns.where(mask, to_rank(ns, v, x.data.ndim - 1) if vb else v, x.data)
        return
    bkey = (slice(None), *plain)
    if vb:
        v = to_rank(ns, v, x.data[bkey].ndim - 1)
    x.data[bkey] = v


def _setitem_batched_key(ns, T, x, parts, value):
    """``x[key] = value`` with a key that differs per example, as one ``where`` over a mask of
    the positions written (standard functions only; no scatter): a batched boolean mask as the
    sole key with a value of rank 0 per example, or batched 0-d integer indices beside Python
    ints, full slices and an ellipsis (each example writes its own row, column, element)."""
    vb = type(value) is T and value.batched
    v = value.data if type(value) is T else value
    n = next(p.data.shape[0] for p in parts if type(p) is T and p.batched)
    data = batched(ns, x.data, x.batched, n)
    nd = data.ndim - 1
    if len(parts) == 1 and _is_mask(parts[0].data):
        if rank(v, vb) != 0:
            raise UnbatchableError(
                "vmap: __setitem__ with a batched boolean mask cannot be batched with a value "
                "of rank > 0: each example would take a different number of values; write a "
                "scalar per example, or use xp.where(mask, values, x)"
            )  # fmt: skip
        mask = parts[0].data
        mask = ns.reshape(mask, (*mask.shape, *(1,) * (nd - (mask.ndim - 1))))
        x.data, x.batched = ns.where(mask, to_rank(ns, v, nd) if vb else v, data), True
        return
    entries = _simple_key(T, parts, nd)
    if entries is None:
        raise UnbatchableError(
            "vmap: __setitem__ with a batched index cannot be batched with this key: a "
            "batched key may hold 0-d integer indices, Python ints, full slices and an "
            "ellipsis, or be a boolean mask alone (the standard has no integer-array "
            "writes); build the result with xp.where(mask, value, x) instead"
        )  # fmt: skip
    mask, written = None, []
    for axis, p in enumerate(entries):
        if type(p) is slice and p == slice(None):
            continue
        d = data.shape[1 + axis]
        view = (*(1,) * (1 + axis), d, *(1,) * (nd - axis - 1))
        pos = ns.reshape(constant_like(data, lambda bk, kw, d=d: bk.arange(d, **kw)), view)
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
    x.data, x.batched = ns.where(mask, v, data), True


def _simple_key(T, parts, nd):
    """The key as one entry per axis of an example (an ellipsis becomes full slices) if each
    entry is a Python int, a full slice or a 0-d integer array (batched or not); else None."""
    out = []
    for p in parts:
        if p is Ellipsis:
            out += [slice(None)] * (nd - (len(parts) - 1))
            continue
        d = p.data if type(p) is T else p
        ok = type(p) is int or (type(p) is slice and p == slice(None)) or (
            hasattr(d, "shape") and d.ndim == (1 if type(p) is T and p.batched else 0)
            and not _is_mask(d) and "int" in str(d.dtype))  # fmt: skip
        if not ok:
            return None
        out.append(p)
    return out + [slice(None)] * (nd - len(out))


def _index_value(ns, T, p, d):
    """A 0-d integer key entry as an array of non-negative positions (batched: one per
    example, shaped ``(n,)``)."""
    i = p.data if type(p) is T else p
    return ns.where(i < 0, i + d, i)


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


defbatch("take", _take)
defbatch("take_along_axis", _take_along_axis)
defbatch("__getitem__", _getitem)
defbatch("__setitem__", _setitem)
