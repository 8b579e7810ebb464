"""JVP rules of indexing: gathers are linear in the array; ``x[key] = v`` is derived from its
VJP rule (it handles immutable backends and duplicate indices)."""

from ..namespace._ops import defjvp
from ._helpers import linear, transposed

linear("take", "take_along_axis")
defjvp("__getitem__", lambda ns, t, out, x, key: t[0][key])
transposed("__setitem__")
