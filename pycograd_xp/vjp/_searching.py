"""VJP rules of the searching functions: only ``where`` selects values."""

from __future__ import annotations

from ..namespace._ops import defvjp, nondifferentiable
from ._helpers import is_scalar


def _where(ns, g, out, condition, x1, x2, /):
    zero = ns.zeros_like(g)
    return (None,
            None if is_scalar(x1) else ns.where(condition, g, zero),
            None if is_scalar(x2) else ns.where(condition, zero, g))  # fmt: skip


defvjp("where", _where, saves=("condition",))
nondifferentiable("argmax", "argmin", "count_nonzero", "nonzero", "searchsorted")
