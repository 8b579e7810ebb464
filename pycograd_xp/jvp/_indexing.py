"""JVP rules of indexing: gathers are linear in the array; ``x[key] = v`` is derived from its
VJP rule (it handles immutable backends and duplicate indices)."""

from .._primitive import defjvp
from ..ops._rules.jvp import linear_rows, transposed_rows

linear_rows("take", "take_along_axis")
defjvp("__getitem__", lambda ns, t, out, x, key: t[0][key])
transposed_rows("__setitem__")
