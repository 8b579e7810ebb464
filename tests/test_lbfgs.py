"""optim.lbfgs: the optimum SciPy's L-BFGS-B finds, in about as many evaluations, on logistic
regression (float32 and float64, dict parameters) and the Rosenbrock function; the strong Wolfe
conditions on every accepted step; the two-loop recursion against the L-BFGS matrix written
out; the state through a checkpoint; lazy Cubed parameters (one computation per evaluation);
clear errors on bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

import pycograd_xp as pg
from pycograd_xp import checkpoint, optim
from pycograd_xp.optim._lbfgs import _strong_wolfe

so = pytest.importorskip("scipy.optimize")

C1, C2 = 1e-4, 0.9


def _logreg_data(n=2000, f=10, noise=0.8, seed=0):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(f) / math.sqrt(f)
    X = rng.standard_normal((n, f))
    y = (X @ w + noise * rng.standard_normal(n) > 0).astype(float)
    return X, y


def _scipy_logreg(X, y):
    n = len(y)

    def fg(v):
        z = X @ v[:-1] + v[-1]
        s = 1 / (1 + np.exp(-z)) - y
        value = np.mean(np.log1p(np.exp(-abs(z))) + np.maximum(z, 0) - y * z)
        return value, np.concatenate([X.T @ s / n, [s.mean()]])

    return so.minimize(fg, np.zeros(X.shape[1] + 1), jac=True, method="L-BFGS-B")


def _logreg_loss(xp, X, y):
    def loss(p):
        z = X @ p["w"] + p["b"]
        return xp.mean(xp.log(1.0 + xp.exp(-xp.abs(z))) + xp.maximum(z, 0.0) - y * z)

    return loss


def _wolfe_holds(info, c1=C1, c2=C2):
    return (
        info.step > 0
        and info.slope0 < 0
        and info.value <= info.value0 + c1 * info.step * info.slope0
        and abs(info.slope) <= c2 * abs(info.slope0)
    )


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_logistic_regression_reaches_scipys_optimum(xp, dtype):
    X, y = _logreg_data(noise=0.8)
    want = _scipy_logreg(X, y)
    dt = getattr(xp, dtype)
    loss = _logreg_loss(xp, xp.asarray(X, dtype=dt), xp.asarray(y, dtype=dt))
    p0 = {"w": xp.zeros(X.shape[1], dtype=dt), "b": xp.zeros((), dtype=dt)}
    steps = []
    params, state = optim.lbfgs(loss).minimize(p0, callback=lambda p, s: steps.append(s.last))
    assert state.done and state.reason
    assert params["w"].dtype == dt and state.grad["w"].dtype == dt  # float32 stays float32
    tight = dtype == "float64"
    assert state.value == pytest.approx(want.fun, rel=1e-12 if tight else 1e-6)
    w = np.asarray(pg.unwrap(params["w"]))
    np.testing.assert_allclose(w, want.x[:-1], atol=1e-6 if tight else 1e-4)
    assert float(params["b"]) == pytest.approx(want.x[-1], abs=1e-6 if tight else 1e-4)
    # as many evaluations as SciPy's L-BFGS-B (7 and 7 here: every first trial step accepted)
    assert state.evals <= want.nfev + 1, (state.evals, want.nfev)
    assert state.evals == 1 + sum(s.evals for s in steps)
    assert all(_wolfe_holds(s) and s.wolfe for s in steps)


def test_noisier_logistic_regression_from_far(xp):
    """A less well-conditioned problem (large optimal weights), started away from zero."""
    X, y = _logreg_data(n=3000, f=20, noise=0.3, seed=1)
    want = _scipy_logreg(X, y)
    loss = _logreg_loss(xp, xp.asarray(X), xp.asarray(y))
    p0 = {"w": xp.full(20, 0.5), "b": xp.asarray(-1.0)}
    steps = []
    params, state = optim.lbfgs(loss).minimize(p0, callback=lambda p, s: steps.append(s.last))
    # SciPy from the same start, for the count of evaluations
    start = np.concatenate([np.full(20, 0.5), [-1.0]])
    ref = so.minimize(lambda v: _scipy_fg(X, y, v), start, jac=True, method="L-BFGS-B")
    # both stop by SciPy's tests (ftol 2.2e-9 relative): within that of each other
    assert state.value == pytest.approx(want.fun, rel=1e-8)
    assert state.value == pytest.approx(ref.fun, rel=1e-8)
    np.testing.assert_allclose(np.asarray(pg.unwrap(params["w"])), want.x[:-1], atol=1e-3)
    assert state.evals <= 1.5 * ref.nfev + 2, (state.evals, ref.nfev)
    assert all(_wolfe_holds(s) for s in steps)


def _scipy_fg(X, y, v):
    n = len(y)
    z = X @ v[:-1] + v[-1]
    s = 1 / (1 + np.exp(-z)) - y
    value = np.mean(np.log1p(np.exp(-abs(z))) + np.maximum(z, 0) - y * z)
    return value, np.concatenate([X.T @ s / n, [s.mean()]])


@pytest.mark.parametrize("n", [2, 5])
def test_rosenbrock_reaches_scipys_optimum(xp, n):
    x0 = np.tile([-1.2, 1.0], n)[:n]

    def rosen(p):
        x = p["x"]
        return xp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)

    want = so.minimize(so.rosen, x0, jac=so.rosen_der, method="L-BFGS-B")
    steps = []
    params, state = optim.lbfgs(rosen).minimize(
        {"x": xp.asarray(x0)}, max_iter=500, callback=lambda p, s: steps.append(s.last)
    )
    assert state.done
    assert state.value < 1e-9 and want.fun < 1e-9
    np.testing.assert_allclose(np.asarray(pg.unwrap(params["x"])), np.ones(n), atol=1e-4)
    # 2-D: 45 evaluations against SciPy's 44; 5-D: 61 against 66
    assert state.evals <= 1.3 * want.nfev, (state.evals, want.nfev)
    # the curved valley makes the line search bracket and zoom: every accepted step still
    # satisfies the strong Wolfe conditions
    assert any(s.evals > 1 for s in steps)
    assert all(_wolfe_holds(s) and s.wolfe for s in steps)


def test_each_accepted_step_satisfies_the_strong_wolfe_conditions_as_evaluated_again():
    """Recompute phi(0), phi(t) and their slopes from the iterates, independently of the
    line search's own figures."""
    xp = pg.namespace(np)

    def rosen(p):
        x = p["x"]
        return xp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)

    solver = optim.lbfgs(rosen)
    params = {"x": xp.asarray([-1.2, 1.0, 0.3])}
    state = solver.init(params)
    vg = pg.value_and_grad(rosen)
    while not state.done:
        d = solver.direction(state)
        new, after = solver.step(params, state)
        t = after.last.step
        f0, g0 = vg(params)
        f1, g1 = vg(new)
        dd = np.asarray(pg.unwrap(d["x"]))
        slope0 = float(np.dot(np.asarray(pg.unwrap(g0["x"])), dd))
        slope1 = float(np.dot(np.asarray(pg.unwrap(g1["x"])), dd))
        np.testing.assert_allclose(
            np.asarray(pg.unwrap(new["x"])), np.asarray(pg.unwrap(params["x"])) + t * dd
        )
        assert float(f1) <= float(f0) + C1 * t * slope0
        assert abs(slope1) <= C2 * abs(slope0)
        params, state = new, after


