"""Optimizers against their update formulas on a worked example (and against torch.optim when
PyTorch is installed), schedules, clipping, masks, the stateful wrapper."""

from __future__ import annotations

import math

import numpy as np
import pytest

import pycograd_xp as pg
from pycograd_xp import optim

P0 = {"w": np.array([1.0, -2.0]), "b": np.array(0.5)}
GRADS = [
    {"w": np.array([0.1, 0.4]), "b": np.array(-1.0)},
    {"w": np.array([-0.3, 0.2]), "b": np.array(0.5)},
    {"w": np.array([0.05, -0.1]), "b": np.array(0.25)},
]


def run(xp, tx, steps=3):
    params = {k: xp.asarray(v) for k, v in P0.items()}
    state = tx.init(params)
    for g in GRADS[:steps]:
        updates, state = tx.update({k: xp.asarray(v) for k, v in g.items()}, state, params)
        params = optim.apply_updates(params, updates)
    return {k: np.asarray(pg.unwrap(v)) for k, v in params.items()}


def reference(kind, lr=0.1, **hp):
    """The textbook formulas, in NumPy, one leaf at a time."""
    out = {}
    for k in P0:
        p = P0[k].astype(float).copy()
        m = np.zeros_like(p)
        v = np.zeros_like(p)
        for t, gs in enumerate(GRADS, start=1):
            g = gs[k].astype(float)
            if kind == "sgd":
                if hp.get("wd"):
                    g = g + hp["wd"] * p
                if hp.get("momentum"):
                    m = hp["momentum"] * m + g
                    step = g + hp["momentum"] * m if hp.get("nesterov") else m
                else:
                    step = g
                p = p - lr * step
            elif kind == "rmsprop":
                v = 0.9 * v + 0.1 * g * g
                p = p - lr * g / (np.sqrt(v) + 1e-8)
            elif kind == "adagrad":
                v = v + g * g
                p = p - lr * g / (np.sqrt(v) + 1e-10)
            elif kind == "adam":
                m = 0.9 * m + 0.1 * g
                v = 0.999 * v + 0.001 * g * g
                step = (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
                p = p - lr * step - lr * hp.get("wd", 0.0) * p
        out[k] = p
    return out


CASES = [
    ("sgd", optim.sgd(0.1), {}),
    ("sgd", optim.momentum(0.1, 0.9), {"momentum": 0.9}),
    ("sgd", optim.nesterov(0.1, 0.9), {"momentum": 0.9, "nesterov": True}),
    ("sgd", optim.sgd(0.1, weight_decay=0.01), {"wd": 0.01}),
    ("rmsprop", optim.rmsprop(0.1), {}),
    ("adagrad", optim.adagrad(0.1), {}),
    ("adam", optim.adam(0.1), {}),
    ("adam", optim.adamw(0.1, weight_decay=0.05), {"wd": 0.05}),
]


@pytest.mark.parametrize("kind, tx, hp", CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_update_formulas(xp, kind, tx, hp):
    got = run(xp, tx)
    want = reference(kind, **hp)
    for k in P0:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-12)


@pytest.mark.parametrize(
    "name", ["SGD-momentum", "SGD-nesterov", "RMSprop", "Adagrad", "Adam", "AdamW"]
)
def test_against_torch_optim(name):
    torch = pytest.importorskip("torch")
    txs = {
        "SGD-momentum": (
            optim.momentum(0.1, 0.9),
            lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
        ),
        "SGD-nesterov": (
            optim.nesterov(0.1, 0.9),
            lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True),
        ),
        "RMSprop": (
            optim.rmsprop(0.1, decay=0.99, eps=1e-8),
            lambda p: torch.optim.RMSprop(p, lr=0.1, alpha=0.99, eps=1e-8),
        ),
        "Adagrad": (optim.adagrad(0.1), lambda p: torch.optim.Adagrad(p, lr=0.1)),
        "Adam": (optim.adam(0.1), lambda p: torch.optim.Adam(p, lr=0.1)),
        "AdamW": (
            optim.adamw(0.1, weight_decay=0.05),
            lambda p: torch.optim.AdamW(p, lr=0.1, weight_decay=0.05),
        ),
    }
    tx, make = txs[name]
    got = run(pg.namespace(np), tx)
    tp = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in P0.items()}
    opt = make(list(tp.values()))
    for g in GRADS:
        for k, t in tp.items():
            t.grad = torch.tensor(g[k], dtype=torch.float64)
        opt.step()
    for k in P0:
        np.testing.assert_allclose(got[k], tp[k].detach().numpy(), rtol=1e-10)


def test_schedules():
    assert optim.constant_schedule(0.3)(100) == 0.3
    s = optim.step_decay_schedule(1.0, step_size=10, gamma=0.5)
    assert [s(0), s(9), s(10), s(25)] == [1.0, 1.0, 0.5, 0.25]
    e = optim.exponential_decay_schedule(2.0, 0.5, decay_steps=4)
    assert e(8) == pytest.approx(0.5)
    c = optim.cosine_decay_schedule(1.0, decay_steps=100, alpha=0.1)
    assert c(0) == pytest.approx(1.0) and c(50) == pytest.approx(0.55) and c(200) == 0.1
    w = optim.linear_warmup(1.0, warmup_steps=4, then=optim.cosine_decay_schedule(1.0, 10))
    assert [w(0), w(2), w(4)] == [0.0, 0.5, 1.0] and w(14) == pytest.approx(0.0)
    # a schedule drives the step size
    tx = optim.sgd(optim.step_decay_schedule(0.1, step_size=1, gamma=0.5))
    got = run(pg.namespace(np), tx, steps=2)
    want = P0["w"] - 0.1 * GRADS[0]["w"] - 0.05 * GRADS[1]["w"]
    np.testing.assert_allclose(got["w"], want)


def test_clipping(xp):
    g = {"a": xp.asarray([3.0, 0.0]), "b": xp.asarray(4.0)}
    assert float(optim.global_norm(g)) == 5.0
    clipped, _ = optim.clip_by_global_norm(1.0).update(g, ())
    np.testing.assert_allclose(np.asarray(pg.unwrap(clipped["a"])), [0.6, 0.0])
    unchanged, _ = optim.clip_by_global_norm(10.0).update(g, ())
    assert float(unchanged["b"]) == 4.0
    by_value, _ = optim.clip_by_value(-1.0, 1.0).update(g, ())
    assert float(by_value["b"]) == 1.0
    tx = optim.chain(optim.clip_by_global_norm(1.0), optim.sgd(1.0))
    updates, _ = tx.update(g, tx.init(g), g)
    assert float(updates["b"]) == pytest.approx(-0.8)


def test_weight_decay_mask(xp):
    tx = optim.adamw(0.1, weight_decay=0.5, mask=lambda p: {"w": True, "b": False})
    got = run(xp, tx, steps=1)
    plain = run(xp, optim.adam(0.1), steps=1)
    np.testing.assert_allclose(got["b"], plain["b"])  # no decay on the bias
    np.testing.assert_allclose(got["w"], plain["w"] - 0.1 * 0.5 * P0["w"])


def test_stateful_optimizer_trains(xp):
    params = {"w": xp.asarray([3.0, -1.0])}
    opt = optim.Optimizer(optim.adam(0.1), params)
    loss = lambda p: xp.sum((p["w"] - xp.asarray([1.0, 2.0])) ** 2)
    for _ in range(300):
        params = opt.step(params, pg.grad(loss)(params))
    np.testing.assert_allclose(np.asarray(pg.unwrap(params["w"])), [1.0, 2.0], atol=1e-3)
    assert math.isfinite(float(loss(params)))
