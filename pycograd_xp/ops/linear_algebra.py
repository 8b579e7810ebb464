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
import numpy as np

from .._abstract import AbstractArray, models_a_gpu
from .._primitive import Array, primitive
from ..namespace._backend import capabilities
from ._rules.batching import pair_along_axis, to_rank
from ._rules.jvp import call, linear, plus
from ._rules.shapes import (
    BUFFER_ELEMENTS,
    broadcast,
    new,
    not_in_c_order,
    probe_dtype,
    size_bytes,
    view,
)
from ._rules.vjp import chunked, eye, mT, raw, tensordot_axes

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


def stack_product(bk: Any, x1: Any, x2: Any) -> Any:
    """``x1 @ x2`` for a stack ``x1`` (..., n, k) and a matrix ``x2`` (k, m) (a linear
    layer's product): on an eager backend that writes in place, one 2-D product over every
    row of the stack where those rows are one strided matrix (a view), as PyTorch's matmul
    folds it. NumPy's matmul calls BLAS once per matrix of a stack; one GEMM over all the
    rows is 5-12 % faster on the transformer block's layers (``benchmarks/bench_transformer.py
    --gemms``). Anything else, and a stack that only a copy could flatten, is the backend's
    matmul: the same values and the same allocations (the result alone).

    Where the backend writes a product into a given array (``matmul_into``) and the operands
    share a dtype, the folded product goes into a 2-D view of the stacked result, allocated
    first: the result owns its memory as the backend's matmul's would (a reshape of the 2-D
    product is a view), so a VJP handed it as its cotangent may write into it (``owned``;
    GELU's), and a compiled replay may reuse its buffer. The same values, bit for bit."""
    if x1.ndim > 2 and x2.ndim == 2 and raw(bk):
        try:
            c = capabilities(bk)
        except TypeError:  # a namespace no namespace() call has met
            return bk.matmul(x1, x2)
        if c.mutable and not c.chunked and not c.lazy:
            rows, m = math.prod(x1.shape[:-1]), x2.shape[-1]
            try:  # the standard's reshape without a copy raises where a copy is needed
                flat = bk.reshape(x1, (rows, x1.shape[-1]), copy=False)
            except (AttributeError, ValueError):
                return bk.matmul(x1, x2)
            if c.matmul_into is None or x1.dtype != x2.dtype:
                return bk.reshape(bk.matmul(flat, x2), (*x1.shape[:-1], m))
            like = c.like_kwargs(x1) if c.like_kwargs is not None else {}
            out = bk.empty((*x1.shape[:-1], m), dtype=x1.dtype, **like)
            c.matmul_into(flat, x2, bk.reshape(out, (rows, m)))
            return out
    return bk.matmul(x1, x2)


@primitive("numeric")
def matmul(bk: Any, x1: Array, x2: Array, /) -> Any:
    return stack_product(bk, x1, x2)


@matmul.defvjp(saves=("x1", "x2"), takes_needs=True)
def matmul_vjp(ns, g, out, x1, x2, /, *, needs=(0, 1)):
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
    ga = stack_product(ns, g, mT(ns, x2)) if 0 in needs else None
    if 1 in needs and x2.ndim == 2 and x1.ndim > 2 and not chunked(ns):
        # a stack of inputs against one weight: one product over every row of the stack, not
        # a product per matrix summed (a stack of the weight's size, then a pass over it);
        # a view of x1 and g where they are contiguous (a chunked backend reshapes only
        # regular chunks: the per-matrix products there)
        # (the rows counted, not -1: a reshape of no elements cannot infer an axis)
        n, m, rows = x1.shape[-1], g.shape[-1], math.prod(x1.shape[:-1])
        gb = mT(ns, ns.reshape(x1, (rows, n))) @ ns.reshape(g, (rows, m))
    else:
        gb = mT(ns, x1) @ g if 1 in needs else None
    return ga, gb


matmul.defjvp(bilinear(matmul))


@matmul.defbatch
def matmul_batch(ns, dims, x1, x2, /):
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
            rest = math.prod(shape[:-2]) * shape[-1]  # (not -1: n = 0 leaves it unsolved)
            y = ns.matmul(x1, ns.reshape(t, (n, rest)))  # (k, B*...*m)
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
    copies = _cast_copies(out, x1, x2)
    if models_a_gpu():
        # CuPy copies, in the result's dtype (a cast operand's copy is counted above, the same
        # one): in a product of stacks each operand that is not C-ordered (a transposed view, a
        # broadcast); in a 2-D product each but a matrix transpose (cuBLAS reads one as it is,
        # measured: the MLP step), so one with gaps or a broadcast (the cotangent of a sum:
        # measured, the gradient of sum(inv(a)) at 1.25x its projection before)
        stacks = len(out.shape) > 2
        copies += sum(
            x.size * out.dtype.itemsize
            for x in (x1, x2)
            if x.dtype == out.dtype and not x.contiguous and (stacks or not x.transposed)
        )
    return copies


