"""Row losses with a parameter penalty stay one-pass (``row_loss(..., penalty=...)``): the tasks
compute the rows' sums, the driver adds the penalty's value and gradient once per step. L2
logistic regression with ``optim.lbfgs`` reaches scikit-learn's ``LogisticRegression(C=...)``
optimum in no more passes than SciPy's L-BFGS-B needs; every step's gradient (planned, Cubed
graph of tasks, graph mode) matches central finite differences of the objective; L1 trains
with a gradient transformation and is refused by L-BFGS; checkpoints resume."""

from __future__ import annotations

import numpy as np
import pytest

from pycograd_xp import optim

cubed = pytest.importorskip("cubed")
zarr = pytest.importorskip("zarr")
so = pytest.importorskip("scipy.optimize")

from cubed_plugin import fit, row_loss  # noqa: E402
from cubed_plugin.penalties import Penalty, l1, l2  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::cubed_plugin.ReservedMemWarning")

C = 0.5
N, F, CHUNK = 2_000, 5, 500


def _draw(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, F))
    w = rng.standard_normal(F)
    y = (rng.random(N) < 1 / (1 + np.exp(-(X @ w + 0.3)))).astype(np.float64)
    return X, y


def _objective(X, y, theta, c=C, alpha=1.0, kind="l2"):
    """scikit-learn's objective: c * sum of log-losses + the penalty on w (not on b)."""
    w, b = theta[:F], theta[F]
    z = X @ w + b
    pen = 0.5 * alpha * w @ w if kind == "l2" else alpha * np.abs(w).sum()
    return c * np.sum(np.logaddexp(0, z) - y * z) + pen


def _with_grad(X, y, theta):
    w, b = theta[:F], theta[F]
    z = X @ w + b
    r = C * (1 / (1 + np.exp(-z)) - y)
    return _objective(X, y, theta), np.concatenate([X.T @ r + w, [r.sum()]])


def _logloss(p, X, y):
    xp = X.__array_namespace__()
    z = X @ p["w"] + p["b"]
    return C * (xp.logaddexp(0.0, z) - y * z)


L2 = row_loss(_logloss, reduction="sum", penalty=l2(1.0, on=lambda p: p["w"]))


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    path = tmp_path_factory.mktemp("penalty")
    X, y = _draw()
    for name, a, chunks in (("X", X, (CHUNK, F)), ("y", y, (CHUNK,))):
        z = zarr.open_array(
            str(path / f"{name}.zarr"), mode="w", shape=a.shape, dtype=a.dtype, chunks=chunks
        )
        z[...] = a
    return path, X, y


def _arrays(path, tmp_path, in_memory=False):
    spec = cubed.Spec(work_dir=str(tmp_path / "work"), allowed_mem="200MB", reserved_mem="0")
    if in_memory:  # data Cubed computes: one-pass as a Cubed graph of tasks, not planned
        X, y = _draw()
        return (
            cubed.from_array(X, chunks=(CHUNK, F), spec=spec),
            cubed.from_array(y, chunks=(CHUNK,), spec=spec),
        )
    return (
        cubed.from_zarr(str(path / "X.zarr"), spec=spec),
        cubed.from_zarr(str(path / "y.zarr"), spec=spec),
    )


def _theta(p):
    return np.concatenate([np.asarray(p["w"]), np.atleast_1d(p["b"])])


def _params(theta):
    return {"w": np.array(theta[:F]), "b": np.array(theta[F])}


@pytest.mark.parametrize("how", ["planned", "graph of tasks", "graph mode"])
def test_step_gradient_matches_finite_differences(stored, tmp_path, how):
    """One SGD step of learning rate 1 moves the parameters by minus the step's gradient: the
    loss and that gradient (the tasks' sums plus the driver's penalty) against the objective
    and its central differences in float64 (the dot-product test on random directions)."""
    path, X, y = stored
    rng = np.random.default_rng(1)
    theta = rng.standard_normal(F + 1) * 0.3
    data = _arrays(path, tmp_path, in_memory=how == "graph of tasks")
    result = fit(
        L2,
        _params(theta),
        data,
        optim.sgd(1.0),
        steps=1,
        mode="graph" if how == "graph mode" else "one-pass",
        executor="single-threaded",
        progress=False,
        log=None,
    )
    grad = theta - _theta(result.params)
    value = result.history["loss"][0]
    assert value == pytest.approx(_objective(X, y, theta), rel=1e-12)
    np.testing.assert_allclose(grad, _with_grad(X, y, theta)[1], rtol=1e-9, atol=1e-9)
    eps = 1e-6
    for _ in range(3):
        v = rng.standard_normal(F + 1)
        fd = (_objective(X, y, theta + eps * v) - _objective(X, y, theta - eps * v)) / (2 * eps)
        assert grad @ v == pytest.approx(fd, rel=1e-6, abs=1e-6)


