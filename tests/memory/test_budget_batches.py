"""Budgeted steps of a loss declared a mean or sum over its batch's rows (``memory.batch_mean``,
``memory.batch_sum``; ``memory.within``, ``grad(..., budget=)``, ``make_step(..., budget=)``):
when no recompute schedule of the
whole batch fits, the step runs in the fewest micro-batches whose whole projected step fits;
its measured peak stays within the budget, and its loss and gradients agree with the unsplit
step's to rounding (float64 tightly, float32 loosely) and with central finite differences.
Undeclared, a step is never split; higher order, a step under compile and a batch whose
arguments disagree are refused with the way out."""

from __future__ import annotations

import math

import numpy as np
import pytest
from programs import program

import pycograd_xp as pg
from pycograd_xp import _recompute, memory, nn, optim, train
from pycograd_xp.memory import _batches, _plot

XP = pg.namespace(np)


def _leaves(t):
    return [np.asarray(pg.unwrap(a)) for a in pg.tree.tree_flatten(t)[0]]


def _close(a, b, tol):
    """Each leaf of ``a`` within ``tol`` of ``b``'s, relative to ``b``'s size (NaN where
    ``b`` has one)."""
    la, lb = _leaves(a), _leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb, strict=True):
        assert x.shape == y.shape and x.dtype == y.dtype, (x.shape, y.shape, x.dtype, y.dtype)
        nan = np.isnan(y)
        assert np.array_equal(np.isnan(x), nan)
        x, y = x[~nan].astype(np.float64), y[~nan].astype(np.float64)
        if x.size:
            scale = max(float(np.max(np.abs(y))), 1e-30)
            assert float(np.max(np.abs(x - y))) <= tol * scale, (np.max(np.abs(x - y)), scale)


def _cnn(batch=64, dtype="float32", seed=2):
    rng = np.random.default_rng(seed)
    p = {
        "c1": XP.asarray((rng.standard_normal((8, 1, 3, 3)) / 3).astype(dtype)),
        "c2": XP.asarray((rng.standard_normal((16, 8, 3, 3)) / 8).astype(dtype)),
        "w": XP.asarray((rng.standard_normal((16 * 7 * 7, 10)) / 28).astype(dtype)),
    }
    x = XP.asarray(rng.standard_normal((batch, 1, 28, 28)).astype(dtype))
    y = XP.asarray(rng.integers(0, 10, batch))

    def loss(p, x, y):
        h = nn.max_pool2d(nn.relu(nn.conv2d(x, p["c1"], padding=1)), 2)
        h = nn.max_pool2d(nn.relu(nn.conv2d(h, p["c2"], padding=1)), 2)
        return nn.cross_entropy(XP.reshape(h, (h.shape[0], -1)) @ p["w"], y)

    return loss, (p, x, y)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_cnn_fits_half_its_peak_in_micro_batches(dtype):
    loss, args = _cnn(dtype=dtype)
    full = memory.project(loss, *args).peak_bytes
    budget = int(0.5 * full)
    with pytest.raises(memory.MemoryLimitError, match=r"memory\.batch_mean\(loss\)"):
        memory.within(loss, budget, *args)  # undeclared: refused, the way out named
    fitted = memory.within(memory.batch_mean(loss), budget, *args)
    s = fitted.schedule(*args)
    assert s.slices > 1 and s.peak_bytes <= budget and s.batch_rows == 64
    assert f"{s.slices} micro-batches of " in str(s) and s.micro_batches in str(s)
    sizes = [b - a for a, b in _batches.slices(64, s.slice_rows)]
    assert len(sizes) == s.slices and max(sizes) - min(sizes) <= 1
    assert memory.project(fitted, *args).peak_bytes == s.peak_bytes
    assert len(_plot._micro_batches(s.projection.rows)) == s.slices  # the plot marks each
    assert memory.measure(fitted, *args).peak_bytes <= budget
    v0, g0 = pg.value_and_grad(loss)(*args)
    v1, g1 = pg.value_and_grad(fitted)(*args)
    tol = 1e-5 if dtype == "float32" else 1e-13
    _close(v1, v0, tol)
    _close(g1, g0, tol)
    # grad(declared, budget=) is the same step; the declared loss alone is the loss
    declared = memory.batch_mean(loss, batch=(1, 2))
    _close(pg.grad(declared, budget=budget)(*args), g0, tol)
    same = zip(_leaves(pg.grad(declared)(*args)), _leaves(g0), strict=True)
    assert all(np.array_equal(a, b) for a, b in same)
    assert not _recompute.DROPPED


