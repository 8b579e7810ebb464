"""The ``linalg`` extension. ``matmul``, ``matrix_transpose``, ``tensordot`` and ``vecdot`` are the
main namespace's rows, re-exported (``_primitive.LINALG_ALIASES``), not declared twice."""

from __future__ import annotations

from typing import Any

from .._primitive import primitive

FP = "floating-point"


@primitive(FP, scope="linalg")
def cholesky(bk: Any, x: Any, /, *, upper: bool = False) -> Any:
    return bk.linalg.cholesky(x, upper=upper)


@primitive("numeric", scope="linalg")
def cross(bk: Any, x1: Any, x2: Any, /, *, axis: int = -1) -> Any:
    return bk.linalg.cross(x1, x2, axis=axis)


@primitive(FP, scope="linalg")
def det(bk: Any, x: Any, /) -> Any:
    return bk.linalg.det(x)


@primitive(scope="linalg")
def diagonal(bk: Any, x: Any, /, *, offset: int = 0) -> Any:
    return bk.linalg.diagonal(x, offset=offset)


@primitive(FP, scope="linalg")
def eig(bk: Any, x: Any, /) -> Any:
    return bk.linalg.eig(x)


@primitive(FP, scope="linalg")
def eigh(bk: Any, x: Any, /) -> Any:
    return bk.linalg.eigh(x)


@primitive(FP, scope="linalg")
def eigvals(bk: Any, x: Any, /) -> Any:
    return bk.linalg.eigvals(x)


@primitive(FP, scope="linalg")
def eigvalsh(bk: Any, x: Any, /) -> Any:
    return bk.linalg.eigvalsh(x)


@primitive(FP, scope="linalg")
def inv(bk: Any, x: Any, /) -> Any:
    return bk.linalg.inv(x)


@primitive(FP, scope="linalg")
def matrix_norm(bk: Any, x: Any, /, *, keepdims: bool = False, ord: Any = "fro") -> Any:
    return bk.linalg.matrix_norm(x, keepdims=keepdims, ord=ord)


@primitive(FP, scope="linalg")
def matrix_power(bk: Any, x: Any, n: int, /) -> Any:
    return bk.linalg.matrix_power(x, n)


@primitive(FP, scope="linalg")
def matrix_rank(bk: Any, x: Any, /, *, rtol: Any = None) -> Any:
    return bk.linalg.matrix_rank(x, rtol=rtol)


@primitive("numeric", scope="linalg")
def outer(bk: Any, x1: Any, x2: Any, /) -> Any:
    return bk.linalg.outer(x1, x2)


@primitive(FP, scope="linalg")
def pinv(bk: Any, x: Any, /, *, rtol: Any = None) -> Any:
    return bk.linalg.pinv(x, rtol=rtol)


@primitive(FP, scope="linalg")
def qr(bk: Any, x: Any, /, *, mode: str = "reduced") -> Any:
    return bk.linalg.qr(x, mode=mode)


@primitive(FP, scope="linalg")
def slogdet(bk: Any, x: Any, /) -> Any:
    return bk.linalg.slogdet(x)


@primitive(FP, scope="linalg")
def solve(bk: Any, x1: Any, x2: Any, /) -> Any:
    return bk.linalg.solve(x1, x2)


@primitive(FP, scope="linalg")
def svd(bk: Any, x: Any, /, *, full_matrices: bool = True) -> Any:
    return bk.linalg.svd(x, full_matrices=full_matrices)


@primitive(FP, scope="linalg")
def svdvals(bk: Any, x: Any, /) -> Any:
    return bk.linalg.svdvals(x)


@primitive("numeric", scope="linalg")
def trace(bk: Any, x: Any, /, *, offset: int = 0, dtype: Any = None) -> Any:
    return bk.linalg.trace(x, offset=offset, dtype=dtype)


@primitive(FP, scope="linalg")
def vector_norm(bk: Any, x: Any, /, *, axis: Any = None, keepdims: bool = False,
                ord: Any = 2) -> Any:  # fmt: skip
    return bk.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord)
