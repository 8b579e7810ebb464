"""Set functions (data-dependent output shapes: eager backends only)."""

from __future__ import annotations

from typing import Any

from .._primitive import primitive


@primitive()
def isin(bk: Any, x1: Any, x2: Any, /, *, invert: bool = False) -> Any:
    return bk.isin(x1, x2, invert=invert)


@primitive()
def unique_all(bk: Any, x: Any, /) -> Any:
    return bk.unique_all(x)


@primitive()
def unique_counts(bk: Any, x: Any, /) -> Any:
    return bk.unique_counts(x)


@primitive()
def unique_inverse(bk: Any, x: Any, /) -> Any:
    return bk.unique_inverse(x)


@primitive()
def unique_values(bk: Any, x: Any, /) -> Any:
    return bk.unique_values(x)