def _mlp(batch=10, width=6, depth=3, dtype="float64", seed=0):
    rng = np.random.default_rng(seed)
    ws = [
        (
            XP.asarray((rng.standard_normal((width, width)) / np.sqrt(width)).astype(dtype)),
            XP.asarray((0.1 * rng.standard_normal(width)).astype(dtype)),
        )
        for _ in range(depth)
    ]
    x = XP.asarray(rng.standard_normal((batch, width)).astype(dtype))
    t = XP.asarray(rng.standard_normal((batch, width)).astype(dtype))

    def loss(ws, x, t):
        h = x
        for w, b in ws:
            h = XP.tanh(h @ w + b)
        return XP.mean((h - t) ** 2)

    return loss, (ws, x, t)


@pytest.mark.parametrize("rows", [1, 3, 4, 10, 16])
def test_uneven_micro_batches_weigh_their_rows(rows):
    """Micro-batches of at most ``rows`` of a batch of 10 (3: four, of 2, 3, 2 and 3 rows;
    4: three, of 3, 3 and 4; 16: one)."""
    loss, args = _mlp()
    v0, g0 = pg.value_and_grad(loss, argnums=(0, 1))(*args)
    mb = memory.batch_mean(loss)
    with _batches.slicing(_batches.Slicing(rows)):
        v1, g1 = pg.value_and_grad(mb, argnums=(0, 1))(*args)
        plain = mb(*args)  # no gradient: the slices' weighted losses
    _close(v1, v0, 1e-14)
    _close(g1, g0, 1e-13)  # the inputs' gradient too (a batch argument's: rows concatenated)
    _close(plain, v0, 1e-14)

    def total(ws, x, t):  # a sum over rows: the slices' sums added, unweighted
        return loss(ws, x, t) * x.shape[0]

    summed = memory.batch_sum(total, batch=(1, 2))
    with _batches.slicing(_batches.Slicing(rows)):
        g2 = pg.grad(summed)(*args)
    _close(g2, pg.grad(total)(*args), 1e-13)


def test_gradients_match_central_finite_differences():
    """float64, a tiny model in uneven micro-batches: the dot-product test against central
    differences along random directions."""
    loss, (ws, x, t) = _mlp(batch=301, width=8, depth=2)
    full = memory.project(loss, ws, x, t).peak_bytes
    budgets = []
    for frac in (0.8, 0.6):
        try:
            f = memory.within(memory.batch_mean(loss), int(frac * full), ws, x, t)
        except memory.MemoryLimitError:
            continue
        budgets.append(f)
    assert budgets and all(f.schedule(ws, x, t).slices > 1 for f in budgets)
    assert all(" or " in f.schedule(ws, x, t).micro_batches for f in budgets)  # 301 rows
    rng = np.random.default_rng(5)
    for fitted in budgets:
        g = pg.grad(fitted, argnums=(0, 1))(ws, x, t)
        for _ in range(3):
            v = pg.tree.tree_map(lambda a: XP.asarray(rng.standard_normal(a.shape)), (ws, x))
            eps = 1e-6

            def at(s, v=v):
                p = pg.tree.tree_map(lambda leaf, d, s=s: leaf + s * d, (ws, x), v)
                return float(loss(p[0], p[1], t))

            fd = (at(eps) - at(-eps)) / (2 * eps)
            dot = sum(float(XP.sum(a * b)) for a, b in zip(_flat(g), _flat(v), strict=True))
            assert abs(fd - dot) <= 1e-7 * max(1.0, abs(dot)), (fd, dot)


def _flat(t):
    return pg.tree.tree_flatten(t)[0]


