"""CuPy (GPU): the same namespace and gradients as NumPy. Skips cleanly without CuPy or a GPU;
CI has neither, a lent GPU machine runs it."""

from __future__ import annotations

import numpy as np
import pytest

import pycograd_xp as pg

try:
    import cupy
except ImportError as e:  # absent, or installed without the CUDA libraries it loads
    pytest.skip(f"CuPy does not import: {e}", allow_module_level=True)
try:
    cupy.cuda.runtime.getDeviceCount()
except Exception:  # CuPy installed without a usable GPU
    pytest.skip("no CUDA device", allow_module_level=True)


def test_namespace_and_gradients_match_numpy():
    gxp, nxp = pg.namespace(cupy), pg.namespace(np)
    assert gxp.__name__ == "pycograd_xp.cupy"
    a = np.random.default_rng(0).standard_normal((64, 32))

    def loss(xp, w):
        return xp.sum(xp.tanh(w @ xp.matrix_transpose(w)) ** 2)

    g_gpu = pg.grad(lambda w: loss(gxp, w))(gxp.asarray(cupy.asarray(a)))
    g_cpu = pg.grad(lambda w: loss(nxp, w))(nxp.asarray(a))
    np.testing.assert_allclose(cupy.asnumpy(pg.unwrap(g_gpu)), pg.unwrap(g_cpu), rtol=1e-10)


def test_measured_device_memory_is_bounded_by_the_projection():
    """CuPy's memory pool, hooked, against the projection (the NumPy model: cuBLAS and cuFFT
    workspaces live outside the pool, and the pool rounds to 512 bytes)."""
    from pycograd_xp import memory

    gxp = pg.namespace(cupy)
    rng = np.random.default_rng(0)
    w = gxp.asarray(cupy.asarray(rng.standard_normal((512, 512)) / 22))
    x = gxp.asarray(cupy.asarray(rng.standard_normal((256, 512))))

    def loss(w, x):
        return gxp.sum(gxp.tanh(gxp.tanh(x @ w) @ w) ** 2)

    p, m = memory.project(loss, w, x), memory.measure(loss, w, x)
    assert m.peak_bytes <= p.peak_bytes * 1.01
    assert m.peak_bytes / p.peak_bytes >= 0.8


def test_compiled_step_matches_uncompiled():
    """pycograd_xp.compile on CuPy: the replay (with dead temporaries written in place) gives
    the uncompiled step's values."""
    gxp = pg.namespace(cupy)
    rng = np.random.default_rng(1)
    w = gxp.asarray(cupy.asarray(rng.standard_normal((256, 256)) / 16))
    x = gxp.asarray(cupy.asarray(rng.standard_normal((128, 256))))

    def loss(w, x):
        return gxp.sum(gxp.tanh(x @ w) ** 2 + gxp.exp(-(x @ w)))

    vg = pg.value_and_grad(loss)
    c = pg.compile(vg)
    for _ in range(2):
        (v1, g1), (v2, g2) = vg(w, x), c(w, x)
        np.testing.assert_allclose(
            cupy.asnumpy(pg.unwrap(g2)), cupy.asnumpy(pg.unwrap(g1)), rtol=1e-12
        )
        assert float(v1) == float(v2)
    assert c.traces[0].elided > 0
