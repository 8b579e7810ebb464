"""Shape rules of the manipulation functions. As in NumPy, ``broadcast_to``/``broadcast_arrays``,
``expand_dims``, ``squeeze``, ``flip``, ``moveaxis``, ``permute_dims``, ``unstack`` and a
``reshape`` of contiguous data are views; the rest make new arrays."""

from __future__ import annotations

import math

import numpy as np

from ..._abstract import AbstractArray
from ..._primitive import defshape
from ...ops._rules.shapes import (
    as_abstract,
    broadcast,
    broadcast_view,
    data_dependent,
    is_array,
    new,
    norm_axes,
    view,
)


def _broadcast_arrays(a, *arrays):
    shape = broadcast(*(x.shape for x in arrays))
    return tuple(view(x, shape, contiguous=x.shape == shape) for x in arrays)


def _broadcast_to(a, x, /, shape):
    shape = tuple(shape)
    broadcast(x.shape, shape)  # raises as the backend does when they do not broadcast
    return view(x, shape, contiguous=x.shape == shape)


def _concat(a, arrays, /, *, axis=0):
    dtype = np.result_type(*(x.dtype for x in arrays))
    if axis is None:
        return new((sum(x.size for x in arrays),), dtype)
    ax = axis % arrays[0].ndim
    shape = list(arrays[0].shape)
    shape[ax] = sum(x.shape[ax] for x in arrays)
    return _in_their_order(shape, dtype, arrays)


def _in_their_order(shape, dtype, arrays):
    """NumPy's concatenate lays its result out in the order of its inputs' strides: inputs
    not in C order (transposed, or computed from transposed data) give a result not in C
    order."""
    c_order = all(x.contiguous or broadcast_view(x) for x in arrays)
    return AbstractArray(shape, dtype, contiguous=c_order)


def _expand_dims(a, x, /, axis):
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    ndim = x.ndim + len(axes)
    axes = {ax % ndim for ax in axes}
    it = iter(x.shape)
    return view(x, tuple(1 if i in axes else next(it) for i in range(ndim)))


def _flip(a, x, /, *, axis=None):
    return view(x, x.shape, contiguous=False)


def _moveaxis(a, x, source, destination, /):
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    src = [s % x.ndim for s in src]
    dst = [d % x.ndim for d in dst]
    order = [i for i in range(x.ndim) if i not in src]
    for d, s in sorted(zip(dst, src, strict=True)):
        order.insert(d, s)
    return _permute_dims(a, x, tuple(order))


def _permute_dims(a, x, /, axes):
    axes = tuple(ax % x.ndim for ax in axes) if x.ndim else ()
    same = axes == tuple(range(x.ndim))
    return view(x, tuple(x.shape[ax] for ax in axes), contiguous=same)


def _repeat(a, x, repeats, /, *, axis=None):
    repeats = as_abstract(repeats)
    n = x.size if axis is None else x.shape[axis % x.ndim]
    if is_array(repeats):
        if repeats.value is None:
            data_dependent("repeat with an array of repeats computed from data")
            raise NotImplementedError(
                "repeat: an array of repeats computed inside the function gives a data-dependent "
                "shape, which cannot be projected; pass repeats as a Python int or a constant"
            )
        total = int(np.sum(np.broadcast_to(repeats.value, (n,))))
    else:
        total = n * repeats
    if axis is None:
        return new((total,), x.dtype)
    shape = list(x.shape)
    shape[axis % x.ndim] = total
    return new(shape, x.dtype)


def _reshape(a, x, /, shape, *, copy=None):
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        shape = tuple(x.size // known if s == -1 else s for s in shape)
    if math.prod(shape) != x.size:
        raise ValueError(f"cannot reshape an array of size {x.size} into shape {shape}")
    if copy or not x.contiguous:
        return new(shape, x.dtype)
    return view(x, shape)


def _roll(a, x, /, shift, *, axis=None):
    return new(x.shape, x.dtype)


def _squeeze(a, x, /, axis):
    axes = norm_axes(axis, x.ndim)
    return view(x, tuple(s for i, s in enumerate(x.shape) if i not in axes))


def _stack(a, arrays, /, *, axis=0):
    shape = list(arrays[0].shape)
    shape.insert(axis % (len(shape) + 1), len(arrays))
    return _in_their_order(shape, np.result_type(*(x.dtype for x in arrays)), arrays)


def _tile(a, x, repetitions, /):
    reps = tuple(repetitions)
    n = max(len(reps), x.ndim)
    shape = (1,) * (n - x.ndim) + x.shape
    reps = (1,) * (n - len(reps)) + reps
    return new(tuple(s * r for s, r in zip(shape, reps, strict=True)), x.dtype)


def _unstack(a, x, /, *, axis=0):
    ax = axis % x.ndim
    rest = x.shape[:ax] + x.shape[ax + 1:]
    return tuple(view(x, rest, contiguous=ax == 0) for _ in range(x.shape[ax]))


defshape("broadcast_arrays", _broadcast_arrays)
defshape("broadcast_shapes", lambda a, *shapes: broadcast(*shapes))
defshape("broadcast_to", _broadcast_to)
defshape("concat", _concat)
defshape("expand_dims", _expand_dims)
defshape("flip", _flip)
defshape("moveaxis", _moveaxis)
defshape("permute_dims", _permute_dims)
defshape("repeat", _repeat)
defshape("reshape", _reshape)
defshape("roll", _roll)
defshape("squeeze", _squeeze)
defshape("stack", _stack)
defshape("tile", _tile)
defshape("unstack", _unstack)
