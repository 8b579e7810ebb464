"""Projection of whole training steps: ``memory.project(train.make_step(loss, tx), params,
opt_state, batch)`` from specs, the optimizer's update and state included, compiled or not, and
measured on the real arrays below the projection and close to it."""

from __future__ import annotations

import numpy as np
import pytest

import pycograd_xp as pg
from pycograd_xp import memory, optim
from pycograd_xp.train import make_step

xp = pg.namespace(np)
SIZES = [64, 256, 256, 10]
BATCH = 128
# slots of state per parameter each optimizer keeps
OPTIMIZERS = {
    "sgd": (lambda: optim.sgd(1e-2), 0),
    "momentum": (lambda: optim.momentum(1e-2), 1),
    "adam": (lambda: optim.adam(1e-3), 2),
}


def mlp_loss(params, x, y):
    h = x
    for i, layer in enumerate(params):
        h = h @ layer["w"] + layer["b"]
        if i < len(params) - 1:
            h = xp.tanh(h)
    return xp.mean((h - y) ** 2)


def _param_specs(dtype):
    return [
        {"w": memory.spec((a, b), dtype), "b": memory.spec(b, dtype)}
        for a, b in zip(SIZES[:-1], SIZES[1:], strict=True)
    ]


def _batch_specs(dtype):
    return memory.spec((BATCH, SIZES[0]), dtype), memory.spec((BATCH, SIZES[-1]), dtype)


def _real(specs, seed=0):
    """Arrays of the specs' shapes and dtypes (random normal)."""
    rng = np.random.default_rng(seed)
    return pg.tree_map(
        lambda s: (
            xp.asarray(rng.standard_normal(s.shape).astype(s.dtype))
            if isinstance(s, memory.Spec)
            else s
        ),
        specs,
    )


def _nbytes(specs):
    return sum(s.nbytes for s in pg.tree_leaves(specs) if isinstance(s, memory.Spec))


