"""The composed layers that ``pycograd_xp.nn`` used before they became rows: convolution and
pooling (strided slices, a stack and a tensordot), and at the end the transformer layers
(normalisations, activations, softmax, cross-entropy, attention). All standard functions, so
their gradients come from the standard's rules. Kept as a reference: the rows are checked
against them (values, gradients), and ``benchmarks/bench_cnn.py`` and
``benchmarks/bench_transformer.py`` time them beside the rows."""

from __future__ import annotations

from typing import Any

import array_api_compat


def _ns(*xs: Any) -> Any:
    return array_api_compat.array_namespace(*xs)


def _pad(xp: Any, x: Any, axis: int, before: int, after: int, value: float = 0.0) -> Any:
    if not before and not after:
        return x
    parts = []
    for n in (before, None, after):
        if n is None:
            parts.append(x)
        elif n:
            shape = list(x.shape)
            shape[axis] = n
            parts.append(xp.full(tuple(shape), value, dtype=x.dtype))
    return xp.concat(parts, axis=axis)


def _pair(v: Any, n: int) -> tuple[int, ...]:
    return tuple(v) if isinstance(v, tuple | list) else (v,) * n


def _patches(
    x: Any, kernel: tuple[int, ...], stride: tuple[int, ...], dilation: tuple[int, ...]
) -> Any:
    """Sliding windows of the trailing ``len(kernel)`` axes of ``x`` (already padded):
    shape ``x.shape[:-n] + kernel + out_sizes``, built from strided slices (differentiable)."""
    xp = _ns(x)
    n = len(kernel)
    spatial = x.shape[-n:]
    out = [(spatial[i] - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1 for i in range(n)]
    if min(out) < 1:
        raise ValueError(
            f"convolution/pooling: kernel {kernel} (dilation {dilation}) is larger "
            f"than the padded input {tuple(spatial)}"
        )
    windows = []
    for offsets in _grid(kernel):
        idx = [slice(None)] * (x.ndim - n)
        for i, o in enumerate(offsets):
            start = o * dilation[i]
            idx.append(slice(start, start + stride[i] * (out[i] - 1) + 1, stride[i]))
        windows.append(x[tuple(idx)])
    stacked = xp.stack(windows, axis=x.ndim - n)  # (..., prod(kernel), *out)
    return xp.reshape(stacked, (*x.shape[:-n], *kernel, *out))


def _grid(kernel: tuple[int, ...]) -> list[tuple[int, ...]]:
    grid: list[tuple[int, ...]] = [()]
    for k in kernel:
        grid = [g + (i,) for g in grid for i in range(k)]
    return grid


def _conv(
    x: Any, w: Any, b: Any, stride: Any, padding: Any, dilation: Any, n: int, groups: int = 1
) -> Any:
    xp = _ns(x, w)
    if groups > 1:  # each group's channels against its filters, the groups' outputs joined
        c, o = x.shape[1] // groups, w.shape[0] // groups
        parts = [
            _conv(
                x[:, g * c : (g + 1) * c],
                w[g * o : (g + 1) * o],
                None,
                stride,
                padding,
                dilation,
                n,
            )
            for g in range(groups)
        ]
        y = xp.concat(parts, axis=1)
        return y if b is None else y + xp.reshape(b, (1, b.shape[0]) + (1,) * n)
    stride, padding, dilation = _pair(stride, n), _pair(padding, n), _pair(dilation, n)
    for i in range(n):
        x = _pad(xp, x, x.ndim - n + i, padding[i], padding[i])
    cols = _patches(x, tuple(w.shape[2:]), stride, dilation)  # (N, C, *K, *out)
    # contract channels and kernel offsets: (N, *out, O)
    y = xp.tensordot(cols, w, axes=(list(range(1, 2 + n)), list(range(1, 2 + n))))
    y = xp.permute_dims(y, (0, y.ndim - 1, *range(1, y.ndim - 1)))
    if b is not None:
        y = y + xp.reshape(b, (1, b.shape[0]) + (1,) * n)  # (no -1: b may have no element)
    return y


def conv1d(
    x: Any,
    w: Any,
    b: Any = None,
    stride: int = 1,
    padding: int = 0,
    dilation: int = 1,
    groups: int = 1,
) -> Any:
    """1-D convolution (cross-correlation, as PyTorch): x (N, C, L), w (O, C/groups, K) ->
    (N, O, L')."""
    return _conv(x, w, b, stride, padding, dilation, 1, groups)


def conv2d(
    x: Any,
    w: Any,
    b: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Any:
    """2-D convolution: x (N, C, H, W), w (O, C/groups, KH, KW) -> (N, O, H', W'). ``stride``,
    ``padding``, ``dilation``: an int or a pair; ``groups`` splits the channels and the
    filters into that many convolutions, side by side."""
    return _conv(x, w, b, stride, padding, dilation, 2, groups)


def _pool(x: Any, kernel: Any, stride: Any, padding: Any, how: str) -> Any:
    xp = _ns(x)
    kernel = _pair(kernel, 2)
    stride = _pair(kernel if stride is None else stride, 2)
    padding = _pair(padding, 2)
    fill = xp.finfo(x.dtype).min if how == "max" else 0.0
    for i in range(2):
        x = _pad(xp, x, x.ndim - 2 + i, padding[i], padding[i], fill)
    cols = _patches(x, kernel, stride, (1, 1))  # (N, C, KH, KW, H', W')
    reduce = xp.max if how == "max" else xp.mean
    return reduce(cols, axis=(2, 3))


def max_pool2d(x: Any, kernel: Any, stride: Any = None, padding: Any = 0) -> Any:
    """Max over windows of (N, C, H, W) (stride defaults to the kernel size)."""
    return _pool(x, kernel, stride, padding, "max")


def avg_pool2d(x: Any, kernel: Any, stride: Any = None, padding: Any = 0) -> Any:
    """Mean over windows (zero padding counts, as PyTorch's default)."""
    return _pool(x, kernel, stride, padding, "avg")


# -- the transformer layers as pycograd_xp.nn composed them before their fused rows (issue 20) --
# Standard functions only (their rules are the standard's): the fused rows of ops/nn/ and
# ops/special.py are checked against these (values in float64 and float32, gradients), and
# benchmarks/bench_transformer.py times them beside the rows.


def gelu(x: Any, approximate: bool = True) -> Any:
    """GELU: the tanh approximation, or ``x Phi(x)`` with ``erf`` (scipy's through
    pycograd_xp.special on a backend that has it)."""
    import math

    xp = _ns(x)
    if approximate:
        return 0.5 * x * (1 + xp.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)))
    from pycograd_xp import special

    return 0.5 * x * (1 + special.erf(x / math.sqrt(2.0)))


