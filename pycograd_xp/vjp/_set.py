"""Set functions return values found in the input and integer indices/counts: declared
non-differentiable (``unique_values`` of floats has a gradient only almost nowhere)."""

from __future__ import annotations

from ..namespace._ops import nondifferentiable

nondifferentiable("isin", "unique_all", "unique_counts", "unique_inverse", "unique_values")
