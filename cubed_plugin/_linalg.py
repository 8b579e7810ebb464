"""The ``linalg`` functions Cubed 0.27 lacks.

Cubed 0.27 has ``matmul``, ``matrix_transpose``, ``outer``, ``qr``, ``svd``, ``svdvals``,
``tensordot`` and ``vecdot``; everything else of the extension is missing. Added here:

- stacks of matrices whose two matrix axes are one chunk (rechunked to one when a block then
  fits a task's memory, see :mod:`cubed_plugin._blocks`): ``inv``, ``solve``, ``cholesky``,
  ``det``, ``slogdet``, ``eigh``, ``eigvalsh``, ``eig``, ``eigvals``, ``pinv``,
  ``matrix_power``, ``matrix_rank``, ``matrix_norm`` with ``ord`` 2, -2 or ``"nuc"``, and
  ``qr``/``svd``/``svdvals`` of stacks, of wide matrices, ``qr(mode="complete")`` and
  ``svd(full_matrices=True)``. One ``numpy.linalg`` call per
  block; the multi-output ones (``slogdet``, ``eigh``, ``eig``, ``svd``) compute all their
  outputs in one task per block (Cubed's multi-output ``general_blockwise``), no recomputation.
- ``qr``, ``svd`` and ``svdvals`` of one matrix: one NumPy call when it fits a task (NumPy's
  factors, signs included, whatever the chunking); a tall matrix too large for that goes to
  Cubed's tall-and-skinny QR, on the chunking it needs (one column chunk, row blocks of at
  least n rows: rechunked, or refused before computing when such blocks do not fit a task's
  memory; on other chunkings Cubed returns wrong values, twice the singular values or others,
  or fails), whose factors may differ from NumPy's in the signs of their columns.
- ``cross``: the vector axis (3 long) one chunk, ``numpy.cross`` per block.
- chunk-wise, any chunking: ``vector_norm`` and ``matrix_norm`` with ``ord`` "fro", 1, -1, inf,
  -inf (Cubed reductions); ``diagonal`` (each block of the diagonal reads only the blocks of
  ``x`` that the diagonal crosses) and ``trace`` (a sum of the diagonal).

Memory: LAPACK's work buffers are allocated per matrix (outside NumPy's tracked memory; the
process high-water mark grew by up to two matrices for inv/solve/eigh on NumPy 2.4): blocks
declare three matrices of 16-byte elements as temporaries.
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import numpy as np

from ._blocks import Out, _regular, core_apply, implements

MATRIX = "the two matrix axes"


class EighResult(NamedTuple):
    eigenvalues: Any
    eigenvectors: Any


class EigResult(NamedTuple):
    eigenvalues: Any
    eigenvectors: Any


class SlogdetResult(NamedTuple):
    sign: Any
    logabsdet: Any


class SVDResult(NamedTuple):
    U: Any
    S: Any
    Vh: Any


def _float(dtype: Any) -> Any:
    dt = np.dtype(dtype)
    return dt if dt.kind in "fc" else np.dtype(np.float64)


def _real(dtype: Any) -> Any:
    dt = _float(dtype)
    return np.dtype(np.float32) if dt in (np.float32, np.complex64) else np.dtype(np.float64)


def _matrices(fname: str, x: Any, square: bool = True) -> None:
    if x.ndim < 2:
        raise ValueError(f"x must have at least 2 dimensions, got {x.ndim} (linalg.{fname})")
    if square and x.shape[-1] != x.shape[-2]:
        raise ValueError(
            f"x must be a stack of square matrices, got shape {tuple(x.shape)} (linalg.{fname})"
        )


def _temps(ins: list, outs: list) -> int:
    """Three 16-byte matrices of the largest input's matrix size (LAPACK work copies)."""
    return 3 * 16 * max(s[-1] * (s[-2] if len(s) > 1 else 1) for s, _ in ins)


def _core(x: Any) -> tuple[int, int]:
    return (x.ndim - 2, x.ndim - 1)


def _apply(fname: str, func: Any, x: Any, outs: list[tuple[tuple[int, ...], Any]]) -> Any:
    """``func`` over stacks of matrices of ``x``; each output is (its core shape, dtype)."""
    batch = tuple(x.shape[:-2])
    nb = len(batch)
    o = [Out(batch + core, tuple(range(nb, nb + len(core))), dt) for core, dt in outs]
    return core_apply(f"linalg.{fname}", func, [x], [_core(x)], o, temps=_temps, what=MATRIX)


