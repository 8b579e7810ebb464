"""Indexing functions (``__getitem__``/``__setitem__`` live on the Array class)."""

from __future__ import annotations

from typing import Any

from ._ops import primitive


@primitive()
def take(bk: Any, x: Any, indices: Any, /, *, axis: int | None = None) -> Any:
    return bk.take(x, indices, axis=axis)


@primitive()
def take_along_axis(bk: Any, x: Any, indices: Any, /, *, axis: int = -1) -> Any:
    return bk.take_along_axis(x, indices, axis=axis)
