"""Normalisations: layer norm and RMS norm (fused rows), batch norm with running statistics."""

from __future__ import annotations

import math
from typing import Any, cast

from .._api import stop_gradient
from ..typing import Array
from ._common import _ns, _row

# -- normalization ------------------------------------------------------------------------------


def _scale(where: str, name: str, a: Any, axis: Any) -> None:
    """Refuse a shape where the scale or shift array goes (PyTorch's ``F.layer_norm(x,
    normalized_shape)`` habit): here the normalized axes are ``axis=``."""
    if a is not None and not hasattr(a, "shape"):
        raise TypeError(
            f"nn.{where}(x, {name}={a!r}): {name} is an array of the normalized axes' shape (or "
            f"None), not a shape; the axes normalized over are axis= (now {axis!r}): PyTorch's "
            f"normalized_shape of the last k axes is axis=tuple(range(-k, 0))"
        )


def _onto(x: Any, p: Any, axis: Any) -> Any:
    """A weight or bias of the normalized axes' shape placed on those axes (size-1 axes between
    and after them), so that it broadcasts against ``x`` there: (3, 5) for axes (1, 3) of a
    (2, 3, 4, 5) input becomes (3, 1, 5). Over trailing axes that is its own shape; any other
    shape is taken as it is (one that broadcasts against x)."""
    if p is None or not hasattr(p, "shape") or not getattr(x, "ndim", 0):
        return p
    axes = sorted(a % x.ndim for a in (axis if isinstance(axis, tuple | list) else (axis,)))
    want = tuple(x.shape[a] for a in axes)
    if not axes or tuple(p.shape) != want:
        return p
    placed = tuple(x.shape[a] if a in axes else 1 for a in range(axes[0], x.ndim))
    return p if placed == want else _ns(x).reshape(p, placed)


def layer_norm(
    x: Array,
    weight: Array | None = None,
    bias: Array | None = None,
    eps: float = 1e-5,
    axis: int | tuple[int, ...] = -1,
) -> Array:
    """``(x - mean) / sqrt(var + eps) * weight + bias`` over ``axis``.

    One row (``xp._layer_norm``) whose VJP keeps the input, the weight and the per-row mean and
    ``1 / sqrt(var + eps)``.

    Parameters
    ----------
    x : Array
        The input, of any shape (real floating point).
    weight : Array, optional
        The scale, of the normalized axes' shape (None: 1): (3, 5) for ``axis=(1, 3)`` of a
        (2, 3, 4, 5) input, placed on those axes; or any shape that broadcasts against x.
    bias : Array, optional
        The shift, likewise (None: 0).
    eps : float, default 1e-5
        Added to the variance.
    axis : int or tuple of int, default -1
        The axes normalized over.

    Returns
    -------
    Array
        Of ``x``'s shape and dtype.
    """
    _scale("layer_norm", "weight", weight, axis)
    _scale("layer_norm", "bias", bias, axis)
    weight, bias = _onto(x, weight, axis), _onto(x, bias, axis)
    return _row(_ns(x), "_layer_norm")(x, weight, bias, eps=eps, axis=axis)[0]


def rms_norm(x: Array, weight: Array | None = None, eps: float = 1e-6, axis: int = -1) -> Array:
    """``x / sqrt(mean(x^2) + eps) * weight`` over ``axis``.

    One row (``xp._rms_norm``) whose VJP keeps the input, the weight and the per-row
    ``1 / sqrt(mean(x^2) + eps)``.

    Parameters
    ----------
    x : Array
        The input, of any shape (real floating point).
    weight : Array, optional
        The scale, of the normalized axis' size (None: 1), placed on that axis; or any shape
        that broadcasts against x.
    eps : float, default 1e-6
        Added to the mean square.
    axis : int, default -1
        The axis normalized over.

    Returns
    -------
    Array
        Of ``x``'s shape and dtype.
    """
    _scale("rms_norm", "weight", weight, axis)
    weight = _onto(x, weight, axis)
    return _row(_ns(x), "_rms_norm")(x, weight, eps=eps, axis=axis)[0]


def batch_norm(
    x: Array,
    state: dict[str, Any],
    weight: Array | None = None,
    bias: Array | None = None,
    *,
    training: bool,
    momentum: float = 0.1,
    eps: float = 1e-5,
    axis: int = 1,
) -> tuple[Array, dict[str, Any]]:
    """Batch normalization over every axis but ``axis`` (the channels).

    Training normalizes with the batch's statistics and updates the running ones (unbiased
    variance, as PyTorch); evaluation uses the running ones.

    Parameters
    ----------
    x : Array
        The input, e.g. (N, C, H, W).
    state : dict
        The running ``mean`` and ``var`` (shape (C,)).
    weight : Array, optional
        The per-channel scale, (C,) (None: 1).
    bias : Array, optional
        The per-channel shift, (C,) (None: 0).
    training : bool
        Batch statistics (True) or the running ones (False).
    momentum : float, default 0.1
        The weight of the batch's statistics in the running ones' update.
    eps : float, default 1e-5
        Added to the variance.
    axis : int, default 1
        The channel axis.

    Returns
    -------
    y : Array
        The normalized input, of ``x``'s shape.
    new_state : dict
        The updated running ``mean`` and ``var`` (``state`` itself in evaluation).
    """
    xp = _ns(x)
    axis = axis % x.ndim
    reduce = tuple(a for a in range(x.ndim) if a != axis)
    shape = tuple(x.shape[a] if a == axis else 1 for a in range(x.ndim))
    if training:
        mu = xp.mean(x, axis=reduce)
        var = xp.var(x, axis=reduce)
        n = math.prod(cast(int, x.shape[a]) for a in reduce)
        unbiased = stop_gradient(var) * (n / max(n - 1, 1))
        new_state = {
            "mean": (1 - momentum) * state["mean"] + momentum * stop_gradient(mu),
            "var": (1 - momentum) * state["var"] + momentum * unbiased,
        }
    else:
        mu, var, new_state = state["mean"], state["var"], state
    y = (x - xp.reshape(mu, shape)) / xp.sqrt(xp.reshape(var, shape) + eps)
    if weight is not None:
        y = y * xp.reshape(weight, shape)
    if bias is not None:
        y = y + xp.reshape(bias, shape)
    return y, new_state
