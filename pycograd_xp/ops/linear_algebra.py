"""Linear algebra functions of the main namespace: matmul, matrix_transpose, tensordot, vecdot
(the ``linalg`` extension re-exports them, ``_primitive.LINALG_ALIASES``: rows declared once).

VJPs are holomorphic in the JAX convention: transposes, not conjugate transposes, except
vecdot, which conjugates x1. JVPs: products are bilinear, so the tangent is the product with one
factor replaced by its tangent, summed (a constant factor costs nothing).

Batching: matmul, tensordot and vecdot batch as one product, never one per example: a batched
vector or matrix against an unbatched matrix folds the batch into the rows of a single matrix
product; two batched operands use matmul's own stacking.

What the calls allocate beside their outputs (measured with tracemalloc over float32 and
float64 operands in C order, transposed and strided):

* ``matmul`` is a gufunc, which cannot cast or buffer its core axes piecewise: an operand whose
  dtype is not the result's is copied whole, cast (float32 data times float64 weights: a
  float64 copy of the data). Transposed and strided operands need no copy (BLAS takes the
  former, NumPy's own loop the latter).
* ``tensordot`` transposes and reshapes both operands into matrices, then calls ``dot``: the
  reshape copies an operand of more than two dimensions whose contracted axes are not already
  where the product wants them (last for the first operand, first for the second) or whose
  layout is not C order; ``dot`` then copies an operand of another dtype (cast) and a matrix
  BLAS cannot take (strided, or broadcast with zero strides as a reduction's cotangent is).
  The abstract arrays know only C order or not, so a transposed matrix counts as copied too.
* ``vecdot`` is a gufunc: only the iterator's buffers for broadcast operands.
"""

from __future__ import annotations

import math
from typing import Any

import array_api_compat.numpy as npx

from .._primitive import primitive
from ._rules.batching import align, to_rank
from ._rules.jvp import call, linear, plus
from ._rules.shapes import BUFFER_ELEMENTS, broadcast, new, probe_dtype, size_bytes, view
from ._rules.vjp import mT, tensordot_axes

# -- kits shared by the rows below (and by the linalg extension's products) --------------------


def bilinear(row: Any) -> Any:
    """The JVP of a product (bilinear in ``x1, x2``): the product with one factor replaced by
    its tangent, summed; a constant factor costs nothing."""
    name = row.name

    def rule(ns, t, out, x1, x2, **kwargs):
        return plus(
            None if t[0] is None else call(ns, name, t[0], x2, **kwargs),
            None if t[1] is None else call(ns, name, x1, t[1], **kwargs),
        )

    return rule


# -- matmul --------------------------------------------------------------------------------------


@primitive("numeric")
def matmul(bk: Any, x1: Any, x2: Any, /) -> Any:
    return bk.matmul(x1, x2)


@matmul.defvjp(saves=("x1", "x2"), takes_needs=True)
def _(ns, g, out, x1, x2, /, *, needs=(0, 1)):
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


matmul.defjvp(bilinear(matmul))


