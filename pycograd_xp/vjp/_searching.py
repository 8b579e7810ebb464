"""VJP rules of the searching functions: only ``where`` selects values."""

from __future__ import annotations

from .._primitive import defvjp, nondifferentiable
from ..namespace._searching import select


def _where(ns, g, out, condition, x1, x2, /, *, needs=(1, 2)):
    return (None,
            select(ns, condition, g, 0) if 1 in needs else None,
            select(ns, condition, 0, g) if 2 in needs else None)  # fmt: skip


defvjp("where", _where, saves=("condition",), takes_needs=True)
nondifferentiable("argmax", "argmin", "count_nonzero", "nonzero", "searchsorted")
