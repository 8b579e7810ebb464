"""The ``linalg`` extension. ``matmul``, ``matrix_transpose``, ``tensordot`` and ``vecdot`` are the
main namespace's rows (:mod:`.linear_algebra`), re-exported (``_primitive.LINALG_ALIASES``), not
declared twice.

VJPs: holomorphic maps (inv, det, solve, matrix_power, outer, trace, diagonal, cross) use plain
transposes and serve complex inputs in the JAX convention. The decompositions of Hermitian or
general matrices (cholesky, eigh, eigvalsh, svd, svdvals, qr, pinv, spectral and nuclear norms)
are differentiated for real inputs; for complex inputs their rules raise NotImplementedError
instead of returning a wrong gradient. JVPs: products bilinear, extractions linear, and the
decompositions derived from their VJP rules (``TRANSPOSED``).

Batching: the rows work on the last one or two axes of stacks, so the batch is one more stacking
axis. Two-operand rows align the stacks like matmul does; solve with a vector right-hand side
turns it into a one-column matrix first (a batch of vectors would read as a matrix).

Shapes, as NumPy (through array_api_compat) computes them. Views: ``diagonal`` (read-only in
NumPy), and ``cholesky(upper=True)`` of a real matrix (the transpose of the new lower factor);
``matrix_power(x, 1)`` is ``x`` itself. Everything else makes new arrays, named tuples where
NumPy returns them (``EigResult``, ``EighResult``, ``SlogdetResult``, ``SVDResult``,
``QRResult``).

What the calls allocate beyond their outputs (``memory=``), per NumPy 2's ``numpy/linalg``:

* the LAPACK gufuncs copy each matrix of a stack into a Fortran-ordered buffer and allocate the
  routine's workspace once per call (reused along the stack), with ``malloc``: real memory that
  tracemalloc does not see (counted through :func:`native`). The sizes are those the gufuncs
  allocate (``umath_linalg.cpp``) with the workspace sizes LAPACK documents (optimal block sizes
  bounded by 64), checked against the process's peak resident set on 64..2048-sized matrices;
* float32/complex64 stacks are computed in double precision: the gufunc casts the whole input
  (a NumPy copy) and its double-precision outputs are cast back (:func:`_widened`);
* the Python around the gufuncs: ``qr`` copies its input and masks a triangle, ``pinv`` keeps the
  SVD factors, ``matrix_norm``/``vector_norm`` form ``abs(x)`` or ``conj(x) * x``, ``cross``
  casts both operands and multiplies through a temporary, ``eig*`` check finiteness, ``outer``
  multiplies two broadcast operands (NumPy's iterator buffers them).

On a GPU (CuPy) the factorizations' copies and cuSOLVER workspaces come from CuPy's memory pool:
each charges there what was measured of it (:data:`GPU_WORK`).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import array_api_compat.numpy as npx
import numpy as np
from array_api_compat.common._linalg import (
    EighResult,
    EigResult,
    QRResult,
    SlogdetResult,
    SVDResult,
)

from .._abstract import models_a_gpu
from .._primitive import Array, primitive
from ..namespace._backend import capabilities
from ._rules.batching import fn, pair_along_axis, shift, to_rank
from ._rules.jvp import TRANSPOSED, call, linear
from ._rules.shapes import (
    BUFFER_ELEMENTS,
    as_abstract,
    broadcast,
    broadcast_view,
    in_operands_order,
    in_turn,
    is_array,
    native,
    new,
    not_in_c_order,
    probe_dtype,
    probe_dtypes,
    reduced,
    view,
)
from ._rules.vjp import expand_to, eye, is_complex, mT, sgn, values_known
from .linear_algebra import bilinear

FP = "floating-point"
la = npx.linalg

# -- kits shared by the rows below ---------------------------------------------------------------


def _real_only(ns, x, name):
    if is_complex(ns, x):
        raise NotImplementedError(
            f"linalg.{name}: the gradient is implemented for real inputs only; "
            "split the complex matrix into real and imaginary parts to differentiate it"
        )


def _inverse_gaps(ns, d):
    """F[..., i, j] = 1 / (d_j - d_i) off the diagonal (0 on it, and where d_i == d_j)."""
    gaps = d[..., None, :] - d[..., :, None]
    apart = gaps != 0
    return ns.where(apart, 1.0 / ns.where(apart, gaps, 1.0), 0.0)


def _stacked(row):
    """The batching rule of a row on stacks of matrices: the batch is one more stacking axis."""
    name = row.name
    return lambda ns, dims, x, /, *args, **kw: fn(ns, name)(x, *args, **kw)


def _with_rtol(row):
    """The batching rule of a stacked row with ``rtol`` (a batched rtol aligned with the stack)."""
    name = row.name

    def rule(ns, dims, x, /, *, rtol=None):
        if getattr(rtol, "batched", False):
            rtol = to_rank(ns, rtol.data, x.ndim - 3) if x.ndim > 3 else rtol.data
        elif rtol is not None and hasattr(rtol, "data"):
            rtol = rtol.data
        return fn(ns, name)(x, rtol=rtol)

    return rule


class _Sized(NamedTuple):
    """Size and dtype of an array the backend makes inside a call (no abstract array is made:
    that would count as allocated)."""

    size: int
    dtype: np.dtype


# sizes of the backend's work, for the memory rules


def _work(*xs):
    """LAPACK's dtype for the call: complex128 if any input is complex, else float64."""
    return np.dtype("complex128" if any(x.dtype.kind == "c" for x in xs) else "float64")


def _double(dtype):
    """``dtype`` at double precision (what the gufunc produces before NumPy casts back)."""
    return {"c": np.dtype("complex128"), "f": np.dtype("float64")}.get(dtype.kind, dtype)


def _widened(xs, outs):
    """Single-precision inputs: the gufunc's double-precision copy of each input not already in
    LAPACK's dtype, and its double-precision outputs before they are cast back."""
    w = _work(*xs)
    cast = sum(x.size * w.itemsize for x in xs if x.dtype != w)
    back = sum(o.size * _double(o.dtype).itemsize for o in outs if _double(o.dtype) != o.dtype)
    return cast + back


def _dims(x):
    return x.shape[-2], x.shape[-1]


def _batch(x):
    return math.prod(x.shape[:-2])


def _real(dtype):
    return np.dtype(dtype).type(0).real.dtype


