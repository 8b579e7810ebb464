"""Statistical functions: reductions and cumulative reductions.

Reductions batch by shifting their axes past the batch axis. Their shape rules give the reduced
shape and NumPy's dtype for it; a reduction that casts (``sum(x, dtype=float64)`` of float32)
buffers its input, ``std``/``var`` allocate the deviations from the mean (one input-sized
temporary, and a buffer to broadcast the mean), ``cumulative_*`` with ``include_initial``
concatenates a zero slice to the result (one output-sized temporary, in array-api-compat).
"""

from __future__ import annotations

import builtins
import math
from typing import Any

import array_api_compat.numpy as npx

from .._primitive import Array, primitive
from ._rules.batching import flat_reduction, reduction
from ._rules.jvp import TRANSPOSED, linear
from ._rules.shapes import (
    BUFFER_ELEMENTS,
    broadcast_view,
    elementwise_out,
    measured_layouts,
    new,
    probe_dtype,
    reduced,
    size_bytes,
)
from ._rules.vjp import count, expand_to, norm_axes, raw

# -- kits shared by the rows below ---------------------------------------------------------------


def reduced_shape(row: Any) -> Any:
    """The shape rule of a reduction: the reduced shape, in NumPy's dtype for it."""
    ref = getattr(npx, row.name)

    def rule(a, x, /, *, axis=None, keepdims=False, **kw):
        kw = {k: v for k, v in kw.items() if k in ("dtype", "correction")}
        return new(reduced(x.shape, axis, keepdims), probe_dtype(ref, x, axis=axis, **kw))

    return rule


def cumulative_shape(row: Any) -> Any:
    """The shape rule of a cumulative reduction (``include_initial`` adds one along ``axis``)."""
    ref = getattr(npx, row.name)

    def rule(a, x, /, *, axis=None, dtype=None, include_initial=False):
        shape = list(x.shape) if x.ndim else [1]
        ax = 0 if axis is None else axis % len(shape)
        shape[ax] += 1 if include_initial else 0
        dt = probe_dtype(ref, x, axis=axis, dtype=dtype)
        if include_initial or x.ndim == 0:
            return new(shape, dt)
        return elementwise_out(shape, dt, x)  # NumPy's cumsum keeps the input's memory order

    return rule


@measured_layouts
def cast_buffer(out, x, /, **kw):
    """A reduction buffers its input a block at a time when it casts it (into another dtype)
    and when it cannot read it in memory order (a reversed, row-strided or broadcast view
    reduced over every axis; measured in docs/calibration.md#reductions). The abstract arrays
    know C order or not: every input not in C order counts a buffer, never less than NumPy
    takes."""
    k = (out.dtype != x.dtype) + (not x.contiguous or broadcast_view(x))
    item = builtins.max(out.dtype.itemsize, x.dtype.itemsize)
    return k * builtins.min(x.size, BUFFER_ELEMENTS) * item


@measured_layouts
def deviations(out, x, /, **kw):
    """``std``/``var``: the deviations from the mean, a buffer to broadcast the mean, and one
    more to read an input not in C order (measured: docs/calibration.md#reductions); the mean
    (kept dims) and its quotient by the count, two arrays of the result's size (NumPy's
    ``_var``: over a short axis they are most of it; found by the sliding-window check)."""
    k = 1 + (not x.contiguous or broadcast_view(x))
    mean = 2 * out.size * x.dtype.itemsize
    return size_bytes(x) + mean + k * builtins.min(x.size, BUFFER_ELEMENTS) * x.dtype.itemsize


@measured_layouts
def initial_slice(out, x, /, *, include_initial=False, **kw):
    """``include_initial`` concatenates a zero slice to the result: one output-sized copy; and
    what the accumulation itself takes (:func:`accumulation_buffers`)."""
    return (size_bytes(out) if include_initial else 0) + accumulation_buffers(out, x)


