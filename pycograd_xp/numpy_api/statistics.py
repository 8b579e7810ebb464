"""NumPy's order statistics (``quantile``, ``percentile`` with NumPy's thirteen methods,
``median`` and their NaN forms) and ``cov``/``corrcoef`` on our arrays."""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np

from ..namespace._array import Array
from ._convert import _NV, Composition, _array, _finish, _unsupported
from ._dispatch import FUNCTIONS, _implements, _norm_axis
from .manipulation import _atleast, _squeeze

# order statistics: quantile, percentile (NumPy's thirteen methods), median, and their nan forms
# (method "linear", NumPy's default).
# The values are sorted along the reduced axis (the sort's rule sends the gradient back to the
# elements), the neighbours of NumPy's virtual index are gathered and interpolated with NumPy's
# own ``_lerp``: the gradient flows to the elements the interpolation uses, as NumPy selects them.


def _reduced_last(ns: Any, x: Any, axis: Any) -> tuple[Any, tuple[int, ...]]:
    """``x`` with the ``axis`` axes moved to the end and merged into one, and the shape of the
    result with keepdims (the reduced axes as 1)."""
    if axis is None:
        return ns.reshape(x, (-1,)), (1,) * x.ndim
    axes = (axis,) if isinstance(axis, int | np.integer) else tuple(axis)
    nd = x.ndim
    axes = tuple(sorted(int(a) % nd for a in axes))
    if len(set(axes)) != len(axes):
        raise ValueError("duplicate value in 'axis'")
    rest = [i for i in range(nd) if i not in axes]
    moved = ns.permute_dims(x, (*rest, *axes))
    kept = tuple(1 if i in axes else x.shape[i] for i in range(nd))
    n = math.prod(x.shape[i] for i in axes)
    return ns.reshape(moved, (*(x.shape[i] for i in rest), n)), kept


def _order_input(ns: Any, what: str, a: Any) -> Any:
    x = _array(ns, a)
    if ns.isdtype(x.dtype, "complex floating"):
        raise TypeError(f"numpy.{what}(): a must be an array of real numbers")
    if not ns.isdtype(x.dtype, "real floating"):
        x = ns.astype(x, ns.float64)
    return x


def _lerp(ns: Any, a: Any, b: Any, t: Any) -> Any:
    """NumPy's ``_lerp``: ``a + (b - a) t``, or ``b - (b - a)(1 - t)`` where ``t >= 0.5``."""
    d = b - a
    if isinstance(t, float):
        return b - d * (1 - t) if t >= 0.5 else a + d * t
    t_arr: Any = t if isinstance(t, Array) else ns.asarray(t)
    one_minus: Any = (1 - t_arr) if isinstance(t, Array) else ns.asarray(1 - t)
    return ns.where(t_arr >= 0.5, b - d * one_minus, a + d * t_arr)


_QUANTILE_METHODS = (
    "inverted_cdf",
    "averaged_inverted_cdf",
    "closest_observation",
    "interpolated_inverted_cdf",
    "hazen",
    "weibull",
    "linear",
    "median_unbiased",
    "normal_unbiased",
    "lower",
    "higher",
    "midpoint",
    "nearest",
)  # NumPy's, in its order
# the methods whose quantile is one of the observations (NumPy takes it, no interpolation)
_QUANTILE_OBSERVATIONS = frozenset(
    {"inverted_cdf", "closest_observation", "lower", "higher", "nearest"}
)


