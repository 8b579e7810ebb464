"""End to end: logistic regression and a two-layer MLP written as plain namespace code,
gradient-checked, trained on NumPy to a stated loss, and giving the same gradients on
array-api-strict and Cubed."""

from __future__ import annotations

import numpy as np
import pytest

import pycograd_xp as pg
from conformance.gradcheck import check_vjp, to_numpy


def make_data(n=200, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    w_true = np.array([1.5, -2.0, 0.5, 1.0])[:d]
    y = (X @ w_true + 0.3 * rng.standard_normal(n) > 0).astype(np.float64)
    return X, y


def logistic_loss(xp, params, X, y):
    w, b = params
    z = X @ w + b
    # log(1 + exp(-s z)) written stably: softplus(z) - y z
    return xp.mean(xp.logaddexp(0.0, z) - y * z)


def mlp_init(d, h, k, seed=0):
    rng = np.random.default_rng(seed)
    return [
        rng.standard_normal((d, h)) / np.sqrt(d),
        np.zeros(h),
        rng.standard_normal((h, k)) / np.sqrt(h),
        np.zeros(k),
    ]


def mlp_loss(xp, params, X, y_onehot):
    w1, b1, w2, b2 = params
    h = xp.tanh(X @ w1 + b1)
    logits = h @ w2 + b2
    m = xp.max(logits, axis=1, keepdims=True)
    logp = logits - m - xp.log(xp.sum(xp.exp(logits - m), axis=1, keepdims=True))
    return -xp.mean(xp.sum(y_onehot * logp, axis=1))


def train(xp, loss, params, data, steps, lr):
    step = pg.value_and_grad(lambda p: loss(xp, p, *data))
    params = [xp.asarray(p) for p in params]
    for _ in range(steps):
        value, grads = step(params)
        params = [p - lr * g for p, g in zip(params, grads, strict=True)]
    return float(value), params


def test_logistic_regression_gradcheck_and_training():
    xp = pg.namespace(np)
    X, y = make_data()
    Xa, ya = xp.asarray(X), xp.asarray(y)
    check_vjp(
        xp, lambda w, b: logistic_loss(xp, (w, b), Xa, ya), np.zeros(4) + 0.1, np.asarray(0.2)
    )
    final, _ = train(xp, logistic_loss, [np.zeros(4), np.asarray(0.0)], (Xa, ya), 300, 0.5)
    assert final < 0.25  # from log(2) = 0.693 at zero weights


def test_mlp_gradcheck_and_training():
    xp = pg.namespace(np)
    X, y = make_data(n=300)
    Y = np.stack([1 - y, y], axis=1)
    Xa, Ya = xp.asarray(X), xp.asarray(Y)
    check_vjp(xp, lambda *p: mlp_loss(xp, p, Xa, Ya), *mlp_init(4, 8, 2))
    final, _ = train(xp, mlp_loss, mlp_init(4, 8, 2), (Xa, Ya), 400, 0.5)
    assert final < 0.2


@pytest.mark.parametrize("backend", ["array_api_strict", "cubed"])
def test_same_gradients_on_other_backends(backend):
    mod = pytest.importorskip(backend)
    nxp, oxp = pg.namespace(np), pg.namespace(mod)
    X, y = make_data(n=120)
    Y = np.stack([1 - y, y], axis=1)
    params = mlp_init(4, 6, 2, seed=3)

    def grads(xp):
        to = (
            (lambda a: xp.asarray(mod.from_array(a, chunks=(40,) + a.shape[1:])))
            if backend == "cubed"
            else xp.asarray
        )
        data = (to(X), to(Y))
        ps = [xp.asarray(p) for p in params]
        g_mlp = pg.grad(lambda p: mlp_loss(xp, p, *data))(ps)
        g_log = pg.grad(lambda p: logistic_loss(xp, p, data[0], to(y)))(
            [xp.asarray(np.full(4, 0.3)), xp.asarray(0.1)]
        )
        return [to_numpy(g) for g in (*g_mlp, *g_log)]

    for got, want in zip(grads(oxp), grads(nxp), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-14)