def accumulation_buffers(out, x):
    """NumPy's ``ufunc.accumulate`` (``cumsum``, ``cumprod``) that casts its input (into the
    result's dtype: int8 to the default integer, float32 to a float64 ``dtype=``) casts all of
    it first, not a block at a time as a reduction does: a full copy of the input, counted in
    the larger of the two dtypes (measured: int8 -> int64, float32 <-> float64, on any axis and
    layout; the memory check by hypothesis found it at 1.46x, issue 33). Without a cast, an
    input not in C order is buffered a block at a time (:func:`cast_buffer`)."""
    if out.dtype != x.dtype:
        return x.size * builtins.max(out.dtype.itemsize, x.dtype.itemsize)
    return cast_buffer(out, x)


def _along(ns, x, axis, start=None, stop=None):
    idx = [slice(None)] * x.ndim
    idx[axis] = slice(start, stop)
    return x[tuple(idx)]


def _reverse_cumsum(ns, g, axis):
    return ns.flip(ns.cumulative_sum(ns.flip(g, axis=axis), axis=axis), axis=axis)


# -- cumulative_prod -----------------------------------------------------------------------------


@primitive("numeric", axis_check=True)
def cumulative_prod(
    bk: Any,
    x: Array,
    /,
    *,
    axis: int | None = None,
    dtype: Any = None,
    include_initial: bool = False,
) -> Any:
    return bk.cumulative_prod(x, axis=axis, dtype=dtype, include_initial=include_initial)


@cumulative_prod.defvjp(saves=("x", "out"))
def cumulative_prod_vjp(ns, g, out, x, /, *, axis=None, dtype=None, include_initial=False):
    # ct_i = sum_{k>=i} g_k out_k / x_i is exact while no zero precedes i. At the first zero z,
    # ct_z = sum_{k>=z} g_k out'_k with out' the cumulative product with x_z replaced by 1;
    # after it every product holds x_z = 0 and ct is 0. All branch-free. That ct is exact but
    # its own derivative is not (the 0 after a zero hides how ct moves with that zero), so a
    # higher order (ours: ns records) takes the form below, exact at every order.
    axis = 0 if axis is None else axis % x.ndim
    if include_initial:
        g, out = _along(ns, g, axis, 1), _along(ns, out, axis, 1)
    if not raw(ns):
        return (_cumulative_prod_ct(ns, g, x, axis),)
    zero = x == 0
    first_zero = ns.logical_and(zero, ns.cumulative_sum(ns.astype(zero, ns.int64), axis=axis) == 1)
    safe = ns.where(zero, 1.0, x)
    before = _reverse_cumsum(ns, g * out, axis) / safe
    at_zero = _reverse_cumsum(
        ns, g * ns.cumulative_prod(ns.where(first_zero, 1.0, x), axis=axis), axis
    )
    return (ns.where(zero, ns.where(first_zero, at_zero, 0.0), before),)


def _scan(ns, parts, axis, combine):
    """Inclusive scan along ``axis`` of ``parts`` (a tuple of arrays, one element each) under
    the associative ``combine(earlier, later)``, Hillis-Steele: log2(n) rounds of
    elementwise operations, slices and concatenations only (differentiable to any order)."""
    n, d = parts[0].shape[axis], 1
    while d < n:
        earlier = tuple(_along(ns, p, axis, None, n - d) for p in parts)
        later = tuple(_along(ns, p, axis, d) for p in parts)
        merged = combine(earlier, later)
        parts = tuple(
            ns.concat([_along(ns, p, axis, None, d), m], axis=axis)
            for p, m in zip(parts, merged, strict=True)
        )
        d *= 2
    return parts


