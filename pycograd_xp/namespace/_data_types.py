"""Data type functions. Only ``astype`` makes an array; the others answer questions about dtypes
(they unwrap any of our arrays they are given and return plain Python values)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._primitive import primitive


@dataclass(frozen=True)
class finfo_object:  # noqa: N801 - the standard's name
    """``finfo`` with Python floats, as the standard asks (NumPy returns NumPy scalars)."""

    bits: int
    eps: float
    max: float
    min: float
    smallest_normal: float
    dtype: Any


@dataclass(frozen=True)
class iinfo_object:  # noqa: N801 - the standard's name
    bits: int
    max: int
    min: int
    dtype: Any


@primitive()
def astype(bk: Any, x: Any, dtype: Any, /, *, copy: bool = True, device: Any = None) -> Any:
    return bk.astype(x, dtype, copy=copy, device=device)


@primitive()
def can_cast(bk: Any, from_: Any, to: Any, /) -> bool:
    return bool(bk.can_cast(from_, to))


@primitive()
def finfo(bk: Any, type: Any, /) -> finfo_object:
    fi = bk.finfo(type)
    return finfo_object(int(fi.bits), float(fi.eps), float(fi.max), float(fi.min),
                        float(fi.smallest_normal), fi.dtype)  # fmt: skip


@primitive()
def iinfo(bk: Any, type: Any, /) -> iinfo_object:
    ii = bk.iinfo(type)
    return iinfo_object(int(ii.bits), int(ii.max), int(ii.min), ii.dtype)


@primitive()
def isdtype(bk: Any, dtype: Any, kind: Any) -> bool:
    return bool(bk.isdtype(dtype, kind))


@primitive()
def result_type(bk: Any, *arrays_and_dtypes: Any) -> Any:
    return bk.result_type(*arrays_and_dtypes)
