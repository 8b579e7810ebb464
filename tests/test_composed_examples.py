"""The examples of silent wrong derivatives found where transforms compose, pinned to the
numbers JAX gives (and finite differences): Hessians through the fused nn rows, per-example
gradients through convolutions, and xlogy at x = 0. ``conformance/test_composed.py`` checks
every row the same ways; these are the cases as a user wrote them."""

from __future__ import annotations

import numpy as np
import pytest

import pycograd_xp as pg
from pycograd_xp import nn, special

xp = pg.namespace(np)


def _np(a):
    return np.asarray(pg.unwrap(a))


def test_cross_entropy_hessian_is_jaxs():
    labels = xp.asarray(np.array([0]))
    f = lambda z: nn.cross_entropy(xp.reshape(z, (1, 2)), labels)
    want = [[0.25, -0.25], [-0.25, 0.25]]  # softmax's Jacobian at z = 0 (JAX's)
    z = xp.asarray(np.zeros(2))
    for h in (pg.hessian(f)(z), pg.jacfwd(pg.grad(f))(z), pg.jacrev(pg.grad(f))(z)):
        np.testing.assert_allclose(_np(h), want, rtol=1e-15, atol=1e-16)
    _, hv = pg.jvp(pg.grad(f), (z,), (xp.asarray([1.0, 0.0]),))
    np.testing.assert_allclose(_np(hv), [0.25, -0.25], rtol=1e-15)


@pytest.mark.parametrize("layer", ["layer_norm", "rms_norm", "attention_q", "attention_k"])
def test_hessians_through_fused_rows_match_reverse_over_reverse(layer):
    rng = np.random.default_rng(0)
    k, v, q = (xp.asarray(rng.standard_normal(s)) for s in ((5, 4), (5, 2), (3, 4)))
    f = {
        "layer_norm": lambda z: xp.sum(nn.layer_norm(xp.reshape(z, (2, 6))) ** 3),
        "rms_norm": lambda z: xp.sum(nn.rms_norm(xp.reshape(z, (2, 6))) ** 3),
        "attention_q": lambda z: xp.sum(
            nn.scaled_dot_product_attention(xp.reshape(z, (3, 4)), k, v) ** 2
        ),
        "attention_k": lambda z: xp.sum(
            nn.scaled_dot_product_attention(q, xp.reshape(z[:20], (5, 4)), v, is_causal=True) ** 2
        ),
    }[layer]
    z = xp.asarray(rng.standard_normal(12 if layer != "attention_k" else 20))
    h_rev = _np(pg.jacrev(pg.grad(f))(z))
    np.testing.assert_allclose(_np(pg.hessian(f)(z)), h_rev, rtol=1e-9, atol=1e-12)
    eps, g, zn = 1e-6, pg.grad(f), _np(z)
    fd = np.stack(
        [
            (_np(g(xp.asarray(zn + e))) - _np(g(xp.asarray(zn - e)))) / (2 * eps)
            for e in np.eye(zn.size) * eps
        ],
        axis=-1,
    )
    np.testing.assert_allclose(h_rev, fd, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dims", [1, 2])
@pytest.mark.parametrize("batched", ["input", "weight", "both"])
def test_per_example_gradients_through_convolutions(dims, batched):
    """vmap(grad) with respect to the input of conv1d/conv2d was all zeros: the backward's
    col2im wrote through views, which vmap's batched arrays do not share with their base."""
    rng = np.random.default_rng(1)
    conv = nn.conv1d if dims == 1 else nn.conv2d
    space = (7,) if dims == 1 else (5, 6)
    X = xp.asarray(rng.standard_normal((4, 2, 3, *space)))
    W = xp.asarray(rng.standard_normal((4, 5, 3, *(3,) * dims)))
    W2 = xp.asarray(rng.standard_normal((3, 5, *(2,) * dims)))  # a second layer, shared

    def loss(x, w):
        return xp.sum(nn.relu(conv(conv(x, w, padding=1), W2, stride=2)) ** 2)

    in_axes = {"input": (0, None), "weight": (None, 0), "both": (0, 0)}[batched]
    g = pg.vmap(pg.grad(loss, argnums=(0, 1)), in_axes=in_axes)(
        X if in_axes[0] == 0 else X[0], W if in_axes[1] == 0 else W[0]
    )
    for i in range(4):
        want = pg.grad(loss, argnums=(0, 1))(
            X[i] if in_axes[0] == 0 else X[0], W[i] if in_axes[1] == 0 else W[0]
        )
        for got_a, want_a, ax in zip(g, want, in_axes, strict=True):
            got_i = got_a[i] if ax == 0 else _np(got_a)[i]
            assert float(xp.max(xp.abs(want_a))) > 0
            np.testing.assert_allclose(_np(got_i), _np(want_a), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("f, log", [(special.xlogy, np.log), (special.xlog1py, np.log1p)])
def test_xlogy_at_x_zero_is_log_y(f, log):
    y = xp.asarray([2.0, 3.0])
    g = pg.grad(lambda x: xp.sum(f(x, y)))(xp.asarray([0.0, 0.0]))
    np.testing.assert_allclose(_np(g), log(np.array([2.0, 3.0])), rtol=1e-15)