def _cumulative_prod_ct(ns, g, x, axis):
    """The cotangent of ``cumulative_prod(x)`` without a division: ``ct_j = P_j S_j`` with
    ``P_j = prod_{i<j} x_i`` (an exclusive scan of products) and ``S_j = g_j + x_{j+1}
    S_{j+1}`` (a scan of affine maps from the end), so zeros need no case of their own."""
    n = x.shape[axis]
    if n == 0:
        return ns.zeros_like(x)
    (incl,) = _scan(ns, (x,), axis, lambda e, t: (e[0] * t[0],))
    first = ns.ones_like(_along(ns, x, axis, None, 1))
    exclusive = ns.concat([first, _along(ns, incl, axis, None, n - 1)], axis=axis)
    # from the end: map t is s -> b_t + a_t s with b = g and a_t = x_{t+1} (0 for the last)
    a = ns.flip(ns.concat([_along(ns, x, axis, 1), 0 * first], axis=axis), axis=axis)
    b = ns.flip(g, axis=axis)
    _, s = _scan(ns, (a, b), axis, lambda e, t: (t[0] * e[0], t[1] + t[0] * e[1]))
    return exclusive * ns.flip(s, axis=axis)


cumulative_prod.defjvp(TRANSPOSED)
cumulative_prod.defbatch(flat_reduction(cumulative_prod))
cumulative_prod.defshape(cumulative_shape(cumulative_prod), memory=initial_slice)


# -- cumulative_sum ------------------------------------------------------------------------------


@primitive("numeric", axis_check=True)
def cumulative_sum(
    bk: Any,
    x: Array,
    /,
    *,
    axis: int | None = None,
    dtype: Any = None,
    include_initial: bool = False,
) -> Any:
    return bk.cumulative_sum(x, axis=axis, dtype=dtype, include_initial=include_initial)


@cumulative_sum.defvjp
def cumulative_sum_vjp(ns, g, out, x, /, *, axis=None, dtype=None, include_initial=False):
    axis = 0 if axis is None else axis % x.ndim
    ct = _reverse_cumsum(ns, g, axis)
    return (_along(ns, ct, axis, 1) if include_initial else ct,)


cumulative_sum.defjvp(linear(cumulative_sum))
cumulative_sum.defbatch(flat_reduction(cumulative_sum))
cumulative_sum.defshape(cumulative_shape(cumulative_sum), memory=initial_slice)


# -- max, min ------------------------------------------------------------------------------------


@primitive("real numeric", axis_check=True)
def max(bk: Any, x: Array, /, *, axis: Any = None, keepdims: bool = False) -> Any:
    return bk.max(x, axis=axis, keepdims=keepdims)


@primitive("real numeric", axis_check=True)
def min(bk: Any, x: Array, /, *, axis: Any = None, keepdims: bool = False) -> Any:
    return bk.min(x, axis=axis, keepdims=keepdims)


def _extremum_vjp(ns, g, out, x, /, *, axis=None, keepdims=False):
    # Ties share the cotangent equally (as in JAX and PyTorch's amax/amin).
    hit = ns.astype(x == expand_to(ns, out, x, axis, keepdims), g.dtype)
    ties = ns.sum(hit, axis=axis, keepdims=True)
    return (expand_to(ns, g, x, axis, keepdims) * hit / ties,)


for _row in (max, min):
    _row.defvjp(_extremum_vjp, saves=("x", "out"))
    _row.defjvp(TRANSPOSED)
    _row.defbatch(reduction(_row))
    _row.defshape(reduced_shape(_row), memory=cast_buffer)


# -- mean ----------------------------------------------------------------------------------------


@primitive("floating-point", axis_check=True)
def mean(bk: Any, x: Array, /, *, axis: Any = None, keepdims: bool = False) -> Any:
    return bk.mean(x, axis=axis, keepdims=keepdims)


@mean.defvjp
def mean_vjp(ns, g, out, x, /, *, axis=None, keepdims=False):
    n = count(tuple(x.shape), norm_axes(axis, x.ndim))
    # scale the reduced cotangent, then broadcast it (a view on NumPy): the same values as
    # scaling the broadcast, without an op (and, on NumPy, an array) the size of x
    return (expand_to(ns, g / n, x, axis, keepdims),)


