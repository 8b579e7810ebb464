"""Shape rules of the ``linalg`` extension, as NumPy (through array_api_compat) computes it.

Views: ``diagonal`` (read-only in NumPy), and ``cholesky(upper=True)`` of a real matrix (the
transpose of the new lower factor); ``matrix_power(x, 1)`` is ``x`` itself. Everything else makes
new arrays, named tuples where NumPy returns them (``EigResult``, ``EighResult``,
``SlogdetResult``, ``SVDResult``, ``QRResult``).

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
"""

from __future__ import annotations

import math
from typing import NamedTuple

import array_api_compat.numpy as npx
import numpy as np
from array_api_compat.common._linalg import (
    EighResult,
    EigResult,
    QRResult,
    SlogdetResult,
    SVDResult,
)

from ..._primitive import defshape
from ...ops._rules.shapes import (
    BUFFER_ELEMENTS,
    as_abstract,
    broadcast,
    in_turn,
    is_array,
    native,
    new,
    probe_dtype,
    probe_dtypes,
    reduced,
    view,
)

la = npx.linalg


class _Sized(NamedTuple):
    """Size and dtype of an array the backend makes inside a call (no abstract array is made:
    that would count as allocated)."""

    size: int
    dtype: np.dtype


# -- sizes ---------------------------------------------------------------------------------------
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


# -- rules ---------------------------------------------------------------------------------------
def _cholesky(a, x, /, *, upper=False):
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


def _cross(a, x1, x2, /, *, axis=-1):
    # numpy.cross: moves ``axis`` last in each operand, broadcasts the rest, moves it back
    rest1 = x1.shape[:axis % x1.ndim] + x1.shape[axis % x1.ndim + 1:]
    rest2 = x2.shape[:axis % x2.ndim] + x2.shape[axis % x2.ndim + 1:]
    if x1.shape[axis] != 3 or x2.shape[axis] != 3:
        raise ValueError(f"linalg.cross: both arrays must have 3 elements along axis {axis}")
    shape = list(broadcast(rest1, rest2))
    at = axis % (len(shape) + 1)
    shape.insert(at, 3)
    out = new(shape, np.promote_types(x1.dtype, x2.dtype))
    return out if at == len(shape) - 1 else view(out, shape, contiguous=False)  # moveaxis


def _cross_memory(out, x1, x2, /, *, axis=-1):
    # both operands cast (astype copies even to the same dtype), one component's temporary
    s = out.dtype.itemsize
    return (x1.size + x2.size) * s + out.size // 3 * s


def _det(a, x, /):
    return new(x.shape[:-2], probe_dtype(la.det, x))


def _getrf_memory(out, x, /):
    """det/slogdet: LU of a copy of each matrix (and its pivots)."""
    n = x.shape[-1]
    outs = out if isinstance(out, tuple) else (out,)
    return native(n * n * _work(x).itemsize + 4 * n) + _widened([x], outs)


def _diagonal(a, x, /, *, offset=0):
    m, n = _dims(x)
    length = max(0, min(m, n - offset) if offset >= 0 else min(m + offset, n))
    return view(x, x.shape[:-2] + (length,), contiguous=False)


def _eig(a, x, /):
    w, v = probe_dtypes(la.eig, x)
    return EigResult(new(x.shape[:-1], w), new(x.shape, v))


def _eig_memory(out, x, /):
    # a copy of the matrix and the right vectors (real: in two real n x n blocks, then complex),
    # ``*geev``'s workspace; before the call, isfinite(x) (a bool per element)
    n = x.shape[-1]
    work = 32 * n * n + 128 * n * 16
    return in_turn(x.size, max(x.size, work)) + _widened([x], out)


def _eigvals(a, x, /):
    return new(x.shape[:-1], probe_dtype(la.eigvals, x))


def _eigvals_memory(out, x, /):
    n = x.shape[-1]
    work = (n * n + 64 * n) * _work(x).itemsize
    return in_turn(x.size, max(x.size, work)) + _widened([x], [out])


def _eigh(a, x, /):
    w, v = probe_dtypes(la.eigh, x)
    return EighResult(new(x.shape[:-1], w), new(x.shape, v))


def _eigh_memory(out, x, /):
    # ``*syevd``/``*heevd`` with vectors: the copy, and a workspace of 2 n^2 (+ O(n)) elements
    n = x.shape[-1]
    return native((3 * n * n + 72 * n) * _work(x).itemsize) + _widened([x], out)


def _eigvalsh(a, x, /):
    return new(x.shape[:-1], probe_dtype(la.eigvalsh, x))


def _eigvalsh_memory(out, x, /):
    n = x.shape[-1]
    return native((n * n + 72 * n) * _work(x).itemsize) + _widened([x], [out])


def _inv(a, x, /):
    return new(x.shape, probe_dtype(la.inv, x))


def _inv_memory(out, x, /):
    # ``*gesv`` on a copy of the matrix against an identity, with pivots
    n = x.shape[-1]
    return native(2 * n * n * _work(x).itemsize + 4 * n) + _widened([x], [out])


def _real(dtype):
    return np.dtype(dtype).type(0).real.dtype


def _matrix_norm(a, x, /, *, keepdims=False, ord="fro"):
    shape = x.shape[:-2] + ((1, 1) if keepdims else ())
    return new(shape, _real(x.dtype))


