"""What a new user meets first: contradicting arguments refused, trees checked, errors that
name what the user called, hints where a NumPy/PyTorch habit meets the standard, a NaN loss
never silent."""

from __future__ import annotations

import numpy as np
import pytest

import pycograd_xp as pg
from pycograd_xp import nn, optim, train

xp = pg.namespace(np)


def test_contradicting_causal_arguments_are_refused():
    q = xp.ones((3, 4))
    with pytest.raises(ValueError, match=r"is_causal=True and causal=False contradict"):
        nn.scaled_dot_product_attention(q, q, q, is_causal=True, causal=False)
    a = nn.scaled_dot_product_attention(q, q, q, causal=True)
    b = nn.scaled_dot_product_attention(q, q, q, is_causal=True, causal=True)
    assert bool(xp.all(a == b))


def test_optimizer_update_checks_its_trees_as_optax():
    w = xp.ones(3)
    for tx in (optim.adam(0.1), optim.sgd(0.1, momentum=0.9), optim.rmsprop(0.1)):
        with pytest.raises(ValueError, match=r"structure|structures differ"):
            tx.update({"a": w}, tx.init({"b": w}), {"a": w})


def test_optimizer_init_names_itself_on_plain_numbers():
    with pytest.raises(TypeError, match=r"init\(params\): a parameter leaf is a float"):
        optim.adam(0.1).init([1.0, 2.0])


def test_errors_name_the_transform_called():
    with pytest.raises(TypeError, match=r"^grad\(<lambda>\): the function must return a scalar"):
        pg.grad(lambda w: w * 2)(xp.ones(2))
    with pytest.raises(TypeError, match=r"^value_and_grad\(<lambda>\)"):
        pg.value_and_grad(lambda w: w * 2)(xp.ones(2))


def test_a_scipy_ufunc_without_a_rule_is_named_as_scipys():
    special = pytest.importorskip("scipy.special")
    x = xp.ones(3)
    x.requires_grad_()
    with pytest.raises(TypeError, match=r"^scipy\.special\.struve\(\) was given"):
        special.struve(1.0, x)


@pytest.mark.parametrize(
    "name, hint",
    [("sum", r"xp\.sum\(x\)"), ("tolist", r"numpy\.asarray\(x\)\.tolist\(\)"), ("numpy", "")],
)
def test_numpy_and_pytorch_methods_say_the_standard_way(name, hint):
    x = xp.ones(3)
    with pytest.raises(AttributeError, match=rf"no attribute '{name}': .*{hint}"):
        getattr(x, name)
    assert not hasattr(x, name)
    with pytest.raises(AttributeError):
        x.no_such_thing  # noqa: B018 - a plain AttributeError, no hint


def test_unary_functions_take_python_numbers_as_numpy():
    assert float(xp.exp(0.0)) == 1.0
    assert xp.isnan(float("nan")).dtype == xp.bool


def test_fit_does_not_pass_a_nan_loss_in_silence():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((20, 3)), np.ones(20)
    x[7, 1] = np.nan
    batches = [(xp.asarray(x[i : i + 5]), xp.asarray(y[i : i + 5])) for i in range(0, 20, 5)]
    tx = optim.sgd(0.1)
    step = train.make_step(lambda w, x, y: xp.mean((x @ w - y) ** 2), tx)
    w = xp.zeros(3)
    kw = dict(epochs=1, progress=False, log=None)
    with pytest.warns(RuntimeWarning, match=r"the loss is nan at step 2 of epoch 1"):
        train.fit(step, w, tx.init(w), batches, **kw)
    with pytest.raises(FloatingPointError, match=r"step 2 of epoch 1"):
        train.fit(step, w, tx.init(w), batches, nan="raise", **kw)
    with pytest.raises(ValueError, match=r"nan must be"):
        train.fit(step, w, tx.init(w), batches, nan="stop", **kw)


def test_debug_nans_names_the_op_that_made_the_nan():
    x = xp.asarray([0.0, 1.0])
    with pg.debug_nans(), np.errstate(all="ignore"):
        with pytest.raises(FloatingPointError, match=r"debug_nans: divide\(\) made a NaN"):
            pg.grad(lambda x: xp.sum(x / x))(x)
        # the forward is finite; sqrt's VJP at 0 makes 0 / 0
        with pytest.raises(FloatingPointError, match=r"the VJP of sqrt\(\) made a NaN"):
            pg.grad(lambda x: xp.sum(xp.sqrt(x) * 0.0 + x))(x)
        # a NaN passed on is not blamed on the op that carries it
        y = xp.asarray([np.nan, 1.0])
        g = pg.grad(lambda y: xp.sum(y * 2.0))(y)
        assert np.isnan(np.asarray(pg.unwrap(g))).sum() == 0
    with np.errstate(all="ignore"):  # off again outside the block
        assert np.isnan(np.asarray(pg.unwrap(pg.grad(lambda x: xp.sum(x / x))(x)))).any()


def test_fit_nan_debug_stops_at_the_op():
    tx = optim.sgd(0.1)
    step = train.make_step(lambda w, x: xp.mean(xp.log(x @ w)), tx)
    w = xp.asarray([1.0, -1.0])
    batches = [(xp.asarray(np.array([[1.0, 2.0]])),)]  # x @ w = -1: log of a negative number
    with np.errstate(all="ignore"), pytest.raises(FloatingPointError, match=r"log\(\) made"):
        train.fit(step, w, tx.init(w), batches, epochs=1, progress=False, log=None, nan="debug")