def test_l2_lbfgs_reaches_sklearn_in_scipys_passes(stored, tmp_path):
    """scikit-learn's LogisticRegression(C) optimum, within 1e-6 relative, in as many passes
    over the data as SciPy's L-BFGS-B needs function evaluations to get there."""
    sklm = pytest.importorskip("sklearn.linear_model")
    path, X, y = stored
    sk = sklm.LogisticRegression(C=C, tol=1e-12, max_iter=10_000).fit(X, y)
    f_sk = _objective(X, y, np.concatenate([sk.coef_[0], sk.intercept_]))
    values = []

    def fg(theta):
        v, g = _with_grad(X, y, theta)
        values.append(v)
        return v, g

    res = so.minimize(fg, np.zeros(F + 1), jac=True, method="L-BFGS-B", options={"ftol": 1e-15})
    best = min(f_sk, res.fun)
    scipy_evals = next(i + 1 for i, v in enumerate(values) if (v - best) / abs(best) <= 1e-6)

    steps = []
    result = fit(
        L2,
        {"w": np.zeros(F), "b": np.zeros(())},
        _arrays(path, tmp_path),
        optim.lbfgs(),
        epochs=scipy_evals,
        executor="single-threaded",
        progress=False,
        log=steps.append,
    )
    ours = _objective(X, y, _theta(result.params))
    assert result.opt_state.evals <= scipy_evals
    assert abs(ours - f_sk) / f_sk <= 1e-6, (ours, f_sk, scipy_evals, steps)
    assert result.history["loss"][-1] == pytest.approx(ours, rel=1e-12)
    np.testing.assert_allclose(result.params["w"], sk.coef_[0], rtol=1e-3, atol=1e-4)


def test_penalty_keeps_one_pass_mode(stored, tmp_path):
    """A penalised row loss runs the one-pass tasks (one read per pass), not graph mode."""
    from cubed_plugin._fit_steps import step_plan

    path, _, _ = stored
    X, y = _arrays(path, tmp_path)
    plan = step_plan(L2, _params(np.zeros(F + 1)), (X, y), None, X.spec, True, "single-threaded")
    from cubed_plugin._cubed_seam import op_nodes, plan_dag

    ops = [name for name, _ in op_nodes(plan_dag(plan))]
    assert len(ops) == 1, ops  # the planned one-pass op: no graph of the penalty


def test_l1_refused_by_lbfgs(stored, tmp_path):
    path, _, _ = stored
    loss = row_loss(_logloss, reduction="sum", penalty=l1(0.1, on=lambda p: p["w"]))
    with pytest.raises(ValueError, match=r"lbfgs needs a smooth loss.*l1\(0\.1\).*optim\.sgd"):
        fit(
            loss,
            _params(np.zeros(F + 1)),
            _arrays(path, tmp_path),
            optim.lbfgs(),
            epochs=3,
            progress=False,
            log=None,
        )


def test_l1_with_sgd_is_the_subgradient_and_shrinks_weights(stored, tmp_path):
    """L1 with a gradient transformation: the step's gradient is the log-loss's plus
    ``alpha * sign(w)`` (central differences away from 0), and training zeroes more weights
    than without the penalty (proximal-free subgradient descent, near 0 rather than at it)."""
    path, X, y = stored
    alpha = 40.0
    loss = row_loss(_logloss, reduction="sum", penalty=l1(alpha, on=lambda p: p["w"]))
    theta = np.array([0.4, -0.3, 0.2, 0.5, -0.6, 0.1])
    one = fit(
        loss,
        _params(theta),
        _arrays(path, tmp_path),
        optim.sgd(1.0),
        steps=1,
        executor="single-threaded",
        progress=False,
        log=None,
    )
    grad = theta - _theta(one.params)
    eps = 1e-6
    fd = [
        (
            _objective(X, y, theta + eps * e, alpha=alpha, kind="l1")
            - _objective(X, y, theta - eps * e, alpha=alpha, kind="l1")
        )
        / (2 * eps)
        for e in np.eye(F + 1)
    ]
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-5)
    assert one.history["loss"][0] == pytest.approx(
        _objective(X, y, theta, alpha=alpha, kind="l1"), rel=1e-12
    )