@implements("linalg.inv")
def inv(x: Any, /) -> Any:
    _matrices("inv", x)
    return _apply("inv", np.linalg.inv, x, [(tuple(x.shape[-2:]), _float(x.dtype))])


@implements("linalg.cholesky")
def cholesky(x: Any, /, *, upper: bool = False) -> Any:
    _matrices("cholesky", x)
    f = functools.partial(np.linalg.cholesky, upper=upper)
    return _apply("cholesky", f, x, [(tuple(x.shape[-2:]), _float(x.dtype))])


@implements("linalg.det")
def det(x: Any, /) -> Any:
    _matrices("det", x)
    return _apply("det", np.linalg.det, x, [((), _float(x.dtype))])


@implements("linalg.slogdet")
def slogdet(x: Any, /) -> SlogdetResult:
    _matrices("slogdet", x)
    sign, logabs = _apply(
        "slogdet", np.linalg.slogdet, x, [((), _float(x.dtype)), ((), _real(x.dtype))]
    )
    return SlogdetResult(sign, logabs)


@implements("linalg.eigh")
def eigh(x: Any, /) -> EighResult:
    _matrices("eigh", x)
    n = x.shape[-1]
    w, v = _apply("eigh", np.linalg.eigh, x, [((n,), _real(x.dtype)), ((n, n), _float(x.dtype))])
    return EighResult(w, v)


@implements("linalg.eigvalsh")
def eigvalsh(x: Any, /) -> Any:
    _matrices("eigvalsh", x)
    return _apply("eigvalsh", np.linalg.eigvalsh, x, [((x.shape[-1],), _real(x.dtype))])


def _complex(dtype: Any) -> Any:
    return np.dtype(np.complex64 if _real(dtype) == np.float32 else np.complex128)


@implements("linalg.eig")
def eig(x: Any, /) -> EigResult:
    _matrices("eig", x)
    n, dt = x.shape[-1], _complex(x.dtype)
    w, v = _apply("eig", np.linalg.eig, x, [((n,), dt), ((n, n), dt)])
    return EigResult(w, v)


@implements("linalg.eigvals")
def eigvals(x: Any, /) -> Any:
    _matrices("eigvals", x)
    return _apply("eigvals", np.linalg.eigvals, x, [((x.shape[-1],), _complex(x.dtype))])


@implements("linalg.matrix_power")
def matrix_power(x: Any, n: int, /) -> Any:
    _matrices("matrix_power", x)
    f = functools.partial(np.linalg.matrix_power, n=n)
    return _apply("matrix_power", f, x, [(tuple(x.shape[-2:]), x.dtype)])


def _with_rtol(fname: str, func: Any, x: Any, rtol: Any, core: tuple[int, ...], dtype: Any) -> Any:
    """``func(block, rtol=...)`` over stacks of matrices; an array ``rtol`` (broadcasting
    against the stack's batch shape) is blocked alongside."""
    batch = tuple(x.shape[:-2])
    nb = len(batch)
    if hasattr(rtol, "shape"):
        batch = tuple(np.broadcast_shapes(batch, tuple(rtol.shape)))
        nb = len(batch)
        out = Out(batch + core, tuple(range(nb, nb + len(core))), dtype)
        return core_apply(
            f"linalg.{fname}",
            functools.partial(_rtol_block, func),
            [x, rtol],
            [_core(x), ()],
            [out],
            temps=_temps,
            what=MATRIX,
        )
    return _apply(fname, functools.partial(func, rtol=rtol), x, [(core, dtype)])


def _rtol_block(func: Any, a: np.ndarray, rtol: np.ndarray) -> np.ndarray:
    return func(a, rtol=rtol)


@implements("linalg.pinv")
def pinv(x: Any, /, *, rtol: Any = None) -> Any:
    _matrices("pinv", x, square=False)
    m, n = x.shape[-2:]
    return _with_rtol("pinv", np.linalg.pinv, x, rtol, (n, m), _float(x.dtype))


