"""Elementwise functions: one row each, with the dtype category the standard asks of its inputs.

A row without an ``impl`` calls the backend function of the same name. The few rows with an
``impl`` honour special cases of the standard that some backends (NumPy) get wrong: each calls
the backend, and only for the dtypes concerned corrects the special cases with ``where``.

Derivatives are written by hand (these are the hot rows). Complex convention (JAX's): the
cotangent of a complex input pairs with its tangent through ``Re(ct * t)`` (no conjugate). For a
holomorphic f the VJP is ``g * f'(x)`` and the JVP ``t * f'(x)``, the same expressions as for
reals; non-holomorphic functions (abs, conj, real, imag, sign) say so. For a real loss L(z) the
gradient is ``dL/dx - i dL/dy``; PyTorch returns its conjugate. A Python-scalar operand never
gets a gradient nor a tangent (None): no term is computed for it. Broadcasting is not handled by
the rules: the engines reduce every cotangent to its input's shape and broadcast a tangent to
the output's shape.

Rows batch by broadcasting: batched operands get ones after the batch axis up to the common
rank, unbatched ones broadcast as they are. A shape rule gives the broadcast shape of the array
arguments and the dtype NumPy's own function gives (probed on one-element arrays); a result is
laid out in its operands' memory order, as NumPy's (order "K"): transposed in, transposed out.
``real``/``imag`` of complex input are views, as in NumPy; ``real`` of a real array is that
array. The transients are the iterator's buffers for broadcast, cast or differently laid-out
operands.
"""

from __future__ import annotations

import builtins
import cmath
import math
from typing import Any

import array_api_compat.numpy as npx

from .._primitive import Array, binary, primitive, unary
from ._rules.batching import align, fn
from ._rules.jvp import TRANSPOSED, plus
from ._rules.shapes import (
    BUFFER_ELEMENTS,
    broadcast,
    elementwise_out,
    is_array,
    measured_layouts,
    probe_dtype,
    ufunc_buffers,
    view,
)
from ._rules.vjp import is_complex, is_scalar, sgn, to_complex

# -- kits shared by the rows below ---------------------------------------------------------------

_KINDS: dict[tuple[type, Any, str], bool] = {}


def _isdtype(bk: Any, dtype: Any, kind: str) -> bool:
    """``bk.isdtype(dtype, kind)``, remembered: array-api-compat's and array-api-strict's take
    about 1 us, more than tanh of a small array, and tanh is on the hot path of networks. The
    key leads with the dtype's type: array-api-strict's dtypes hash like NumPy's, and comparing
    the two warns."""
    key = (type(dtype), dtype, kind)
    try:
        return _KINDS[key]
    except KeyError:
        _KINDS[key] = answer = bk.isdtype(dtype, kind)
        return answer
    except TypeError:  # an unhashable dtype
        return bk.isdtype(dtype, kind)


def on_tangent(rule: Any) -> Any:
    """The JVP rule of a unary row from ``rule(ns, t, out, x)`` on its one tangent."""
    return lambda ns, t, out, x: rule(ns, t[0], out, x)


def _lin(t, f):
    return None if t is None else t * f


def broadcast_unary(row: Any) -> Any:
    """The batching rule of a unary row: the row itself on the batched operand."""
    name = row.name
    return lambda ns, dims, x: fn(ns, name)(x)


def broadcast_binary(row: Any) -> Any:
    """The batching rule of a binary row: the operands aligned, then broadcast."""
    name = row.name

    def rule(ns, dims, x1, x2):
        return fn(ns, name)(*align(ns, dims, x1, x2))

    return rule


def broadcast_shape(row: Any) -> Any:
    """The shape rule of an elementwise row: the broadcast shape, in NumPy's dtype for it."""
    ref = getattr(npx, row.name)

    def rule(a, *xs):
        shape = broadcast(*(x.shape for x in xs if is_array(x)))
        return elementwise_out(shape, probe_dtype(ref, *xs), *xs)

    return rule


@measured_layouts
def buffers(out, *xs, **kw):
    """The iterator's buffers for broadcast, cast or differently laid-out operands."""
    return ufunc_buffers(out, *xs, *kw.values())


def broadcasting(row: Any) -> Any:
    """Attach an elementwise row's batching (broadcast the batched operands, for its arity) and
    shape rules (the broadcast shape in NumPy's dtype, with the iterator's buffers)."""
    row.defbatch((broadcast_unary if row.kind == "unary" else broadcast_binary)(row))
    row.defshape(broadcast_shape(row), memory=buffers)
    return row