def sigmoid(x: Any) -> Any:
    return 0.5 * (_ns(x).tanh(0.5 * x) + 1)


def silu(x: Any) -> Any:
    return x * sigmoid(x)


def softplus(x: Any) -> Any:
    return _ns(x).logaddexp(_ns(x).zeros_like(x), x)


def logsumexp(x: Any, axis: Any = -1, keepdims: bool = False) -> Any:
    from pycograd_xp import stop_gradient

    xp = _ns(x)
    m = stop_gradient(xp.max(x, axis=axis, keepdims=True))  # the shift has no gradient
    out = xp.log(xp.sum(xp.exp(x - m), axis=axis, keepdims=True)) + m
    if keepdims:
        return out
    return xp.squeeze(out, axis=axis if axis is not None else tuple(range(x.ndim)))


def log_softmax(x: Any, axis: int = -1) -> Any:
    return x - logsumexp(x, axis=axis, keepdims=True)


def softmax(x: Any, axis: int = -1) -> Any:
    return _ns(x).exp(log_softmax(x, axis=axis))


def cross_entropy(logits: Any, labels: Any, reduction: str = "mean") -> Any:
    xp = _ns(logits)
    logp = log_softmax(logits, axis=-1)
    if xp.isdtype(labels.dtype, "integral"):
        if xp.isdtype(labels.dtype, "signed integer"):  # -1 is the last class
            labels = xp.where(labels < 0, labels + logits.shape[-1], labels)
        classes = xp.arange(logits.shape[-1], dtype=labels.dtype)
        labels = xp.astype(xp.expand_dims(labels, axis=-1) == classes, logp.dtype)
    loss = -xp.sum(labels * logp, axis=-1)
    return {"mean": xp.mean, "sum": xp.sum}.get(reduction, lambda a: a)(loss)


