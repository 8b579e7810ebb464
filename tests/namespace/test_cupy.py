"""CuPy (GPU): the same namespace and gradients as NumPy. Skips cleanly without CuPy or a GPU;
CI has neither, a lent GPU machine runs it."""

from __future__ import annotations

import numpy as np
import pytest

import pycograd_xp as pg

cupy = pytest.importorskip("cupy")
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