def _quantile_core(
    ns: Any, what: str, a: Any, q: Any, axis: Any, keepdims: Any, method: str, nan: bool
) -> Any:
    if method not in _QUANTILE_METHODS:
        raise ValueError(f"numpy.{what}(): method={method!r} is not one of {_QUANTILE_METHODS}")
    if nan and method != "linear":
        raise _unsupported(what, f"method={method!r} (nan-quantiles take only 'linear')")
    weak = isinstance(q, float | int) and not isinstance(q, bool)
    if isinstance(q, Array):
        q = _values(what, q)
    qv = np.asanyarray(q)
    if qv.dtype.kind not in "iuf":
        raise TypeError(f"numpy.{what}(): q must be real numbers")
    if not (np.all(qv >= 0) and np.all(qv <= 1)):
        raise ValueError(f"numpy.{what}(): quantiles must be in the range [0, 1]")
    x = _order_input(ns, what, a)
    keepdims = False if keepdims is _NV else bool(keepdims)
    flat, kept = _reduced_last(ns, x, _norm_axis(axis))
    n = flat.shape[-1]
    if n == 0:
        raise IndexError(f"numpy.{what}(): cannot take a quantile of an empty slice")
    s = ns.sort(flat, axis=-1)
    qf = np.reshape(qv, (-1,))
    lead = tuple(flat.shape[:-1])
    if nan:
        valid = ns.logical_not(ns.isnan(flat))
        count = ns.sum(ns.astype(valid, ns.float64), axis=-1, keepdims=True)  # (..., 1)
        vi = (count - 1.0) * ns.asarray(qf.astype(np.float64))  # (..., nq)
        last = ns.maximum(count - 1.0, ns.zeros_like(count))
        prev = ns.floor(vi)
        above = vi >= count - 1.0
        prev = ns.where(above, last * ns.ones_like(vi), ns.where(vi < 0, 0.0, prev))
        nxt = ns.where(above | (vi < 0), prev, prev + 1.0)
        gamma = vi - prev
        if weak:
            gamma = ns.astype(gamma, x.dtype)
        lo = ns.take_along_axis(s, ns.astype(prev, ns.int64), axis=-1)
        hi = ns.take_along_axis(s, ns.astype(nxt, ns.int64), axis=-1)
        r = _lerp(ns, lo, hi, gamma)
    else:
        # Every method is a virtual index into the sorted slice, ``vi = prev + gamma``, and the
        # lerp of the two values beside it: NumPy's own quantile of 0..n-1 gives that index
        # (the discontinuous methods give whole or half indices). 'linear' computes it so too.
        if method == "linear":
            vi = np.asanyarray((n - 1) * qf)
        else:
            index = np.arange(n, dtype=np.float64)
            vi = np.asanyarray(np.quantile(index, qf, method=cast(Any, method)))
        prev = np.floor(vi)
        nxt = prev + 1
        above = vi >= n - 1
        prev[above] = n - 1
        nxt[above] = n - 1
        gamma = np.asanyarray(vi - np.floor(vi), dtype=vi.dtype)
        gamma[above] = 0
        lo = ns.take(s, ns.asarray(prev.astype(np.int64)), axis=-1)
        if method in _QUANTILE_OBSERVATIONS:  # an element itself, in its dtype (as NumPy)
            r = lo
        else:
            hi = ns.take(s, ns.asarray(nxt.astype(np.int64)), axis=-1)
            r = _lerp(ns, lo, hi, float(gamma[0]) if weak else gamma)
        # a slice holding a NaN gives NaN (NaN sorts last)
        has_nan = ns.isnan(s[..., -1:])
        r = ns.where(has_nan, ns.full_like(r, math.nan), r)
    # (..., nq) -> q's shape first, then the kept axes
    r = ns.reshape(r, (*lead, *qv.shape))
    nq = qv.ndim
    r = ns.permute_dims(r, (*range(len(lead), len(lead) + nq), *range(len(lead))))
    if keepdims:
        r = ns.reshape(r, (*qv.shape, *kept))
    return r


def _values(what: str, a: Array, name: str = "q") -> np.ndarray:
    """The NumPy values of an array of ours that only parametrizes a function (argument
    ``name``: quantile's ``q``, cov's ``fweights``)."""
    if a._node is not None or not isinstance(a._data, np.ndarray):
        raise _unsupported(what, f"{name} being differentiated, batched or traced")
    return np.asarray(a._data)


def _quantile_function(what: str, scale: float, nan: bool) -> Composition:
    def f(
        ns: Any,
        a: Any,
        q: Any,
        axis: Any = None,
        out: Any = None,
        overwrite_input: bool = False,
        method: str = "linear",
        keepdims: Any = False,
        *,
        weights: Any = None,
        interpolation: Any = None,
    ) -> Any:
        if weights is not None:
            raise _unsupported(what, "weights=")
        if interpolation is not None:
            method = interpolation
        if scale != 1.0:
            weak = isinstance(q, float | int) and not isinstance(q, bool)
            qv = np.true_divide(_values(what, q) if isinstance(q, Array) else q, scale)
            q = float(qv) if weak else qv
            if not (np.all(np.asarray(q) >= 0) and np.all(np.asarray(q) <= 1)):
                raise ValueError(f"numpy.{what}(): percentiles must be in the range [0, 100]")
        r = _quantile_core(ns, what, a, q, axis, keepdims, method, nan)
        return _finish(ns, r, out, what)

    return f


FUNCTIONS["quantile"] = _quantile_function("quantile", 1.0, False)
FUNCTIONS["percentile"] = _quantile_function("percentile", 100.0, False)
FUNCTIONS["nanquantile"] = _quantile_function("nanquantile", 1.0, True)
FUNCTIONS["nanpercentile"] = _quantile_function("nanpercentile", 100.0, True)


