"""JVP rules of the set functions, derived from their VJP rules (first occurrences)."""

from ._helpers import transposed

transposed("unique_all", "unique_counts", "unique_inverse", "unique_values")