def smooth_unary(name: str, dtypes: str, times_derivative: Any, saves: tuple = ("x",)) -> Any:
    """A unary row whose derivative is written once (JAX's ``standard_unop``):
    ``times_derivative(ns, v, out, x)`` applies it to ``v``, the VJP with ``v`` the cotangent
    and the JVP with ``v`` the tangent: ``v * f'(x)`` for a holomorphic f (the same expression
    for complex arguments in JAX's convention above), and so for any row whose map is its own
    transpose under ``Re(ct * t)`` (``conj``); ``saves`` is what it reads. Batched and shaped
    by :func:`broadcasting`."""
    row = unary(name, dtypes)
    row.defvjp(lambda ns, g, out, x: (times_derivative(ns, g, out, x),), saves=saves)
    row.defjvp(lambda ns, t, out, x: times_derivative(ns, t[0], out, x))
    return broadcasting(row)


def smooth_binary(name: str, dtypes: str, partials: Any, saves: tuple) -> Any:
    """A two-argument row whose partial derivatives are written once: ``partials(ns, out, x1,
    x2)`` gives ``(d1, d2)``, the derivative in each argument, which the VJP multiplies by the
    cotangent and the JVP by the tangents (a Python-scalar operand gets no cotangent; a None
    tangent no term); ``saves`` is what ``partials`` reads. Batched and shaped by
    :func:`broadcasting`."""
    row = binary(name, dtypes)

    @row.defvjp(saves=saves)
    def vjp(ns, g, out, x1, x2):
        d1, d2 = partials(ns, out, x1, x2)
        return (None if is_scalar(x1) else g * d1, None if is_scalar(x2) else g * d2)

    @row.defjvp
    def jvp(ns, t, out, x1, x2):
        d1, d2 = partials(ns, out, x1, x2)
        return plus(_lin(t[0], d1), _lin(t[1], d2))

    return broadcasting(row)


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


# -- acos ----------------------------------------------------------------------------------------

acos = smooth_unary("acos", "floating-point", lambda ns, v, out, x: -v / ns.sqrt(1 - x * x))


# -- acosh ---------------------------------------------------------------------------------------

acosh = smooth_unary(
    "acosh", "floating-point", lambda ns, v, out, x: v / (ns.sqrt(x - 1) * ns.sqrt(x + 1))
)


# -- add -----------------------------------------------------------------------------------------

add = binary("add", "numeric")
add.defvjp(lambda ns, g, out, x1, x2: (g, g))
add.defjvp(lambda ns, t, out, x1, x2: plus(t[0], t[1]))
broadcasting(add)


# -- asin ----------------------------------------------------------------------------------------

asin = smooth_unary("asin", "floating-point", lambda ns, v, out, x: v / ns.sqrt(1 - x * x))


# -- asinh ---------------------------------------------------------------------------------------

asinh = smooth_unary("asinh", "floating-point", lambda ns, v, out, x: v / ns.sqrt(x * x + 1))


# -- atan ----------------------------------------------------------------------------------------

atan = smooth_unary("atan", "floating-point", lambda ns, v, out, x: v / (1 + x * x))


# -- atan2 ---------------------------------------------------------------------------------------


def _atan2_partials(ns, out, x1, x2):
    d = x1 * x1 + x2 * x2
    return x2 / d, -x1 / d


atan2 = smooth_binary("atan2", "real floating-point", _atan2_partials, saves=("x1", "x2"))


# -- atanh ---------------------------------------------------------------------------------------

atanh = smooth_unary("atanh", "floating-point", lambda ns, v, out, x: v / (1 - x * x))


# -- bitwise_and, bitwise_invert, bitwise_left_shift, bitwise_or, bitwise_right_shift,
#    bitwise_xor: integer results, no derivative --------------------------------------------------

bitwise_and = binary("bitwise_and", "integer or boolean")
bitwise_invert = unary("bitwise_invert", "integer or boolean")
bitwise_left_shift = binary("bitwise_left_shift", "integer")
bitwise_or = binary("bitwise_or", "integer or boolean")
bitwise_right_shift = binary("bitwise_right_shift", "integer")
bitwise_xor = binary("bitwise_xor", "integer or boolean")

for _row in (bitwise_and, bitwise_left_shift, bitwise_or, bitwise_right_shift, bitwise_xor):
    _row.nondifferentiable()
    _row.defbatch(broadcast_binary(_row))
    _row.defshape(broadcast_shape(_row), memory=buffers)
bitwise_invert.nondifferentiable()
broadcasting(bitwise_invert)


# -- ceil, floor, round, trunc: piecewise constant (zero gradient almost everywhere, as in JAX) --

ceil = unary("ceil", "real numeric")
floor = unary("floor", "real numeric")
round = unary("round", "numeric")
trunc = unary("trunc", "real numeric")


