"""The training loop helper, and the "don't regress" models: logistic regression, MLP, MLP with
LayerNorm and Dropout, a single-head Transformer block; each gradient-checked and trained."""

from __future__ import annotations

import numpy as np
import pytest

import pycograd_xp as pg
from conformance.gradcheck import check_vjp
from pycograd_xp import nn, optim, random
from pycograd_xp.data import Batches
from pycograd_xp.train import fit, make_step, plot_history

rng = np.random.default_rng(0)
X = rng.standard_normal((256, 6))
Y = (X[:, 0] - 2 * X[:, 1] + X[:, 2] * X[:, 3] > 0).astype(np.int64)


def train(xp, loss, params, epochs, lr=1e-2):
    step = make_step(loss, optim.adam(lr))
    batches = Batches((X, Y), 32, key=random.key(0), xp=xp, prefetch=0)
    params, _, history = fit(
        step, params, optim.adam(lr).init(params), batches, epochs=epochs, progress=False, log=None
    )
    return params, history


def logistic(p, x, y):
    return nn.binary_cross_entropy_with_logits(
        nn.linear(x, p["w"], p["b"]), pg.namespace(np).astype(y, x.dtype)
    )


def mlp(p, x, y, key=None):
    h = nn.tanh(p["l1"](x))
    if key is not None:
        h = nn.layer_norm(h, p["g"], p["beta"])
        h = nn.dropout(key, h, 0.1)
    return nn.cross_entropy(p["l2"](h), y)


def test_logistic_regression():
    xp = pg.namespace(np)
    p = {"w": xp.zeros(6), "b": xp.asarray(0.0)}
    x, y = xp.asarray(X), xp.asarray(Y)
    check_vjp(
        xp, lambda w, b: logistic({"w": w, "b": b}, x, y), rng.standard_normal(6), np.asarray(0.1)
    )
    p, h = train(xp, logistic, p, 20, lr=0.05)
    assert h["loss"][-1] < 0.45 < h["loss"][0]


def init_mlp(xp, norm=False):
    k1, k2 = random.split(random.key(5))
    p = {"l1": nn.Linear.init(k1, 6, 32, xp=xp), "l2": nn.Linear.init(k2, 32, 2, xp=xp)}
    if norm:
        p.update(g=xp.ones(32), beta=xp.zeros(32))
    return p


def test_mlp_and_mlp_with_layernorm_dropout():
    xp = pg.namespace(np)
    x, y = xp.asarray(X[:16]), xp.asarray(Y[:16])
    p = init_mlp(xp)
    check_vjp(
        xp,
        lambda w1, w2: mlp({"l1": nn.Linear(w1, p["l1"].b), "l2": nn.Linear(w2, p["l2"].b)}, x, y),
        np.asarray(pg.unwrap(p["l1"].w)),
        np.asarray(pg.unwrap(p["l2"].w)),
    )
    _, h = train(xp, mlp, p, 30)
    assert h["loss"][-1] < 0.15
    pn = init_mlp(xp, norm=True)
    key = random.key(9)
    check_vjp(
        xp,
        lambda g, w: mlp({**pn, "g": g, "l1": nn.Linear(w, pn["l1"].b)}, x, y, key),
        np.ones(32),
        np.asarray(pg.unwrap(pn["l1"].w)),
    )
    counter = iter(range(10**6))
    _, h = train(xp, lambda p, x, y: mlp(p, x, y, random.fold_in(key, next(counter))), pn, 30)
    assert h["loss"][-1] < 0.2


def block(p, x):
    """A single-head pre-norm Transformer block on (B, L, D), then mean-pool and classify."""
    h = nn.layer_norm(x, p["ln1_g"], p["ln1_b"])
    x = x + nn.multi_head_attention(h, p["attn"], num_heads=1, causal=True)
    h = nn.layer_norm(x, p["ln2_g"], p["ln2_b"])
    x = x + nn.linear(nn.gelu(nn.linear(h, p["w1"], p["b1"])), p["w2"], p["b2"])
    return nn.linear(pg.namespace(np).mean(x, axis=1), p["wo"], p["bo"])


def test_transformer_block():
    xp = pg.namespace(np)
    d, L = 8, 4
    ks = random.split(random.key(3), 8)
    g = lambda k, s: nn.glorot_uniform(k, s, xp=xp)
    p = {
        "ln1_g": xp.ones(d),
        "ln1_b": xp.zeros(d),
        "ln2_g": xp.ones(d),
        "ln2_b": xp.zeros(d),
        "attn": {n: g(ks[i], (d, d)) for i, n in enumerate(("wq", "wk", "wv", "wo"))},
        "w1": g(ks[4], (d, 16)),
        "b1": xp.zeros(16),
        "w2": g(ks[5], (16, d)),
        "b2": xp.zeros(d),
        "wo": g(ks[6], (d, 2)),
        "bo": xp.zeros(2),
    }
    seqs = rng.standard_normal((128, L, d))
    labels = (seqs[:, 0, 0] + seqs[:, -1, 1] > 0).astype(np.int64)
    xs, ys = xp.asarray(seqs[:4]), xp.asarray(labels[:4])
    check_vjp(
        xp,
        lambda wq, w1: nn.cross_entropy(
            block({**p, "w1": w1, "attn": {**p["attn"], "wq": wq}}, xs), ys
        ),
        np.asarray(pg.unwrap(p["attn"]["wq"])),
        np.asarray(pg.unwrap(p["w1"])),
    )
    step = make_step(lambda p, x, y: nn.cross_entropy(block(p, x), y), optim.adam(1e-2))
    batches = Batches((seqs, labels), 32, key=random.key(1), prefetch=0)
    _, _, h = fit(step, p, optim.adam(1e-2).init(p), batches, epochs=40, progress=False, log=None)
    assert h["loss"][-1] < 0.25 < h["loss"][0]


