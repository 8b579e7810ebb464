"""Random configurations of the nn rows (:mod:`pycograd_xp.nn`) for the checks of
``test_nn_cases.py``: each row's hyperparameters across their ranges (strides, paddings,
dilations and groups; pooling windows; normalised axes and parameter shapes, those of the
input's whole shape and of one axis included; attention masks, causality, scales and contexts;
losses' reductions, ignored labels, smoothing and probability targets), at sizes small enough
for central differences.

``generate(rng)`` returns a :class:`Case`: the arguments (NumPy float64), which of them are
differentiable, the row as a function of them (on any namespace: constants are made with the
arguments' own), and the same function composed in JAX (``jax_fn``, for the optional oracle;
JAX is imported only when it is called). ``scale`` multiplies the sizes above 4 (the memory
checks want arrays larger than Python's own allocations).

Written after a randomized JAX oracle found what the fixed cases of the row tests did not:
layer norm's bias gradient for a bias of the output's size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pycograd_xp import nn


@dataclass
class Case:
    name: str
    args: list[np.ndarray]
    diff: list[int]  # the positions of the differentiable arguments
    fn: Callable[..., Any]  # the row, on the arguments as arrays of any namespace
    jax_fn: Callable[..., Any]  # the same in JAX, on jax.numpy arrays

    def __post_init__(self) -> None:
        self.args = [np.asarray(a) for a in self.args]  # 0-d arrays, not NumPy scalars

    def __str__(self) -> str:
        return f"{self.name} on " + ", ".join(f"{a.dtype}{a.shape}" for a in self.args)


def _jax() -> tuple[Any, Any, Any]:
    import jax
    import jax.numpy as jnp
    from jax import lax

    return jax, jnp, lax


def _ns(x: Any) -> Any:
    return x.__array_namespace__()


class _Draw:
    """The random choices of one case."""

    def __init__(self, rng: np.random.Generator, scale: int) -> None:
        self.rng, self.scale = rng, scale

    def int(self, lo: int, hi: int) -> int:
        """An integer in [lo, hi]; hi scaled where it is a size above 4."""
        return int(self.rng.integers(lo, (hi if hi <= 4 else hi * self.scale) + 1))

    def pick(self, options: list) -> Any:
        return options[int(self.rng.integers(len(options)))]

    def coin(self, p: float = 0.5) -> bool:
        return bool(self.rng.random() < p)

    def normal(self, *shape: int) -> np.ndarray:
        return self.rng.standard_normal(shape)

    def shape(self, lo_ndim: int, hi_ndim: int, hi: int = 4) -> tuple[int, ...]:
        return tuple(self.int(1, hi) for _ in range(self.int(lo_ndim, hi_ndim)))


def _pair(v: Any) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else tuple(v)


# -- convolutions and pooling -----------------------------------------------------------------


def _conv(d: _Draw, spatial: int) -> Case:
    groups, cin, cout, n = d.int(1, 3), d.int(1, 2), d.int(1, 2), d.int(1, 2)
    kernel = tuple(d.int(1, 3) for _ in range(spatial))
    if spatial == 2:
        stride = d.pick([1, 2, (1, 2), (2, 1)])
        padding = d.pick([0, 1, (1, 0), (0, 2)])
        dilation = d.pick([1, 2, (2, 1)])
        s, p, dl = _pair(stride), _pair(padding), _pair(dilation)
    else:
        stride, padding, dilation = d.int(1, 2), d.int(0, 2), d.int(1, 2)
        s, p, dl = (stride,), (padding,), (dilation,)
    # at least one output position along each axis
    sizes = [max(d.int(2, 7), dl[i] * (kernel[i] - 1) + 1 - 2 * p[i]) for i in range(spatial)]
    bias = d.coin()
    args = [d.normal(n, groups * cin, *sizes), d.normal(groups * cout, cin, *kernel)]
    args += [d.normal(groups * cout)] if bias else []
    conv = nn.conv2d if spatial == 2 else nn.conv1d

    def fn(x, w, b=None):
        return conv(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups)

    def jax_fn(x, w, b=None):
        _, _, lax = _jax()
        pads = [(q, q) for q in p]
        y = lax.conv_general_dilated(x, w, s, pads, rhs_dilation=dl, feature_group_count=groups)
        return y if b is None else y + b.reshape((-1,) + (1,) * spatial)

    name = f"conv{spatial}d groups={groups} kernel={kernel} stride={stride} padding={padding} "
    name += f"dilation={dilation} bias={bias}"
    return Case(name, args, list(range(len(args))), fn, jax_fn)


def _pool(d: _Draw, kind: str) -> Case:
    kernel = d.pick([1, 2, 3, (2, 3), (3, 2)])
    k = _pair(kernel)
    stride = d.pick([None, 1, 2, (1, 2)])
    s = k if stride is None else _pair(stride)
    padding = tuple(min(q, kk // 2) for q, kk in zip(_pair(d.pick([0, 1, (1, 0)])), k, strict=True))
    lead = d.pick([(), (2,), (1, 2)])
    args = [d.normal(*lead, d.int(k[0], 7), d.int(k[1], 7))]
    window, steps = (1,) * len(lead) + k, (1,) * len(lead) + s
    pads = [(0, 0)] * len(lead) + [(q, q) for q in padding]
    pool = nn.max_pool2d if kind == "max" else nn.avg_pool2d

    def fn(x):
        return pool(x, kernel, stride, padding)

    def jax_fn(x):
        _, jnp, lax = _jax()
        if kind == "max":  # padding never wins
            return lax.reduce_window(x, -jnp.inf, lax.max, window, steps, pads)
        return lax.reduce_window(x, 0.0, lax.add, window, steps, pads) / (k[0] * k[1])

    name = f"{kind}_pool2d kernel={kernel} stride={stride} padding={padding}"
    return Case(name, args, [0], fn, jax_fn)


# -- normalisations ---------------------------------------------------------------------------


def _input_weight_bias(args: tuple, has_w: bool, has_b: bool) -> tuple[Any, Any, Any]:
    """A normalisation's arguments as (input, weight or None, bias or None)."""
    rest = list(args[1:])
    w = rest.pop(0) if has_w else None
    return args[0], w, rest.pop(0) if has_b else None


