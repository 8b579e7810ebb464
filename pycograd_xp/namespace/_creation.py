"""Creation functions. They make new arrays from Python values or shapes; none is differentiable
with respect to anything but ``asarray``'s array input, which the engine treats as identity."""

from __future__ import annotations

from typing import Any

from .._primitive import primitive


@primitive()
def arange(bk: Any, start: Any, /, stop: Any = None, step: Any = 1, *, dtype: Any = None,
           device: Any = None) -> Any:  # fmt: skip
    return bk.arange(start, stop, step, dtype=dtype, device=device)


@primitive()
def asarray(bk: Any, obj: Any, /, *, dtype: Any = None, device: Any = None,
            copy: bool | None = None) -> Any:  # fmt: skip
    return bk.asarray(obj, dtype=dtype, device=device, copy=copy)


@primitive()
def empty(bk: Any, shape: Any, *, dtype: Any = None, device: Any = None) -> Any:
    return bk.empty(shape, dtype=dtype, device=device)


@primitive()
def empty_like(bk: Any, x: Any, /, *, dtype: Any = None, device: Any = None) -> Any:
    return bk.empty_like(x, dtype=dtype, device=device)


@primitive()
def eye(bk: Any, n_rows: int, n_cols: int | None = None, /, *, k: int = 0, dtype: Any = None,
        device: Any = None) -> Any:  # fmt: skip
    return bk.eye(n_rows, n_cols, k=k, dtype=dtype, device=device)


@primitive()
def from_dlpack(bk: Any, x: Any, /, *, device: Any = None, copy: bool | None = None) -> Any:
    return bk.from_dlpack(x, device=device, copy=copy)


@primitive()
def full(bk: Any, shape: Any, fill_value: Any, *, dtype: Any = None, device: Any = None) -> Any:
    return bk.full(shape, fill_value, dtype=dtype, device=device)


@primitive()
def full_like(bk: Any, x: Any, /, fill_value: Any, *, dtype: Any = None,
              device: Any = None) -> Any:  # fmt: skip
    return bk.full_like(x, fill_value, dtype=dtype, device=device)


@primitive()
def linspace(bk: Any, start: Any, stop: Any, /, num: int, *, dtype: Any = None,
             device: Any = None, endpoint: bool = True) -> Any:  # fmt: skip
    return bk.linspace(start, stop, num, dtype=dtype, device=device, endpoint=endpoint)


@primitive()
def meshgrid(bk: Any, *arrays: Any, indexing: str = "xy") -> Any:
    return tuple(bk.meshgrid(*arrays, indexing=indexing))


@primitive()
def ones(bk: Any, shape: Any, *, dtype: Any = None, device: Any = None) -> Any:
    return bk.ones(shape, dtype=dtype, device=device)


@primitive()
def ones_like(bk: Any, x: Any, /, *, dtype: Any = None, device: Any = None) -> Any:
    return bk.ones_like(x, dtype=dtype, device=device)


@primitive()
def tril(bk: Any, x: Any, /, *, k: int = 0) -> Any:
    return bk.tril(x, k=k)


@primitive()
def triu(bk: Any, x: Any, /, *, k: int = 0) -> Any:
    return bk.triu(x, k=k)


@primitive()
def zeros(bk: Any, shape: Any, *, dtype: Any = None, device: Any = None) -> Any:
    return bk.zeros(shape, dtype=dtype, device=device)


@primitive()
def zeros_like(bk: Any, x: Any, /, *, dtype: Any = None, device: Any = None) -> Any:
    return bk.zeros_like(x, dtype=dtype, device=device)
