"""Dtype questions the rows' impls ask on every call, answered once per dtype."""

from __future__ import annotations

from typing import Any

__all__ = ["isdtype"]

_KINDS: dict[tuple[type, Any, str], bool] = {}


def isdtype(bk: Any, dtype: Any, kind: str) -> bool:
    """``bk.isdtype(dtype, kind)``, remembered: array-api-compat's and array-api-strict's take
    about 1 us, more than tanh of a small array, and tanh is on the hot path of networks. The
    key leads with the dtype's type: array-api-strict's dtypes hash like NumPy's, and comparing
    the two warns."""
    key = (type(dtype), dtype, kind)
    try:
        return _KINDS[key]
    except KeyError:
        _KINDS[key] = answer = bk.isdtype(dtype, kind)
        return answer
    except TypeError:  # an unhashable dtype
        return bk.isdtype(dtype, kind)
