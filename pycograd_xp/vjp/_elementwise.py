"""VJP rules of the elementwise functions.

Complex convention (JAX's): the cotangent of a complex input pairs with its tangent through
``Re(ct * t)`` (no conjugate). For a holomorphic f the rule is ``g * f'(x)``, the same
expression as for reals; non-holomorphic functions (abs, conj, real, imag, sign) say so. For a
real loss L(z) the gradient is ``dL/dx - i dL/dy``; PyTorch returns its conjugate.

Broadcasting is not handled here: the engine reduces every cotangent to its input's shape.
"""

from __future__ import annotations

import cmath
import math

from .._primitive import defvjp, nondifferentiable
from ..ops._rules.vjp import is_complex, is_scalar, sgn, to_complex


def unary(name, rule, saves=("x",)):
    defvjp(name, rule, saves=saves)


# -- unary --------------------------------------------------------------------------------------
unary("abs", lambda ns, g, out, x: (g * sgn(ns, x),))
unary("acos", lambda ns, g, out, x: (-g / ns.sqrt(1 - x * x),))
unary("acosh", lambda ns, g, out, x: (g / (ns.sqrt(x - 1) * ns.sqrt(x + 1)),))
unary("asin", lambda ns, g, out, x: (g / ns.sqrt(1 - x * x),))
unary("asinh", lambda ns, g, out, x: (g / ns.sqrt(x * x + 1),))
unary("atan", lambda ns, g, out, x: (g / (1 + x * x),))
unary("atanh", lambda ns, g, out, x: (g / (1 - x * x),))
unary("cos", lambda ns, g, out, x: (-g * ns.sin(x),))
unary("cosh", lambda ns, g, out, x: (g * ns.sinh(x),))
unary("exp", lambda ns, g, out, x: (g * out,), saves=("out",))
unary("expm1", lambda ns, g, out, x: (g * (out + 1),), saves=("out",))
unary("log", lambda ns, g, out, x: (g / x,))
unary("log1p", lambda ns, g, out, x: (g / (x + 1),))
unary("log2", lambda ns, g, out, x: (g / (x * math.log(2.0)),))
unary("log10", lambda ns, g, out, x: (g / (x * math.log(10.0)),))
unary("reciprocal", lambda ns, g, out, x: (-g * out * out,), saves=("out",))
unary("sin", lambda ns, g, out, x: (g * ns.cos(x),))
unary("sinh", lambda ns, g, out, x: (g * ns.cosh(x),))
unary("sqrt", lambda ns, g, out, x: (g / (2 * out),), saves=("out",))
unary("tan", lambda ns, g, out, x: (g * (1 + out * out),), saves=("out",))


def _tanh(ns, g, out, x, /, *, owned=False):
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


defvjp("tanh", _tanh, saves=("out",), takes_owned=True)
unary("square", lambda ns, g, out, x: (2 * g * x,))
unary("negative", lambda ns, g, out, x: (-g,), saves=())
unary("positive", lambda ns, g, out, x: (g,), saves=())
unary("conj", lambda ns, g, out, x: (ns.conj(g),), saves=())
# real: the cotangent is real and becomes the real part of a complex input's cotangent.
unary("real", lambda ns, g, out, x: (g,), saves=())
# imag(x) = Re(-i x): the cotangent of x is -i g.
unary("imag", lambda ns, g, out, x: (to_complex(ns, g) * (-1j),), saves=())


def _sign(ns, g, out, x):
    # Real sign is piecewise constant: zero gradient (as in JAX). Complex sign s = z/|z| moves
    # with the phase: ct = (g - Re(g s) conj(s)) / |z|, zero at 0.
    if not is_complex(ns, x):
        return (ns.zeros_like(g),)
    r = ns.abs(x)
    ct = (g - to_complex(ns, ns.real(g * out)) * ns.conj(out)) / ns.where(r == 0, 1.0, r)
    return (ns.where(r == 0, 0.0, ct),)


unary("sign", _sign, saves=("x", "out"))

# -- binary -------------------------------------------------------------------------------------
# A Python-scalar operand never gets a gradient: its cotangent is not computed.
defvjp("add", lambda ns, g, out, x1, x2: (g, g))
defvjp("subtract", lambda ns, g, out, x1, x2: (g, None if is_scalar(x2) else -g))
# multiply/divide (and the other rules given needs=) skip the cotangents nobody needs.
def _multiply(ns, g, out, x1, x2, *, needs=(0, 1)):
    if x1 is x2 and needs == (0, 1):  # x * x: one term, (2 g) x, the same bits as g x + g x
        return (g + g) * x1, None
    return g * x2 if 0 in needs else None, g * x1 if 1 in needs else None


