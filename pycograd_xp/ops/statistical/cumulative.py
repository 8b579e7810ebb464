"""Cumulative reductions (cumulative_sum, cumulative_prod): their rows and rules.

The conventions the statistical rows share are in ``__init__.py``."""

from __future__ import annotations

from typing import Any

from ..._primitive import Array, primitive
from .._rules.batching import flat_reduction
from .._rules.jvp import TRANSPOSED, linear
from .._rules.vjp import raw
from ._kits import (
    _along,
    _reverse_cumsum,
    cumulative_shape,
    initial_slice,
)

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
    if x.ndim == 0 and axis is None:  # (outside the standard) one element, as NumPy scans
        x = bk.reshape(x, (1,))
    return bk.cumulative_prod(x, axis=axis, dtype=dtype, include_initial=include_initial)


@cumulative_prod.defvjp(saves=("x", "out"))
def cumulative_prod_vjp(ns, g, out, x, /, *, axis=None, dtype=None, include_initial=False):
    if x.ndim == 0:  # scanned as one element (the row's impl)
        (ct,) = cumulative_prod_vjp(
            ns, g, out, ns.reshape(x, (1,)), include_initial=include_initial
        )
        return (ns.reshape(ct, ()),)
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
cumulative_prod.defbatch(flat_reduction(cumulative_prod, flattens=False))
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
    if x.ndim == 0 and axis is None:  # (outside the standard) one element, as NumPy scans
        x = bk.reshape(x, (1,))
    return bk.cumulative_sum(x, axis=axis, dtype=dtype, include_initial=include_initial)


@cumulative_sum.defvjp
def cumulative_sum_vjp(ns, g, out, x, /, *, axis=None, dtype=None, include_initial=False):
    if x.ndim == 0:  # scanned as one element (the row's impl): x is the last element
        return (g[-1],)
    axis = 0 if axis is None else axis % x.ndim
    ct = _reverse_cumsum(ns, g, axis)
    return (_along(ns, ct, axis, 1) if include_initial else ct,)


cumulative_sum.defjvp(linear(cumulative_sum))
cumulative_sum.defbatch(flat_reduction(cumulative_sum, flattens=False))
cumulative_sum.defshape(cumulative_shape(cumulative_sum), memory=initial_slice)
