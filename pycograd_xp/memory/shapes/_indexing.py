"""Shape rules of indexing. ``x[key]`` with ints, slices, ``...`` and ``None`` is a view; with
integer arrays or boolean masks (NumPy's advanced indexing) it is a new array, the broadcast
index shape taking the place of the indexed axes (or going first when they are not adjacent).
A boolean mask selects a data-dependent number of elements: the rule gives the upper bound,
all of them. ``x[key] = v`` writes in place: nothing new."""

from __future__ import annotations

import numpy as np

from ..._primitive import defshape
from ...ops._rules.shapes import (
    BUFFER_ELEMENTS,
    as_abstract,
    broadcast,
    data_dependent,
    is_array,
    new,
    size_bytes,
    view,
)


def _expand(key, ndim):
    parts = [as_abstract(p) for p in (key if isinstance(key, tuple) else (key,))]
    used = sum(p.ndim if is_array(p) and p.dtype.kind == "b" else 1 for p in parts
               if p is not None and p is not Ellipsis)  # fmt: skip
    ellipsis = [i for i, p in enumerate(parts) if p is Ellipsis]  # (arrays compare elementwise)
    if ellipsis:
        i = ellipsis[0]
        parts[i:i + 1] = [slice(None)] * (ndim - used)
    else:
        parts += [slice(None)] * (ndim - used)
    return parts


def selection(shape, key, exact=True):
    """(result shape, whether it is a view) of ``x[key]`` for ``x`` of ``shape``. ``exact``:
    the caller needs the exact shape (not for a write of one value through a mask)."""
    parts = _expand(key, len(shape))
    out, adv_shapes, adv_pos, axis = [], [], [], 0
    for p in parts:
        if p is None:
            out.append(1)
        elif isinstance(p, slice):
            out.append(len(range(*p.indices(shape[axis]))))
            axis += 1
        elif is_array(p) and p.dtype.kind == "b":
            if p.value is not None:  # a known mask: exactly its True elements
                n = int(np.count_nonzero(p.value))
            else:  # at most every element is selected
                if exact:
                    data_dependent("indexing with a boolean mask computed from data (x[mask])")
                n = 1
                for s in shape[axis:axis + p.ndim]:
                    n *= s
            adv_shapes.append((n,))
            adv_pos.append(len(out))
            axis += p.ndim
        elif is_array(p):
            adv_shapes.append(p.shape)
            adv_pos.append(len(out))
            axis += 1
        else:  # an int
            if not -shape[axis] <= p < shape[axis]:
                raise IndexError(f"index {p} is out of bounds for axis {axis} with size "
                                 f"{shape[axis]}")  # fmt: skip
            axis += 1
    if not adv_shapes:
        return tuple(out), True
    b = broadcast(*adv_shapes)
    # advanced indices side by side stay in place; separated ones go first (NumPy's rule)
    first = adv_pos[0] if len(set(adv_pos)) == 1 else 0
    return tuple(out[:first]) + b + tuple(out[first:]), False


def _getitem(a, x, key):
    shape, is_view = selection(x.shape, key)
    return view(x, shape, contiguous=False) if is_view else new(shape, x.dtype)


def _setitem(a, x, key, value):
    # one value written through a mask (x[mask] = 0.0) needs no count of the selected elements
    shape, _ = selection(x.shape, key, exact=is_array(value) and value.size != 1)
    if is_array(value):
        broadcast(value.shape, shape)


def _take(a, x, indices, /, *, axis=None):
    indices = as_abstract(indices)
    if axis is None:
        return new(indices.shape, x.dtype)
    ax = axis % x.ndim
    return new(x.shape[:ax] + indices.shape + x.shape[ax + 1:], x.dtype)


def _take_along_axis(a, x, indices, /, *, axis=-1):
    indices = as_abstract(indices)
    return new(broadcast(x.shape[:axis % x.ndim] + (1,) + x.shape[axis % x.ndim + 1:],
                         indices.shape), x.dtype)  # fmt: skip


def _take_along_axis_memory(out, x, indices, /, *, axis=-1):
    # NumPy indexes x with the indices and one arange per other axis (broadcast): the iterator
    # buffers 8192 indices; indices of another dtype than intp, or not in C order of the
    # output's shape, are first cast or copied whole; x not in C order is copied whole
    # (measured: a transposed x costs its size, a broadcast one nothing; the abstract arrays
    # tell neither apart, so both count).
    indices = as_abstract(indices)
    ax = axis % x.ndim
    total = sum(s for i, s in enumerate(out.shape) if i != ax) * 8
    total += min(out.size, BUFFER_ELEMENTS) * 8
    if indices.dtype != np.intp:
        total += out.size * 8 + min(out.size, BUFFER_ELEMENTS) * 8
    elif not indices.contiguous or indices.shape != out.shape:
        total += out.size * 8
    if not x.contiguous:
        total += size_bytes(x)
    return total


defshape("__getitem__", _getitem)
defshape("__setitem__", _setitem)
defshape("take", _take)
defshape("take_along_axis", _take_along_axis, memory=_take_along_axis_memory)
