"""JVP rules of the sorting functions, derived from their VJP rules (the stable permutation)."""

from ..ops._rules.jvp import transposed_rows

transposed_rows("sort")
