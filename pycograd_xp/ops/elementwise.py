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

from .._primitive import binary, primitive, unary
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


# -- abs -----------------------------------------------------------------------------------------

abs = unary("abs", "numeric")
abs.defvjp(lambda ns, g, out, x: (g * sgn(ns, x),), saves=("x",))


@on_tangent
def _abs_jvp(ns, t, out, x):
    if not is_complex(ns, x):
        return t * ns.sign(x)
    return ns.real(ns.conj(x) * t) / ns.where(out == 0, 1.0, out)  # Re(conj(x) t) / |x|


abs.defjvp(_abs_jvp)
abs.defbatch(broadcast_unary(abs))
abs.defshape(broadcast_shape(abs), memory=buffers)


# -- acos ----------------------------------------------------------------------------------------

acos = unary("acos", "floating-point")
acos.defvjp(lambda ns, g, out, x: (-g / ns.sqrt(1 - x * x),), saves=("x",))
acos.defjvp(on_tangent(lambda ns, t, out, x: -t / ns.sqrt(1 - x * x)))
acos.defbatch(broadcast_unary(acos))
acos.defshape(broadcast_shape(acos), memory=buffers)


# -- acosh ---------------------------------------------------------------------------------------

acosh = unary("acosh", "floating-point")
acosh.defvjp(lambda ns, g, out, x: (g / (ns.sqrt(x - 1) * ns.sqrt(x + 1)),), saves=("x",))
acosh.defjvp(on_tangent(lambda ns, t, out, x: t / (ns.sqrt(x - 1) * ns.sqrt(x + 1))))
acosh.defbatch(broadcast_unary(acosh))
acosh.defshape(broadcast_shape(acosh), memory=buffers)


# -- add -----------------------------------------------------------------------------------------

add = binary("add", "numeric")
add.defvjp(lambda ns, g, out, x1, x2: (g, g))
add.defjvp(lambda ns, t, out, x1, x2: plus(t[0], t[1]))
add.defbatch(broadcast_binary(add))
add.defshape(broadcast_shape(add), memory=buffers)


# -- asin ----------------------------------------------------------------------------------------

asin = unary("asin", "floating-point")
asin.defvjp(lambda ns, g, out, x: (g / ns.sqrt(1 - x * x),), saves=("x",))
asin.defjvp(on_tangent(lambda ns, t, out, x: t / ns.sqrt(1 - x * x)))
asin.defbatch(broadcast_unary(asin))
asin.defshape(broadcast_shape(asin), memory=buffers)


# -- asinh ---------------------------------------------------------------------------------------

asinh = unary("asinh", "floating-point")
asinh.defvjp(lambda ns, g, out, x: (g / ns.sqrt(x * x + 1),), saves=("x",))
asinh.defjvp(on_tangent(lambda ns, t, out, x: t / ns.sqrt(x * x + 1)))
asinh.defbatch(broadcast_unary(asinh))
asinh.defshape(broadcast_shape(asinh), memory=buffers)


# -- atan ----------------------------------------------------------------------------------------

atan = unary("atan", "floating-point")
atan.defvjp(lambda ns, g, out, x: (g / (1 + x * x),), saves=("x",))
atan.defjvp(on_tangent(lambda ns, t, out, x: t / (1 + x * x)))
atan.defbatch(broadcast_unary(atan))
atan.defshape(broadcast_shape(atan), memory=buffers)


# -- atan2 ---------------------------------------------------------------------------------------

atan2 = binary("atan2", "real floating-point")


@atan2.defvjp(saves=("x1", "x2"))
def atan2_vjp(ns, g, out, x1, x2):
    d = x1 * x1 + x2 * x2
    return g * x2 / d, -g * x1 / d


@atan2.defjvp
def atan2_jvp(ns, t, out, x1, x2):
    d = x1 * x1 + x2 * x2
    return plus(_lin(t[0], x2 / d), _lin(t[1], -x1 / d))


atan2.defbatch(broadcast_binary(atan2))
atan2.defshape(broadcast_shape(atan2), memory=buffers)