def test_line_search_brackets_and_zooms():
    """phi(t) = (t - 3)^2 - 9 with slopes: a first trial far too short extrapolates, one far
    too long zooms back; both end where the strong Wolfe conditions hold."""

    def phi(t):
        return (t - 3.0) ** 2 - 9.0, 2.0 * (t - 3.0), t

    for t0, tight in ((1e-3, 0.1), (1e3, 0.1), (2.9, 0.9)):
        t, f, d, pay, info = _strong_wolfe(phi, 0.0, -6.0, t0, C1, tight, 20, 1e-12)
        assert pay == t and info.step == t and info.wolfe
        assert f <= C1 * t * -6.0 and abs(d) <= tight * 6.0
        assert info.evals >= (1 if t0 == 2.9 else 2)
    # a function whose value is not finite beyond t = 1 (an overflow): the search backs off
    t, f, d, pay, info = _strong_wolfe(
        lambda t: ((t - 3.0) ** 2 - 9.0, 2.0 * (t - 3.0), t) if t < 1 else (math.inf, 0.0, t),
        0.0,
        -6.0,
        5.0,
        C1,
        C2,
        20,
        1e-12,
    )
    assert 0 < t < 1 and f < 0
    # no decrease at all along an ascent the caller mistook for descent: t = 0, no payload
    t, f, d, pay, info = _strong_wolfe(lambda t: (t, 1.0, t), 0.0, -1.0, 1.0, C1, C2, 5, 1e-12)
    assert t == 0.0 and pay is None and not info.wolfe and info.evals == 5


