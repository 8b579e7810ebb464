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
