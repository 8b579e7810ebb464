"""VJP rules of the utility functions (``all``/``any`` return booleans)."""

from __future__ import annotations

from .._primitive import defvjp, nondifferentiable
from ..ops._rules.vjp import is_scalar


def _diff(ns, g, out, x, /, *, axis=-1, n=1, prepend=None, append=None):
    # diff is linear: out = D^n (prepend ++ x ++ append). The adjoint of one first difference
    # y_i = z_{i+1} - z_i is  z_j = y_{j-1} - y_j (zero outside), applied n times.
    axis = axis % x.ndim

    def pad(a, before):
        shape = list(a.shape)
        shape[axis] = 1
        z = ns.zeros(tuple(shape), dtype=a.dtype)
        return ns.concat([z, a] if before else [a, z], axis=axis)

    for _ in range(n):
        g = pad(g, True) - pad(g, False)
    sizes = []
    for part in (prepend, x, append):
        if part is None:
            sizes.append(0)
        elif is_scalar(part):
            sizes.append(1)
        else:
            sizes.append(part.shape[axis] if part.ndim == x.ndim else 1)
    cuts = [0, sizes[0], sizes[0] + sizes[1], sum(sizes)]
    pieces = []
    for i in range(3):
        idx = [slice(None)] * g.ndim
        idx[axis] = slice(cuts[i], cuts[i + 1])
        pieces.append(g[tuple(idx)])
    return pieces[1], pieces[0] if sizes[0] else None, pieces[2] if sizes[2] else None


defvjp("diff", _diff, diff_kwargs=("prepend", "append"))
nondifferentiable("all", "any")
