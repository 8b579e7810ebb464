"""The transforms: grad, value_and_grad, vjp, higher order, grad mode, stop_gradient."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np
import pytest

import pycograd_xp as pg
from conformance.gradcheck import to_numpy


def f_cubic(xp):
    return lambda x: xp.sum(x**3 + xp.sin(x))


def test_grad_matches_analytic(xp):
    x = xp.asarray([0.5, -1.0, 2.0])
    g = pg.grad(f_cubic(xp))(x)
    a = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(to_numpy(g), 3 * a**2 + np.cos(a))
    assert type(g) is xp.Array and not g.requires_grad
    assert not x.requires_grad  # the caller's array is untouched


def test_value_and_grad_argnums_and_aux(xp):
    def f(a, b, c):
        return xp.sum(a * b) + c, {"norm": xp.sum(a * a)}

    a, b = xp.asarray([1.0, 2.0]), xp.asarray([3.0, 4.0])
    c = xp.asarray(0.5)
    (value, aux), (ga, gc) = pg.value_and_grad(f, argnums=(0, 2), has_aux=True)(a, b, c)
    assert float(value) == 11.5 and float(aux["norm"]) == 5.0
    np.testing.assert_allclose(to_numpy(ga), [3.0, 4.0])
    assert float(gc) == 1.0
    g, aux2 = pg.grad(f, has_aux=True)(a, b, c)
    np.testing.assert_allclose(to_numpy(g), [3.0, 4.0])
    assert not value.requires_grad and not aux["norm"].requires_grad


class Pair(NamedTuple):
    w: object
    b: object


@dataclasses.dataclass
class Params:
    w: object
    extra: list


def test_pytrees_in_and_out(xp):
    params = {
        "layer": Pair(xp.asarray([1.0, 2.0]), xp.asarray(0.5)),
        "dc": Params(xp.asarray([3.0]), [xp.asarray(2.0)]),
    }

    def loss(p):
        return xp.sum(p["layer"].w ** 2) + p["layer"].b * 3 + xp.sum(p["dc"].w) * p["dc"].extra[0]

    g = pg.grad(loss)(params)
    assert isinstance(g["layer"], Pair) and isinstance(g["dc"], Params)
    np.testing.assert_allclose(to_numpy(g["layer"].w), [2.0, 4.0])
    assert float(g["layer"].b) == 3.0
    np.testing.assert_allclose(to_numpy(g["dc"].w), [2.0])
    assert float(g["dc"].extra[0]) == 3.0


def test_vjp_any_output_shape_called_twice(xp):
    x = xp.asarray([[1.0, 2.0], [3.0, 4.0]])
    out, pullback = pg.vjp(lambda x: (xp.exp(x), xp.sum(x, axis=0)), x)
    u = (xp.ones((2, 2)), xp.asarray([1.0, -1.0]))
    (g1,) = pullback(u)
    (g2,) = pullback(u)
    want = np.exp(to_numpy(x)) + np.array([1.0, -1.0])
    np.testing.assert_allclose(to_numpy(g1), want)
    np.testing.assert_allclose(to_numpy(g2), want)
    with pytest.raises(ValueError, match="cotangent has shape"):
        pullback((xp.ones((2,)), xp.ones((2,))))


def test_unused_input_gets_zeros(xp):
    g = pg.grad(lambda a, b: xp.sum(a), argnums=1)(xp.ones(3), xp.ones((2, 2)))
    np.testing.assert_array_equal(to_numpy(g), np.zeros((2, 2)))


def test_errors(xp):
    with pytest.raises(TypeError, match=r"scalar \(shape \(\)\) array, got shape \(3,\)"):
        pg.grad(lambda x: x * 2)(xp.ones(3))
    with pytest.raises(TypeError, match="dtype .*int64; only floating-point arrays"):
        pg.grad(lambda x: xp.sum(x))(xp.asarray([1, 2]))
    with pytest.raises(TypeError, match="dtype .*bool"):
        pg.grad(lambda x: xp.sum(x))(xp.asarray([True]))
    with pytest.raises(TypeError, match="returned a float"):
        pg.grad(lambda x: 1.0)(xp.ones(3))
    with pytest.raises(TypeError, match="not an array of a pycograd_xp namespace"):
        pg.grad(lambda x: x)(1.0)
    with pytest.raises(TypeError, match="real floating-point output"):
        pg.grad(lambda x: xp.sum(xp.astype(x, xp.complex128)))(xp.ones(2))
    with pytest.raises(ValueError, match="argnums=3"):
        pg.grad(lambda x: xp.sum(x), argnums=3)(xp.ones(2))


def test_higher_order_and_hvp(xp):
    f = lambda x: xp.sum(xp.sin(x) * x**2)
    x = xp.asarray([0.3, -1.2, 2.0])
    a = to_numpy(x)
    d2 = pg.grad(lambda x: xp.sum(pg.grad(f)(x)))(x)
    # f'' = 2 sin + 4x cos - x^2 sin (the Hessian is diagonal)
    np.testing.assert_allclose(
        to_numpy(d2), 2 * np.sin(a) + 4 * a * np.cos(a) - a**2 * np.sin(a), rtol=1e-10
    )
    # Hessian-vector product, reverse over reverse, against finite differences of the gradient
    v = xp.asarray([1.0, 0.5, -2.0])
    hvp = pg.grad(lambda x: xp.sum(pg.grad(f)(x) * v))(x)
    eps = 1e-6
    gp = to_numpy(pg.grad(f)(xp.asarray(a + eps * to_numpy(v))))
    gm = to_numpy(pg.grad(f)(xp.asarray(a - eps * to_numpy(v))))
    np.testing.assert_allclose(to_numpy(hvp), (gp - gm) / (2 * eps), rtol=1e-6)
    # through tanh, whose rule updates a fresh temporary with augmented assignment
    t = xp.asarray([0.3, -0.7])
    d2t = pg.grad(lambda x: xp.sum(pg.grad(lambda y: xp.sum(xp.tanh(y)))(x)))(t)
    th = np.tanh(to_numpy(t))
    np.testing.assert_allclose(to_numpy(d2t), -2 * th * (1 - th**2), rtol=1e-12)
    # third order
    d3 = pg.grad(lambda x: pg.grad(lambda y: pg.grad(lambda z: xp.sum(z**4))(y)[0])(x)[0])(x)
    np.testing.assert_allclose(to_numpy(d3), [24 * a[0], 0.0, 0.0])


def test_hessian_of_matrix_function(xp):
    # A non-elementwise Hessian: f(x) = log det(A + x x^T), checked column by column
    a = np.array([[3.0, 0.5, 0.0], [0.5, 2.0, 0.3], [0.0, 0.3, 4.0]])
    A = xp.asarray(a)

    def f(x):
        return xp.log(xp.linalg.det(A + xp.linalg.outer(x, x)))

    x0 = np.array([0.2, -0.4, 0.7])
    eps = 1e-6
    for i in range(3):
        e = np.zeros(3)
        e[i] = 1.0
        col = pg.grad(lambda x, e=e: xp.sum(pg.grad(f)(x) * xp.asarray(e)))(xp.asarray(x0))
        fd = (
            to_numpy(pg.grad(f)(xp.asarray(x0 + eps * e)))
            - to_numpy(pg.grad(f)(xp.asarray(x0 - eps * e)))
        ) / (2 * eps)
        np.testing.assert_allclose(to_numpy(col), fd, rtol=1e-6, atol=1e-8)


def test_no_grad_and_enable_grad(xp):
    x = xp.ones(2).requires_grad_()
    with pg.no_grad():
        y = x * 2
        with pg.enable_grad():
            z = x * 2
    assert not y.requires_grad and z.requires_grad

    @pg.no_grad()
    def step(a):
        return a * 3

    assert not step(x).requires_grad


def test_stop_gradient(xp):
    g = pg.grad(lambda x: xp.sum(x * pg.stop_gradient(x)))(xp.asarray([1.0, 2.0]))
    np.testing.assert_allclose(to_numpy(g), [1.0, 2.0])
    tree = pg.stop_gradient({"a": xp.ones(1).requires_grad_() * 2})
    assert not tree["a"].requires_grad


@pytest.mark.parametrize("which", ["slogdet", "eigh", "unstack"])
def test_higher_order_through_multi_output_functions(which):
    # second derivatives need the saved outputs of multi-output rows as tracked arrays
    xp = pg.namespace(np)
    a = np.array([[3.0, 0.5, 0.0], [0.5, 2.0, 0.3], [0.0, 0.3, 4.0]])

    def f(x):
        m = xp.asarray(a) + xp.linalg.outer(x, x)
        if which == "slogdet":
            return xp.linalg.slogdet(m).logabsdet
        if which == "eigh":
            w, v = xp.linalg.eigh(m)
            return xp.sum(w**3) + xp.sum(v[:, 0] ** 4)
        return xp.sum(xp.unstack(m)[1] ** 3)

    x0, v = np.array([0.2, -0.4, 0.7]), np.array([1.0, -0.5, 0.25])
    hvp = pg.grad(lambda x: xp.sum(pg.grad(f)(x) * xp.asarray(v)))(xp.asarray(x0))
    eps = 1e-6
    fd = (
        to_numpy(pg.grad(f)(xp.asarray(x0 + eps * v)))
        - to_numpy(pg.grad(f)(xp.asarray(x0 - eps * v)))
    ) / (2 * eps)
    np.testing.assert_allclose(to_numpy(hvp), fd, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", ["unique_values", "unique_all", "unique_counts", "unique_inverse"])
def test_unique_gradient_goes_to_first_occurrences(xp, name):
    x = xp.asarray([[0.5, -1.0, 2.0], [0.5, 3.0, -1.0]])
    w = xp.asarray([1.0, 2.0, 3.0, 4.0])  # one weight per unique value: -1, 0.5, 2, 3

    def f(x):
        r = getattr(xp, name)(x)
        values = r if name == "unique_values" else r.values
        return xp.sum(values * w)

    g = pg.grad(f)(x)
    np.testing.assert_array_equal(to_numpy(g), [[2.0, 1.0, 3.0], [0.0, 4.0, 0.0]])


def test_matrix_norm_orders_numpy_spells_for_frobenius_get_its_gradient():
    """NumPy's ``matrix_norm`` also takes ``ord=None`` and ``ord="f"`` for the Frobenius norm;
    their gradients are the Frobenius norm's (they were the smallest singular value's: the
    VJP's SVD branch took every order it did not name; it now takes only 2, -2 and "nuc")."""
    xp = pg.namespace(np)
    x = xp.asarray(np.random.default_rng(0).standard_normal((2, 3, 4)))
    want = pg.grad(lambda x: xp.sum(xp.linalg.matrix_norm(x, ord="fro")))(x)
    np.testing.assert_allclose(
        np.asarray(want),
        np.asarray(x) / np.linalg.norm(np.asarray(x), axis=(-2, -1), keepdims=True),
    )
    for o in (None, "f"):
        got = pg.grad(lambda x, o=o: xp.sum(xp.linalg.matrix_norm(x, ord=o, keepdims=True)))(x)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-13)


