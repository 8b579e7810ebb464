"""scipy.special's functions, differentiable, on every backend.

Each function takes arrays of any pycograd_xp namespace (it finds the namespace from its
inputs, as :mod:`pycograd_xp.nn` does) with scipy.special's signature, and is one row of the
table (``pycograd_xp/ops/special.py``): reverse and forward mode (to any order: a derivative
that is another special function calls its row), vmap, memory projections and ``compile`` all
see it. Integer and boolean arrays are taken as the backend's default floating dtype, as
scipy takes them as float64; results keep a float32 input's dtype.

Where each runs: on NumPy, scipy.special's own (scipy is optional: ``pip install
'pycograd-xp[special]'``); on CuPy, cupyx.scipy.special's; on Cubed, scipy per block. On a
backend without special functions (array-api-strict), ``expit``, ``logit``, ``log_expit``,
``xlogy`` and ``xlog1py`` are computed from standard functions as scipy computes them, and the
others raise NotImplementedError naming the way out. ``softmax``, ``log_softmax`` and
``logsumexp`` are compositions of standard functions on every backend, as scipy's are.
"""

from __future__ import annotations

import operator
from typing import Any

import array_api_compat

from ._primitive import REGISTRY

__all__ = [
    "digamma",
    "erf",
    "erfc",
    "erfinv",
    "expit",
    "gammaln",
    "i0",
    "i0e",
    "i1",
    "i1e",
    "log_expit",
    "log_ndtr",
    "log_softmax",
    "logit",
    "logsumexp",
    "ndtr",
    "ndtri",
    "polygamma",
    "psi",
    "softmax",
    "xlog1py",
    "xlogy",
]


def _ns(fname: str, *xs: Any) -> Any:
    arrays = [x for x in xs if hasattr(x, "__array_namespace__")]
    if not arrays:
        got = ", ".join(type(x).__name__ for x in xs)
        raise TypeError(
            f"special.{fname}(): expected an array of a pycograd_xp namespace, got {got}; "
            f"convert with xp.asarray(...) first (scipy.special.{fname} takes Python numbers)"
        )
    try:
        return array_api_compat.array_namespace(*arrays)
    except TypeError:  # vmap: arrays of two levels; the lower level's row hands the call up
        return array_api_compat.array_namespace(arrays[0])


def _row(xp: Any, name: str) -> Any:
    """Row ``name`` of ``xp``: ours have it (recorded); a raw namespace runs the row's impl."""
    f = getattr(xp, name, None)
    if f is not None:
        return f
    impl = REGISTRY[name].impl
    assert impl is not None  # the special rows all have one
    return lambda *args, **kwargs: impl(xp, *args, **kwargs)


def _floating(fname: str, x: Any) -> Any:
    """``x`` as a real floating-point array (integers and booleans in the default floating
    dtype, as scipy takes them as float64); Python numbers pass. Each array is read by its own
    namespace (one of another namespace is then refused by the row, naming both)."""
    if not hasattr(x, "__array_namespace__"):
        return x
    xp = x.__array_namespace__()
    if xp.isdtype(x.dtype, "real floating"):
        return x
    if xp.isdtype(x.dtype, "complex floating"):
        raise TypeError(
            f"special.{fname}(): got an array of dtype {x.dtype}; only real floating-point "
            "arguments are supported (scipy.special takes complex ones for some functions)"
        )
    default = xp.__array_namespace_info__().default_dtypes()["real floating"]
    return xp.astype(x, default)


def _unary(fname: str, row: str) -> Any:
    def f(x: Any) -> Any:
        xp = _ns(fname, x)
        return _row(xp, row)(_floating(fname, x))

    f.__name__ = f.__qualname__ = fname
    f.__doc__ = REGISTRY[row].impl.__doc__
    return f


def _binary(fname: str, row: str) -> Any:
    def f(x: Any, y: Any) -> Any:
        xp = _ns(fname, x, y)
        return _row(xp, row)(_floating(fname, x), _floating(fname, y))

    f.__name__ = f.__qualname__ = fname
    f.__doc__ = REGISTRY[row].impl.__doc__
    return f


erf = _unary("erf", "_erf")
erfc = _unary("erfc", "_erfc")
erfinv = _unary("erfinv", "_erfinv")
expit = _unary("expit", "_expit")
logit = _unary("logit", "_logit")
log_expit = _unary("log_expit", "_log_expit")
gammaln = _unary("gammaln", "_gammaln")
digamma = _unary("digamma", "_digamma")
psi = digamma
ndtr = _unary("ndtr", "_ndtr")
log_ndtr = _unary("log_ndtr", "_log_ndtr")
ndtri = _unary("ndtri", "_ndtri")
i0 = _unary("i0", "_i0")
i0e = _unary("i0e", "_i0e")
i1 = _unary("i1", "_i1")
i1e = _unary("i1e", "_i1e")
xlogy = _binary("xlogy", "_xlogy")
xlog1py = _binary("xlog1py", "_xlog1py")


def polygamma(n: int, x: Any) -> Any:
    """scipy.special.polygamma: the ``n``-th derivative of digamma (``n`` a non-negative
    Python int, not differentiated; ``polygamma(0, x)`` is ``digamma(x)``)."""
    try:
        order = operator.index(n)
    except TypeError:
        raise TypeError(
            f"special.polygamma(): n must be a non-negative int, got {type(n).__name__}; "
            "an array of orders is not supported: call polygamma once per order"
        ) from None
    if order < 0:
        raise ValueError(f"special.polygamma(): n must be a non-negative int, got {order}")
    xp = _ns("polygamma", x)
    return _row(xp, "_polygamma")(_floating("polygamma", x), n=order)


def softmax(x: Any, axis: int | tuple[int, ...] | None = None) -> Any:
    """scipy.special.softmax: ``exp(x) / sum(exp(x), axis)`` (``axis=None``: over every
    element), the maximum shifted out first."""
    xp = _ns("softmax", x)
    return _row(xp, "_softmax")(_floating("softmax", x), axis=axis)


def log_softmax(x: Any, axis: int | tuple[int, ...] | None = None) -> Any:
    """scipy.special.log_softmax: ``x - logsumexp(x, axis, keepdims=True)`` (``axis=None``:
    over every element), accurate where softmax underflows."""
    xp = _ns("log_softmax", x)
    return _row(xp, "_log_softmax")(_floating("log_softmax", x), axis=axis)


def logsumexp(
    a: Any,
    axis: int | tuple[int, ...] | None = None,
    b: Any = None,
    keepdims: bool = False,
    return_sign: bool = False,
) -> Any:
    """scipy.special.logsumexp: ``log(sum(exp(a), axis))`` (``axis=None``: over every
    element), the maximum shifted out and the maximal terms summed apart, as scipy's. The
    weights ``b`` and ``return_sign`` are not supported: for weights ``b > 0`` compute
    ``logsumexp(a + xp.log(b))``."""
    if b is not None:
        raise NotImplementedError(
            "special.logsumexp(): the weights b are not supported; for positive weights "
            "compute logsumexp(a + xp.log(b), axis=...) (weights of either sign, which need "
            "return_sign, are not supported)"
        )
    if return_sign:
        raise NotImplementedError(
            "special.logsumexp(): return_sign=True is not supported (without negative weights "
            "b the sign is always 1): call it without return_sign"
        )
    xp = _ns("logsumexp", a)
    return _row(xp, "_logsumexp")(_floating("logsumexp", a), axis=axis, keepdims=keepdims)
