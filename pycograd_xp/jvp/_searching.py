"""JVP rules of the searching functions: ``where`` is linear in its two value arguments."""

from ._helpers import linear

linear("where")