def test_inputs_over_one_backend_array_each_get_their_own_cotangent(xp):
    """Two tracked inputs may share one backend array (``xp.asarray`` twice of one NumPy
    array, one Array passed twice, a pytree holding it twice): x * y then gives each its own
    cotangent (a rule sees only the arrays: x1 is x2 for both; the tape knows the parents).
    x * x of one input still takes one term, 2 g x, the bits of g x + g x."""
    a = np.array([1.0, 2.0, 3.0])
    x, y = xp.asarray(a), xp.asarray(a)
    for args in ((x, y), (x, x)):
        gx, gy = pg.grad(lambda p, q: xp.sum(p * q), argnums=(0, 1))(*args)
        np.testing.assert_array_equal(to_numpy(gx), a)
        np.testing.assert_array_equal(to_numpy(gy), a)
    g = pg.grad(lambda t: xp.sum(t["a"] * t["b"]))({"a": x, "b": x})
    np.testing.assert_array_equal(to_numpy(g["a"]), a)
    np.testing.assert_array_equal(to_numpy(g["b"]), a)
    _, pull = pg.vjp(lambda p, q: p * q, x, y)
    ct = xp.asarray([1.0, -1.0, 0.5])
    np.testing.assert_array_equal([to_numpy(c) for c in pull(ct)], [a * [1, -1, 0.5]] * 2)
    np.testing.assert_array_equal(to_numpy(pg.grad(lambda t: xp.sum(t * t))(x)), 2 * a)


def test_to_device_of_its_own_device_keeps_the_gradient(xp):
    """``x.to_device(x.device)`` is the array itself (the standard allows it): the gradient
    flows through (it once came back zeros: a fresh, untracked copy)."""
    x = xp.asarray([0.0, 1.0, 2.0])
    g = pg.grad(lambda t: xp.sum(t.to_device(t.device) ** 2))(x)
    np.testing.assert_array_equal(to_numpy(g), [0.0, 2.0, 4.0])
