"""JVP rules of the statistical functions: sums and means linear, the rest derived from their
VJP rules (ties of max/min, zeros in prod)."""

from ._helpers import linear, transposed

linear("cumulative_sum", "mean", "sum")
transposed("cumulative_prod", "max", "min", "prod", "std", "var")
