"""NumPy's products (``dot``, ``inner``, ``outer``, ``tensordot``, ``kron``, ``einsum``) and
``numpy.linalg`` on our arrays."""

from __future__ import annotations

import math
import string
from typing import Any

import numpy as np

from .._host import NoValue
from .._state import STACK
from ._convert import _NV, Composition, _array, _finish, _unsupported
from ._dispatch import FUNCTIONS, _function, _implements, _norm_axis
from .ufuncs import _float_of

# products


@_implements("dot")
def _dot(ns: Any, a: Any, b: Any, out: Any = None) -> Any:
    x, y = _array(ns, a), _array(ns, b)
    if x.ndim == 0 or y.ndim == 0:
        r = x * y
    elif x.ndim <= 2 and y.ndim <= 2:
        r = ns.matmul(x, y)
    else:  # sum over the last axis of a and the second-to-last of b
        r = ns.tensordot(x, y, axes=([x.ndim - 1], [max(y.ndim - 2, 0)]))
    return _finish(ns, r, out, "dot")


@_implements("vdot")
def _vdot(ns: Any, a: Any, b: Any) -> Any:
    x, y = ns.reshape(_array(ns, a), (-1,)), ns.reshape(_array(ns, b), (-1,))
    return ns.sum(ns.conj(x) * y) if ns.isdtype(x.dtype, "complex floating") else ns.sum(x * y)


@_implements("inner")
def _inner(ns: Any, a: Any, b: Any) -> Any:
    x, y = _array(ns, a), _array(ns, b)
    if x.ndim == 0 or y.ndim == 0:
        return x * y
    return ns.tensordot(x, y, axes=([x.ndim - 1], [y.ndim - 1]))


@_implements("outer")
def _outer_function(ns: Any, a: Any, b: Any, out: Any = None) -> Any:
    x, y = ns.reshape(_array(ns, a), (-1,)), ns.reshape(_array(ns, b), (-1,))
    return _finish(ns, x[:, None] * y[None, :], out, "outer")


@_implements("linalg.outer")
def _linalg_outer(ns: Any, x1: Any, x2: Any, /) -> Any:
    return ns.linalg.outer(_array(ns, x1), _array(ns, x2))


def _tensordot_axes(axes: Any) -> Any:
    if isinstance(axes, int | np.integer):
        return int(axes)
    a, b = axes
    a = [int(a)] if isinstance(a, int | np.integer) else [int(i) for i in a]
    b = [int(b)] if isinstance(b, int | np.integer) else [int(i) for i in b]
    return (a, b)


@_implements("tensordot", "linalg.tensordot")
def _tensordot(ns: Any, a: Any, b: Any, axes: Any = 2) -> Any:
    return ns.tensordot(_array(ns, a), _array(ns, b), axes=_tensordot_axes(axes))


@_implements("linalg.matmul")
def _linalg_matmul(ns: Any, x1: Any, x2: Any, /) -> Any:
    return ns.matmul(_array(ns, x1), _array(ns, x2))


@_implements("linalg.vecdot")
def _linalg_vecdot(ns: Any, x1: Any, x2: Any, /, *, axis: int = -1) -> Any:
    return ns.vecdot(_array(ns, x1), _array(ns, x2), axis=axis)


@_implements("cross", "linalg.cross")
def _cross(
    ns: Any,
    a: Any,
    b: Any,
    axisa: int = -1,
    axisb: int = -1,
    axisc: int = -1,
    axis: Any = None,
) -> Any:
    x, y = _array(ns, a), _array(ns, b)
    if axis is not None:
        axisa = axisb = axisc = axis
    x, y = ns.moveaxis(x, axisa, -1), ns.moveaxis(y, axisb, -1)
    if x.shape[-1] != 3 or y.shape[-1] != 3:
        raise _unsupported("cross", "vectors of 2 components")
    r = ns.linalg.cross(x, y, axis=-1)
    return ns.moveaxis(r, -1, axisc) if r.ndim else r