def _gesdd(x, job):
    """Bytes of NumPy's ``*gesdd`` call on one matrix of ``x``: the copy of the matrix, the
    singular values, U and V^T ("A": full, "S": reduced, "N": none), the workspace LAPACK asks
    for (with U/V: ``3k + max(3k^2 + 4k, nb*max)``, plus ``k^2`` when one side is much longer
    than the other; without: ``10k + nb*(m + n)``, or ``10k + 2 nb k`` when much longer) and,
    for complex input, the real workspace (``max(5k^2 + 7k, 2*max*k + 2k^2 + k)``, ``7k``)."""
    m, n = _dims(x)
    k, mx = min(m, n), max(m, n)
    c = _work(x).itemsize
    total = m * n * c + k * 8 + 8 * k * 4  # A, S, IWORK
    much = mx >= (k * 11) // 6
    if job == "N":  # bidiagonalize x (or, much longer than wide, its R): nb (m + n) or 2 nb k
        total += (10 * k + 64 * (2 * k if much else m + n)) * c + (7 * k * 8 if c == 16 else 0)
        return total
    full = job == "A"
    total += (m * (m if full else k) + (n if full else k) * n) * c  # U, VT
    if c == 8:
        total += ((k * k if much else 0) + 3 * k + max(3 * k * k + 4 * k, 64 * mx)) * c
    else:
        total += ((k * k if much else 0) + 2 * k + 64 * mx) * c
        total += max(5 * k * k + 7 * k, 2 * mx * k + 2 * k * k + k) * 8
    return total


def _svdvals_wide(x):
    return _widened([x], [_Sized(_batch(x) * min(_dims(x)), _real(x.dtype))])


def _getrf_memory(out, x, /):
    """det/slogdet: LU of a copy of each matrix (and its pivots)."""
    n = x.shape[-1]
    outs = out if isinstance(out, tuple) else (out,)
    return native(n * n * _work(x).itemsize + 4 * n) + _widened([x], outs)


# On a GPU (Backend.device: CuPy) the factorizations call cuSOLVER, and CuPy takes their copies,
# pivots and workspaces from its memory pool. Measured there (CuPy 14.2, CUDA 13, an H200; 692
# calls: 1x1 to 4096x4096, stacks of up to 64, float32 to complex128): beyond its outputs a call
# allocates at most SLOPE times its operands' bytes plus FIXED elements of the operand's dtype
# (the slope falls towards its asymptote as matrices grow: eigvalsh's 5.03 at 4096, 8.0 at 256,
# where the fixed part covers the excess; svdvals of a 6x5 complex128 takes 13.1 MB, 820K
# elements). Each row's pair below is its asymptote plus a quarter, and a fixed part above the
# largest seen; every measured call came within 0.95 of it. On a GPU a rule is the larger of
# that (device memory, which CuPy's pool shows as tracemalloc shows NumPy's) and the LAPACK model.
GPU_WORK = {
    # LU and Cholesky (getrf, potrf): a copy of the stack (and the right-hand sides), pivots
    "cholesky": (1.25, 2**12),
    "det": (1.25, 2**12),
    "slogdet": (1.25, 2**12),
    "inv": (1.25, 2**12),
    "solve": (1.25, 2**12),
    # QR, the symmetric and general eigensolvers, the SVD and what is built on it
    "qr": (2.25, 2**20),
    "eigh": (4.25, 2**20),
    "eigvalsh": (5.25, 2**20),
    "eig": (5.25, 2**20),
    "eigvals": (6.25, 2**20),
    "svd": (3.5, 2**20),
    "svdvals": (4.5, 2**20),
    "matrix_rank": (4.5, 2**20),
    "pinv": (5.5, 2**20),
}


def _on_gpu(name, memory):
    """The rule ``memory`` of row ``name`` (its LAPACK model), or where the projection models a
    GPU the larger of that and cuSOLVER's measured bound (:data:`GPU_WORK`)."""
    slope, fixed = GPU_WORK[name]

    def rule(out, *operands, **kw):
        lapack = memory(out, *operands, **kw)
        if not models_a_gpu():
            return lapack
        arrays = [o for o in operands if hasattr(o, "shape")]
        size = sum(math.prod(o.shape) * o.dtype.itemsize for o in arrays)
        itemsize = max(o.dtype.itemsize for o in arrays)
        return max(lapack, math.ceil(slope * size) + fixed * itemsize)

    return rule


# -- cholesky ------------------------------------------------------------------------------------


@primitive(FP, scope="linalg")
def cholesky(bk: Any, x: Array, /, *, upper: bool = False) -> Any:
    return bk.linalg.cholesky(x, upper=upper)


@cholesky.defvjp(saves=("out",))
def cholesky_vjp(ns, g, out, x, /, *, upper=False):
    _real_only(ns, x, "cholesky")
    L = mT(ns, out) if upper else out
    # Only the triangle carries the output: project the cotangent onto it first, so that a
    # NaN or inf there from a downstream rule (atan2 at 0/0) cannot leak into the gradient.
    gL = mT(ns, ns.triu(g)) if upper else ns.tril(g)
    # P = Phi(L^T gL), Phi = lower triangle with the diagonal halved; S = L^-T P L^-1
    P = mT(ns, L) @ gL
    P = ns.tril(P) - 0.5 * ns.tril(ns.triu(P))
    S = ns.linalg.solve(mT(ns, L), mT(ns, ns.linalg.solve(mT(ns, L), mT(ns, P))))
    return (0.5 * (S + mT(ns, S)),)


cholesky.defjvp(TRANSPOSED)
cholesky.defbatch(_stacked(cholesky))


def _cholesky_shape(a, x, /, *, upper=False):
    dtype = probe_dtype(la.cholesky, x)
    if upper and dtype.kind != "c":  # array_api_compat: the transpose of L, a view
        return view(new(x.shape, dtype), x.shape[:-2] + _dims(x)[::-1], contiguous=False)
    return new(x.shape, dtype)


def _cholesky_memory(out, x, /, *, upper=False):
    n = x.shape[-1]
    potrf = native(n * n * _work(x).itemsize) + _widened([x], [out])
    if upper and out.dtype.kind == "c":  # L, then conj(L^T) beside it
        return max(potrf, out.size * out.dtype.itemsize)
    return potrf


cholesky.defshape(_cholesky_shape, memory=_on_gpu("cholesky", _cholesky_memory))


# -- cross ---------------------------------------------------------------------------------------


@primitive("numeric", scope="linalg")
def cross(bk: Any, x1: Array, x2: Array, /, *, axis: int = -1) -> Any:
    return bk.linalg.cross(x1, x2, axis=axis)


@cross.defvjp(saves=("x1", "x2"))
def cross_vjp(ns, g, out, x1, x2, /, *, axis=-1):
    return ns.linalg.cross(x2, g, axis=axis), ns.linalg.cross(g, x1, axis=axis)


cross.defjvp(bilinear(cross))


cross.defbatch(pair_along_axis("linalg.cross"))


