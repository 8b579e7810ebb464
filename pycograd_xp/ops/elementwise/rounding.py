"""Rounding (ceil, floor, round, trunc): piecewise constant; their rows and rules.

The conventions all elementwise rows share are in ``__init__.py``."""

from __future__ import annotations

from ..._primitive import unary
from .._rules.shapes import (
    measured_layouts,
)
from ._kits import (
    broadcast_shape,
    broadcast_unary,
    buffers,
)

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