def _layer_norm(d: _Draw) -> Case:
    shape = d.shape(1, 4, hi=5)
    nd = len(shape)
    if d.coin():
        axis, axes = -1, (nd - 1,)
    else:
        axes = tuple(sorted(d.rng.choice(nd, d.int(1, nd), replace=False).tolist()))
        axis = axes
    # the parameters: the normalised axes' sizes in place (ones elsewhere), or only those axes
    # where they trail; the input's whole shape when every axis is normalised
    pshape = tuple(shape[i] if i in axes else 1 for i in range(nd))
    if axes == tuple(range(nd - len(axes), nd)) and d.coin():
        pshape = tuple(shape[i] for i in axes)
    eps = d.pick([1e-5, 0.1])
    has_w, has_b = d.coin(0.7), d.coin()
    args = [d.normal(*shape)]
    args += [d.normal(*pshape)] if has_w else []
    args += [d.normal(*pshape)] if has_b else []

    def fn(*a):
        x, w, b = _input_weight_bias(a, has_w, has_b)
        return nn.layer_norm(x, w, b, eps=eps, axis=axis)

    def jax_fn(*a):
        _, jnp, _ = _jax()
        x, w, b = _input_weight_bias(a, has_w, has_b)
        m = x.mean(axes, keepdims=True)
        y = (x - m) / jnp.sqrt(((x - m) ** 2).mean(axes, keepdims=True) + eps)
        y = y if w is None else y * w
        return y if b is None else y + b

    name = f"layer_norm axis={axis} params={pshape} weight={has_w} bias={has_b} eps={eps}"
    return Case(name, args, list(range(len(args))), fn, jax_fn)


def _rms_norm(d: _Draw) -> Case:
    shape = d.shape(1, 3, hi=5)
    nd = len(shape)
    axis = d.int(-nd, nd - 1)
    a = axis % nd
    wshape = (shape[a],) if a == nd - 1 else tuple(shape[i] if i == a else 1 for i in range(nd))
    has_w, eps = d.coin(0.7), d.pick([1e-6, 0.1])
    args = [d.normal(*shape)] + ([d.normal(*wshape)] if has_w else [])

    def fn(x, w=None):
        return nn.rms_norm(x, w, eps=eps, axis=axis)

    def jax_fn(x, w=None):
        _, jnp, _ = _jax()
        y = x / jnp.sqrt((x * x).mean(axis, keepdims=True) + eps)
        return y if w is None else y * w

    name = f"rms_norm axis={axis} weight={wshape if has_w else None} eps={eps}"
    return Case(name, args, list(range(len(args))), fn, jax_fn)


