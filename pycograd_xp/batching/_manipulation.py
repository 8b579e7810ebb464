"""Manipulation rows move the batch axis along: shapes get the batch size in front, axes shift
past it, list arguments broadcast their unbatched members to the batch."""

from __future__ import annotations

from .._primitive import UnbatchableError, defbatch
from ..ops._rules.batching import batch_size, batched, shift, to_rank


def _broadcast_to(ns, dims, x, /, shape):
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return ns.broadcast_to(to_rank(ns, x, len(shape)), (x.shape[0], *shape))

def _broadcast_arrays(ns, dims, *arrays):
    n = batch_size(dims, arrays)
    shape = ns.broadcast_shapes(*[tuple(a.shape[1:]) if d else tuple(a.shape)
                                  for a, d in zip(arrays, dims, strict=True)])  # fmt: skip
    return [ns.broadcast_to(to_rank(ns, a, len(shape)) if d else a, (n, *shape))
            for a, d in zip(arrays, dims, strict=True)]  # fmt: skip

def _members(ns, dims, arrays):
    n = batch_size(dims, (arrays,))
    return n, [batched(ns, a, d, n) for a, d in zip(arrays, dims[0], strict=True)]

def _concat(ns, dims, arrays, /, *, axis=0):
    n, xs = _members(ns, dims, arrays)
    if axis is None:
        return ns.concat([ns.reshape(x, (n, -1)) for x in xs], axis=1)
    return ns.concat(xs, axis=shift(axis, xs[0].ndim - 1))

def _stack(ns, dims, arrays, /, *, axis=0):
    n, xs = _members(ns, dims, arrays)
    return ns.stack(xs, axis=shift(axis, xs[0].ndim))

def _expand_dims(ns, dims, x, /, axis):
    k = len(axis) if isinstance(axis, tuple | list) else 1
    return ns.expand_dims(x, axis=shift(axis, x.ndim - 1 + k))

def _flip(ns, dims, x, /, *, axis=None):
    nd = x.ndim - 1
    return ns.flip(x, axis=tuple(range(1, nd + 1)) if axis is None else shift(axis, nd))

def _moveaxis(ns, dims, x, source, destination, /):
    nd = x.ndim - 1
    return ns.moveaxis(x, shift(source, nd), shift(destination, nd))

def _permute_dims(ns, dims, x, /, axes):
    return ns.permute_dims(x, (0, *shift(tuple(axes), x.ndim - 1)))

def _repeat(ns, dims, x, repeats, /, *, axis=None):
    if len(dims) > 1 and dims[1]:
        raise UnbatchableError("vmap: repeat() cannot be batched over its repeats: each "
                               "example's length would depend on its repeats' values; pass "
                               "repeats unbatched (in_axes=None) or as a Python int")  # fmt: skip
    if axis is None:
        return ns.repeat(ns.reshape(x, (x.shape[0], -1)), repeats, axis=1)
    return ns.repeat(x, repeats, axis=shift(axis, x.ndim - 1))

def _reshape(ns, dims, x, /, shape, *, copy=None):
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return ns.reshape(x, (x.shape[0], *shape), copy=copy)

def _roll(ns, dims, x, /, shift_, *, axis=None):
    if axis is None:
        flat = ns.roll(ns.reshape(x, (x.shape[0], -1)), shift_, axis=1)
        return ns.reshape(flat, tuple(x.shape))
    return ns.roll(x, shift_, axis=shift(axis, x.ndim - 1))

def _squeeze(ns, dims, x, /, axis):
    return ns.squeeze(x, axis=shift(axis, x.ndim - 1))

def _tile(ns, dims, x, repetitions, /):
    reps = tuple(repetitions)
    nd = x.ndim - 1
    if len(reps) < nd:
        reps = (1,) * (nd - len(reps)) + reps
    return ns.tile(to_rank(ns, x, len(reps)), (1, *reps))

def _unstack(ns, dims, x, /, *, axis=0):
    return ns.unstack(x, axis=shift(axis, x.ndim - 1))

def _matrix_transpose(ns, dims, x, /):
    return ns.matrix_transpose(x)

defbatch("broadcast_to", _broadcast_to)
defbatch("broadcast_arrays", _broadcast_arrays)
defbatch("concat", _concat)
defbatch("stack", _stack)
defbatch("expand_dims", _expand_dims)
defbatch("flip", _flip)
defbatch("moveaxis", _moveaxis)
defbatch("permute_dims", _permute_dims)
defbatch("repeat", _repeat)
defbatch("reshape", _reshape)
defbatch("roll", lambda ns, dims, x, /, shift, *, axis=None: _roll(ns, dims, x, shift, axis=axis))
defbatch("squeeze", _squeeze)
defbatch("tile", _tile)
defbatch("unstack", _unstack)