def _cross_shape(a, x1, x2, /, *, axis=-1):
    # numpy.cross: moves ``axis`` last in each operand, broadcasts the rest, moves it back
    rest1 = x1.shape[: axis % x1.ndim] + x1.shape[axis % x1.ndim + 1 :]
    rest2 = x2.shape[: axis % x2.ndim] + x2.shape[axis % x2.ndim + 1 :]
    if x1.shape[axis] != 3 or x2.shape[axis] != 3:
        raise ValueError(f"linalg.cross: both arrays must have 3 elements along axis {axis}")
    shape = list(broadcast(rest1, rest2))
    at = axis % (len(shape) + 1)
    shape.insert(at, 3)
    out = new(shape, np.promote_types(x1.dtype, x2.dtype))
    return out if at == len(shape) - 1 else view(out, shape, contiguous=False)  # moveaxis


def _cross_memory(out, x1, x2, /, *, axis=-1):
    # both operands cast (astype copies even to the same dtype), one component's temporary;
    # with the vectors along another axis than the last, NumPy's moveaxis leaves every
    # component a strided slice and its ufuncs buffer them: an iteration buffer for each of the
    # three operands of a component's product (measured up to 0.6x, 0.58x and 0.62x of those
    # three buffers in int32, float64 and complex128 on (64, 64, 3, 2) x (3, 2), axis=-2; found
    # by the memory check by hypothesis, issue 33)
    s = out.dtype.itemsize
    component = out.size // 3
    moved = any(axis % x.ndim != x.ndim - 1 for x in (x1, x2))
    buffers = 3 * min(component, BUFFER_ELEMENTS) * s if moved else 0
    return (x1.size + x2.size) * s + component * s + buffers


cross.defshape(_cross_shape, memory=_cross_memory)


# -- det -----------------------------------------------------------------------------------------


@primitive(FP, scope="linalg")
def det(bk: Any, x: Array, /) -> Any:
    return bk.linalg.det(x)


@det.defvjp(saves=("x",))
def det_vjp(ns, g, out, x, /):
    # d det(x) = sum(cofactor(x) * dx), singular x included (where det(x) inv(x)^T has no value)
    return (g[..., None, None] * call(ns, "_cofactor", x),)


det.defjvp(TRANSPOSED)
det.defbatch(_stacked(det))


def _det_shape(a, x, /):
    return new(x.shape[:-2], probe_dtype(la.det, x))


det.defshape(_det_shape, memory=_on_gpu("det", _getrf_memory))


# -- _cofactor: det's derivative -----------------------------------------------------------------


@primitive(FP, needs=("linalg.det", "linalg.inv", "linalg.svd"))
def _cofactor(bk: Any, x: Array, /) -> Any:
    """The matrix of cofactors of each matrix of ``x`` (its adjugate, transposed): the derivative
    of ``det`` (``d det(x) = sum(cofactor(x) * dx)``), singular matrices included.

    ``det(x) inv(x)^T`` when every matrix of the stack has a nonzero determinant (its LU then
    has no zero pivot, so ``inv`` succeeds). Otherwise, for the whole stack, from the SVD
    ``x = U diag(s) Vh``: ``det(U) det(Vh) conj(U diag(ŝ) Vh)``, ``ŝ_i`` the product of the
    singular values other than ``s_i``. That is exact for every matrix (a rank n-1 matrix has a
    rank-1 cofactor matrix, a lower rank a zero one), as JAX's LU-based gradient of ``det`` is,
    where ``inv`` raises (NumPy) or returns infinities (CuPy). A lazy backend (Cubed) takes the
    SVD always: the choice would need the determinants' values."""
    own = getattr(bk, "_cofactor", None)  # a backend built from the table (abstract, batched)
    if own is not None:
        return own(x)
    if not capabilities(bk).lazy:
        d = bk.linalg.det(x)
        if not bool(bk.any(d == 0)):
            return bk.reshape(d, d.shape + (1, 1)) * bk.matrix_transpose(bk.linalg.inv(x))
    U, s, Vh = bk.linalg.svd(x)
    sign = bk.linalg.det(U) * bk.linalg.det(Vh)
    # row i of the where: s with s_i replaced by 1; its product is ŝ_i
    diagonal = eye(bk, x, x.shape[-1], dtype=bk.bool)
    others = bk.prod(bk.where(diagonal, bk.ones_like(s[..., :1, None]), s[..., None, :]), axis=-1)
    cof = (U * others[..., None, :]) @ Vh
    del U, Vh, others
    if bk.isdtype(cof.dtype, "complex floating"):
        cof = bk.conj(cof)
    return bk.reshape(sign, sign.shape + (1, 1)) * cof


@_cofactor.defvjp(saves=("x", "out"))
def _cofactor_vjp(ns, g, out, x, /):
    # cofactor(x) = det(x) inv(x)^T: d cofactor = tr(inv(x) dx) cofactor - cofactor dx^T inv(x)^T.
    # At a singular x this needs inv(x) and raises: second derivatives of det stop there.
    inv_t = mT(ns, ns.linalg.inv(x))
    paired = ns.sum(g * out, axis=(-2, -1))
    return (paired[..., None, None] * inv_t - out @ mT(ns, g) @ inv_t,)


_cofactor.defjvp(TRANSPOSED)
_cofactor.defbatch(_stacked(_cofactor))


def _cofactor_shape(a, x, /):
    # det * inv(x)^T: the product of a transposed view is laid out transposed
    return not_in_c_order(x.shape, probe_dtype(la.inv, x))


def _cofactor_memory(out, x, /):
    """The larger of :func:`_cofactor`'s two ways (which one runs depends on the values).
    By ``inv``: the determinants (LU of a copy of each matrix), then inv's result beside them
    (``*gesv``: a copy and an identity). By the SVD: the determinants, the factors U, s, Vh
    (``*gesdd``), their determinants and the sign, ŝ through an n x n selection per matrix,
    then ``U diag(ŝ)`` and its product with Vh (or the product and its conjugate)."""
    b, n = _batch(x), x.shape[-1]
    s, r = out.dtype.itemsize, _real(out.dtype).itemsize
    stack, dets, vals = b * n * n * s, b * s, b * n * r
    getrf = n * n * _work(x).itemsize + 4 * n
    by_inv = dets + stack + _widened([x], [out])
    inv_total = dets + max(stack, getrf, 2 * n * n * _work(x).itemsize + 4 * n)
    svd_out = [_Sized(b * n * n, out.dtype), _Sized(b * n, _real(out.dtype))]
    svd_out.append(svd_out[0])  # U, s, Vh
    kept = 3 * dets + 2 * stack + 2 * vals
    by_svd = kept + n * n + max(b * n * n * r, 2 * stack) + _widened([x], svd_out)
    svd_total = max(dets + _gesdd(x, "A"), kept + getrf)
    return in_turn(max(by_inv, by_svd), max(by_inv, inv_total, by_svd, svd_total))