def _batch_norm(d: _Draw) -> Case:
    shape = tuple(d.int(2, 4) for _ in range(d.int(2, 4)))
    nd = len(shape)
    axis = d.int(0, nd - 1)
    c = shape[axis]
    has_w, has_b = d.coin(0.7), d.coin()
    args = [d.normal(*shape)]
    args += [d.normal(c)] if has_w else []
    args += [d.normal(c)] if has_b else []
    reduced = tuple(i for i in range(nd) if i != axis)

    def fn(*a):
        x, w, b = _input_weight_bias(a, has_w, has_b)
        xp = _ns(x)
        state = {"mean": xp.zeros(c, dtype=x.dtype), "var": xp.ones(c, dtype=x.dtype)}
        return nn.batch_norm(x, state, w, b, training=True, axis=axis)[0]

    def jax_fn(*a):
        _, jnp, _ = _jax()
        x, w, b = _input_weight_bias(a, has_w, has_b)
        m = x.mean(reduced, keepdims=True)
        y = (x - m) / jnp.sqrt(((x - m) ** 2).mean(reduced, keepdims=True) + 1e-5)
        per = tuple(c if i == axis else 1 for i in range(nd))
        y = y if w is None else y * w.reshape(per)
        return y if b is None else y + b.reshape(per)

    name = f"batch_norm (training) axis={axis} weight={has_w} bias={has_b}"
    return Case(name, args, list(range(len(args))), fn, jax_fn)


# -- attention --------------------------------------------------------------------------------


def _attention(d: _Draw) -> Case:
    batch = d.shape(0, 2, hi=3)
    lq, lk, dk, dv = d.int(1, 5), d.int(1, 5), d.int(1, 4), d.int(1, 4)
    causal = d.coin(0.4)
    mask = "none" if causal else d.pick(["none", "bool", "float"])
    scale = None if d.coin(0.6) else float(d.rng.uniform(0.2, 2))
    mshape = tuple(1 if d.coin(0.4) else s for s in (*batch, lq, lk))
    args = [d.normal(*batch, lq, dk), d.normal(*batch, lk, dk), d.normal(*batch, lk, dv)]
    allowed = d.rng.random(mshape) < 0.7 if mask == "bool" else None
    if mask == "float":
        args.append(d.normal(*mshape))
    factor = 1 / np.sqrt(dk) if scale is None else scale

    def fn(q, k, v, m=None):
        if mask == "bool":
            m = _ns(q).asarray(allowed)
        return nn.scaled_dot_product_attention(q, k, v, m, is_causal=causal, scale=scale)

    def jax_fn(q, k, v, m=None):
        jax, jnp, _ = _jax()
        s = (q @ jnp.swapaxes(k, -1, -2)) * factor
        if mask == "bool":  # the dtype's lowest value: a fully masked row stays finite
            s = jnp.where(allowed, s, jnp.finfo(s.dtype).min)
        if mask == "float":
            s = s + m
        if causal:  # top-left aligned
            s = jnp.where(jnp.tril(jnp.ones((lq, lk), bool)), s, -jnp.inf)
        return jax.nn.softmax(s, -1) @ v

    name = f"scaled_dot_product_attention lq={lq} lk={lk} causal={causal} mask={mask}"
    name += f"{mshape if mask != 'none' else ''} scale={scale}"
    return Case(name, args, list(range(len(args))), fn, jax_fn)


