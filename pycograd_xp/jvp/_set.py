"""JVP rules of the set functions, derived from their VJP rules (first occurrences)."""

from ..ops._rules.jvp import transposed_rows

transposed_rows("unique_all", "unique_counts", "unique_inverse", "unique_values")
