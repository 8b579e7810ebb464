"""JVP rules of the elementwise functions (the hot rows: written by hand).

A unary rule returns ``t * f'(x)``: for holomorphic functions the same expression serves real
and complex inputs (JAX's convention, as in the VJP rules); non-holomorphic ones (abs, conj,
real, imag) say so. A Python-scalar operand has no tangent (None), and no term is computed for
it. Broadcasting is not handled here: the engine broadcasts a tangent to the output's shape.
"""

from __future__ import annotations

import cmath
import math

from .._primitive import defjvp
from ..ops._rules.jvp import plus, transposed_rows
from ..ops._rules.vjp import is_complex, is_scalar


def unary(name, rule):
    defjvp(name, lambda ns, t, out, x: rule(ns, t[0], out, x))


# -- unary --------------------------------------------------------------------------------------
def _abs(ns, t, out, x):
    if not is_complex(ns, x):
        return t * ns.sign(x)
    return ns.real(ns.conj(x) * t) / ns.where(out == 0, 1.0, out)  # Re(conj(x) t) / |x|


unary("abs", _abs)
unary("acos", lambda ns, t, out, x: -t / ns.sqrt(1 - x * x))
unary("acosh", lambda ns, t, out, x: t / (ns.sqrt(x - 1) * ns.sqrt(x + 1)))
unary("asin", lambda ns, t, out, x: t / ns.sqrt(1 - x * x))
unary("asinh", lambda ns, t, out, x: t / ns.sqrt(x * x + 1))
unary("atan", lambda ns, t, out, x: t / (1 + x * x))
unary("atanh", lambda ns, t, out, x: t / (1 - x * x))
unary("cos", lambda ns, t, out, x: -t * ns.sin(x))
unary("cosh", lambda ns, t, out, x: t * ns.sinh(x))
unary("exp", lambda ns, t, out, x: t * out)
unary("expm1", lambda ns, t, out, x: t * (out + 1))
unary("log", lambda ns, t, out, x: t / x)
unary("log1p", lambda ns, t, out, x: t / (x + 1))
unary("log2", lambda ns, t, out, x: t / (x * math.log(2.0)))
unary("log10", lambda ns, t, out, x: t / (x * math.log(10.0)))
unary("reciprocal", lambda ns, t, out, x: -t * out * out)
unary("sin", lambda ns, t, out, x: t * ns.cos(x))
unary("sinh", lambda ns, t, out, x: t * ns.cosh(x))
unary("sqrt", lambda ns, t, out, x: t / (2 * out))
unary("tan", lambda ns, t, out, x: t * (1 + out * out))
unary("tanh", lambda ns, t, out, x: t * (1 - out * out))
unary("square", lambda ns, t, out, x: 2 * t * x)
unary("negative", lambda ns, t, out, x: -t)
unary("positive", lambda ns, t, out, x: t)
unary("conj", lambda ns, t, out, x: ns.conj(t))
unary("real", lambda ns, t, out, x: ns.real(t) if is_complex(ns, t) else t)
unary("imag", lambda ns, t, out, x: ns.imag(t) if is_complex(ns, t) else ns.zeros_like(t))
transposed_rows("sign", "clip")  # piecewise (real sign: zero; complex: the phase) and bounds


# -- binary -------------------------------------------------------------------------------------
def _lin(t, f):
    return None if t is None else t * f


defjvp("add", lambda ns, t, out, x1, x2: plus(t[0], t[1]))
defjvp("subtract", lambda ns, t, out, x1, x2: plus(t[0], None if t[1] is None else -t[1]))
defjvp("multiply", lambda ns, t, out, x1, x2: plus(_lin(t[0], x2), _lin(t[1], x1)))
defjvp("divide", lambda ns, t, out, x1, x2: plus(
    None if t[0] is None else t[0] / x2, None if t[1] is None else -t[1] * out / x2))


def _pow(ns, t, out, x1, x2):
    t1 = None if t[0] is None else t[0] * x2 * ns.pow(x1, x2 - 1)
    if t[1] is None:
        return t1
    if is_scalar(x1):
        log1 = 0.0 if x1 == 0 else cmath.log(x1) if isinstance(x1, complex) or x1 < 0 else \
            math.log(x1)  # fmt: skip
        return plus(t1, t[1] * out * log1)
    safe = ns.where(x1 == 0, 1.0, x1)
    return plus(t1, ns.where(x1 == 0, 0.0, t[1] * out * ns.log(safe)))


defjvp("pow", _pow)


def _atan2(ns, t, out, x1, x2):
    d = x1 * x1 + x2 * x2
    return plus(_lin(t[0], x2 / d), _lin(t[1], -x1 / d))


defjvp("atan2", _atan2)
defjvp("hypot", lambda ns, t, out, x1, x2: plus(_lin(t[0], x1 / out), _lin(t[1], x2 / out)))
defjvp("logaddexp", lambda ns, t, out, x1, x2: plus(
    _lin(t[0], ns.exp(x1 - out)), _lin(t[1], ns.exp(x2 - out))))


def _weight(ns, like, first, tie):
    return ns.astype(first, like.dtype) + 0.5 * ns.astype(tie, like.dtype)


# maximum/minimum: at ties each side contributes half (the VJP's convention, transposed).
defjvp("maximum", lambda ns, t, out, x1, x2: plus(
    None if t[0] is None else t[0] * _weight(ns, t[0], x1 > x2, x1 == x2),
    None if t[1] is None else t[1] * _weight(ns, t[1], x2 > x1, x1 == x2)))
defjvp("minimum", lambda ns, t, out, x1, x2: plus(
    None if t[0] is None else t[0] * _weight(ns, t[0], x1 < x2, x1 == x2),
    None if t[1] is None else t[1] * _weight(ns, t[1], x2 < x1, x1 == x2)))
defjvp("copysign", lambda ns, t, out, x1, x2: None if t[0] is None else
       ns.where(ns.signbit(x1) == ns.signbit(out), t[0], -t[0]))
defjvp("nextafter", lambda ns, t, out, x1, x2: t[0])
defjvp("remainder", lambda ns, t, out, x1, x2: plus(
    t[0], None if t[1] is None else -t[1] * ns.floor(x1 / x2)))
