"""Budgeted steps (``memory.within``, ``grad(..., budget=)``, ``make_step(..., budget=)``): the same
values and gradients as the step without a budget, bit for bit, and a measured peak never above
the budget, over random programs (``programs.py``: float32 beside float64, views, in-place
writes, decompositions) at several budgets, and the models a user trains (a deep MLP, a CNN, a
transformer-like block); a budget below what any schedule reaches is refused before anything
runs, naming the smallest peak and its op."""

from __future__ import annotations

import numpy as np
import pytest
from programs import program

import pycograd_xp as pg
from pycograd_xp import _recompute, memory, nn, optim, train

XP = pg.namespace(np)
FRACTIONS = (0.95, 0.8, 0.6)


def _same(a, b) -> bool:
    la, lb = pg.tree.tree_flatten(a)[0], pg.tree.tree_flatten(b)[0]
    if len(la) != len(lb):
        return False
    pairs = zip(la, lb, strict=True)
    return all(np.array_equal(np.asarray(x), np.asarray(y), equal_nan=True) for x, y in pairs)


def _check_budgets(loss, args, argnums=0, fractions=FRACTIONS) -> list[str]:
    """For each budget: refused (below the floor it names), or bit-identical and measured
    within it. Returns the outcomes, for the caller's coverage checks."""
    full = memory.project(loss, *args, argnums=argnums)
    with np.errstate(all="ignore"):
        v0, g0 = pg.value_and_grad(loss, argnums)(*args)
    outcomes = []
    for frac in fractions:
        budget = int(frac * full.peak_bytes)
        try:
            fitted = memory.within(loss, budget, *args, argnums=argnums)
        except memory.MemoryLimitError as e:
            assert "smallest projected peak found is" in str(e) and " at " in str(e)
            outcomes.append("refused")
            continue
        s = fitted.schedule(*args)
        assert s.peak_bytes <= budget, s.table()
        with np.errstate(all="ignore"):
            v1, g1 = pg.value_and_grad(fitted, argnums)(*args)
            m = memory.measure(fitted, *args, argnums=argnums)
        assert _same(v0, v1) and _same(g0, g1), s.table()
        assert m.peak_bytes <= s.peak_bytes <= budget, (m.peak_bytes, budget, s.table())
        outcomes.append("recomputed" if s.drop else "as is")
    assert not _recompute.DROPPED  # nothing of a finished step stays registered
    return outcomes


@pytest.mark.parametrize("start", range(0, 30, 10))
def test_random_programs_fit_their_budget_with_the_same_gradients(start):
    outcomes = []
    for seed in range(start, start + 10):
        pr = program(seed, XP)
        outcomes += _check_budgets(pr.loss, pr.args, pr.argnums)
    assert "recomputed" in outcomes


@pytest.mark.slow
@pytest.mark.parametrize("start", range(30, 230, 20))
def test_more_random_programs_fit_their_budget(start):
    for seed in range(start, start + 20):
        pr = program(seed, XP)
        _check_budgets(pr.loss, pr.args, pr.argnums)


def test_many_small_dropped_outputs_are_counted_with_their_recipes():
    """A random program per example of a stack of 5, averaged: ~190 small outputs dropped at
    60 %. Each dropped output's recipe (its Recompute, the arguments it holds, its finalizer) is
    ~1.1 kB of Python objects; before they were allowed for (_schedule.RECIPE_BYTES) the step
    measured 47.9 kB above its projection."""
    pr = program(2, XP)
    X, W, b, K = pr.args
    rng = np.random.default_rng(2)
    Xs = XP.asarray(np.stack([pg.unwrap(X) * c for c in 1 + 0.1 * rng.standard_normal(5)]))

    def loss(Wb, Xs, K):
        losses = [pr.loss(Xs[i], Wb[0], Wb[1], K) for i in range(Xs.shape[0])]
        return XP.sum(XP.stack(losses)) / Xs.shape[0]

    args = ((W, b), Xs, K)
    full = memory.project(loss, *args, argnums=(0, 1)).peak_bytes
    fitted = memory.within(loss, int(0.6 * full), *args, argnums=(0, 1))
    s = fitted.schedule(*args)
    assert len(s.drop) > 150
    with np.errstate(all="ignore"):
        m = memory.measure(fitted, *args, argnums=(0, 1))
    assert m.peak_bytes <= s.peak_bytes <= int(0.6 * full), (m.peak_bytes, s.table())
    assert _check_budgets(loss, args, (0, 1), fractions=(0.6,)) == ["recomputed"]


