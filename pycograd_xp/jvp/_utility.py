"""JVP rules of the utility functions: ``diff`` is linear in ``x``, ``prepend`` and ``append``."""

from ..ops._rules.jvp import linear_rows

linear_rows("diff")
