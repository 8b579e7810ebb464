"""Searching functions. All return indices or counts, except ``where``, which selects values."""

from __future__ import annotations

from typing import Any

from .._primitive import primitive
from ._backend import _BY_XP


def select(bk: Any, condition: Any, x1: Any, x2: Any, out: Any = None) -> Any:
    """``bk.where(condition, x1, x2)``; on a raw namespace whose backend has a faster
    ``select`` capability (NumPy), that one: the same values, bit for bit. A branch may be a
    Python number (the standard's ``where`` takes scalars; no zero array to fill). With
    ``out`` (a mutable array of the result's shape and dtype, or a view of one) the result is
    written there and returned: the capability writes it directly, else it is assigned."""
    b = _BY_XP.get(id(bk))
    if b is not None and b.select is not None:
        return b.select(condition, x1, x2) if out is None else b.select(condition, x1, x2, out)
    if out is None:
        return bk.where(condition, x1, x2)
    out[...] = bk.where(condition, x1, x2)
    return out


@primitive("real numeric", axis_check=True)
def argmax(bk: Any, x: Any, /, *, axis: int | None = None, keepdims: bool = False) -> Any:
    return bk.argmax(x, axis=axis, keepdims=keepdims)


@primitive("real numeric", axis_check=True)
def argmin(bk: Any, x: Any, /, *, axis: int | None = None, keepdims: bool = False) -> Any:
    return bk.argmin(x, axis=axis, keepdims=keepdims)


@primitive(axis_check=True)
def count_nonzero(bk: Any, x: Any, /, *, axis: Any = None, keepdims: bool = False) -> Any:
    return bk.count_nonzero(x, axis=axis, keepdims=keepdims)


@primitive()
def nonzero(bk: Any, x: Any, /) -> tuple[Any, ...]:
    return tuple(bk.nonzero(x))


@primitive("real numeric")
def searchsorted(bk: Any, x1: Any, x2: Any, /, *, side: str = "left",
                 sorter: Any = None) -> Any:  # fmt: skip
    return bk.searchsorted(x1, x2, side=side, sorter=sorter)


@primitive()
def where(bk: Any, condition: Any, x1: Any, x2: Any, /) -> Any:
    return select(bk, condition, x1, x2)
