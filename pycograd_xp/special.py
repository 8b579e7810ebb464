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
``xlogy``, ``xlog1py``, ``entr``, ``rel_entr``, ``kl_div``, ``huber``, ``boxcox`` and
``boxcox1p`` are computed from standard functions as scipy computes them, and the others raise
NotImplementedError naming the way out. ``softmax``, ``log_softmax`` and ``logsumexp`` are
compositions of standard functions on every backend, as scipy's are.
"""

from __future__ import annotations

import inspect
import math
import operator
from collections.abc import Callable
from typing import Any

import array_api_compat

from ._api import no_grad as _no_grad
from ._exports import module_dir as _module_dir
from ._primitive import REGISTRY
from .namespace._array import detach as _detach
from .typing import Array

__all__ = [
    "betainc",
    "betaln",
    "boxcox",
    "boxcox1p",
    "digamma",
    "entr",
    "erf",
    "erfc",
    "erfinv",
    "fdtr",
    "fdtrc",
    "expit",
    "gammainc",
    "gammaincc",
    "gammaln",
    "huber",
    "i0",
    "i0e",
    "i1",
    "i1e",
    "kl_div",
    "log_expit",
    "log_ndtr",
    "log_softmax",
    "logit",
    "logsumexp",
    "ndtr",
    "ndtri",
    "polygamma",
    "psi",
    "rel_entr",
    "softmax",
    "xlog1py",
    "xlogy",
]


# dir() lists the public names only (what completion offers)
__dir__ = _module_dir(globals())


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


# The docstring of a function made from a row: the row's summary, then numpydoc's sections.
_RAISES = """
Raises
------
TypeError
    If no argument is an array of a pycograd_xp namespace, or one is complex.
NotImplementedError
    On a backend without this special function and no composition of standard ones.
"""
_UNARY_DOC = (
    """{summary}

Differentiable to any order, on every backend (see :mod:`pycograd_xp.special`).

Parameters
----------
x : Array
    A real floating-point array of a pycograd_xp namespace (integer and boolean arrays are
    taken in the default floating dtype, as scipy takes them as float64).

Returns
-------
Array
    Elementwise, of ``x``'s shape and floating dtype.
"""
    + _RAISES
)
_BINARY_DOC = (
    """{summary}

Differentiable to any order in both arguments, on every backend (see
:mod:`pycograd_xp.special`).

Parameters
----------
x, y : Array or float
    Real floating-point arrays of one pycograd_xp namespace, broadcast together, or Python
    numbers (at least one an array).

Returns
-------
Array
    Elementwise, of the broadcast shape.
"""
    + _RAISES
)


def _summary(row: str) -> str:
    return inspect.cleandoc(REGISTRY[row].impl.__doc__ or "")


def _unary(fname: str, row: str) -> Callable[[Array], Array]:
    def f(x: Array) -> Array:
        xp = _ns(fname, x)
        out: Array = _row(xp, row)(_floating(fname, x))
        return out

    f.__name__ = f.__qualname__ = fname
    f.__doc__ = _UNARY_DOC.format(summary=_summary(row))
    return f


def _binary(fname: str, row: str) -> Callable[[Array | float, Array | float], Array]:
    def f(x: Array | float, y: Array | float) -> Array:
        xp = _ns(fname, x, y)
        out: Array = _row(xp, row)(_floating(fname, x), _floating(fname, y))
        return out

    f.__name__ = f.__qualname__ = fname
    f.__doc__ = _BINARY_DOC.format(summary=_summary(row))
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
entr = _unary("entr", "_entr")
rel_entr = _binary("rel_entr", "_rel_entr")
kl_div = _binary("kl_div", "_kl_div")
huber = _binary("huber", "_huber")
boxcox = _binary("boxcox", "_boxcox")
boxcox1p = _binary("boxcox1p", "_boxcox1p")
betaln = _binary("betaln", "_betaln")


_INCOMPLETE_DOC = """{summary}

Differentiable in ``x`` (its derivative is the integrand), to any order, as PyTorch's
``gammainc``; not in the shape parameters, whose gradient raises NotImplementedError. SciPy
builds ``stdtr``, ``chdtrc`` and ``betaincc`` from these on our arrays (``SCIPY_ARRAY_API=1``),
so the t and chi-squared tests' p-values differentiate in their statistic.

Parameters
----------
{params} : Array or float
    The shape parameters (positive): constants, or arrays whose gradient is not taken.
x : Array or float
    The bound, of a pycograd_xp namespace unless a parameter is one; broadcast together.

Returns
-------
Array
    Elementwise, of the broadcast shape.

Raises
------
TypeError
    If no argument is an array of a pycograd_xp namespace, or one is complex.
NotImplementedError
    When the gradient with respect to a shape parameter is asked for; on a backend without
    this special function.
