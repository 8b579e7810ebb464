"""VJP rules of the sorting functions: ``sort`` routes cotangents back through its permutation."""

from __future__ import annotations

from .._primitive import defvjp, nondifferentiable


def _sort(ns, g, out, x, /, *, axis=-1, descending=False, stable=True):
    # out = take_along_axis(x, p); its adjoint applies the inverse permutation argsort(p).
    # Ties follow the (stable) permutation the forward pass used.
    p = ns.argsort(x, axis=axis, descending=descending, stable=True)
    return (ns.take_along_axis(g, ns.argsort(p, axis=axis), axis=axis),)


defvjp("sort", _sort, saves=("x",))
nondifferentiable("argsort")
