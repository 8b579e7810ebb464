"""Special functions (scipy.special's): the rows behind :mod:`pycograd_xp.special`.

None of these is a name of the Array API standard, so, as the fused rows of ``ops/nn/``, they
are private attributes of each namespace (``xp._erf``): the standard surface stays exactly the
standard's, while the abstract backend, vmap's batched backends and ``compile`` see them as
ordinary rows. :mod:`pycograd_xp.special` is their public face, with scipy.special's signatures.

Forward. Each row asks the backend's ``special`` capability (``Backend.special``) for
scipy.special's function of its name: scipy.special's on NumPy (scipy is optional: the ``special``
extra), cupyx.scipy.special's on CuPy, one scipy call per block on Cubed (``cubed_plugin``). The
result keeps the input's dtype (float32 in, float32 out). Where the backend has none
(array-api-strict, or NumPy without scipy), the functions that are accurate compositions of
standard functions are composed (``expit``, ``logit``, ``log_expit``, ``xlogy``, ``xlog1py``,
``entr``, ``rel_entr``, ``kl_div``, ``huber``, ``boxcox``, ``boxcox1p``, the way scipy
computes them); the others
(``erf``, ``gammaln``, the Bessel functions, ...) raise NotImplementedError naming the function,
the backend and the way out.
``softmax``, ``log_softmax`` and ``logsumexp`` are compositions on every backend, as scipy's own
are (the maximum shifted out; logsumexp separates the maximal terms and takes ``log1p`` of the
others, so a result near 0 keeps its relative precision). A backend built from the table (abstract,
batched, compile's tracing one) has the row itself, and gets the call.

Derivatives. Each rule is Array-API code on the namespace it is handed: where the derivative is
another special function (``gammaln' = digamma``, ``digamma' = polygamma(1, .)``,
``i0' = i1``, ...) it calls that row through the namespace (:func:`~._rules.jvp.call`), so the
second derivative is recorded too. Conventions, only where a function is not
differentiable: ``xlogy``/``xlog1py`` take both partial derivatives as 0 where ``x == 0`` and
``log(one + y)`` is not finite (scipy's ``0 log 0 = 0`` carried to the derivative, as
PyTorch's; at ``x == 0`` with ``y > 0`` the function is smooth and ``d/dx = log y``, as JAX's),
``rel_entr``'s are 0 outside ``x > 0, y > 0`` (as JAX's), and ``kl_div``,
``rel_entr - x + y``, takes rel_entr's there (-1 and 1 where ``x == 0 <= y``, as JAX's);
``huber``'s are 0 where ``delta < 0`` (the loss is ``inf`` there); ``entr' = -(log x + 1)``
is ``+inf`` at 0 (the one-sided derivative, as JAX's) and 0 below, where entr is ``-inf``;
``i1' = i0 - i1 / x`` and
``i1e' = i0e - i1e (sign x + 1 / x)`` take their limit 1/2 at 0; ``i0e``/``i1e`` use ``sign(x)``
for the kink of ``exp(-|x|)`` at 0 (0 there, as JAX). ``polygamma``'s order ``n`` is a Python
int and is not differentiated. The JVP of each elementwise row is its tangent times the same
derivative; softmax's, log_softmax's and logsumexp's are written out.

Batching: the elementwise rows are the row again on the batched operands (aligned, for the two
argument ones); the three reductions shift their axes past the batch axis. Shapes: the
broadcast shape in the inputs' dtype (the promoted one for two arrays); the transients are the
ufunc's iterator buffers on NumPy (scipy's functions are ufuncs), and each composition's
temporaries.

``UFUNCS`` maps the name of each scipy.special ufunc to its row; it is registered with the
NumPy protocols (``pycograd_xp/numpy_api/``), so ``scipy.special.erf(x)`` on an array of
``namespace(numpy)`` being differentiated runs the row (scipy's ufuncs, as without
``SCIPY_ARRAY_API=1``; with it scipy's Python wrappers take the call first).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from .. import _reductions as fast
from .._primitive import Array, primitive
from ..namespace._backend import Backend, capabilities, numpy_special, resolve
from ..namespace._frontend import register_ufuncs
from ._rules.batching import align, all_axes, fn, shift
from ._rules.jvp import call, plus
from ._rules.shapes import (
    BUFFER_ELEMENTS,
    broadcast,
    elementwise_out,
    is_array,
    new,
    reduced,
    size_bytes,
    ufunc_buffers,
)
from ._rules.vjp import count, is_scalar, kept, made_like, norm_axes

FP = "real floating-point"

# scipy.special's ufuncs (``ufunc.__name__``) and the rows that compute them.
UFUNCS: dict[str, str] = {
    "betainc": "_betainc",
    "boxcox": "_boxcox",
    "boxcox1p": "_boxcox1p",
    "betaln": "_betaln",
    "entr": "_entr",
    "erf": "_erf",
    "fdtr": "_fdtr",
    "fdtrc": "_fdtrc",
    "erfc": "_erfc",
    "erfinv": "_erfinv",
    "expit": "_expit",
    "logit": "_logit",
    "log_expit": "_log_expit",
    "gammaln": "_gammaln",
    "huber": "_huber",
    "kl_div": "_kl_div",
    "gammainc": "_gammainc",
    "gammaincc": "_gammaincc",
    "digamma": "_digamma",
    "psi": "_digamma",
    "xlogy": "_xlogy",
    "xlog1py": "_xlog1py",
    "rel_entr": "_rel_entr",
    "ndtr": "_ndtr",
    "log_ndtr": "_log_ndtr",
    "ndtri": "_ndtri",
    "i0": "_i0",
    "i0e": "_i0e",
    "i1": "_i1",
    "i1e": "_i1e",
}
register_ufuncs(UFUNCS)  # scipy.special's ufuncs given our arrays: these rows

_SQRT_PI = math.sqrt(math.pi)
_SQRT_2PI = math.sqrt(2 * math.pi)
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


# -- kits shared by the rows below: the forward --------------------------------------------------


def _caps(bk: Any) -> Backend:
    try:
        return capabilities(bk)
    except TypeError:  # a conforming namespace no namespace() call has met yet
        return resolve(bk)


def unavailable(bk: Any, name: str) -> NotImplementedError:
    """The error for special function ``name`` on a backend that has no implementation of it."""
    b = _caps(bk)
    if b.special is not None:  # the backend has special functions, but not this one here
        how = (
            "its special functions come from scipy: install it (pip install scipy, or "
            "pycograd-xp's 'special' extra)"
        )
    else:
        how = (
            "it is no composition of standard functions; compute it on a backend that has it: "
            "NumPy (scipy.special), CuPy (cupyx.scipy.special) or Cubed (scipy per block), "
            "e.g. pycograd_xp.namespace(numpy).asarray(...)"
        )
    return NotImplementedError(f"special.{name}(): the {b.name} backend has no {name}; {how}")


def _own(bk: Any, row: str) -> Any:
    """The backend's own function for this row (abstract, batched and tracing backends are
    built from the table), or None."""
    return getattr(bk, row, None)


def _backend_fn(bk: Any, name: str) -> Any:
    lookup = _caps(bk).special
    return None if lookup is None else lookup(name)


def _in(bk: Any, r: Any, dtype: Any) -> Any:
    """``r`` in ``dtype`` (scipy's polygamma widens float32; the others keep it)."""
    return r if r.dtype == dtype else bk.astype(r, dtype)


def _unary(bk: Any, name: str, x: Any, composed: Any = None) -> Any:
    """scipy.special's ``name`` of ``x`` on the backend ``bk``, else its composition."""
    own = _own(bk, UFUNCS[name])
    if own is not None:
        return own(x)
    f = _backend_fn(bk, name)
    if f is not None:
        return _in(bk, f(x), x.dtype)
    if composed is not None:
        return composed(bk, x)
    raise unavailable(bk, name)


def _arrays(bk: Any, *xs: Any) -> tuple[Any, ...]:
    """The operands as arrays: a Python scalar in the first array's dtype, made beside it (all
    of them scalars, as NumPy's 0-d arithmetic gives in a compiled replay: as they are)."""
    like = next((x for x in xs if not is_scalar(x)), None)
    if like is None:
        return tuple(bk.asarray(x) for x in xs)
    return tuple(_array_of(bk, x, like) for x in xs)


def _array_of(ns: Any, v: Any, like: Any) -> Any:
    """``v`` as an array: a Python (or NumPy) scalar in ``like``'s dtype, made beside it."""
    return ns.asarray(v, dtype=like.dtype, **made_like(ns, like)) if is_scalar(v) else v


def _nary(bk: Any, name: str, *xs: Any, composed: Any = None) -> Any:
    """scipy.special's ``name`` of two or three operands on ``bk``, else their composition
    ``composed(bk, *xs)`` where there is one."""
    own = _own(bk, UFUNCS[name])
    if own is not None:
        return own(*xs)
    xs = _arrays(bk, *xs)  # scipy would take a Python float as float64
    f = _backend_fn(bk, name)
    if f is not None:
        return _in(bk, f(*xs), bk.result_type(*xs))
    if composed is None:
        raise unavailable(bk, name)
    return composed(bk, *xs)


# -- kits: the rules of the elementwise rows -----------------------------------------------------


def vjp_of(d: Any) -> Any:
    """The VJP ``g d(ns, out, x)`` of a one-argument row whose derivative is ``d``."""
    return lambda ns, g, out, x, /: (g * d(ns, out, x),)


def jvp_of(d: Any) -> Any:
    """The JVP ``t d(ns, out, x)`` of a one-argument row whose derivative is ``d``."""
    return lambda ns, t, out, x, /: t[0] * d(ns, out, x)


def binary_vjp(partials: Any) -> Any:
    """The VJP of a two-argument elementwise row from ``partials(ns, x, y)``, its partial
    derivatives (None for a Python-scalar operand)."""
    return lambda ns, g, out, x, y, /: tuple(
        None if d is None else g * d for d in partials(ns, x, y)
    )


def binary_jvp(partials: Any) -> Any:
    """The JVP of a two-argument elementwise row from ``partials(ns, x, y)``."""

    def jvp(ns, t, out, x, y, /):
        dx, dy = partials(ns, x, y)
        return plus(None if t[0] is None else t[0] * dx, None if t[1] is None else t[1] * dy)

    return jvp


def same_row(row: Any) -> Any:
    """The batching rule of an elementwise one-argument row: the row on the batched operand."""
    name = row.name
    return lambda ns, dims, x, /, **kw: fn(ns, name)(x, **kw)


def unary_shape(a: Any, x: Any, /, **kw: Any) -> Any:
    return elementwise_out(x.shape, x.dtype, x)


# Rows with a composition of standard functions (used where the backend has no special
# functions): at most this many temporaries of the output's size at once.
_COMPOSED_TEMPS = 6


def transients(row: Any) -> Any:
    """The bytes a row's backend call allocates beside its output: the iterator's buffers of
    scipy's ufunc (NumPy), or, without scipy, the composition's temporaries."""
    public = next(k for k, v in UFUNCS.items() if v == row.name)

    def memory(out: Any, *xs: Any, **kw: Any) -> int:
        buffers = ufunc_buffers(out, *xs)
        if numpy_special(public) is None:  # composed (or refused) on NumPy without scipy
            return buffers + _COMPOSED_TEMPS * size_bytes(out)
        return buffers

    return memory


def _nary_shape(a: Any, *xs: Any) -> Any:
    """The shape rule of an elementwise row of two or three operands."""
    arrays = [v for v in xs if is_array(v)]  # a Python scalar takes the arrays' dtype
    shape = broadcast(*(v.shape for v in arrays))
    return elementwise_out(shape, np.result_type(*(v.dtype for v in arrays)), *xs)


def _nary_batch(name: str) -> Any:
    """The batching rule of an elementwise row of two or three operands."""
    return lambda ns, dims, *xs: fn(ns, name)(*align(ns, dims, *xs))


def _safe(ns: Any, x: Any, at_zero: Any) -> Any:
    """``x`` with ``at_zero`` where it is 0: a divisor that is never 0."""
    return ns.where(x == 0, at_zero, x)


# -- _betaln -------------------------------------------------------------------------------------


@primitive(FP, needs=())
def _betaln(bk: Any, a: Array, b: Array, /) -> Any:
    """scipy.special.betaln: ``log |B(a, b)|``, the logarithm of the beta function's magnitude
    (``gammaln(a) + gammaln(b) - gammaln(a + b)``, without their cancellation)."""
    return _nary(bk, "betaln", a, b)


def betaln_partials(ns: Any, a: Any, b: Any) -> tuple[Any, Any]:
    """``digamma(a) - digamma(a + b)`` and ``digamma(b) - digamma(a + b)`` (None for a
    Python-scalar operand), through the digamma row: higher derivatives are recorded."""
    both = call(ns, "_digamma", a + b)
    da = None if is_scalar(a) else call(ns, "_digamma", a) - both
    db = None if is_scalar(b) else call(ns, "_digamma", b) - both
    return da, db


_betaln.defvjp(binary_vjp(betaln_partials), saves=("a", "b"))
_betaln.defjvp(binary_jvp(betaln_partials))
_betaln.defbatch(_nary_batch(_betaln.name))
_betaln.defshape(_nary_shape, memory=transients(_betaln))


# -- _boxcox, _boxcox1p --------------------------------------------------------------------------


def _boxcox_composed(log: str) -> Any:
    """The composition of ``boxcox`` (``log`` "log") or ``boxcox1p`` ("log1p"), as scipy's:
    ``log(x)`` for ``|lmbda| < 1e-19``, else ``expm1(lmbda log(x)) / lmbda`` (beyond exp's range,
    ``sign(lmbda) exp(lmbda log(x) - log|lmbda|) - 1 / lmbda``)."""

    def composed(bk: Any, x: Any, lmbda: Any) -> Any:
        x, lm = bk.broadcast_arrays(x, lmbda)
        lx = getattr(bk, log)(x)
        small = bk.abs(lm) < 1e-19
        safe = bk.where(small, 1.0, lm)
        t = safe * lx
        wide = t >= 709.78
        big = bk.sign(safe) * bk.exp(bk.where(wide, t, 0.0) - bk.log(bk.abs(safe))) - 1 / safe
        v = bk.where(wide, big, bk.expm1(bk.where(wide, 0.0, t)) / safe)
        return bk.where(small, lx, v)

    return composed


@primitive(FP, needs=())
def _boxcox(bk: Any, x: Array, lmbda: Array, /) -> Any:
    """scipy.special.boxcox: the Box-Cox transform ``(x**lmbda - 1) / lmbda``, ``log(x)`` at
    ``lmbda == 0``."""
    return _nary(bk, "boxcox", x, lmbda, composed=_boxcox_composed("log"))


@primitive(FP, needs=())
def _boxcox1p(bk: Any, x: Array, lmbda: Array, /) -> Any:
    """scipy.special.boxcox1p: the Box-Cox transform of ``1 + x``, accurate for small ``x``."""
    return _nary(bk, "boxcox1p", x, lmbda, composed=_boxcox_composed("log1p"))


# (k + 1) / (k + 2)! for k = 0..8: the Taylor coefficients of (t e^t - expm1(t)) / t**2
_BOXCOX_SERIES = tuple((k + 1) / math.factorial(k + 2) for k in range(9))


def boxcox_partials(log: str) -> Any:
    """The partial derivatives of boxcox (``log`` "log") or boxcox1p ("log1p") at
    ``u = x`` or ``1 + x``: ``u**(lmbda - 1)`` and ``log(u)**2 h(lmbda log(u))`` with
    ``h(t) = (t e^t - expm1(t)) / t**2``, whose terms cancel near ``t == 0`` (about ``4 eps / t``
    relative): its Taylor series ``sum (k+1) t**k / (k+2)!`` to ``k = 8`` where ``|t| < 0.1``
    (truncated at 3e-16 relative), so the lmbda one is accurate at and near ``lmbda == 0``,
    where it is ``log(u)**2 / 2``."""

    def partials(ns: Any, x: Any, lmbda: Any) -> tuple[Any, Any]:
        xa, la = _arrays(ns, x, lmbda)
        lu = getattr(ns, log)(xa)
        dx = None if is_scalar(x) else ns.exp((la - 1) * lu)
        if is_scalar(lmbda):
            return dx, None
        t = la * lu
        near = ns.abs(t) < 0.1
        ts = ns.where(near, 1.0, t)
        series = ns.zeros_like(t) + _BOXCOX_SERIES[-1]
        for c in reversed(_BOXCOX_SERIES[:-1]):
            series = series * t + c
        h = ns.where(near, series, (ts * ns.exp(ts) - ns.expm1(ts)) / (ts * ts))
        return dx, lu * lu * h

    return partials


_boxcox_partials = boxcox_partials("log")
_boxcox.defvjp(binary_vjp(_boxcox_partials), saves=("x", "lmbda"))
_boxcox.defjvp(binary_jvp(_boxcox_partials))
_boxcox.defbatch(_nary_batch(_boxcox.name))
_boxcox.defshape(_nary_shape, memory=transients(_boxcox))

_boxcox1p_partials = boxcox_partials("log1p")
_boxcox1p.defvjp(binary_vjp(_boxcox1p_partials), saves=("x", "lmbda"))
_boxcox1p.defjvp(binary_jvp(_boxcox1p_partials))
_boxcox1p.defbatch(_nary_batch(_boxcox1p.name))
_boxcox1p.defshape(_nary_shape, memory=transients(_boxcox1p))


# -- _digamma ------------------------------------------------------------------------------------


@primitive(FP, needs=())
def _digamma(bk: Any, x: Array, /) -> Any:
    """scipy.special.digamma (psi): the logarithmic derivative of the gamma function."""
    return _unary(bk, "digamma", x)


def _d_digamma(ns, out, x):
    return call(ns, "_polygamma", x, n=1)


_digamma.defvjp(vjp_of(_d_digamma), saves=("x",))
_digamma.defjvp(jvp_of(_d_digamma))
_digamma.defbatch(same_row(_digamma))
_digamma.defshape(unary_shape, memory=transients(_digamma))


# -- _entr ---------------------------------------------------------------------------------------


def _entr_composed(bk: Any, x: Any) -> Any:
    # -x log x for x > 0, 0 at 0, -inf below (NaN stays NaN), as scipy's
    pos = x > 0
    v = -x * bk.log(bk.where(pos, x, 1.0))
    return bk.where(pos, v, bk.where(x == 0, 0.0, bk.where(x < 0, -math.inf, x)))


@primitive(FP, needs=())
def _entr(bk: Any, x: Array, /) -> Any:
    """scipy.special.entr: ``-x log x`` for ``x > 0``, 0 at 0, ``-inf`` below."""
    return _unary(bk, "entr", x, _entr_composed)


# entr' = -(log x + 1): +inf at 0 (the one-sided derivative, as JAX's), 0 below (entr is -inf
# there), NaN at NaN
def _d_entr(ns, out, x):
    safe = ns.where(x > 0, x, ns.where(x <= 0, 1.0, x))
    d = -(ns.log(safe) + 1)
    return ns.where(x < 0, 0.0, ns.where(x == 0, math.inf, d))


_entr.defvjp(vjp_of(_d_entr), saves=("x",))
_entr.defjvp(jvp_of(_d_entr))
_entr.defbatch(same_row(_entr))
_entr.defshape(unary_shape, memory=transients(_entr))


# -- _erf, _erfc ---------------------------------------------------------------------------------


@primitive(FP, needs=())
def _erf(bk: Any, x: Array, /) -> Any:
    """scipy.special.erf: the error function."""
    return _unary(bk, "erf", x)


@primitive(FP, needs=())
def _erfc(bk: Any, x: Array, /) -> Any:
    """scipy.special.erfc: ``1 - erf(x)``, accurate where erf is near 1."""
    return _unary(bk, "erfc", x)


def _d_erf(ns, out, x):
    return (2 / _SQRT_PI) * ns.exp(-(x * x))


_erf.defvjp(vjp_of(_d_erf), saves=("x",))
_erf.defjvp(jvp_of(_d_erf))
_erf.defbatch(same_row(_erf))
_erf.defshape(unary_shape, memory=transients(_erf))


def _d_erfc(ns, out, x):
    return (-2 / _SQRT_PI) * ns.exp(-(x * x))


_erfc.defvjp(vjp_of(_d_erfc), saves=("x",))
_erfc.defjvp(jvp_of(_d_erfc))
_erfc.defbatch(same_row(_erfc))
_erfc.defshape(unary_shape, memory=transients(_erfc))


# -- _erfinv -------------------------------------------------------------------------------------


@primitive(FP, needs=())
def _erfinv(bk: Any, x: Array, /) -> Any:
    """scipy.special.erfinv: the inverse of erf on (-1, 1)."""
    return _unary(bk, "erfinv", x)


def _d_erfinv(ns, out, x):
    return (_SQRT_PI / 2) * ns.exp(out * out)


_erfinv.defvjp(vjp_of(_d_erfinv), saves=("out",))
_erfinv.defjvp(jvp_of(_d_erfinv))
_erfinv.defbatch(same_row(_erfinv))
_erfinv.defshape(unary_shape, memory=transients(_erfinv))


# -- _expit --------------------------------------------------------------------------------------


def _expit_composed(bk: Any, x: Any) -> Any:
    # 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below: e^-|x| never overflows
    e = bk.exp(-bk.abs(x))
    return bk.where(x >= 0, 1.0, e) / (1 + e)


@primitive(FP, needs=())
def _expit(bk: Any, x: Array, /) -> Any:
    """scipy.special.expit: the logistic sigmoid ``1 / (1 + exp(-x))``."""
    return _unary(bk, "expit", x, _expit_composed)


# expit' = expit(x) expit(-x): exact where 1 - expit(x) would round to 0 (x > 37)
def _d_expit(ns, out, x):
    return out * call(ns, "_expit", -x)


_expit.defvjp(vjp_of(_d_expit), saves=("x", "out"))
_expit.defjvp(jvp_of(_d_expit))
_expit.defbatch(same_row(_expit))
_expit.defshape(unary_shape, memory=transients(_expit))


# -- _gammaln ------------------------------------------------------------------------------------


@primitive(FP, needs=())
def _gammaln(bk: Any, x: Array, /) -> Any:
    """scipy.special.gammaln: ``log |gamma(x)|``."""
    return _unary(bk, "gammaln", x)


def _d_gammaln(ns, out, x):
    return call(ns, "_digamma", x)


_gammaln.defvjp(vjp_of(_d_gammaln), saves=("x",))
_gammaln.defjvp(jvp_of(_d_gammaln))
_gammaln.defbatch(same_row(_gammaln))
_gammaln.defshape(unary_shape, memory=transients(_gammaln))


# -- _gammainc, _gammaincc, _betainc, _fdtr, _fdtrc: regularized incomplete integrals ----------
# Differentiable in x, the integral's bound, whose derivative is the integrand (as PyTorch's
# gammainc; SciPy composes stdtr, chdtrc and betaincc from gammaincc and betainc on our arrays,
# so the t, chi2 and F tests' p-values differentiate in their statistic). Not in the shape
# parameters: their derivatives are series, which no backend has. The integrand is 0 outside
# its support and NaN at a NaN x.


def _shape_parameters_refused(name: str, params: tuple[str, ...]) -> NotImplementedError:
    return NotImplementedError(
        f"special.{name}(): the gradient with respect to {' and '.join(params)} is not "
        "implemented (as in PyTorch), only with respect to x; pass the shape parameters as "
        "constants (pycograd_xp.stop_gradient) to differentiate in x"
    )


def _incomplete_vjp(name: str, params: tuple[str, ...], d: Any) -> Any:
    """The VJP of a regularized incomplete function of ``params`` and x, whose derivative in x
    is ``d(ns, *args)``."""
    k = len(params)

    def vjp(ns, g, out, *args, needs=()):
        if any(i < k for i in needs):
            raise _shape_parameters_refused(name, params)
        return (None,) * k + (g * d(ns, *args),)

    return vjp


def _incomplete_jvp(name: str, params: tuple[str, ...], d: Any) -> Any:
    k = len(params)

    def jvp(ns, t, out, *args):
        if any(ti is not None for ti in t[:k]):
            raise _shape_parameters_refused(name, params)
        return t[k] * d(ns, *args)

    return jvp


def _outside(ns: Any, beyond: Any, x: Any) -> Any:
    """An integrand's value off its support: 0 ``beyond`` it, NaN where ``x`` is NaN."""
    return ns.where(beyond, 0.0, x)


@primitive(FP, needs=())
def _gammainc(bk: Any, a: Array, x: Array, /) -> Any:
    """scipy.special.gammainc: the regularized lower incomplete gamma function
    ``P(a, x) = gamma(a, x) / Gamma(a)``."""
    return _nary(bk, "gammainc", a, x)


@primitive(FP, needs=())
def _gammaincc(bk: Any, a: Array, x: Array, /) -> Any:
    """scipy.special.gammaincc: the regularized upper incomplete gamma function
    ``Q(a, x) = 1 - P(a, x)``."""
    return _nary(bk, "gammaincc", a, x)


def _d_gammainc(ns, a, x):
    # P's integrand: x^(a-1) e^-x / Gamma(a), in logs; 0 where x <= 0 (P is 0 there), and
    # where it underflows
    a = _array_of(ns, a, x)
    pos = x > 0
    xs = ns.where(pos, x, 1.0)
    log = (a - 1) * ns.log(xs) - xs - call(ns, "_gammaln", a)
    return ns.where(pos, ns.exp(log), _outside(ns, x <= 0, x))


def _d_gammaincc(ns, a, x):
    return -_d_gammainc(ns, a, x)


_gammainc.defvjp(
    _incomplete_vjp("gammainc", ("a",), _d_gammainc), saves=("a", "x"), takes_needs=True
)
_gammainc.defjvp(_incomplete_jvp("gammainc", ("a",), _d_gammainc))
_gammainc.defbatch(_nary_batch(_gammainc.name))
_gammainc.defshape(_nary_shape, memory=transients(_gammainc))

_gammaincc.defvjp(
    _incomplete_vjp("gammaincc", ("a",), _d_gammaincc), saves=("a", "x"), takes_needs=True
)
_gammaincc.defjvp(_incomplete_jvp("gammaincc", ("a",), _d_gammaincc))
_gammaincc.defbatch(_nary_batch(_gammaincc.name))
_gammaincc.defshape(_nary_shape, memory=transients(_gammaincc))


@primitive(FP, needs=())
def _betainc(bk: Any, a: Array, b: Array, x: Array, /) -> Any:
    """scipy.special.betainc: the regularized incomplete beta function ``I_x(a, b)``."""
    return _nary(bk, "betainc", a, b, x)


def _d_betainc(ns, a, b, x):
    # the integrand x^(a-1) (1-x)^(b-1) / B(a, b), in logs; 0 outside 0 < x < 1 (I is 0 or 1)
    a, b = _array_of(ns, a, x), _array_of(ns, b, x)
    inside = (x > 0) & (x < 1)
    xs = ns.where(inside, x, 0.5)
    log = (a - 1) * ns.log(xs) + (b - 1) * ns.log1p(-xs) - call(ns, "_betaln", a, b)
    return ns.where(inside, ns.exp(log), _outside(ns, (x <= 0) | (x >= 1), x))


_betainc.defvjp(
    _incomplete_vjp("betainc", ("a", "b"), _d_betainc), saves=("a", "b", "x"), takes_needs=True
)
_betainc.defjvp(_incomplete_jvp("betainc", ("a", "b"), _d_betainc))
_betainc.defbatch(_nary_batch(_betainc.name))
_betainc.defshape(_nary_shape, memory=transients(_betainc))


@primitive(FP, needs=())
def _fdtr(bk: Any, dfn: Array, dfd: Array, x: Array, /) -> Any:
    """scipy.special.fdtr: the F distribution's cumulative distribution function, ``dfn`` and
    ``dfd`` degrees of freedom."""
    return _nary(bk, "fdtr", dfn, dfd, x)


@primitive(FP, needs=())
def _fdtrc(bk: Any, dfn: Array, dfd: Array, x: Array, /) -> Any:
    """scipy.special.fdtrc: the F distribution's survival function, ``1 - fdtr``."""
    return _nary(bk, "fdtrc", dfn, dfd, x)


def _d_fdtr(ns, dfn, dfd, x):
    # the F density (d1/d2)^(d1/2) x^(d1/2-1) (1 + d1 x / d2)^(-(d1+d2)/2) / B(d1/2, d2/2), in
    # logs; 0 where x <= 0 (fdtr is 0 there)
    d1, d2 = _array_of(ns, dfn, x), _array_of(ns, dfd, x)
    pos = x > 0
    xs = ns.where(pos, x, 1.0)
    log = (
        (d1 / 2) * ns.log(d1 / d2)
        + (d1 / 2 - 1) * ns.log(xs)
        - ((d1 + d2) / 2) * ns.log1p(d1 * xs / d2)
        - call(ns, "_betaln", _array_of(ns, d1 / 2, x), _array_of(ns, d2 / 2, x))
    )
    return ns.where(pos, ns.exp(log), _outside(ns, x <= 0, x))


def _d_fdtrc(ns, dfn, dfd, x):
    return -_d_fdtr(ns, dfn, dfd, x)


_fdtr.defvjp(
    _incomplete_vjp("fdtr", ("dfn", "dfd"), _d_fdtr), saves=("dfn", "dfd", "x"), takes_needs=True
)
_fdtr.defjvp(_incomplete_jvp("fdtr", ("dfn", "dfd"), _d_fdtr))
_fdtr.defbatch(_nary_batch(_fdtr.name))
_fdtr.defshape(_nary_shape, memory=transients(_fdtr))

_fdtrc.defvjp(
    _incomplete_vjp("fdtrc", ("dfn", "dfd"), _d_fdtrc),
    saves=("dfn", "dfd", "x"),
    takes_needs=True,
)
_fdtrc.defjvp(_incomplete_jvp("fdtrc", ("dfn", "dfd"), _d_fdtrc))
_fdtrc.defbatch(_nary_batch(_fdtrc.name))
_fdtrc.defshape(_nary_shape, memory=transients(_fdtrc))


# -- _huber --------------------------------------------------------------------------------------


def _huber_composed(bk: Any, delta: Any, r: Any) -> Any:
    # r^2 / 2 within delta, delta (|r| - delta / 2) beyond, inf for delta < 0, as scipy's
    a = bk.abs(r)
    v = bk.where(a <= delta, r * r / 2, delta * (a - delta / 2))
    return bk.where(delta < 0, bk.full_like(v, math.inf), v)


@primitive(FP, needs=())
def _huber(bk: Any, delta: Array, r: Array, /) -> Any:
    """scipy.special.huber: Huber's loss of ``r``, ``r**2 / 2`` where ``|r| <= delta`` and
    ``delta (|r| - delta / 2)`` beyond (``inf`` for ``delta < 0``)."""
    return _nary(bk, "huber", delta, r, composed=_huber_composed)


def huber_partials(ns: Any, delta: Any, r: Any) -> tuple[Any, Any]:
    """``0`` and ``r`` within delta, ``|r| - delta`` and ``delta sign(r)`` beyond, 0 and 0 where
    ``delta < 0`` (the loss is inf there; None for a Python-scalar operand)."""
    d, ra = _arrays(ns, delta, r)
    a = ns.abs(ra)
    inside, valid = a <= d, d >= 0
    dd = None if is_scalar(delta) else ns.where(valid & ~inside, a - d, 0.0)
    dr = None if is_scalar(r) else ns.where(valid, ns.where(inside, ra, d * ns.sign(ra)), 0.0)
    return dd, dr


_huber.defvjp(binary_vjp(huber_partials), saves=("delta", "r"))
_huber.defjvp(binary_jvp(huber_partials))
_huber.defbatch(_nary_batch(_huber.name))
_huber.defshape(_nary_shape, memory=transients(_huber))


# -- _i0, _i0e, _i1, _i1e ------------------------------------------------------------------------


@primitive(FP, needs=())
def _i0(bk: Any, x: Array, /) -> Any:
    """scipy.special.i0: the modified Bessel function of the first kind, order 0."""
    return _unary(bk, "i0", x)


@primitive(FP, needs=())
def _i0e(bk: Any, x: Array, /) -> Any:
    """scipy.special.i0e: ``exp(-|x|) i0(x)``."""
    return _unary(bk, "i0e", x)


@primitive(FP, needs=())
def _i1(bk: Any, x: Array, /) -> Any:
    """scipy.special.i1: the modified Bessel function of the first kind, order 1."""
    return _unary(bk, "i1", x)


@primitive(FP, needs=())
def _i1e(bk: Any, x: Array, /) -> Any:
    """scipy.special.i1e: ``exp(-|x|) i1(x)``."""
    return _unary(bk, "i1e", x)


def _d_i0(ns, out, x):
    return call(ns, "_i1", x)


_i0.defvjp(vjp_of(_d_i0), saves=("x",))
_i0.defjvp(jvp_of(_d_i0))
_i0.defbatch(same_row(_i0))
_i0.defshape(unary_shape, memory=transients(_i0))


def _d_i0e(ns, out, x):
    return call(ns, "_i1e", x) - ns.sign(x) * out


_i0e.defvjp(vjp_of(_d_i0e), saves=("x", "out"))
_i0e.defjvp(jvp_of(_d_i0e))
_i0e.defbatch(same_row(_i0e))
_i0e.defshape(unary_shape, memory=transients(_i0e))


# i1' = i0 - i1 / x, 1/2 at 0 (i1(x) ~ x / 2)
def _d_i1(ns, out, x):
    return ns.where(x == 0, 0.5, call(ns, "_i0", x) - out / _safe(ns, x, 1.0))


_i1.defvjp(vjp_of(_d_i1), saves=("x", "out"))
_i1.defjvp(jvp_of(_d_i1))
_i1.defbatch(same_row(_i1))
_i1.defshape(unary_shape, memory=transients(_i1))


# i1e' = i0e - i1e (sign x + 1 / x), 1/2 at 0
def _d_i1e(ns, out, x):
    return ns.where(x == 0, 0.5, call(ns, "_i0e", x) - out * (ns.sign(x) + 1 / _safe(ns, x, 1.0)))


_i1e.defvjp(vjp_of(_d_i1e), saves=("x", "out"))
_i1e.defjvp(jvp_of(_d_i1e))
_i1e.defbatch(same_row(_i1e))
_i1e.defshape(unary_shape, memory=transients(_i1e))


# -- _kl_div -------------------------------------------------------------------------------------


def _kl_div_composed(bk: Any, x: Any, y: Any) -> Any:
    # x log(x / y) - x + y where both are positive, y where x == 0 <= y, inf elsewhere, NaN at
    # a NaN, as scipy's
    both = (x > 0) & (y > 0)
    xs, ys = bk.where(both, x, 1.0), bk.where(both, y, 1.0)
    edge = bk.where((x == 0) & (y >= 0), y, bk.full_like(xs, math.inf))
    v = bk.where(both, xs * bk.log(xs / ys) - xs + ys, edge)
    return bk.where(bk.isnan(x) | bk.isnan(y), math.nan, v)


@primitive(FP, needs=())
def _kl_div(bk: Any, x: Array, y: Array, /) -> Any:
    """scipy.special.kl_div: ``x log(x / y) - x + y`` where ``x > 0`` and ``y > 0``, ``y``
    where ``x == 0`` and ``y >= 0``, ``inf`` elsewhere (the terms of a Kullback-Leibler
    divergence between unnormalised measures)."""
    return _nary(bk, "kl_div", x, y, composed=_kl_div_composed)


def kl_div_partials(ns: Any, x: Any, y: Any) -> tuple[Any, Any]:
    """``log(x / y)`` and ``1 - x / y`` where both are positive; -1 and 1 where ``x == 0 <= y``
    (``rel_entr(x, y) - x + y`` with rel_entr's partials 0 there, as JAX's); 0 elsewhere (None
    for a Python-scalar operand)."""
    xa, ya = _arrays(ns, x, y)
    both, zero = (xa > 0) & (ya > 0), (xa == 0) & (ya >= 0)
    xs, ys = ns.where(both, xa, 1.0), ns.where(both, ya, 1.0)
    at_zero = ns.astype(zero, ns.result_type(xa, ya))  # 1 where x == 0 <= y, else 0
    dx = None if is_scalar(x) else ns.where(both, ns.log(xs / ys), -at_zero)
    dy = None if is_scalar(y) else ns.where(both, 1 - xs / ys, at_zero)
    return dx, dy


_kl_div.defvjp(binary_vjp(kl_div_partials), saves=("x", "y"))
_kl_div.defjvp(binary_jvp(kl_div_partials))
_kl_div.defbatch(_nary_batch(_kl_div.name))
_kl_div.defshape(_nary_shape, memory=transients(_kl_div))


# -- _log_expit ----------------------------------------------------------------------------------


def _log_expit_composed(bk: Any, x: Any) -> Any:
    # min(x, 0) - log1p(e^-|x|): x - log1p(e^x) below 0, -log1p(e^-x) above, as scipy
    return bk.where(x < 0, x, 0.0) - bk.log1p(bk.exp(-bk.abs(x)))


@primitive(FP, needs=())
def _log_expit(bk: Any, x: Array, /) -> Any:
    """scipy.special.log_expit: ``log(expit(x))``, accurate for large ``|x|``."""
    return _unary(bk, "log_expit", x, _log_expit_composed)


def _d_log_expit(ns, out, x):
    return call(ns, "_expit", -x)


_log_expit.defvjp(vjp_of(_d_log_expit), saves=("x",))
_log_expit.defjvp(jvp_of(_d_log_expit))
_log_expit.defbatch(same_row(_log_expit))
_log_expit.defshape(unary_shape, memory=transients(_log_expit))


# -- _log_ndtr -----------------------------------------------------------------------------------


@primitive(FP, needs=())
def _log_ndtr(bk: Any, x: Array, /) -> Any:
    """scipy.special.log_ndtr: the log of the standard normal CDF, accurate far in the left
    tail."""
    return _unary(bk, "log_ndtr", x)


# pdf(x) / ndtr(x) as exp(log pdf(x) - log_ndtr(x)): finite far in the left tail, where both
# pdf and ndtr underflow
def _d_log_ndtr(ns, out, x):
    return ns.exp(-0.5 * (x * x) - _LOG_SQRT_2PI - out)


_log_ndtr.defvjp(vjp_of(_d_log_ndtr), saves=("x", "out"))
_log_ndtr.defjvp(jvp_of(_d_log_ndtr))
_log_ndtr.defbatch(same_row(_log_ndtr))
_log_ndtr.defshape(unary_shape, memory=transients(_log_ndtr))


# -- _logit --------------------------------------------------------------------------------------


def _logit_composed(bk: Any, x: Any) -> Any:
    # scipy's: log(x / (1 - x)) away from 1/2, log1p(2x - 1) - log1p(1 - 2x) near it
    s = 2 * (x - 0.5)
    near = bk.log1p(s) - bk.log1p(-s)
    away = bk.log(x / (1 - x))
    return bk.where((x < 0.3) | (x > 0.65), away, near)


@primitive(FP, needs=())
def _logit(bk: Any, x: Array, /) -> Any:
    """scipy.special.logit: ``log(x / (1 - x))``, the inverse of expit."""
    return _unary(bk, "logit", x, _logit_composed)


def _d_logit(ns, out, x):
    return 1 / (x * (1 - x))


_logit.defvjp(vjp_of(_d_logit), saves=("x",))
_logit.defjvp(jvp_of(_d_logit))
_logit.defbatch(same_row(_logit))
_logit.defshape(unary_shape, memory=transients(_logit))


# -- _ndtr ---------------------------------------------------------------------------------------


@primitive(FP, needs=())
def _ndtr(bk: Any, x: Array, /) -> Any:
    """scipy.special.ndtr: the standard normal CDF."""
    return _unary(bk, "ndtr", x)


def _d_ndtr(ns, out, x):
    return ns.exp(-0.5 * (x * x)) / _SQRT_2PI


_ndtr.defvjp(vjp_of(_d_ndtr), saves=("x",))
_ndtr.defjvp(jvp_of(_d_ndtr))
_ndtr.defbatch(same_row(_ndtr))
_ndtr.defshape(unary_shape, memory=transients(_ndtr))


# -- _ndtri --------------------------------------------------------------------------------------


@primitive(FP, needs=())
def _ndtri(bk: Any, x: Array, /) -> Any:
    """scipy.special.ndtri: the inverse of ndtr on (0, 1)."""
    return _unary(bk, "ndtri", x)


def _d_ndtri(ns, out, x):
    return _SQRT_2PI * ns.exp(0.5 * (out * out))


_ndtri.defvjp(vjp_of(_d_ndtri), saves=("out",))
_ndtri.defjvp(jvp_of(_d_ndtri))
_ndtri.defbatch(same_row(_ndtri))
_ndtri.defshape(unary_shape, memory=transients(_ndtri))


# -- _polygamma ----------------------------------------------------------------------------------


@primitive(FP, needs=())
def _polygamma(bk: Any, x: Array, /, *, n: int = 0) -> Any:
    """scipy.special.polygamma(n, x): the n-th derivative of digamma (a Python int ``n``)."""
    own = _own(bk, "_polygamma")
    if own is not None:
        return own(x, n=n)
    f = _backend_fn(bk, "polygamma")
    if f is None:
        raise unavailable(bk, "polygamma")
    return _in(bk, f(n, x), x.dtype)


_polygamma.defvjp(
    lambda ns, g, out, x, /, *, n=0: (g * call(ns, "_polygamma", x, n=n + 1),), saves=("x",)
)
_polygamma.defjvp(lambda ns, t, out, x, /, *, n=0: t[0] * call(ns, "_polygamma", x, n=n + 1))
_polygamma.defbatch(same_row(_polygamma))
_polygamma.defshape(unary_shape, memory=lambda out, x, /, **kw: ufunc_buffers(out, x))


# -- _rel_entr -----------------------------------------------------------------------------------


def _rel_entr_composed(bk: Any, x: Any, y: Any) -> Any:
    # x log(x / y) where both are positive, 0 where x == 0 <= y, inf elsewhere, NaN at a NaN
    both = (x > 0) & (y > 0)
    xs, ys = bk.where(both, x, 1.0), bk.where(both, y, 1.0)
    edge = bk.where((x == 0) & (y >= 0), 0.0, bk.full_like(xs, math.inf))
    v = bk.where(both, xs * bk.log(xs / ys), edge)
    return bk.where(bk.isnan(x) | bk.isnan(y), math.nan, v)


@primitive(FP, needs=())
def _rel_entr(bk: Any, x: Array, y: Array, /) -> Any:
    """scipy.special.rel_entr: ``x log(x / y)`` where ``x > 0`` and ``y > 0``, 0 where
    ``x == 0`` and ``y >= 0``, ``inf`` elsewhere (the relative entropy's terms)."""
    return _nary(bk, "rel_entr", x, y, composed=_rel_entr_composed)


def rel_entr_partials(ns: Any, x: Any, y: Any) -> tuple[Any, Any]:
    """``log(x / y) + 1`` and ``-x / y`` where both are positive, 0 elsewhere (at ``x == 0``
    as xlogy's, and as JAX's; None for a Python-scalar operand). The operands are replaced by
    1 outside that domain first, so no ``log 0`` or ``0 / 0`` appears in a higher derivative."""
    xa, ya = _arrays(ns, x, y)
    both = (xa > 0) & (ya > 0)
    xs, ys = ns.where(both, xa, 1.0), ns.where(both, ya, 1.0)
    dx = None if is_scalar(x) else ns.where(both, ns.log(xs / ys) + 1, 0.0)
    dy = None if is_scalar(y) else ns.where(both, -xs / ys, 0.0)
    return dx, dy


_rel_entr.defvjp(binary_vjp(rel_entr_partials), saves=("x", "y"))
_rel_entr.defjvp(binary_jvp(rel_entr_partials))
_rel_entr.defbatch(_nary_batch(_rel_entr.name))
_rel_entr.defshape(_nary_shape, memory=transients(_rel_entr))


# -- _xlogy, _xlog1py ----------------------------------------------------------------------------


def _xlogy_composed(bk: Any, x: Any, y: Any) -> Any:
    # 0 where x == 0 (unless y is NaN), as scipy's
    zero = (x == 0) & ~bk.isnan(y)
    return bk.where(zero, 0.0, x * bk.log(bk.where(zero, 1.0, y)))


def _xlog1py_composed(bk: Any, x: Any, y: Any) -> Any:
    zero = (x == 0) & ~bk.isnan(y)
    return bk.where(zero, 0.0, x * bk.log1p(bk.where(zero, 0.0, y)))


@primitive(FP, needs=())
def _xlogy(bk: Any, x: Array, y: Array, /) -> Any:
    """scipy.special.xlogy: ``x log(y)``, 0 where ``x == 0`` (unless y is NaN)."""
    return _nary(bk, "xlogy", x, y, composed=_xlogy_composed)


@primitive(FP, needs=())
def _xlog1py(bk: Any, x: Array, y: Array, /) -> Any:
    """scipy.special.xlog1py: ``x log1p(y)``, 0 where ``x == 0`` (unless y is NaN)."""
    return _nary(bk, "xlog1py", x, y, composed=_xlog1py_composed)


def _scalar_log(one: float, y: float) -> float:
    """``log(y)`` (``one`` 0) or ``log1p(y)`` (``one`` 1) of a Python number, -inf at the pole
    and NaN beyond it, as the array functions give."""
    v = y + one
    if v > 0:
        return math.log1p(y) if one else math.log(y)
    return -math.inf if v == 0 else math.nan


def xlog_partials(ns: Any, x: Any, y: Any, one: float) -> tuple[Any, Any]:
    """The partial derivatives of ``x log(one + y)`` (xlogy: ``one`` 0; xlog1py: 1),
    ``log(one + y)`` and ``x / (one + y)`` (None for a Python-scalar operand). At ``x == 0``
    with ``one + y > 0`` the function is ``x log(one + y)``, smooth: these are its partials
    there too (``log(one + y)`` and 0, as JAX's and finite differences). Only where it is not
    differentiable, ``x == 0`` with ``one + y <= 0`` (scipy's ``0 log 0 = 0``), both are 0 by
    convention (PyTorch's; JAX's are ``-inf`` and NaN there): ``y`` is replaced by a neutral
    value first (``log`` of it is 0, ``one + y`` is 1), so no ``log 0`` or ``0 / 0`` appears
    even in a higher derivative."""
    log = ns.log1p if one else ns.log
    if is_scalar(x):
        return None, (ns.zeros_like(y) if x == 0 else x / (y + one) if one else x / y)
    if is_scalar(y):
        v = _scalar_log(one, y)
        return (ns.full_like(x, v) if v > -math.inf else ns.where(x == 0, 0.0, v)), None
    ys = ns.where((x == 0) & ~(y + one > 0), 1.0 - one, y)
    return log(ys), x / (ys + one) if one else x / ys


_xlogy_partials = functools.partial(xlog_partials, one=0.0)
_xlogy.defvjp(binary_vjp(_xlogy_partials), saves=("x", "y"))
_xlogy.defjvp(binary_jvp(_xlogy_partials))
_xlogy.defbatch(_nary_batch(_xlogy.name))
_xlogy.defshape(_nary_shape, memory=transients(_xlogy))

_xlog1py_partials = functools.partial(xlog_partials, one=1.0)
_xlog1py.defvjp(binary_vjp(_xlog1py_partials), saves=("x", "y"))
_xlog1py.defjvp(binary_jvp(_xlog1py_partials))
_xlog1py.defbatch(_nary_batch(_xlog1py.name))
_xlog1py.defshape(_nary_shape, memory=transients(_xlog1py))


# -- kits: softmax, log_softmax, logsumexp -------------------------------------------------------


def _shift(bk: Any, x: Any, axis: Any) -> Any:
    """The maximum over ``axis`` (kept), 0 where it is not finite: ``x - shift`` never
    overflows ``exp``, and stays -inf/NaN where ``x`` is. 0 for an array with no element
    (the maximum of an empty axis has none; nothing is shifted)."""
    if not x.size:
        return bk.zeros(reduced(tuple(x.shape), axis, True), dtype=x.dtype, **made_like(bk, x))
    m = fast.max(bk, x, axis, keepdims=True)
    return bk.where(bk.isfinite(m), m, 0.0)


def _reduction_batch(name: str) -> Any:
    """The batching rule of the three rows: the axes shifted past the batch axis (None: every
    axis of an example)."""

    def rule(ns: Any, dims: Any, x: Any, /, *, axis: Any = None, **kw: Any) -> Any:
        nd = x.ndim - 1
        return fn(ns, name)(x, axis=all_axes(nd) if axis is None else shift(axis, nd), **kw)

    return rule


def _reduced_bytes(x: Any, axis: Any) -> int:
    return math.prod(reduced(x.shape, axis, True)) * x.dtype.itemsize


def _buffer(x: Any) -> int:
    return min(x.size, BUFFER_ELEMENTS) * x.dtype.itemsize


def _softmax_shape(a: Any, x: Any, /, *, axis: Any = None) -> Any:
    return elementwise_out(x.shape, x.dtype, x)


def _softmax_memory(out: Any, x: Any, /, *, axis: Any = None) -> int:
    """softmax: ``x - shift`` beside its exponentials (which become the output); log_softmax:
    the exponentials of ``x - shift`` (which becomes the output). A few reduced arrays (the
    maximum, its finiteness, the shift, the sum) and the buffers of the broadcasts."""
    return size_bytes(x) + 4 * _reduced_bytes(x, axis) + 2 * _buffer(x)


# -- _log_softmax --------------------------------------------------------------------------------


@primitive(FP, axis_check=True, needs=())
def _log_softmax(bk: Any, x: Array, /, *, axis: Any = None) -> Any:
    """scipy.special.log_softmax: ``x - logsumexp(x, axis)``, the maximum shifted out first,
    as scipy's (``axis=None``: over every element)."""
    own = _own(bk, "_log_softmax")
    if own is not None:
        return own(x, axis=axis)
    tmp = x - _shift(bk, x, axis)
    tmp -= bk.log(fast.sum(bk, bk.exp(tmp), axis, keepdims=True))  # in place where it can be
    return tmp


_log_softmax.defvjp(
    lambda ns, g, out, x, /, *, axis=None: (
        g - ns.exp(out) * fast.sum(ns, g, axis, keepdims=True),
    ),
    saves=("out",),
)
_log_softmax.defjvp(
    lambda ns, t, out, x, /, *, axis=None: (
        t[0] - ns.sum(ns.exp(out) * t[0], axis=axis, keepdims=True)
    )
)
_log_softmax.defbatch(_reduction_batch(_log_softmax.name))
_log_softmax.defshape(_softmax_shape, memory=_softmax_memory)


# -- _logsumexp ----------------------------------------------------------------------------------


@primitive(FP, axis_check=True, needs=())
def _logsumexp(bk: Any, x: Array, /, *, axis: Any = None, keepdims: bool = False) -> Any:
    """scipy.special.logsumexp: ``log(sum(exp(x), axis))``, the maximum shifted out and the
    maximal terms summed apart (``log1p`` of the rest), as scipy's."""
    own = _own(bk, "_logsumexp")
    if own is not None:
        return own(x, axis=axis, keepdims=keepdims)
    if not count(tuple(x.shape), norm_axes(axis, x.ndim)):  # log of an empty sum: -inf (scipy)
        shape = reduced(tuple(x.shape), axis, keepdims)
        return bk.full(shape, -math.inf, dtype=x.dtype, **made_like(bk, x))
    m = fast.max(bk, x, axis, keepdims=True)
    finite = bk.isfinite(m)
    ms = bk.where(finite, m, 0.0)
    e = bk.exp(x - ms)
    top = x == m  # the maximal terms: exp(0) = 1 each
    k = fast.sum(bk, bk.astype(top, x.dtype), axis, keepdims=True)
    k = bk.where(finite, k, 1.0)
    rest = fast.sum(bk, bk.where(top, 0.0, e), axis, keepdims=True)
    # a non-finite maximum is the result: +inf (any +inf), -inf (all -inf) or NaN
    out = bk.where(finite, bk.log1p(rest / k) + bk.log(k) + ms, m)
    if not keepdims:
        out = bk.reshape(out, reduced(tuple(x.shape), axis, False))
    return out


def _softmax_from(ns: Any, x: Any, lse: Any, axis: Any) -> Any:
    """The softmax of ``x`` over ``axis`` from its logsumexp ``lse`` (kept dims):
    ``exp(x - lse)``, normalised by its own sum. Exactly that sum is 1; in floating point
    ``lse = max + log(sum)`` loses ``log(sum)`` beside a large maximum (x = [1e16, 1e16, 0]:
    ``exp(x - lse)`` is [1, 1, 0]), and the division restores it ([0.5, 0.5, 0], JAX's)."""
    w = ns.exp(x - lse)
    return w / fast.sum(ns, w, axis, keepdims=True)


@_logsumexp.defvjp(saves=("x", "out"))
def _logsumexp_vjp(ns, g, out, x, /, *, axis=None, keepdims=False):
    # d/dx_i: the softmax, from the output
    w = _softmax_from(ns, x, kept(ns, out, x.ndim, axis, keepdims), axis)
    return (kept(ns, g, x.ndim, axis, keepdims) * w,)


@_logsumexp.defjvp
def _logsumexp_jvp(ns, t, out, x, /, *, axis=None, keepdims=False):
    w = _softmax_from(ns, x, kept(ns, out, x.ndim, axis, keepdims), axis)
    return ns.sum(t[0] * w, axis=axis, keepdims=keepdims)


_logsumexp.defbatch(_reduction_batch(_logsumexp.name))


def _logsumexp_shape(a, x, /, *, axis=None, keepdims=False):
    return new(reduced(x.shape, axis, keepdims), x.dtype)


def _logsumexp_memory(out, x, /, *, axis=None, keepdims=False):
    """``x - shift`` and ``exp`` of it; then beside the exponentials the mask of the maximal
    terms (a byte an element) and one more array of x's size (the mask as numbers, then the
    exponentials without the maximal terms); a few reduced arrays; the broadcast buffers."""
    return 2 * size_bytes(x) + x.size + 8 * _reduced_bytes(x, axis) + 3 * _buffer(x)


_logsumexp.defshape(_logsumexp_shape, memory=_logsumexp_memory)


# -- _softmax ------------------------------------------------------------------------------------


@primitive(FP, axis_check=True, needs=())
def _softmax(bk: Any, x: Array, /, *, axis: Any = None) -> Any:
    """scipy.special.softmax: ``exp(x) / sum(exp(x), axis)``, the maximum shifted out first, as
    scipy's (``axis=None``: over every element)."""
    own = _own(bk, "_softmax")
    if own is not None:
        return own(x, axis=axis)
    # scipy's: an infinite maximum makes the slice NaN (log_softmax shifts by 0 there instead)
    m = fast.max(bk, x, axis, keepdims=True) if x.size else _shift(bk, x, axis)  # (empty)
    e = bk.exp(x - m)
    e /= fast.sum(bk, e, axis, keepdims=True)  # in place where it can be
    return e


_softmax.defvjp(
    lambda ns, g, out, x, /, *, axis=None: (
        out * (g - fast.sum(ns, g * out, axis, keepdims=True)),
    ),
    saves=("out",),
)
_softmax.defjvp(
    lambda ns, t, out, x, /, *, axis=None: (
        out * (t[0] - ns.sum(t[0] * out, axis=axis, keepdims=True))
    )
)
_softmax.defbatch(_reduction_batch(_softmax.name))
_softmax.defshape(_softmax_shape, memory=_softmax_memory)
