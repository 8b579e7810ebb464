"""Utility functions."""

from __future__ import annotations

from typing import Any

from .._primitive import primitive


@primitive(axis_check=True)
def all(bk: Any, x: Any, /, *, axis: Any = None, keepdims: bool = False) -> Any:
    return bk.all(x, axis=axis, keepdims=keepdims)


@primitive(axis_check=True)
def any(bk: Any, x: Any, /, *, axis: Any = None, keepdims: bool = False) -> Any:
    return bk.any(x, axis=axis, keepdims=keepdims)


@primitive(axis_check=True)
def diff(bk: Any, x: Any, /, *, axis: int = -1, n: int = 1, prepend: Any = None,
         append: Any = None) -> Any:  # fmt: skip
    # array-api-compat's NumPy diff rejects an explicit None for prepend/append
    ends = {k: v for k, v in (("prepend", prepend), ("append", append)) if v is not None}
    return bk.diff(x, axis=axis, n=n, **ends)
