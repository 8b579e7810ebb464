"""Functional neural-network layers, numerically stable, written in Array API code.

Every function takes arrays of any pycograd_xp namespace (it finds the namespace from its
inputs), so it is differentiable and runs on every backend. ``linear`` weights are (in, out),
applied as ``x @ w`` (JAX's and Flax's layout; PyTorch's ``nn.Linear`` stores (out, in));
convolutions and pooling follow PyTorch's layout: (N, C, L) / (N, C, H, W) inputs and
(O, C, K...) kernels. Random layers (dropout, initializers) take an explicit
:class:`pycograd_xp.random.Key`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, cast

import array_api_compat
import numpy as np

from . import random
from ._api import stop_gradient
from ._exports import module_dir as _module_dir
from .tree import tree_flatten
from .typing import Array

__all__ = [
    "Linear",
    "Module",
    "avg_pool2d",
    "batch_norm",
    "binary_cross_entropy_with_logits",
    "conv1d",
    "conv2d",
    "cross_entropy",
    "dropout",
    "elu",
    "embedding",
    "gelu",
    "glorot_normal",
    "glorot_uniform",
    "he_normal",
    "he_uniform",
    "layer_norm",
    "leaky_relu",
    "linear",
    "log_softmax",
    "logsumexp",
    "max_pool2d",
    "mse",
    "multi_head_attention",
    "normal",
    "relu",
    "rms_norm",
    "scaled_dot_product_attention",
    "sigmoid",
    "silu",
    "softmax",
    "softplus",
    "static",
    "tanh",
    "uniform",
]


# dir() lists the public names only (what completion offers)
__dir__ = _module_dir(globals())


def _ns(*xs: Any) -> Any:
    return array_api_compat.array_namespace(*xs)


def _reduce(loss: Any, reduction: str, where: str) -> Any:
    xp = _ns(loss)
    if reduction == "mean":
        return xp.mean(loss)
    if reduction == "sum":
        return xp.sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f"{where}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _check_target(where: str, pred: Any, target: Any, target_is: str, pred_is: str) -> None:
    """Refuse a target that does not broadcast to the predictions' shape: predictions (n,)
    against a target (n, 1) broadcast to (n, n), whose mean is not the loss of each prediction
    (PyTorch warns or raises there too). ``target_is``, ``pred_is``: how the message names
    them ("the target's shape", "the predictions' shape")."""
    shape = tuple(getattr(pred, "shape", ()))
    given = getattr(target, "shape", None)
    if given is None or None in shape or None in tuple(given):  # a number; unknown sizes
        return
    given = tuple(given)
    try:
        both: tuple | None = tuple(np.broadcast_shapes(shape, given))
    except ValueError:
        both = None
    if both != shape:
        together = f" (together they broadcast to {both})" if both is not None else ""
        hint = f"; reshape it to {shape}" if math.prod(given) == math.prod(shape) else ""
        raise ValueError(
            f"{where}: {target_is} {given} does not broadcast to {pred_is} {shape}{together}{hint}"
        )


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
    """
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
    if xp.isdtype(x.dtype, "real floating"):
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

    The negative branch is computed on ``min(x, 0)``, so it never overflows where it is not
    taken (and its zero gradient stays 0).

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
    # expm1 of min(x, 0): the branch not taken never overflows, so its zero gradient stays 0
    return xp.where(x > 0, x, alpha * xp.expm1(xp.minimum(x, xp.zeros_like(x))))


def sigmoid(x: Array) -> Array:
    """``1 / (1 + exp(-x))`` as ``(tanh(x / 2) + 1) / 2``: stable for any x.

    Parameters
    ----------
    x : Array
        The input, of any shape (real floating point).

    Returns
    -------
    Array
        Of ``x``'s shape and dtype.
    """
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
    return _ns(x).isdtype(x.dtype, "real floating")


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


