"""Comparisons, tests (isfinite, ...), logical and bitwise functions: rows without derivative.

The conventions all elementwise rows share are in ``__init__.py``."""

from __future__ import annotations

from ..._primitive import binary, unary
from ._kits import (
    broadcast_binary,
    broadcast_shape,
    broadcast_unary,
    broadcasting,
    buffers,
)

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


# -- isfinite, isinf, isnan, signbit: boolean results, no derivative -----------------------------

isfinite = unary("isfinite", "numeric")
isinf = unary("isinf", "numeric")
isnan = unary("isnan", "numeric")
signbit = unary("signbit", "real floating-point")

for _row in (isfinite, isinf, isnan, signbit):
    _row.nondifferentiable()
    _row.defbatch(broadcast_unary(_row))
    _row.defshape(broadcast_shape(_row), memory=buffers)


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
