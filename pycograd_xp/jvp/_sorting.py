"""JVP rules of the sorting functions, derived from their VJP rules (the stable permutation)."""

from ._helpers import transposed

transposed("sort")
