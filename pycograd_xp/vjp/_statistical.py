"""VJP rules of the statistical functions (reductions and cumulative reductions)."""

from __future__ import annotations

from ..namespace._ops import defvjp
from ._helpers import count, expand_to, norm_axes


def _sum(ns, g, out, x, /, *, axis=None, dtype=None, keepdims=False):
    return (expand_to(ns, g, x, axis, keepdims),)


def _mean(ns, g, out, x, /, *, axis=None, keepdims=False):
    n = count(tuple(x.shape), norm_axes(axis, x.ndim))
    # scale the reduced cotangent, then broadcast it (a view on NumPy): the same values as
    # scaling the broadcast, without an op (and, on NumPy, an array) the size of x
    return (expand_to(ns, g / n, x, axis, keepdims),)


def _prod(ns, g, out, x, /, *, axis=None, dtype=None, keepdims=False):
    # The product of all the other elements, as exclusive cumulative products from the left and
    # from the right: exact with zeros, O(n), no division.
    axes = norm_axes(axis, x.ndim)
    if not axes:
        return (g,)
    rest = [a for a in range(x.ndim) if a not in axes]
    xt = ns.permute_dims(x, (*rest, *axes))
    lead = tuple(xt.shape[: len(rest)])
    flat = ns.reshape(xt, (*lead, -1))
    left = ns.cumulative_prod(flat, axis=-1, include_initial=True)[..., :-1]
    right = ns.flip(ns.cumulative_prod(ns.flip(flat, axis=-1), axis=-1,
                                       include_initial=True)[..., :-1], axis=-1)  # fmt: skip
    others = ns.reshape(left * right, tuple(xt.shape))
    inverse = [0] * x.ndim
    for i, a in enumerate((*rest, *axes)):
        inverse[a] = i
    others = ns.permute_dims(others, tuple(inverse))
    return (expand_to(ns, g, x, axis, keepdims) * ns.astype(others, g.dtype),)


def _extremum(ns, g, out, x, /, *, axis=None, keepdims=False):
    # Ties share the cotangent equally (as in JAX and PyTorch's amax/amin).
    hit = ns.astype(x == expand_to(ns, out, x, axis, keepdims), g.dtype)
    ties = ns.sum(hit, axis=axis, keepdims=True)
    return (expand_to(ns, g, x, axis, keepdims) * hit / ties,)


def _var(ns, g, out, x, /, *, axis=None, correction=0.0, keepdims=False):
    n = count(tuple(x.shape), norm_axes(axis, x.ndim))
    centered = x - ns.mean(x, axis=axis, keepdims=True)
    return (expand_to(ns, g, x, axis, keepdims) * centered * (2.0 / (n - correction)),)


def _std(ns, g, out, x, /, *, axis=None, correction=0.0, keepdims=False):
    # std = sqrt(var); where std is 0 (constant data) the gradient is taken as 0
    gv = ns.where(out == 0, 0.0, g / (2 * ns.where(out == 0, 1.0, out)))
    return _var(ns, gv, None, x, axis=axis, correction=correction, keepdims=keepdims)


def _along(ns, x, axis, start=None, stop=None):
    idx = [slice(None)] * x.ndim
    idx[axis] = slice(start, stop)
    return x[tuple(idx)]


def _reverse_cumsum(ns, g, axis):
    return ns.flip(ns.cumulative_sum(ns.flip(g, axis=axis), axis=axis), axis=axis)


def _cumulative_sum(ns, g, out, x, /, *, axis=None, dtype=None, include_initial=False):
    axis = 0 if axis is None else axis % x.ndim
    ct = _reverse_cumsum(ns, g, axis)
    return (_along(ns, ct, axis, 1) if include_initial else ct,)


def _cumulative_prod(ns, g, out, x, /, *, axis=None, dtype=None, include_initial=False):
    # ct_i = sum_{k>=i} g_k out_k / x_i is exact while no zero precedes i. At the first zero z,
    # ct_z = sum_{k>=z} g_k out'_k with out' the cumulative product with x_z replaced by 1;
    # after it every product holds x_z = 0 and ct is 0. All branch-free.
    axis = 0 if axis is None else axis % x.ndim
    if include_initial:
        g, out = _along(ns, g, axis, 1), _along(ns, out, axis, 1)
    zero = x == 0
    first_zero = ns.logical_and(zero, ns.cumulative_sum(ns.astype(zero, ns.int64), axis=axis) == 1)
    safe = ns.where(zero, 1.0, x)
    before = _reverse_cumsum(ns, g * out, axis) / safe
    at_zero = _reverse_cumsum(ns, g * ns.cumulative_prod(ns.where(first_zero, 1.0, x), axis=axis),
                              axis)  # fmt: skip
    return (ns.where(zero, ns.where(first_zero, at_zero, 0.0), before),)


defvjp("sum", _sum)
defvjp("mean", _mean)
defvjp("prod", _prod, saves=("x",))
defvjp("max", _extremum, saves=("x", "out"))
defvjp("min", _extremum, saves=("x", "out"))
defvjp("var", _var, saves=("x",))
defvjp("std", _std, saves=("x", "out"))
defvjp("cumulative_sum", _cumulative_sum)
defvjp("cumulative_prod", _cumulative_prod, saves=("x", "out"))