@implements("linalg.matrix_rank")
def matrix_rank(x: Any, /, *, rtol: Any = None) -> Any:
    _matrices("matrix_rank", x, square=False)
    return _with_rtol("matrix_rank", np.linalg.matrix_rank, x, rtol, (), np.int64)


@implements("linalg.cross")
def cross(x1: Any, x2: Any, /, *, axis: int = -1) -> Any:
    import cubed

    ndim = max(x1.ndim, x2.ndim)
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of range for {ndim} dimensions (linalg.cross)")
    neg = axis - ndim if axis >= 0 else axis
    if x1.ndim + neg < 0 or x2.ndim + neg < 0 or x1.shape[neg] != 3 or x2.shape[neg] != 3:
        raise ValueError(
            f"x1 and x2 must have 3 elements along axis {axis}, got shapes "
            f"{tuple(x1.shape)} and {tuple(x2.shape)} (linalg.cross)"
        )
    shape = list(np.broadcast_shapes(tuple(x1.shape), tuple(x2.shape)))
    dt = cubed.result_type(x1, x2)
    f = functools.partial(np.cross, axis=neg)
    return core_apply(
        "linalg.cross",
        f,
        [x1, x2],
        [(x1.ndim + neg,), (x2.ndim + neg,)],
        [Out(tuple(shape), (ndim + neg,), dt)],
        what=f"axis {axis}",
    )


class QRResult(NamedTuple):
    Q: Any
    R: Any


def _tall(x: Any) -> bool:
    """Whether ``x`` is one matrix Cubed's tall-and-skinny QR takes (at least as many rows as
    columns)."""
    return x.ndim == 2 and x.shape[0] >= x.shape[1] > 0


def _tall_and_skinny(fname: str, x: Any) -> Any:
    """``x`` (m x n, m >= n) chunked as Cubed's tall-and-skinny QR needs: one column chunk and
    row blocks of at least n rows each, the last one too (with fewer, its blocks' R factors do
    not stack and Cubed returns wrong values, or fails with "All outputs must have matching
    number of blocks"). The row blocks keep their size where it is large enough; a
    chunking that would not fit a task's memory (the block, Cubed's four copies of it for the
    QR, its Q and R) is refused here, before anything computes."""
    import cubed

    from ._blocks import _limits, _mb, _nbytes
    from ._cubed_seam import projected_mem, rechunk_task_mem

    m, n = x.shape
    if x.numblocks[1] == 1 and min(x.chunks[0]) >= n:
        return x
    r = max(max(x.chunks[0]), n)
    while m % r and m % r < n:
        r += 1
    allowed, reserved = _limits(x.spec)
    block = _nbytes((r, n), x.dtype)
    need = max(
        projected_mem(x.spec, [block], 4 * block + _nbytes((n, n), x.dtype), block),
        rechunk_task_mem(x.spec, block),
    )
    if allowed and need > allowed:
        raise NotImplementedError(
            f"Cubed computes linalg.{fname} of a {m} x {n} matrix by a tall-and-skinny QR, "
            f"which needs one column chunk and row blocks of at least {n} rows: x is chunked "
            f"{tuple(x.chunks)}, and blocks of {r} rows need about {_mb(need)} of task "
            f"memory, more than the Spec's allowed_mem ({_mb(allowed)}, of which reserved_mem "
            f"{_mb(reserved)}). Use a Spec whose allowed_mem is at least {_mb(need)}, or "
            f"fewer columns"
        )
    return cubed.rechunk(x, (r, n))


def _whole_or_tsqr(fname: str, x: Any, whole: Any, tsqr: Any) -> Any:
    """``whole()`` (one NumPy call per matrix: NumPy's factors, signs included, for any
    chunking) when ``x`` is a stack, wide, or one matrix that fits a task's memory; else
    ``tsqr(x)`` on the chunking Cubed's tall-and-skinny QR needs. The factors are unique only
    up to the signs of their columns: Cubed's QR of a matrix too large for one task gives other
    signs than NumPy's (the singular values are the same)."""
    if not _tall(x):
        return whole()
    try:
        return whole()
    except NotImplementedError:  # the matrix does not fit one task (core_apply's refusal)
        return tsqr(_tall_and_skinny(fname, x))