matmul.defshape(_matmul_shape, memory=_matmul_memory)


# -- matrix_transpose ----------------------------------------------------------------------------


@primitive()
def matrix_transpose(bk: Any, x: Array, /) -> Any:
    return bk.matrix_transpose(x)


matrix_transpose.defvjp(lambda ns, g, out, x, /: (mT(ns, g),))
matrix_transpose.defjvp(linear(matrix_transpose))
matrix_transpose.defbatch(lambda ns, dims, x, /: ns.matrix_transpose(x))


def _matrix_transpose_shape(a, x, /):
    return view(x, x.shape[:-2] + (x.shape[-1], x.shape[-2]), contiguous=False, transposed=True)


matrix_transpose.defshape(_matrix_transpose_shape)


# -- tensordot -----------------------------------------------------------------------------------


@primitive("numeric")
def tensordot(bk: Any, x1: Array, x2: Array, /, *, axes: Any = 2) -> Any:
    return bk.tensordot(x1, x2, axes=axes)


def _inverse(perm):
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


@tensordot.defvjp(saves=("x1", "x2"), takes_needs=True)
def tensordot_vjp(ns, g, out, x1, x2, /, *, axes=2, needs=(0, 1)):
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
def tensordot_batch(ns, dims, x1, x2, /, *, axes=2):
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
    m1 = ns.reshape(p1, (n, math.prod(s1), c))  # (no -1: a size may be 0)
    m2 = ns.reshape(p2, (n, c, math.prod(s2)))
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
def vecdot(bk: Any, x1: Array, x2: Array, /, *, axis: int = -1) -> Any:
    return bk.vecdot(x1, x2, axis=axis)


@vecdot.defvjp(saves=("x1", "x2"))
def vecdot_vjp(ns, g, out, x1, x2, /, *, axis=-1):
    # out = sum(conj(x1) * x2): x2 gets g conj(x1); x1 gets conj(g x2).
    ge = ns.expand_dims(g, axis=axis)
    return ns.conj(ge * x2), ge * ns.conj(x1)


vecdot.defjvp(bilinear(vecdot))


vecdot.defbatch(pair_along_axis("vecdot"))


def _vecdot_shape(a, x1, x2, /, *, axis=-1):
    shape = list(broadcast(x1.shape, x2.shape))
    del shape[axis % len(shape)]
    return new(shape, probe_dtype(npx.vecdot, x1, x2, axis=axis))


def _vecdot_memory(out, x1, x2, /, *, axis=-1):
    # a broadcast operand is buffered; an operand in another dtype is cast whole (a gufunc
    # casts whole operands, as matmul's)
    full = broadcast(x1.shape, x2.shape)
    k = sum(1 for x in (x1, x2) if x.shape != full)
    cast = sum(x.size * out.dtype.itemsize for x in (x1, x2) if x.dtype != out.dtype)
    return k * min(math.prod(full), BUFFER_ELEMENTS) * out.dtype.itemsize + cast


vecdot.defshape(_vecdot_shape, memory=_vecdot_memory)


# -- _einsum -------------------------------------------------------------------------------------
# Not a function of the standard (so a private attribute of each namespace, as the rows behind
# pycograd_xp.nn): NumPy's einsum, which ``numpy.einsum`` on our arrays reaches
# (numpy_api/linalg.py). Its VJP is einsum again: the cotangent of operand i contracts
# the output's cotangent with the other operands onto operand i's subscripts (a repeated
# subscript, a diagonal, ties its copies with an identity matrix; a subscript no other term has
# is summed in the forward, so the cotangent is constant along it). Its JVP is the product
# rule; a batched operand gets one more subscript, which the output keeps first.