def test_two_loop_recursion_is_the_lbfgs_matrix():
    """direction(state) == -H g with H built by the BFGS update from H0 = gamma I over the
    stored pairs, oldest first (Nocedal & Wright eq. 7.19)."""
    xp = pg.namespace(np)
    rng = np.random.default_rng(3)
    A = rng.standard_normal((6, 6))
    A = A @ A.T + 6 * np.eye(6)

    def quad(p):
        v = xp.concat([p["a"], xp.reshape(p["b"], (-1,))])
        return 0.5 * xp.sum(v * (xp.asarray(A) @ v)) + xp.sum(v)

    solver = optim.lbfgs(quad, memory_size=3)
    params = {"a": xp.asarray(rng.standard_normal(2)), "b": xp.asarray(rng.standard_normal((2, 2)))}
    state = solver.init(params)
    for _ in range(4):  # more steps than pairs kept: the oldest drop out
        params, state = solver.step(params, state)
    assert state.stored == 3

    def flat(tree):
        return np.concatenate([np.asarray(pg.unwrap(tree[k])).reshape(-1) for k in ("a", "b")])

    H = state.gamma * np.eye(6)
    for s, y in zip(state.s, state.y, strict=True):
        s, y = flat(s), flat(y)
        rho = 1.0 / (s @ y)
        V = np.eye(6) - rho * np.outer(y, s)
        H = V.T @ H @ V + rho * np.outer(s, s)
    np.testing.assert_allclose(flat(solver.direction(state)), -H @ flat(state.grad), rtol=1e-10)
    assert state.gamma == pytest.approx(
        (flat(state.s[-1]) @ flat(state.y[-1])) / (flat(state.y[-1]) @ flat(state.y[-1]))
    )


def test_value_and_grad_function_budget_and_stepwise_use():
    xp = pg.namespace(np)
    X, y = _logreg_data()
    loss = _logreg_loss(xp, xp.asarray(X), xp.asarray(y))
    calls = []

    def vg(p):
        calls.append(1)
        return pg.value_and_grad(loss)(p)

    solver = optim.lbfgs(vg, value_and_grad=True)
    p0 = {"w": xp.zeros(10), "b": xp.asarray(0.0)}
    params, state = solver.minimize(p0, max_evals=4)
    assert state.evals == len(calls) == 4 and not state.done
    # step by step, the function given per call (as cubed_plugin.fit does): the same iterates
    other = optim.lbfgs()
    s = other.init(p0, vg)
    p = p0
    for _ in range(3):
        p, s = other.step(p, s, vg)
    np.testing.assert_array_equal(np.asarray(p["w"]._data), np.asarray(params["w"]._data))
    assert s.value == state.value
    # a state that is done is returned as it is, with no evaluation
    final_p, final = solver.minimize(p0)
    n = len(calls)
    again_p, again = solver.step(final_p, final)
    assert again is final and again_p is final_p and len(calls) == n


def test_state_survives_a_checkpoint(tmp_path):
    xp = pg.namespace(np)
    X, y = _logreg_data()
    loss = _logreg_loss(xp, xp.asarray(X), xp.asarray(y))
    solver = optim.lbfgs(loss, memory_size=4)
    p0 = {"w": xp.zeros(10), "b": xp.asarray(0.0)}
    state = solver.init(p0)
    p = p0
    for _ in range(2):
        p, state = solver.step(p, state)
    checkpoint.save(tmp_path / "c.npz", {"p": p, "s": state})
    like = {"p": p0, "s": solver.init(p0, value=0.0, grad=pg.tree_map(xp.zeros_like, p0))}
    back = checkpoint.load(tmp_path / "c.npz", like)
    resumed, straight = back["s"], state
    p1, s1 = solver.minimize(back["p"], state=resumed)
    p2, s2 = solver.minimize(p, state=straight)
    assert s1.evals == s2.evals and s1.value == s2.value
    np.testing.assert_array_equal(np.asarray(p1["w"]._data), np.asarray(p2["w"]._data))


