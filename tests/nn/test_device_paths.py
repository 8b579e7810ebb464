"""The nn rows' GPU paths (Backend.device, CuPy's): whole arrays where the CPU goes block by
block (written in place as there), one batched product where it loops over examples. CI has no
GPU, so these run on NumPy with the backend taken for a GPU: the same values and gradients as
the CPU paths, and a projection that holds over what the GPU path allocates (it follows it)."""

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
    d, heads = 64, 4
    p = {k: xp.asarray(rng.standard_normal((d, d)) / 6) for k in ("wq", "wk", "wv", "wo")}
    p["w1"] = xp.asarray(rng.standard_normal((d, 4 * d)) / 6)
    p["w2"] = xp.asarray(rng.standard_normal((4 * d, d)) / 12)
    p["g"] = xp.asarray(1 + rng.standard_normal(d) / 10)
    x = xp.asarray(rng.standard_normal((4, 256, d)))  # 512 KiB a layer: blocks on the CPU
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
    assert pieces.block_limit(npx) == pieces.PIECE_BYTES  # block by block on the CPU
    as_gpu()
    pg.grad(loss)(*args)
    assert seen["per example"] == 1  # not again
    assert pieces.block_limit(npx) > 2**60  # whole arrays (in place still)
    assert pieces.in_place(npx)


def test_compile_and_project_take_the_rows_of_the_backend_they_stand_for():
    """The abstract arrays stand for the arguments' backend: a projection's and compile's trace
    ask it (``modelled``), so on CuPy they take its rows' GPU paths, as the eager call does."""
    from pycograd_xp import _abstract

    xp = pg.namespace(np)
    x = xp.ones((3, 4))
    seen = []

    def f(x):
        seen.append(_abstract.modelled())
        return xp.sum(x * x)

    pg.compile(f)(x)  # traced, then replayed
    memory.project(f, x)
    assert seen and all(b is not None and b.name == "numpy" for b in seen)
    assert _abstract.modelled() is None  # outside both


def test_the_projection_of_a_compiled_function_stands_for_its_arguments_backend():
    """``memory.project`` of a compiled function traces the replay for the arguments' backend
    (CuPy's, on a GPU), not NumPy's."""
    import array_api_strict

    from pycograd_xp import _abstract

    xp = pg.namespace(array_api_strict)
    seen = []

    def f(x):
        seen.append(_abstract.modelled())
        return xp.sum(x * x)

    memory.project(pg.compile(f), xp.ones((3, 4)))
    assert seen and all(b is not None and b.name == "array_api_strict" for b in seen)


@pytest.mark.parametrize(
    "row",
    [
        lambda x, labels: nn.gelu(x),
        lambda x, labels: nn.layer_norm(x),
        lambda x, labels: nn.rms_norm(x),
        lambda x, labels: nn.log_softmax(x),
        lambda x, labels: nn.cross_entropy(x, labels),
    ],
    ids=["gelu", "layer_norm", "rms_norm", "log_softmax", "cross_entropy"],
)
def test_each_rows_projection_holds_over_its_gpu_path(as_gpu, row):
    """One row over 4 MiB: its whole-array temporaries are what the projection must count."""
    xp = pg.namespace(np)
    rng = np.random.default_rng(2)
    x = xp.asarray(rng.standard_normal((64, 64, 128)))
    labels = xp.asarray(rng.integers(0, 128, (64, 64)))

    def f(x, labels):
        return xp.sum(row(x, labels) ** 2)

    as_gpu()
    for argnums in ((), 0):
        p = memory.project(f, x, labels, argnums=argnums)
        m = memory.measure(f, x, labels, argnums=argnums)
        assert m.peak_bytes <= p.traced_peak_bytes, (argnums, m.peak_bytes, p.traced_peak_bytes)