# -- losses -------------------------------------------------------------------------------------
def cross_entropy(
    logits: Array,
    labels: Array,
    reduction: str = "mean",
    *,
    ignore_index: int | None = None,
    label_smoothing: float = 0.0,
) -> Array:
    """Softmax cross-entropy over the last axis.

    One row (``xp._cross_entropy``) whose VJP keeps the logits, the labels and each row's
    normaliser: never the log-probabilities or a one-hot.

    Parameters
    ----------
    logits : Array
        Unnormalized scores, (..., classes).
    labels : Array
        Integer class indices (shape ``logits.shape[:-1]``) or class probabilities / one-hot
        (shape ``logits.shape``, or 1 along any of its axes). Class indices given as floats
        (shape ``logits.shape[:-1]``) are refused, not read as probabilities: cast them to
        integers. A negative index counts from the last class (-1 is the last), as in
        NumPy and JAX; PyTorch refuses them. An index outside ``-classes .. classes - 1`` is
        refused (IndexError), unless it is ``ignore_index``.
    reduction : {'mean', 'sum', 'none'}, default 'mean'
        How the per-element (per-row) losses are reduced; 'none' keeps them.
    ignore_index : int, optional
        A class index that contributes no loss and no gradient (PyTorch's ``ignore_index``,
        whose default -100 marks padding): its rows' losses are 0, and ``'mean'`` divides by
        the number of the other rows (NaN where every row is ignored, as PyTorch's). Only with
        integer labels. None (the default): every label is a class.
    label_smoothing : float, default 0.0
        ``eps`` in [0, 1]: the target is ``(1 - eps)`` times the labels' distribution plus
        ``eps`` spread evenly over the classes (PyTorch's ``label_smoothing``), that is
        ``(1 - eps) * loss + eps * (logsumexp(logits) - mean(logits))`` per row, from the same
        row: still no one-hot and no log-probabilities kept.

    Returns
    -------
    Array
        A scalar (``'mean'``, ``'sum'``), or the unreduced losses (``'none'``).

    Raises
    ------
    IndexError
        A class index out of range (where the values can be read: not on a lazy backend).
    ValueError
        ``label_smoothing`` outside [0, 1], or ``ignore_index`` with probabilities.
    """
    xp = _ns(logits)
    eps = float(label_smoothing)
    if not 0.0 <= eps <= 1.0:
        raise ValueError(f"cross_entropy(): label_smoothing must be in [0, 1], got {eps}")
    if reduction not in ("mean", "sum", "none"):
        _reduce(logits, reduction, "cross_entropy")  # raises, naming the choices
    keep = None
    if ignore_index is not None:
        if not isinstance(ignore_index, int | np.integer) or isinstance(ignore_index, bool):
            raise TypeError(
                f"cross_entropy(): ignore_index must be an int, got {type(ignore_index).__name__}"
            )
        if not xp.isdtype(labels.dtype, "integral"):
            raise ValueError(
                "cross_entropy(): ignore_index applies to integer class indices, not to "
                f"probabilities ({getattr(labels.dtype, 'name', labels.dtype)} labels); give "
                "an ignored row zero probabilities, or weight the 'none' losses"
            )
        keep = labels != int(ignore_index)
        labels = xp.where(keep, labels, xp.zeros_like(labels))  # any class: its loss is dropped
    loss, lse = _row(xp, "_cross_entropy")(logits, labels)
    if eps:
        loss = (1.0 - eps) * loss + eps * (lse - xp.mean(logits, axis=-1))
    if keep is None:
        return _reduce(loss, reduction, "cross_entropy")
    loss = xp.where(keep, loss, xp.zeros_like(loss))
    if reduction != "mean":
        return _reduce(loss, reduction, "cross_entropy")
    count = xp.sum(xp.astype(xp.broadcast_to(keep, tuple(loss.shape)), loss.dtype))
    return xp.sum(loss) / count


def binary_cross_entropy_with_logits(
    logits: Array, targets: Array, reduction: str = "mean"
) -> Array:
    """``-[y log sigmoid(x) + (1-y) log(1 - sigmoid(x))]`` as ``softplus(x) - x y`` (stable).

    Parameters
    ----------
    logits : Array
        The scores ``x``.
    targets : Array
        The targets ``y`` in [0, 1], of ``logits``' shape or broadcasting to it: real,
        integer, or bool (taken in the logits' dtype: the standard multiplies no bool).
    reduction : {'mean', 'sum', 'none'}, default 'mean'
        How the per-element (per-row) losses are reduced; 'none' keeps them.

    Returns
    -------
    Array
        A scalar (``'mean'``, ``'sum'``), or the unreduced losses (``'none'``).

    Raises
    ------
    ValueError
        If ``targets`` does not broadcast to ``logits``' shape (targets (n, 1) against logits
        (n,) would broadcast to an (n, n) matrix, a wrong loss).
    """
    _check_target(
        "binary_cross_entropy_with_logits",
        logits,
        targets,
        "the targets' shape",
        "the logits' shape",
    )
    xp = _ns(logits)
    if getattr(targets, "dtype", None) == xp.bool:
        targets = xp.astype(xp.asarray(targets), logits.dtype)
    return _reduce(
        softplus(logits) - logits * targets, reduction, "binary_cross_entropy_with_logits"
    )