"""


def _incomplete(fname: str, row: str, params: tuple[str, ...]) -> Callable[..., Array]:
    def f(*args: Array | float) -> Array:
        if len(args) != len(params) + 1:
            raise TypeError(
                f"special.{fname}() takes {len(params) + 1} arguments "
                f"({', '.join(params)}, x), got {len(args)}"
            )
        xp = _ns(fname, *args)
        out: Array = _row(xp, row)(*(_floating(fname, a) for a in args))
        return out

    f.__name__ = f.__qualname__ = fname
    f.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in (*params, "x")],
        return_annotation=Array,
    )
    f.__doc__ = _INCOMPLETE_DOC.format(summary=_summary(row), params=", ".join(params))
    return f


gammainc = _incomplete("gammainc", "_gammainc", ("a",))
gammaincc = _incomplete("gammaincc", "_gammaincc", ("a",))
betainc = _incomplete("betainc", "_betainc", ("a", "b"))
fdtr = _incomplete("fdtr", "_fdtr", ("dfn", "dfd"))
fdtrc = _incomplete("fdtrc", "_fdtrc", ("dfn", "dfd"))


def polygamma(n: int, x: Array) -> Array:
    """scipy.special.polygamma: the ``n``-th derivative of digamma.

    Parameters
    ----------
    n : int
        The order: a non-negative Python int, not differentiated (``polygamma(0, x)`` is
        ``digamma(x)``).
    x : Array
        A real floating-point array of a pycograd_xp namespace.

    Returns
    -------
    Array
        Elementwise, of ``x``'s shape and dtype.

    Raises
    ------
    TypeError
        If ``n`` is not an int (an array of orders is not supported: call it once per order).
    ValueError
        If ``n`` is negative.
    """
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


def softmax(x: Array, axis: int | tuple[int, ...] | None = None) -> Array:
    """scipy.special.softmax: ``exp(x) / sum(exp(x), axis)``, the maximum shifted out first.

    Parameters
    ----------
    x : Array
        A real floating-point array of a pycograd_xp namespace.
    axis : int, tuple of int or None, default None
        The axes normalized over (None: every element).

    Returns
    -------
    Array
        Of ``x``'s shape, summing to 1 over ``axis``.
    """
    xp = _ns("softmax", x)
    return _row(xp, "_softmax")(_floating("softmax", x), axis=axis)


def log_softmax(x: Array, axis: int | tuple[int, ...] | None = None) -> Array:
    """scipy.special.log_softmax: ``x - logsumexp(x, axis, keepdims=True)``, accurate where
    softmax underflows.

    Parameters
    ----------
    x : Array
        A real floating-point array of a pycograd_xp namespace.
    axis : int, tuple of int or None, default None
        The axes normalized over (None: every element).

    Returns
    -------
    Array
        Of ``x``'s shape.
    """
    xp = _ns("log_softmax", x)
    return _row(xp, "_log_softmax")(_floating("log_softmax", x), axis=axis)


def logsumexp(
    a: Array,
    axis: int | tuple[int, ...] | None = None,
    b: Any = None,
    keepdims: bool = False,
    return_sign: bool = False,
) -> Array:
    """scipy.special.logsumexp: ``log(sum(exp(a), axis))``, the maximum shifted out and the
    maximal terms summed apart, as scipy's.

    Parameters
    ----------
    a : Array
        A real floating-point array of a pycograd_xp namespace.
    axis : int, tuple of int or None, default None
        The axes reduced (None: every element).
    b : Array or float, optional
        Weights broadcast against ``a``: ``log(sum(b exp(a)))``, differentiable in ``a`` and
        ``b``; negative weights need ``return_sign`` (without it a negative sum gives NaN, as
        scipy's).
    keepdims : bool, default False
        Keep the reduced axes with size 1.
    return_sign : bool, default False
        Return ``(log|sum|, sign(sum))`` instead.

    Returns
    -------
    Array, or a pair of them with ``return_sign``
        ``a``'s shape without ``axis`` (with size 1 there if ``keepdims``).
    """
    xp = _ns("logsumexp", a)
    if b is not None or return_sign:
        return _weighted_logsumexp(xp, _floating("logsumexp", a), axis, b, keepdims, return_sign)
    return _row(xp, "_logsumexp")(_floating("logsumexp", a), axis=axis, keepdims=keepdims)


def _weighted_logsumexp(
    xp: Any, a: Array, axis: Any, b: Any, keepdims: bool, return_sign: bool
) -> Any:
    """``log|sum(b exp(a))|`` and its sign, composed of standard functions (differentiable in
    ``a`` and ``b``): the largest ``a`` with a nonzero weight shifted out as a constant (the
    shift cancels in the value and the derivative), as scipy's."""
    b = xp.asarray(1.0 if b is None else b, dtype=a.dtype) if not hasattr(b, "shape") else b
    dtype = xp.result_type(a, b)
    a, b = xp.astype(a, dtype), xp.astype(b, dtype)
    try:
        shape = tuple(xp.broadcast_shapes(tuple(a.shape), tuple(b.shape)))
    except ValueError:
        raise ValueError(
            f"special.logsumexp(): b of shape {tuple(b.shape)} does not broadcast against a of "
            f"shape {tuple(a.shape)}"
        ) from None
    a, b = xp.broadcast_to(a, shape), xp.broadcast_to(b, shape)
    axes = tuple(range(len(shape))) if axis is None else axis
    with _no_grad():
        m = xp.max(xp.where(b != 0, a, -math.inf), axis=axes, keepdims=True)
        m = xp.where(xp.isfinite(m), m, 0.0)
    m = _detach(m)
    total = xp.sum(b * xp.exp(a - m), axis=axes, keepdims=True)
    out = xp.log(xp.abs(total)) + m
    sign = xp.sign(total)
    if not return_sign:
        out = xp.where(total < 0, math.nan, out)
    if not keepdims:
        out = xp.squeeze(out, axis=axes) if shape else out
        sign = xp.squeeze(sign, axis=axes) if shape else sign
    return (out, sign) if return_sign else out