# -- atanh ---------------------------------------------------------------------------------------

atanh = unary("atanh", "floating-point")
atanh.defvjp(lambda ns, g, out, x: (g / (1 - x * x),), saves=("x",))
atanh.defjvp(on_tangent(lambda ns, t, out, x: t / (1 - x * x)))
atanh.defbatch(broadcast_unary(atanh))
atanh.defshape(broadcast_shape(atanh), memory=buffers)


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
bitwise_invert.defbatch(broadcast_unary(bitwise_invert))
bitwise_invert.defshape(broadcast_shape(bitwise_invert), memory=buffers)


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
def clip(bk: Any, x: Any, /, min: Any = None, max: Any = None) -> Any:
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

conj = unary("conj", "numeric")
conj.defvjp(lambda ns, g, out, x: (ns.conj(g),), saves=())
conj.defjvp(on_tangent(lambda ns, t, out, x: ns.conj(t)))
conj.defbatch(broadcast_unary(conj))
conj.defshape(broadcast_shape(conj), memory=buffers)


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
copysign.defbatch(broadcast_binary(copysign))
copysign.defshape(broadcast_shape(copysign), memory=buffers)


# -- cos -----------------------------------------------------------------------------------------

cos = unary("cos", "floating-point")
cos.defvjp(lambda ns, g, out, x: (-g * ns.sin(x),), saves=("x",))
cos.defjvp(on_tangent(lambda ns, t, out, x: -t * ns.sin(x)))
cos.defbatch(broadcast_unary(cos))
cos.defshape(broadcast_shape(cos), memory=buffers)


# -- cosh ----------------------------------------------------------------------------------------

cosh = unary("cosh", "floating-point")
cosh.defvjp(lambda ns, g, out, x: (g * ns.sinh(x),), saves=("x",))
cosh.defjvp(on_tangent(lambda ns, t, out, x: t * ns.sinh(x)))
cosh.defbatch(broadcast_unary(cosh))
cosh.defshape(broadcast_shape(cosh), memory=buffers)


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
divide.defbatch(broadcast_binary(divide))
divide.defshape(broadcast_shape(divide), memory=buffers)


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

exp = unary("exp", "floating-point")
exp.defvjp(lambda ns, g, out, x: (g * out,), saves=("out",))
exp.defjvp(on_tangent(lambda ns, t, out, x: t * out))
exp.defbatch(broadcast_unary(exp))
exp.defshape(broadcast_shape(exp), memory=buffers)


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
expm1.defbatch(broadcast_unary(expm1))
expm1.defshape(broadcast_shape(expm1), memory=buffers)


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
floor_divide.defbatch(broadcast_binary(floor_divide))
floor_divide.defshape(broadcast_shape(floor_divide), memory=buffers)


# -- hypot ---------------------------------------------------------------------------------------

hypot = binary("hypot", "real floating-point")


def _hypot_partial(ns, x, out):
    """``x / hypot``, 0 at the origin (not differentiable there: the smallest subgradient, as
    vector_norm's at 0; JAX's and PyTorch's are NaN), with no 0 / 0 in a higher order."""
    at_origin = out == 0
    return ns.where(at_origin, 0.0, x / ns.where(at_origin, 1.0, out))


hypot.defvjp(
    lambda ns, g, out, x1, x2: (g * _hypot_partial(ns, x1, out), g * _hypot_partial(ns, x2, out)),
    saves=("x1", "x2", "out"),
)
hypot.defjvp(
    lambda ns, t, out, x1, x2: plus(
        _lin(t[0], _hypot_partial(ns, x1, out)), _lin(t[1], _hypot_partial(ns, x2, out))
    )
)
hypot.defbatch(broadcast_binary(hypot))
hypot.defshape(broadcast_shape(hypot), memory=buffers)


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

