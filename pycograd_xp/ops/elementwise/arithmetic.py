"""Arithmetic: add to pow, abs, sign, maximum and minimum, clip, hypot, copysign, nextafter.

Their rows and rules; the conventions all elementwise rows share are in ``__init__.py``."""

from __future__ import annotations

import builtins
import cmath
import math
from typing import Any

from ..._primitive import Array, Shared, binary, primitive, unary
from .._rules.batching import align
from .._rules.dtypes import isdtype
from .._rules.jvp import TRANSPOSED, plus
from .._rules.shapes import (
    BUFFER_ELEMENTS,
    broadcast,
    elementwise_out,
    is_array,
    measured_layouts,
)
from .._rules.vjp import is_complex, is_scalar, sgn, to_complex
from ._kits import (
    _lin,
    broadcasting,
    buffers,
    on_tangent,
    smooth_binary,
    smooth_unary,
)
from ._special_values import remainder_row

# -- abs -----------------------------------------------------------------------------------------

abs = unary("abs", "numeric")
abs.defvjp(lambda ns, g, out, x: (g * sgn(ns, x),), saves=("x",))


@on_tangent
def _abs_jvp(ns, t, out, x):
    if not is_complex(ns, x):
        return t * ns.sign(x)
    return ns.real(ns.conj(x) * t) / ns.where(out == 0, 1.0, out)  # Re(conj(x) t) / |x|


abs.defjvp(_abs_jvp)
broadcasting(abs)


# -- add -----------------------------------------------------------------------------------------

add = binary("add", "numeric")
add.defvjp(lambda ns, g, out, x1, x2: (g, g))
add.defjvp(lambda ns, t, out, x1, x2: plus(t[0], t[1]))
broadcasting(add)


# -- clip ----------------------------------------------------------------------------------------


@primitive("real numeric")
def clip(bk: Any, x: Array, /, min: Array = None, max: Array = None) -> Any:
    return bk.clip(x, min=min, max=max)


# clip: at a bound the cotangent goes to x.
@clip.defvjp(saves=("x", "min", "max"))
def clip_vjp(ns, g, out, x, /, min=None, max=None):
    lo = None if min is None else x >= min
    hi = None if max is None else x <= max
    if lo is None and hi is None:
        return g, None, None
    inside = lo if hi is None else hi if lo is None else ns.logical_and(lo, hi)
    zero = ns.zeros_like(g)
    g_min = None if min is None or is_scalar(min) else ns.where(x < min, g, zero)
    g_max = None if max is None or is_scalar(max) else ns.where(x > max, g, zero)
    return ns.where(inside, g, zero), g_min, g_max


clip.defjvp(TRANSPOSED)  # bounds


@clip.defbatch
def clip_batch(ns, dims, x, min=None, max=None):
    x, lo, hi = align(ns, dims + (False,) * (3 - len(dims)), x, min, max)
    return ns.clip(x, lo, hi)


def _clip_shape(a, x, /, min=None, max=None):
    shape = broadcast(*(v.shape for v in (x, min, max) if is_array(v)))
    return elementwise_out(shape, x.dtype, x, min, max)


@measured_layouts
def _clip_memory(out, x, /, min=None, max=None):
    """NumPy's clip through array-api-compat: the iterator's buffers, and a cast of a bound in
    another dtype than ``x``'s (measured: 23 kB over on float32 data with a float64 bound)."""
    bounds = [b for b in (min, max) if is_array(b) and b.dtype != x.dtype]
    cast = len(bounds) * builtins.min(out.size, BUFFER_ELEMENTS) * 8
    return buffers(out, x, min, max) + cast


clip.defshape(_clip_shape, memory=_clip_memory)


# -- copysign ------------------------------------------------------------------------------------

copysign = binary("copysign", "real floating-point")
# copysign(x1, x2) = |x1| sign(x2): slope +-1 in x1, piecewise constant in x2.
copysign.defvjp(
    lambda ns, g, out, x1, x2: (
        None if is_scalar(x1) else ns.where(ns.signbit(x1) == ns.signbit(out), g, -g),
        None,
    ),
    saves=("x1", "out"),
)
copysign.defjvp(
    lambda ns, t, out, x1, x2: (
        None if t[0] is None else ns.where(ns.signbit(x1) == ns.signbit(out), t[0], -t[0])
    )
)
broadcasting(copysign)


# -- divide --------------------------------------------------------------------------------------

divide = binary("divide", "numeric")
# divide (as multiply) skips the cotangents nobody needs.
divide.defvjp(
    lambda ns, g, out, x1, x2, *, needs=(0, 1): (
        g / x2 if 0 in needs else None,
        -g * out / x2 if 1 in needs else None,
    ),
    saves=("x2", "out"),
    takes_needs=True,
)
divide.defjvp(
    lambda ns, t, out, x1, x2: plus(
        None if t[0] is None else t[0] / x2, None if t[1] is None else -t[1] * out / x2
    )
)
broadcasting(divide)


# -- floor_divide: piecewise constant, no derivative ---------------------------------------------


