"""Creation functions: ``asarray`` of a tracked array is the identity (it keeps the tape); the
others make constants."""

from __future__ import annotations

from .._primitive import defvjp, nondifferentiable

defvjp("asarray", lambda ns, g, out, obj, /, **kw: (g,))
nondifferentiable(
    "arange", "empty", "empty_like", "eye", "from_dlpack", "full", "full_like", "linspace",
    "ones", "ones_like", "zeros", "zeros_like",
)  # fmt: skip
defvjp("meshgrid", lambda ns, g, out, *arrays, indexing="xy": tuple(
    _meshgrid_ct(ns, gi, i, len(arrays), indexing) for i, gi in enumerate(g)))  # fmt: skip
defvjp("tril", lambda ns, g, out, x, /, *, k=0: (ns.tril(g, k=k),))
defvjp("triu", lambda ns, g, out, x, /, *, k=0: (ns.triu(g, k=k),))


def _meshgrid_ct(ns, g, i, n, indexing):
    # Output i varies along one axis (axis i; with "xy" the first two are swapped) and repeats
    # input i along the others: its cotangent sums over them.
    axis = i
    if indexing == "xy" and n >= 2 and i < 2:
        axis = 1 - i
    others = tuple(a for a in range(g.ndim) if a != axis)
    return ns.sum(g, axis=others) if others else g