def _matrix_norm_memory(out, x, /, *, keepdims=False, ord="fro"):
    s, r = x.dtype.itemsize, _real(x.dtype).itemsize
    if ord in ("fro", "f", None):  # sqrt(sum((conj(x) * x).real)): one x-sized product (NumPy
        return x.size * s + out.size * r  # multiplies into conj's temporary), then the sum
    if ord in (1, -1, math.inf, -math.inf):  # sum(abs(x)) along one axis, then max/min
        m, n = _dims(x)
        return x.size * r + _batch(x) * (n if ord in (1, -1) else m) * r
    # 2, -2, "nuc": the singular values (NumPy's svd without vectors), then max/min/sum
    return native(_gesdd(x, "N")) + _svdvals_wide(x) + _batch(x) * min(_dims(x)) * r


def _svdvals_wide(x):
    return _widened([x], [_Sized(_batch(x) * min(_dims(x)), _real(x.dtype))])


def _matrix_power(a, x, n, /):
    if n == 1:
        return x
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


def _matrix_rank(a, x, /, *, rtol=None):
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


def _outer(a, x1, x2, /):
    return new((x1.size, x2.size), probe_dtype(la.outer, x1, x2))


def _outer_memory(out, x1, x2, /):
    # multiply(x1[:, None], x2[None, :]): NumPy's iterator buffers both broadcast operands
    return 2 * min(out.size, BUFFER_ELEMENTS) * out.dtype.itemsize


def _pinv(a, x, /, *, rtol=None):
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


def _qr(a, x, /, *, mode="reduced"):
    m, n = _dims(x)
    mc = m if mode == "complete" and m > n else min(m, n)
    q, r = probe_dtypes(la.qr, x, mode=mode)
    return QRResult(new(x.shape[:-2] + (m, mc), q), new(x.shape[:-2] + (mc, n), r))


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
    # the copy keeps x's memory order: triu's where then buffers R when x is not in C order
    mask = mc * n + (0 if x.contiguous else min(mc * n, BUFFER_ELEMENTS) * c)
    return kept + in_turn(q + r + mask, max(geqrf, q + max(gqr, r + mask)))


def _slogdet(a, x, /):
    sign, logabs = probe_dtypes(la.slogdet, x)
    return SlogdetResult(new(x.shape[:-2], sign), new(x.shape[:-2], logabs))


def _solve(a, x1, x2, /):
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


def _svd(a, x, /, *, full_matrices=True):
    m, n = _dims(x)
    k = min(m, n)
    u, s, vh = probe_dtypes(la.svd, x, full_matrices=full_matrices)
    b = x.shape[:-2]
    return SVDResult(new(b + (m, m if full_matrices else k), u), new(b + (k,), s),
                     new(b + (n if full_matrices else k, n), vh))  # fmt: skip


def _svd_memory(out, x, /, *, full_matrices=True):
    return native(_gesdd(x, "A" if full_matrices else "S")) + _widened([x], out)


def _svdvals(a, x, /):
    return new(x.shape[:-2] + (min(_dims(x)),), probe_dtype(la.svdvals, x))


def _svdvals_memory(out, x, /):
    return native(_gesdd(x, "N")) + _widened([x], [out])


def _trace(a, x, /, *, offset=0, dtype=None):
    return new(x.shape[:-2], probe_dtype(la.trace, x, offset=offset, dtype=dtype))


def _vector_norm(a, x, /, *, axis=None, keepdims=False, ord=2):
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
    if ord in (2, None):  # sqrt(sum((conj(x) * x).real)): one product, then the sum
        return copy + x.size * s + out.size * r
    if ord == 0:  # (x != 0).astype(real).sum()
        return copy + x.size * (1 + r)
    return copy + x.size * r  # abs(x), raised to ord in place for the other orders


defshape("linalg.cholesky", _cholesky, memory=_cholesky_memory)
defshape("linalg.cross", _cross, memory=_cross_memory)
defshape("linalg.det", _det, memory=_getrf_memory)
defshape("linalg.diagonal", _diagonal)
defshape("linalg.eig", _eig, memory=_eig_memory)
defshape("linalg.eigh", _eigh, memory=_eigh_memory)
defshape("linalg.eigvals", _eigvals, memory=_eigvals_memory)
defshape("linalg.eigvalsh", _eigvalsh, memory=_eigvalsh_memory)
defshape("linalg.inv", _inv, memory=_inv_memory)
defshape("linalg.matrix_norm", _matrix_norm, memory=_matrix_norm_memory)
defshape("linalg.matrix_power", _matrix_power, memory=_matrix_power_memory)
defshape("linalg.matrix_rank", _matrix_rank, memory=_matrix_rank_memory)
defshape("linalg.outer", _outer, memory=_outer_memory)
defshape("linalg.pinv", _pinv, memory=_pinv_memory)
defshape("linalg.qr", _qr, memory=_qr_memory)
defshape("linalg.slogdet", _slogdet, memory=_getrf_memory)
defshape("linalg.solve", _solve, memory=_solve_memory)
defshape("linalg.svd", _svd, memory=_svd_memory)
defshape("linalg.svdvals", _svdvals, memory=_svdvals_memory)
defshape("linalg.trace", _trace)
defshape("linalg.vector_norm", _vector_norm, memory=_vector_norm_memory)
