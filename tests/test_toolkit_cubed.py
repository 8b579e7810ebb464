"""A representative subset of the training toolkit on Cubed: layers and losses differentiate
lazily, optimizer updates stay lazy, batches read a chunked array one batch at a time, and the
results equal NumPy's."""

from __future__ import annotations

import numpy as np
import pytest

import pycograd_xp as pg
from pycograd_xp import nn, optim, random
from pycograd_xp.data import Batches

cubed = pytest.importorskip("cubed")


def model(p, x, y):
    h = nn.layer_norm(nn.gelu(nn.linear(x, p["w1"], p["b1"])), p["g"], p["beta"])
    return nn.cross_entropy(nn.linear(h, p["w2"], p["b2"]), y)


def params(xp):
    # drawn on the host, so both backends start from the same values (on Cubed the samplers
    # draw block by block: other values)
    k1, k2 = random.split(random.key(0))
    w1 = np.asarray(pg.unwrap(nn.he_normal(k1, (4, 8))))
    w2 = np.asarray(pg.unwrap(nn.glorot_uniform(k2, (8, 3))))
    return {
        "w1": xp.asarray(w1),
        "b1": xp.zeros(8),
        "g": xp.ones(8),
        "beta": xp.zeros(8),
        "w2": xp.asarray(w2),
        "b2": xp.zeros(3),
    }


@pytest.mark.slow  # 9-21 s: run by .ci/run's slow checks
def test_layers_optimizer_and_batches_on_cubed(cxp):
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((40, 4)), rng.integers(0, 3, 40)
    source = cxp.asarray(cubed.from_array(X, chunks=(20, 4)))
    batches = Batches((source, Y), 20, key=random.key(1), xp=cxp, prefetch=0)
    tx = optim.chain(optim.clip_by_global_norm(1.0), optim.adam(1e-2))
    nxp = pg.namespace(np)
    results = {}
    for xp, bs in ((cxp, batches), (nxp, Batches((X, Y), 20, key=random.key(1), prefetch=0))):
        p = params(xp)
        state = tx.init(p)
        for x, y in bs:
            with cubed.raise_if_computes() if xp is cxp else _nothing():
                value, grads = pg.value_and_grad(model)(p, x, y)
                updates, state = tx.update(grads, state, p)
                p = optim.apply_updates(p, updates)
            if xp is cxp:  # materialize each step in one compute, as a loop on Cubed must
                *vals, value = cubed.compute(*(pg.unwrap(v) for v in p.values()), pg.unwrap(value))
                p = {k: cxp.asarray(v) for k, v in zip(p, vals, strict=True)}
        results[xp.__name__] = (float(value), {k: np.asarray(pg.unwrap(v)) for k, v in p.items()})
    (v_c, p_c), (v_n, p_n) = results["pycograd_xp.cubed"], results["pycograd_xp.numpy"]
    assert v_c == pytest.approx(v_n, rel=1e-10)
    for k in p_n:
        np.testing.assert_allclose(p_c[k], p_n[k], rtol=1e-9, atol=1e-12)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_chunked_random_on_cubed(cxp):
    k = random.key(4)
    with cubed.raise_if_computes():
        a = random.normal(k, (1000, 30), xp=cxp, chunks=(250, 30))
        b = random.normal(k, (1000, 30), xp=cxp, chunks=(250, 30))
        m = random.bernoulli(random.fold_in(k, 1), 0.3, (1000, 30), xp=cxp, chunks=(250, 30))
    assert pg.unwrap(a).chunks == ((250,) * 4, (30,))
    va, vb = np.asarray(pg.unwrap(a)), np.asarray(pg.unwrap(b))
    np.testing.assert_array_equal(va, vb)  # reproducible for a key and chunking
    assert abs(va.mean()) < 0.05 and abs(va.std() - 1) < 0.05
    assert not np.array_equal(va[:250], va[250:500])  # every block its own stream
    assert abs(np.asarray(pg.unwrap(m)).mean() - 0.3) < 0.02
