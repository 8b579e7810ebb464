"""jvp, jacfwd, jacrev, hessian: values against finite differences and against each other,
pytrees, nesting with grad in both orders, and errors (the per-row rules are swept in
conformance/test_jvp.py)."""

from __future__ import annotations

import numpy as np
import pytest

import pycograd_xp as pg


def _np(a):
    return np.asarray(pg.unwrap(a))


def _fd_jacobian(f, x, eps=1e-6):
    """Central-difference Jacobian of ``f`` (NumPy in, NumPy out): shape out + in."""
    cols = []
    for k in range(x.size):
        e = np.zeros(x.size)
        e[k] = eps
        e = e.reshape(x.shape)
        cols.append(((f(x + e) - f(x - e)) / (2 * eps)).reshape(-1))
    out = f(x)
    return np.stack(cols, axis=-1).reshape(out.shape + x.shape)


def _f(xp):
    return lambda x: xp.sin(x) * xp.sum(x**2) + xp.linalg.matrix_transpose(x) @ x[:, :1]


def test_jacobians_match_finite_differences_and_each_other(xp):
    f = _f(xp)
    x0 = np.random.default_rng(0).standard_normal((3, 3))
    x = xp.asarray(x0)
    fd = _fd_jacobian(lambda a: _np(f(xp.asarray(a))), x0)
    jf, jr = _np(pg.jacfwd(f)(x)), _np(pg.jacrev(f)(x))
    assert jf.shape == jr.shape == (3, 3, 3, 3)
    np.testing.assert_allclose(jf, fd, atol=1e-7)
    np.testing.assert_allclose(jr, jf, atol=1e-12)


def test_hessian_forward_over_reverse_matches_reverse_over_reverse(xp):
    def f(x):
        return xp.sum(xp.tanh(x) ** 3) + xp.prod(x)

    x0 = np.array([0.3, -0.7, 1.1])
    x = xp.asarray(x0)
    h = _np(pg.hessian(f)(x))
    fd = _fd_jacobian(lambda a: _np(pg.grad(f)(xp.asarray(a))), x0)
    np.testing.assert_allclose(h, fd, atol=1e-7)
    np.testing.assert_allclose(h, _np(pg.jacrev(pg.jacrev(f))(x)), atol=1e-12)
    np.testing.assert_allclose(h, h.T, atol=1e-12)


def test_jvp_pytrees_and_argnums(xp):
    def f(p, x):
        return {"y": xp.tanh(x @ p["w"] + p["b"]), "n": xp.sum(p["w"] ** 2)}

    rng = np.random.default_rng(1)
    p = {"w": xp.asarray(rng.standard_normal((3, 2))), "b": xp.asarray(rng.standard_normal(2))}
    x = xp.asarray(rng.standard_normal((4, 3)))
    tp = {"w": xp.ones_like(p["w"]), "b": xp.zeros_like(p["b"])}
    out, t = pg.jvp(f, (p, x), (tp, xp.zeros_like(x)))
    assert set(t) == {"y", "n"} and t["y"].shape == (4, 2)
    np.testing.assert_allclose(_np(t["n"]), 2 * np.sum(_np(p["w"])))
    eps = 1e-6
    up = f({"w": p["w"] + eps * tp["w"], "b": p["b"]}, x)["y"]
    dn = f({"w": p["w"] - eps * tp["w"], "b": p["b"]}, x)["y"]
    np.testing.assert_allclose(_np(t["y"]), (_np(up) - _np(dn)) / (2 * eps), atol=1e-7)
    # Jacobians of pytrees: output structure outside, the argnums structure inside
    jac = pg.jacrev(f, argnums=(0, 1))(p, x)
    assert jac["y"][0]["w"].shape == (4, 2, 3, 2) and jac["y"][1].shape == (4, 2, 4, 3)
    jf = pg.jacfwd(f, argnums=(0, 1))(p, x)
    for a, b in ((jac["y"][0]["w"], jf["y"][0]["w"]), (jac["n"][0]["b"], jf["n"][0]["b"]),
                 (jac["y"][1], jf["y"][1])):  # fmt: skip
        np.testing.assert_allclose(_np(a), _np(b), atol=1e-12)


def test_grad_of_jvp_and_jvp_of_jvp(xp):
    def f(x):
        return xp.sum(xp.exp(x) * x)

    x0 = np.array([0.2, -0.4])
    x, v = xp.asarray(x0), xp.asarray([1.0, 2.0])
    # d/dx <grad f(x), v> = H v, with H = diag((x + 2) e^x)
    hv = pg.grad(lambda x: pg.jvp(f, (x,), (v,))[1])(x)
    np.testing.assert_allclose(_np(hv), (x0 + 2) * np.exp(x0) * _np(v), rtol=1e-12)
    # jvp of jvp: the second directional derivative v^T H v
    d2 = pg.jvp(lambda x: pg.jvp(f, (x,), (v,))[1], (x,), (v,))[1]
    np.testing.assert_allclose(float(_np(d2)), np.sum((x0 + 2) * np.exp(x0) * _np(v) ** 2))


def test_jvp_output_independent_of_input_and_has_aux(xp):
    x = xp.asarray([1.0, 2.0])
    out, t, aux = pg.jvp(lambda x: (xp.ones(3), xp.sum(x)), (x,), (x,), has_aux=True)
    np.testing.assert_allclose(_np(t), np.zeros(3))
    np.testing.assert_allclose(_np(aux), 3.0)
    assert out._node is None and t._node is None


def test_jvp_errors(xp):
    x = xp.asarray([1.0, 2.0])
    with pytest.raises(TypeError, match="tuples"):
        pg.jvp(xp.sin, x, x)
    with pytest.raises(ValueError, match="shape"):
        pg.jvp(xp.sin, (x,), (xp.ones(3),))
    with pytest.raises(ValueError, match="structure"):
        pg.jvp(xp.sin, (x,), (x, x))


def test_remat_under_jvp_and_hessian(xp):
    def f(x):
        return xp.sum(xp.sin(x) * x, axis=0)

    x = xp.asarray(np.random.default_rng(2).standard_normal((3, 2)))
    t = xp.ones_like(x)
    np.testing.assert_allclose(_np(pg.jvp(pg.remat(f), (x,), (t,))[1]),
                               _np(pg.jvp(f, (x,), (t,))[1]), atol=1e-12)  # fmt: skip
    h1 = pg.hessian(lambda x: xp.sum(pg.remat(f)(x) ** 2))(x)
    np.testing.assert_allclose(_np(h1), _np(pg.hessian(lambda x: xp.sum(f(x) ** 2))(x)),
                               atol=1e-12)  # fmt: skip
