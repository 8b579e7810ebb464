"""Trigonometric and hyperbolic functions: their rows and rules.

The conventions all elementwise rows share are in ``__init__.py``."""

from __future__ import annotations

from typing import Any

from ..._primitive import unary
from .._rules.dtypes import isdtype
from . import _special_values as sv
from ._kits import (
    broadcasting,
    on_tangent,
    smooth_binary,
    smooth_unary,
)
from ._special_values import complex_row, corrected

# -- acos ----------------------------------------------------------------------------------------

acos = smooth_unary("acos", "floating-point", lambda ns, v, out, x: -v / ns.sqrt(1 - x * x))


# -- acosh ---------------------------------------------------------------------------------------

acosh = smooth_unary(
    "acosh",
    "floating-point",
    lambda ns, v, out, x: v / (ns.sqrt(x - 1) * ns.sqrt(x + 1)),
    impl=complex_row("acosh", sv.acosh),
)


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


# -- cos -----------------------------------------------------------------------------------------

cos = smooth_unary("cos", "floating-point", lambda ns, v, out, x: -v * ns.sin(x))


# -- cosh ----------------------------------------------------------------------------------------

cosh = smooth_unary("cosh", "floating-point", lambda ns, v, out, x: v * ns.sinh(x))


# -- sin -----------------------------------------------------------------------------------------

sin = smooth_unary("sin", "floating-point", lambda ns, v, out, x: v * ns.cos(x))


# -- sinh ----------------------------------------------------------------------------------------

sinh = smooth_unary("sinh", "floating-point", lambda ns, v, out, x: v * ns.cosh(x))


# -- tan -----------------------------------------------------------------------------------------

tan = smooth_unary(
    "tan", "floating-point", lambda ns, v, out, x: v * (1 + out * out), saves=("out",)
)


# -- tanh ----------------------------------------------------------------------------------------


def _tanh(bk: Any, x: Any) -> Any:
    # The standard asks tanh(+inf + bj) = 1 + 0j for finite b > 0, so (by tanh(conj(x)) =
    # conj(tanh(x)) and oddness) the zero imaginary part of tanh(+-inf + bj) takes the sign of b.
    # NumPy gives C99's 1 + 0j * sin(2b), whose zero follows sin(2b) instead: flip it back.
    # A backend that misses tanh(±0 + inf j) and tanh(±0 + NaN j) (CuPy) gets them put right.
    out = bk.tanh(x)
    if not isdtype(bk, out.dtype, "complex floating"):
        return out
    b = bk.imag(x)
    flipped = bk.signbit(bk.imag(out)) != bk.signbit(b)
    out = bk.where(bk.isinf(bk.real(x)) & bk.isfinite(b) & flipped, bk.conj(out), out)
    return sv.tanh(bk, out, x) if corrected(bk, "tanh") else out


tanh = unary("tanh", "floating-point", _tanh)


@tanh.defvjp(saves=("out",), takes_owned=True)
def tanh_vjp(ns, g, out, x, /, *, owned=False):
    """``g (1 - out^2)`` as ``g - out^2 g``: three passes, the last one into ``g`` itself when
    the tape says only this pass holds it (``owned``), as hand-written backprop's
    ``g *= 1 - h * h``; else a new array (which compile's replay writes into a dead buffer).
    Augmented assignment writes the fresh temporary in place on backends with writable
    arrays and rebinds it elsewhere (Cubed, or while recording for higher order). A large
    array goes block by block where the backend writes in place (``nn/pieces.tanh_grad``)."""
    if g.size > 32768:  # (256 KiB of float64: one block below; nn/pieces.py loads after)
        from ..nn.pieces import tanh_grad

        if (r := tanh_grad(ns, g, out, owned)) is not None:
            return (r,)
    t = out * out
    t *= g
    if owned:
        g -= t
        return (g,)
    return (g - t,)


tanh.defjvp(on_tangent(lambda ns, t, out, x: t * (1 - out * out)))
broadcasting(tanh)
