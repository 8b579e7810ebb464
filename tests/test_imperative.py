"""The imperative face: requires_grad_, backward, .grad, mutation, boundaries."""

from __future__ import annotations

import numpy as np
import pytest

import pycograd_xp as pg
from conformance.gradcheck import to_numpy


def test_backward_accumulates_and_resets(xp):
    w = xp.asarray([1.0, -2.0]).requires_grad_()
    assert w.requires_grad and w.grad is None
    loss = xp.sum(w * w)
    loss.backward()
    np.testing.assert_allclose(to_numpy(w.grad), [2.0, -4.0])
    xp.sum(3 * w).backward()
    np.testing.assert_allclose(to_numpy(w.grad), [5.0, -1.0])
    w.grad = None
    assert w.grad is None


def test_backward_twice_needs_retain_graph(xp):
    w = xp.asarray([1.0, 2.0]).requires_grad_()
    loss = xp.sum(xp.sin(w))
    loss.backward(retain_graph=True)
    loss.backward()
    np.testing.assert_allclose(to_numpy(w.grad), 2 * np.cos([1.0, 2.0]))
    with pytest.raises(RuntimeError, match="second time.*retain_graph=True"):
        loss.backward()


def test_backward_nonscalar_needs_cotangent(xp):
    w = xp.asarray([1.0, 2.0]).requires_grad_()
    y = w * 3
    with pytest.raises(RuntimeError, match="needs a cotangent"):
        y.backward()
    y.backward(xp.asarray([1.0, 10.0]))
    np.testing.assert_allclose(to_numpy(w.grad), [3.0, 30.0])
    with pytest.raises(RuntimeError, match="does not depend on any array that requires grad"):
        xp.ones(2).backward()


def test_backward_create_graph(xp):
    x = xp.asarray(1.5).requires_grad_()
    y = x**3
    y.backward(create_graph=True)
    gx = x.grad
    assert float(pg.stop_gradient(gx)) == pytest.approx(3 * 1.5**2)


def test_requires_grad_rules(xp):
    with pytest.raises(TypeError, match="only floating-point arrays"):
        xp.asarray([1, 2]).requires_grad_()
    w = xp.ones(2).requires_grad_()
    with pytest.raises(RuntimeError, match="only leaves"):
        (w * 2).requires_grad_(False)
    w.requires_grad_(False)
    assert not w.requires_grad


def test_leaf_mutation_rules(xp):
    w = xp.asarray([1.0, 2.0]).requires_grad_()
    with pytest.raises(RuntimeError, match="leaf that requires grad"):
        w += 1.0
    with pytest.raises(RuntimeError, match="leaf that requires grad"):
        w[0] = 5.0
    np.testing.assert_array_equal(to_numpy(w), [1.0, 2.0])  # state unchanged by the errors
    xp.sum(w * w).backward()
    with pg.no_grad():  # an optimizer step keeps the leaf a leaf, with its .grad
        w -= 0.5 * w.grad
    assert w.requires_grad and w.grad is not None
    np.testing.assert_allclose(to_numpy(w), [0.0, 0.0])


def test_mutation_under_autodiff(xp):
    # y = x * 1; y[0:2] = v; the overwritten slots give x no gradient, v gets theirs
    def f(x, v):
        y = x * 1.0
        y[0:2] = v * 2.0
        y *= 3.0
        return xp.sum(y * y)

    x, v = xp.asarray([1.0, 2.0, 3.0]), xp.asarray([0.5, -1.0])
    gx, gv = pg.grad(f, argnums=(0, 1))(x, v)
    np.testing.assert_allclose(to_numpy(gx), [0.0, 0.0, 2 * 9 * 3.0])
    np.testing.assert_allclose(to_numpy(gv), 2 * 9 * 2.0 * 2.0 * np.array([0.5, -1.0]))


def test_earlier_uses_keep_their_value(xp):
    def f(x):
        y = x * 1.0
        z = xp.sum(y * y)  # uses y before the write
        y[1] = 10.0
        return z + xp.sum(y)

    g = pg.grad(f)(xp.asarray([1.0, 2.0]))
    np.testing.assert_allclose(to_numpy(g), [2 * 1.0 + 1.0, 2 * 2.0])


def test_duplicate_indices_accumulate(xp):
    idx = xp.asarray([0, 0, 2])
    g = pg.grad(lambda x: xp.sum(xp.take(x, idx) * xp.asarray([1.0, 2.0, 3.0])))(xp.zeros(3))
    np.testing.assert_allclose(to_numpy(g), [3.0, 0.0, 3.0])


def test_boundaries_refuse_tracked_arrays(xp):
    def f(x):
        for conv in (float, bool, np.asarray):
            with pytest.raises(TypeError, match="stop_gradient.*detach"):
                conv(x)
        with pytest.raises(TypeError, match="stop_gradient.*detach"):
            x.__dlpack__()
        assert float(pg.stop_gradient(x)) == 2.0 and float(x.detach()) == 2.0
        y = xp.asarray(x)  # asarray keeps the tape
        assert y.requires_grad
        return y * y

    g = pg.grad(f)(xp.asarray(2.0))
    assert float(g) == 4.0


def test_tape_keeps_only_declared_residuals(xp):
    from pycograd_xp._tape import ShapeDtype

    x = xp.asarray([1.0, 2.0]).requires_grad_()
    s = xp.sin(x)  # sin saves x, not its output
    assert not isinstance(s._node.args[0], ShapeDtype)
    assert s._node.out is None  # the output is not kept alive by the graph
    e = xp.exp(x)  # exp saves its output, not x
    assert isinstance(e._node.args[0], ShapeDtype) and not isinstance(e._node.out, ShapeDtype)
    a = x + x  # add saves nothing
    assert all(isinstance(v, ShapeDtype) for v in a._node.args)
    loss = xp.sum(s + e + a)
    loss.backward()
    assert s._node.args is None and e._node.out is None  # freed after their VJP ran


def test_writes_into_saved_buffers_do_not_change_gradients(xp):
    x = xp.asarray([1.0, 2.0])  # data: no gradient flows through it
    w = xp.asarray([3.0, 4.0]).requires_grad_()
    loss = xp.sum(w * x)  # the tape saves x for w's gradient
    x[0] = 100.0  # copy-on-write: the saved value stays
    loss.backward()
    np.testing.assert_array_equal(to_numpy(w.grad), [1.0, 2.0])
    np.testing.assert_array_equal(to_numpy(x), [100.0, 2.0])


def test_untracked_writes_are_in_place_on_numpy():
    xp = pg.namespace(np)
    x = xp.asarray([1.0, 2.0, 3.0])
    alias = xp.asarray(x, copy=False)
    x[0] = 7.0
    assert float(alias[0]) == 7.0  # NumPy semantics where no tape is involved
