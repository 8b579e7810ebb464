"""JVP rules of the utility functions: ``diff`` is linear in ``x``, ``prepend`` and ``append``."""

from ._helpers import linear

linear("diff")
