"""Moments (var, std): their rows and rules.

The conventions the statistical rows share are in ``__init__.py``."""

from __future__ import annotations

import math
from typing import Any

from ... import _reductions as fast
from ..._primitive import Array, primitive
from .._rules.batching import reduction
from .._rules.jvp import TRANSPOSED
from .._rules.vjp import count, kept, norm_axes
from ._kits import (
    deviations,
    reduced_shape,
)

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
    centered = x - fast.mean(ns, x, axis, keepdims=True)
    # no degrees of freedom left (an empty axis, or correction as large as it): the value is
    # NumPy's 0/0, nan, and so is its gradient (an empty one where the axis is empty), not a
    # ZeroDivisionError
    dof = n - correction
    return (kept(ns, g, x.ndim, axis, keepdims) * centered * (2.0 / dof if dof else math.inf),)


@std.defvjp(saves=("x", "out"))
def std_vjp(ns, g, out, x, /, *, axis=None, correction=0.0, keepdims=False):
    # std = sqrt(var); where std is 0 (constant data) the gradient is taken as 0
    gv = ns.where(out == 0, 0.0, g / (2 * ns.where(out == 0, 1.0, out)))
    return _var_vjp(ns, gv, None, x, axis=axis, correction=correction, keepdims=keepdims)


for _row in (std, var):
    _row.defjvp(TRANSPOSED)
    _row.defbatch(reduction(_row))
    _row.defshape(reduced_shape(_row), memory=deviations)
