"""VJP rules of matmul, tensordot, vecdot and matrix_transpose (holomorphic in the JAX
convention: transposes, not conjugate transposes, except vecdot, which conjugates x1)."""

from __future__ import annotations

from .._primitive import defvjp
from ..ops._rules.vjp import mT, tensordot_axes


def _matmul(ns, g, out, x1, x2, /, *, needs=(0, 1)):
    # With a vector operand the cotangents are an outer product (elementwise) and a
    # vector-matrix product: no transposed copy of the matrix (on Cubed a transpose is a pass
    # over the data). Otherwise promote as matmul does; the engine sums broadcast batch axes.
    if x1.ndim == 1 and x2.ndim == 1:  # an inner product
        return g * x2, g * x1
    if x2.ndim == 1:  # (..., n, d) @ (d,) -> (..., n)
        ga = g[..., :, None] * x2 if 0 in needs else None
        gb = (g[..., None, :] @ x1)[..., 0, :] if 1 in needs else None
        return ga, gb
    if x1.ndim == 1:  # (d,) @ (..., d, m) -> (..., m)
        ga = (x2 @ g[..., :, None])[..., :, 0] if 0 in needs else None
        gb = x1[:, None] * g[..., None, :] if 1 in needs else None
        return ga, gb
    ga = g @ mT(ns, x2) if 0 in needs else None
    gb = mT(ns, x1) @ g if 1 in needs else None
    return ga, gb


def _inverse(perm):
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def _tensordot(ns, g, out, x1, x2, /, *, axes=2, needs=(0, 1)):
    a_ax, b_ax = tensordot_axes(axes, x1.ndim, x2.ndim)
    free_a = [i for i in range(x1.ndim) if i not in a_ax]
    free_b = [i for i in range(x2.ndim) if i not in b_ax]
    na = len(free_a)
    # g . x2 over x2's free axes: axes free_a + (x1's contracted axes, in x2's axis order)
    g1 = g2 = None
    if 0 in needs:
        t1 = ns.tensordot(g, x2, axes=(list(range(na, g.ndim)), free_b))
        order1 = free_a + [a_ax[b_ax.index(j)] for j in sorted(b_ax)]
        g1 = ns.permute_dims(t1, _inverse(order1))
    if 1 in needs:  # x1 . g over x1's free axes: (x2's contracted axes, in x1's order) + free_b
        t2 = ns.tensordot(x1, g, axes=(free_a, list(range(na))))
        order2 = [b_ax[a_ax.index(i)] for i in sorted(a_ax)] + free_b
        g2 = ns.permute_dims(t2, _inverse(order2))
    return g1, g2


def _vecdot(ns, g, out, x1, x2, /, *, axis=-1):
    # out = sum(conj(x1) * x2): x2 gets g conj(x1); x1 gets conj(g x2).
    ge = ns.expand_dims(g, axis=axis)
    return ns.conj(ge * x2), ge * ns.conj(x1)


defvjp("matmul", _matmul, saves=("x1", "x2"), takes_needs=True)
defvjp("tensordot", _tensordot, saves=("x1", "x2"), takes_needs=True)
defvjp("vecdot", _vecdot, saves=("x1", "x2"))
defvjp("matrix_transpose", lambda ns, g, out, x, /: (mT(ns, g),))