def _floor_divide(bk: Any, x1: Any, x2: Any) -> Any:
    # NumPy returns NaN for inf // finite and -1 for 1 // -inf; the standard asks for
    # floor(x1 / x2) whenever an operand is infinite (+-inf, or a signed zero).
    out = bk.floor_divide(x1, x2)
    if not isdtype(bk, out.dtype, "real floating"):
        return out
    a = bk.asarray(x1, dtype=out.dtype)
    b = bk.asarray(x2, dtype=out.dtype)
    return bk.where(bk.isinf(a) | bk.isinf(b), bk.floor(a / b), out)


floor_divide = binary("floor_divide", "real numeric", _floor_divide)
floor_divide.nondifferentiable()
broadcasting(floor_divide)


# -- hypot ---------------------------------------------------------------------------------------


def _hypot_partial(ns, x, out):
    """``x / hypot``, 0 at the origin (not differentiable there: the smallest subgradient, as
    vector_norm's at 0; JAX's and PyTorch's are NaN), with no 0 / 0 in a higher order."""
    at_origin = out == 0
    return ns.where(at_origin, 0.0, x / ns.where(at_origin, 1.0, out))


hypot = smooth_binary(
    "hypot",
    "real floating-point",
    lambda ns, out, x1, x2: (_hypot_partial(ns, x1, out), _hypot_partial(ns, x2, out)),
    saves=("x1", "x2", "out"),
)


# -- maximum, minimum ----------------------------------------------------------------------------
# At ties each argument gets half the cotangent (as in JAX and PyTorch); in the JVP each side
# contributes half (the VJP's convention, transposed).


def _select(ns, g, first, tie):
    """Split ``g`` between two arguments: all where ``first``, half where ``tie``."""
    w = ns.astype(first, g.dtype) + 0.5 * ns.astype(tie, g.dtype)
    return g * w


def _weight(ns, like, first, tie):
    return ns.astype(first, like.dtype) + 0.5 * ns.astype(tie, like.dtype)


maximum = binary("maximum", "real numeric")
maximum.defvjp(
    lambda ns, g, out, x1, x2, *, needs=(0, 1): (
        _select(ns, g, x1 > x2, x1 == x2) if 0 in needs else None,
        _select(ns, g, x2 > x1, x1 == x2) if 1 in needs else None,
    ),
    saves=("x1", "x2"),
    takes_needs=True,
)
maximum.defjvp(
    lambda ns, t, out, x1, x2: plus(
        None if t[0] is None else t[0] * _weight(ns, t[0], x1 > x2, x1 == x2),
        None if t[1] is None else t[1] * _weight(ns, t[1], x2 > x1, x1 == x2),
    )
)
broadcasting(maximum)

minimum = binary("minimum", "real numeric")
minimum.defvjp(
    lambda ns, g, out, x1, x2, *, needs=(0, 1): (
        _select(ns, g, x1 < x2, x1 == x2) if 0 in needs else None,
        _select(ns, g, x2 < x1, x1 == x2) if 1 in needs else None,
    ),
    saves=("x1", "x2"),
    takes_needs=True,
)
minimum.defjvp(
    lambda ns, t, out, x1, x2: plus(
        None if t[0] is None else t[0] * _weight(ns, t[0], x1 < x2, x1 == x2),
        None if t[1] is None else t[1] * _weight(ns, t[1], x2 < x1, x1 == x2),
    )
)
broadcasting(minimum)


# -- multiply ------------------------------------------------------------------------------------

multiply = binary("multiply", "numeric")


# multiply/divide (and the other rules given needs=) skip the cotangents nobody needs.
@multiply.defvjp(saves=("x1", "x2"), takes_needs=True)
def multiply_vjp(ns, g, out, x1, x2, *, needs=(0, 1)):
    if type(needs) is Shared and needs == (0, 1):  # x * x (one tape parent): one term,
        return (g + g) * x1, None  # (2 g) x, the same bits as g x + g x
    return g * x2 if 0 in needs else None, g * x1 if 1 in needs else None


multiply.defjvp(lambda ns, t, out, x1, x2: plus(_lin(t[0], x2), _lin(t[1], x1)))
broadcasting(multiply)


# -- negative ------------------------------------------------------------------------------------

negative = smooth_unary("negative", "numeric", lambda ns, v, out, x: -v, saves=())


# -- nextafter -----------------------------------------------------------------------------------

nextafter = binary("nextafter", "real floating-point")
# nextafter(x1, x2) moves x1 by one ulp: slope 1 in x1, 0 in x2.
nextafter.defvjp(lambda ns, g, out, x1, x2: (g, None))
nextafter.defjvp(lambda ns, t, out, x1, x2: t[0])
broadcasting(nextafter)


# -- positive ------------------------------------------------------------------------------------

positive = smooth_unary("positive", "numeric", lambda ns, v, out, x: v, saves=())


# -- pow -----------------------------------------------------------------------------------------

pow = binary("pow", "numeric")