@measured_layouts
def _round_memory(out, x, /):
    """NumPy rounds a complex array's real and imaginary parts in turn, through a real
    temporary the size of one part (measured: 240 kB over on 30,000 complex128)."""
    part = x.size * x.dtype.itemsize // 2 if x.dtype.kind == "c" else 0
    return buffers(out, x) + part


for _row in (ceil, floor, round, trunc):
    _row.nondifferentiable()
    _row.defbatch(broadcast_unary(_row))
    _row.defshape(broadcast_shape(_row), memory=_round_memory if _row is round else buffers)


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


# -- conj ----------------------------------------------------------------------------------------

conj = smooth_unary("conj", "numeric", lambda ns, v, out, x: ns.conj(v), saves=())


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


# -- cos -----------------------------------------------------------------------------------------

cos = smooth_unary("cos", "floating-point", lambda ns, v, out, x: -v * ns.sin(x))


# -- cosh ----------------------------------------------------------------------------------------

cosh = smooth_unary("cosh", "floating-point", lambda ns, v, out, x: v * ns.sinh(x))


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


# -- equal, greater, greater_equal, less, less_equal, not_equal: boolean results, no derivative --

equal = binary("equal", "all")
greater = binary("greater", "real numeric")
greater_equal = binary("greater_equal", "real numeric")
less = binary("less", "real numeric")
less_equal = binary("less_equal", "real numeric")
not_equal = binary("not_equal", "all")

for _row in (equal, greater, greater_equal, less, less_equal, not_equal):
    _row.nondifferentiable()
    _row.defbatch(broadcast_binary(_row))
    _row.defshape(broadcast_shape(_row), memory=buffers)


# -- exp -----------------------------------------------------------------------------------------

exp = smooth_unary("exp", "floating-point", lambda ns, v, out, x: v * out, saves=("out",))


# -- expm1 ---------------------------------------------------------------------------------------


def _expm1(bk: Any, x: Any) -> Any:
    # NumPy's complex expm1 gets the special cases at infinities and the sign of a zero result
    # wrong; exp(x) - 1 has them right there, and expm1 stays exact everywhere else.
    out = bk.expm1(x)
    if not _isdtype(bk, out.dtype, "complex floating"):
        return out
    return bk.where(bk.isfinite(x) & (x != 0), out, bk.exp(x) - 1)


expm1 = unary("expm1", "floating-point", _expm1)
expm1.defvjp(lambda ns, g, out, x: (g * (out + 1),), saves=("out",))
expm1.defjvp(on_tangent(lambda ns, t, out, x: t * (out + 1)))
broadcasting(expm1)


# -- floor_divide: piecewise constant, no derivative ---------------------------------------------


def _floor_divide(bk: Any, x1: Any, x2: Any) -> Any:
    # NumPy returns NaN for inf // finite and -1 for 1 // -inf; the standard asks for
    # floor(x1 / x2) whenever an operand is infinite (+-inf, or a signed zero).
    out = bk.floor_divide(x1, x2)
    if not _isdtype(bk, out.dtype, "real floating"):
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


# -- imag ----------------------------------------------------------------------------------------

imag = unary("imag", "complex floating-point")
# imag(x) = Re(-i x): the cotangent of x is -i g.
imag.defvjp(lambda ns, g, out, x: (to_complex(ns, g) * (-1j),), saves=())
imag.defjvp(on_tangent(lambda ns, t, out, x: ns.imag(t) if is_complex(ns, t) else ns.zeros_like(t)))
imag.defbatch(broadcast_unary(imag))


@imag.defshape
def imag_shape(a, x, /):
    return view(x, x.shape, dtype=x.dtype.type(0).imag.dtype, contiguous=False)


# -- isfinite, isinf, isnan, signbit: boolean results, no derivative -----------------------------

isfinite = unary("isfinite", "numeric")
isinf = unary("isinf", "numeric")
isnan = unary("isnan", "numeric")
signbit = unary("signbit", "real floating-point")

for _row in (isfinite, isinf, isnan, signbit):
    _row.nondifferentiable()
    _row.defbatch(broadcast_unary(_row))
    _row.defshape(broadcast_shape(_row), memory=buffers)


# -- log -----------------------------------------------------------------------------------------

log = smooth_unary("log", "floating-point", lambda ns, v, out, x: v / x)


# -- log10 ---------------------------------------------------------------------------------------

log10 = smooth_unary("log10", "floating-point", lambda ns, v, out, x: v / (x * math.log(10.0)))


# -- log1p ---------------------------------------------------------------------------------------

log1p = smooth_unary("log1p", "floating-point", lambda ns, v, out, x: v / (x + 1))


# -- log2 ----------------------------------------------------------------------------------------

log2 = smooth_unary("log2", "floating-point", lambda ns, v, out, x: v / (x * math.log(2.0)))


# -- logaddexp -----------------------------------------------------------------------------------

