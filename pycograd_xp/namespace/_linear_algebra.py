"""Linear algebra functions of the main namespace (the ``linalg`` extension re-exports them)."""

from __future__ import annotations

from typing import Any

from .._primitive import primitive


@primitive("numeric")
def matmul(bk: Any, x1: Any, x2: Any, /) -> Any:
    return bk.matmul(x1, x2)


@primitive()
def matrix_transpose(bk: Any, x: Any, /) -> Any:
    return bk.matrix_transpose(x)


@primitive("numeric")
def tensordot(bk: Any, x1: Any, x2: Any, /, *, axes: Any = 2) -> Any:
    return bk.tensordot(x1, x2, axes=axes)


@primitive("numeric")
def vecdot(bk: Any, x1: Any, x2: Any, /, *, axis: int = -1) -> Any:
    return bk.vecdot(x1, x2, axis=axis)