def _mlp(depth=12, width=64, batch=512, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    params = [
        (
            XP.asarray((rng.standard_normal((width, width)) / np.sqrt(width)).astype(dtype)),
            XP.asarray((0.1 * rng.standard_normal(width)).astype(dtype)),
        )
        for _ in range(depth)
    ]
    x = XP.asarray(rng.standard_normal((batch, width)).astype(dtype))

    def loss(params, x):
        h = x
        for i, (w, b) in enumerate(params):
            z = nn.gelu(h @ w + b) if i % 2 else XP.tanh(h @ w + b)
            h = h + z if i % 3 == 2 else z  # a residual now and then
        return XP.mean(h**2)

    return loss, (params, x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_deep_mlp_fits_its_budgets(dtype):
    loss, args = _mlp(dtype=dtype)
    outcomes = _check_budgets(loss, args, fractions=(0.9, 0.7, 0.4))
    assert outcomes == ["recomputed", "recomputed", "refused"]  # (the floor: about 56 %)


def test_a_cnn_with_fused_rows_fits_its_budget():
    rng = np.random.default_rng(1)
    params = {
        "c1": XP.asarray(rng.standard_normal((8, 1, 3, 3)) / 3),
        "c2": XP.asarray(rng.standard_normal((16, 8, 3, 3)) / 8),
        "w": XP.asarray(rng.standard_normal((16 * 7 * 7, 10)) / 28),
    }
    x = XP.asarray(rng.standard_normal((32, 1, 28, 28)))
    y = XP.asarray(rng.integers(0, 10, 32))

    def loss(p, x, y):
        h = nn.max_pool2d(nn.relu(nn.conv2d(x, p["c1"], padding=1)), 2)
        h = nn.max_pool2d(nn.relu(nn.conv2d(h, p["c2"], padding=1)), 2)
        return nn.cross_entropy(XP.reshape(h, (32, -1)) @ p["w"], y)

    # its peak is the first convolution's weight gradient (the input's 9 shifted copies), in
    # the backward pass when the tape holds almost nothing: no schedule lowers it, and the
    # refusal says so
    assert _check_budgets(loss, (params, x, y), fractions=(1.0, 0.9)) == ["as is", "refused"]
    with pytest.raises(memory.MemoryLimitError, match="recomputing does not lower"):
        memory.within(loss, "1 MB", params, x, y)


def test_attention_and_layer_norm_fit_their_budget():
    rng = np.random.default_rng(2)
    d, t = 32, 64
    p = {
        "wq": XP.asarray(rng.standard_normal((d, d)) / 6),
        "wk": XP.asarray(rng.standard_normal((d, d)) / 6),
        "w1": XP.asarray(rng.standard_normal((d, 4 * d)) / 6),
        "w2": XP.asarray(rng.standard_normal((4 * d, d)) / 12),
        "g": XP.ones(d),
    }
    x = XP.asarray(rng.standard_normal((4, t, d)))

    def loss(p, x):
        for _ in range(3):  # three blocks sharing their weights
            h = nn.layer_norm(x, p["g"])
            a = nn.scaled_dot_product_attention(h @ p["wq"], h @ p["wk"], h, is_causal=True)
            x = x + a
            x = x + nn.gelu(nn.layer_norm(x) @ p["w1"]) @ p["w2"]
        return XP.mean(x**2)

    assert "recomputed" in _check_budgets(loss, (p, x), fractions=(0.85, 0.7))


def test_grad_and_value_and_grad_take_a_budget_and_aux():
    loss, (params, x) = _mlp(depth=6)
    full = memory.project(loss, params, x).peak_bytes
    g0 = pg.grad(loss)(params, x)
    assert _same(g0, pg.grad(loss, budget=0.8 * full)(params, x))

    def with_aux(params, x):
        v = loss(params, x)
        return v, {"twice": 2 * v}

    (v, aux), g = pg.value_and_grad(with_aux, has_aux=True, budget=0.8 * full)(params, x)
    assert _same(g0, g) and float(aux["twice"]) == 2 * float(v)
    # a second call with the same shapes reuses the schedule; new shapes choose theirs
    fitted = memory.within(loss, 0.8 * full, params, x)
    assert len(fitted.schedules) == 1
    fitted(params, x)
    assert len(fitted.schedules) == 1
    pg.grad(fitted)(params, x[:256])
    assert len(fitted.schedules) == 2


def test_make_step_with_a_budget_updates_identically():
    loss, (params, x) = _mlp(depth=8, width=48, batch=1024)
    tx = optim.adam(1e-3)
    state = tx.init(params)
    plain = train.make_step(loss, tx)
    full = memory.project(plain, params, state, (x,)).peak_bytes
    fitted = train.make_step(loss, tx, budget=0.8 * full)
    p0, s0, m0 = plain(params, state, (x,))
    p1, s1, m1 = fitted(params, state, (x,))
    assert _same(p0, p1) and _same(s0, s1) and _same(m0["loss"], m1["loss"])
    schedule = fitted.schedule(params, state, (x,))
    assert schedule.drop and schedule.peak_bytes <= 0.8 * full
    assert memory.measure(fitted, params, state, (x,)).peak_bytes <= 0.8 * full
    assert memory.project(fitted, params, state, (x,)).peak_bytes == schedule.peak_bytes


def test_a_budgeted_step_projected_before_its_first_call_chooses_as_a_call_does():
    """memory.project of a budgeted step or gradient that has chosen no schedule yet chooses
    from the arguments' specs, as its first call would: it chose from the projection's
    abstract arrays a schedule over the budget (run so: 1.31x the budget), refused one a call
    meets, and let one no schedule meets through."""
    loss, (params, x) = _mlp(depth=8, width=48, batch=1024)
    tx = optim.adam(1e-3)
    state = tx.init(params)
    full = memory.project(train.make_step(loss, tx), params, state, (x,)).peak_bytes
    first = train.make_step(loss, tx, budget=0.8 * full)
    projected = memory.project(first, params, state, (x,)).peak_bytes
    called = train.make_step(loss, tx, budget=0.8 * full)
    assert projected == called.schedule(params, state, (x,)).peak_bytes <= 0.8 * full
    assert memory.measure(first, params, state, (x,)).peak_bytes <= 0.8 * full
    with pytest.raises(memory.MemoryLimitError, match="no schedule fits"):
        memory.project(train.make_step(loss, tx, budget="100 kB"), params, state, (x,))
    g_full = memory.project(pg.grad(loss), params, x, argnums=()).peak_bytes
    g = pg.grad(loss, budget=0.8 * g_full)
    assert memory.project(g, params, x, argnums=()).peak_bytes <= 0.8 * g_full


def test_second_order_through_a_budgeted_gradient():
    """Reverse over reverse: the recomputed residuals carry the nodes they had."""
    loss, (params, x) = _mlp(depth=6, width=32, batch=256)
    full = memory.project(loss, params, x).peak_bytes
    fitted = memory.within(loss, 0.85 * full, params, x)
    assert fitted.schedule(params, x).drop

    def gnorm(f):
        def norm(params):
            return sum(XP.sum(g * g) for g in pg.tree.tree_flatten(pg.grad(f)(params, x))[0])

        return norm

    assert _same(pg.grad(gnorm(loss))(params), pg.grad(gnorm(fitted))(params))


def test_array_api_strict_gives_the_same_gradients():
    strict = pytest.importorskip("array_api_strict")
    xs = pg.namespace(strict)
    rng = np.random.default_rng(3)
    ws = [xs.asarray(rng.standard_normal((32, 32)) / 6) for _ in range(6)]
    x = xs.asarray(rng.standard_normal((128, 32)))

    def loss(ws, x):
        for w in ws:
            x = xs.tanh(x @ w)
        return xs.mean(x**2)

    full = memory.project(loss, ws, x).peak_bytes
    g0 = pg.grad(loss)(ws, x)
    g1 = pg.grad(loss, budget=0.8 * full)(ws, x)
    assert all(bool(xs.all(a == b)) for a, b in zip(g0, g1, strict=True))


def test_a_budget_below_the_floor_is_refused_before_anything_runs():
    loss, (params, x) = _mlp(depth=6)
    calls = []

    def counted(params, x):
        if not isinstance(x._data, memory.AbstractArray):
            calls.append(1)  # a concrete run
        return loss(params, x)

    with pytest.raises(memory.MemoryLimitError) as e:
        pg.grad(counted, budget="100 kB")(params, x)
    message = str(e.value)
    assert message.startswith("memory.within(counted): no schedule fits 100 kB")
    assert "smallest projected peak found is" in message and "raise the budget" in message
    assert not calls


def test_schedule_shows_what_is_kept_and_recomputed():
    loss, (params, x) = _mlp(depth=6)
    full = memory.project(loss, params, x).peak_bytes
    s = memory.within(loss, 0.75 * full, params, x).schedule(params, x)
    text = str(s)
    assert "recompute" in text and "keep" in text and f"{len(s.nodes)} outputs" in text
    assert 0 < s.extra_forward <= 1.0
    assert any(r.op.startswith("recompute ") for r in s.projection.rows)
    assert s.unconstrained_bytes == full


def test_a_run_off_the_schedule_keeps_everything():
    """A function whose rows differ from the ones its schedule was chosen for (a Python branch
    taken differently) stops dropping, and says so: still the right gradients."""
    loss, (params, x) = _mlp(depth=6)
    flag = [False]

    def branchy(params, x):
        if flag[0]:  # a branch recording other rows: first, one multiply per weight
            params = [(w * 1.0, b) for w, b in params]
        return loss(params, x)

    full = memory.project(branchy, params, x).peak_bytes
    fitted = memory.within(branchy, 0.75 * full, params, x)
    flag[0] = True
    with pytest.warns(RuntimeWarning, match="recorded multiply as node 0, where the schedule"):
        g = pg.grad(fitted)(params, x)
    assert _same(pg.grad(branchy)(params, x), g)


def test_a_compiled_budgeted_step_is_proven_on_its_replay():
    """Under compile the schedule is chosen on the replay compile generates (it frees each value
    at its last use): the replay records the recomputes, its projected and measured peaks fit."""
    loss, (params, x) = _mlp(depth=8, width=48, batch=1024)
    tx = optim.adam(1e-3)
    state = tx.init(params)
    plain = pg.compile(train.make_step(loss, tx))
    full = memory.project(plain, params, state, (x,)).peak_bytes
    budget = int(0.8 * full)
    fitted = pg.compile(train.make_step(loss, tx, budget=budget))
    assert _same(plain(params, state, (x,)), fitted(params, state, (x,)))
    assert memory.project(fitted, params, state, (x,)).peak_bytes <= budget
    assert memory.measure(fitted, params, state, (x,)).peak_bytes <= budget
    g = pg.compile(pg.grad(loss, budget=budget))
    assert _same(pg.grad(loss)(params, x), g(params, x))
    assert memory.project(g, params, x).peak_bytes <= budget


def test_per_example_gradients_fit_a_budget_given_to_the_vmapped_step():
    """The budget is the whole batched step's: given to the vmapped function (as it is); inside
    vmap a budgeted gradient says so."""
    loss, (params, x) = _mlp(depth=6, width=32, batch=512)
    xs = XP.stack([x * (1 + i / 8) for i in range(8)])  # 8 examples of (512, 32)
    per_example = pg.vmap(pg.grad(loss), in_axes=(None, 0))
    full = memory.project(per_example, params, xs, argnums=()).peak_bytes
    fitted = memory.within(per_example, 0.8 * full, params, xs, argnums=())
    assert fitted.schedule(params, xs).drop
    assert _same(per_example(params, xs), fitted(params, xs))
    assert memory.measure(fitted, params, xs, argnums=()).peak_bytes <= 0.8 * full
    inner = pg.vmap(pg.grad(loss, budget=0.8 * full), in_axes=(None, 0))
    with pytest.raises(NotImplementedError, match="give it to the vmapped function"):
        inner(params, xs)


def test_forward_over_reverse_through_a_budgeted_gradient():
    """A jvp of the budgeted gradient (Hessian-vector products): the schedule's node hook and
    the jvp's both see each node."""
    loss, (params, x) = _mlp(depth=6, width=32, batch=256)
    full = memory.project(loss, params, x).peak_bytes
    fitted = memory.within(loss, 0.85 * full, params, x)
    assert fitted.schedule(params, x).drop
    tangent = pg.tree.tree_map(XP.ones_like, params)
    expected = pg.jvp(lambda p: pg.grad(loss)(p, x), (params,), (tangent,))
    assert _same(expected, pg.jvp(lambda p: pg.grad(fitted)(p, x), (params,), (tangent,)))


def test_two_threads_take_budgeted_gradients_at_once():
    import threading

    loss, (params, x) = _mlp(depth=6, width=32, batch=256)
    full = memory.project(loss, params, x).peak_bytes
    fitted = memory.within(loss, 0.85 * full, params, x)
    expected = pg.grad(loss)(params, x)
    results, errors = [], []

    def work():
        try:
            for _ in range(5):
                results.append(_same(expected, pg.grad(fitted)(params, x)))
        except Exception as e:  # (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 15 and all(results)
    assert not _recompute.DROPPED


def test_imperative_backward_and_a_pullback_called_twice():
    """``.backward(retain_graph=True)`` twice, and a vjp's pullback twice: each pass makes the
    dropped outputs again; nothing stays registered once the graph goes."""
    loss, (params, x) = _mlp(depth=6, width=32, batch=256)
    full = memory.project(loss, params, x).peak_bytes
    fitted = memory.within(loss, 0.85 * full, params, x)
    assert fitted.schedule(params, x).drop
    expected = pg.grad(loss)(params, x)
    tracked = [(XP.asarray(w._data).requires_grad_(), XP.asarray(b._data)) for w, b in params]
    out = fitted(tracked, x)
    for retain in (True, False):
        for w, _ in tracked:
            w.grad = None
        out.backward(retain_graph=retain)
        assert _same([w.grad for w, _ in tracked], [g for g, _ in expected])
    del out
    value, pull = pg.vjp(lambda p: fitted(p, x), params)
    for _ in range(2):
        assert _same(pull(XP.asarray(1.0))[0], expected)
    del value, pull
    assert not _recompute.DROPPED


def test_a_chunked_backend_is_pointed_to_one_pass_fit():
    cubed = pytest.importorskip("cubed")
    xc = pg.namespace(cubed)
    w = xc.asarray(np.ones((8, 4)))
    x = xc.asarray(np.ones((16, 8)))

    def loss(w, x):
        return xc.mean(xc.tanh(x @ w))

    with pytest.raises(NotImplementedError, match="one_pass=True"):
        pg.grad(loss, budget="1 MB")(w, x)
