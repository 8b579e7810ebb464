"""Reductions (sum, prod, mean, max, min): their rows and rules.

The conventions the statistical rows share are in ``__init__.py``."""

from __future__ import annotations

from typing import Any

from ... import _reductions as fast
from ..._primitive import Array, primitive
from .._rules.batching import reduction
from .._rules.jvp import TRANSPOSED, linear
from .._rules.vjp import count, expand_to, kept, norm_axes
from ._kits import (
    cast_buffer,
    mean_buffers,
    reduced_shape,
)

# -- max, min ------------------------------------------------------------------------------------


@primitive("real numeric", axis_check=True)
def max(bk: Any, x: Array, /, *, axis: Any = None, keepdims: bool = False) -> Any:
    return fast.max(bk, x, axis, keepdims)


@primitive("real numeric", axis_check=True)
def min(bk: Any, x: Array, /, *, axis: Any = None, keepdims: bool = False) -> Any:
    return fast.min(bk, x, axis, keepdims)


def _extremum_vjp(ns, g, out, x, /, *, axis=None, keepdims=False):
    # Ties share the cotangent equally (as in JAX and PyTorch's amax/amin). The reduced
    # cotangent is divided by the tie counts before it meets the mask (hit is 0 or 1: the same
    # values as (g * hit) / ties, infinities and signed zeros included), and it and the maximum
    # broadcast in the ops: one full-size op less and no broadcast_to (half the time of the
    # rule on a log-softmax's (256, 10) logits).
    hit = ns.astype(x == kept(ns, out, x.ndim, axis, keepdims), g.dtype)
    ties = fast.sum(ns, hit, axis, keepdims=True)
    return (hit * (kept(ns, g, x.ndim, axis, keepdims) / ties),)


for _row in (max, min):
    _row.defvjp(_extremum_vjp, saves=("x", "out"))
    _row.defjvp(TRANSPOSED)
    _row.defbatch(reduction(_row))
    _row.defshape(reduced_shape(_row), memory=cast_buffer)


# -- mean ----------------------------------------------------------------------------------------


@primitive("floating-point", axis_check=True)
def mean(bk: Any, x: Array, /, *, axis: Any = None, keepdims: bool = False) -> Any:
    return fast.mean(bk, x, axis, keepdims)


@mean.defvjp
def mean_vjp(ns, g, out, x, /, *, axis=None, keepdims=False):
    n = count(tuple(x.shape), norm_axes(axis, x.ndim))
    # scale the reduced cotangent, then broadcast it (a view on NumPy): the same values as
    # scaling the broadcast, without an op (and, on NumPy, an array) the size of x
    return (expand_to(ns, g / n, x, axis, keepdims),)


mean.defjvp(linear(mean))
mean.defbatch(reduction(mean))
mean.defshape(reduced_shape(mean), memory=mean_buffers)


# -- prod ----------------------------------------------------------------------------------------


@primitive("numeric", axis_check=True)
def prod(
    bk: Any, x: Array, /, *, axis: Any = None, dtype: Any = None, keepdims: bool = False
) -> Any:
    return fast.prod(bk, x, axis, dtype, keepdims)


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
    flat = ns.reshape(xt, (*lead, count(tuple(x.shape), axes)))  # (no -1: lead may be 0)
    left = ns.cumulative_prod(flat, axis=-1, include_initial=True)[..., :-1]
    right = ns.flip(
        ns.cumulative_prod(ns.flip(flat, axis=-1), axis=-1, include_initial=True)[..., :-1], axis=-1
    )
    others = ns.reshape(left * right, tuple(xt.shape))
    inverse = [0] * x.ndim
    for i, a in enumerate((*rest, *axes)):
        inverse[a] = i
    others = ns.permute_dims(others, tuple(inverse))
    return (kept(ns, g, x.ndim, axis, keepdims) * ns.astype(others, g.dtype),)


prod.defjvp(TRANSPOSED)
prod.defbatch(reduction(prod))
prod.defshape(reduced_shape(prod), memory=cast_buffer)


# -- sum -----------------------------------------------------------------------------------------


# A boolean array too, as NumPy, JAX and PyTorch: it counts (the default integer dtype; the
# standard leaves it unspecified, and xarray's rolling mean counts valid entries so).
@primitive("all", axis_check=True)
def sum(
    bk: Any, x: Array, /, *, axis: Any = None, dtype: Any = None, keepdims: bool = False
) -> Any:
    return fast.sum(bk, x, axis, dtype, keepdims)


@sum.defvjp
def sum_vjp(ns, g, out, x, /, *, axis=None, dtype=None, keepdims=False):
    return (expand_to(ns, g, x, axis, keepdims),)


sum.defjvp(linear(sum))
sum.defbatch(reduction(sum))
sum.defshape(reduced_shape(sum), memory=cast_buffer)
