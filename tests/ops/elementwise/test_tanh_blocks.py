"""tanh's VJP on a large array goes block by block where the backend writes in place
(``ops/nn/pieces.py`` ``tanh_grad``): the same values as over the whole array, bit for bit, into
the cotangent only when the tape owns it, and a temporary of one block, not of the whole array
(the deep MLP's step peaked there, above PyTorch's)."""

from __future__ import annotations

import array_api_compat.numpy as cnp
import numpy as np
import pytest

import pycograd_xp as pg
from pycograd_xp import memory
from pycograd_xp.ops import REGISTRY
from pycograd_xp.ops.nn.pieces import PIECE_BYTES

xp = pg.namespace(np)
rng = np.random.default_rng(7)


def _whole(g, y):
    t = y * y
    t *= g
    return g - t


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", [(300, 700), (5, 129, 257), (70001,)])
@pytest.mark.parametrize("owned", [True, False])
def test_the_blocks_give_the_whole_array_s_values_to_the_bit(dtype, shape, owned):
    x = rng.standard_normal(shape).astype(dtype)
    y, g = np.tanh(x), rng.standard_normal(shape).astype(dtype)
    want, kept = _whole(g, y), g.copy()
    (got,) = REGISTRY["tanh"].vjp(cnp, g, y, x, owned=owned)
    np.testing.assert_array_equal(got, want)
    if owned:
        assert got is g  # written into the cotangent the tape owns
    else:
        np.testing.assert_array_equal(g, kept)  # a cotangent someone else holds is untouched


def _layout(a, how):
    if how == "transposed":
        return np.ascontiguousarray(a.T).T
    if how == "strided":
        big = np.zeros((a.shape[0], 2 * a.shape[1]), a.dtype)
        big[:, ::2] = a
        return big[:, ::2]
    return a


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("how", ["contiguous", "transposed", "strided"])
def test_a_large_step_s_tanh_vjp_holds_one_block_beside_its_operands(dtype, how):
    a = _layout(
        rng.standard_normal((512, 2048 if dtype == np.float32 else 1024)).astype(dtype), how
    )
    x = xp.asarray(a)  # (the layout kept: no copy)
    assert pg.unwrap(x).flags.c_contiguous == (how == "contiguous")
    nbytes = 4 * 2**20  # x's (16 blocks)

    def loss(x):
        return xp.sum(xp.tanh(x))

    def loss_owned(x):  # the cotangent tanh gets is a fresh array the tape owns
        return xp.sum(xp.tanh(x) * 2.0)

    p = memory.project(loss, x)
    # at tanh's VJP: the argument, its saved output, the cotangent it makes (its seed is a
    # broadcast view, not owned), a block's square and the iterator's buffers for the seed's
    # broadcast block (the whole array's square and product were 8 MiB more)
    assert p.peak_bytes <= 3 * nbytes + 3 * PIECE_BYTES + p.overhead_bytes, str(p)
    for f in (loss, loss_owned):
        assert memory.measure(f, x).peak_bytes <= memory.project(f, x).traced_peak_bytes
    want = 1 - np.tanh(np.asarray(x).astype(np.float64)) ** 2
    tol = dict(rtol=1e-14, atol=1e-15) if dtype == np.float64 else dict(rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(pg.grad(loss)(x)), want, **tol)
    np.testing.assert_allclose(np.asarray(pg.grad(loss_owned)(x)), 2 * want, **tol)