def _multi_head(d: _Draw) -> Case:
    b, length, heads, head_dim = d.int(1, 2), d.int(1, 4), d.int(1, 2), d.int(1, 3)
    width = heads * head_dim
    causal, biases = d.coin(), d.coin()
    context = not causal and d.coin(0.3)
    lk = d.int(1, 4) if context else length
    names = ["wq", "wk", "wv", "wo"] + (["bq", "bk", "bv", "bo"] if biases else [])
    args = [d.normal(b, length, width)]
    args += [d.normal(width, width) / np.sqrt(width) for _ in range(4)]
    args += [d.normal(width) for _ in range(4)] if biases else []
    args += [d.normal(b, lk, width)] if context else []

    def split(a):
        *p, c = a if context else (*a, None)
        return dict(zip(names, p, strict=True)), c

    def fn(x, *a):
        params, c = split(a)
        return nn.multi_head_attention(x, params, heads, context=c, causal=causal)

    def jax_fn(x, *a):
        jax, jnp, _ = _jax()
        p, c = split(a)
        c = x if c is None else c

        def project(h, w, bias):
            y = h @ p[w] + (p[bias] if biases else 0)
            return y.reshape(y.shape[0], y.shape[1], heads, head_dim).transpose(0, 2, 1, 3)

        q, k, v = project(x, "wq", "bq"), project(c, "wk", "bk"), project(c, "wv", "bv")
        s = q @ jnp.swapaxes(k, -1, -2) / np.sqrt(head_dim)
        if causal:
            s = jnp.where(jnp.tril(jnp.ones((length, lk), bool)), s, -jnp.inf)
        o = (jax.nn.softmax(s, -1) @ v).transpose(0, 2, 1, 3).reshape(b, length, width)
        return o @ p["wo"] + (p["bo"] if biases else 0)

    name = f"multi_head_attention heads={heads}x{head_dim} lk={lk} causal={causal} "
    name += f"biases={biases} context={context}"
    return Case(name, args, list(range(len(args))), fn, jax_fn)


# -- losses -----------------------------------------------------------------------------------


def _cross_entropy(d: _Draw) -> Case:
    lead, classes = d.shape(1, 2), d.int(2, 5)
    reduction, smoothing = d.pick(["mean", "sum", "none"]), d.pick([0.0, 0.1])
    probabilities = d.coin(0.35)
    args = [d.normal(*lead, classes)]
    ignore = None
    if probabilities:
        p = d.rng.random((*lead, classes))
        args.append(p / p.sum(-1, keepdims=True))
    else:
        labels = d.rng.integers(0, classes, lead)
        if labels.size > 1 and d.coin(0.4):  # some rows ignored, never all (a mean of none:
            ignore = -100 if d.coin() else int(d.rng.integers(0, classes))  # NaN)
            flat = labels.reshape(-1)
            flat[int(d.rng.integers(flat.size))] = ignore
            if not (flat != ignore).any():
                flat[0] = 0 if ignore < 0 else (ignore + 1) % classes

    def fn(z, t=None):
        target = t if probabilities else _ns(z).asarray(labels)
        return nn.cross_entropy(
            z, target, reduction, ignore_index=ignore, label_smoothing=smoothing
        )

    def jax_fn(z, t=None):
        jax, jnp, _ = _jax()
        logp = jax.nn.log_softmax(z, -1)
        if probabilities:
            loss = -(((1 - smoothing) * t + smoothing / classes) * logp).sum(-1)
            kept = np.ones(lead)
        else:
            kept = labels != ignore if ignore is not None else np.ones(lead, bool)
            safe = np.where(kept, labels, 0)
            nll = -jnp.take_along_axis(logp, safe[..., None], -1)[..., 0]
            loss = ((1 - smoothing) * nll - smoothing * logp.mean(-1)) * kept
        if reduction == "mean":
            return loss.sum() / kept.sum()
        return loss.sum() if reduction == "sum" else loss

    name = f"cross_entropy reduction={reduction} smoothing={smoothing} "
    name += f"probabilities={probabilities} ignore_index={ignore}"
    return Case(name, args, list(range(len(args))), fn, jax_fn)


def _reduced(loss: Any, reduction: str) -> Any:
    if reduction == "mean":
        return loss.mean()
    return loss.sum() if reduction == "sum" else loss


def _binary_cross_entropy(d: _Draw) -> Case:
    shape, reduction = d.shape(1, 3), d.pick(["mean", "sum", "none"])
    args = [d.normal(*shape) * 2, d.rng.random(shape)]

    def jax_fn(z, t):
        _, jnp, _ = _jax()
        return _reduced(jnp.logaddexp(0, z) - t * z, reduction)

    return Case(
        f"binary_cross_entropy_with_logits reduction={reduction}",
        args,
        [0, 1],
        lambda z, t: nn.binary_cross_entropy_with_logits(z, t, reduction),
        jax_fn,
    )


def _mse(d: _Draw) -> Case:
    shape, reduction = d.shape(1, 3), d.pick(["mean", "sum", "none"])
    return Case(
        f"mse reduction={reduction}",
        [d.normal(*shape), d.normal(*shape)],
        [0, 1],
        lambda p, t: nn.mse(p, t, reduction),
        lambda p, t: _reduced((p - t) ** 2, reduction),
    )


# -- elementwise activations, softmax and friends, linear, embedding ----------------------------