def _programs_over_a_batch(seed, fractions, examples=6):
    """A random program (``programs.py``: float32 beside float64, views, in-place writes,
    decompositions) per example, averaged (even seeds) or summed over a batch of examples, at
    each fraction of its peak: refused, fitted by recompute (bit for bit), or in micro-batches
    (measured within the budget, the same loss and gradients to rounding). Returns the
    outcomes."""
    pr = program(seed, XP)
    X, W, b, K = pr.args
    rng = np.random.default_rng(seed)
    scale = 1 + 0.1 * rng.standard_normal(examples)
    Xs = XP.asarray(np.stack([np.asarray(pg.unwrap(X)) * c for c in scale]))
    reduce = "mean" if seed % 2 == 0 else "sum"

    def loss(Wb, Xs, K):
        losses = [pr.loss(Xs[i], Wb[0], Wb[1], K) for i in range(Xs.shape[0])]
        total = XP.sum(XP.stack(losses))
        return total / Xs.shape[0] if reduce == "mean" else total

    args = ((W, b), Xs, K)
    full = memory.project(loss, *args, argnums=(0, 1)).peak_bytes
    with np.errstate(all="ignore"):
        v0, g0 = pg.value_and_grad(loss, argnums=(0, 1))(*args)
    loose = any(np.asarray(pg.unwrap(a)).dtype == np.float32 for a in (X, W, b))
    outcomes = []
    for frac in fractions:
        budget = int(frac * full)
        try:
            declared = getattr(memory, f"batch_{reduce}")(loss, batch=1)
            fitted = memory.within(declared, budget, *args, argnums=(0, 1))
        except memory.MemoryLimitError as e:
            assert "smallest projected peak found is" in str(e)
            outcomes.append("refused")
            continue
        s = fitted.schedule(*args)
        assert s.peak_bytes <= budget
        with np.errstate(all="ignore"):
            v1, g1 = pg.value_and_grad(fitted, argnums=(0, 1))(*args)
        with np.errstate(all="ignore"):
            m = memory.measure(fitted, *args, argnums=(0, 1)).peak_bytes
        assert m <= s.peak_bytes <= budget, (m, budget, s.table(), pr.label)
        if s.slices == 1:  # recompute only: bit for bit
            assert all(
                np.array_equal(a, c, equal_nan=True)
                for a, c in zip(_leaves((v1, g1)), _leaves((v0, g0)), strict=True)
            )
            outcomes.append("recomputed")
            continue
        _close(v1, v0, 2e-3 if loose else 1e-9)
        _close(g1, g0, 2e-3 if loose else 1e-9)
        outcomes.append(f"{s.slices} micro-batches")
    return outcomes


def test_random_programs_averaged_over_a_batch():
    outcomes = _programs_over_a_batch(2, (0.5,))  # (more seeds and budgets: -m slow)
    assert outcomes == ["6 micro-batches"], outcomes


@pytest.mark.slow
@pytest.mark.parametrize("start", range(0, 24, 6))
def test_more_random_programs_averaged_over_a_batch(start):
    outcomes = []
    for seed in range(start, start + 6):
        outcomes += _programs_over_a_batch(seed, (0.7, 0.5, 0.35))
    assert any("micro-batches" in o for o in outcomes), outcomes


def test_make_step_in_micro_batches_updates_as_the_whole_batch():
    loss, (p, x, y) = _cnn(batch=32, dtype="float64")
    tx = optim.sgd(0.1)
    state = tx.init(p)
    plain = train.make_step(loss, tx)
    full = memory.project(plain, p, state, (x, y)).peak_bytes
    budget = int(0.5 * full)
    with pytest.raises(memory.MemoryLimitError, match="batch_mean"):
        train.make_step(loss, tx, budget=budget).schedule(p, state, (x, y))
    fitted = train.make_step(memory.batch_mean(loss), tx, budget=budget)
    s = fitted.schedule(p, state, (x, y))
    assert s.slices > 1 and s.peak_bytes <= budget
    assert memory.measure(fitted, p, state, (x, y)).peak_bytes <= budget
    p0, _, m0 = plain(p, state, (x, y))
    p1, _, m1 = fitted(p, state, (x, y))
    _close(p1, p0, 1e-13)
    _close(m1["loss"], m0["loss"], 1e-13)