logaddexp = smooth_binary(
    "logaddexp",
    "real floating-point",
    lambda ns, out, x1, x2: (ns.exp(x1 - out), ns.exp(x2 - out)),
    saves=("x1", "x2", "out"),
)


# -- logical_and, logical_not, logical_or, logical_xor: boolean results, no derivative -----------

logical_and = binary("logical_and", "boolean")
logical_not = unary("logical_not", "boolean")
logical_or = binary("logical_or", "boolean")
logical_xor = binary("logical_xor", "boolean")

for _row in (logical_and, logical_or, logical_xor):
    _row.nondifferentiable()
    _row.defbatch(broadcast_binary(_row))
    _row.defshape(broadcast_shape(_row), memory=buffers)
logical_not.nondifferentiable()
broadcasting(logical_not)


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
    if x1 is x2 and needs == (0, 1):  # x * x: one term, (2 g) x, the same bits as g x + g x
        return (g + g) * x1, None
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


# -- real ----------------------------------------------------------------------------------------

real = unary("real", "numeric")
# real: the cotangent is real and becomes the real part of a complex input's cotangent.
real.defvjp(lambda ns, g, out, x: (g,), saves=())
real.defjvp(on_tangent(lambda ns, t, out, x: ns.real(t) if is_complex(ns, t) else t))
real.defbatch(broadcast_unary(real))


@real.defshape
def real_shape(a, x, /):
    if x.dtype.kind != "c":
        return x
    return view(x, x.shape, dtype=x.dtype.type(0).real.dtype, contiguous=False)


# -- reciprocal ----------------------------------------------------------------------------------

reciprocal = smooth_unary(
    "reciprocal", "floating-point", lambda ns, v, out, x: -v * out * out, saves=("out",)
)


# -- remainder -----------------------------------------------------------------------------------

remainder = binary("remainder", "real numeric")
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
    if not _isdtype(bk, out.dtype, "complex floating"):
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


# -- sin -----------------------------------------------------------------------------------------

sin = smooth_unary("sin", "floating-point", lambda ns, v, out, x: v * ns.cos(x))


# -- sinh ----------------------------------------------------------------------------------------

sinh = smooth_unary("sinh", "floating-point", lambda ns, v, out, x: v * ns.cosh(x))


# -- sqrt ----------------------------------------------------------------------------------------

sqrt = smooth_unary("sqrt", "floating-point", lambda ns, v, out, x: v / (2 * out), saves=("out",))


# -- square --------------------------------------------------------------------------------------

square = smooth_unary("square", "numeric", lambda ns, v, out, x: 2 * v * x)


# -- subtract ------------------------------------------------------------------------------------

subtract = binary("subtract", "numeric")
subtract.defvjp(lambda ns, g, out, x1, x2: (g, None if is_scalar(x2) else -g))
subtract.defjvp(lambda ns, t, out, x1, x2: plus(t[0], None if t[1] is None else -t[1]))
broadcasting(subtract)


# -- tan -----------------------------------------------------------------------------------------

tan = smooth_unary(
    "tan", "floating-point", lambda ns, v, out, x: v * (1 + out * out), saves=("out",)
)


# -- tanh ----------------------------------------------------------------------------------------


def _tanh(bk: Any, x: Any) -> Any:
    # The standard asks tanh(+inf + bj) = 1 + 0j for finite b > 0, so (by tanh(conj(x)) =
    # conj(tanh(x)) and oddness) the zero imaginary part of tanh(+-inf + bj) takes the sign of b.
    # NumPy gives C99's 1 + 0j * sin(2b), whose zero follows sin(2b) instead: flip it back.
    out = bk.tanh(x)
    if not _isdtype(bk, out.dtype, "complex floating"):
        return out
    b = bk.imag(x)
    flipped = bk.signbit(bk.imag(out)) != bk.signbit(b)
    return bk.where(bk.isinf(bk.real(x)) & bk.isfinite(b) & flipped, bk.conj(out), out)


tanh = unary("tanh", "floating-point", _tanh)


@tanh.defvjp(saves=("out",), takes_owned=True)
def tanh_vjp(ns, g, out, x, /, *, owned=False):
    """``g (1 - out^2)`` as ``g - out^2 g``: three passes, the last one into ``g`` itself when
    the tape says only this pass holds it (``owned``), as hand-written backprop's
    ``g *= 1 - h * h``; else a new array (which compile's replay writes into a dead buffer).
    Augmented assignment writes the fresh temporary in place on backends with writable
    arrays and rebinds it elsewhere (Cubed, or while recording for higher order)."""
    t = out * out
    t *= g
    if owned:
        g -= t
        return (g,)
    return (g - t,)


tanh.defjvp(on_tangent(lambda ns, t, out, x: t * (1 - out * out)))
broadcasting(tanh)