def _pow_d1(ns, x1, x2):
    """``d/dx1 x1^x2 = x2 x1^(x2 - 1)``: 0 where ``x2 == 0`` (``x1^0 = 1`` is constant, even
    at ``x1 == 0``, where the formula is ``0 * inf``; JAX's and PyTorch's are 0 too). Only
    there is the exponent replaced, so the derivative in x2 stays ``x1^-1`` where x1 != 0."""
    if is_scalar(x2):
        return ns.zeros_like(x1) if x2 == 0 else x2 * ns.pow(x1, x2 - 1)
    zero = x2 == 0 if is_scalar(x1) and x1 == 0 else (x2 == 0) & (x1 == 0)
    exponent = x2 - 1 if is_scalar(x1) and x1 != 0 else ns.where(zero, 1, x2 - 1)
    return x2 * ns.pow(x1, exponent)


@pow.defvjp(saves=("x1", "x2", "out"))
def pow_vjp(ns, g, out, x1, x2):
    # d/dx1 = x2 x1^(x2-1); d/dx2 = out log(x1), taken as 0 where x1 == 0 (as in JAX)
    g1 = None if is_scalar(x1) else g * _pow_d1(ns, x1, x2)
    if is_scalar(x2):
        return g1, None
    if is_scalar(x1):
        log1 = (
            0.0 if x1 == 0 else cmath.log(x1) if isinstance(x1, complex) or x1 < 0 else math.log(x1)
        )
        return g1, g * out * log1
    safe = ns.where(x1 == 0, 1.0, x1)
    return g1, ns.where(x1 == 0, 0.0, g * out * ns.log(safe))


@pow.defjvp
def pow_jvp(ns, t, out, x1, x2):
    t1 = None if t[0] is None else t[0] * _pow_d1(ns, x1, x2)
    if t[1] is None:
        return t1
    if is_scalar(x1):
        log1 = (
            0.0 if x1 == 0 else cmath.log(x1) if isinstance(x1, complex) or x1 < 0 else math.log(x1)
        )
        return plus(t1, t[1] * out * log1)
    safe = ns.where(x1 == 0, 1.0, x1)
    return plus(t1, ns.where(x1 == 0, 0.0, t[1] * out * ns.log(safe)))


broadcasting(pow)


# -- reciprocal ----------------------------------------------------------------------------------

reciprocal = smooth_unary(
    "reciprocal", "floating-point", lambda ns, v, out, x: -v * out * out, saves=("out",)
)


# -- remainder -----------------------------------------------------------------------------------

remainder = binary("remainder", "real numeric", remainder_row)
# remainder(x1, x2) = x1 - floor(x1 / x2) x2
remainder.defvjp(
    lambda ns, g, out, x1, x2: (g, None if is_scalar(x2) else -g * ns.floor(x1 / x2)),
    saves=("x1", "x2"),
)
remainder.defjvp(
    lambda ns, t, out, x1, x2: plus(t[0], None if t[1] is None else -t[1] * ns.floor(x1 / x2))
)
broadcasting(remainder)


# -- sign ----------------------------------------------------------------------------------------


def _sign(bk: Any, x: Any) -> Any:
    # The standard asks 0 + 0j for a complex zero of any signs; array-api-strict divides x by
    # |x| (or 1) and keeps the signs (-0 - 0j gives -0 + 0j). It asks NaN + NaN j when a
    # component is NaN; NumPy's own complex sign (Cubed's) returns 1 + 0j for inf + NaN j.
    out = bk.sign(x)
    if not isdtype(bk, out.dtype, "complex floating"):
        return out
    return bk.where(x == 0, 0j, bk.where(bk.isnan(x), complex("nan+nanj"), out))


sign = unary("sign", "numeric", _sign)


@sign.defvjp(saves=("x", "out"))
def sign_vjp(ns, g, out, x):
    # Real sign is piecewise constant: zero gradient (as in JAX). Complex sign s = z/|z| moves
    # with the phase: ct = (g - Re(g s) conj(s)) / |z|, zero at 0.
    if not is_complex(ns, x):
        return (ns.zeros_like(g),)
    r = ns.abs(x)
    ct = (g - to_complex(ns, ns.real(g * out)) * ns.conj(out)) / ns.where(r == 0, 1.0, r)
    return (ns.where(r == 0, 0.0, ct),)


sign.defjvp(TRANSPOSED)  # piecewise (real sign: zero; complex: the phase)
broadcasting(sign)


# -- sqrt ----------------------------------------------------------------------------------------

sqrt = smooth_unary("sqrt", "floating-point", lambda ns, v, out, x: v / (2 * out), saves=("out",))


# -- square --------------------------------------------------------------------------------------

square = smooth_unary("square", "numeric", lambda ns, v, out, x: 2 * v * x)


# -- subtract ------------------------------------------------------------------------------------

subtract = binary("subtract", "numeric")
subtract.defvjp(lambda ns, g, out, x1, x2: (g, None if is_scalar(x2) else -g))
subtract.defjvp(lambda ns, t, out, x1, x2: plus(t[0], None if t[1] is None else -t[1]))
broadcasting(subtract)
