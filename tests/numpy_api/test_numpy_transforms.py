"""The transforms through NumPy's calls on our arrays: jvp, vmap, hessian, compile and the
imperative backward."""

from __future__ import annotations

import numpy as np
from _numpy_common import XP, S, _np

import pycograd_xp as pg

# -- transforms through the protocols --------------------------------------------------------------


def test_jvp_vmap_and_hessian_through_numpy_calls():
    a = S(3, 4)

    def f(x):
        return np.sum(np.tanh(np.einsum("ij,jk->ik", x, x.T)))

    x = XP.asarray(a)
    _, t = pg.jvp(f, (x,), (XP.ones_like(x),))
    g = pg.grad(f)(x)
    np.testing.assert_allclose(float(t), float(XP.sum(g)), rtol=1e-10)
    rows = pg.vmap(lambda r: np.sum(np.multiply(np.exp(r), np.arange(4.0))))(x)
    np.testing.assert_allclose(_np(rows), np.sum(np.exp(a) * np.arange(4.0), axis=1))
    h = pg.hessian(lambda v: np.sum(np.sin(v) ** 2))(XP.asarray(S(3)))
    assert tuple(h.shape) == (3, 3)


def test_compile_traces_numpy_calls():
    def f(x):
        return np.sum(np.exp(x) * 2.0, axis=0)

    a = S(2, 3)
    cf = pg.compile(f)
    np.testing.assert_allclose(_np(cf(XP.asarray(a))), np.sum(np.exp(a) * 2.0, axis=0))
    np.testing.assert_allclose(_np(cf(XP.asarray(a + 1))), np.sum(np.exp(a + 1) * 2.0, axis=0))


def test_imperative_backward_through_numpy_calls():
    w = XP.asarray(S(3))
    w.requires_grad_()
    loss = np.sum(np.square(w)) + np.linalg.norm(w)
    loss.backward()
    v = _np(w)
    np.testing.assert_allclose(_np(w.grad), 2 * v + v / np.linalg.norm(v), rtol=1e-12)


def test_the_per_op_path_is_untouched():
    """The ordinary xp.* functions are the same objects whatever the protocols do."""
    assert "array_ufunc" not in XP.exp.__code__.co_names
    assert type(XP.exp(XP.ones(2))) is XP.Array