_EINSUM_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def einsum_terms(subscripts: str, ndims: Any) -> tuple[list[str], str]:
    """The input terms and the output term of ``subscripts`` for operands of ranks ``ndims``,
    explicit: each ellipsis spelled out in letters the subscripts do not use (broadcast from
    the right, as NumPy's), the implicit output (no ``->``) as NumPy makes it (the ellipsis's
    axes, then the subscripts that appear once, in ASCII order)."""
    spec = subscripts.replace(" ", "")
    lhs, arrow, rhs = spec.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ndims):
        raise ValueError(
            f"einsum: {len(terms)} operand terms in {subscripts!r} for {len(ndims)} operands"
        )
    used = set(spec) - {",", "-", ">", "."}
    for c in used:
        if c not in _EINSUM_LETTERS:
            raise ValueError(f"einsum: invalid subscript {c!r} in {subscripts!r}")
    free = [c for c in _EINSUM_LETTERS if c not in used]
    ell_rank = 0
    for t, nd in zip(terms, ndims, strict=True):
        if "..." in t:
            ell_rank = max(ell_rank, nd - (len(t) - 3))
    ell = "".join(free[:ell_rank])
    out_terms = []
    for t, nd in zip(terms, ndims, strict=True):
        if "..." in t:
            k = nd - (len(t) - 3)
            t = t.replace("...", ell[ell_rank - k :] if k else "")
        if len(t) != nd:
            raise ValueError(
                f"einsum: term {t!r} of {subscripts!r} names {len(t)} axes of an operand with {nd}"
            )
        out_terms.append(t)
    if arrow:
        out = rhs.replace("...", ell)
    else:
        counts: dict[str, int] = {}
        for t in lhs.split(","):
            for c in t.replace("...", ""):
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1))
    return out_terms, out


def _einsum_spec(terms: Any, out: str) -> str:
    return ",".join(terms) + "->" + out


def _letter_sizes(terms: Any, shapes: Any) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for t, shape in zip(terms, shapes, strict=True):
        for c, s in zip(t, shape, strict=True):
            if sizes.get(c, 1) == 1:
                sizes[c] = s
            elif s not in (1, sizes[c]):
                raise ValueError(f"einsum: subscript {c!r} has sizes {sizes[c]} and {s}")
    return sizes


def _einsum_composed(bk: Any, terms: Any, out: str, operands: Any) -> Any:
    """einsum from standard functions (a backend without einsum): diagonals for repeated
    subscripts, every operand laid out along all subscripts (1 where it has none), one
    broadcast product, summed over the subscripts the output drops."""
    letters: list[str] = []
    for c in "".join(terms):
        if c not in letters:
            letters.append(c)
    product = None
    for t, x in zip(terms, operands, strict=True):
        t = list(t)
        while len(set(t)) != len(t):  # a repeated subscript: take the diagonal
            c = next(c for c in t if t.count(c) > 1)
            i = t.index(c)
            j = t.index(c, i + 1)
            x = bk.linalg.diagonal(bk.moveaxis(x, (i, j), (-2, -1)))
            t = [c2 for k, c2 in enumerate(t) if k not in (i, j)] + [c]
        order = sorted(range(len(t)), key=lambda k: letters.index(t[k]))
        if order != list(range(len(t))):
            x = bk.permute_dims(x, tuple(order))
        ordered = [t[k] for k in order]
        shape = [x.shape[ordered.index(c)] if c in ordered else 1 for c in letters]
        x = bk.reshape(x, tuple(shape))
        product = x if product is None else product * x
    assert product is not None
    dropped = tuple(i for i, c in enumerate(letters) if c not in out)
    if dropped:
        product = bk.sum(product, axis=dropped, dtype=product.dtype)
    kept = [c for c in letters if c in out]
    if [kept.index(c) for c in out] != list(range(len(out))):
        product = bk.permute_dims(product, tuple(kept.index(c) for c in out))
    return product


@primitive("numeric", needs=())
def _einsum(bk: Any, subscripts: str, /, *operands: Array, optimize: Any = False) -> Any:
    """NumPy's ``einsum(subscripts, *operands)``: sums of products over the subscripts the
    output leaves out (``"ij,jk->ik"`` is a matrix product, ``"ii->"`` a trace)."""
    own = getattr(bk, "_einsum", None)  # a backend built from the table (abstract, batched)
    if own is not None:
        return own(subscripts, *operands, optimize=optimize)
    if hasattr(bk, "einsum"):
        shapes = [tuple(x.shape) for x in operands]
        if any(0 in s for s in shapes):  # NumPy checks no other size against a 0
            terms, _ = einsum_terms(subscripts, [len(s) for s in shapes])
            _letter_sizes(terms, shapes)
        return bk.einsum(subscripts, *operands, optimize=optimize)
    terms, out = einsum_terms(subscripts, [x.ndim for x in operands])
    _letter_sizes(terms, [tuple(x.shape) for x in operands])
    return _einsum_composed(bk, terms, out, operands)


