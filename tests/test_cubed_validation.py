"""``fit``'s validation figures and early stopping, and ``predict``, on Cubed: the figures equal
NumPy's at the parameters they were taken at, early stopping returns the best parameters and
resumes counting from a checkpoint, every evaluation task is planned within ``allowed_mem``
(in row slices when a chunk does not fit whole) and measured within its projection."""

from __future__ import annotations

import numpy as np
import pytest

import pycograd_xp as pg
from pycograd_xp import optim
from pycograd_xp.memory import MemoryLimitError

cubed = pytest.importorskip("cubed")
zarr = pytest.importorskip("zarr")

import cubed_plugin as cp  # noqa: E402
from cubed_plugin import EarlyStopping, fit, predict, row_loss  # noqa: E402

NP = pg.namespace(np)


@row_loss
def logloss(p, X, y):
    xp = X.__array_namespace__()
    z = X @ p["w"] + p["b"]
    return xp.logaddexp(0.0, z) - y * z


def accuracy(p, X, y):
    return ((X @ p["w"] + p["b"]) > 0) == (y > 0.5)


@row_loss(reduction="sum")
def positives(p, X, y):
    xp = X.__array_namespace__()
    return xp.astype((X @ p["w"] + p["b"]) > 0, xp.float64)


def _problem(tmp_path, n=3000, n_val=1100, d=5, chunk=500, val_chunk=300, allowed="300MB"):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n + n_val, d))
    y = (X @ rng.standard_normal(d) + 0.7 * rng.standard_normal(n + n_val) > 0).astype(float)
    spec = cubed.Spec(str(tmp_path / "work"), allowed_mem=allowed, reserved_mem="150MB")
    arrays = []
    for name, a, c in (
        ("X", X[:n], chunk),
        ("y", y[:n], chunk),
        ("Xv", X[n:], val_chunk),
        ("yv", y[n:], val_chunk),
    ):
        z = zarr.open_array(
            str(tmp_path / f"{name}.zarr"), mode="w", shape=a.shape, chunks=(c, *a.shape[1:])
        )
        z[...] = a
        arrays.append(cubed.from_zarr(str(tmp_path / f"{name}.zarr"), spec=spec))
    return spec, arrays, X[n:], y[n:]


def _params(d=5):
    return {"w": np.zeros(d), "b": np.zeros(())}


def _oracle(params, Xv, yv):
    p = pg.tree_map(NP.asarray, params)
    Xn, yn = NP.asarray(Xv), NP.asarray(yv)
    return {
        "val_loss": float(logloss(p, Xn, yn)),
        "val_accuracy": float(np.mean(np.asarray(pg.unwrap(accuracy(p, Xn, yn))))),
        "val_positives": float(np.sum(np.asarray(pg.unwrap(positives.per_row(p, Xn, yn))))),
    }


@pytest.mark.parametrize("mode", ["one-pass", "graph"])
def test_validation_figures_are_numpys_at_the_parameters_of_their_step(tmp_path, mode):
    """Each epoch's figures equal NumPy's at that step's parameters (those of a fit with as many
    steps: the run is deterministic), in both modes; the mean and a sum metric; the history
    holds one of each per epoch and after the last step."""
    spec, (X, y, Xv, yv), Xvn, yvn = _problem(tmp_path)
    loss = logloss if mode == "one-pass" else (lambda p, X, y: logloss(p, X, y))  # graph: no row
    metrics = {"accuracy": accuracy, "positives": positives}
    lines: list[str] = []
    r = fit(
        loss,
        _params(),
        (X, y),
        optim.adam(0.3),
        steps=7,
        batch_rows=1000,
        validation=(Xv, yv),
        metrics=metrics,
        progress=False,
        log=lines.append,
    )
    assert r.history["val_step"] == [3, 6, 7]  # 3 batches an epoch, and the last step
    for i, step in enumerate(r.history["val_step"]):
        at = fit(
            logloss,
            _params(),
            (X, y),
            optim.adam(0.3),
            steps=step,
            batch_rows=1000,
            progress=False,
            log=None,
        ).params
        want = _oracle(at, Xvn, yvn)
        for k, v in want.items():
            np.testing.assert_allclose(r.history[k][i], v, rtol=1e-12, atol=1e-12, err_msg=k)
    assert any(ln.startswith("validation after step 3: val_loss ") for ln in lines), lines
    assert not r.stopped_early and r.best_step is None