_cofactor.defshape(_cofactor_shape, memory=_cofactor_memory)


# -- diagonal ------------------------------------------------------------------------------------


@primitive(scope="linalg")
def diagonal(bk: Any, x: Array, /, *, offset: int = 0) -> Any:
    return bk.linalg.diagonal(x, offset=offset)


@diagonal.defvjp
def diagonal_vjp(ns, g, out, x, /, *, offset=0):
    m, n = x.shape[-2], x.shape[-1]
    length = g.shape[-1]
    rows = eye(ns, g, length, m, k=max(-offset, 0), dtype=g.dtype)  # row l + max(-k, 0)
    cols = eye(ns, g, length, n, k=max(offset, 0), dtype=g.dtype)  # col l + max(k, 0)
    return (mT(ns, rows) @ (g[..., :, None] * cols),)


diagonal.defjvp(linear(diagonal))
diagonal.defbatch(_stacked(diagonal))


def _diagonal_shape(a, x, /, *, offset=0):
    m, n = _dims(x)
    length = max(0, min(m, n - offset) if offset >= 0 else min(m + offset, n))
    return view(x, x.shape[:-2] + (length,), contiguous=False)


diagonal.defshape(_diagonal_shape)


# -- eig -----------------------------------------------------------------------------------------


@primitive(FP, scope="linalg")
def eig(bk: Any, x: Array, /) -> Any:
    return EigResult(*bk.linalg.eig(x))  # a named tuple whatever the backend's (CuPy's: plain)


@eig.defvjp
def eig_vjp(ns, g, out, x, /):
    raise NotImplementedError(
        "linalg.eig: the eigenvector gradient is not implemented (eigenvectors of a general "
        "matrix are defined only up to scale); linalg.eigvals is differentiable"
    )


eig.defjvp(TRANSPOSED)
eig.defbatch(_stacked(eig))


def _eig_shape(a, x, /):
    w, v = probe_dtypes(la.eig, x)
    return EigResult(new(x.shape[:-1], w), new(x.shape, v))


def _eig_memory(out, x, /):
    # a copy of the matrix and the right vectors (real: in two real n x n blocks, then complex),
    # ``*geev``'s workspace; before the call, isfinite(x) (a bool per element)
    n = x.shape[-1]
    work = 32 * n * n + 128 * n * 16
    return in_turn(x.size, max(x.size, work)) + _widened([x], out)


eig.defshape(_eig_shape, memory=_on_gpu("eig", _eig_memory))


# -- eigh ----------------------------------------------------------------------------------------


@primitive(FP, scope="linalg")
def eigh(bk: Any, x: Array, /) -> Any:
    return EighResult(*bk.linalg.eigh(x))


@eigh.defvjp(saves=("out",))
def eigh_vjp(ns, g, out, x, /):
    _real_only(ns, x, "eigh")
    gw, gV = g
    w, V = out
    F = _inverse_gaps(ns, w)
    inner = F * (mT(ns, V) @ gV)
    n = w.shape[-1]
    inner = inner + eye(ns, gV, n, dtype=x.dtype) * gw[..., None, :]
    ct = V @ inner @ mT(ns, V)
    return (0.5 * (ct + mT(ns, ct)),)


eigh.defjvp(TRANSPOSED)
eigh.defbatch(_stacked(eigh))


def _eigh_shape(a, x, /):
    w, v = probe_dtypes(la.eigh, x)
    return EighResult(new(x.shape[:-1], w), new(x.shape, v))


def _eigh_memory(out, x, /):
    # ``*syevd``/``*heevd`` with vectors: the copy, and a workspace of 2 n^2 (+ O(n)) elements
    n = x.shape[-1]
    return native((3 * n * n + 72 * n) * _work(x).itemsize) + _widened([x], out)


eigh.defshape(_eigh_shape, memory=_on_gpu("eigh", _eigh_memory))


# -- eigvals -------------------------------------------------------------------------------------


@primitive(FP, scope="linalg")
def eigvals(bk: Any, x: Array, /) -> Any:
    return bk.linalg.eigvals(x)


@eigvals.defvjp(saves=("x",))
def eigvals_vjp(ns, g, out, x, /):
    # dw = diag(V^-1 dx V): ct = V^-T diag(g) V^T (holomorphic, diagonalizable x)
    _, V = ns.linalg.eig(x)
    return (mT(ns, ns.linalg.inv(V)) @ (g[..., :, None] * mT(ns, V)),)


eigvals.defjvp(TRANSPOSED)
eigvals.defbatch(_stacked(eigvals))


def _eigvals_shape(a, x, /):
    return new(x.shape[:-1], probe_dtype(la.eigvals, x))


def _eigvals_memory(out, x, /):
    n = x.shape[-1]
    work = (n * n + 64 * n) * _work(x).itemsize
    return in_turn(x.size, max(x.size, work)) + _widened([x], [out])


eigvals.defshape(_eigvals_shape, memory=_on_gpu("eigvals", _eigvals_memory))


# -- eigvalsh ------------------------------------------------------------------------------------


@primitive(FP, scope="linalg")
def eigvalsh(bk: Any, x: Array, /) -> Any:
    return bk.linalg.eigvalsh(x)


@eigvalsh.defvjp(saves=("x",))
def eigvalsh_vjp(ns, g, out, x, /):
    _real_only(ns, x, "eigvalsh")
    _, V = ns.linalg.eigh(x)
    return ((V * g[..., None, :]) @ mT(ns, V),)


eigvalsh.defjvp(TRANSPOSED)
eigvalsh.defbatch(_stacked(eigvalsh))


def _eigvalsh_shape(a, x, /):
    return new(x.shape[:-1], probe_dtype(la.eigvalsh, x))


def _eigvalsh_memory(out, x, /):
    n = x.shape[-1]
    return native((n * n + 72 * n) * _work(x).itemsize) + _widened([x], [out])


eigvalsh.defshape(_eigvalsh_shape, memory=_on_gpu("eigvalsh", _eigvalsh_memory))


# -- inv -----------------------------------------------------------------------------------------


@primitive(FP, scope="linalg")
def inv(bk: Any, x: Array, /) -> Any:
    return bk.linalg.inv(x)


@inv.defvjp(saves=("out",))
def inv_vjp(ns, g, out, x, /):
    return (-mT(ns, out) @ g @ mT(ns, out),)


inv.defjvp(TRANSPOSED)
inv.defbatch(_stacked(inv))


def _inv_shape(a, x, /):
    return new(x.shape, probe_dtype(la.inv, x))


def _inv_memory(out, x, /):
    # ``*gesv`` on a copy of the matrix against an identity, with pivots
    n = x.shape[-1]
    return native(2 * n * n * _work(x).itemsize + 4 * n) + _widened([x], [out])


