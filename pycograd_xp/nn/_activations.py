"""Activations and the softmax family: elementwise or along an axis, numerically stable."""

from __future__ import annotations

import math
from typing import Any

from ..namespace._array import Array as _Ours
from ..typing import Array
from ._common import _ns, _real_floating, _row


# -- activations --------------------------------------------------------------------------------
def linear(x: Array, w: Array, b: Array | None = None) -> Array:
    """``x @ w + b`` with ``w`` of shape (in, out) (``x @ w``, as JAX's Dense kernels).

    Parameters
    ----------
    x : Array
        The input, (..., in).
    w : Array
        The weight, (in, out).
    b : Array, optional
        The bias, (out,).

    Returns
    -------
    Array
        (..., out).

    Notes
    -----
    Where ``w`` and ``b`` are arrays of one namespace of ours, ``x`` one too (or a NumPy array
    beside a namespace over NumPy), the three in one real floating dtype, and ``b`` has one
    value per output, this is one row (``xp._linear``: one node on the tape, as PyTorch's
    ``addmm``), the same values as ``x @ w + b`` bit for bit. Anything else (another bias
    shape, mixed dtypes, no bias) is ``x @ w + b`` itself.
    """
    if b is not None and isinstance(w, _Ours) and type(b) is type(w):
        xp = w._ns
        # a NumPy array beside a namespace over NumPy: a constant, as ``x @ w`` takes it
        numpy_x = type(x) is xp._backend.array_type and xp._backend.numpy_functions
        if (
            (numpy_x or type(x) is type(w))
            and x.dtype == w.dtype == b.dtype
            and w.ndim == 2
            and b.ndim == 1
            and x.ndim >= 1
            and b.shape[0] == w.shape[1]
            and x.shape[-1] == w.shape[0]
            and _real_floating(xp, w)
        ):
            return xp._linear(xp._make(x) if numpy_x else x, w, b)
    y = x @ w
    return y if b is None else y + b


def relu(x: Array) -> Array:
    """``where(x > 0, x, 0)``: gradient 0 at 0, as in PyTorch; 0 at NaN.

    One row (``xp._relu``) whose VJP reads only its output, so the tape keeps no mask beside it;
    other dtypes than real floating point go through ``where``.

    Parameters
    ----------
    x : Array
        The input, of any shape (real floating point).

    Returns
    -------
    Array
        Of ``x``'s shape and dtype.
    """
    xp = _ns(x)
    if _real_floating(xp, x):
        return _row(xp, "_relu")(x)
    return xp.where(x > 0, x, 0.0)


def leaky_relu(x: Array, negative_slope: float = 0.01) -> Array:
    """``where(x > 0, x, negative_slope * x)``.

    Parameters
    ----------
    x : Array
        The input, of any shape (real floating point).
    negative_slope : float, default 0.01
        The slope for ``x <= 0``.

    Returns
    -------
    Array
        Of ``x``'s shape and dtype.
    """
    return _ns(x).where(x > 0, x, negative_slope * x)


def elu(x: Array, alpha: float = 1.0) -> Array:
    """ELU: ``x`` for ``x > 0``, else ``alpha * (exp(x) - 1)``.

    The negative branch is computed on ``x`` where ``x <= 0`` and on 0 elsewhere, so it never
    overflows where it is not taken (and its zero gradient stays 0). At 0 the derivative is
    ``alpha``, the negative branch's (as JAX's and PyTorch's): 1 for the default, where ELU is
    differentiable.

    Parameters
    ----------
    x : Array
        The input, of any shape (real floating point).
    alpha : float, default 1.0
        The saturation value for negative ``x``.

    Returns
    -------
    Array
        Of ``x``'s shape and dtype.
    """
    xp = _ns(x)
    # expm1 of x where it is taken, else of 0: the branch not taken never overflows, so its
    # zero gradient stays 0 (a where, not minimum(x, 0): minimum splits a tie's gradient, which
    # would give alpha / 2 at 0)
    pos = x > 0
    return xp.where(pos, x, alpha * xp.expm1(xp.where(pos, xp.zeros_like(x), x)))


def sigmoid(x: Array) -> Array:
    """``1 / (1 + exp(-x))``, a few ulp of relative error in both tails (``-x`` clipped where
    the exponential would overflow): one row (``xp._sigmoid``) whose VJP keeps the output.

    Parameters
    ----------
    x : Array
        The input, of any shape (real floating point).

    Returns
    -------
    Array
        Of ``x``'s shape and dtype.
    """
    if _floating(x):
        return _row(_ns(x), "_sigmoid")(x)
    return 0.5 * (_ns(x).tanh(0.5 * x) + 1)


