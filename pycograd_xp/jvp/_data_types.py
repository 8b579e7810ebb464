"""JVP rules of the data-type functions."""

from ..ops._rules.jvp import linear_rows

linear_rows("astype")