log = unary("log", "floating-point")
log.defvjp(lambda ns, g, out, x: (g / x,), saves=("x",))
log.defjvp(on_tangent(lambda ns, t, out, x: t / x))
log.defbatch(broadcast_unary(log))
log.defshape(broadcast_shape(log), memory=buffers)


# -- log10 ---------------------------------------------------------------------------------------

log10 = unary("log10", "floating-point")
log10.defvjp(lambda ns, g, out, x: (g / (x * math.log(10.0)),), saves=("x",))
log10.defjvp(on_tangent(lambda ns, t, out, x: t / (x * math.log(10.0))))
log10.defbatch(broadcast_unary(log10))
log10.defshape(broadcast_shape(log10), memory=buffers)


# -- log1p ---------------------------------------------------------------------------------------

log1p = unary("log1p", "floating-point")
log1p.defvjp(lambda ns, g, out, x: (g / (x + 1),), saves=("x",))
log1p.defjvp(on_tangent(lambda ns, t, out, x: t / (x + 1)))
log1p.defbatch(broadcast_unary(log1p))
log1p.defshape(broadcast_shape(log1p), memory=buffers)


# -- log2 ----------------------------------------------------------------------------------------

log2 = unary("log2", "floating-point")
log2.defvjp(lambda ns, g, out, x: (g / (x * math.log(2.0)),), saves=("x",))
log2.defjvp(on_tangent(lambda ns, t, out, x: t / (x * math.log(2.0))))
log2.defbatch(broadcast_unary(log2))
log2.defshape(broadcast_shape(log2), memory=buffers)


# -- logaddexp -----------------------------------------------------------------------------------

logaddexp = binary("logaddexp", "real floating-point")
logaddexp.defvjp(
    lambda ns, g, out, x1, x2: (g * ns.exp(x1 - out), g * ns.exp(x2 - out)),
    saves=("x1", "x2", "out"),
)
logaddexp.defjvp(
    lambda ns, t, out, x1, x2: plus(_lin(t[0], ns.exp(x1 - out)), _lin(t[1], ns.exp(x2 - out)))
)
logaddexp.defbatch(broadcast_binary(logaddexp))
logaddexp.defshape(broadcast_shape(logaddexp), memory=buffers)


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
logical_not.defbatch(broadcast_unary(logical_not))
logical_not.defshape(broadcast_shape(logical_not), memory=buffers)


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
maximum.defbatch(broadcast_binary(maximum))
maximum.defshape(broadcast_shape(maximum), memory=buffers)

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
minimum.defbatch(broadcast_binary(minimum))
minimum.defshape(broadcast_shape(minimum), memory=buffers)


# -- multiply ------------------------------------------------------------------------------------

multiply = binary("multiply", "numeric")


# multiply/divide (and the other rules given needs=) skip the cotangents nobody needs.
@multiply.defvjp(saves=("x1", "x2"), takes_needs=True)
def multiply_vjp(ns, g, out, x1, x2, *, needs=(0, 1)):
    if x1 is x2 and needs == (0, 1):  # x * x: one term, (2 g) x, the same bits as g x + g x
        return (g + g) * x1, None
    return g * x2 if 0 in needs else None, g * x1 if 1 in needs else None


multiply.defjvp(lambda ns, t, out, x1, x2: plus(_lin(t[0], x2), _lin(t[1], x1)))
multiply.defbatch(broadcast_binary(multiply))
multiply.defshape(broadcast_shape(multiply), memory=buffers)


# -- negative ------------------------------------------------------------------------------------

negative = unary("negative", "numeric")
negative.defvjp(lambda ns, g, out, x: (-g,), saves=())
negative.defjvp(on_tangent(lambda ns, t, out, x: -t))
negative.defbatch(broadcast_unary(negative))
negative.defshape(broadcast_shape(negative), memory=buffers)


# -- nextafter -----------------------------------------------------------------------------------

nextafter = binary("nextafter", "real floating-point")
# nextafter(x1, x2) moves x1 by one ulp: slope 1 in x1, 0 in x2.
nextafter.defvjp(lambda ns, g, out, x1, x2: (g, None))
nextafter.defjvp(lambda ns, t, out, x1, x2: t[0])
nextafter.defbatch(broadcast_binary(nextafter))
nextafter.defshape(broadcast_shape(nextafter), memory=buffers)


