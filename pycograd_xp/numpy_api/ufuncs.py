"""NumPy's ufuncs without a row of their own (``exp2``, ``logaddexp2``, ``fmax``, ``divmod``,
``heaviside``, ``matvec``, ...) as compositions of the namespace's functions, put in
:data:`~pycograd_xp.numpy_api._dispatch.UFUNCS`."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ._convert import _PY_SCALARS, Composition, _array
from ._dispatch import UFUNCS

# -- compositions for the ufuncs without a row of their own ---------------------------------------


def _compose(*names: str) -> Callable[[Composition], Composition]:
    def put(f: Composition) -> Composition:
        for n in names:
            UFUNCS[n] = f
        return f

    return put


def _float_of(ns: Any, x: Any) -> Any:
    return (
        x
        if ns.isdtype(x.dtype, ("real floating", "complex floating"))
        else ns.astype(x, ns.float64)
    )


@_compose("exp2")
def _exp2(ns: Any, x: Any) -> Any:
    return ns.pow(2.0, _float_of(ns, _array(ns, x)))


@_compose("cbrt")
def _cbrt(ns: Any, x: Any) -> Any:
    x = _float_of(ns, _array(ns, x))
    return ns.sign(x) * ns.pow(ns.abs(x), 1.0 / 3.0)


@_compose("deg2rad", "radians")
def _deg2rad(ns: Any, x: Any) -> Any:
    return _float_of(ns, _array(ns, x)) * (math.pi / 180.0)


@_compose("rad2deg", "degrees")
def _rad2deg(ns: Any, x: Any) -> Any:
    return _float_of(ns, _array(ns, x)) * (180.0 / math.pi)


@_compose("logical_not")
def _logical_not(ns: Any, x: Any) -> Any:
    return ns.logical_not(_bool(ns, x))


def _bool(ns: Any, x: Any) -> Any:
    x = _array(ns, x)
    return x if x.dtype == ns.bool else x != 0


@_compose("logical_and")
def _logical_and(ns: Any, x1: Any, x2: Any) -> Any:
    return ns.logical_and(_bool(ns, x1), _bool(ns, x2))


@_compose("logical_or")
def _logical_or(ns: Any, x1: Any, x2: Any) -> Any:
    return ns.logical_or(_bool(ns, x1), _bool(ns, x2))


@_compose("logical_xor")
def _logical_xor(ns: Any, x1: Any, x2: Any) -> Any:
    return ns.logical_xor(_bool(ns, x1), _bool(ns, x2))


@_compose("float_power")
def _float_power(ns: Any, x1: Any, x2: Any) -> Any:
    def wide(v: Any) -> Any:
        if type(v) in _PY_SCALARS:
            return v
        cplx = ns.isdtype(v.dtype, "complex floating")
        return ns.astype(v, ns.complex128 if cplx else ns.float64)

    return ns.pow(wide(x1), wide(x2))


_LN2 = math.log(2.0)


@_compose("logaddexp2")
def _logaddexp2(ns: Any, x1: Any, x2: Any) -> Any:
    return ns.logaddexp(x1 * _LN2, x2 * _LN2) / _LN2


@_compose("fmax")
def _fmax(ns: Any, x1: Any, x2: Any) -> Any:
    a, b = _array(ns, x1), _array(ns, x2)
    return ns.where(ns.isnan(b), a, ns.where(ns.isnan(a), b, ns.maximum(a, b)))


@_compose("fmin")
def _fmin(ns: Any, x1: Any, x2: Any) -> Any:
    a, b = _array(ns, x1), _array(ns, x2)
    return ns.where(ns.isnan(b), a, ns.where(ns.isnan(a), b, ns.minimum(a, b)))


@_compose("fmod")
def _fmod(ns: Any, x1: Any, x2: Any) -> Any:
    # remainder takes the divisor's sign, fmod the dividend's: shift by the divisor where
    # they differ (the same values; the gradient -trunc(x1 / x2) for x2)
    r = ns.remainder(x1, x2)
    a = _array(ns, x1)
    return ns.where((r != 0) & (ns.signbit(r) != ns.signbit(a)), r - x2, r)


@_compose("divmod")
def _divmod(ns: Any, x1: Any, x2: Any) -> Any:
    return ns.floor_divide(x1, x2), ns.remainder(x1, x2)


@_compose("modf")
def _modf(ns: Any, x: Any) -> Any:
    x = _array(ns, x)
    whole = ns.trunc(x)
    frac = ns.where(ns.isinf(x), ns.copysign(ns.zeros_like(x), x), x - whole)
    return frac, whole


@_compose("heaviside")
def _heaviside(ns: Any, x1: Any, x2: Any) -> Any:
    a = _array(ns, x1)
    at0 = _array(ns, x2)
    one = ns.ones_like(a)
    step = ns.where(a < 0, ns.zeros_like(a), one)
    return ns.where(ns.isnan(a), a, ns.where(a == 0, at0 * one, step))


@_compose("ldexp")
def _ldexp(ns: Any, x1: Any, x2: Any) -> Any:
    a = _float_of(ns, _array(ns, x1))
    e = x2 if type(x2) in _PY_SCALARS else ns.astype(_array(ns, x2), a.dtype)
    return a * ns.pow(2.0, e)


@_compose("vecdot")
def _vecdot_ufunc(ns: Any, x1: Any, x2: Any) -> Any:
    return ns.vecdot(_array(ns, x1), _array(ns, x2))


@_compose("matvec")
def _matvec(ns: Any, x1: Any, x2: Any) -> Any:
    return ns.matmul(_array(ns, x1), _array(ns, x2)[..., None])[..., 0]


@_compose("vecmat")
def _vecmat(ns: Any, x1: Any, x2: Any) -> Any:
    return ns.matmul(ns.conj(_array(ns, x1))[..., None, :], _array(ns, x2))[..., 0, :]
