"""custom_vjp and custom_jvp: user-given derivatives under grad, vjp, jvp and higher order."""

from __future__ import annotations

import numpy as np
import pytest

import pycograd_xp as pg


def _np(a):
    return np.asarray(pg.unwrap(a))


def _lse(xp):
    @pg.custom_jvp
    def lse(x):
        m = xp.max(x)
        return m + xp.log(xp.sum(xp.exp(x - m)))

    @lse.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        out = lse(x)
        return out, xp.sum(xp.exp(x - out) * t)  # softmax(x) . t: stable for large x

    return lse


def _clip_gradient(xp, lo, hi):
    @pg.custom_vjp
    def clip_gradient(x):
        return x

    clip_gradient.defvjp(lambda x: (x, None), lambda res, g: (xp.clip(g, min=lo, max=hi),))
    return clip_gradient


def test_custom_jvp_logsumexp_grad_jvp_and_hessian(xp):
    lse = _lse(xp)
    x = xp.asarray([1000.0, 1000.5, 999.0])
    soft = np.exp(_np(x) - 1000.5) / np.sum(np.exp(_np(x) - 1000.5))
    np.testing.assert_allclose(_np(pg.grad(lse)(x)), soft, rtol=1e-12)
    t = xp.asarray([1.0, -2.0, 0.5])
    out, tan = pg.jvp(lse, (x,), (t,))
    np.testing.assert_allclose(float(_np(tan)), soft @ _np(t), rtol=1e-12)
    h = _np(pg.hessian(lse)(x))  # forward over reverse through the custom rule
    np.testing.assert_allclose(h, np.diag(soft) - np.outer(soft, soft), atol=1e-12)
    h2 = _np(pg.jacrev(pg.grad(lse))(x))  # reverse over reverse
    np.testing.assert_allclose(h2, h, atol=1e-12)


def test_custom_jvp_is_used_not_the_function(xp):
    @pg.custom_jvp
    def f(x):
        return xp.sin(x)

    f.defjvp(lambda p, t: (f(p[0]), 3.0 * t[0]))  # a deliberately different derivative
    x = xp.asarray([0.1, 0.2])
    np.testing.assert_allclose(_np(pg.grad(lambda x: xp.sum(f(x)))(x)), [3.0, 3.0])
    np.testing.assert_allclose(_np(pg.jvp(f, (x,), (xp.ones_like(x),))[1]), [3.0, 3.0])


def test_custom_vjp_clips_the_gradient(xp):
    clip = _clip_gradient(xp, -1.0, 1.0)
    x = xp.asarray([1.0, 2.0, 3.0])
    g = pg.grad(lambda x: xp.sum(clip(x) ** 2))(x)  # 2x, clipped to [-1, 1]
    np.testing.assert_allclose(_np(g), [1.0, 1.0, 1.0])
    g = pg.grad(lambda x: xp.sum(clip(x) * 0.25))(x)
    np.testing.assert_allclose(_np(g), [0.25, 0.25, 0.25])
    out, pull = pg.vjp(clip, x)
    np.testing.assert_allclose(_np(out), _np(x))
    np.testing.assert_allclose(_np(pull(xp.asarray([-5.0, 0.5, 5.0]))[0]), [-1.0, 0.5, 1.0])
    assert x._node is None  # the argument returned as is was not taken over


def test_custom_vjp_residuals_and_higher_order(xp):
    @pg.custom_vjp
    def cube(x):
        return x * x * x

    def fwd(x):
        return cube(x), x * x

    cube.defvjp(fwd, lambda x2, g: (3.0 * x2 * g,))
    x = xp.asarray([0.5, -2.0])
    np.testing.assert_allclose(_np(pg.grad(lambda x: xp.sum(cube(x)))(x)), 3 * _np(x) ** 2)
    # grad of grad differentiates bwd through its residuals (recorded by fwd)
    gg = pg.grad(lambda x: xp.sum(pg.grad(lambda y: xp.sum(cube(y)))(x)))(x)
    np.testing.assert_allclose(_np(gg), 6 * _np(x))


def test_custom_vjp_under_jvp_raises(xp):
    clip = _clip_gradient(xp, -1.0, 1.0)
    x = xp.asarray([1.0, 2.0])
    with pytest.raises(TypeError, match="forward-mode.*custom_vjp"):
        pg.jvp(clip, (x,), (xp.ones_like(x),))


def test_custom_without_rule_or_trace(xp):
    @pg.custom_vjp
    def f(x):
        return 2 * x

    x = xp.asarray([1.0])
    np.testing.assert_allclose(_np(f(x)), [2.0])  # untraced: the function itself
    with pytest.raises(TypeError, match="defvjp"):
        pg.grad(lambda x: xp.sum(f(x)))(x)
    g = pg.custom_jvp(lambda x: 2 * x)
    with pytest.raises(TypeError, match="defjvp"):
        pg.jvp(g, (x,), (x,))