@implements("linalg.qr")
def qr(x: Any, /, *, mode: str = "reduced") -> QRResult:
    import cubed

    _matrices("qr", x, square=False)
    if mode not in ("reduced", "complete"):
        raise ValueError(f"mode must be 'reduced' or 'complete', got {mode!r} (linalg.qr)")
    m, n = x.shape[-2:]
    k = m if mode == "complete" else min(m, n)
    f = functools.partial(np.linalg.qr, mode=mode)
    dt = _float(x.dtype)

    def whole() -> Any:
        return _apply("qr", f, x, [((m, k), dt), ((k, n), dt)])

    if mode == "complete":
        return QRResult(*whole())
    return QRResult(*_whole_or_tsqr("qr", x, whole, cubed.linalg.qr))


@implements("linalg.svd")
def svd(x: Any, /, *, full_matrices: bool = True) -> SVDResult:
    import cubed

    _matrices("svd", x, square=False)
    m, n = x.shape[-2:]
    k = min(m, n)
    f = functools.partial(np.linalg.svd, full_matrices=full_matrices)
    dt = _float(x.dtype)
    shapes = [(m, m if full_matrices else k), (k,), (n if full_matrices else k, n)]

    def whole() -> Any:
        return _apply("svd", f, x, list(zip(shapes, [dt, _real(dt), dt], strict=True)))

    if full_matrices:
        return SVDResult(*whole())
    thin = functools.partial(cubed.linalg.svd, full_matrices=False)
    return SVDResult(*_whole_or_tsqr("svd", x, whole, thin))


@implements("linalg.svdvals")
def svdvals(x: Any, /) -> Any:
    import cubed

    _matrices("svdvals", x, square=False)
    k = min(x.shape[-2:])

    def whole() -> Any:
        return _apply("svdvals", np.linalg.svdvals, x, [((k,), _real(x.dtype))])

    return _whole_or_tsqr("svdvals", x, whole, cubed.linalg.svdvals)


@implements("linalg.solve")
def solve(x1: Any, x2: Any, /) -> Any:
    import cubed

    _matrices("solve", x1)
    m = x1.shape[-1]
    dt = _float(cubed.result_type(x1, x2))
    if x2.ndim == 1:  # one vector, for every matrix of the stack
        if x2.shape[0] != m:
            raise ValueError(f"x2 has {x2.shape[0]} rows, x1's matrices {m} (linalg.solve)")
        batch = tuple(x1.shape[:-2])
        out = Out(batch + (m,), (len(batch),), dt)
        cores = [_core(x1), (0,)]
    else:
        if x2.shape[-2] != m:
            raise ValueError(f"x2's matrices have {x2.shape[-2]} rows, x1's {m} (linalg.solve)")
        batch = tuple(np.broadcast_shapes(tuple(x1.shape[:-2]), tuple(x2.shape[:-2])))
        out = Out(batch + (m, x2.shape[-1]), (len(batch), len(batch) + 1), dt)
        cores = [_core(x1), _core(x2)]
    return core_apply(
        "linalg.solve", _solve_block, [x1, x2], cores, [out], temps=_temps, what=MATRIX
    )