@_einsum.defvjp(saves=("operands",), takes_needs=True)
def _einsum_vjp(ns, g, out, subscripts, /, *operands, optimize=False, needs=None):
    terms, outt = einsum_terms(subscripts, [x.ndim for x in operands])
    used = set("".join(terms)) | set(outt)
    free = iter(c for c in _EINSUM_LETTERS if c not in used)
    sizes = _letter_sizes(terms, [tuple(x.shape) for x in operands])
    cts = [None]
    for i, x in enumerate(operands):
        if needs is not None and i + 1 not in needs:
            cts.append(None)
            continue
        ti = terms[i]
        ops_terms, ops = [outt], [g]
        for j, y in enumerate(operands):
            if j != i:
                ops_terms.append(terms[j])
                ops.append(y)
        target, seen = [], set()
        for c in ti:
            if c in seen:  # a repeated subscript: a fresh one, tied to it by an identity
                f = next(free)
                ops_terms.append(c + f)
                ops.append(eye(ns, g, sizes[c], dtype=g.dtype))
                target.append(f)
            else:
                seen.add(c)
                target.append(c)
        have = set("".join(ops_terms))
        kept = "".join(c for c in target if c in have)
        ct = call(ns, "_einsum", _einsum_spec(ops_terms, kept), *ops, optimize=optimize)
        if len(kept) != len(target):  # summed in operand i alone: constant along those axes
            ones = tuple(s if c in have else 1 for c, s in zip(target, x.shape, strict=True))
            ct = ns.broadcast_to(ns.reshape(ct, ones), tuple(x.shape))
        cts.append(ct)
    return tuple(cts)


@_einsum.defjvp
def _einsum_jvp(ns, t, out, subscripts, /, *operands, optimize=False):
    terms = []
    for i, ti in enumerate(t[1:]):
        if ti is not None:
            ops = list(operands)
            ops[i] = ti
            terms.append(call(ns, "_einsum", subscripts, *ops, optimize=optimize))
    return plus(*terms)


@_einsum.defbatch
def _einsum_batch(ns, dims, subscripts, /, *operands, optimize=False):
    ranks = [x.ndim - (1 if d else 0) for x, d in zip(operands, dims[1:], strict=True)]
    terms, outt = einsum_terms(subscripts, ranks)
    used = set("".join(terms)) | set(outt)
    b = next(c for c in _EINSUM_LETTERS if c not in used)
    new = [b + t if d else t for t, d in zip(terms, dims[1:], strict=True)]
    return ns._einsum(_einsum_spec(new, b + outt), *operands, optimize=optimize)


def _einsum_shape(a, subscripts, /, *operands, optimize=False):
    terms, outt = einsum_terms(subscripts, [x.ndim for x in operands])
    sizes = _letter_sizes(terms, [tuple(x.shape) for x in operands])
    for c in outt:
        if c not in sizes:
            raise ValueError(f"einsum: output subscript {c!r} appears in no operand")
    dtype = np.result_type(*(x.dtype for x in operands))
    shape = tuple(sizes[c] for c in outt)
    # NumPy's iterator lays the result out in the order it loops (often transposed, C operands
    # or not), and one operand whose letters all reach the output is a view of it (a
    # transpose, a diagonal: strided even along one axis)
    if len(operands) == 1 and set(terms[0]) == set(outt) and math.prod(shape) > 1:
        return AbstractArray(shape, dtype, contiguous=False)
    return not_in_c_order(shape, dtype)


def _einsum_memory(out, subscripts, /, *operands, optimize=False):
    """Without ``optimize``, NumPy's iterator over every subscript: a buffer per operand it
    casts, broadcasts or reads out of order. With it, the contraction path's intermediates,
    bounded by the products of all the operands' subscripts (and a copy of each operand for
    the BLAS calls)."""
    terms, outt = einsum_terms(subscripts, [x.ndim for x in operands])
    buffers = (len(operands) + 1) * BUFFER_ELEMENTS * out.dtype.itemsize
    if not optimize or len(operands) < 2:
        return buffers
    sizes = _letter_sizes(terms, [tuple(x.shape) for x in operands])
    everything = math.prod(sizes.values()) * out.dtype.itemsize
    return buffers + 2 * everything + 2 * sum(x.size * out.dtype.itemsize for x in operands)


_einsum.defshape(_einsum_shape, memory=_einsum_memory)