def layer_norm(
    x: Any, weight: Any = None, bias: Any = None, eps: float = 1e-5, axis: Any = -1
) -> Any:
    xp = _ns(x)
    mu = xp.mean(x, axis=axis, keepdims=True)
    var = xp.var(x, axis=axis, keepdims=True)
    y = (x - mu) / xp.sqrt(var + eps)
    if weight is not None:
        y = y * weight
    return y if bias is None else y + bias


def rms_norm(x: Any, weight: Any = None, eps: float = 1e-6, axis: int = -1) -> Any:
    xp = _ns(x)
    y = x / xp.sqrt(xp.mean(x * x, axis=axis, keepdims=True) + eps)
    return y if weight is None else y * weight


def scaled_dot_product_attention(
    q: Any, k: Any, v: Any, mask: Any = None, is_causal: bool = False, scale: Any = None
) -> Any:
    """``softmax(q k^T * scale) v`` over the last two axes, the whole score matrix at once;
    masked scores get the dtype's lowest value. The softmax divides by the sum of the shifted
    exponentials: a row masked whole averages the values (``softmax`` above, the composition
    pycograd_xp.nn had, gave their sum there: ``log(n)`` vanishes beside the lowest value in
    its log-sum-exp). A floating mask is added to the scores (-inf beside a causal mask); a
    row whose scores are all -inf gives NaN here (the fused row gives 0, as PyTorch)."""
    import math

    xp = _ns(q, k, v)
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = (q @ xp.matrix_transpose(k)) * scale
    if mask is not None and not xp.isdtype(mask.dtype, "bool"):
        scores = scores + mask
        if is_causal:
            lq, lk = q.shape[-2], k.shape[-2]
            tri = xp.astype(xp.tril(xp.ones((lq, lk), dtype=xp.int8)), xp.bool)
            scores = xp.where(tri, scores, -math.inf)
        mask, is_causal = None, False
    if is_causal:
        lq, lk = q.shape[-2], k.shape[-2]
        tri = xp.astype(xp.tril(xp.ones((lq, lk), dtype=xp.int8)), xp.bool)
        mask = tri if mask is None else xp.logical_and(mask, tri)
    if mask is not None:
        scores = xp.where(mask, scores, xp.finfo(scores.dtype).min)
    from pycograd_xp import stop_gradient

    e = xp.exp(scores - stop_gradient(xp.max(scores, axis=-1, keepdims=True)))
    return (e / xp.sum(e, axis=-1, keepdims=True)) @ v


def multi_head_attention(
    x: Any, params: dict[str, Any], num_heads: int, mask: Any = None, causal: bool = False
) -> Any:
    """Self-attention of ``x`` (B, L, D) with heads split by a permute (B, H, L, D / H)."""
    xp = _ns(x)
    b, length, d = x.shape
    hd = d // num_heads

    def heads(w: str) -> Any:
        t = x @ params[w]
        return xp.permute_dims(xp.reshape(t, (b, length, num_heads, hd)), (0, 2, 1, 3))

    out = scaled_dot_product_attention(heads("wq"), heads("wk"), heads("wv"), mask, causal)
    out = xp.reshape(xp.permute_dims(out, (0, 2, 1, 3)), (b, length, d))
    return out @ params["wo"]