@_implements("kron")
def _kron(ns: Any, a: Any, b: Any) -> Any:
    x, y = _array(ns, a), _array(ns, b)
    nd = max(x.ndim, y.ndim)
    x = ns.reshape(x, (1,) * (nd - x.ndim) + tuple(x.shape))
    y = ns.reshape(y, (1,) * (nd - y.ndim) + tuple(y.shape))
    # x[i, None, j, None] * y[None, k, None, l] -> (i*k, j*l)
    xs = ns.reshape(x, tuple(s for d in x.shape for s in (d, 1)))
    ys = ns.reshape(y, tuple(s for d in y.shape for s in (1, d)))
    return ns.reshape(xs * ys, tuple(p * q for p, q in zip(x.shape, y.shape, strict=True)))


_LETTERS = string.ascii_letters


def _sublist_subscripts(args: tuple) -> tuple[str, list]:
    """np.einsum's alternative form ``(op0, sublist0, op1, sublist1, ..., [sublistout])``
    as a subscripts string and the operands."""
    ops, terms = [], []
    rest = list(args)
    while len(rest) >= 2:
        ops.append(rest.pop(0))
        terms.append(rest.pop(0))

    def term(sub: Any) -> str:
        return "".join("..." if s is Ellipsis else _LETTERS[int(s)] for s in sub)

    spec = ",".join(term(t) for t in terms)
    if rest:
        spec += "->" + term(rest[0])
    return spec, ops


@_implements("einsum")
def _einsum(
    ns: Any,
    *operands: Any,
    out: Any = None,
    dtype: Any = None,
    order: str = "K",
    casting: str = "safe",
    optimize: Any = False,
) -> Any:
    if isinstance(operands[0], str):
        subscripts, ops = operands[0].replace(" ", ""), list(operands[1:])
    else:
        subscripts, ops = _sublist_subscripts(operands)
    xs = [_array(ns, o) for o in ops]
    if dtype is not None:
        xs = [ns.astype(x, np.dtype(dtype)) for x in xs]
    return _finish(ns, ns._einsum(subscripts, *xs), out, "einsum")


@_implements("linalg.multi_dot")
def _multi_dot(ns: Any, arrays: Any, *, out: Any = None) -> Any:
    xs = [_array(ns, a) for a in arrays]
    first_vec, last_vec = xs[0].ndim == 1, xs[-1].ndim == 1
    if first_vec:
        xs[0] = xs[0][None, :]
    if last_vec:
        xs[-1] = xs[-1][:, None]
    r = xs[0]
    for x in xs[1:]:
        r = ns.matmul(r, x)
    if first_vec and last_vec:
        r = r[0, 0]
    elif first_vec:
        r = r[0]
    elif last_vec:
        r = r[:, 0]
    return _finish(ns, r, out, "linalg.multi_dot")


# numpy.linalg


def _linalg1(fname: str) -> Composition:
    def f(ns: Any, a: Any) -> Any:
        return _function(ns, f"linalg.{fname}")(_array(ns, a))

    return f


for _name in ("inv", "det", "slogdet", "svdvals"):
    FUNCTIONS[f"linalg.{_name}"] = _linalg1(_name)


@_implements("linalg.solve")
def _solve(ns: Any, a: Any, b: Any) -> Any:
    return ns.linalg.solve(_array(ns, a), _array(ns, b))


@_implements("linalg.cholesky")
def _cholesky(ns: Any, a: Any, /, *, upper: bool = False) -> Any:
    return ns.linalg.cholesky(_array(ns, a), upper=upper)


@_implements("linalg.qr")
def _qr(ns: Any, a: Any, mode: str = "reduced") -> Any:
    if mode == "r":
        return ns.linalg.qr(_array(ns, a), mode="reduced")[1]
    if mode not in ("reduced", "complete"):
        raise _unsupported("linalg.qr", f"mode={mode!r}")
    return ns.linalg.qr(_array(ns, a), mode=mode)


