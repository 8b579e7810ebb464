"""The nn rows' GPU paths (Backend.device, CuPy's): whole arrays where the CPU goes block by
block, one batched product where it loops over examples. CI has no GPU, so these run on NumPy
with the backend taken for a GPU: the same values and gradients as the CPU paths, and a
projection that holds over what the GPU path allocates (the projection follows it)."""

from __future__ import annotations

import array_api_compat.numpy as npx
import numpy as np
import pytest

import pycograd_xp as pg
from pycograd_xp import memory, nn
from pycograd_xp.ops.nn import conv, pieces


@pytest.fixture
def as_gpu(monkeypatch):
    def take_it_for_a_gpu():
        monkeypatch.setattr(pieces, "on_device", lambda bk: True)
        monkeypatch.setattr(conv, "on_device", lambda bk: True)

    return take_it_for_a_gpu


def _block(xp, rng):
    d, heads = 32, 4
    p = {k: xp.asarray(rng.standard_normal((d, d)) / 6) for k in ("wq", "wk", "wv", "wo")}
    p["w1"] = xp.asarray(rng.standard_normal((d, 4 * d)) / 6)
    p["w2"] = xp.asarray(rng.standard_normal((4 * d, d)) / 12)
    p["g"] = xp.asarray(1 + rng.standard_normal(d) / 10)
    x = xp.asarray(rng.standard_normal((4, 256, d)))  # 256 KiB a layer: blocks on the CPU
    labels = xp.asarray(rng.integers(0, d, (4, 256)))

    def loss(p, x, labels):
        h = x + nn.multi_head_attention(nn.layer_norm(x, p["g"]), p, heads, causal=True)
        h = h + nn.gelu(nn.rms_norm(h, p["g"]) @ p["w1"]) @ p["w2"]
        return nn.cross_entropy(h, labels)

    return loss, (p, x, labels)


def _cnn(xp, rng):
    # conv2: O * Q = 16 * 72 > P = 121 >= O: the CPU's weight gradient goes example by example
    p = {
        "c1": xp.asarray(rng.standard_normal((8, 1, 3, 3)) / 3),
        "c2": xp.asarray(rng.standard_normal((16, 8, 3, 3)) / 8),
        "w": xp.asarray(rng.standard_normal((16 * 5 * 5, 10)) / 20),
    }
    x = xp.asarray(rng.standard_normal((16, 1, 28, 28)))
    labels = xp.asarray(rng.integers(0, 10, 16))

    def loss(p, x, labels):
        h = nn.max_pool2d(nn.relu(nn.conv2d(x, p["c1"])), 2)
        h = nn.max_pool2d(nn.relu(nn.conv2d(h, p["c2"])), 2)
        return nn.cross_entropy(xp.reshape(h, (h.shape[0], -1)) @ p["w"], labels)

    return loss, (p, x, labels)


@pytest.mark.parametrize("model", [_block, _cnn])
def test_gpu_paths_give_the_cpu_paths_values_and_a_bound_that_holds(as_gpu, model):
    xp = pg.namespace(np)
    loss, args = model(xp, np.random.default_rng(0))
    step = pg.value_and_grad(loss)
    v_cpu, g_cpu = step(*args)
    as_gpu()
    v_gpu, g_gpu = step(*args)
    np.testing.assert_allclose(float(v_gpu), float(v_cpu), rtol=1e-12)
    for a, b in zip(pg.tree_leaves(g_gpu), pg.tree_leaves(g_cpu), strict=True):
        np.testing.assert_allclose(pg.unwrap(a), pg.unwrap(b), rtol=1e-9, atol=1e-12)
    projected, measured = memory.project(loss, *args), memory.measure(loss, *args)
    assert measured.peak_bytes <= projected.traced_peak_bytes


def test_the_gpu_paths_are_taken(as_gpu, monkeypatch):
    """On the CPU the block's rows split a 256 KiB layer into blocks and conv2's weight gradient
    loops over the examples; taken for a GPU, neither happens."""
    xp = pg.namespace(np)
    rng = np.random.default_rng(1)
    seen = {"per example": 0}
    real = conv._weight_grad_per_example

    def counted(*a, **k):
        seen["per example"] += 1
        return real(*a, **k)

    monkeypatch.setattr(conv, "_weight_grad_per_example", counted)
    loss, args = _cnn(xp, rng)
    pg.grad(loss)(*args)
    assert seen["per example"] == 1
    assert pieces.in_place(npx)  # block by block on the CPU
    as_gpu()
    pg.grad(loss)(*args)
    assert seen["per example"] == 1  # not again
    assert not pieces.in_place(npx)  # whole arrays
