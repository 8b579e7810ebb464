"""JVP rules of the searching functions: ``where`` is linear in its two value arguments."""

from ..ops._rules.jvp import linear_rows

linear_rows("where")