def tanh(x: Array) -> Array:
    """The hyperbolic tangent (``xp.tanh``).

    Parameters
    ----------
    x : Array
        The input, of any shape (real floating point).

    Returns
    -------
    Array
        Of ``x``'s shape and dtype.
    """
    return _ns(x).tanh(x)


def _floating(x: Any) -> bool:
    return _real_floating(_ns(x), x)


def silu(x: Array) -> Array:
    """SiLU (swish) ``x sigmoid(x)``: one row (``xp._silu``) whose VJP keeps only x.

    Parameters
    ----------
    x : Array
        The input, of any shape (real floating point).

    Returns
    -------
    Array
        Of ``x``'s shape and dtype.
    """
    if _floating(x):
        return _row(_ns(x), "_silu")(x)
    return x * sigmoid(x)


def softplus(x: Array) -> Array:
    """``log(1 + exp(x))``, stable (logaddexp): one row (``xp._softplus``) whose VJP keeps
    only x.

    Parameters
    ----------
    x : Array
        The input, of any shape (real floating point).

    Returns
    -------
    Array
        Of ``x``'s shape and dtype.
    """
    if _floating(x):
        return _row(_ns(x), "_softplus")(x)
    return _ns(x).logaddexp(_ns(x).zeros_like(x), x)


def _erf(xp: Any, x: Any) -> Any:
    # Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7), for a backend without erf (the standard
    # has none): the composed GELU's
    s = xp.sign(x)
    a = xp.abs(x)
    t = 1 / (1 + 0.3275911 * a)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    return s * (1 - poly * xp.exp(-a * a))


def gelu(x: Array, approximate: bool = True) -> Array:
    """GELU: the tanh approximation (default), or ``x Phi(x)`` with the backend's erf.

    One row each (``xp._gelu_tanh``, ``xp._gelu``) whose VJP keeps only x; the exact one uses
    scipy's erf on NumPy, and on a backend without erf (array-api-strict) is composed with an
    erf to 1.5e-7.

    Parameters
    ----------
    x : Array
        The input, of any shape (real floating point).
    approximate : bool, default True
        The tanh approximation (True) or the exact ``x Phi(x)`` (False).

    Returns
    -------
    Array
        Of ``x``'s shape and dtype.
    """
    xp = _ns(x)
    if _floating(x):
        if approximate:
            return _row(xp, "_gelu_tanh")(x)
        try:
            return _row(xp, "_gelu")(x)
        except NotImplementedError:  # no erf on this backend
            pass
    if approximate:
        return 0.5 * x * (1 + xp.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)))
    return 0.5 * x * (1 + _erf(xp, x / math.sqrt(2.0)))


def logsumexp(x: Array, axis: int | tuple[int, ...] | None = -1, keepdims: bool = False) -> Array:
    """``log(sum(exp(x), axis))``, stable, with axis -1 by default.

    ``pycograd_xp.special.logsumexp``'s row (``xp._logsumexp``).

    Parameters
    ----------
    x : Array
        The input, of any shape (real floating point).
    axis : int, tuple of int or None, default -1
        The axes reduced (None: all).
    keepdims : bool, default False
        Keep the reduced axes with size 1.

    Returns
    -------
    Array
        ``x``'s shape without ``axis`` (with size 1 there if ``keepdims``).
    """
    return _row(_ns(x), "_logsumexp")(x, axis=axis, keepdims=keepdims)


def log_softmax(x: Array, axis: int = -1) -> Array:
    """``x - logsumexp(x, axis)``.

    ``pycograd_xp.special.log_softmax``'s row (``xp._log_softmax``), whose VJP keeps only its
    output.

    Parameters
    ----------
    x : Array
        The input, of any shape (real floating point).
    axis : int, default -1
        The axis normalized over.

    Returns
    -------
    Array
        Of ``x``'s shape and dtype.
    """
    return _row(_ns(x), "_log_softmax")(x, axis=axis)


def softmax(x: Array, axis: int = -1) -> Array:
    """``exp(x) / sum(exp(x), axis)``, the maximum shifted out.

    ``pycograd_xp.special.softmax``'s row (``xp._softmax``), whose VJP keeps only its output.

    Parameters
    ----------
    x : Array
        The input, of any shape (real floating point).
    axis : int, default -1
        The axis normalized over.

    Returns
    -------
    Array
        Of ``x``'s shape and dtype.
    """
    return _row(_ns(x), "_softmax")(x, axis=axis)