defvjp("multiply", _multiply, saves=("x1", "x2"), takes_needs=True)
defvjp("divide", lambda ns, g, out, x1, x2, *, needs=(0, 1): (
    g / x2 if 0 in needs else None, -g * out / x2 if 1 in needs else None),
    saves=("x2", "out"), takes_needs=True)  # fmt: skip


def _pow(ns, g, out, x1, x2):
    # d/dx1 = x2 x1^(x2-1); d/dx2 = out log(x1), taken as 0 where x1 == 0 (as in JAX)
    g1 = None if is_scalar(x1) else g * x2 * ns.pow(x1, x2 - 1)
    if is_scalar(x2):
        return g1, None
    if is_scalar(x1):
        log1 = 0.0 if x1 == 0 else cmath.log(x1) if isinstance(x1, complex) or x1 < 0 else \
            math.log(x1)  # fmt: skip
        return g1, g * out * log1
    safe = ns.where(x1 == 0, 1.0, x1)
    return g1, ns.where(x1 == 0, 0.0, g * out * ns.log(safe))


defvjp("pow", _pow, saves=("x1", "x2", "out"))


def _atan2(ns, g, out, x1, x2):
    d = x1 * x1 + x2 * x2
    return g * x2 / d, -g * x1 / d


defvjp("atan2", _atan2, saves=("x1", "x2"))
defvjp("hypot", lambda ns, g, out, x1, x2: (g * x1 / out, g * x2 / out),
       saves=("x1", "x2", "out"))  # fmt: skip
defvjp("logaddexp", lambda ns, g, out, x1, x2: (g * ns.exp(x1 - out), g * ns.exp(x2 - out)),
       saves=("x1", "x2", "out"))  # fmt: skip


def _select(ns, g, first, tie):
    """Split ``g`` between two arguments: all where ``first``, half where ``tie``."""
    w = ns.astype(first, g.dtype) + 0.5 * ns.astype(tie, g.dtype)
    return g * w


# maximum/minimum: at ties each argument gets half the cotangent (as in JAX and PyTorch).
defvjp("maximum", lambda ns, g, out, x1, x2, *, needs=(0, 1): (
    _select(ns, g, x1 > x2, x1 == x2) if 0 in needs else None,
    _select(ns, g, x2 > x1, x1 == x2) if 1 in needs else None),
    saves=("x1", "x2"), takes_needs=True)  # fmt: skip
defvjp("minimum", lambda ns, g, out, x1, x2, *, needs=(0, 1): (
    _select(ns, g, x1 < x2, x1 == x2) if 0 in needs else None,
    _select(ns, g, x2 < x1, x1 == x2) if 1 in needs else None),
    saves=("x1", "x2"), takes_needs=True)  # fmt: skip
# copysign(x1, x2) = |x1| sign(x2): slope +-1 in x1, piecewise constant in x2.
defvjp("copysign", lambda ns, g, out, x1, x2: (
    None if is_scalar(x1) else ns.where(ns.signbit(x1) == ns.signbit(out), g, -g), None),
    saves=("x1", "out"))  # fmt: skip
# nextafter(x1, x2) moves x1 by one ulp: slope 1 in x1, 0 in x2.
defvjp("nextafter", lambda ns, g, out, x1, x2: (g, None))
# remainder(x1, x2) = x1 - floor(x1 / x2) x2
defvjp("remainder", lambda ns, g, out, x1, x2: (
    g, None if is_scalar(x2) else -g * ns.floor(x1 / x2)), saves=("x1", "x2"))  # fmt: skip


def _clip(ns, g, out, x, /, min=None, max=None):
    lo = None if min is None else x >= min
    hi = None if max is None else x <= max
    if lo is None and hi is None:
        return g, None, None
    inside = lo if hi is None else hi if lo is None else ns.logical_and(lo, hi)
    zero = ns.zeros_like(g)
    g_min = None if min is None or is_scalar(min) else ns.where(x < min, g, zero)
    g_max = None if max is None or is_scalar(max) else ns.where(x > max, g, zero)
    return ns.where(inside, g, zero), g_min, g_max


# clip: at a bound the cotangent goes to x.
defvjp("clip", _clip, saves=("x", "min", "max"))

# Piecewise-constant (zero gradient almost everywhere, as in JAX) or non-floating results.
nondifferentiable(
    "ceil", "floor", "round", "trunc", "floor_divide", "signbit", "isfinite", "isinf", "isnan",
    "equal", "not_equal", "greater", "greater_equal", "less", "less_equal",
    "logical_and", "logical_or", "logical_xor", "logical_not",
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_invert",
    "bitwise_left_shift", "bitwise_right_shift",
)  # fmt: skip