def test_higher_order_and_compile_are_refused():
    loss, args = _mlp(batch=301, width=8, depth=2)
    ws, x, t = args
    full = memory.project(loss, *args).peak_bytes
    fitted = memory.within(memory.batch_mean(loss), int(0.6 * full), *args)
    assert fitted.schedule(*args).slices > 1

    def gnorm(ws):
        return sum(XP.sum(g * g) for g in _flat(pg.grad(fitted)(ws, x, t)))

    with pytest.raises(NotImplementedError, match="grad of grad"):
        pg.grad(gnorm)(ws)
    tangent = pg.tree.tree_map(XP.ones_like, ws)
    with pytest.raises(NotImplementedError, match="jvp"):
        pg.jvp(lambda w: pg.grad(fitted)(w, x, t), (ws,), (tangent,))
    with pytest.raises(NotImplementedError, match="under vmap"):
        pg.vmap(pg.grad(fitted), in_axes=(None, 0, 0))(ws, XP.stack([x, x]), XP.stack([t, t]))
    tracked = [(XP.asarray(pg.unwrap(w)).requires_grad_(), b) for w, b in ws]
    out = fitted(tracked, x, t)
    with pytest.raises(NotImplementedError, match="second derivative"):
        out.backward(create_graph=True)
    with pytest.raises(memory.MemoryLimitError, match="under compile"):
        pg.compile(pg.grad(fitted))(ws, x, t)
    assert not _recompute.DROPPED


def test_bad_declarations_are_refused():
    loss, (ws, x, t) = _mlp(batch=12)
    full = memory.project(loss, ws, x, t).peak_bytes
    declared = memory.batch_mean(loss)
    with pytest.raises(memory.MemoryLimitError, match="not even in micro-batches of 1 row of"):
        memory.within(declared, int(0.1 * full), ws, x, t)  # below what one row's step needs
    with pytest.raises(ValueError, match="leading axes disagree: argument 1 has 12 rows"):
        memory.within(declared, int(0.4 * full), ws, x, t[:5])
    with pytest.raises(ValueError, match="position.*name no positional argument"):
        memory.within(memory.batch_sum(loss, batch=(1, 5)), int(0.4 * full), ws, x, t)
    with pytest.raises(TypeError, match="positions of the batch arguments"):
        memory.batch_mean(loss, batch="x")
    with pytest.raises(NotImplementedError, match="has_aux"):
        memory.within(declared, full, has_aux=True)
    with pytest.raises(NotImplementedError, match="has_aux"):
        train.make_step(declared, optim.sgd(0.1), has_aux=True)
    with pytest.raises(ValueError, match=r"argnums=\(\)"):
        memory.within(declared, full, argnums=())
    with pytest.raises(ValueError, match="without a leading axis"):
        memory.within(
            memory.batch_mean(lambda w, s: XP.sum(w * s)), int(0.1 * full), XP.ones(3), 2.0
        )


def _costs(loss, args, frac):
    """The recompute schedule of the undeclared loss and the micro-batches of the declared one
    at ``frac`` of the peak (recompute alone fits), each's projected time beyond the step."""
    from pycograd_xp.memory import _cost

    full = memory.project(loss, *args).peak_bytes
    whole = memory.within(loss, int(frac * full), *args).schedule(*args)
    declared = memory.batch_mean(loss)
    with pytest.MonkeyPatch.context() as m:  # slices free: the split that fits
        m.setattr(_cost, "CALL_MICROSECONDS", 0)
        m.setattr(_cost, "NODE_MICROSECONDS", 0)
        m.setattr(_cost, "GRADIENT_ELEMENTS_PER_MICROSECOND", math.inf)
        split = memory.within(declared, int(frac * full), *args).schedule(*args)
    assert whole.drop and whole.slices == 1 and split.slices > 1
    params = sum(a.size for a in pg.tree.tree_flatten(args[0])[0])
    split_us = _cost.slices_microseconds(
        len(split.nodes), params, split.batch_rows, split.slice_rows
    ) + split.slices * _cost.recompute_microseconds(split)
    return whole, split, _cost.recompute_microseconds(whole), split_us, declared, full