def test_early_stopping_returns_the_best_parameters_and_stops_after_patience(tmp_path):
    spec, (X, y, Xv, yv), Xvn, yvn = _problem(tmp_path)
    lines: list[str] = []
    r = fit(
        logloss,
        _params(),
        (X, y),
        optim.adam(1.0),
        epochs=60,
        batch_rows=500,
        validation=(Xv, yv),
        early_stopping=2,
        progress=False,
        log=lines.append,
    )
    vals = r.history["val_loss"]
    best = int(np.argmin(vals))
    assert r.stopped_early and r.step < 60 * 6
    assert len(vals) == best + 3  # two evaluations without improvement after the best
    assert r.best_step == r.history["val_step"][best]
    # the parameters returned are the best step's: their validation loss is the best figure
    np.testing.assert_allclose(_oracle(r.params, Xvn, yvn)["val_loss"], vals[best], rtol=1e-12)
    assert any(ln.startswith("early stopping after step") for ln in lines), lines
    # monitoring a metric that rises: mode="max"
    r2 = fit(
        logloss,
        _params(),
        (X, y),
        optim.adam(1.0),
        epochs=60,
        batch_rows=500,
        validation=(Xv, yv),
        metrics={"accuracy": accuracy},
        early_stopping=EarlyStopping(
            patience=2, monitor="val_accuracy", mode="max", restore_best=False
        ),
        progress=False,
        log=None,
    )
    acc = r2.history["val_accuracy"]
    assert r2.stopped_early and max(acc[-2:]) <= max(acc[:-2])
    # restore_best=False: the last parameters
    np.testing.assert_allclose(_oracle(r2.params, Xvn, yvn)["val_accuracy"], acc[-1])


def test_early_stopping_resumes_from_a_checkpoint_as_an_uninterrupted_run(tmp_path):
    """A run killed between its best evaluation and its stop, resumed from its checkpoint, ends
    as the uninterrupted one: the same history, the same stop, the same best parameters (kept
    in the checkpoint); run again, a finished run stays finished."""
    spec, (X, y, Xv, yv), _, _ = _problem(tmp_path)
    kw = dict(batch_rows=500, validation=(Xv, yv), early_stopping=2, progress=False)
    whole = fit(logloss, _params(), (X, y), optim.adam(1.0), epochs=60, log=None, **kw)
    assert whole.stopped_early
    cut = whole.history["val_step"][-2] + 1  # after the best evaluation, before the stop

    class KilledError(Exception):
        pass

    def log(line):
        if line.startswith(f"step {cut}/"):  # step cut done, its checkpoint not yet written
            raise KilledError

    ck = str(tmp_path / "ck")
    with pytest.raises(KilledError):
        fit(
            logloss, _params(), (X, y), optim.adam(1.0), epochs=60, checkpoint_dir=ck, log=log, **kw
        )
    resumed = fit(
        logloss, _params(), (X, y), optim.adam(1.0), epochs=60, checkpoint_dir=ck, log=None, **kw
    )
    assert resumed.stopped_early and resumed.step == whole.step
    assert resumed.best_step == whole.best_step
    assert {k: v for k, v in resumed.history.items() if k != "seconds"} == {
        k: v for k, v in whole.history.items() if k != "seconds"
    }
    for k in whole.params:
        np.testing.assert_array_equal(resumed.params[k], whole.params[k])
    again = fit(
        logloss, _params(), (X, y), optim.adam(1.0), epochs=60, checkpoint_dir=ck, log=None, **kw
    )
    assert again.step == whole.step and again.stopped_early
    for k in whole.params:
        np.testing.assert_array_equal(again.params[k], whole.params[k])


def test_lbfgs_validates_after_every_step(tmp_path):
    spec, (X, y, Xv, yv), Xvn, yvn = _problem(tmp_path)
    r = fit(
        logloss,
        _params(),
        (X, y),
        optim.lbfgs(),
        steps=4,
        validation=(Xv, yv),
        metrics={"accuracy": accuracy},
        progress=False,
        log=None,
    )
    assert r.history["val_step"] == list(range(1, r.step + 1))
    want = _oracle(r.params, Xvn, yvn)
    np.testing.assert_allclose(r.history["val_loss"][-1], want["val_loss"], rtol=1e-12)