@matmul.defbatch
def _(ns, dims, x1, x2, /):
    b1, b2 = dims
    r1, r2 = x1.ndim - b1, x2.ndim - b2
    if b1 and not b2:
        if r1 == 1:
            if r2 <= 2:  # (B, n) @ (n,) or (n, m): one product
                return ns.matmul(x1, x2)
            y = ns.matmul(to_rank(ns, x1[:, None, :], r2), x2)  # (B, ..., 1, m)
            return y[..., 0, :]
        if r2 == 2 and r1 == 2:  # (B, k, n) @ (n, m) as (B*k, n) @ (n, m)
            n, k = x1.shape[0], x1.shape[1]
            return ns.reshape(
                ns.matmul(ns.reshape(x1, (n * k, x1.shape[2])), x2), (n, k, x2.shape[1])
            )
        return ns.matmul(to_rank(ns, x1, max(r1, r2)), x2)
    if b2 and not b1:
        if r2 == 1:
            if r1 == 1:
                return ns.matmul(x2, x1)
            if r1 == 2:  # (k, n) @ v for each v: (B, n) @ (n, k)
                return ns.matmul(x2, ns.matrix_transpose(x1))
            return ns.moveaxis(ns.matmul(x1, ns.matrix_transpose(x2)), -1, 0)
        if r1 == 1:
            return ns.matmul(x1, x2)
        if r1 == 2:  # (k, n) @ (B, ..., n, m): one product over (n, B*...*m)
            n, shape = x2.shape[-2], tuple(x2.shape)
            t = ns.moveaxis(x2, -2, 0)  # (n, B, ..., m)
            y = ns.matmul(x1, ns.reshape(t, (n, -1)))  # (k, B*...*m)
            y = ns.reshape(y, (x1.shape[0], *shape[:-2], shape[-1]))
            return ns.moveaxis(y, 0, -2)
        return ns.matmul(x1, to_rank(ns, x2, max(r1, r2)))
    # both batched
    if r1 == 1 and r2 == 1:
        return ns.sum(x1 * x2, axis=-1)
    if r1 == 1:
        return ns.matmul(to_rank(ns, x1[:, None, :], r2), x2)[..., 0, :]
    if r2 == 1:
        return ns.matmul(x1, to_rank(ns, x2[..., None], r1))[..., 0]
    r = max(r1, r2)
    return ns.matmul(to_rank(ns, x1, r), to_rank(ns, x2, r))


def _matmul_shape(a, x1, x2, /):
    s1, s2 = x1.shape, x2.shape
    if len(s1) == 1 and len(s2) == 1:
        if s1 != s2:
            raise ValueError(f"matmul: shapes {s1} and {s2} are not aligned")
        shape = ()
    else:
        m1 = (1,) + s1 if len(s1) == 1 else s1
        m2 = s2 + (1,) if len(s2) == 1 else s2
        if m1[-1] != m2[-2]:
            raise ValueError(f"matmul: mismatch in the core dimension ({s1} @ {s2})")
        shape = broadcast(m1[:-2], m2[:-2]) + (m1[-2], m2[-1])
        if len(s1) == 1:
            shape = shape[:-2] + shape[-1:]
        if len(s2) == 1:
            shape = shape[:-1]
    return new(shape, probe_dtype(npx.matmul, x1, x2))


def _cast_copies(out, *xs):
    """The bytes of whole copies, in the result's dtype, of the operands of another dtype."""
    return sum(x.size * out.dtype.itemsize for x in xs if x.dtype != out.dtype)


def _matmul_memory(out, x1, x2, /):
    return _cast_copies(out, x1, x2)


matmul.defshape(_matmul_shape, memory=_matmul_memory)


# -- matrix_transpose ----------------------------------------------------------------------------


@primitive()
def matrix_transpose(bk: Any, x: Any, /) -> Any:
    return bk.matrix_transpose(x)


matrix_transpose.defvjp(lambda ns, g, out, x, /: (mT(ns, g),))
matrix_transpose.defjvp(linear(matrix_transpose))
matrix_transpose.defbatch(lambda ns, dims, x, /: ns.matrix_transpose(x))


def _matrix_transpose_shape(a, x, /):
    return view(x, x.shape[:-2] + (x.shape[-1], x.shape[-2]), contiguous=False)


matrix_transpose.defshape(_matrix_transpose_shape)


# -- tensordot -----------------------------------------------------------------------------------


@primitive("numeric")
def tensordot(bk: Any, x1: Any, x2: Any, /, *, axes: Any = 2) -> Any:
    return bk.tensordot(x1, x2, axes=axes)


def _inverse(perm):
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


@tensordot.defvjp(saves=("x1", "x2"), takes_needs=True)
def _(ns, g, out, x1, x2, /, *, axes=2, needs=(0, 1)):
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


tensordot.defjvp(bilinear(tensordot))


