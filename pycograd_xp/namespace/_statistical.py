"""Statistical functions (reductions and cumulative reductions)."""

from __future__ import annotations

from typing import Any

from ._ops import primitive


@primitive("numeric", axis_check=True)
def cumulative_prod(bk: Any, x: Any, /, *, axis: int | None = None, dtype: Any = None,
                    include_initial: bool = False) -> Any:  # fmt: skip
    return bk.cumulative_prod(x, axis=axis, dtype=dtype, include_initial=include_initial)


@primitive("numeric", axis_check=True)
def cumulative_sum(bk: Any, x: Any, /, *, axis: int | None = None, dtype: Any = None,
                   include_initial: bool = False) -> Any:  # fmt: skip
    return bk.cumulative_sum(x, axis=axis, dtype=dtype, include_initial=include_initial)


@primitive("real numeric", axis_check=True)
def max(bk: Any, x: Any, /, *, axis: Any = None, keepdims: bool = False) -> Any:
    return bk.max(x, axis=axis, keepdims=keepdims)


@primitive("floating-point", axis_check=True)
def mean(bk: Any, x: Any, /, *, axis: Any = None, keepdims: bool = False) -> Any:
    return bk.mean(x, axis=axis, keepdims=keepdims)


@primitive("real numeric", axis_check=True)
def min(bk: Any, x: Any, /, *, axis: Any = None, keepdims: bool = False) -> Any:
    return bk.min(x, axis=axis, keepdims=keepdims)


@primitive("numeric", axis_check=True)
def prod(bk: Any, x: Any, /, *, axis: Any = None, dtype: Any = None,
         keepdims: bool = False) -> Any:  # fmt: skip
    return bk.prod(x, axis=axis, dtype=dtype, keepdims=keepdims)


@primitive("real floating-point", axis_check=True)
def std(bk: Any, x: Any, /, *, axis: Any = None, correction: float = 0.0,
        keepdims: bool = False) -> Any:  # fmt: skip
    return bk.std(x, axis=axis, correction=correction, keepdims=keepdims)


@primitive("numeric", axis_check=True)
def sum(bk: Any, x: Any, /, *, axis: Any = None, dtype: Any = None,
        keepdims: bool = False) -> Any:  # fmt: skip
    return bk.sum(x, axis=axis, dtype=dtype, keepdims=keepdims)


@primitive("real floating-point", axis_check=True)
def var(bk: Any, x: Any, /, *, axis: Any = None, correction: float = 0.0,
        keepdims: bool = False) -> Any:  # fmt: skip
    return bk.var(x, axis=axis, correction=correction, keepdims=keepdims)