@_implements("linalg.svd")
def _svd(
    ns: Any, a: Any, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False
) -> Any:
    x = _array(ns, a)
    if not compute_uv:
        return ns.linalg.svdvals(x)
    return ns.linalg.svd(x, full_matrices=full_matrices)


def _lower(ns: Any, x: Any, uplo: str) -> Any:
    """NumPy's eigh reads one triangle: the matrix it means, from the lower (or upper) one."""
    if uplo not in ("L", "U"):
        raise ValueError("numpy.linalg.eigh(): UPLO argument must be 'L' or 'U'")
    low = ns.tril(x) if uplo == "L" else ns.matrix_transpose(ns.triu(x))
    strict = ns.tril(low, k=-1)
    return low + ns.conj(ns.matrix_transpose(strict))


@_implements("linalg.eigh")
def _eigh(ns: Any, a: Any, UPLO: str = "L") -> Any:
    return ns.linalg.eigh(_lower(ns, _array(ns, a), UPLO))


@_implements("linalg.eigvalsh")
def _eigvalsh(ns: Any, a: Any, UPLO: str = "L") -> Any:
    return ns.linalg.eigvalsh(_lower(ns, _array(ns, a), UPLO))


@_implements("linalg.pinv")
def _pinv(ns: Any, a: Any, rcond: Any = None, hermitian: bool = False, *, rtol: Any = _NV) -> Any:
    tol = rcond if rcond is not None else (None if rtol is _NV else rtol)
    return ns.linalg.pinv(_array(ns, a), rtol=tol)


@_implements("linalg.lstsq")
def _lstsq(ns: Any, a: Any, b: Any, rcond: Any = None) -> Any:
    """NumPy's least squares: ``(x, residuals, rank, s)``, ``x`` the minimum-norm solution
        ``pinv(a) b`` (singular values at most ``rcond`` times the largest taken as 0: machine
        precision times max(M, N) by default, as NumPy's), the residuals' squared norms per column
        of ``b`` where ``a`` has full column rank N < M (else empty), the rank and ``a``'s singular
        values. ``x`` and the residuals are differentiable where the rank does not change. Where
    the rank cannot be read (inside vmap, on a lazy backend), the residuals are the squared norms
    whenever M > N, whatever the rank."""
    A, B = _float_of(ns, _array(ns, a)), _float_of(ns, _array(ns, b))
    if A.ndim != 2:
        raise np.linalg.LinAlgError(
            f"numpy.linalg.lstsq(): {A.ndim}-dimensional array given. Array must be two-dimensional"
        )
    m, n = A.shape
    if B.ndim not in (1, 2) or B.shape[0] != m:
        raise np.linalg.LinAlgError(
            f"numpy.linalg.lstsq(): incompatible dimensions: a is {tuple(A.shape)}, b is "
            f"{tuple(B.shape)}"
        )
    dtype = ns.result_type(A, B)
    A, B = ns.astype(A, dtype), ns.astype(B, dtype)
    eps = float(ns.finfo(dtype).eps)
    tol = eps * max(m, n) if rcond is None else (eps if rcond < 0 else float(rcond))
    s = ns.linalg.svdvals(A)
    rank = ns.astype(ns.linalg.matrix_rank(A, rtol=tol), ns.int32)  # NumPy's dtype
    x = ns.linalg.pinv(A, rtol=tol) @ B
    b = rank._backend
    if isinstance(rank._data, NoValue) or b.abstract or b.lazy or b.level:
        # traced, projected, lazy or batched (one rank per example): no one value to branch
        # on. The full-rank case's shape: the residuals' squared norms where M > N (NumPy's
        # where the rank is N; where it is not, NumPy's are empty, which a batch cannot hold)
        if STACK.recorder is not None:
            STACK.recorder.data_dependent(
                "numpy.linalg.lstsq (its residuals, empty unless a has rank N)"
            )
        full = m > n
    else:
        full = int(rank) == n and m > n
    if full:
        r = B - A @ x
        sq = ns.real(ns.conj(r) * r) if ns.isdtype(dtype, "complex floating") else r * r
        residuals = ns.sum(sq, axis=0)
        residuals = ns.reshape(residuals, (1,)) if B.ndim == 1 else residuals
    else:
        residuals = ns.zeros((0,), dtype=s.dtype)
    return x, residuals, rank, s