def _step_from_specs(name, dtype):
    """The optimizer, its state slots per parameter, the MLP's step, and specs for the
    parameters, the optimizer's state and the batch."""
    make, slots = OPTIMIZERS[name]
    tx = make()
    params = _param_specs(dtype)
    return tx, slots, make_step(mlp_loss, tx), params, tx.init(params), _batch_specs(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_a_training_step_projects_from_specs_and_bounds_its_measurement(name, dtype):
    tx, slots, step, params, state, batch = _step_from_specs(name, dtype)
    p = memory.project(step, params, state, batch)
    assert p.what == "as is"  # a step differentiates inside: taken as it is
    param_bytes = _nbytes(params)
    assert _nbytes(state) == slots * param_bytes  # Adam: its two moments
    assert p.argument_bytes == (1 + slots) * param_bytes + _nbytes(batch)
    # the new params and state are live at the end, beside the old ones
    assert p.peak_bytes >= p.argument_bytes + (1 + slots) * param_bytes
    assert p.forward_peak_bytes == p.peak_bytes and p.residual_bytes > 0
    assert [r.phase for r in p.rows].count("forward") > 0
    last = p.rows[-1]  # the optimizer's update closes the step
    assert last.phase == "update" and last.op == "add"
    assert [r.phase for r in p.rows] == sorted(
        (r.phase for r in p.rows), key=("forward", "backward", "update").index
    )
    if name == "adam":
        assert any(r.op == "sqrt" for r in p.rows)
    explicit = memory.project(step, params, state, batch, argnums=())
    # (a first projection may record one metadata query more: isdtype, remembered after it)
    assert explicit.what == "as is" and abs(explicit.peak_bytes - p.peak_bytes) <= 1024

    real_params = _real(params)
    m = memory.measure(step, real_params, tx.init(real_params), _real(batch))
    assert m.argument_bytes == p.argument_bytes
    assert m.peak_bytes <= p.peak_bytes, (m, p.peak_bytes)
    assert m.peak_bytes >= 0.8 * p.peak_bytes, m.peak_bytes / p.peak_bytes
    assert m.forward_peak_bytes == m.peak_bytes


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_a_compiled_step_projects_as_its_replay(name, dtype):
    tx, slots, step, params, state, batch = _step_from_specs(name, dtype)
    compiled = pg.compile(step)
    p = memory.project(compiled, params, state, batch)
    assert p.what == "compiled replay"
    assert not compiled.traces  # projecting neither runs nor caches a trace
    assert p.argument_bytes == (1 + slots) * _nbytes(params) + _nbytes(batch)
    op, phase, i = p.peak_op
    assert p.rows[i].op == op and p.rows[i].phase == phase
    assert p.peak_bytes == max(r.peak_bytes for r in p.rows) + p.overhead_bytes
    assert {r.phase for r in p.rows} == {"forward", "backward", "update"}
    # freed at last use: lower than the same step uncompiled
    assert p.peak_bytes < memory.project(step, params, state, batch).peak_bytes

    real_params = _real(params)
    m = memory.measure(compiled, real_params, tx.init(real_params), _real(batch))
    assert len(compiled.traces) == 1 and compiled.traces[0].peak_bytes == p.peak_bytes
    assert m.peak_bytes <= p.peak_bytes, (m, p.peak_bytes)
    assert m.peak_bytes >= 0.8 * p.peak_bytes, m.peak_bytes / p.peak_bytes
    with pytest.raises(memory.MemoryLimitError, match=rf"at {op} \(row {i}, {phase}\)"):
        p.check(p.peak_bytes - 1)


def test_the_step_count_in_the_state_is_a_python_number():
    tx = optim.adam(optim.cosine_decay_schedule(1e-3, 10))
    params, batch = _param_specs("float32"), _batch_specs("float32")
    state = tx.init(params)
    later = {**state, "count": 7}
    step = make_step(mlp_loss, tx)
    assert (
        memory.project(step, params, later, batch).peak_bytes
        == memory.project(step, params, state, batch).peak_bytes
    )
    compiled = pg.compile(step)
    assert (
        memory.project(compiled, params, later, batch).peak_bytes
        == memory.project(compiled, params, state, batch).peak_bytes
    )


def test_a_step_with_metrics_and_real_arrays_beside_specs():
    tx = optim.adam(1e-3)
    step = make_step(
        lambda p, x, y: (mlp_loss(p, x, y), {"w0": xp.sum(p[0]["w"] ** 2)}), tx, has_aux=True
    )
    params = _param_specs("float64")
    real_params = _real(params)
    p_specs = memory.project(step, params, tx.init(params), _batch_specs("float64"))
    p_mixed = memory.project(step, real_params, tx.init(real_params), _batch_specs("float64"))
    assert p_specs.peak_bytes == p_mixed.peak_bytes


def test_optimizer_init_takes_specs_and_any_pytree_of_them():
    specs = {
        "layers": [(memory.spec((5, 3), "float32"), memory.spec(3, "float32"))],
        "scale": memory.spec((), "float64"),
    }
    real = _real(specs)
    for tx in [
        optim.sgd(0.1),
        optim.momentum(0.1),
        optim.nesterov(0.1),
        optim.rmsprop(0.1, momentum=0.9),
        optim.adagrad(0.1, initial_accumulator=0.1),
        optim.adam(0.1),
        optim.adamw(0.1),
        optim.chain(optim.clip_by_global_norm(1.0), optim.adam(0.1)),
    ]:
        from_specs, from_arrays = tx.init(specs), tx.init(real)
        leaves, td = pg.tree_flatten(from_specs)
        want, td_want = pg.tree_flatten(from_arrays)
        assert td == td_want
        for got, ref in zip(leaves, want, strict=True):
            if isinstance(ref, pg.Array):
                assert got == memory.spec(ref.shape, ref.dtype)
            else:
                assert got == ref  # the step count: a Python number
    assert _nbytes(optim.adam(0.1).init(specs)) == 2 * _nbytes(specs)


def _user_step(w, x):
    value, g = pg.value_and_grad(lambda w, x: xp.sum((x @ w) ** 2))(w, x)
    return w - 0.1 * g, value


def test_a_function_returning_a_pytree_is_refused_with_the_way_out():
    w, x = memory.spec((40, 30)), memory.spec((50, 40))
    way_out = r"the function returned a tuple of 2 items, not a scalar loss.*pass argnums=\(\)"
    with pytest.raises(TypeError, match=rf"memory.project\(_user_step\): {way_out}"):
        memory.project(_user_step, w, x)
    with pytest.raises(TypeError, match=rf"memory.measure\(_user_step\): {way_out}"):
        memory.measure(_user_step, *_real((w, x)))
    tx = optim.adam(1e-3)
    step = make_step(mlp_loss, tx)  # asked explicitly for a gradient of the step
    with pytest.raises(TypeError, match=r"returned a tuple of 3 items"):
        memory.project(
            step,
            _param_specs("float32"),
            tx.init(_param_specs("float32")),
            _batch_specs("float32"),
            argnums=0,
        )


def test_any_function_projects_as_it_is_with_argnums_empty():
    w, x = memory.spec((400, 300)), memory.spec((500, 400))
    p = memory.project(_user_step, w, x, argnums=())
    assert p.what == "as is" and p.forward_peak_bytes == p.peak_bytes
    assert p.argument_bytes == w.nbytes + x.nbytes
    assert p.peak_bytes >= p.argument_bytes + 2 * w.nbytes  # the gradient and the new w
    assert "f as it is" in str(p).splitlines()[0]
    m = memory.measure(_user_step, *_real((w, x)), argnums=())
    assert 0.8 * p.peak_bytes <= m.peak_bytes <= p.peak_bytes
    # a computation with no gradient at all, returning a pytree
    f = lambda a: {"square": a @ a.T, "t": a.T}
    q = memory.project(f, x, argnums=())
    assert q.peak_bytes >= x.nbytes + 500 * 500 * 8 and q.residual_bytes == 0
    assert memory.measure(f, *_real((x,)), argnums=()).peak_bytes <= q.peak_bytes


def test_a_gradient_step_is_projected_and_measured_as_before():
    w, x = memory.spec((400, 300)), memory.spec((500, 400))
    loss = lambda w, x: xp.sum(xp.tanh(x @ w) ** 2)
    p = memory.project(loss, w, x)
    assert p.what == "value_and_grad" and p.forward_peak_bytes < p.peak_bytes
    m = memory.measure(loss, *_real((w, x)))
    assert m.forward_peak_bytes < m.peak_bytes <= p.peak_bytes


def test_a_step_on_a_chunked_backend_says_what_to_project_instead():
    cubed = pytest.importorskip("cubed")
    tx = optim.adam(1e-3)
    w = memory.spec((4, 3))
    with pytest.raises(NotImplementedError, match=r"only a gradient step .*\(argnums=0"):
        memory.project(
            make_step(lambda w, x: xp.sum(x @ w), tx),
            w,
            tx.init(w),
            (memory.spec((100, 4), chunks=(10, 4)),),
            backend=cubed.Spec(allowed_mem="100MB"),
        )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_replays_in_place_writes_into_strided_slices_are_bounded(dtype):
    """A compiled step of a grouped convolution with a stride and a dilation: the replay adds
    each tap's share into a strided slice of the input's cotangent in place (``t += share``),
    and NumPy writes such a slice back through buffers of its own, beside one per strided
    operand (95 kB for these float32 slices). The replay's projection charged none (its
    measured peak was 5 % over); now its in-place writes cost what the row's rule says, the
    result's own buffer included."""
    r = np.random.default_rng(0)
    xp = pg.namespace(np)
    args = [
        xp.asarray(r.standard_normal(s).astype(dtype)) for s in ((2, 6, 42, 56), (3, 2, 2, 1), (3,))
    ]

    def loss(x, w, b):
        y = pg.nn.conv2d(x, w, b, stride=(1, 2), dilation=2, groups=3)
        return xp.sum(xp.sin(y))

    step = pg.compile(pg.value_and_grad(loss, argnums=(0, 1, 2)))
    projected = memory.project(step, *args, argnums=())
    measured = memory.measure(step, *args, argnums=())
    assert measured.peak_bytes <= projected.traced_peak_bytes
