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


def test_a_large_step_s_tanh_vjp_holds_one_block_beside_its_operands():
    x = xp.asarray(rng.standard_normal((512, 1024)))  # 4 MiB: 16 blocks

    def loss(x):
        return xp.sum(xp.tanh(x))

    p = memory.project(loss, x)
    # at tanh's VJP: the argument, its saved output, the cotangent it makes (its seed is a
    # broadcast view, not owned), a block's square and the iterator's buffers for the seed's
    # broadcast block (the whole array's square and product were 8 MiB more)
    assert p.peak_bytes <= 3 * 4 * 2**20 + 3 * PIECE_BYTES + p.overhead_bytes, str(p)
    measured = memory.measure(loss, x)
    assert measured.peak_bytes <= p.traced_peak_bytes
    np.testing.assert_allclose(
        np.asarray(pg.grad(loss)(x)), 1 - np.tanh(np.asarray(x)) ** 2, rtol=1e-14, atol=1e-15
    )