@_implements("linalg.matrix_power")
def _matrix_power(ns: Any, a: Any, n: int) -> Any:
    return ns.linalg.matrix_power(_array(ns, a), int(n))


@_implements("linalg.matrix_rank")
def _matrix_rank(
    ns: Any, A: Any, tol: Any = None, hermitian: bool = False, *, rtol: Any = None
) -> Any:
    if tol is not None:
        raise _unsupported("linalg.matrix_rank", "tol=")
    return ns.linalg.matrix_rank(_array(ns, A), rtol=rtol)


@_implements("linalg.trace")
def _linalg_trace(ns: Any, x: Any, /, *, offset: int = 0, dtype: Any = None) -> Any:
    return ns.linalg.trace(_array(ns, x), offset=offset, dtype=dtype)


@_implements("linalg.diagonal")
def _linalg_diagonal(ns: Any, x: Any, /, *, offset: int = 0) -> Any:
    return ns.linalg.diagonal(_array(ns, x), offset=offset)


@_implements("linalg.matrix_norm")
def _linalg_matrix_norm(ns: Any, x: Any, /, *, keepdims: bool = False, ord: Any = "fro") -> Any:
    return ns.linalg.matrix_norm(_array(ns, x), keepdims=keepdims, ord=ord)


@_implements("linalg.vector_norm")
def _linalg_vector_norm(
    ns: Any,
    x: Any,
    /,
    *,
    axis: Any = None,
    keepdims: bool = False,
    ord: Any = 2,
) -> Any:
    return ns.linalg.vector_norm(_array(ns, x), axis=_norm_axis(axis), keepdims=keepdims, ord=ord)


@_implements("linalg.norm")
def _norm(ns: Any, x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Any:
    """NumPy's rules: no axis and no ord, the 2-norm of the flattened array; an int axis (or a
    1-D array), a vector norm; two axes (or a 2-D array), a matrix norm."""
    a = _array(ns, x)
    if not ns.isdtype(a.dtype, ("real floating", "complex floating")):
        a = ns.astype(a, ns.float64)
    if axis is None:
        if ord is None:
            r = ns.linalg.vector_norm(a, axis=None, ord=2)
            if keepdims:
                r = ns.reshape(r, (1,) * a.ndim)
            return r
        if a.ndim == 1:
            axis = (0,)
        elif a.ndim == 2:
            axis = (0, 1)
        else:
            raise ValueError("numpy.linalg.norm(): improper number of dimensions to norm")
    elif isinstance(axis, int | np.integer):
        axis = (int(axis),)
    else:
        axis = tuple(int(i) for i in axis)
    if len(axis) == 1:
        if isinstance(ord, str):
            raise ValueError(f"numpy.linalg.norm(): invalid norm order {ord!r} for vectors")
        p = 2 if ord is None else ord
        return ns.linalg.vector_norm(a, axis=axis[0], keepdims=keepdims, ord=p)
    if len(axis) != 2:
        raise ValueError("numpy.linalg.norm(): improper number of dimensions to norm")
    r0, r1 = (ax % a.ndim for ax in axis)
    if r0 == r1:
        raise ValueError("numpy.linalg.norm(): duplicate axes given")
    p = "fro" if ord in (None, "fro", "f") else ord
    if p not in ("fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf):
        raise ValueError(f"numpy.linalg.norm(): invalid norm order {ord!r} for matrices")
    m = ns.moveaxis(a, (r0, r1), (-2, -1))
    r = ns.linalg.matrix_norm(m, ord=p)
    if keepdims:
        r = ns.expand_dims(ns.expand_dims(r, axis=min(r0, r1)), axis=max(r0, r1))
    return r
