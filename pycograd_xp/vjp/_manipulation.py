"""VJP rules of the manipulation functions: each is a permutation, selection or copy of its
input, so its adjoint moves the cotangent back (summing where the forward copied)."""

from __future__ import annotations

from .._primitive import defvjp, nondifferentiable


def _reshape_back(ns, g, out, x, /, *args, **kwargs):
    return (ns.reshape(g, tuple(x.shape)),)


def _split(ns, g, sizes, axis):
    pieces, start = [], 0
    for n in sizes:
        idx = [slice(None)] * g.ndim
        idx[axis] = slice(start, start + n)
        pieces.append(g[tuple(idx)])
        start += n
    return pieces


def _concat(ns, g, out, arrays, /, *, axis=0):
    if axis is None:
        flat = _split(ns, g, [a.size for a in arrays], 0)
        return ([ns.reshape(p, tuple(a.shape)) for p, a in zip(flat, arrays, strict=True)],)
    axis = axis % g.ndim
    return (_split(ns, g, [a.shape[axis] for a in arrays], axis),)


def _permute_dims(ns, g, out, x, /, axes):
    inverse = [0] * len(axes)
    for i, a in enumerate(axes):
        inverse[a % len(axes)] = i
    return (ns.permute_dims(g, tuple(inverse)),)


def _roll(ns, g, out, x, /, shift, *, axis=None):
    back = tuple(-s for s in shift) if isinstance(shift, tuple) else -shift
    return (ns.roll(g, back, axis=axis),)


def _repeat(ns, g, out, x, repeats, /, *, axis=None):
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
        sums = ns.cumulative_sum(g, axis=axis, include_initial=True)
        ends = ns.cumulative_sum(repeats)
        ct = ns.take(sums, ends, axis=axis) - ns.take(sums, ends - repeats, axis=axis)
    return ns.reshape(ct, tuple(x.shape)), None


def _tile(ns, g, out, x, repetitions, /):
    d = max(x.ndim, len(repetitions))
    xs = (1,) * (d - x.ndim) + tuple(x.shape)
    rs = (1,) * (d - len(repetitions)) + tuple(repetitions)
    interleaved = [v for pair in zip(rs, xs, strict=True) for v in pair]
    ct = ns.sum(ns.reshape(g, tuple(interleaved)), axis=tuple(range(0, 2 * d, 2)))
    return ns.reshape(ct, tuple(x.shape)), None


defvjp("broadcast_to", lambda ns, g, out, x, /, shape: (g,))
defvjp("broadcast_arrays", lambda ns, g, out, *arrays: tuple(g))
defvjp("concat", _concat)
defvjp("expand_dims", _reshape_back)
defvjp("squeeze", _reshape_back)
defvjp("reshape", _reshape_back)
defvjp("flip", lambda ns, g, out, x, /, *, axis=None: (ns.flip(g, axis=axis),))
defvjp("moveaxis", lambda ns, g, out, x, source, destination, /: (
    ns.moveaxis(g, destination, source), None, None))  # fmt: skip
defvjp("permute_dims", _permute_dims)
defvjp("repeat", _repeat, saves=("repeats",))
defvjp("roll", _roll)
defvjp("stack", lambda ns, g, out, arrays, /, *, axis=0: (list(ns.unstack(g, axis=axis)),))
defvjp("tile", _tile)
defvjp("unstack", lambda ns, g, out, x, /, *, axis=0: (ns.stack(g, axis=axis),))
nondifferentiable("broadcast_shapes")
