"""VJP rules of the searching functions: only ``where`` selects values."""

from __future__ import annotations

from ..namespace._ops import defvjp, nondifferentiable


def _where(ns, g, out, condition, x1, x2, /, *, needs=(1, 2)):
    zero = ns.zeros_like(g)
    return (None,
            ns.where(condition, g, zero) if 1 in needs else None,
            ns.where(condition, zero, g) if 2 in needs else None)  # fmt: skip


defvjp("where", _where, saves=("condition",), takes_needs=True)
nondifferentiable("argmax", "argmin", "count_nonzero", "nonzero", "searchsorted")
