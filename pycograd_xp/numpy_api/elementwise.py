"""NumPy's elementwise functions that are not ufuncs (``clip``, ``where``, ``round``,
``nan_to_num``, ``angle``, ...), and what an array is from its shape and dtype (``shape``,
``ndim``, ``result_type``, ...)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..namespace._array import Array
from ._convert import _NV, _PY_SCALARS, _array, _finish, _operand, _raw, _unsupported
from ._dispatch import _implements
from .ufuncs import _bool, _float_of

# elementwise functions that are not ufuncs


@_implements("clip")
def _clip(
    ns: Any,
    a: Any,
    a_min: Any = _NV,
    a_max: Any = _NV,
    out: Any = None,
    *,
    min: Any = _NV,
    max: Any = _NV,
    **kwargs: Any,
) -> Any:
    if kwargs:
        raise _unsupported("clip", ", ".join(f"{k}=" for k in kwargs))
    lo = a_min if a_min is not _NV else min
    hi = a_max if a_max is not _NV else max
    x = _array(ns, a)

    def bound(v: Any) -> Any:
        if v is _NV or v is None:
            return None
        return v if type(v) in _PY_SCALARS else _array(ns, v)

    lo, hi = bound(lo), bound(hi)
    # NumPy's clip is minimum(maximum(a, lo), hi): array bounds take part in the promotion
    dt = np.result_type(x.dtype, *(b.dtype for b in (lo, hi) if isinstance(b, Array)))
    if dt != x.dtype:
        x = ns.astype(x, dt)
    lo, hi = (ns.astype(b, dt) if isinstance(b, Array) and b.dtype != dt else b for b in (lo, hi))
    return _finish(ns, ns.clip(x, lo, hi), out, "clip")


@_implements("where")
def _where(ns: Any, condition: Any, x: Any = _NV, y: Any = _NV) -> Any:
    if x is _NV and y is _NV:
        return ns.nonzero(_bool(ns, condition))
    if x is _NV or y is _NV:
        raise ValueError("numpy.where(): either both or neither of x and y should be given")
    return ns.where(_bool(ns, condition), _operand(ns, x), _operand(ns, y))


@_implements("round", "around")
def _round(ns: Any, a: Any, decimals: int = 0, out: Any = None) -> Any:
    x = _array(ns, a)
    if decimals == 0:
        r = ns.round(x)
    else:
        scale = 10.0**decimals
        r = ns.round(x * scale) / scale
    return _finish(ns, r, out, "round")


@_implements("fix")
def _fix(ns: Any, x: Any, out: Any = None) -> Any:
    return _finish(ns, ns.trunc(_array(ns, x)), out, "fix")


@_implements("real")
def _real(ns: Any, val: Any) -> Any:
    x = _array(ns, val)
    return ns.real(x) if ns.isdtype(x.dtype, "complex floating") else x


@_implements("imag")
def _imag(ns: Any, val: Any) -> Any:
    x = _array(ns, val)
    return ns.imag(x) if ns.isdtype(x.dtype, "complex floating") else ns.zeros_like(x)


@_implements("angle")
def _angle(ns: Any, z: Any, deg: bool = False) -> Any:
    x = _array(ns, z)
    if ns.isdtype(x.dtype, "complex floating"):
        r = ns.atan2(ns.imag(x), ns.real(x))
    else:
        x = _float_of(ns, x)
        r = ns.atan2(ns.zeros_like(x), x)
    return r * (180.0 / math.pi) if deg else r


@_implements("nan_to_num")
def _nan_to_num(
    ns: Any, x: Any, copy: bool = True, nan: float = 0.0, posinf: Any = None, neginf: Any = None
) -> Any:
    a = _array(ns, x)
    if not ns.isdtype(a.dtype, ("real floating", "complex floating")):
        return a
    if ns.isdtype(a.dtype, "complex floating"):
        re = _nan_to_num(ns, ns.real(a), copy, nan, posinf, neginf)
        im = _nan_to_num(ns, ns.imag(a), copy, nan, posinf, neginf)
        return re + im * 1j
    info = np.finfo(np.dtype(a.dtype))
    hi = float(info.max) if posinf is None else posinf
    lo = float(info.min) if neginf is None else neginf

    def const(v: Any) -> Any:
        return ns.asarray(v, dtype=a.dtype)

    r = ns.where(ns.isnan(a), const(nan), a)
    r = ns.where(ns.isinf(a) & (a > 0), const(hi), r)
    return ns.where(ns.isinf(a) & (a < 0), const(lo), r)


@_implements("isposinf")
def _isposinf(ns: Any, x: Any, out: Any = None) -> Any:
    a = _array(ns, x)
    return _finish(ns, ns.isinf(a) & ns.logical_not(ns.signbit(a)), out, "isposinf")


@_implements("isneginf")
def _isneginf(ns: Any, x: Any, out: Any = None) -> Any:
    a = _array(ns, x)
    return _finish(ns, ns.isinf(a) & ns.signbit(a), out, "isneginf")


@_implements("copy")
def _copy(ns: Any, a: Any, order: str = "K", subok: bool = False) -> Any:
    return ns.asarray(_array(ns, a), copy=True)


# what an array is, from its shape and dtype (no values needed)


def _dtype_of(a: Any) -> Any:
    return a.dtype if isinstance(a, Array) else a


@_implements("shape")
def _shape_of(ns: Any, a: Any) -> tuple:
    return tuple(_array(ns, a).shape)


@_implements("ndim")
def _ndim_of(ns: Any, a: Any) -> int:
    return int(_array(ns, a).ndim)


@_implements("size")
def _size_of(ns: Any, a: Any, axis: Any = None) -> int:
    shape = _array(ns, a).shape
    if axis is None:
        return math.prod(shape)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    return math.prod(shape[i] for i in axes)


@_implements("result_type")
def _result_type(ns: Any, *arrays_and_dtypes: Any) -> Any:
    return np.result_type(*(_dtype_of(a) for a in arrays_and_dtypes))


@_implements("can_cast")
def _can_cast(ns: Any, from_: Any, to: Any, casting: Any = "safe") -> bool:
    return bool(np.can_cast(_dtype_of(from_), _dtype_of(to), casting=casting))


@_implements("iscomplexobj")
def _iscomplexobj(ns: Any, x: Any) -> bool:
    return isinstance(x, Array) and np.dtype(x.dtype).kind == "c" or np.iscomplexobj(_raw(x))


@_implements("isrealobj")
def _isrealobj(ns: Any, x: Any) -> bool:
    return not _iscomplexobj(ns, x)
