"""Set functions. The unique values are a gather from the input: each value's cotangent goes to
the first occurrence of that value in the input (JAX's choice; where values repeat, the
function is not differentiable, and that is one valid subgradient). Indices, inverse indices,
counts and ``isin`` are integers or booleans: no gradient."""

from __future__ import annotations

from .._primitive import defvjp, nondifferentiable
from ..ops.indexing import _scatter


def _unique_all(ns, g, out, x, /):
    return (_scatter(ns, x, g[0], out[1]),)


def _unique_counts(ns, g, out, x, /):
    return (_scatter(ns, x, g[0], ns.unique_all(x).indices),)


def _unique_inverse(ns, g, out, x, /):
    return (_scatter(ns, x, g[0], ns.unique_all(x).indices),)


def _unique_values(ns, g, out, x, /):
    return (_scatter(ns, x, g, ns.unique_all(x).indices),)


defvjp("unique_all", _unique_all, saves=("out",))
defvjp("unique_counts", _unique_counts, saves=("x",))
defvjp("unique_inverse", _unique_inverse, saves=("x",))
defvjp("unique_values", _unique_values, saves=("x",))
nondifferentiable("isin")
