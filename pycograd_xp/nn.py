"""Functional neural-network layers, numerically stable, written in Array API code.

Every function takes arrays of any pycograd_xp namespace (it finds the namespace from its
inputs), so it is differentiable and runs on every backend. Shapes follow PyTorch's
conventions: ``linear`` weights are (in, out); convolutions take (N, C, L) / (N, C, H, W)
inputs and (O, C, K...) kernels. Random layers (dropout, initializers) take an explicit
:class:`pycograd_xp.random.Key`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import array_api_compat

from . import random
from ._api import stop_gradient
from .tree import tree_flatten

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
    "tanh",
    "uniform",
]


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


# -- activations --------------------------------------------------------------------------------
def linear(x: Any, w: Any, b: Any = None) -> Any:
    """``x @ w + b`` with ``w`` of shape (in, out)."""
    y = x @ w
    return y if b is None else y + b


def relu(x: Any) -> Any:
    """``where(x > 0, x, 0)``: gradient 0 at 0, as in PyTorch; 0 at NaN. One row
    (``xp._relu``) whose VJP reads only its output, so the tape keeps no mask beside it; other
    dtypes than real floating point go through ``where``."""
    xp = _ns(x)
    if xp.isdtype(x.dtype, "real floating"):
        return _row(xp, "_relu")(x)
    return xp.where(x > 0, x, 0.0)


def leaky_relu(x: Any, negative_slope: float = 0.01) -> Any:
    return _ns(x).where(x > 0, x, negative_slope * x)


def elu(x: Any, alpha: float = 1.0) -> Any:
    xp = _ns(x)
    # expm1 of min(x, 0): the branch not taken never overflows, so its zero gradient stays 0
    return xp.where(x > 0, x, alpha * xp.expm1(xp.minimum(x, xp.zeros_like(x))))


def sigmoid(x: Any) -> Any:
    """``1 / (1 + exp(-x))`` as ``(tanh(x / 2) + 1) / 2``: stable for any x."""
    return 0.5 * (_ns(x).tanh(0.5 * x) + 1)


def tanh(x: Any) -> Any:
    return _ns(x).tanh(x)


def _floating(x: Any) -> bool:
    return _ns(x).isdtype(x.dtype, "real floating")


def silu(x: Any) -> Any:
    """SiLU (swish) ``x sigmoid(x)``: one row (``xp._silu``) whose VJP keeps only x."""
    if _floating(x):
        return _row(_ns(x), "_silu")(x)
    return x * sigmoid(x)


def softplus(x: Any) -> Any:
    """``log(1 + exp(x))``, stable (logaddexp): one row (``xp._softplus``) whose VJP keeps
    only x."""
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


def gelu(x: Any, approximate: bool = True) -> Any:
    """GELU: the tanh approximation (default), or ``x Phi(x)`` with the backend's erf (scipy's
    on NumPy). One row each (``xp._gelu_tanh``, ``xp._gelu``) whose VJP keeps only x; on a
    backend without erf (array-api-strict) the exact one is composed with an erf to 1.5e-7."""
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


def logsumexp(x: Any, axis: int | tuple[int, ...] | None = -1, keepdims: bool = False) -> Any:
    """``log(sum(exp(x), axis))``, stable: ``pycograd_xp.special.logsumexp``'s row
    (``xp._logsumexp``), with axis -1 by default."""
    return _row(_ns(x), "_logsumexp")(x, axis=axis, keepdims=keepdims)


def log_softmax(x: Any, axis: int = -1) -> Any:
    """``x - logsumexp(x, axis)``: ``pycograd_xp.special.log_softmax``'s row
    (``xp._log_softmax``), whose VJP keeps only its output."""
    return _row(_ns(x), "_log_softmax")(x, axis=axis)


def softmax(x: Any, axis: int = -1) -> Any:
    """``exp(x) / sum(exp(x), axis)``, the maximum shifted out: ``pycograd_xp.special.softmax``'s
    row (``xp._softmax``), whose VJP keeps only its output."""
    return _row(_ns(x), "_softmax")(x, axis=axis)


# -- losses -------------------------------------------------------------------------------------
def cross_entropy(logits: Any, labels: Any, reduction: str = "mean") -> Any:
    """Softmax cross-entropy over the last axis. ``labels``: integer class indices (shape
    ``logits.shape[:-1]``) or class probabilities / one-hot (shape ``logits.shape``). One row
    (``xp._cross_entropy``) whose VJP keeps the logits, the labels and each row's normaliser:
    never the log-probabilities or a one-hot."""
    return _reduce(
        _row(_ns(logits), "_cross_entropy")(logits, labels)[0], reduction, "cross_entropy"
    )


def binary_cross_entropy_with_logits(logits: Any, targets: Any, reduction: str = "mean") -> Any:
    """``-[y log sigmoid(x) + (1-y) log(1 - sigmoid(x))]`` as ``softplus(x) - x y`` (stable)."""
    return _reduce(
        softplus(logits) - logits * targets, reduction, "binary_cross_entropy_with_logits"
    )


def mse(pred: Any, target: Any, reduction: str = "mean") -> Any:
    d = pred - target
    return _reduce(d * d, reduction, "mse")


# -- normalization ------------------------------------------------------------------------------
def layer_norm(
    x: Any,
    weight: Any = None,
    bias: Any = None,
    eps: float = 1e-5,
    axis: int | tuple[int, ...] = -1,
) -> Any:
    """``(x - mean) / sqrt(var + eps) * weight + bias`` over ``axis``: one row
    (``xp._layer_norm``) whose VJP keeps the input, the weight and the per-row mean and
    ``1 / sqrt(var + eps)``."""
    return _row(_ns(x), "_layer_norm")(x, weight, bias, eps=eps, axis=axis)[0]


def rms_norm(x: Any, weight: Any = None, eps: float = 1e-6, axis: int = -1) -> Any:
    """``x / sqrt(mean(x^2) + eps) * weight`` over ``axis``: one row (``xp._rms_norm``) whose
    VJP keeps the input, the weight and the per-row ``1 / sqrt(mean(x^2) + eps)``."""
    return _row(_ns(x), "_rms_norm")(x, weight, eps=eps, axis=axis)[0]


def batch_norm(
    x: Any,
    state: dict[str, Any],
    weight: Any = None,
    bias: Any = None,
    *,
    training: bool,
    momentum: float = 0.1,
    eps: float = 1e-5,
    axis: int = 1,
) -> tuple[Any, dict[str, Any]]:
    """Batch normalization over every axis but ``axis`` (the channels). ``state`` holds the
    running ``mean`` and ``var`` (shape (C,)); returns ``(y, new_state)``. Training normalizes
    with the batch's statistics and updates the running ones (unbiased variance, as PyTorch);
    evaluation uses the running ones."""
    xp = _ns(x)
    axis = axis % x.ndim
    reduce = tuple(a for a in range(x.ndim) if a != axis)
    shape = tuple(x.shape[a] if a == axis else 1 for a in range(x.ndim))
    if training:
        mu = xp.mean(x, axis=reduce)
        var = xp.var(x, axis=reduce)
        n = math.prod(x.shape[a] for a in reduce)
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
def dropout(key: random.Key, x: Any, rate: float, training: bool = True) -> Any:
    """Zero each element with probability ``rate`` and scale the rest by ``1 / (1 - rate)``."""
    if not training or rate == 0.0:
        return x
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"dropout: rate must be in [0, 1), got {rate!r}")
    xp = _ns(x)
    keep = random.bernoulli(key, 1.0 - rate, tuple(x.shape), xp=xp)
    return xp.where(keep, x / (1.0 - rate), xp.zeros_like(x))


def embedding(ids: Any, table: Any) -> Any:
    """Rows of ``table`` (V, D) for integer ``ids`` of any shape: shape ``ids.shape + (D,)``."""
    xp = _ns(table)
    rows = xp.take(table, xp.reshape(ids, (-1,)), axis=0)
    return xp.reshape(rows, (*ids.shape, table.shape[1]))


# -- attention ----------------------------------------------------------------------------------
def scaled_dot_product_attention(
    q: Any,
    k: Any,
    v: Any,
    mask: Any = None,
    is_causal: bool = False,
    scale: float | None = None,
    *,
    causal: bool | None = None,
) -> Any:
    """``softmax(q k^T * scale) v`` over the last two axes (PyTorch's layout: q (..., Lq, d),
    k (..., Lk, d), v (..., Lk, dv)); ``scale`` 1 / sqrt(d) when None. ``mask``: booleans
    broadcastable to (..., Lq, Lk), True where attention is allowed; ``is_causal`` (or
    ``causal``) adds the lower-triangular mask (top-left aligned). Masked scores get the
    dtype's lowest value, so a fully masked row stays finite (the mean of v).

    One row (``xp._attention``), flash-style: blocks of queries (and keys) within
    ``ops.nn.ATTENTION_BLOCK_BYTES``, so no Lq x Lk array is made for the whole batch; the VJP
    keeps q, k, v, the output and each row's log-sum-exp, and recomputes the probabilities
    block by block."""
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
    x: Any,
    params: dict[str, Any],
    num_heads: int,
    mask: Any = None,
    context: Any = None,
    causal: bool = False,
) -> Any:
    """Multi-head attention of ``x`` (B, L, D) over ``context`` (default ``x``) with
    ``params`` ``wq, wk, wv, wo`` (D, D) and optional biases ``bq, bk, bv, bo``. ``mask``:
    booleans broadcastable to (B, heads, Lq, Lk). The heads stay beside the features
    ((B, L, heads, D / heads), a view of each projection) through the attention row, whose
    output reshapes back to (B, L, D) without a copy."""
    xp = _ns(x)
    context = x if context is None else context
    b, lq, d = x.shape
    lk = context.shape[1]
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


def _conv(
    x: Any, w: Any, b: Any, stride: Any, padding: Any, dilation: Any, groups: int, n: int
) -> Any:
    try:
        xp = _ns(x, w)
    except TypeError:  # vmap: arrays of two levels; the lower level's row hands the call up
        xp = _ns(x)
    args = (x, w) if b is None else (x, w, b)  # the bias added inside the row
    return _row(xp, f"_conv{n}d")(
        *args,
        stride=_pair(stride, n),
        dilation=_pair(dilation, n),
        padding=tuple((p, p) for p in _pair(padding, n)),
        groups=groups,
    )


def conv1d(
    x: Any,
    w: Any,
    b: Any = None,
    stride: int = 1,
    padding: int = 0,
    dilation: int = 1,
    groups: int = 1,
) -> Any:
    """1-D convolution (cross-correlation, as PyTorch): x (N, C, L), w (O, C / groups, K) ->
    (N, O, L'). Differentiable in ``x``, ``w`` and ``b``."""
    return _conv(x, w, b, stride, padding, dilation, groups, 1)


def conv2d(
    x: Any,
    w: Any,
    b: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Any:
    """2-D convolution: x (N, C, H, W), w (O, C / groups, KH, KW) -> (N, O, H', W').
    ``stride``, ``padding``, ``dilation``: an int or a pair; ``groups`` splits the channels
    into independent convolutions. Differentiable in ``x``, ``w`` and ``b``."""
    return _conv(x, w, b, stride, padding, dilation, groups, 2)


def _pool(x: Any, kernel: Any, stride: Any, padding: Any, how: str) -> Any:
    kernel = _pair(kernel, 2)
    stride = _pair(kernel if stride is None else stride, 2)
    padding = tuple((p, p) for p in _pair(padding, 2))
    return _row(_ns(x), f"_{how}_pool2d")(x, kernel=kernel, stride=stride, padding=padding)


def max_pool2d(x: Any, kernel: Any, stride: Any = None, padding: Any = 0) -> Any:
    """Max over windows of the last two axes of (..., H, W) (stride defaults to the kernel
    size; padding never wins). The gradient of a window goes to its first maximum in row-major
    order, as PyTorch's."""
    return _pool(x, kernel, stride, padding, "max")


def avg_pool2d(x: Any, kernel: Any, stride: Any = None, padding: Any = 0) -> Any:
    """Mean over windows (zero padding counts, as PyTorch's default)."""
    return _pool(x, kernel, stride, padding, "avg")


# -- initializers -------------------------------------------------------------------------------
def _fans(shape: tuple[int, ...]) -> tuple[int, int]:
    if len(shape) == 2:  # linear (in, out)
        return shape[0], shape[1]
    receptive = math.prod(shape[2:])  # conv (O, C, *K)
    return shape[1] * receptive, shape[0] * receptive


def normal(
    key: random.Key, shape: tuple[int, ...], std: float = 1.0, *, xp: Any = None, dtype: Any = None
) -> Any:
    return random.normal(key, shape, xp=xp, dtype=dtype, std=std)


def uniform(
    key: random.Key,
    shape: tuple[int, ...],
    low: float = -1.0,
    high: float = 1.0,
    *,
    xp: Any = None,
    dtype: Any = None,
) -> Any:
    return random.uniform(key, shape, xp=xp, dtype=dtype, minval=low, maxval=high)


def glorot_uniform(
    key: random.Key, shape: tuple[int, ...], *, xp: Any = None, dtype: Any = None
) -> Any:
    fan_in, fan_out = _fans(shape)
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    return uniform(key, shape, -limit, limit, xp=xp, dtype=dtype)


def glorot_normal(
    key: random.Key, shape: tuple[int, ...], *, xp: Any = None, dtype: Any = None
) -> Any:
    fan_in, fan_out = _fans(shape)
    return normal(key, shape, math.sqrt(2.0 / (fan_in + fan_out)), xp=xp, dtype=dtype)


def he_uniform(
    key: random.Key, shape: tuple[int, ...], *, xp: Any = None, dtype: Any = None
) -> Any:
    limit = math.sqrt(6.0 / _fans(shape)[0])
    return uniform(key, shape, -limit, limit, xp=xp, dtype=dtype)


def he_normal(key: random.Key, shape: tuple[int, ...], *, xp: Any = None, dtype: Any = None) -> Any:
    return normal(key, shape, math.sqrt(2.0 / _fans(shape)[0]), xp=xp, dtype=dtype)


# -- modules ------------------------------------------------------------------------------------
class Module:
    """Base for small models as dataclasses: array fields are parameters (pytree leaves),
    nested modules nest, fields declared with ``static()`` (sizes, flags) are not leaves.
    ``grad`` and the optimizers take a module wherever they take a pytree."""

    def named_parameters(self) -> dict[str, Any]:
        """``{"layer1.w": array, ...}`` in tree order."""
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
        return sum(math.prod(p.shape) for p in tree_flatten(self)[0])


def static(default: Any = dataclasses.MISSING) -> Any:
    """A dataclass field that is configuration, not a parameter."""
    return dataclasses.field(default=default, metadata={"static": True})


@dataclasses.dataclass
class Linear(Module):
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
        w = glorot_uniform(key, (n_in, n_out), xp=xp, dtype=dtype)
        b = _ns(w).zeros((n_out,), dtype=w.dtype) if bias else None
        return cls(w, b)

    def __call__(self, x: Any) -> Any:
        return linear(x, self.w, self.b)