# -- positive ------------------------------------------------------------------------------------

positive = unary("positive", "numeric")
positive.defvjp(lambda ns, g, out, x: (g,), saves=())
positive.defjvp(on_tangent(lambda ns, t, out, x: t))
positive.defbatch(broadcast_unary(positive))
positive.defshape(broadcast_shape(positive), memory=buffers)


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


pow.defbatch(broadcast_binary(pow))
pow.defshape(broadcast_shape(pow), memory=buffers)


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

reciprocal = unary("reciprocal", "floating-point")
reciprocal.defvjp(lambda ns, g, out, x: (-g * out * out,), saves=("out",))
reciprocal.defjvp(on_tangent(lambda ns, t, out, x: -t * out * out))
reciprocal.defbatch(broadcast_unary(reciprocal))
reciprocal.defshape(broadcast_shape(reciprocal), memory=buffers)


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
remainder.defbatch(broadcast_binary(remainder))
remainder.defshape(broadcast_shape(remainder), memory=buffers)


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
sign.defbatch(broadcast_unary(sign))
sign.defshape(broadcast_shape(sign), memory=buffers)


# -- sin -----------------------------------------------------------------------------------------

sin = unary("sin", "floating-point")
sin.defvjp(lambda ns, g, out, x: (g * ns.cos(x),), saves=("x",))
sin.defjvp(on_tangent(lambda ns, t, out, x: t * ns.cos(x)))
sin.defbatch(broadcast_unary(sin))
sin.defshape(broadcast_shape(sin), memory=buffers)


# -- sinh ----------------------------------------------------------------------------------------

sinh = unary("sinh", "floating-point")
sinh.defvjp(lambda ns, g, out, x: (g * ns.cosh(x),), saves=("x",))
sinh.defjvp(on_tangent(lambda ns, t, out, x: t * ns.cosh(x)))
sinh.defbatch(broadcast_unary(sinh))
sinh.defshape(broadcast_shape(sinh), memory=buffers)


# -- sqrt ----------------------------------------------------------------------------------------

sqrt = unary("sqrt", "floating-point")
sqrt.defvjp(lambda ns, g, out, x: (g / (2 * out),), saves=("out",))
sqrt.defjvp(on_tangent(lambda ns, t, out, x: t / (2 * out)))
sqrt.defbatch(broadcast_unary(sqrt))
sqrt.defshape(broadcast_shape(sqrt), memory=buffers)


# -- square --------------------------------------------------------------------------------------

square = unary("square", "numeric")
square.defvjp(lambda ns, g, out, x: (2 * g * x,), saves=("x",))
square.defjvp(on_tangent(lambda ns, t, out, x: 2 * t * x))
square.defbatch(broadcast_unary(square))
square.defshape(broadcast_shape(square), memory=buffers)


# -- subtract ------------------------------------------------------------------------------------

subtract = binary("subtract", "numeric")
subtract.defvjp(lambda ns, g, out, x1, x2: (g, None if is_scalar(x2) else -g))
subtract.defjvp(lambda ns, t, out, x1, x2: plus(t[0], None if t[1] is None else -t[1]))
subtract.defbatch(broadcast_binary(subtract))
subtract.defshape(broadcast_shape(subtract), memory=buffers)


# -- tan -----------------------------------------------------------------------------------------

tan = unary("tan", "floating-point")
tan.defvjp(lambda ns, g, out, x: (g * (1 + out * out),), saves=("out",))
tan.defjvp(on_tangent(lambda ns, t, out, x: t * (1 + out * out)))
tan.defbatch(broadcast_unary(tan))
tan.defshape(broadcast_shape(tan), memory=buffers)


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
tanh.defbatch(broadcast_unary(tanh))
tanh.defshape(broadcast_shape(tanh), memory=buffers)