@tensordot.defbatch
def _(ns, dims, x1, x2, /, *, axes=2):
    b1, b2 = dims
    r1, r2 = x1.ndim - b1, x2.ndim - b2
    a1, a2 = tensordot_axes(axes, r1, r2)
    if b1 and not b2:
        return ns.tensordot(x1, x2, axes=([i + 1 for i in a1], a2))
    if b2 and not b1:
        y = ns.tensordot(x1, x2, axes=(a1, [i + 1 for i in a2]))
        return ns.moveaxis(y, r1 - len(a1), 0)
    n = x1.shape[0]
    f1 = [i for i in range(r1) if i not in a1]
    f2 = [i for i in range(r2) if i not in a2]
    s1 = [x1.shape[i + 1] for i in f1]
    s2 = [x2.shape[i + 1] for i in f2]
    p1 = ns.permute_dims(x1, (0, *[i + 1 for i in f1], *[i + 1 for i in a1]))
    p2 = ns.permute_dims(x2, (0, *[i + 1 for i in a2], *[i + 1 for i in f2]))
    c = 1
    for i in a1:
        c *= x1.shape[i + 1]
    m1 = ns.reshape(p1, (n, -1, c))
    m2 = ns.reshape(p2, (n, c, -1))
    return ns.reshape(ns.matmul(m1, m2), (n, *s1, *s2))


def _tensordot_shape(a, x1, x2, /, *, axes=2):
    a1, a2 = tensordot_axes(axes, x1.ndim, x2.ndim)
    shape = tuple(s for i, s in enumerate(x1.shape) if i not in a1) + tuple(
        s for i, s in enumerate(x2.shape) if i not in a2
    )
    return new(shape, probe_dtype(npx.tensordot, x1, x2, axes=axes))


def _tensordot_memory(out, x1, x2, /, *, axes=2):
    a1, a2 = tensordot_axes(axes, x1.ndim, x2.ndim)
    moved = (
        x1.ndim > 2 and a1 != list(range(x1.ndim - len(a1), x1.ndim)),
        x2.ndim > 2 and a2 != list(range(len(a2))),
    )
    total = 0
    for x, m in zip((x1, x2), moved, strict=True):
        reshaped = m or (not x.contiguous and x.ndim > 2)  # a C-ordered copy of the operand
        total += size_bytes(x) if reshaped else 0
        if x.dtype != out.dtype:  # dot casts the matrix: a copy in the result's dtype
            total += x.size * out.dtype.itemsize
        elif not reshaped and not x.contiguous:  # dot copies a matrix BLAS cannot take
            total += size_bytes(x)
    return total


tensordot.defshape(_tensordot_shape, memory=_tensordot_memory)


# -- vecdot --------------------------------------------------------------------------------------


@primitive("numeric")
def vecdot(bk: Any, x1: Any, x2: Any, /, *, axis: int = -1) -> Any:
    return bk.vecdot(x1, x2, axis=axis)


@vecdot.defvjp(saves=("x1", "x2"))
def _(ns, g, out, x1, x2, /, *, axis=-1):
    # out = sum(conj(x1) * x2): x2 gets g conj(x1); x1 gets conj(g x2).
    ge = ns.expand_dims(g, axis=axis)
    return ns.conj(ge * x2), ge * ns.conj(x1)


vecdot.defjvp(bilinear(vecdot))


@vecdot.defbatch
def _(ns, dims, x1, x2, /, *, axis=-1):
    x1, x2 = align(ns, dims, x1, x2)
    if axis >= 0:
        axis = axis - max(x1.ndim, x2.ndim)
    return ns.vecdot(x1, x2, axis=axis)


def _vecdot_shape(a, x1, x2, /, *, axis=-1):
    shape = list(broadcast(x1.shape, x2.shape))
    del shape[axis % len(shape)]
    return new(shape, probe_dtype(npx.vecdot, x1, x2, axis=axis))


def _vecdot_memory(out, x1, x2, /, *, axis=-1):
    full = broadcast(x1.shape, x2.shape)
    k = sum(1 for x in (x1, x2) if x.shape != full)
    return k * min(math.prod(full), BUFFER_ELEMENTS) * out.dtype.itemsize


vecdot.defshape(_vecdot_shape, memory=_vecdot_memory)