mean.defjvp(linear(mean))
mean.defbatch(reduction(mean))
mean.defshape(reduced_shape(mean), memory=cast_buffer)


# -- prod ----------------------------------------------------------------------------------------


@primitive("numeric", axis_check=True)
def prod(
    bk: Any, x: Array, /, *, axis: Any = None, dtype: Any = None, keepdims: bool = False
) -> Any:
    return bk.prod(x, axis=axis, dtype=dtype, keepdims=keepdims)


@prod.defvjp(saves=("x",))
def prod_vjp(ns, g, out, x, /, *, axis=None, dtype=None, keepdims=False):
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
    right = ns.flip(
        ns.cumulative_prod(ns.flip(flat, axis=-1), axis=-1, include_initial=True)[..., :-1], axis=-1
    )
    others = ns.reshape(left * right, tuple(xt.shape))
    inverse = [0] * x.ndim
    for i, a in enumerate((*rest, *axes)):
        inverse[a] = i
    others = ns.permute_dims(others, tuple(inverse))
    return (expand_to(ns, g, x, axis, keepdims) * ns.astype(others, g.dtype),)


prod.defjvp(TRANSPOSED)
prod.defbatch(reduction(prod))
prod.defshape(reduced_shape(prod), memory=cast_buffer)


# -- std, var ------------------------------------------------------------------------------------


@primitive("real floating-point", axis_check=True)
def std(
    bk: Any, x: Array, /, *, axis: Any = None, correction: float = 0.0, keepdims: bool = False
) -> Any:
    return bk.std(x, axis=axis, correction=correction, keepdims=keepdims)


@primitive("real floating-point", axis_check=True)
def var(
    bk: Any, x: Array, /, *, axis: Any = None, correction: float = 0.0, keepdims: bool = False
) -> Any:
    return bk.var(x, axis=axis, correction=correction, keepdims=keepdims)


@var.defvjp(saves=("x",))
def _var_vjp(ns, g, out, x, /, *, axis=None, correction=0.0, keepdims=False):
    n = count(tuple(x.shape), norm_axes(axis, x.ndim))
    centered = x - ns.mean(x, axis=axis, keepdims=True)
    # no degrees of freedom left (an empty axis, or correction as large as it): the value is
    # NumPy's 0/0, nan, and so is its gradient (an empty one where the axis is empty), not a
    # ZeroDivisionError
    dof = n - correction
    return (expand_to(ns, g, x, axis, keepdims) * centered * (2.0 / dof if dof else math.inf),)


@std.defvjp(saves=("x", "out"))
def std_vjp(ns, g, out, x, /, *, axis=None, correction=0.0, keepdims=False):
    # std = sqrt(var); where std is 0 (constant data) the gradient is taken as 0
    gv = ns.where(out == 0, 0.0, g / (2 * ns.where(out == 0, 1.0, out)))
    return _var_vjp(ns, gv, None, x, axis=axis, correction=correction, keepdims=keepdims)


for _row in (std, var):
    _row.defjvp(TRANSPOSED)
    _row.defbatch(reduction(_row))
    _row.defshape(reduced_shape(_row), memory=deviations)


# -- sum -----------------------------------------------------------------------------------------


# A boolean array too, as NumPy, JAX and PyTorch: it counts (the default integer dtype; the
# standard leaves it unspecified, and xarray's rolling mean counts valid entries so).
@primitive("all", axis_check=True)
def sum(
    bk: Any, x: Array, /, *, axis: Any = None, dtype: Any = None, keepdims: bool = False
) -> Any:
    return bk.sum(x, axis=axis, dtype=dtype, keepdims=keepdims)


@sum.defvjp
def sum_vjp(ns, g, out, x, /, *, axis=None, dtype=None, keepdims=False):
    return (expand_to(ns, g, x, axis, keepdims),)


sum.defjvp(linear(sum))
sum.defbatch(reduction(sum))
sum.defshape(reduced_shape(sum), memory=cast_buffer)