def _activation(d: _Draw) -> Case:
    shape = d.shape(0, 3)
    x = d.normal(*shape) * 2
    nd = len(shape)
    kind = d.pick(
        ["elu", "leaky_relu", "gelu", "gelu_erf", "silu", "softplus", "sigmoid", "tanh", "relu"]
        + (["softmax", "log_softmax", "logsumexp"] if nd else [])
    )
    axis = d.int(-nd, nd - 1) if nd else None
    if kind == "elu":
        alpha = float(d.rng.uniform(0.2, 2))
        ours, jax_name, name = (lambda x: nn.elu(x, alpha)), ("elu", alpha), f"elu alpha={alpha}"
    elif kind == "leaky_relu":
        slope = float(d.rng.uniform(0.01, 0.5))
        ours, jax_name = (lambda x: nn.leaky_relu(x, slope)), ("leaky_relu", slope)
        name = f"leaky_relu slope={slope}"
    elif kind == "gelu":
        ours, jax_name, name = nn.gelu, ("gelu", True), "gelu (tanh)"
    elif kind == "gelu_erf":
        ours = lambda x: nn.gelu(x, approximate=False)
        jax_name, name = ("gelu", False), "gelu (erf)"
    elif kind in ("softmax", "log_softmax"):
        ours = lambda x: getattr(nn, kind)(x, axis=axis)
        jax_name, name = (kind, axis), f"{kind} axis={axis}"
    elif kind == "logsumexp":
        axes = d.pick([None, axis, tuple(sorted({axis % nd, 0}))])
        keep = d.coin()
        ours = lambda x: nn.logsumexp(x, axis=axes, keepdims=keep)
        jax_name, name = ("logsumexp", axes, keep), f"logsumexp axis={axes} keepdims={keep}"
    else:
        ours, jax_name, name = getattr(nn, kind), (kind,), kind

    def jax_fn(x):
        jax, jnp, _ = _jax()
        f, *extra = jax_name
        if f == "tanh":
            return jnp.tanh(x)
        if f == "gelu":
            return jax.nn.gelu(x, approximate=extra[0])
        if f == "logsumexp":
            return jax.nn.logsumexp(x, extra[0], keepdims=extra[1])
        return getattr(jax.nn, f)(x, *extra)

    return Case(name, [x], [0], ours, jax_fn)


def _linear(d: _Draw) -> Case:
    lead, n_in, n_out, bias = d.shape(0, 2, hi=3), d.int(1, 5), d.int(1, 5), d.coin()
    args = [d.normal(*lead, n_in), d.normal(n_in, n_out)] + ([d.normal(n_out)] if bias else [])
    return Case(
        f"linear {n_in}->{n_out} bias={bias}",
        args,
        list(range(len(args))),
        lambda x, w, b=None: nn.linear(x, w, b),
        lambda x, w, b=None: x @ w + (0 if b is None else b),
    )


def _embedding(d: _Draw) -> Case:
    rows, width = d.int(2, 6), d.int(1, 4)
    ids = d.rng.integers(0, rows, d.shape(1, 2))
    return Case(
        f"embedding ids{ids.shape}",
        [d.normal(rows, width)],
        [0],
        lambda table: nn.embedding(_ns(table).asarray(ids), table),
        lambda table: table[ids],
    )


ROWS: dict[str, Callable[[_Draw], Case]] = {
    "conv2d": lambda d: _conv(d, 2),
    "conv1d": lambda d: _conv(d, 1),
    "max_pool2d": lambda d: _pool(d, "max"),
    "avg_pool2d": lambda d: _pool(d, "avg"),
    "layer_norm": _layer_norm,
    "rms_norm": _rms_norm,
    "batch_norm": _batch_norm,
    "scaled_dot_product_attention": _attention,
    "multi_head_attention": _multi_head,
    "cross_entropy": _cross_entropy,
    "binary_cross_entropy_with_logits": _binary_cross_entropy,
    "mse": _mse,
    "activation": _activation,
    "linear": _linear,
    "embedding": _embedding,
}


def generate(rng: np.random.Generator, scale: int = 1) -> Case:
    """One case: a row drawn evenly, then its configuration."""
    return ROWS[list(ROWS)[int(rng.integers(len(ROWS)))]](_Draw(rng, scale))


def cases(seed: int, count: int, scale: int = 1) -> list[Case]:
    rng = np.random.default_rng(seed)
    return [generate(rng, scale) for _ in range(count)]