inv.defshape(_inv_shape, memory=_on_gpu("inv", _inv_memory))


# -- matrix_norm ---------------------------------------------------------------------------------


# the orders NumPy's backend computes as the Frobenius norm ("f" and None beside the standard's)
_FROBENIUS = ("fro", "f", None)


@primitive(FP, scope="linalg")
def matrix_norm(bk: Any, x: Array, /, *, keepdims: bool = False, ord: Any = "fro") -> Any:
    return bk.linalg.matrix_norm(x, keepdims=keepdims, ord=ord)


@matrix_norm.defvjp(saves=("x", "out"))
def matrix_norm_vjp(ns, g, out, x, /, *, keepdims=False, ord="fro"):
    ge = g if keepdims else g[..., None, None]
    oe = out if keepdims else out[..., None, None]
    if ord in _FROBENIUS:
        safe = ns.where(oe == 0, 1.0, oe)
        return (ge * ns.where(oe == 0, 0.0, ns.abs(x) / safe) * sgn(ns, x),)
    if ord in (1, -1, float("inf"), -float("inf")):
        axis = -2 if ord in (1, -1) else -1  # 1-norms sum columns (over rows)
        sums = ns.sum(ns.abs(x), axis=axis, keepdims=True)
        hit = ns.astype(sums == oe, g.dtype)
        hit = hit / ns.sum(hit, axis=-1 if axis == -2 else -2, keepdims=True)
        return (ge * hit * sgn(ns, x),)
    if ord not in (2, -2, "nuc"):
        raise ValueError(
            f"matrix_norm: no gradient for ord={ord!r}; the standard's orders are 'fro', "
            "'nuc', 1, -1, 2, -2, inf and -inf"
        )
    _real_only(ns, x, f"matrix_norm(ord={ord!r})")
    if min(x.shape[-2:]) == 0:  # no singular value: no element to differentiate
        return (ns.zeros_like(x),)
    U, s, Vh = ns.linalg.svd(x, full_matrices=False)
    if ord == "nuc":
        return (ge * (U @ Vh),)
    i = 0 if ord == 2 else -1  # singular values come in descending order
    return (ge * (U[..., :, i, None] @ Vh[..., i, None, :]),)


matrix_norm.defjvp(TRANSPOSED)
matrix_norm.defbatch(_stacked(matrix_norm))


def _matrix_norm_shape(a, x, /, *, keepdims=False, ord="fro"):
    shape = x.shape[:-2] + ((1, 1) if keepdims else ())
    return new(shape, _real(x.dtype))


def _read_buffers(x, k):
    """The iterator's buffers for ``k`` operands that are ``x`` not in C order (a transposed,
    reversed, strided or broadcast view): the norms' elementwise steps read it so."""
    c_order = x.contiguous and not broadcast_view(x)
    return 0 if c_order else k * min(x.size, BUFFER_ELEMENTS) * x.dtype.itemsize


def _matrix_norm_memory(out, x, /, *, keepdims=False, ord="fro"):
    s, r = x.dtype.itemsize, _real(x.dtype).itemsize
    if ord in _FROBENIUS:  # sqrt(sum((conj(x) * x).real)): conj(x) of complex x, the product
        conj = x.size * s if x.dtype.kind == "c" else 0
        return conj + x.size * s + out.size * r + _read_buffers(x, 2)
    if ord in (1, -1, math.inf, -math.inf):  # sum(abs(x)) along one axis, then max/min
        m, n = _dims(x)
        return x.size * r + _batch(x) * (n if ord in (1, -1) else m) * r + _read_buffers(x, 1)
    # 2, -2, "nuc": the singular values (NumPy's svd without vectors), then max/min/sum
    return native(_gesdd(x, "N")) + _svdvals_wide(x) + _batch(x) * min(_dims(x)) * r


matrix_norm.defshape(_matrix_norm_shape, memory=_matrix_norm_memory)


# -- matrix_power --------------------------------------------------------------------------------


@primitive(FP, scope="linalg")
def matrix_power(bk: Any, x: Array, n: int, /) -> Any:
    return bk.linalg.matrix_power(x, n)


def _eye_like(ns, x):
    return eye(ns, x, x.shape[-1], dtype=x.dtype)


@matrix_power.defvjp(saves=("x",))
def matrix_power_vjp(ns, g, out, x, n, /):
    if n == 0:
        return ns.zeros_like(g), None
    a = x if n > 0 else ns.linalg.inv(x)
    m = abs(n)
    powers = [_eye_like(ns, a)]
    for _ in range(m - 1):
        powers.append(powers[-1] @ a)
    ct = sum(
        (mT(ns, powers[k]) @ g @ mT(ns, powers[m - 1 - k]) for k in range(m)),
        start=ns.zeros_like(g),
    )
    if n < 0:  # through a = inv(x)
        ct = -mT(ns, a) @ ct @ mT(ns, a)
    return ct, None


matrix_power.defjvp(TRANSPOSED)
matrix_power.defbatch(_stacked(matrix_power))


def _matrix_power_shape(a, x, n, /):
    if n == 1:
        return x
    if n == 0:  # identities written into empty_like(x): x's layout
        return in_operands_order(x.shape, x.dtype, x)
    return new(x.shape, x.dtype)


def _power_temporaries(m):
    """The most matrices NumPy's matrix_power(a, m) holds at once besides ``a``, less one for the
    result (its own square-and-multiply loop, followed product by product)."""
    if m <= 2:
        return 0
    if m == 3:  # (a @ a) @ a
        return 1
    z = res = None
    made, sizes = 0, []
    while m > 0:
        if z is None:
            z = 0  # ``a`` itself
        else:
            made += 1
            sizes.append(len({o for o in (z, res) if o} | {made}))
            z = made
        m, bit = divmod(m, 2)
        if bit:
            if res is None:
                res = z
            else:
                made += 1
                sizes.append(len({o for o in (z, res) if o} | {made}))
                res = made
    return max(sizes) - 1


def _matrix_power_memory(out, x, n, /):
    matrix = x.size * x.dtype.itemsize
    if n == 0:  # empty_like(x), then an identity assigned into it
        return x.shape[-1] ** 2 * x.dtype.itemsize
    m = abs(n)
    temps = _power_temporaries(m) * matrix
    if n > 0:
        return temps
    inverse = _inv_memory(out, x)  # while inv(x) runs, nothing else is live
    return max(inverse, temps + (matrix if m > 1 else 0))


matrix_power.defshape(_matrix_power_shape, memory=_matrix_power_memory)


# -- matrix_rank ---------------------------------------------------------------------------------


