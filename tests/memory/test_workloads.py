"""Projected against measured memory on whole workloads (NumPy, tracemalloc).

On every workload the measured peak of the gradient step, and of the function alone, must not
exceed the projection, and the projection must be tight: measured / projected >= 0.8.
"""

from __future__ import annotations

import numpy as np
import pytest

import pycograd_xp as pg
from pycograd_xp import memory, nn

XP = pg.namespace(np)
RNG = np.random.default_rng(0)


def _a(*shape, scale=1.0, dtype="float64"):
    return XP.asarray((RNG.standard_normal(shape) * scale).astype(dtype))


def deep_mlp():
    sizes = [256] * 9 + [10]
    params = [
        (_a(m, n, scale=m**-0.5), _a(n, scale=0.1))
        for m, n in zip(sizes[:-1], sizes[1:], strict=True)
    ]

    def loss(params, x, y):
        h = x
        for W, b in params[:-1]:
            h = XP.tanh(h @ W + b)
        W, b = params[-1]
        return XP.mean((h @ W + b - y) ** 2)

    return loss, (params, _a(512, 256), _a(512, 10))


def wide_mlp():
    params = [
        (_a(784, 2048, scale=0.03), _a(2048, scale=0.1)),
        (_a(2048, 10, scale=0.03), _a(10, scale=0.1)),
    ]

    def loss(params, x, labels):
        (W1, b1), (W2, b2) = params
        return nn.cross_entropy(nn.relu(x @ W1 + b1) @ W2 + b2, labels)

    return loss, (params, _a(256, 784), XP.asarray(RNG.integers(0, 10, 256)))


def transformer_block():
    d, heads, seq, batch = 128, 4, 64, 8
    p = {
        "wq": _a(d, d, scale=d**-0.5),
        "wk": _a(d, d, scale=d**-0.5),
        "wv": _a(d, d, scale=d**-0.5),
        "wo": _a(d, d, scale=d**-0.5),
        "w1": _a(d, 4 * d, scale=d**-0.5),
        "w2": _a(4 * d, d, scale=(4 * d) ** -0.5),
        "g1": XP.ones(d),
        "g2": XP.ones(d),
    }

    def loss(p, x):
        h = x + nn.multi_head_attention(nn.layer_norm(x, p["g1"]), p, heads)
        h = h + nn.gelu(nn.layer_norm(h, p["g2"]) @ p["w1"]) @ p["w2"]
        return XP.mean(h * h)

    return loss, (p, _a(batch, seq, d))


def conv_net():
    p = {
        "c1": _a(8, 1, 3, 3, scale=0.3),
        "b1": _a(8, scale=0.1),
        "c2": _a(16, 8, 3, 3, scale=0.1),
        "b2": _a(16, scale=0.1),
        "w": _a(16 * 5 * 5, 10, scale=0.05),
    }

    def loss(p, x, labels):
        h = nn.max_pool2d(nn.relu(nn.conv2d(x, p["c1"], p["b1"])), 2)
        h = nn.max_pool2d(nn.relu(nn.conv2d(h, p["c2"], p["b2"])), 2)
        logits = XP.reshape(h, (h.shape[0], -1)) @ p["w"]
        return nn.cross_entropy(logits, labels)

    return loss, (p, _a(32, 1, 28, 28), XP.asarray(RNG.integers(0, 10, 32)))


def linalg_heavy():
    n = 200

    def loss(a, b):
        spd = a @ XP.matrix_transpose(a) + n * XP.eye(n)
        L = XP.linalg.cholesky(spd)
        x = XP.linalg.solve(spd, b)
        w, V = XP.linalg.eigh(spd)
        return (
            XP.sum(x * x)
            + XP.sum(XP.log(XP.linalg.diagonal(L)))
            + XP.sum(w)
            + XP.sum(V[:, -1] ** 2)
        )

    return loss, (_a(n, n, scale=n**-0.5), _a(n, 16))


def broadcasting_heavy():
    def loss(x, row, col, scale):
        z = (x - row) * col + scale  # (512, 1, 256) - (256,) * (1, 64, 1) + ()
        return XP.mean(XP.exp(-z * z) * row)

    return loss, (_a(512, 1, 256), _a(256), _a(1, 64, 1), _a())


