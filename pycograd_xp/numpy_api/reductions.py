"""NumPy's reductions on our arrays: ``mean``, ``std``/``var`` (``ddof``, ``correction``),
``ptp``, ``average``, the NaN-ignoring ones (zero gradient at the NaNs), the cumulative ones and
``diff``."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._convert import _NV, Composition, _array, _axis_none_flat, _finish, _unsupported
from ._dispatch import FUNCTIONS, _function, _implements, _norm_axis, _reduction

# reductions


def _numpy_reduction(fname: str, what: str) -> Composition:
    def f(
        ns: Any,
        a: Any,
        axis: Any = None,
        dtype: Any = None,
        out: Any = None,
        keepdims: Any = False,
        initial: Any = _NV,
        where: Any = _NV,
    ) -> Any:
        keepdims = False if keepdims is _NV else bool(keepdims)
        w = True if where is _NV else where
        return _reduction(
            ns, what, fname, _array(ns, a), _norm_axis(axis), dtype, keepdims, initial, w, out
        )

    return f


FUNCTIONS["sum"] = _numpy_reduction("sum", "sum")
FUNCTIONS["prod"] = _numpy_reduction("prod", "prod")


def _numpy_extremum(fname: str, what: str) -> Composition:
    def f(
        ns: Any,
        a: Any,
        axis: Any = None,
        out: Any = None,
        keepdims: Any = False,
        initial: Any = _NV,
        where: Any = _NV,
    ) -> Any:
        keepdims = False if keepdims is _NV else bool(keepdims)
        w = True if where is _NV else where
        return _reduction(
            ns, what, fname, _array(ns, a), _norm_axis(axis), None, keepdims, initial, w, out
        )

    return f


FUNCTIONS["max"] = _numpy_extremum("max", "max")
FUNCTIONS["amax"] = _numpy_extremum("max", "amax")
FUNCTIONS["min"] = _numpy_extremum("min", "min")
FUNCTIONS["amin"] = _numpy_extremum("min", "amin")


def _logical_reduction(fname: str) -> Composition:
    def f(
        ns: Any,
        a: Any,
        axis: Any = None,
        out: Any = None,
        keepdims: Any = False,
        *,
        where: Any = _NV,
    ) -> Any:
        keepdims = False if keepdims is _NV else bool(keepdims)
        w = True if where is _NV else where
        return _reduction(
            ns, fname, fname, _array(ns, a), _norm_axis(axis), None, keepdims, _NV, w, out
        )

    return f


FUNCTIONS["all"] = _logical_reduction("all")
FUNCTIONS["any"] = _logical_reduction("any")


def _where_count(ns: Any, x: Any, where: Any, axis: Any, keepdims: bool) -> tuple[Any, Any]:
    """``x`` zeroed outside ``where`` and the number of elements selected along ``axis``."""
    mask = ns.broadcast_to(_array(ns, where), tuple(x.shape))
    zero = ns.zeros_like(x)
    n = ns.sum(ns.astype(mask, _real_dtype(ns, x)), axis=axis, keepdims=keepdims)
    return ns.where(mask, x, zero), n


def _real_dtype(ns: Any, x: Any) -> Any:
    if ns.isdtype(x.dtype, "complex floating"):
        return ns.float32 if x.dtype == ns.complex64 else ns.float64
    if ns.isdtype(x.dtype, "real floating"):
        return x.dtype
    return ns.float64


@_implements("mean")
def _mean(
    ns: Any,
    a: Any,
    axis: Any = None,
    dtype: Any = None,
    out: Any = None,
    keepdims: Any = False,
    *,
    where: Any = _NV,
) -> Any:
    x = _array(ns, a)
    keepdims = False if keepdims is _NV else bool(keepdims)
    axis = _norm_axis(axis)
    if dtype is not None:
        x = ns.astype(x, np.dtype(dtype))
    elif not ns.isdtype(x.dtype, ("real floating", "complex floating")):
        x = ns.astype(x, ns.float64)
    if where is not _NV and where is not True:
        xs, n = _where_count(ns, x, where, axis, keepdims)
        r = ns.sum(xs, axis=axis, keepdims=keepdims) / n
    else:
        r = ns.mean(x, axis=axis, keepdims=keepdims)
    return _finish(ns, r, out, "mean")


def _ddof(what: str, ddof: Any, correction: Any) -> Any:
    if correction is not _NV:
        if ddof not in (0, _NV):
            raise ValueError(
                f"numpy.{what}(): ddof and correction can't be provided simultaneously"
            )
        return correction
    return 0 if ddof is _NV else ddof


def _moment_arguments(
    ns: Any,
    what: str,
    a: Any,
    axis: Any,
    dtype: Any,
    ddof: Any,
    keepdims: Any,
    mean: Any,
    correction: Any,
) -> tuple[Any, Any, bool, Any]:
    """NumPy's var/std arguments (also the nan forms') as the namespace takes them: the array
    in its computing dtype, the axis, keepdims and the correction."""
    x = _array(ns, a)
    keepdims = False if keepdims is _NV else bool(keepdims)
    axis = _norm_axis(axis)
    c = _ddof(what, ddof, correction)
    if mean is not _NV:
        raise _unsupported(what, "mean=")
    if dtype is not None:
        x = ns.astype(x, np.dtype(dtype))
    elif not ns.isdtype(x.dtype, ("real floating", "complex floating")):
        x = ns.astype(x, ns.float64)
    return x, axis, keepdims, c


def _moment(sqrt: bool) -> Composition:
    what = "std" if sqrt else "var"

    def f(
        ns: Any,
        a: Any,
        axis: Any = None,
        dtype: Any = None,
        out: Any = None,
        ddof: Any = 0,
        keepdims: Any = False,
        *,
        where: Any = _NV,
        mean: Any = _NV,
        correction: Any = _NV,
    ) -> Any:
        x, axis, keepdims, c = _moment_arguments(
            ns, what, a, axis, dtype, ddof, keepdims, mean, correction
        )
        if where is not _NV and where is not True:
            xs, n = _where_count(ns, x, where, axis, True)
            m = ns.sum(xs, axis=axis, keepdims=True) / n
            mask = ns.broadcast_to(_array(ns, where), tuple(x.shape))
            d = ns.where(mask, x - m, ns.zeros_like(x))
            sq = ns.real(d * ns.conj(d)) if ns.isdtype(d.dtype, "complex floating") else d * d
            v = ns.sum(sq, axis=axis, keepdims=keepdims)
            n = n if keepdims else ns.sum(ns.astype(mask, v.dtype), axis=axis)
            r = v / (n - c)
            r = ns.sqrt(r) if sqrt else r
        else:
            r = (ns.std if sqrt else ns.var)(x, axis=axis, correction=c, keepdims=keepdims)
        return _finish(ns, r, out, what)

    return f


FUNCTIONS["std"] = _moment(True)
FUNCTIONS["var"] = _moment(False)


@_implements("ptp")
def _ptp(ns: Any, a: Any, axis: Any = None, out: Any = None, keepdims: Any = False) -> Any:
    x = _array(ns, a)
    keepdims = False if keepdims is _NV else bool(keepdims)
    axis = _norm_axis(axis)
    r = ns.max(x, axis=axis, keepdims=keepdims) - ns.min(x, axis=axis, keepdims=keepdims)
    return _finish(ns, r, out, "ptp")


@_implements("average")
def _average(
    ns: Any,
    a: Any,
    axis: Any = None,
    weights: Any = None,
    returned: bool = False,
    *,
    keepdims: Any = _NV,
) -> Any:
    x = _array(ns, a)
    keepdims = False if keepdims is _NV else bool(keepdims)
    axis = _norm_axis(axis)
    if not ns.isdtype(x.dtype, ("real floating", "complex floating")):
        x = ns.astype(x, ns.float64)
    if weights is None:
        avg = ns.mean(x, axis=axis, keepdims=keepdims)
        n = (
            x.size
            if axis is None
            else math.prod(x.shape[i] for i in ((axis,) if isinstance(axis, int) else axis))
        )
        scl = ns.full_like(avg, float(n))
    else:
        w = _array(ns, weights)
        if w.shape != x.shape:
            if axis is None or not isinstance(axis, int) or w.ndim != 1:
                raise TypeError(
                    "numpy.average(): weights differing in shape from a need a 1-D weights "
                    "and an int axis"
                )
            shape = [1] * x.ndim
            shape[axis] = w.shape[0]
            w = ns.reshape(w, tuple(shape))
        w = ns.broadcast_to(w, tuple(x.shape))
        scl = ns.sum(w, axis=axis, keepdims=keepdims)
        avg = ns.sum(x * w, axis=axis, keepdims=keepdims) / scl
    return (avg, scl) if returned else avg


# NaN-ignoring reductions: NaNs replaced by the reduction's identity (their gradient is zero)


def _nan_fill(ns: Any, x: Any, fill: Any) -> Any:
    if not ns.isdtype(x.dtype, ("real floating", "complex floating")):
        return x
    return ns.where(ns.isnan(x), ns.asarray(fill, dtype=x.dtype), x)


@_implements("nansum")
def _nansum(
    ns: Any,
    a: Any,
    axis: Any = None,
    dtype: Any = None,
    out: Any = None,
    keepdims: Any = False,
    initial: Any = _NV,
    where: Any = _NV,
) -> Any:
    x = _nan_fill(ns, _array(ns, a), 0)
    return FUNCTIONS["sum"](ns, x, axis, dtype, out, keepdims, initial, where)


@_implements("nanprod")
def _nanprod(
    ns: Any,
    a: Any,
    axis: Any = None,
    dtype: Any = None,
    out: Any = None,
    keepdims: Any = False,
    initial: Any = _NV,
    where: Any = _NV,
) -> Any:
    x = _nan_fill(ns, _array(ns, a), 1)
    return FUNCTIONS["prod"](ns, x, axis, dtype, out, keepdims, initial, where)


def _valid(ns: Any, x: Any, where: Any) -> Any:
    """The elements that count: not NaN, and selected by ``where``."""
    ok = (
        ns.logical_not(ns.isnan(x))
        if ns.isdtype(x.dtype, ("real floating", "complex floating"))
        else ns.ones_like(x, dtype=ns.bool)
    )
    if where is not _NV and where is not True:
        ok = ns.logical_and(ok, ns.broadcast_to(_array(ns, where), tuple(x.shape)))
    return ok


@_implements("nanmean")
def _nanmean(
    ns: Any,
    a: Any,
    axis: Any = None,
    dtype: Any = None,
    out: Any = None,
    keepdims: Any = False,
    *,
    where: Any = _NV,
) -> Any:
    x = _array(ns, a)
    keepdims = False if keepdims is _NV else bool(keepdims)
    axis = _norm_axis(axis)
    if dtype is not None:
        x = ns.astype(x, np.dtype(dtype))
    elif not ns.isdtype(x.dtype, ("real floating", "complex floating")):
        x = ns.astype(x, ns.float64)
    ok = _valid(ns, x, where)
    s = ns.sum(ns.where(ok, x, ns.zeros_like(x)), axis=axis, keepdims=keepdims)
    n = ns.sum(ns.astype(ok, _real_dtype(ns, x)), axis=axis, keepdims=keepdims)
    return _finish(ns, s / n, out, "nanmean")  # an all-NaN slice: 0 / 0, NaN (as NumPy)


def _nan_moment(sqrt: bool) -> Composition:
    what = "nanstd" if sqrt else "nanvar"

    def f(
        ns: Any,
        a: Any,
        axis: Any = None,
        dtype: Any = None,
        out: Any = None,
        ddof: Any = 0,
        keepdims: Any = False,
        *,
        where: Any = _NV,
        mean: Any = _NV,
        correction: Any = _NV,
    ) -> Any:
        x, axis, keepdims, c = _moment_arguments(
            ns, what, a, axis, dtype, ddof, keepdims, mean, correction
        )
        ok = _valid(ns, x, where)
        zero = ns.zeros_like(x)
        xs = ns.where(ok, x, zero)
        rd = _real_dtype(ns, x)
        n_keep = ns.sum(ns.astype(ok, rd), axis=axis, keepdims=True)
        m = ns.sum(xs, axis=axis, keepdims=True) / n_keep
        d = ns.where(ok, x - m, zero)
        sq = ns.real(d * ns.conj(d)) if ns.isdtype(d.dtype, "complex floating") else d * d
        v = ns.sum(sq, axis=axis, keepdims=keepdims)
        n = ns.sum(ns.astype(ok, rd), axis=axis, keepdims=keepdims)
        dof = n - c
        # NumPy: NaN where the degrees of freedom are not positive
        r = ns.where(
            dof > 0, v / ns.where(dof > 0, dof, ns.ones_like(dof)), ns.full_like(v, math.nan)
        )
        return _finish(ns, ns.sqrt(r) if sqrt else r, out, what)

    return f


FUNCTIONS["nanvar"] = _nan_moment(False)
FUNCTIONS["nanstd"] = _nan_moment(True)


def _nan_extremum(fname: str) -> Composition:
    what = f"nan{fname}"

    def f(
        ns: Any,
        a: Any,
        axis: Any = None,
        out: Any = None,
        keepdims: Any = False,
        initial: Any = _NV,
        where: Any = _NV,
    ) -> Any:
        x = _array(ns, a)
        keepdims = False if keepdims is _NV else bool(keepdims)
        axis = _norm_axis(axis)
        w = True if where is _NV else where
        if not ns.isdtype(x.dtype, "real floating"):
            return _reduction(ns, what, fname, x, axis, None, keepdims, initial, w, out)
        nan = ns.isnan(x)
        fill = -math.inf if fname == "max" else math.inf
        r = _reduction(
            ns, what, fname, _nan_fill(ns, x, fill), axis, None, keepdims, initial, w, None
        )
        if initial is _NV:  # an all-NaN slice gives NaN (NumPy warns)
            r = ns.where(ns.all(nan, axis=axis, keepdims=keepdims), ns.full_like(r, math.nan), r)
        return _finish(ns, r, out, what)

    return f


FUNCTIONS["nanmax"] = _nan_extremum("max")
FUNCTIONS["nanmin"] = _nan_extremum("min")


def _nan_arg(fname: str) -> Composition:
    def f(ns: Any, a: Any, axis: Any = None, out: Any = None, *, keepdims: Any = False) -> Any:
        x = _array(ns, a)
        keepdims = False if keepdims is _NV else bool(keepdims)
        fill = -math.inf if fname == "argmax" else math.inf
        r = _function(ns, fname)(_nan_fill(ns, x, fill), axis=axis, keepdims=keepdims)
        return _finish(ns, r, out, f"nan{fname}")

    return f


FUNCTIONS["nanargmax"] = _nan_arg("argmax")
FUNCTIONS["nanargmin"] = _nan_arg("argmin")


def _cumulative(fname: str, what: str, nan_fill: Any = None) -> Composition:
    def f(ns: Any, a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
        x = _array(ns, a)
        if nan_fill is not None:
            x = _nan_fill(ns, x, nan_fill)
        x, axis = _axis_none_flat(ns, x, axis)
        if x.ndim == 0:
            x = ns.reshape(x, (1,))
        r = _function(ns, fname)(x, axis=axis, dtype=dtype)
        return _finish(ns, r, out, what)

    return f


FUNCTIONS["cumsum"] = _cumulative("cumulative_sum", "cumsum")
FUNCTIONS["cumprod"] = _cumulative("cumulative_prod", "cumprod")
FUNCTIONS["nancumsum"] = _cumulative("cumulative_sum", "nancumsum", 0)
FUNCTIONS["nancumprod"] = _cumulative("cumulative_prod", "nancumprod", 1)


def _cumulative_std(fname: str) -> Composition:
    def f(
        ns: Any,
        x: Any,
        /,
        *,
        axis: Any = None,
        dtype: Any = None,
        out: Any = None,
        include_initial: bool = False,
    ) -> Any:
        r = _function(ns, fname)(
            _array(ns, x), axis=axis, dtype=dtype, include_initial=include_initial
        )
        return _finish(ns, r, out, fname)

    return f


FUNCTIONS["cumulative_sum"] = _cumulative_std("cumulative_sum")
FUNCTIONS["cumulative_prod"] = _cumulative_std("cumulative_prod")


@_implements("diff")
def _diff(
    ns: Any, a: Any, n: int = 1, axis: int = -1, prepend: Any = _NV, append: Any = _NV
) -> Any:
    x = _array(ns, a)
    if n == 0:
        return x

    def edge(v: Any) -> Any:
        if v is _NV:
            return None
        e = _array(ns, v)
        if e.ndim == 0:
            shape = list(x.shape)
            shape[axis] = 1
            e = ns.broadcast_to(e, tuple(shape))
        return e

    return ns.diff(x, axis=axis, n=n, prepend=edge(prepend), append=edge(append))
