"""Multi-tensor optimizer updates (optim/_foreach.py): bit for bit the per-parameter updates, on
float32, float64 and mixed trees of odd shapes (0-d, length 1, strided and transposed views),
eager and compiled, under vmap; the per-parameter code where they do not apply (a backend
without ``out=``, an update being differentiated, a traced or projected step)."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

import pycograd_xp as pg
from pycograd_xp import memory, nn, optim
from pycograd_xp.optim import _foreach
from pycograd_xp.train import make_step

xp = pg.namespace(np)

OPTIMIZERS = {
    "sgd": lambda: optim.sgd(0.1),
    "sgd-decay-mask": lambda: optim.sgd(
        0.1, weight_decay=0.01, mask=lambda p: pg.tree_map(lambda a: a.ndim > 1, p)
    ),
    "momentum": lambda: optim.momentum(0.05, 0.9),
    "nesterov-decay": lambda: optim.sgd(0.05, momentum=0.8, nesterov=True, weight_decay=1e-3),
    "rmsprop": lambda: optim.rmsprop(1e-2),
    "rmsprop-momentum": lambda: optim.rmsprop(1e-2, decay=0.8, momentum=0.5),
    "adagrad": lambda: optim.adagrad(0.1, initial_accumulator=0.1),
    "adam": lambda: optim.adam(1e-2),
    "adam-schedule": lambda: optim.adam(optim.cosine_decay_schedule(1e-2, 10)),
    "adamw-mask": lambda: optim.adamw(
        1e-2, weight_decay=0.1, mask=lambda p: pg.tree_map(lambda a: a.ndim > 1, p)
    ),
}
PASSES = {"sgd": "sgd", "rmsprop": "rmsprop", "adagrad": "adagrad", "adam": "adam"}


def _tree(rng, dtypes):
    """Parameters of odd shapes: 0-d, one element, a matrix, a strided view, a transposed view
    and a Linear module; ``dtypes`` cycles over the leaves (mixed trees)."""
    dts = itertools.cycle(dtypes)

    def arr(shape):
        return xp.asarray(rng.standard_normal(shape).astype(next(dts)))

    strided = arr((9,))[::2]
    transposed = xp.permute_dims(arr((4, 3)), (1, 0))
    return {
        "scalar": arr(()),
        "one": arr((1,)),
        "matrix": arr((3, 5)),
        "views": [strided, transposed],
        "layer": nn.Linear(arr((5, 2)), arr((2,))),
    }


def _grads(rng, params):
    return pg.tree_map(lambda p: xp.asarray(rng.standard_normal(p.shape).astype(p.dtype)), params)


def _same(a, b):
    """The two trees are equal bit for bit (values, dtypes, shapes), Python numbers included."""
    la, ta = pg.tree_flatten(a)
    lb, tb = pg.tree_flatten(b)
    assert ta == tb
    for x, y in zip(la, lb, strict=True):
        if hasattr(x, "__array_namespace__"):
            u, v = np.asarray(pg.unwrap(x)), np.asarray(pg.unwrap(y))
            assert u.dtype == v.dtype and u.shape == v.shape
            assert u.tobytes() == v.tobytes()  # bit for bit: -0.0 and NaN too
        else:
            assert x == y


def _counting(monkeypatch):
    """Count the multi-tensor passes that run."""
    ran = {"n": 0}
    for name in ("sgd", "rmsprop", "adagrad", "adam"):
        real = getattr(_foreach, name)

        def spy(*args, _real=real, **kwargs):
            ran["n"] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(_foreach, name, spy)
    return ran


@pytest.mark.parametrize(
    "dtypes", [["float32"], ["float64"], ["float32", "float64"]], ids=["f32", "f64", "mixed"]
)
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_multi_tensor_updates_are_the_per_parameter_updates_bit_for_bit(name, dtypes, monkeypatch):
    ran = _counting(monkeypatch)
    rng = np.random.default_rng(0)
    tx = OPTIMIZERS[name]()
    params = _tree(rng, dtypes)
    fast = slow = (params, tx.init(params))
    for _ in range(4):
        grads = _grads(rng, params)
        with pg.no_grad():
            u, s = tx.update(grads, fast[1], fast[0])
            fast = (optim.apply_updates(fast[0], u), s)
            with _foreach.per_parameter():
                u2, s2 = tx.update(grads, slow[1], slow[0])
                slow = (optim.apply_updates(slow[0], u2), s2)
            _same(u, u2)
    _same(fast, slow)
    assert ran["n"] == 4  # the multi-tensor pass ran at each step (and not per_parameter's)


def test_extreme_values_stay_bit_for_bit():
    """Zeros (signed), infinities, NaN and subnormals through Adam and RMSprop."""
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-45, 3e38], np.float32)
    params = {"w": xp.asarray(special.copy()), "s": xp.asarray(np.float32(-0.0))}
    grads = {"w": xp.asarray(special[::-1].copy()), "s": xp.asarray(np.float32(1e-45))}
    for tx in (optim.adam(1e-3), optim.rmsprop(1e-2, momentum=0.9), optim.adagrad(0.1)):
        with pg.no_grad(), np.errstate(all="ignore"):
            fast = tx.update(grads, tx.init(params), params)
            with _foreach.per_parameter():
                slow = tx.update(grads, tx.init(params), params)
        _same(fast, slow)


def _loss(params, x, y):
    h = nn.relu(params["l1"](x))
    return nn.cross_entropy(params["l2"](h), y)


def _model(rng, dtype="float32"):
    def arr(*shape):
        return xp.asarray((0.3 * rng.standard_normal(shape)).astype(dtype))

    params = {"l1": nn.Linear(arr(6, 8), arr(8)), "l2": nn.Linear(arr(8, 3), arr(3))}
    x = arr(5, 6)
    y = xp.asarray(rng.integers(0, 3, 5))
    return params, x, y


@pytest.mark.parametrize("name", ["sgd-decay-mask", "nesterov-decay", "rmsprop-momentum", "adam"])
def test_a_compiled_step_ends_where_the_eager_steps_end(name):
    """``pg.compile(make_step(...))`` (per-parameter code, traced) and the eager multi-tensor
    step: the same parameters and state, bit for bit."""
    rng = np.random.default_rng(1)
    params, x, y = _model(rng)
    tx = OPTIMIZERS[name]()
    step = make_step(_loss, tx)
    compiled = pg.compile(step)
    eager = traced = reference = (params, tx.init(params))
    for _ in range(3):
        eager = step(*eager, (x, y))[:2]
        traced = compiled(*traced, (x, y))[:2]
        with _foreach.per_parameter():
            reference = step(*reference, (x, y))[:2]
    _same(eager, reference)
    _same(traced, reference)


def test_under_vmap_each_example_gets_its_own_update():
    """A batch of independent Adam updates under vmap (per-parameter code on batched arrays)
    equals the eager multi-tensor update of each."""
    rng = np.random.default_rng(2)
    tx = optim.adam(1e-2)
    params = {"w": xp.asarray(rng.standard_normal((4, 3)).astype(np.float32))}
    grads = {"w": xp.asarray(rng.standard_normal((4, 3)).astype(np.float32))}

    def one(p, g):
        state = tx.init(p)
        u, s = tx.update(g, state, p)
        return optim.apply_updates(p, u), s["mu"], s["nu"]

    with pg.no_grad():
        batched = pg.vmap(one)(params, grads)
        for i in range(4):
            row = one({"w": params["w"][i]}, {"w": grads["w"][i]})
            _same(pg.tree_map(lambda a, i=i: a[i], batched), row)


def test_where_the_per_parameter_code_runs(monkeypatch):
    ran = _counting(monkeypatch)
    rng = np.random.default_rng(3)
    params, x, y = _model(rng, "float64")
    tx = optim.adam(1e-2)
    state = tx.init(params)
    step = make_step(_loss, tx)

    # memory.project evaluates the per-parameter code on abstract arrays
    memory.project(step, params, state, (x, y))
    # an update being differentiated (a meta-gradient) records its ops on the tape
    lr_grad = pg.grad(
        lambda p: xp.sum(optim.apply_updates(p, tx.update(p, tx.init(p), p)[0])["l1"].w)
    )(params)
    assert float(xp.sum(xp.abs(lr_grad["l1"].w))) > 0
    # a NumPy-scalar hyperparameter is not a Python number
    with pg.no_grad():
        optim.sgd(np.float32(0.1)).update(params, {"count": 0, "velocity": None}, params)
    assert ran["n"] == 0
    step(params, state, (x, y))
    assert ran["n"] == 1


def test_a_backend_without_out_takes_the_per_parameter_code(monkeypatch):
    strict = pytest.importorskip("array_api_strict")
    ran = _counting(monkeypatch)
    sx = pg.namespace(strict)
    params = {"w": sx.asarray([1.0, -2.0]), "b": sx.asarray(0.5)}
    tx = optim.adam(0.1)
    with pg.no_grad():
        u, _ = tx.update(params, tx.init(params), params)
    assert ran["n"] == 0
    want, _ = tx.update(
        pg.tree_map(lambda a: xp.asarray(np.asarray(a._data)), params),
        tx.init(pg.tree_map(lambda a: xp.asarray(np.asarray(a._data)), params)),
        None,
    )
    for k in params:
        assert np.array_equal(np.asarray(u[k]._data), np.asarray(want[k]._data))


@pytest.mark.parametrize("name", ["momentum", "rmsprop-momentum", "adagrad", "adamw-mask"])
def test_the_projection_bounds_a_multi_tensor_step(name, monkeypatch):
    ran = _counting(monkeypatch)
    rng = np.random.default_rng(4)
    params, x, y = _model(rng, "float64")
    params = pg.tree_map(lambda a: xp.asarray(np.repeat(np.asarray(a._data), 40, axis=-1)), params)
    params["l2"] = nn.Linear(
        xp.asarray(rng.standard_normal((320, 3))), xp.asarray(rng.standard_normal(3))
    )
    x = xp.asarray(np.repeat(np.asarray(x._data), 10, axis=0))
    y = xp.asarray(np.repeat(np.asarray(y._data), 10, axis=0))
    tx = OPTIMIZERS[name]()
    step = make_step(_loss, tx)
    state = tx.init(params)
    p = memory.project(step, params, state, (x, y))
    m = memory.measure(step, params, state, (x, y))
    assert ran["n"] > 0
    assert m.peak_bytes <= p.peak_bytes, (m.peak_bytes, p.peak_bytes)


def test_a_backend_returning_arrays_from_0d_operations_takes_the_multi_tensor_updates(
    monkeypatch,
):
    """CuPy's backend has no scalar type (its 0-d operations give arrays): the multi-tensor
    updates need no scalar conversion there. Modelled on NumPy's backend without its scalar
    entries, over leaves of one dimension or more (NumPy's 0-d results are scalars)."""
    ran = _counting(monkeypatch)
    rng = np.random.default_rng(5)
    params = {"w": xp.asarray(rng.standard_normal((3, 2))), "b": xp.asarray(rng.standard_normal(2))}
    grads = _grads(rng, params)
    backend = params["w"]._backend
    tx = optim.adam(1e-2)
    with _foreach.per_parameter():
        want = tx.update(grads, tx.init(params), params)
    arrays = dataclasses.replace(backend, scalar_type=None, scalar_to_array=None)
    monkeypatch.setattr(type(params["w"]), "_backend", arrays)
    with pg.no_grad():
        got = tx.update(grads, tx.init(params), params)
    assert ran["n"] == 1
    _same(got, want)