def test_bad_input_is_refused_clearly():
    xp = pg.namespace(np)
    p = {"w": xp.asarray([1.0, 2.0])}
    with pytest.raises(ValueError, match="memory_size must be an integer >= 1"):
        optim.lbfgs(lambda p: xp.sum(p["w"]), memory_size=0)
    with pytest.raises(ValueError, match="0 < c1 < c2 < 1"):
        optim.lbfgs(lambda p: xp.sum(p["w"]), c1=0.9, c2=0.1)
    with pytest.raises(ValueError, match=r"loss of shape \(2,\); it must be a scalar"):
        optim.lbfgs(lambda p: p["w"] * 2.0, value_and_grad=True).init(
            p, lambda p: (p["w"] * 2.0, p)
        )
    with np.errstate(over="ignore", invalid="ignore"):
        with pytest.raises(FloatingPointError, match="loss at the starting parameters is inf"):
            optim.lbfgs(lambda p: xp.sum(xp.exp(p["w"] * 1e4))).init(p)
        with pytest.raises(FloatingPointError, match="is nan"):
            optim.lbfgs(lambda p: xp.sum(xp.log(p["w"] - 5.0))).init(p)
    with pytest.raises(TypeError, match="no function to minimize"):
        optim.lbfgs().init(p)
    with pytest.raises(TypeError, match="the gradients have the structure"):
        optim.lbfgs(lambda q: (xp.sum(q["w"]), {"v": q["w"]}), value_and_grad=True).init(p)


def test_stops_at_once_where_the_gradient_is_zero():
    xp = pg.namespace(np)
    solver = optim.lbfgs(lambda p: xp.sum((p["w"] - 1.0) ** 2))
    params, state = solver.minimize({"w": xp.ones(3)})
    assert state.done and state.evals == 1 and state.iterations == 0
    assert state.reason.startswith("gradient small")


def test_lazy_cubed_parameters_one_computation_per_evaluation(monkeypatch):
    """On Cubed the parameters and the data are lazy: each evaluation computes the loss and
    the gradient in one plan (one pass over the data), and the iterates are NumPy's."""
    cubed = pytest.importorskip("cubed")
    import cubed_plugin

    cx = pg.namespace(cubed)
    X, y = _logreg_data(n=1000, f=5)
    spec = cubed.Spec(allowed_mem="200MB")
    Xc = cx.asarray(cubed.from_array(X, chunks=(250, 5), spec=spec))
    yc = cx.asarray(cubed.from_array(y, chunks=(250,), spec=spec))
    computes = []
    real = cubed_plugin.compute

    def counting(*trees, **kw):
        computes.append(len(trees[0]) if len(trees) == 1 else len(trees))
        return real(*trees, **kw)

    monkeypatch.setattr(cubed_plugin, "compute", counting)
    p0 = {
        "w": cx.asarray(cubed.zeros(5, dtype="float64", spec=spec)),
        "b": cx.asarray(cubed.zeros((), dtype="float64", spec=spec)),
    }
    params, state = optim.lbfgs(_logreg_loss(cx, Xc, yc)).minimize(p0)
    xp = pg.namespace(np)
    want_p, want = optim.lbfgs(_logreg_loss(xp, xp.asarray(X), xp.asarray(y))).minimize(
        {"w": xp.zeros(5), "b": xp.asarray(0.0)}
    )
    assert isinstance(pg.unwrap(params["w"]), cubed.Array)
    assert state.evals == want.evals and state.value == pytest.approx(want.value, rel=1e-12)
    np.testing.assert_allclose(
        np.asarray(pg.unwrap(params["w"]).compute()), np.asarray(want_p["w"]._data), atol=1e-10
    )
    # one computation per evaluation (loss and gradient leaves together), plus one of the
    # starting parameters (no data: cubed.zeros)
    assert len(computes) == state.evals + 1
    assert computes[1:] == [3] * state.evals