def with_setitem():
    def loss(x, v):
        y = x * 2.0
        y[:, 0:128] = XP.sin(v)
        y[XP.asarray([0, 3, 3, 7])] = y[1:5, :] * 3.0
        y += 1.0
        return XP.sum(XP.tanh(y) ** 2)

    return loss, (_a(1024, 256), _a(1024, 128))


WORKLOADS = {
    "deep_mlp": deep_mlp,
    "wide_mlp": wide_mlp,
    "transformer": transformer_block,
    "conv_net": conv_net,
    "linalg": linalg_heavy,
    "broadcasting": broadcasting_heavy,
    "setitem": with_setitem,
}


@pytest.mark.parametrize("which", list(WORKLOADS))
def test_projection_bounds_measurement_tightly(which):
    loss, args = WORKLOADS[which]()
    p = memory.project(loss, *args)
    m = memory.measure(loss, *args)
    # tracemalloc's scale: the projection without what LAPACK and pocketfft allocate natively
    step, fwd = p.traced_peak_bytes, p.traced_forward_peak_bytes
    assert m.peak_bytes <= step <= p.peak_bytes, (which, m.peak_bytes, step)
    assert m.forward_peak_bytes <= fwd <= p.forward_peak_bytes, (which, m, fwd)
    assert m.peak_bytes / step >= 0.8, (which, m.peak_bytes / step)
    assert m.forward_peak_bytes / fwd >= 0.8, (which, m.forward_peak_bytes / fwd)


def _small_cnn(batch):
    """Issue 35's small CNN, float32: (batch, 1, 28, 28), conv 8 - relu - max-pool 2, conv 16 -
    relu - max-pool 2, linear 10, cross-entropy; its loss, arguments and the layers' outputs."""
    rng = np.random.default_rng(1)

    def a(*shape, scale=1.0):
        return XP.asarray((rng.standard_normal(shape) * scale).astype("float32"))

    p = {
        "c1": a(8, 1, 3, 3, scale=0.3),
        "b1": a(8, scale=0.1),
        "c2": a(16, 8, 3, 3, scale=0.1),
        "b2": a(16, scale=0.1),
        "w": a(16 * 5 * 5, 10, scale=0.05),
    }

    def layers(p, x):
        z1 = nn.conv2d(x, p["c1"], p["b1"])
        a1 = nn.relu(z1)
        m1 = nn.max_pool2d(a1, 2)
        z2 = nn.conv2d(m1, p["c2"], p["b2"])
        a2 = nn.relu(z2)
        m2 = nn.max_pool2d(a2, 2)
        return [z1, a1, m1, z2, a2, m2, XP.reshape(m2, (m2.shape[0], -1)) @ p["w"]]

    def loss(p, x, labels):  # as layers, holding no output beyond its use
        h = nn.max_pool2d(nn.relu(nn.conv2d(x, p["c1"], p["b1"])), 2)
        h = nn.max_pool2d(nn.relu(nn.conv2d(h, p["c2"], p["b2"])), 2)
        return nn.cross_entropy(XP.reshape(h, (h.shape[0], -1)) @ p["w"], labels)

    args = (p, a(batch, 1, 28, 28), XP.asarray(rng.integers(0, 10, batch)))
    return loss, args, layers


@pytest.mark.parametrize("batch", [64, 128])
def test_small_cnn_step_peak_below_its_parameters_and_activations(batch):
    """Issue 35: the small CNN's step (tracemalloc) peaks below 0.95 x the bytes of its
    arguments (parameters, input, labels) and of every layer's output, the scale of PyTorch's
    own step (0.99 x at batch 64 by its allocation events; ours was 1.08 x before the
    convolution's and pooling's backward kept their temporaries to blocks). The projection
    still bounds it."""
    loss, args, layers = _small_cnn(batch)
    with pg.no_grad():
        outputs = layers(args[0], args[1])
    scale = sum(int(pg.unwrap(t).nbytes) for t in [*pg.tree_leaves(args), *outputs])
    measured = memory.measure(loss, *args).peak_bytes
    assert measured <= 0.95 * scale, (batch, measured, scale, measured / scale)
    assert measured <= memory.project(loss, *args).traced_peak_bytes