def _median_function(what: str, nan: bool) -> Composition:
    def f(
        ns: Any,
        a: Any,
        axis: Any = None,
        out: Any = None,
        overwrite_input: bool = False,
        keepdims: Any = False,
    ) -> Any:
        x = _order_input(ns, what, a)
        keepdims = False if keepdims is _NV else bool(keepdims)
        flat, kept = _reduced_last(ns, x, _norm_axis(axis))
        n = flat.shape[-1]
        s = ns.sort(flat, axis=-1)
        if nan:
            count = ns.sum(ns.astype(ns.logical_not(ns.isnan(flat)), ns.int64), axis=-1)
            lo_i = ns.where(count > 0, (count - 1) // 2, ns.zeros_like(count))
            hi_i = count // 2
            lo = ns.take_along_axis(s, lo_i[..., None], axis=-1)[..., 0]
            hi = ns.take_along_axis(s, ns.minimum(hi_i, n - 1)[..., None], axis=-1)[..., 0]
            r = (lo + hi) / 2
        else:
            if n == 0:
                r = ns.full(tuple(flat.shape[:-1]), math.nan, dtype=x.dtype)
            elif n % 2:
                r = s[..., n // 2]
            else:
                r = (s[..., n // 2 - 1] + s[..., n // 2]) / 2
            r = ns.where(ns.isnan(s[..., -1]), ns.full_like(r, math.nan), r)
        if keepdims:
            r = ns.reshape(r, kept)
        return _finish(ns, r, out, what)

    return f


FUNCTIONS["median"] = _median_function("median", False)
FUNCTIONS["nanmedian"] = _median_function("nanmedian", True)


# covariance and correlation


@_implements("cov")
def _cov(
    ns: Any,
    m: Any,
    y: Any = None,
    rowvar: bool = True,
    bias: bool = False,
    ddof: Any = None,
    fweights: Any = None,
    aweights: Any = None,
    *,
    dtype: Any = None,
) -> Any:
    x = _array(ns, m)
    if x.ndim > 2:
        raise ValueError("numpy.cov(): m has more than 2 dimensions")
    yy = None if y is None else _array(ns, y)
    if yy is not None and yy.ndim > 2:
        raise ValueError("numpy.cov(): y has more than 2 dimensions")
    if dtype is None:
        dtype = np.result_type(x.dtype, *(() if yy is None else (yy.dtype,)), np.float64)
    dt = np.dtype(dtype)
    X = ns.astype(_atleast(ns, x, 2), dt)
    if not rowvar and x.ndim != 1:
        X = ns.matrix_transpose(X)
    if X.shape[0] == 0:
        return ns.reshape(ns.asarray([], dtype=ns.float64), (0, 0))
    if yy is not None:
        Y = ns.astype(_atleast(ns, yy, 2), dt)
        if not rowvar and Y.shape[0] != 1:
            Y = ns.matrix_transpose(Y)
        X = ns.concat([X, Y], axis=0)
    if ddof is None:
        ddof = 1 if bias == 0 else 0
    # The weights: fweights are counts (their values are read: no gradient); aweights may be
    # differentiated, batched or traced (the sums below are the namespace's).
    w: Any = None
    if fweights is not None:
        fw = _values("cov", fweights, "fweights") if isinstance(fweights, Array) else fweights
        fw = np.asarray(fw, dtype=float)
        if not np.all(fw == np.around(fw)):
            raise TypeError("numpy.cov(): fweights must be integer")
        _check_weights("fweights", fw, X.shape[1])
        w = ns.asarray(fw, dtype=dt)
    aw: Any = None
    if aweights is not None:
        aw = ns.astype(_array(ns, aweights), dt)
        data = getattr(aweights, "_data", aweights)
        _check_weights("aweights", data if isinstance(data, np.ndarray) else aw, X.shape[1])
        w = aw if w is None else w * aw
    if w is None:
        avg = ns.mean(X, axis=1)
        fact: Any = X.shape[1] - ddof
    else:
        w_sum = ns.sum(w)
        avg = ns.sum(X * w, axis=1) / w_sum
        if ddof == 0:
            fact = w_sum
        elif aw is None:
            fact = w_sum - ddof
        else:
            fact = w_sum - ddof * ns.sum(w * aw) / w_sum
    if isinstance(fact, Array):
        fact = ns.where(fact <= 0, 0.0, fact)
    elif fact <= 0:
        fact = 0.0
    Xc = X - avg[:, None]
    Xt = ns.matrix_transpose(Xc if w is None else Xc * w)
    if ns.isdtype(Xt.dtype, "complex floating"):
        Xt = ns.conj(Xt)
    c = ns.matmul(Xc, Xt)
    with np.errstate(divide="ignore"):
        c = c / fact if isinstance(fact, Array) else c * np.true_divide(1, fact)
    return _squeeze(ns, c)


def _check_weights(name: str, w: Any, samples: int) -> None:
    """numpy.cov's weights: 1-D, one per sample, non-negative (where the values are known)."""
    if w.ndim != 1 or w.shape[0] != samples or (isinstance(w, np.ndarray) and np.any(w < 0)):
        raise ValueError(f"numpy.cov(): {name} must be 1-D, non-negative, one per sample")


@_implements("corrcoef")
def _corrcoef(
    ns: Any,
    x: Any,
    y: Any = None,
    rowvar: bool = True,
    bias: Any = _NV,
    ddof: Any = _NV,
    *,
    dtype: Any = None,
) -> Any:
    c = _cov(ns, x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return c / c
    d = ns.linalg.diagonal(c)
    stddev = ns.sqrt(ns.real(d) if ns.isdtype(d.dtype, "complex floating") else d)
    c = c / stddev[:, None]
    c = c / stddev[None, :]
    if ns.isdtype(c.dtype, "complex floating"):
        return ns.clip(ns.real(c), -1.0, 1.0) + 1j * ns.imag(c)
    return ns.clip(c, -1.0, 1.0)
