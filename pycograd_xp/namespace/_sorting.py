"""Sorting functions."""

from __future__ import annotations

from typing import Any

from .._primitive import primitive


@primitive("real numeric", axis_check=True)
def argsort(bk: Any, x: Any, /, *, axis: int = -1, descending: bool = False,
            stable: bool = True) -> Any:  # fmt: skip
    return bk.argsort(x, axis=axis, descending=descending, stable=stable)


@primitive("real numeric", axis_check=True)
def sort(bk: Any, x: Any, /, *, axis: int = -1, descending: bool = False,
         stable: bool = True) -> Any:  # fmt: skip
    return bk.sort(x, axis=axis, descending=descending, stable=stable)