def test_fit_logs_metrics_and_plots(tmp_path, capsys):
    xp = pg.namespace(np)
    p = {"w": xp.zeros(6), "b": xp.asarray(0.0)}
    step = make_step(
        lambda p, x, y: (logistic(p, x, y), {"w_norm": xp.sum(p["w"] ** 2)}),
        optim.sgd(0.1),
        has_aux=True,
    )
    _, _, h = fit(
        step,
        p,
        optim.sgd(0.1).init(p),
        Batches((X, Y), 64, prefetch=0),
        epochs=2,
        on_epoch_end=lambda e, p, m: {"val": 1.0 - e},
    )
    assert set(h) == {"loss", "w_norm", "epoch_seconds", "val"} and h["val"] == [1.0, 0.0]
    assert "epoch 2/2" in capsys.readouterr().out
    pytest.importorskip("matplotlib")
    plot_history(h, str(tmp_path / "loss.png"))
    assert (tmp_path / "loss.png").stat().st_size > 1000


def test_fit_refuses_an_epoch_without_batches():
    """A generator of batches is spent after the first epoch: the second got no batch, logged
    no loss and left ``history`` without one; fit says so instead."""
    xp = pg.namespace(np)
    p = {"w": xp.zeros(6), "b": xp.asarray(0.0)}
    step = make_step(logistic, optim.sgd(0.1))
    once = (b for b in Batches((X, Y), 64, prefetch=0))
    with pytest.raises(ValueError, match=r"fit: batches gave no batch in epoch 2; give a re-"):
        fit(step, p, optim.sgd(0.1).init(p), once, epochs=2, progress=False, log=None)
    with pytest.raises(ValueError, match=r"no batch in epoch 1"):
        fit(step, p, optim.sgd(0.1).init(p), [], epochs=1, progress=False, log=None)


def test_fit_names_the_right_call_when_given_an_optimizer_for_its_state_or_batches():
    """``fit(loss, params, batches, tx)`` (cubed_plugin.fit's order) failed inside the loss with
    "unsupported operand type(s) for @: 'Batches' and 'Array'"; ``fit(step, params, tx,
    batches)`` inside the optimizer."""
    xp = pg.namespace(np)
    p = {"w": xp.zeros(6), "b": xp.asarray(0.0)}
    tx, batches = optim.sgd(0.1), Batches((X, Y), 64, prefetch=0)
    with pytest.raises(TypeError, match=r"fit: batches is an optimizer; .*make_step\(loss, tx\)"):
        fit(logistic, p, batches, tx, epochs=1, progress=False, log=None)
    with pytest.raises(TypeError, match=r"fit: opt_state is an optimizer; .*tx.init\(params\)"):
        fit(make_step(logistic, tx), p, tx, batches, epochs=1, progress=False, log=None)


def test_a_step_whose_loss_cannot_take_the_batch_says_why():
    """``Batches(drop_last=False)`` appends a mask to each batch; a loss without a mask argument
    failed with Python's "logistic() takes 3 positional arguments but 4 were given". The step
    now names the mask and how to use it; an error raised inside the loss stays as it is."""
    xp = pg.namespace(np)
    p = {"w": xp.zeros(6), "b": xp.asarray(0.0)}
    step = make_step(logistic, optim.sgd(0.1))
    padded = Batches((X[:100], Y[:100]), 64, drop_last=False, xp=xp, prefetch=0)
    with pytest.raises(
        TypeError,
        match=r"make_step: logistic\(params, \*batch\) cannot take a ba"
        r"tch of 3 arrays \(too many positional arguments\); .*drop_last=False"
        r" appends a mask",
    ) as info:
        fit(step, p, optim.sgd(0.1).init(p), padded, epochs=1, progress=False, log=None)
    assert isinstance(info.value.__cause__, TypeError)

    def masked(p, x, y, mask):
        logits = x @ p["w"] + p["b"]
        per_row = nn.binary_cross_entropy_with_logits(logits, xp.astype(y, x.dtype), "none")
        return xp.sum(per_row * mask) / xp.sum(mask)

    _, _, history = fit(
        make_step(masked, optim.sgd(0.1)),
        p,
        optim.sgd(0.1).init(p),
        padded,
        epochs=1,
        progress=False,
        log=None,
    )
    assert np.isfinite(history["loss"][0])

    def broken(p, x, y):
        return x @ p["w"] + "text"

    with pytest.raises(TypeError, match=r"unsupported operand") as info:
        make_step(broken, optim.sgd(0.1))(p, optim.sgd(0.1).init(p), (xp.asarray(X), Y))
    assert "make_step" not in str(info.value)