@primitive(FP, scope="linalg")
def matrix_rank(bk: Any, x: Array, /, *, rtol: Array = None) -> Any:
    return bk.linalg.matrix_rank(x, rtol=rtol)


matrix_rank.nondifferentiable()
matrix_rank.defbatch(_with_rtol(matrix_rank))


def _matrix_rank_shape(a, x, /, *, rtol=None):
    if x.ndim < 2:
        raise ValueError("linalg.matrix_rank: x must be at least two-dimensional")
    rtol = as_abstract(rtol)
    batch = broadcast(x.shape[:-2], rtol.shape) if is_array(rtol) else x.shape[:-2]
    return new(batch, "int64")  # count_nonzero(S > tol, axis=-1), tol broadcast with rtol


def _matrix_rank_memory(out, x, /, *, rtol=None):
    # svdvals, then S > tol (a bool per singular value) and count_nonzero
    k = min(_dims(x))
    s = _batch(x) * k
    return native(_gesdd(x, "N")) + _svdvals_wide(x) + s * (_real(x.dtype).itemsize + 1)


matrix_rank.defshape(_matrix_rank_shape, memory=_on_gpu("matrix_rank", _matrix_rank_memory))


# -- outer ---------------------------------------------------------------------------------------


@primitive("numeric", scope="linalg")
def outer(bk: Any, x1: Array, x2: Array, /) -> Any:
    return bk.linalg.outer(x1, x2)


@outer.defvjp(saves=("x1", "x2"))
def outer_vjp(ns, g, out, x1, x2, /):
    return g @ x2, x1 @ g


outer.defjvp(bilinear(outer))


@outer.defbatch
def outer_batch(ns, dims, x1, x2, /):
    a = x1[..., None]
    b = x2[:, None, :] if dims[1] else x2[None, :]
    return ns.multiply(a, b)


def _outer_shape(a, x1, x2, /):
    return new((x1.size, x2.size), probe_dtype(la.outer, x1, x2))


def _outer_memory(out, x1, x2, /):
    # multiply(x1[:, None], x2[None, :]): NumPy's iterator buffers both broadcast operands
    return 2 * min(out.size, BUFFER_ELEMENTS) * out.dtype.itemsize


outer.defshape(_outer_shape, memory=_outer_memory)


# -- pinv ----------------------------------------------------------------------------------------


@primitive(FP, scope="linalg")
def pinv(bk: Any, x: Array, /, *, rtol: Array = None) -> Any:
    return bk.linalg.pinv(x, rtol=rtol)


@pinv.defvjp(saves=("x", "out"))
def pinv_vjp(ns, g, out, x, /, *, rtol=None):
    _real_only(ns, x, "pinv")
    P = out
    m, n = x.shape[-2], x.shape[-1]
    left = eye(ns, P, m, dtype=x.dtype) - x @ P
    right = eye(ns, P, n, dtype=x.dtype) - P @ x
    gT = mT(ns, g)
    ct = -mT(ns, P) @ g @ mT(ns, P) + left @ gT @ P @ mT(ns, P) + mT(ns, P) @ P @ gT @ right
    return (ct,)


pinv.defjvp(TRANSPOSED)
pinv.defbatch(_with_rtol(pinv))


def _pinv_shape(a, x, /, *, rtol=None):
    m, n = _dims(x)
    return new(x.shape[:-2] + (n, m), probe_dtype(la.pinv, x))


def _pinv_memory(out, x, /, *, rtol=None):
    # conj(x) (a copy for complex x), the reduced SVD's U, S, V^T, then S[..., None] * U^T
    m, n = _dims(x)
    k, b = min(m, n), _batch(x)
    s, r = x.dtype.itemsize, _real(x.dtype).itemsize
    conj = x.size * s if x.dtype.kind == "c" else 0
    factors = b * ((m * k + k * n) * s + k * r)
    svd = native(_gesdd(x, "S")) + _widened([x], [_Sized(b * (m * k + k * n), x.dtype)])
    return conj + factors + max(svd, b * (k * m * s + 2 * k))


pinv.defshape(_pinv_shape, memory=_on_gpu("pinv", _pinv_memory))


# -- qr ------------------------------------------------------------------------------------------


@primitive(FP, scope="linalg")
def qr(bk: Any, x: Array, /, *, mode: str = "reduced") -> Any:
    return QRResult(*bk.linalg.qr(x, mode=_qr_mode(mode)))


def _qr_mode(mode: str) -> str:
    if mode not in ("reduced", "complete"):
        raise ValueError(
            f"mode must be 'reduced' or 'complete' (the standard's), got {mode!r}; for R alone "
            "take the second of the pair"
        )
    return mode


@qr.defvjp(saves=("out",))
def qr_vjp(ns, g, out, x, /, *, mode="reduced"):
    _real_only(ns, x, "qr")
    m, n = x.shape[-2], x.shape[-1]
    if mode == "complete" and m > n:
        raise NotImplementedError(
            "linalg.qr: the gradient of complete QR of a tall matrix is not defined (Q's last "
            f"{m - n} columns are any orthonormal completion; got shape (..., {m}, {n})); "
            "use mode='reduced'"
        )
    Q, R = out
    gQ, gR = g[0], ns.triu(g[1])  # R is upper triangular: its structural zeros take no cotangent
    if m >= n:
        return (_qr_square_vjp(ns, Q, R, gQ, gR),)
    # wide: x = [X Y] with X = Q R1 (m x m, the square case) and Y = Q R2, so Y's cotangent is
    # Q gR2 and Y adds Y gR2^T to Q's (as PyTorch's linalg_qr_backward)
    R1, R2, gR1, gR2 = R[..., :, :m], R[..., :, m:], gR[..., :, :m], gR[..., :, m:]
    gX = _qr_square_vjp(ns, Q, R1, gQ + Q @ (R2 @ mT(ns, gR2)), gR1)  # Y = Q R2 (x not kept)
    return (ns.concat([gX, Q @ gR2], axis=-1),)


def _qr_square_vjp(ns, Q, R, gQ, gR):
    """The cotangent of x = Q R (tall or square, R square and invertible) from Q's and R's
    (``gR`` upper triangular): ``(gQ + Q copyltu(M)) R^-T`` with ``M = R gR^T - gQ^T Q``."""
    M = R @ mT(ns, gR) - mT(ns, gQ) @ Q
    low = ns.tril(M, k=-1)
    sym = low + mT(ns, low) + ns.tril(ns.triu(M))
    b = gQ + Q @ sym
    # ct = b R^-T, via a solve with R^T (lower triangular)
    return mT(ns, ns.linalg.solve(R, mT(ns, b)))


qr.defjvp(TRANSPOSED)
qr.defbatch(_stacked(qr))