def test_validation_arguments_are_checked_before_anything_runs(tmp_path):
    spec, (X, y, Xv, yv), _, _ = _problem(tmp_path)
    kw = dict(steps=1, progress=False, log=None)
    with pytest.raises(ValueError, match=r"metrics= needs validation data"):
        fit(logloss, _params(), (X, y), optim.sgd(0.1), metrics={"a": accuracy}, **kw)
    with pytest.raises(ValueError, match=r"early_stopping= needs validation data"):
        fit(logloss, _params(), (X, y), optim.sgd(0.1), early_stopping=3, **kw)
    with pytest.raises(ValueError, match=r"validation has 1 arrays and data 2"):
        fit(logloss, _params(), (X, y), optim.sgd(0.1), validation=(Xv,), **kw)
    with pytest.raises(ValueError, match=r"monitors 'val_acc'.*computes 'val_loss'"):
        fit(
            logloss,
            _params(),
            (X, y),
            optim.sgd(0.1),
            validation=(Xv, yv),
            early_stopping=EarlyStopping(monitor="val_acc"),
            **kw,
        )
    with pytest.raises(TypeError, match=r"validation argument 0 is a numpy.ndarray"):
        fit(logloss, _params(), (X, y), optim.sgd(0.1), validation=(np.ones((3, 5)), yv), **kw)
    with pytest.raises(ValueError, match=r"patience must be at least 1"):
        EarlyStopping(patience=0)
    with pytest.raises(ValueError, match=r"mode must be 'min' or 'max'"):
        EarlyStopping(mode="auto")
    with pytest.raises(TypeError, match=r"early_stopping must be an int"):
        fit(
            logloss,
            _params(),
            (X, y),
            optim.sgd(0.1),
            validation=(Xv, yv),
            early_stopping="val_loss",
            **kw,
        )


def test_a_validation_chunk_too_large_for_a_task_is_evaluated_in_row_slices(tmp_path, monkeypatch):
    """A validation chunk of 12 MB in an 80 MB budget where its evaluation (activations of a
    (rows, 256) hidden layer) does not fit whole: each task evaluates its chunk in row slices,
    the figures are NumPy's; the plan is within allowed_mem."""
    from cubed_plugin import _evaluate
    from cubed_plugin._evaluate import row_sums

    rng = np.random.default_rng(1)
    n, d, h = 12_000, 250, 256
    Xn = rng.standard_normal((n, d)).astype(np.float32)
    yn = rng.standard_normal(n).astype(np.float32)
    p = {"W": (rng.standard_normal((d, h)) / 16).astype(np.float32), "v": np.ones(h, np.float32)}

    def per_row(p, X, y):
        xp = X.__array_namespace__()
        return (xp.tanh(X @ p["W"]) @ p["v"] - y) ** 2

    spec = cubed.Spec(str(tmp_path / "w"), allowed_mem="60MB", reserved_mem="10MB")
    X = cubed.from_array(Xn, chunks=(n, d), spec=spec)  # one chunk of 12 MB
    y = cubed.from_array(yn, chunks=(n,), spec=spec)
    chosen = []
    fitting = _evaluate._fitting_rows
    monkeypatch.setattr(
        _evaluate, "_fitting_rows", lambda *a, **k: chosen.append(fitting(*a, **k)) or chosen[-1]
    )
    total = row_sums([per_row], p, (X, y))
    assert chosen[0][0] is not None and chosen[0][0] < n  # in row slices
    plan = cp.plan(total)
    assert plan.max_projected_mem <= 60e6
    got = float(cp.compute(total)[0])
    want = float(
        np.sum(
            np.asarray(
                pg.unwrap(per_row(pg.tree_map(NP.asarray, p), NP.asarray(Xn), NP.asarray(yn)))
            )
        )
    )
    np.testing.assert_allclose(got, want, rtol=1e-5)
    # a budget where not even one row fits the read of the chunk: refused before running
    small = cubed.Spec(str(tmp_path / "w2"), allowed_mem="30MB", reserved_mem="10MB")
    X2 = cubed.from_array(Xn, chunks=(n, d), spec=small)
    y2 = cubed.from_array(yn, chunks=(n,), spec=small)
    with pytest.raises(MemoryLimitError, match=r"even one row at a time.*use smaller row chunks"):
        row_sums([per_row], p, (X2, y2))


def test_validation_tasks_measure_within_their_projections_on_processes(tmp_path):
    """On the measuring processes executor every op of a run with validation, the validation's
    included, measures within its projection and allowed_mem."""
    from cubed_plugin.train import measuring_processes

    spec, (X, y, Xv, yv), _, _ = _problem(tmp_path, allowed="300MB")
    ex = measuring_processes()
    try:
        r = fit(
            logloss,
            _params(),
            (X, y),
            optim.adam(0.3),
            steps=3,
            batch_rows=1500,
            validation=(Xv, yv),
            metrics={"accuracy": accuracy},
            executor=ex,
            progress=False,
            log=None,
        )
    finally:
        ex.close()
    assert r.history["val_step"] == [2, 3]
    table = r.memory.table()
    assert "row_sums" in table or "validation" in table or "accuracy" in table, table
    assert not r.memory.overruns(), table


