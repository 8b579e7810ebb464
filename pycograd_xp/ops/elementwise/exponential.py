"""Exponentials and logarithms: their rows and rules.

The conventions all elementwise rows share are in ``__init__.py``."""

from __future__ import annotations

import math
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
from ._special_values import complex_row

# -- exp -----------------------------------------------------------------------------------------

exp = smooth_unary("exp", "floating-point", lambda ns, v, out, x: v * out, saves=("out",))


# -- expm1 ---------------------------------------------------------------------------------------


def _expm1(bk: Any, x: Any) -> Any:
    # NumPy's complex expm1 gets the special cases at infinities and the sign of a zero result
    # wrong; exp(x) - 1 has them right there, and expm1 stays exact everywhere else.
    out = bk.expm1(x)
    if not isdtype(bk, out.dtype, "complex floating"):
        return out
    return bk.where(bk.isfinite(x) & (x != 0), out, bk.exp(x) - 1)


expm1 = unary("expm1", "floating-point", _expm1)
expm1.defvjp(lambda ns, g, out, x: (g * (out + 1),), saves=("out",))
expm1.defjvp(on_tangent(lambda ns, t, out, x: t * (out + 1)))
broadcasting(expm1)


# -- log -----------------------------------------------------------------------------------------

log = smooth_unary(
    "log", "floating-point", lambda ns, v, out, x: v / x, impl=complex_row("log", sv.log)
)


# -- log10 ---------------------------------------------------------------------------------------

log10 = smooth_unary("log10", "floating-point", lambda ns, v, out, x: v / (x * math.log(10.0)))


# -- log1p ---------------------------------------------------------------------------------------

log1p = smooth_unary(
    "log1p",
    "floating-point",
    lambda ns, v, out, x: v / (x + 1),
    impl=complex_row("log1p", sv.log),
)


# -- log2 ----------------------------------------------------------------------------------------

log2 = smooth_unary("log2", "floating-point", lambda ns, v, out, x: v / (x * math.log(2.0)))


# -- logaddexp -----------------------------------------------------------------------------------

logaddexp = smooth_binary(
    "logaddexp",
    "real floating-point",
    lambda ns, out, x1, x2: (ns.exp(x1 - out), ns.exp(x2 - out)),
    saves=("x1", "x2", "out"),
)