def test_checkpoint_resume_with_penalty(stored, tmp_path):
    """Killed after 3 L-BFGS iterations and resumed: the same parameters as a run straight
    through (the penalty is part of the loss each evaluation returns)."""
    path, _, _ = stored
    kw = dict(executor="single-threaded", progress=False, log=None)
    start = {"w": np.zeros(F), "b": np.zeros(())}
    whole = fit(L2, start, _arrays(path, tmp_path), optim.lbfgs(), steps=6, **kw)
    ck = str(tmp_path / "ck")
    fit(L2, start, _arrays(path, tmp_path), optim.lbfgs(), steps=3, checkpoint_dir=ck, **kw)
    resumed = fit(
        L2, start, _arrays(path, tmp_path), optim.lbfgs(), steps=6, checkpoint_dir=ck, **kw
    )
    np.testing.assert_array_equal(resumed.params["w"], whole.params["w"])
    assert resumed.history["loss"] == whole.history["loss"]


def test_bad_penalty_refused():
    with pytest.raises(TypeError, match=r"row_loss: penalty must be a function of the param"):
        row_loss(_logloss, penalty=0.5)
    with pytest.raises(ValueError, match=r"penalties\.l2: strength must be a number >= 0"):
        l2(-1.0)


def test_penalty_in_a_direct_call():
    """Calling the loss computes the whole objective (reduced rows plus the penalty)."""
    X, y = _draw()
    theta = np.linspace(-0.5, 0.5, F + 1)
    import pycograd_xp as pg

    xp = pg.namespace(np)
    p = {"w": xp.asarray(theta[:F]), "b": xp.asarray(theta[F])}
    got = float(np.asarray(pg.unwrap(L2(p, xp.asarray(X), xp.asarray(y)))))
    assert got == pytest.approx(_objective(X, y, theta), rel=1e-12)
    assert Penalty(lambda p: 0.0).smooth


def test_the_command_takes_an_l2_penalty(tmp_path, capsys):
    """``--l2 ALPHA`` trains the mean loss plus ALPHA/2 * ||weights||^2 (biases not penalised):
    the parameters of ``fit`` with that row loss on the same data; a negative one is refused."""
    from cubed_plugin.train import init_params, logreg_loss, main

    common = ["--rows", "20000", "--features", "10", "--allowed-mem", "20MB"]
    common += ["--reserved-mem", "5MB", "--quiet", "--work-dir", str(tmp_path)]
    result = main([*common, "--optimizer", "lbfgs", "--steps", "4", "--l2", "0.5"])
    spec = cubed.Spec(work_dir=str(tmp_path / "again"), allowed_mem="20MB", reserved_mem="5MB")
    X = cubed.from_zarr(str(tmp_path / "data" / "X.zarr"), spec=spec)
    y = cubed.from_zarr(str(tmp_path / "data" / "y.zarr"), spec=spec)
    loss = row_loss(logreg_loss.per_row, penalty=l2(0.5, on=lambda p: p["w"]))
    want = fit(loss, init_params("logreg", 10), (X, y), optim.lbfgs(), steps=4, spec=spec,
               progress=False, log=None)  # fmt: skip
    for k in want.params:
        np.testing.assert_array_equal(result.params[k], want.params[k])
    plain = fit(logreg_loss, init_params("logreg", 10), (X, y), optim.lbfgs(), steps=4,
                spec=spec, progress=False, log=None)  # fmt: skip
    assert np.linalg.norm(want.params["w"]) < np.linalg.norm(plain.params["w"])
    with pytest.raises(SystemExit):
        main([*common, "--l2", "-1"])
    assert "--l2 must be at least 0, got -1.0" in capsys.readouterr().err