def mse(pred: Array, target: Array, reduction: str = "mean") -> Array:
    """Mean squared error: ``(pred - target) ** 2``, reduced.

    Parameters
    ----------
    pred : Array
        The predictions.
    target : Array
        The targets, of ``pred``'s shape or broadcasting to it.
    reduction : {'mean', 'sum', 'none'}, default 'mean'
        How the per-element (per-row) losses are reduced; 'none' keeps them.

    Returns
    -------
    Array
        A scalar (``'mean'``, ``'sum'``), or the unreduced losses (``'none'``).

    Raises
    ------
    ValueError
        If ``target`` does not broadcast to ``pred``'s shape (a target (n, 1) against
        predictions (n,) would broadcast to an (n, n) matrix, a wrong loss).
    """
    _check_target("mse", pred, target, "the target's shape", "the predictions' shape")
    d = pred - target
    return _reduce(d * d, reduction, "mse")


# -- normalization ------------------------------------------------------------------------------
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
        The scale, of the normalized axes' shape (None: 1).
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
        The scale, of the normalized axis' size (None: 1).
    eps : float, default 1e-6
        Added to the mean square.
    axis : int, default -1
        The axis normalized over.

    Returns
    -------
    Array
        Of ``x``'s shape and dtype.
    """
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


# -- stochastic and lookup layers ---------------------------------------------------------------
def dropout(key: random.Key, x: Array, rate: float, training: bool = True) -> Array:
    """Zero each element with probability ``rate`` and scale the rest by ``1 / (1 - rate)``.

    Parameters
    ----------
    key : pycograd_xp.random.Key
        The randomness (split it per call).
    x : Array
        The input, of any shape (real floating point).
    rate : float
        The probability of zeroing, in [0, 1).
    training : bool, default True
        False returns ``x`` unchanged (as does ``rate == 0``).

    Returns
    -------
    Array
        Of ``x``'s shape and dtype.

    Raises
    ------
    ValueError
        If ``rate`` is not in [0, 1).
    """
    if not training or rate == 0.0:
        return x
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"dropout: rate must be in [0, 1), got {rate!r}")
    xp = _ns(x)
    keep = random.bernoulli(key, 1.0 - rate, cast(tuple[int, ...], x.shape), xp=xp)
    return xp.where(keep, x / (1.0 - rate), xp.zeros_like(x))


def embedding(ids: Array, table: Array) -> Array:
    """Rows of ``table`` for integer ``ids``.

    Parameters
    ----------
    ids : Array
        Integer indices into the rows of ``table``, of any shape.
    table : Array
        The embeddings, (V, D).

    Returns
    -------
    Array
        Shape ``ids.shape + (D,)``.

    Raises
    ------
    TypeError
        ``ids`` not integers, or ``table`` not 2-D (the arguments swapped, say).
    """
    xp = _ns(table)
    if not xp.isdtype(ids.dtype, "integral") or table.ndim != 2:
        raise TypeError(
            f"embedding(ids, table): ids must be integers and table (V, D), got "
            f"{getattr(ids.dtype, 'name', ids.dtype)} ids of shape {tuple(ids.shape)} and a "
            f"table of shape {tuple(table.shape)}"
            + ("; the arguments may be swapped" if xp.isdtype(table.dtype, "integral") else "")
        )
    rows = xp.take(table, xp.reshape(ids, (-1,)), axis=0)
    return xp.reshape(rows, (*ids.shape, table.shape[1]))


# -- attention ----------------------------------------------------------------------------------
def scaled_dot_product_attention(
    q: Array,
    k: Array,
    v: Array,
    mask: Array | None = None,
    is_causal: bool = False,
    scale: float | None = None,
    *,
    causal: bool | None = None,
) -> Array:
    """``softmax(q k^T * scale) v`` over the last two axes (PyTorch's layout).

    A boolean mask gives masked scores the dtype's lowest value, so a fully masked row stays
    finite (the mean of v); a float mask is added to the scaled scores, as PyTorch's (its dtype
    promotes with q, k and v's; differentiable; -inf excludes a key, and a row whose scores are
    all -inf gives 0). One row (``xp._attention``), flash-style: blocks of queries (and keys) within
    ``ops.nn.ATTENTION_BLOCK_BYTES``, so no Lq x Lk array is made for the whole batch; the VJP
    keeps q, k, v, the output and each row's log-sum-exp, and recomputes the probabilities
    block by block.

    Parameters
    ----------
    q : Array
        Queries, (..., Lq, d).
    k : Array
        Keys, (..., Lk, d).
    v : Array
        Values, (..., Lk, dv).
    mask : Array, optional
        Broadcastable to (..., Lq, Lk): booleans, True where attention is allowed, or real
        floats added to the scaled scores.
    is_causal : bool, default False
        Add the lower-triangular mask (top-left aligned).
    scale : float, optional
        The score scale (None: ``1 / sqrt(d)``).
    causal : bool, optional
        The same as ``is_causal`` (keyword only).

    Returns
    -------
    Array
        (..., Lq, dv).
    """
    if causal is not None and is_causal and not causal:
        raise ValueError(
            "scaled_dot_product_attention(): is_causal=True and causal=False contradict each "
            "other (causal is another name for is_causal); pass one of them"
        )
    is_causal = is_causal if causal is None else causal
    xp = _attention_ns(q, k, v)
    q, k, v = (xp.expand_dims(a, axis=-2) for a in (q, k, v))  # one head: (..., L, 1, d)
    if mask is not None:  # (..., Lq, Lk) -> (..., 1, Lq, Lk)
        mask = xp.reshape(mask, (1,) * (2 - mask.ndim) + tuple(mask.shape))
        mask = xp.expand_dims(mask, axis=-3)
    out = _row(xp, "_attention")(q, k, v, mask, is_causal=is_causal, scale=scale)[0]
    return out[..., 0, :]


def _attention_ns(*xs: Any) -> Any:
    try:
        return _ns(*xs)
    except TypeError:  # vmap: arrays of two levels; the lower level's row hands the call up
        return _ns(xs[0])


def multi_head_attention(
    x: Array,
    params: dict[str, Any],
    num_heads: int,
    mask: Array | None = None,
    context: Array | None = None,
    causal: bool = False,
) -> Array:
    """Multi-head attention of ``x`` over ``context`` (default ``x``).

    The heads stay beside the features ((B, L, heads, D / heads), a view of each projection)
    through the attention row, whose output reshapes back to (B, L, D) without a copy.

    Parameters
    ----------
    x : Array
        The queries' input, (B, L, D).
    params : dict
        ``wq, wk, wv, wo`` (D, D) and optional biases ``bq, bk, bv, bo`` (D,).
    num_heads : int
        The number of heads (dividing D).
    mask : Array, optional
        Broadcastable to (B, heads, Lq, Lk): booleans, True where attention is allowed, or
        additive floats (as :func:`scaled_dot_product_attention`'s).
    context : Array, optional
        The keys' and values' input, (B, Lk, D) (None: ``x``).
    causal : bool, default False
        Add the causal mask.

    Returns
    -------
    Array
        (B, L, D).
    """
    xp = _ns(x)
    context = x if context is None else context
    b, lq, d = cast(tuple[int, int, int], x.shape)
    lk = cast(int, context.shape[1])
    if d % num_heads:
        raise ValueError(f"multi_head_attention: width {d} is not divisible by {num_heads} heads")
    hd = d // num_heads

    def heads(t: Any, w: str, bias: str, length: int) -> Any:
        return xp.reshape(linear(t, params[w], params.get(bias)), (b, length, num_heads, hd))

    q, k, v = (
        heads(x, "wq", "bq", lq),
        heads(context, "wk", "bk", lk),
        heads(context, "wv", "bv", lk),
    )
    out = _row(xp, "_attention")(q, k, v, mask, is_causal=causal)[0]
    return linear(xp.reshape(out, (b, lq, d)), params["wo"], params.get("bo"))


# -- convolution and pooling --------------------------------------------------------------------
# Each is one row of the primitive table (pycograd_xp.ops.nn): one im2col and one matrix
# product on NumPy, a backward that is itself a convolution, shape and memory rules.
def _pair(v: Any, n: int) -> tuple[int, ...]:
    return tuple(v) if isinstance(v, tuple | list) else (v,) * n


def _row(xp: Any, name: str) -> Any:
    """Row ``name`` of ``xp``: ours have it (recorded); a raw namespace runs the row's impl."""
    f = getattr(xp, name, None)
    if f is not None:
        return f
    from ._primitive import REGISTRY

    impl = REGISTRY[name].impl
    assert impl is not None  # the fused nn rows all have one
    return lambda *args, **kwargs: impl(xp, *args, **kwargs)


def _ints(v: Any, n: int, what: str, fname: str, least: int = 0) -> tuple[int, ...]:
    """``v`` as ``n`` ints of at least ``least`` (one int: all alike), or a ValueError naming
    ``fname``."""
    t = tuple(v) if isinstance(v, tuple | list) else (v,) * n
    if len(t) != n or not all(isinstance(i, int | np.integer) and i >= least for i in t):
        kind = "a positive int" if least else "a non-negative int"
        raise ValueError(f"{fname}: {what} must be {kind} or {n} of them; got {v!r}")
    return tuple(int(i) for i in t)


def _conv_padding(
    padding: Any, kernel: tuple[int, ...], stride: tuple[int, ...], dilation: tuple[int, ...]
) -> tuple[tuple[int, int], ...]:
    """A convolution's ``(before, after)`` zeros per spatial axis, from PyTorch's ways to say
    them: an int, one per axis, "valid" (none) or "same" (the output as long as the input, at
    stride 1: ``dilation * (kernel - 1)`` zeros, the odd one after); or, beyond PyTorch, a
    ``(before, after)`` pair per axis."""
    n, fname = len(kernel), f"conv{len(kernel)}d"
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0),) * n
        if padding != "same":
            raise ValueError(
                f"{fname}: padding must be 'same', 'valid' or numbers; got {padding!r}"
            )
        if any(s != 1 for s in stride):
            raise ValueError(
                f"{fname}: padding='same' needs stride 1 (got stride={stride}), as in PyTorch; "
                "give the padding in numbers"
            )
        total = [d * (k - 1) for d, k in zip(dilation, kernel, strict=True)]
        return tuple((t // 2, t - t // 2) for t in total)
    sides = padding if isinstance(padding, tuple | list) else (padding,) * n
    if n == 1 and len(sides) == 2 and not isinstance(sides[0], tuple | list):
        sides = (sides,)  # conv1d's (before, after)
    if len(sides) == n and all(isinstance(p, tuple | list) for p in sides):
        pairs = (_ints(p, 2, "each axis' padding pair", fname) for p in sides)
        return tuple((before, after) for before, after in pairs)
    return tuple((p, p) for p in _ints(padding, n, "padding", fname))


def _conv(
    x: Any, w: Any, b: Any, stride: Any, padding: Any, dilation: Any, groups: int, n: int
) -> Any:
    try:
        xp = _ns(x, w)
    except TypeError:  # vmap: arrays of two levels; the lower level's row hands the call up
        xp = _ns(x)
    args = (x, w) if b is None else (x, w, b)  # the bias added inside the row
    stride = _ints(stride, n, "stride", f"conv{n}d", least=1)
    dilation = _ints(dilation, n, "dilation", f"conv{n}d", least=1)
    return _row(xp, f"_conv{n}d")(
        *args,
        stride=stride,
        dilation=dilation,
        padding=_conv_padding(padding, tuple(w.shape[2:]), stride, dilation),
        groups=groups,
    )


def conv1d(
    x: Array,
    w: Array,
    b: Array | None = None,
    stride: int = 1,
    padding: int = 0,
    dilation: int = 1,
    groups: int = 1,
) -> Array:
    """1-D convolution (cross-correlation, as PyTorch). Differentiable in ``x``, ``w`` and ``b``.

    Parameters
    ----------
    x : Array
        The input, (N, C, L).
    w : Array
        The kernel, (O, C / groups, K).
    b : Array, optional
        The bias, (O,).
    stride : int, default 1
        The step between windows.
    padding : int, "same", "valid" or a pair of int, default 0
        Zeros added at each end (a pair: before and after); "same" (stride 1 only) keeps the
        length, as PyTorch (``dilation * (K - 1)`` zeros, the odd one at the end).
    dilation : int, default 1
        The spacing of the kernel's taps.
    groups : int, default 1
        Splits the channels into independent convolutions.

    Returns
    -------
    Array
        (N, O, L').
    """
    return _conv(x, w, b, stride, padding, dilation, groups, 1)


def conv2d(
    x: Array,
    w: Array,
    b: Array | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Array:
    """2-D convolution (cross-correlation, as PyTorch). Differentiable in ``x``, ``w`` and ``b``.

    Parameters
    ----------
    x : Array
        The input, (N, C, H, W).
    w : Array
        The kernel, (O, C / groups, KH, KW).
    b : Array, optional
        The bias, (O,).
    stride : int or pair of int, default 1
        The step between windows.
    padding : int, pair of int, "same", "valid" or pair of pairs, default 0
        Zeros added on each side (pairs of pairs: ``((top, bottom), (left, right))``); "same"
        (stride 1 only) keeps H and W, as PyTorch (``dilation * (K - 1)`` zeros per axis, the
        odd one at the end).
    dilation : int or pair of int, default 1
        The spacing of the kernel's taps.
    groups : int, default 1
        Splits the channels into independent convolutions.

    Returns
    -------
    Array
        (N, O, H', W').
    """
    return _conv(x, w, b, stride, padding, dilation, groups, 2)


def _pool(x: Any, kernel: Any, stride: Any, padding: Any, how: str) -> Any:
    kernel = _pair(kernel, 2)
    stride = _pair(kernel if stride is None else stride, 2)
    padding = tuple((p, p) for p in _pair(padding, 2))
    return _row(_ns(x), f"_{how}_pool2d")(x, kernel=kernel, stride=stride, padding=padding)


def max_pool2d(x: Array, kernel: Any, stride: Any = None, padding: Any = 0) -> Array:
    """Max over windows of the last two axes of (..., H, W).

    The gradient of a window goes to its first maximum in row-major order, as PyTorch's.

    Parameters
    ----------
    x : Array
        The input, (..., H, W).
    kernel : int or pair of int
        The window.
    stride : int or pair of int, optional
        The step between windows (None: the kernel size).
    padding : int or pair of int, default 0
        Padding on each side (it never wins the max).

    Returns
    -------
    Array
        (..., H', W').
    """
    return _pool(x, kernel, stride, padding, "max")


def avg_pool2d(x: Array, kernel: Any, stride: Any = None, padding: Any = 0) -> Array:
    """Mean over windows of the last two axes (zero padding counts, as PyTorch's default).

    Parameters
    ----------
    x : Array
        The input, (..., H, W).
    kernel : int or pair of int
        The window.
    stride : int or pair of int, optional
        The step between windows (None: the kernel size).
    padding : int or pair of int, default 0
        Zeros added on each side.

    Returns
    -------
    Array
        (..., H', W').
    """
    return _pool(x, kernel, stride, padding, "avg")


# -- initializers -------------------------------------------------------------------------------
def _fans(shape: tuple[int, ...]) -> tuple[int, int]:
    if len(shape) == 2:  # linear (in, out)
        return shape[0], shape[1]
    receptive = math.prod(shape[2:])  # conv (O, C, *K)
    return shape[1] * receptive, shape[0] * receptive


def normal(
    key: random.Key, shape: tuple[int, ...], std: float = 1.0, *, xp: Any = None, dtype: Any = None
) -> Array:
    """Normal samples with mean 0 and standard deviation ``std``.

    Parameters
    ----------
    key : pycograd_xp.random.Key
        The randomness.
    shape : tuple of int
        The array's shape: (in, out) for a ``linear`` weight, (O, C, K...) for a kernel.
    std : float, default 1.0
        The standard deviation.
    xp : namespace, optional
        The namespace to create the array in (None: ``namespace(numpy)``).
    dtype : dtype, optional
        A real floating dtype (None: float64).

    Returns
    -------
    Array
        Of ``shape``.
    """
    return random.normal(key, shape, xp=xp, dtype=dtype, std=std)


def uniform(
    key: random.Key,
    shape: tuple[int, ...],
    low: float = -1.0,
    high: float = 1.0,
    *,
    xp: Any = None,
    dtype: Any = None,
) -> Array:
    """Uniform samples in ``[low, high)``.

    Parameters
    ----------
    key : pycograd_xp.random.Key
        The randomness.
    shape : tuple of int
        The array's shape: (in, out) for a ``linear`` weight, (O, C, K...) for a kernel.
    low : float, default -1.0
        The lower bound.
    high : float, default 1.0
        The upper bound.
    xp : namespace, optional
        The namespace to create the array in (None: ``namespace(numpy)``).
    dtype : dtype, optional
        A real floating dtype (None: float64).

    Returns
    -------
    Array
        Of ``shape``.
    """
    return random.uniform(key, shape, xp=xp, dtype=dtype, minval=low, maxval=high)


def glorot_uniform(
    key: random.Key, shape: tuple[int, ...], *, xp: Any = None, dtype: Any = None
) -> Array:
    """Glorot (Xavier) uniform initialization: ``U(-a, a)``, ``a = sqrt(6 / (fan_in + fan_out))``.

    Fans: (in, out) for a 2-D shape (a ``linear`` weight); ``C * K`` and ``O * K`` for a
    kernel (O, C, *K), K the product of its window's sizes.

    Parameters
    ----------
    key : pycograd_xp.random.Key
        The randomness.
    shape : tuple of int
        The array's shape: (in, out) for a ``linear`` weight, (O, C, K...) for a kernel.
    xp : namespace, optional
        The namespace to create the array in (None: ``namespace(numpy)``).
    dtype : dtype, optional
        A real floating dtype (None: float64).

    Returns
    -------
    Array
        Of ``shape``.
    """
    fan_in, fan_out = _fans(shape)
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    return uniform(key, shape, -limit, limit, xp=xp, dtype=dtype)


def glorot_normal(
    key: random.Key, shape: tuple[int, ...], *, xp: Any = None, dtype: Any = None
) -> Array:
    """Glorot (Xavier) normal initialization: standard deviation ``sqrt(2 / (fan_in + fan_out))``.

    Fans: (in, out) for a 2-D shape (a ``linear`` weight); ``C * K`` and ``O * K`` for a
    kernel (O, C, *K), K the product of its window's sizes.

    Parameters
    ----------
    key : pycograd_xp.random.Key
        The randomness.
    shape : tuple of int
        The array's shape: (in, out) for a ``linear`` weight, (O, C, K...) for a kernel.
    xp : namespace, optional
        The namespace to create the array in (None: ``namespace(numpy)``).
    dtype : dtype, optional
        A real floating dtype (None: float64).

    Returns
    -------
    Array
        Of ``shape``.
    """
    fan_in, fan_out = _fans(shape)
    return normal(key, shape, math.sqrt(2.0 / (fan_in + fan_out)), xp=xp, dtype=dtype)


def he_uniform(
    key: random.Key, shape: tuple[int, ...], *, xp: Any = None, dtype: Any = None
) -> Array:
    """He (Kaiming) uniform initialization: ``U(-a, a)``, ``a = sqrt(6 / fan_in)``.

    Fans: (in, out) for a 2-D shape (a ``linear`` weight); ``C * K`` and ``O * K`` for a
    kernel (O, C, *K), K the product of its window's sizes.

    Parameters
    ----------
    key : pycograd_xp.random.Key
        The randomness.
    shape : tuple of int
        The array's shape: (in, out) for a ``linear`` weight, (O, C, K...) for a kernel.
    xp : namespace, optional
        The namespace to create the array in (None: ``namespace(numpy)``).
    dtype : dtype, optional
        A real floating dtype (None: float64).

    Returns
    -------
    Array
        Of ``shape``.
    """
    limit = math.sqrt(6.0 / _fans(shape)[0])
    return uniform(key, shape, -limit, limit, xp=xp, dtype=dtype)


def he_normal(
    key: random.Key, shape: tuple[int, ...], *, xp: Any = None, dtype: Any = None
) -> Array:
    """He (Kaiming) normal initialization: standard deviation ``sqrt(2 / fan_in)``.

    Fans: (in, out) for a 2-D shape (a ``linear`` weight); ``C * K`` and ``O * K`` for a
    kernel (O, C, *K), K the product of its window's sizes.

    Parameters
    ----------
    key : pycograd_xp.random.Key
        The randomness.
    shape : tuple of int
        The array's shape: (in, out) for a ``linear`` weight, (O, C, K...) for a kernel.
    xp : namespace, optional
        The namespace to create the array in (None: ``namespace(numpy)``).
    dtype : dtype, optional
        A real floating dtype (None: float64).

    Returns
    -------
    Array
        Of ``shape``.
    """
    return normal(key, shape, math.sqrt(2.0 / _fans(shape)[0]), xp=xp, dtype=dtype)


# -- modules ------------------------------------------------------------------------------------
class Module:
    """Base for small models as dataclasses: array fields are parameters (pytree leaves),
    nested modules nest, fields declared with ``static()`` (sizes, flags) are not leaves.
    ``grad`` and the optimizers take a module wherever they take a pytree.

    Subclasses are dataclasses (``@dataclasses.dataclass``); their fields are their
    parameters, as in :class:`Linear`."""

    def named_parameters(self) -> dict[str, Any]:
        """The parameters by dotted name, in tree order.

        Returns
        -------
        dict
            ``{"layer1.w": array, ...}``.
        """
        out: dict[str, Any] = {}

        def walk(obj: Any, prefix: str) -> None:
            if isinstance(obj, Module):
                for f in dataclasses.fields(obj):  # type: ignore[arg-type]  # subclasses are dataclasses
                    if not f.metadata.get("static"):
                        walk(getattr(obj, f.name), f"{prefix}{f.name}.")
            elif isinstance(obj, dict):
                for k, v in obj.items():
                    walk(v, f"{prefix}{k}.")
            elif isinstance(obj, list | tuple):
                for i, v in enumerate(obj):
                    walk(v, f"{prefix}{i}.")
            elif obj is not None:
                out[prefix[:-1]] = obj

        walk(self, "")
        return out

    def num_parameters(self) -> int:
        """The number of scalar parameters (the sizes of all leaves).

        Returns
        -------
        int
            The total.
        """
        return sum(math.prod(p.shape) for p in tree_flatten(self)[0])


def static(default: Any = dataclasses.MISSING) -> Any:
    """A dataclass field of a :class:`Module` that is configuration, not a parameter.

    Its value (a size, a flag, an activation function) is part of the module's tree structure,
    not one of its leaves: ``grad`` gives it no gradient and optimizers leave it alone.

    Parameters
    ----------
    default : optional
        The field's default value (none: the field must be given).

    Returns
    -------
    dataclasses.Field
        The field, for a dataclass attribute: ``heads: int = nn.static(4)``.

    Examples
    --------
    >>> import dataclasses
    >>> import numpy as np
    >>> import pycograd_xp as pg
    >>> from pycograd_xp import nn
    >>> @dataclasses.dataclass
    ... class Scale(nn.Module):
    ...     w: object
    ...     power: int = nn.static(2)
    ...     def __call__(self, x):
    ...         return self.w * x**self.power
    >>> xp = pg.namespace(np)
    >>> m = Scale(xp.asarray(3.0))
    >>> g = pg.grad(lambda m: m(xp.asarray(2.0)))(m)
    >>> float(g.w), g.power
    (4.0, 2)
    """
    return dataclasses.field(default=default, metadata={"static": True})


@dataclasses.dataclass
class Linear(Module):
    """A linear layer ``x @ w + b`` as a :class:`Module` (a dataclass and a pytree).

    Parameters
    ----------
    w : Array
        The weight, (in, out).
    b : Array, optional
        The bias, (out,).

    Examples
    --------
    >>> import numpy, pycograd_xp as pg
    >>> from pycograd_xp import nn, random
    >>> layer = nn.Linear.init(random.key(0), 3, 2, xp=pg.namespace(numpy))
    >>> layer.w.shape, layer.num_parameters()
    ((3, 2), 8)
    """

    w: Any
    b: Any = None

    @classmethod
    def init(
        cls,
        key: random.Key,
        n_in: int,
        n_out: int,
        *,
        xp: Any = None,
        dtype: Any = None,
        bias: bool = True,
    ) -> Linear:
        """A layer with Glorot-uniform weights and zero bias.

        Parameters
        ----------
        key : pycograd_xp.random.Key
            The randomness.
        n_in : int
            The input features.
        n_out : int
            The output features.
        xp : namespace, optional
            The namespace (None: ``namespace(numpy)``).
        dtype : dtype, optional
            A real floating dtype (None: float64).
        bias : bool, default True
            Whether the layer has a bias.

        Returns
        -------
        Linear
            The layer.
        """
        w = glorot_uniform(key, (n_in, n_out), xp=xp, dtype=dtype)
        b = _ns(w).zeros((n_out,), dtype=w.dtype) if bias else None
        return cls(w, b)

    def __call__(self, x: Any) -> Any:
        return linear(x, self.w, self.b)
