"""Manipulation functions: they move, copy and reshape data without arithmetic.

Each is a permutation, selection or copy of its input, so its VJP moves the cotangent back
(summing where the forward copied), and each is linear (its JVP is the row applied to the
tangents). Batching moves the batch axis along: shapes get the batch size in front, axes shift
past it, list arguments broadcast their unbatched members to the batch. As in NumPy,
``broadcast_to``/``broadcast_arrays``, ``expand_dims``, ``squeeze``, ``flip``, ``moveaxis``,
``permute_dims``, ``unstack`` and a ``reshape`` of contiguous data are views; the rest make new
arrays.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._abstract import AbstractArray
from .._primitive import Array, Arrays, UnbatchableError, primitive
from ._rules.batching import SHAPE_ONLY, _rows, batch_size, batched, shift, to_rank
from ._rules.jvp import linear
from ._rules.shapes import (
    as_abstract,
    broadcast,
    broadcast_view,
    data_dependent,
    in_operands_order,
    is_array,
    measured_layouts,
    new,
    norm_axes,
    view,
)

# -- kits shared by the rows below ---------------------------------------------------------------

# Python objects of one view a row returns among many (docs/calibration.md#view-header-bytes).
VIEW_HEADER_BYTES = 256


def _c_order(x):
    """Whether NumPy can read ``x`` in C order without a copy (not transposed, reversed,
    strided or broadcast)."""
    return x.contiguous and not broadcast_view(x)


def _reshape_back(ns, g, out, x, /, *args, **kwargs):
    """The VJP of a row that only reshapes its input."""
    return (ns.reshape(g, tuple(x.shape)),)


def _split(ns, g, sizes, axis):
    pieces, start = [], 0
    for n in sizes:
        idx = [slice(None)] * g.ndim
        idx[axis] = slice(start, start + n)
        pieces.append(g[tuple(idx)])
        start += n
    return pieces


def _members(ns, dims, arrays):
    """Batching a list argument: the batch size, and every member batched to it."""
    n = batch_size(dims, (arrays,))
    return n, [batched(ns, a, d, n) for a, d in zip(arrays, dims[0], strict=True)]


def _in_their_order(shape, dtype, arrays):
    """NumPy's concatenate lays its result out in the order of its inputs' strides: inputs
    not in C order (transposed, or computed from transposed data) give a result not in C
    order; slices of arrays in C order (gaps, steps, flips) give one in C order."""
    c_order = all(x.ordered or broadcast_view(x) for x in arrays)
    return AbstractArray(shape, dtype, contiguous=c_order)


# -- broadcast_arrays ----------------------------------------------------------------------------


@primitive()
def broadcast_arrays(bk: Any, *arrays: Array) -> tuple[Any, ...]:
    return tuple(bk.broadcast_arrays(*arrays))


broadcast_arrays.defvjp(lambda ns, g, out, *arrays: tuple(g))
broadcast_arrays.defjvp(linear(broadcast_arrays))


@broadcast_arrays.defbatch
def broadcast_arrays_batch(ns, dims, *arrays):
    n = batch_size(dims, arrays)
    shape = ns.broadcast_shapes(
        *[tuple(a.shape[1:]) if d else tuple(a.shape) for a, d in zip(arrays, dims, strict=True)]
    )
    return [
        ns.broadcast_to(to_rank(ns, a, len(shape)) if d else a, (n, *shape))
        for a, d in zip(arrays, dims, strict=True)
    ]


@broadcast_arrays.defshape
def broadcast_arrays_shape(a, *arrays):
    shape = broadcast(*(x.shape for x in arrays))
    return tuple(view(x, shape, contiguous=x.shape == shape) for x in arrays)


# -- broadcast_shapes ----------------------------------------------------------------------------


@primitive()
def broadcast_shapes(bk: Any, *shapes: Any) -> tuple[int, ...]:
    return tuple(bk.broadcast_shapes(*shapes))


broadcast_shapes.nondifferentiable()
broadcast_shapes.cannot_batch(SHAPE_ONLY)
broadcast_shapes.defshape(lambda a, *shapes: broadcast(*shapes))


# -- broadcast_to --------------------------------------------------------------------------------


@primitive()
def broadcast_to(bk: Any, x: Array, /, shape: Any) -> Any:
    return bk.broadcast_to(x, shape)


broadcast_to.defvjp(lambda ns, g, out, x, /, shape: (g,))
broadcast_to.defjvp(linear(broadcast_to))


@broadcast_to.defbatch
def broadcast_to_batch(ns, dims, x, /, shape):
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return ns.broadcast_to(to_rank(ns, x, len(shape)), (x.shape[0], *shape))


@broadcast_to.defshape
def broadcast_to_shape(a, x, /, shape):
    shape = tuple(shape)
    broadcast(x.shape, shape)  # raises as the backend does when they do not broadcast
    return view(x, shape, contiguous=x.shape == shape)


# -- concat --------------------------------------------------------------------------------------


@primitive()
def concat(bk: Any, arrays: Arrays, /, *, axis: int | None = 0) -> Any:
    return bk.concat(arrays, axis=axis)


@concat.defvjp
def concat_vjp(ns, g, out, arrays, /, *, axis=0):
    if axis is None:
        flat = _split(ns, g, [a.size for a in arrays], 0)
        return ([ns.reshape(p, tuple(a.shape)) for p, a in zip(flat, arrays, strict=True)],)
    axis = axis % g.ndim
    return (_split(ns, g, [a.shape[axis] for a in arrays], axis),)


concat.defjvp(linear(concat))


@concat.defbatch
def concat_batch(ns, dims, arrays, /, *, axis=0):
    n, xs = _members(ns, dims, arrays)
    if axis is None:
        return ns.concat([ns.reshape(x, (n, math.prod(x.shape[1:]))) for x in xs], axis=1)
    return ns.concat(xs, axis=shift(axis, xs[0].ndim - 1))


@measured_layouts
def _concat_memory(out, arrays, /, *, axis=0):
    """NumPy's ``concatenate`` copies every input straight into the result with strided,
    casting loops: no iteration buffer on any layout or dtype mix (measured:
    docs/calibration.md#joined-copies)."""
    return 0


def concat_shape(a, arrays, /, *, axis=0):
    dtype = np.result_type(*(x.dtype for x in arrays))
    if axis is None:
        return new((sum(x.size for x in arrays),), dtype)
    ax = axis % arrays[0].ndim
    shape = list(arrays[0].shape)
    shape[ax] = sum(x.shape[ax] for x in arrays)
    return _in_their_order(shape, dtype, arrays)


concat.defshape(concat_shape, memory=_concat_memory)


# -- expand_dims ---------------------------------------------------------------------------------


@primitive()
def expand_dims(bk: Any, x: Array, /, axis: Any) -> Any:
    return bk.expand_dims(x, axis=axis)


expand_dims.defvjp(_reshape_back)
expand_dims.defjvp(linear(expand_dims))


@expand_dims.defbatch
def expand_dims_batch(ns, dims, x, /, axis):
    k = len(axis) if isinstance(axis, tuple | list) else 1
    return ns.expand_dims(x, axis=shift(axis, x.ndim - 1 + k))


@expand_dims.defshape
def expand_dims_shape(a, x, /, axis):
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    ndim = x.ndim + len(axes)
    if any(not -ndim <= ax < ndim for ax in axes):
        raise ValueError(f"axis {axis} is out of range for a result of {ndim} dimensions")
    new_axes = {ax % ndim for ax in axes}
    if len(new_axes) != len(axes):
        raise ValueError(f"repeated axis in {axis}")
    it = iter(x.shape)
    return view(x, tuple(1 if i in new_axes else next(it) for i in range(ndim)))


# -- flip ----------------------------------------------------------------------------------------


@primitive(axis_check=True)
def flip(bk: Any, x: Array, /, *, axis: Any = None) -> Any:
    return bk.flip(x, axis=axis)


flip.defvjp(lambda ns, g, out, x, /, *, axis=None: (ns.flip(g, axis=axis),))
flip.defjvp(linear(flip))


@flip.defbatch
def flip_batch(ns, dims, x, /, *, axis=None):
    nd = x.ndim - 1
    return ns.flip(x, axis=tuple(range(1, nd + 1)) if axis is None else shift(axis, nd))


@flip.defshape
def flip_shape(a, x, /, *, axis=None):
    return view(x, x.shape, contiguous=False, ordered=True)  # NumPy orders strides by size


# -- moveaxis ------------------------------------------------------------------------------------


@primitive()
def moveaxis(bk: Any, x: Array, source: Any, destination: Any, /) -> Any:
    return bk.moveaxis(x, source, destination)


moveaxis.defvjp(
    lambda ns, g, out, x, source, destination, /: (ns.moveaxis(g, destination, source), None, None)
)
moveaxis.defjvp(linear(moveaxis))


@moveaxis.defbatch
def moveaxis_batch(ns, dims, x, source, destination, /):
    nd = x.ndim - 1
    return ns.moveaxis(x, shift(source, nd), shift(destination, nd))


@moveaxis.defshape
def moveaxis_shape(a, x, source, destination, /):
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    src = [s % x.ndim for s in src]
    dst = [d % x.ndim for d in dst]
    order = [i for i in range(x.ndim) if i not in src]
    for d, s in sorted(zip(dst, src, strict=True)):
        order.insert(d, s)
    return _permute_dims_shape(a, x, tuple(order))


# -- permute_dims --------------------------------------------------------------------------------


@primitive()
def permute_dims(bk: Any, x: Array, /, axes: Any) -> Any:
    return bk.permute_dims(x, axes)


@permute_dims.defvjp
def permute_dims_vjp(ns, g, out, x, /, axes):
    inverse = [0] * len(axes)
    for i, a in enumerate(axes):
        inverse[a % len(axes)] = i
    return (ns.permute_dims(g, tuple(inverse)),)


permute_dims.defjvp(linear(permute_dims))


@permute_dims.defbatch
def permute_dims_batch(ns, dims, x, /, axes):
    return ns.permute_dims(x, (0, *shift(tuple(axes), x.ndim - 1)))


@permute_dims.defshape
def _permute_dims_shape(a, x, /, axes):
    axes = tuple(ax % x.ndim for ax in axes) if x.ndim else ()
    same = axes == tuple(range(x.ndim))
    swap = x.ndim >= 2 and axes == (*range(x.ndim - 2), x.ndim - 1, x.ndim - 2)
    return view(x, tuple(x.shape[ax] for ax in axes), contiguous=same, transposed=swap)


# -- repeat --------------------------------------------------------------------------------------


@primitive()
def repeat(bk: Any, x: Array, repeats: Array, /, *, axis: int | None = None) -> Any:
    return bk.repeat(x, repeats, axis=axis)


@repeat.defvjp(saves=("repeats",))
def repeat_vjp(ns, g, out, x, repeats, /, *, axis=None):
    # Sum each run of copies: differences of the cumulative sum at the run boundaries.
    if axis is None:
        x_shape, axis = (x.size,), 0
    else:
        x_shape, axis = tuple(x.shape), axis % x.ndim
    n = x_shape[axis]
    if isinstance(repeats, int):
        shape = list(g.shape)
        shape[axis : axis + 1] = [n, repeats]
        ct = ns.sum(ns.reshape(g, tuple(shape)), axis=axis + 1)
    else:
        if tuple(repeats.shape) != (n,):  # one count for every element (broadcast)
            repeats = ns.broadcast_to(ns.reshape(repeats, (1,)), (n,))
        sums = ns.cumulative_sum(g, axis=axis, include_initial=True)
        ends = ns.cumulative_sum(repeats)
        ct = ns.take(sums, ends, axis=axis) - ns.take(sums, ends - repeats, axis=axis)
    return ns.reshape(ct, tuple(x.shape)), None


repeat.defjvp(linear(repeat))


@repeat.defbatch
def repeat_batch(ns, dims, x, repeats, /, *, axis=None):
    if len(dims) > 1 and dims[1]:
        raise UnbatchableError(
            "vmap: repeat() cannot be batched over its repeats: each "
            "example's length would depend on its repeats' values; pass "
            "repeats unbatched (in_axes=None) or as a Python int"
        )
    if axis is None:
        return ns.repeat(ns.reshape(x, _rows(x)), repeats, axis=1)
    return ns.repeat(x, repeats, axis=shift(axis, x.ndim - 1))


@measured_layouts
def _repeat_memory(out, x, repeats, /, *, axis=None):
    """NumPy repeats a C-ordered copy of ``x`` (``PyArray_Repeat``), and its repeats as an
    intp array of one per element along the axis."""
    copy = 0 if _c_order(x) else x.size * x.dtype.itemsize
    n = x.size if axis is None else x.shape[axis % x.ndim] if x.ndim else 1
    return copy + n * 8


def _repeat_shape(a, x, repeats, /, *, axis=None):
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


repeat.defshape(_repeat_shape, memory=_repeat_memory)


# -- reshape -------------------------------------------------------------------------------------


@primitive()
def reshape(bk: Any, x: Array, /, shape: Any, *, copy: bool | None = None) -> Any:
    return bk.reshape(x, shape, copy=copy)


reshape.defvjp(_reshape_back)
reshape.defjvp(linear(reshape))


@reshape.defbatch
def reshape_batch(ns, dims, x, /, shape, *, copy=None):
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    known = math.prod(s for s in shape if s != -1)
    if -1 in shape and known:  # solved within an example: a batch of 0 leaves -1 unsolvable
        shape = tuple(math.prod(x.shape[1:]) // known if s == -1 else s for s in shape)
    return ns.reshape(x, (x.shape[0], *shape), copy=copy)


@reshape.defshape
def reshape_shape(a, x, /, shape, *, copy=None):
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        shape = tuple(x.size // known if s == -1 else s for s in shape)
    if math.prod(shape) != x.size:
        raise ValueError(f"cannot reshape an array of size {x.size} into shape {shape}")
    if copy:
        return new(shape, x.dtype)
    if x.contiguous:
        return view(x, shape)
    if _only_unit_axes(x.shape, shape):  # NumPy's view whatever the strides (they are kept)
        return view(x, shape, contiguous=False, ordered=True)
    # a copy, even with copy=False: "not contiguous" means not known to be (the flags are
    # conservative), and the real array often is (a compiled replay's reshape then copies
    # only where the real layout needs it: _compile._codegen._replayed_kwargs)
    return new(shape, x.dtype)


def _only_unit_axes(before: tuple[int, ...], after: tuple[int, ...]) -> bool:
    """Whether a reshape only adds or removes axes of length 1: NumPy's reshape of any layout
    is then a view (a compiled replay that reshapes it again without a copy relies on it)."""
    return [s for s in before if s != 1] == [s for s in after if s != 1]


# -- roll ----------------------------------------------------------------------------------------


@primitive(axis_check=True)
def roll(bk: Any, x: Array, /, shift: Any, *, axis: Any = None) -> Any:
    return bk.roll(x, shift, axis=axis)


@roll.defvjp
def roll_vjp(ns, g, out, x, /, shift, *, axis=None):
    back = tuple(-s for s in shift) if isinstance(shift, tuple) else -shift
    return (ns.roll(g, back, axis=axis),)


roll.defjvp(linear(roll))


def _roll_batch(ns, dims, x, /, shift_, *, axis=None):
    # ``shift_``, not ``shift``: the body uses the batching kit's ``shift``
    if axis is None:
        flat = ns.roll(ns.reshape(x, _rows(x)), shift_, axis=1)
        return ns.reshape(flat, tuple(x.shape))
    return ns.roll(x, shift_, axis=shift(axis, x.ndim - 1))


roll.defbatch(
    lambda ns, dims, x, /, shift, *, axis=None: _roll_batch(ns, dims, x, shift, axis=axis)
)


def _roll_shape(a, x, /, shift, *, axis=None):
    if axis is None:  # NumPy rolls x.ravel(), in C order
        return new(x.shape, x.dtype)
    return in_operands_order(x.shape, x.dtype, x)  # into empty_like(x): x's layout


@measured_layouts
def _roll_memory(out, x, /, shift, *, axis=None):
    """Without an axis NumPy rolls ``x.ravel()``: a copy of an input not in C order."""
    return x.size * x.dtype.itemsize if axis is None and not _c_order(x) else 0


roll.defshape(_roll_shape, memory=_roll_memory)


# -- squeeze -------------------------------------------------------------------------------------


@primitive()
def squeeze(bk: Any, x: Array, /, axis: Any) -> Any:
    return bk.squeeze(x, axis=axis)


squeeze.defvjp(_reshape_back)
squeeze.defjvp(linear(squeeze))


@squeeze.defbatch
def squeeze_batch(ns, dims, x, /, axis):
    return ns.squeeze(x, axis=shift(axis, x.ndim - 1))


@squeeze.defshape
def squeeze_shape(a, x, /, axis):
    axes = norm_axes(axis, x.ndim)
    return view(x, tuple(s for i, s in enumerate(x.shape) if i not in axes))


# -- stack ---------------------------------------------------------------------------------------


@primitive()
def stack(bk: Any, arrays: Arrays, /, *, axis: int = 0) -> Any:
    return bk.stack(arrays, axis=axis)


stack.defvjp(lambda ns, g, out, arrays, /, *, axis=0: (list(ns.unstack(g, axis=axis)),))
stack.defjvp(linear(stack))


@stack.defbatch
def stack_batch(ns, dims, arrays, /, *, axis=0):
    n, xs = _members(ns, dims, arrays)
    return ns.stack(xs, axis=shift(axis, xs[0].ndim))


def stack_shape(a, arrays, /, *, axis=0):
    shape = list(arrays[0].shape)
    shape.insert(axis % (len(shape) + 1), len(arrays))
    return _in_their_order(shape, np.result_type(*(x.dtype for x in arrays)), arrays)


@measured_layouts
def _stack_memory(out, arrays, /, *, axis=0):
    """``stack`` concatenates a view of each input with the new axis (:func:`_concat_memory`):
    the views' headers (docs/calibration.md#joined-copies)."""
    return VIEW_HEADER_BYTES * len(arrays)


stack.defshape(stack_shape, memory=_stack_memory)


# -- tile ----------------------------------------------------------------------------------------


@primitive()
def tile(bk: Any, x: Array, repetitions: Array, /) -> Any:
    return bk.tile(x, repetitions)


@tile.defvjp
def tile_vjp(ns, g, out, x, repetitions, /):
    d = max(x.ndim, len(repetitions))
    xs = (1,) * (d - x.ndim) + tuple(x.shape)
    rs = (1,) * (d - len(repetitions)) + tuple(repetitions)
    interleaved = [v for pair in zip(rs, xs, strict=True) for v in pair]
    ct = ns.sum(ns.reshape(g, tuple(interleaved)), axis=tuple(range(0, 2 * d, 2)))
    return ns.reshape(ct, tuple(x.shape)), None


tile.defjvp(linear(tile))


@tile.defbatch
def tile_batch(ns, dims, x, repetitions, /):
    reps = tuple(repetitions)
    nd = x.ndim - 1
    if len(reps) < nd:
        reps = (1,) * (nd - len(reps)) + reps
    return ns.tile(to_rank(ns, x, len(reps)), (1, *reps))


@measured_layouts
def _tile_stages(out, x, repetitions, /):
    """NumPy tiles one axis at a time (``c = c.reshape(-1, n).repeat(r, 0)`` for each repetition
    that is not 1): each stage holds its input and its output, and only the last output is the
    result. The first stage's input is ``x`` itself, or its copy when the reshape cannot be a
    view (``x`` not in C order, or broadcast). The tracker counts the output as live during the
    call: an earlier stage's pair counts beyond it."""
    item = x.dtype.itemsize
    size = x.size
    held = size * item if (not x.contiguous or broadcast_view(x)) else 0
    reps = [r for r in tuple(repetitions) if r != 1]
    if not reps:  # a copy, no stage
        return 0
    most = 0
    for i, r in enumerate(reps):
        size *= r
        last = i == len(reps) - 1
        most = max(most, held if last else held + size * item - out.nbytes)
        held = size * item
    return most


def _tile_shape(a, x, repetitions, /):
    reps = tuple(repetitions)
    n = max(len(reps), x.ndim)
    shape = (1,) * (n - x.ndim) + x.shape
    reps = (1,) * (n - len(reps)) + reps
    return new(tuple(s * r for s, r in zip(shape, reps, strict=True)), x.dtype)


tile.defshape(_tile_shape, memory=_tile_stages)


# -- unstack -------------------------------------------------------------------------------------


@primitive(axis_check=True)
def unstack(bk: Any, x: Array, /, *, axis: int = 0) -> tuple[Any, ...]:
    return tuple(bk.unstack(x, axis=axis))


unstack.defvjp(lambda ns, g, out, x, /, *, axis=0: (ns.stack(g, axis=axis),))
unstack.defjvp(linear(unstack))


@unstack.defbatch
def unstack_batch(ns, dims, x, /, *, axis=0):
    return ns.unstack(x, axis=shift(axis, x.ndim - 1))


def _unstack_shape(a, x, /, *, axis=0):
    ax = axis % x.ndim
    rest = x.shape[:ax] + x.shape[ax + 1 :]
    return tuple(view(x, rest, contiguous=ax == 0) for _ in range(x.shape[ax]))


@measured_layouts
def _headers(out, *args, **kwargs):
    """A row that returns many views: each view's NumPy header and wrapper (measured: about
    190 bytes a view beyond the per-call allowance)."""
    return VIEW_HEADER_BYTES * len(out)


unstack.defshape(_unstack_shape, memory=_headers)