def _qr_shape(a, x, /, *, mode="reduced"):
    _qr_mode(mode)
    m, n = _dims(x)
    mc = m if mode == "complete" and m > n else min(m, n)
    q, r = probe_dtypes(la.qr, x, mode=mode)
    # a stack is factored into arrays of x's layout (LAPACK's column order for one in Fortran)
    shapes = (x.shape[:-2] + (m, mc), x.shape[:-2] + (mc, n))
    return QRResult(in_operands_order(shapes[0], q, x), in_operands_order(shapes[1], r, x))


def _qr_memory(out, x, /, *, mode="reduced"):
    # x.astype(double, copy=True) and tau live throughout; ``*geqrf`` on a copy of each matrix,
    # then ``*orgqr`` with copies of the reflectors and of Q; triu(R) masks with a bool matrix
    m, n = _dims(x)
    k, mc = min(m, n), out.Q.shape[-1]
    c = _work(x).itemsize
    kept = x.size * c + _batch(x) * k * c
    geqrf = (m * n + k + 64 * n) * c
    gqr = (m * mc + k + m * n + 64 * mc) * c
    # single precision: Q and R come out in double, then are cast
    q, r = (_widened([], [o]) for o in out)
    # the copy keeps x's memory order: triu's where then buffers R (and its broadcast mask)
    # when x is not in C order, or when R is a slice a[..., :mc, :] of a stack of tall ones
    # (not contiguous: measured 75 kB beyond the former bound for (3, 120, 40) float64)
    buffered = not x.contiguous or (_batch(x) > 1 and m > mc)
    mask = mc * n + (min(_batch(x) * mc * n, BUFFER_ELEMENTS) * (c + 1) if buffered else 0)
    return kept + in_turn(q + r + mask, max(geqrf, q + max(gqr, r + mask)))


qr.defshape(_qr_shape, memory=_on_gpu("qr", _qr_memory))


# -- slogdet -------------------------------------------------------------------------------------


@primitive(FP, scope="linalg")
def slogdet(bk: Any, x: Array, /) -> Any:
    return SlogdetResult(*bk.linalg.slogdet(x))


@slogdet.defvjp(saves=("x", "out"))
def slogdet_vjp(ns, g, out, x, /):
    g_sign, g_log = g
    sign = out[0]
    if values_known(ns) and bool(ns.any(sign == 0)):
        raise np.linalg.LinAlgError(
            "linalg.slogdet: the gradient of log|det(x)| at a singular matrix (determinant 0) "
            "is infinite; make the matrix regular (x + eps * I) or take the gradient of "
            "linalg.det, which is finite there"
        )
    w = g_log
    if is_complex(ns, x):  # d sign = i Im(tr(x^-1 dx)) sign
        w = ns.astype(g_log, x.dtype) - 1j * ns.astype(ns.real(1j * g_sign * sign), x.dtype)
    return (ns.astype(w, x.dtype)[..., None, None] * mT(ns, ns.linalg.inv(x)),)


slogdet.defjvp(TRANSPOSED)
slogdet.defbatch(_stacked(slogdet))


def _slogdet_shape(a, x, /):
    sign, logabs = probe_dtypes(la.slogdet, x)
    return SlogdetResult(new(x.shape[:-2], sign), new(x.shape[:-2], logabs))


slogdet.defshape(_slogdet_shape, memory=_on_gpu("slogdet", _getrf_memory))


# -- solve ---------------------------------------------------------------------------------------


@primitive(FP, scope="linalg")
def solve(bk: Any, x1: Array, x2: Array, /) -> Any:
    return bk.linalg.solve(x1, x2)


@solve.defvjp(saves=("x1", "out"))
def solve_vjp(ns, g, out, x1, x2, /):
    vector = x2.ndim == 1
    if vector:  # g is a stack of vectors: solve it as one-column matrices
        gb = ns.linalg.solve(mT(ns, x1), g[..., None])[..., 0]
    else:
        gb = ns.linalg.solve(mT(ns, x1), g)
    if vector:
        ga = -gb[..., :, None] * out[..., None, :]
    else:
        ga = -gb @ mT(ns, out)
    return ga, gb


solve.defjvp(TRANSPOSED)


@solve.defbatch
def solve_batch(ns, dims, x1, x2, /):
    b1, b2 = dims
    r2 = x2.ndim - b2
    if r2 == 1:
        col = x2[..., None]
        if b1 and not b2:
            col = ns.broadcast_to(col, (x1.shape[0], *col.shape))
        return ns.linalg.solve(x1, col)[..., 0]
    r1 = x1.ndim - b1
    r = max(r1, r2)
    x1 = to_rank(ns, x1, r) if b1 else x1
    x2 = to_rank(ns, x2, r) if b2 else x2
    if b1 and not b2:
        x2 = ns.broadcast_to(x2, (x1.shape[0], *x2.shape))
    return ns.linalg.solve(x1, x2)


def _solve_shape(a, x1, x2, /):
    if x2.ndim == 1:  # array_api_compat: a vector only when x2 is exactly 1-D
        shape = x1.shape[:-1]
    else:
        shape = broadcast(x1.shape[:-2], x2.shape[:-2]) + x2.shape[-2:]
    return new(shape, probe_dtype(la.solve, x1, x2))


def _solve_memory(out, x1, x2, /):
    # ``*gesv`` on copies of one matrix and its right-hand sides, with pivots
    n = x1.shape[-1]
    k = 1 if x2.ndim == 1 else x2.shape[-1]
    return native((n * n + n * k) * _work(x1, x2).itemsize + 4 * n) + _widened([x1, x2], [out])


solve.defshape(_solve_shape, memory=_on_gpu("solve", _solve_memory))


# -- svd -----------------------------------------------------------------------------------------


@primitive(FP, scope="linalg")
def svd(bk: Any, x: Array, /, *, full_matrices: bool = True) -> Any:
    return SVDResult(*bk.linalg.svd(x, full_matrices=full_matrices))


def _svd_ct(ns, x, U, s, Vh, gU, gs, gVh):
    """Cotangent of x = U diag(s) Vh (reduced) for real x."""
    V, gV = mT(ns, Vh), mT(ns, gVh) if gVh is not None else None
    k = s.shape[-1]
    eye_k = eye(ns, s, k, dtype=x.dtype)
    s2 = s * s
    F = _inverse_gaps(ns, s2)
    S = s[..., None, :] * eye_k
    ct = U @ (gs[..., None, :] * eye_k) @ Vh if gs is not None else 0
    if gU is not None:
        UtgU = mT(ns, U) @ gU
        J = F * (UtgU - mT(ns, UtgU))
        ct = ct + U @ (J @ S) @ Vh
        m = x.shape[-2]
        if m > k:
            proj = eye(ns, U, m, dtype=x.dtype) - U @ mT(ns, U)
            ct = ct + proj @ gU @ (Vh / s[..., :, None])
    if gV is not None:
        VtgV = mT(ns, V) @ gV
        K = F * (VtgV - mT(ns, VtgV))
        ct = ct + U @ (S @ K) @ Vh
        n = x.shape[-1]
        if n > k:
            proj = eye(ns, V, n, dtype=x.dtype) - V @ Vh
            ct = ct + (U / s[..., None, :]) @ mT(ns, gV) @ proj
    return ct