def _solve_block(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.linalg.solve(a, b)


# -- norms: Cubed reductions, any chunking ---------------------------------------------------


@implements("linalg.vector_norm")
def vector_norm(x: Any, /, *, axis: Any = None, keepdims: bool = False, ord: Any = 2) -> Any:
    import cubed

    if isinstance(axis, list):
        axis = tuple(axis)
    a = cubed.abs(x)
    if ord == float("inf"):
        return cubed.max(a, axis=axis, keepdims=keepdims)
    if ord == -float("inf"):
        return cubed.min(a, axis=axis, keepdims=keepdims)
    if ord == 0:
        return cubed.sum(cubed.astype(x != 0, a.dtype), axis=axis, keepdims=keepdims)
    if ord == 1:
        return cubed.sum(a, axis=axis, keepdims=keepdims)
    if ord == 2:
        return cubed.sqrt(cubed.sum(a * a, axis=axis, keepdims=keepdims))
    if isinstance(ord, bool) or not isinstance(ord, int | float):
        raise ValueError(f"invalid ord {ord!r} (linalg.vector_norm)")
    return cubed.pow(cubed.sum(cubed.pow(a, float(ord)), axis=axis, keepdims=keepdims), 1.0 / ord)


@implements("linalg.matrix_norm")
def matrix_norm(x: Any, /, *, keepdims: bool = False, ord: Any = "fro") -> Any:
    import cubed

    _matrices("matrix_norm", x, square=False)
    inf = float("inf")
    if ord == "fro":
        a = cubed.abs(x)
        return cubed.sqrt(cubed.sum(a * a, axis=(-2, -1), keepdims=keepdims))
    if ord in (1, -1, inf, -inf) and not isinstance(ord, bool):
        # 1-norms: the largest column sum (sum over rows); inf-norms: the largest row sum
        a = cubed.abs(x)
        sums = cubed.sum(a, axis=-2 if ord in (1, -1) else -1, keepdims=True)
        pick = cubed.max if ord in (1, inf) else cubed.min
        r = pick(sums, axis=-1 if ord in (1, -1) else -2, keepdims=True)
        return r if keepdims else cubed.squeeze(r, axis=(-2, -1))
    if ord in (2, -2, "nuc") and not isinstance(ord, bool):
        f = functools.partial(np.linalg.matrix_norm, ord=ord)
        r = _apply("matrix_norm", f, x, [((), _real(x.dtype))])
        return cubed.expand_dims(r, axis=(-2, -1)) if keepdims else r
    raise ValueError(f"invalid ord {ord!r} (linalg.matrix_norm)")


# -- diagonal and trace: chunk-wise ----------------------------------------------------------


@implements("linalg.diagonal")
def diagonal(x: Any, /, *, offset: int = 0) -> Any:
    """The diagonal of each matrix, for any chunking: block ``k`` of the result reads only the
    blocks of ``x`` that its stretch of the diagonal crosses."""
    import cubed

    from ._cubed_seam import ChunkKey, FunctionArgs, general_blockwise

    _matrices("diagonal", x, square=False)
    m, n = x.shape[-2:]
    r0, c0 = max(-offset, 0), max(offset, 0)
    length = max(0, min(m - r0, n - c0))
    batch = tuple(x.shape[:-2])
    if length == 0 or math.prod(batch) == 0:
        return cubed.asarray(np.empty(batch + (length,), dtype=x.dtype), spec=x.spec)
    cm, cn = x.chunksize[-2:]
    cl = cm
    segs = functools.partial(_segments, r0=r0, c0=c0, cm=cm, cn=cn, cl=cl, length=length)
    nblocks = -(-length // cl)
    chunks = tuple(x.chunks[:-2]) + (_regular(length, cl),)
    name = x.name

    def back_key(out_key: Any) -> Any:
        *b, k = out_key.coords
        keys = tuple(ChunkKey(name, (*b, rb, cb)) for rb, cb, *_ in segs(k))
        return FunctionArgs(iter(keys), output_name=out_key.name)

    return general_blockwise(
        functools.partial(_diagonal_block, segs),
        back_key,
        x,
        shapes=[batch + (length,)],
        dtypes=[x.dtype],
        chunkss=[chunks],
        num_input_blocks=(max(len(segs(k)) for k in range(nblocks)),),
    )


def _segments(k: int, r0: int, c0: int, cm: int, cn: int, cl: int, length: int) -> list:
    """Stretches of block ``k`` of the diagonal that lie in one block of ``x``: (row block,
    column block, row in it, column in it, length)."""
    lo, hi = k * cl, min((k + 1) * cl, length)
    out, i = [], lo
    while i < hi:
        r, c = r0 + i, c0 + i
        rb, cb = r // cm, c // cn
        end = min(hi, (rb + 1) * cm - r0, (cb + 1) * cn - c0)
        out.append((rb, cb, r - rb * cm, c - cb * cn, end - i))
        i = end
    return out


def _diagonal_block(segs: Any, blocks: Any, block_id: Any = None) -> np.ndarray:
    pieces = []
    for (_, _, r, c, size), blk in zip(segs(block_id[-1]), blocks, strict=True):
        pieces.append(np.diagonal(blk[..., r : r + size, c : c + size], axis1=-2, axis2=-1))
    return np.concatenate(pieces, axis=-1)


@implements("linalg.trace")
def trace(x: Any, /, *, offset: int = 0, dtype: Any = None) -> Any:
    import cubed

    return cubed.sum(diagonal(x, offset=offset), axis=-1, dtype=dtype)