def test_a_declared_step_that_fits_by_recompute_takes_the_way_projected_faster():
    """A declared loss whose whole batch fits by recomputing: micro-batches instead only where
    the time model projects them faster; recomputing (bit for bit) where it is cheaper."""
    # narrow layers: outputs made again cost little against a micro-batch's calls and nodes
    loss, args = _mlp(batch=256, width=32, depth=8)
    whole, split, whole_us, split_us, declared, full = _costs(loss, args, 0.8)
    assert whole_us < split_us, (whole_us, split_us)
    s = memory.within(declared, int(0.8 * full), *args).schedule(*args)
    assert s.slices == 1 and s.drop == whole.drop and s.micro_batches == ""
    fitted = memory.within(declared, int(0.8 * full), *args)
    g0 = pg.grad(loss)(*args)
    assert all(
        np.array_equal(a, b)
        for a, b in zip(_leaves(pg.grad(fitted)(*args)), _leaves(g0), strict=True)
    )
    # wide layers: an output made again is a (1024, 256) @ (256, 256) product; a micro-batch's
    # calls and gradient sums cost less, so the step is split (to rounding), within its budget
    loss, args = _mlp(batch=1024, width=256, depth=6)
    whole, split, whole_us, split_us, declared, full = _costs(loss, args, 0.8)
    assert split_us < whole_us, (whole_us, split_us)
    fitted = memory.within(declared, int(0.8 * full), *args)
    s = fitted.schedule(*args)
    assert s.slices == split.slices and not s.drop, s.table(limit=0)
    assert memory.measure(fitted, *args).peak_bytes <= s.peak_bytes <= int(0.8 * full)
    _close(pg.grad(fitted)(*args), pg.grad(loss)(*args), 1e-12)


def test_float32_beside_float64_and_array_api_strict():
    loss, (ws, x, t) = _mlp(batch=600, width=8, depth=2, dtype="float32")
    x64 = XP.astype(x, XP.float64)  # float64 data, float32 weights
    full = memory.project(loss, ws, x64, t).peak_bytes
    fitted = memory.within(memory.batch_mean(loss), int(0.6 * full), ws, x64, t)
    assert fitted.schedule(ws, x64, t).slices > 1
    g = pg.grad(fitted)(ws, x64, t)
    assert all(a.dtype == XP.float32 for a in _flat(g))
    _close(g, pg.grad(loss)(ws, x64, t), 1e-5)
    strict = pytest.importorskip("array_api_strict")
    xs = pg.namespace(strict)
    rng = np.random.default_rng(3)
    w = xs.asarray(rng.standard_normal((8, 8)) / 4)
    xb = xs.asarray(rng.standard_normal((2000, 8)))

    def sloss(w, xb):
        return xs.mean(xs.tanh(xb @ w) ** 2)

    fs = memory.project(sloss, w, xb).peak_bytes
    g0 = pg.grad(sloss)(w, xb)
    g1 = pg.grad(memory.batch_mean(sloss), budget=int(0.6 * fs))(w, xb)
    assert float(xs.max(xs.abs(g1 - g0))) <= 1e-14


def test_micro_batches_each_recomputing():
    """Each micro-batch's step under a recompute schedule (chosen for one micro-batch's
    arguments): the projection shows the recomputes inside each micro-batch, the gradients are
    the unsplit step's to rounding, and nothing stays registered."""
    loss, (ws, x, t) = _mlp(batch=2048, width=32, depth=6)
    part = (ws, x[:512], t[:512])
    s = memory.within(loss, int(0.8 * memory.project(loss, *part).peak_bytes), *part)
    plan = s.schedule(*part)
    assert plan.drop
    mb = memory.batch_mean(loss)
    step = _batches.under(mb, _batches.Slicing(512, plan.drop, plan.names))
    rows = memory.project(step, ws, x, t).rows
    assert {r.op.split(" ")[1] for r in rows if "recompute " in r.op} == {
        "0:512",
        "512:1024",
        "1024:1536",
        "1536:2048",
    }
    _close(pg.grad(step)(ws, x, t), pg.grad(loss)(ws, x, t), 1e-13)
    value, pull = pg.vjp(lambda w: step(w, x, t), ws)  # a pullback called twice
    for _ in range(2):
        _close(
            pull(XP.asarray(2.0))[0],
            pg.tree.tree_map(lambda g: 2 * g, pg.grad(loss)(ws, x, t)),
            1e-13,
        )
    del value, pull
    assert not _recompute.DROPPED


def test_a_compiled_make_step_in_micro_batches_is_refused():
    loss, (p, x, y) = _cnn(batch=16, dtype="float64")
    tx = optim.sgd(0.1)
    state = tx.init(p)
    full = memory.project(train.make_step(loss, tx), p, state, (x, y)).peak_bytes
    step = pg.compile(train.make_step(memory.batch_mean(loss), tx, budget=int(0.5 * full)))
    with pytest.raises(memory.MemoryLimitError, match="under compile a step is not split"):
        step(p, state, (x, y))