def test_predict_is_numpys_lazy_within_the_budget_and_writes_to_zarr(tmp_path):
    rng = np.random.default_rng(2)
    Xn = rng.standard_normal((1000, 4))
    W = rng.standard_normal((4, 3))
    spec = cubed.Spec(str(tmp_path / "w"), allowed_mem="100MB", reserved_mem="10MB")
    X = cubed.from_array(Xn, chunks=(300, 4), spec=spec)

    def model(p, X):
        xp = X.__array_namespace__()
        return xp.tanh(X @ p["W"])

    out = predict(model, {"W": W}, X)
    assert out.shape == (1000, 3) and out.chunks[0] == (300, 300, 300, 100)
    np.testing.assert_allclose(cp.compute(out), np.tanh(Xn @ W), rtol=1e-14)
    cubed.to_zarr(out, str(tmp_path / "pred.zarr"))
    np.testing.assert_allclose(zarr.open_array(str(tmp_path / "pred.zarr"))[:], np.tanh(Xn @ W))
    # float32 output on request; arrays of namespace(cubed) taken
    xp = pg.namespace(cubed)
    out32 = predict(model, {"W": W}, xp.asarray(X), dtype=np.float32)
    assert out32.dtype == np.float32
    with pytest.raises(ValueError, match=r"one output per row"):
        predict(lambda p, X: X.__array_namespace__().sum(X), {"W": W}, X)
    with pytest.raises(ValueError, match=r"several chunks along an axis other than the rows"):
        predict(model, {"W": W}, cubed.from_array(Xn, chunks=(300, 2), spec=spec))
    with pytest.raises(TypeError, match=r"not a Cubed array"):
        predict(model, {"W": W}, Xn)


def test_predict_evaluates_a_chunk_too_large_in_row_slices(tmp_path):
    rng = np.random.default_rng(3)
    n, d, h = 12_000, 250, 256
    Xn = rng.standard_normal((n, d)).astype(np.float32)
    W = (rng.standard_normal((d, h)) / 16).astype(np.float32)
    spec = cubed.Spec(str(tmp_path / "w"), allowed_mem="60MB", reserved_mem="10MB")
    X = cubed.from_array(Xn, chunks=(n, d), spec=spec)

    def model(p, X):
        xp = X.__array_namespace__()
        return xp.sum(xp.tanh(X @ p["W"]), axis=1)

    out = predict(model, {"W": W}, X)
    assert cp.plan(out).max_projected_mem <= 60e6
    # (float32 sums of 256 terms that cancel: an absolute tolerance, the products' rounding
    # depends on the BLAS kernel and the rows of each call, 3.8e-6 apart on an AMD EPYC)
    np.testing.assert_allclose(cp.compute(out), np.tanh(Xn @ W).sum(axis=1), rtol=1e-5, atol=5e-5)


def test_the_command_validates_and_stops_early(tmp_path, capsys):
    from cubed_plugin.train import main, synthetic

    synthetic(str(tmp_path / "train"), 8000, 6, 1000, "logreg")
    synthetic(str(tmp_path / "val"), 2000, 6, 500, "logreg")
    args = ["--data", str(tmp_path / "train"), "--quiet", "--allowed-mem", "500MB"]
    r = main([*args, "--validation", str(tmp_path / "val"), "--steps", "6", "--batch-rows", "4000"])
    out = capsys.readouterr().out
    assert r.history["val_step"] == [2, 4, 6] and len(r.history["val_accuracy"]) == 3
    assert "validation after step 2: val_loss " in out
    assert "validation loss " in out and ", accuracy " in out
    for bad, said in (
        (["--patience", "2"], "--patience needs --validation"),
        (["--validation", str(tmp_path / "nowhere")], "no X.zarr there"),
        (["--validation", str(tmp_path / "val"), "--patience", "0"], "at least 1"),
    ):
        with pytest.raises(SystemExit) as e:
            main([*args, "--steps", "1", *bad])
        assert e.value.code == 2
        assert said in capsys.readouterr().err


def test_the_validation_loss_of_a_penalised_loss_includes_the_penalty(tmp_path):
    """The validation loss is the loss's whole value on the validation data (as Keras' includes
    its regularisation): the rows' mean plus the penalty at the parameters."""
    from cubed_plugin.penalties import l2

    spec, (X, y, Xv, yv), Xvn, yvn = _problem(tmp_path)
    penalised = row_loss(logloss.per_row, penalty=l2(0.5, on=lambda p: p["w"]))
    r = fit(
        penalised,
        _params(),
        (X, y),
        optim.adam(0.3),
        steps=3,
        batch_rows=1000,
        validation=(Xv, yv),
        progress=False,
        log=None,
    )
    p = pg.tree_map(NP.asarray, r.params)
    want = float(penalised(p, NP.asarray(Xvn), NP.asarray(yvn)))
    assert want > _oracle(r.params, Xvn, yvn)["val_loss"]  # the penalty counted
    np.testing.assert_allclose(r.history["val_loss"][-1], want, rtol=1e-12)
