"""JVP rules of the data-type functions."""

from ._helpers import linear

linear("astype")