@svd.defvjp(saves=("out",))
def svd_vjp(ns, g, out, x, /, *, full_matrices=True):
    _real_only(ns, x, "svd")
    m, n = x.shape[-2], x.shape[-1]
    if full_matrices and m != n:
        raise NotImplementedError(
            "linalg.svd: the gradient with full_matrices=True is defined only for square "
            "matrices (the extra singular vectors are not unique); use full_matrices=False"
        )
    U, s, Vh = out
    return (_svd_ct(ns, x, U, s, Vh, *g),)


svd.defjvp(TRANSPOSED)
svd.defbatch(_stacked(svd))


def _svd_shape(a, x, /, *, full_matrices=True):
    m, n = _dims(x)
    k = min(m, n)
    u, s, vh = probe_dtypes(la.svd, x, full_matrices=full_matrices)
    b = x.shape[:-2]
    return SVDResult(
        new(b + (m, m if full_matrices else k), u),
        new(b + (k,), s),
        new(b + (n if full_matrices else k, n), vh),
    )


def _svd_memory(out, x, /, *, full_matrices=True):
    return native(_gesdd(x, "A" if full_matrices else "S")) + _widened([x], out)


svd.defshape(_svd_shape, memory=_on_gpu("svd", _svd_memory))


# -- svdvals -------------------------------------------------------------------------------------


@primitive(FP, scope="linalg")
def svdvals(bk: Any, x: Array, /) -> Any:
    return bk.linalg.svdvals(x)


@svdvals.defvjp(saves=("x",))
def svdvals_vjp(ns, g, out, x, /):
    _real_only(ns, x, "svdvals")
    U, _, Vh = ns.linalg.svd(x, full_matrices=False)
    return ((U * g[..., None, :]) @ Vh,)


svdvals.defjvp(TRANSPOSED)
svdvals.defbatch(_stacked(svdvals))


def _svdvals_shape(a, x, /):
    return new(x.shape[:-2] + (min(_dims(x)),), probe_dtype(la.svdvals, x))


def _svdvals_memory(out, x, /):
    return native(_gesdd(x, "N")) + _widened([x], [out])


svdvals.defshape(_svdvals_shape, memory=_on_gpu("svdvals", _svdvals_memory))


# -- trace ---------------------------------------------------------------------------------------


@primitive("numeric", scope="linalg")
def trace(bk: Any, x: Array, /, *, offset: int = 0, dtype: Any = None) -> Any:
    return bk.linalg.trace(x, offset=offset, dtype=dtype)


@trace.defvjp
def trace_vjp(ns, g, out, x, /, *, offset=0, dtype=None):
    eye_mn = eye(ns, g, x.shape[-2], x.shape[-1], k=offset, dtype=g.dtype)
    return (g[..., None, None] * eye_mn,)


trace.defjvp(linear(trace))
trace.defbatch(_stacked(trace))


def _trace_shape(a, x, /, *, offset=0, dtype=None):
    return new(x.shape[:-2], probe_dtype(la.trace, x, offset=offset, dtype=dtype))


trace.defshape(_trace_shape)


# -- vector_norm ---------------------------------------------------------------------------------


@primitive(FP, scope="linalg")
def vector_norm(
    bk: Any, x: Array, /, *, axis: Any = None, keepdims: bool = False, ord: Any = 2
) -> Any:
    return bk.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord)


@vector_norm.defvjp(saves=("x", "out"))
def vector_norm_vjp(ns, g, out, x, /, *, axis=None, keepdims=False, ord=2):
    ge = expand_to(ns, g, x, axis, keepdims)
    oe = expand_to(ns, out, x, axis, keepdims)
    a = ns.abs(x)
    if ord == 0:
        return (ns.zeros_like(x),)
    if ord in (float("inf"), -float("inf")):
        hit = ns.astype(a == oe, ge.dtype)
        ties = ns.sum(hit, axis=axis, keepdims=True)
        return (ge * hit / ties * sgn(ns, x),)
    if ord == 1:
        return (ge * sgn(ns, x),)
    # |x|^(p-1) / ||x||^(p-1), zero where the norm is zero
    safe = ns.where(oe == 0, 1.0, oe)
    ratio = ns.where(oe == 0, 0.0, ns.pow(a / safe, ord - 1))
    return (ge * ratio * sgn(ns, x),)


vector_norm.defjvp(TRANSPOSED)


@vector_norm.defbatch
def vector_norm_batch(ns, dims, x, /, *, axis=None, keepdims=False, ord=2):
    nd = x.ndim - 1
    axis = tuple(range(1, nd + 1)) if axis is None else shift(axis, nd)
    return ns.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord)


def _vector_norm_shape(a, x, /, *, axis=None, keepdims=False, ord=2):
    shape: tuple[int, ...]
    if axis is None and not keepdims:
        shape = ()
    else:
        shape = reduced(x.shape, axis, keepdims)
    return new(shape, _real(x.dtype))


def _flattens_by_copy(x, axis):
    """numpy.linalg.vector_norm flattens (axis None) or moves the axes first and merges them
    (a tuple): a copy unless the merged axes are adjacent in memory."""
    if axis is None:
        return not x.contiguous
    if isinstance(axis, int) or len(axis) < 2:
        return False
    axes = [ax % x.ndim for ax in axis]
    adjacent = all(b == a + 1 for a, b in zip(axes, axes[1:], strict=False))
    return not (adjacent and x.contiguous)


def _vector_norm_memory(out, x, /, *, axis=None, keepdims=False, ord=2):
    s, r = x.dtype.itemsize, _real(x.dtype).itemsize
    copy = x.size * s if _flattens_by_copy(x, axis) else 0
    if ord in (2, None):  # sqrt(sum((conj(x) * x).real)): conj(x) of complex x, the product
        conj = x.size * s if x.dtype.kind == "c" else 0
        return copy + conj + x.size * s + out.size * r + _read_buffers(x, 2)
    if ord == 0:  # (x != 0).astype(real).sum()
        return copy + x.size * (1 + r) + _read_buffers(x, 1)
    return copy + x.size * r + _read_buffers(x, 1)  # abs(x), raised to ord in place


vector_norm.defshape(_vector_norm_shape, memory=_vector_norm_memory)
