"""``fit`` with ``optim.lbfgs()`` on Cubed, full batch: every evaluation of the loss and gradient
is one computation (one pass over the chunked data in one-pass mode), and the run reaches the
optimum SciPy's L-BFGS-B finds in no more passes than SciPy's evaluations; the pass budget
(``epochs``), checkpoints, graph mode and the refusal of mini-batches."""

from __future__ import annotations

import numpy as np
import pytest

import pycograd_xp as pg
from pycograd_xp import optim

cubed = pytest.importorskip("cubed")
zarr = pytest.importorskip("zarr")
so = pytest.importorskip("scipy.optimize")

from cubed_plugin.train import fit, init_params, logreg_loss, synthetic  # noqa: E402

FEATURES = 12


class Computations(cubed.Callback):
    """Counts Cubed computations (each ``fit`` evaluation is one)."""

    def __init__(self) -> None:
        self.n = 0

    def on_compute_start(self, event):
        self.n += 1


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = tmp_path_factory.mktemp("lbfgs")
    synthetic(str(path), 24_000, FEATURES, 3_000, "logreg")  # 8 chunks
    Xn = np.asarray(zarr.open_array(str(path / "X.zarr"))[:])
    yn = np.asarray(zarr.open_array(str(path / "y.zarr"))[:])
    return path, Xn, yn


def _arrays(path, tmp_path):
    spec = cubed.Spec(work_dir=str(tmp_path / "work"), allowed_mem="100MB", reserved_mem="0")
    X = cubed.from_zarr(str(path / "X.zarr"), spec=spec)
    y = cubed.from_zarr(str(path / "y.zarr"), spec=spec)
    return spec, X, y


def _scipy(Xn, yn):
    n = len(yn)

    def fg(v):
        z = Xn @ v[:-1] + v[-1]
        s = 1 / (1 + np.exp(-z)) - yn
        value = np.mean(np.log1p(np.exp(-abs(z))) + np.maximum(z, 0) - yn * z)
        return value, np.concatenate([Xn.T @ s / n, [s.mean()]])

    return so.minimize(fg, np.zeros(Xn.shape[1] + 1), jac=True, method="L-BFGS-B")


def _fit(path, tmp_path, **kw):
    spec, X, y = _arrays(path, tmp_path)
    counter = Computations()
    kw.setdefault("epochs", 40)
    result = fit(
        logreg_loss,
        init_params("logreg", FEATURES),
        (X, y),
        kw.pop("optimizer", optim.lbfgs()),
        spec=spec,
        executor="single-threaded",
        progress=False,
        log=None,
        callbacks=[counter],
        **kw,
    )
    return result, counter.n


@pytest.mark.filterwarnings("ignore::cubed_plugin.ReservedMemWarning")
def test_one_pass_lbfgs_reaches_scipys_optimum_one_pass_per_evaluation(data, tmp_path):
    path, Xn, yn = data
    want = _scipy(Xn, yn)
    result, computations = _fit(path, tmp_path, mode="one-pass")
    state = result.opt_state
    assert state.done, state.reason
    # SciPy's L-BFGS-B took 12 evaluations here; so did fit: 12 passes over the data
    assert state.evals <= want.nfev, (state.evals, want.nfev)
    assert computations == state.evals == result.history["passes"][-1]
    assert result.history["loss"][-1] == pytest.approx(want.fun, rel=1e-10)
    np.testing.assert_allclose(result.params["w"], want.x[:-1], atol=1e-6)
    assert float(result.params["b"]) == pytest.approx(want.x[-1], abs=1e-6)
    assert result.step == state.iterations == len(result.history["loss"])
    assert result.params["w"].dtype == np.float64


@pytest.mark.filterwarnings("ignore::cubed_plugin.ReservedMemWarning")
def test_pass_budget_checkpoint_and_resume(data, tmp_path):
    path, Xn, yn = data
    ckpt = str(tmp_path / "ckpt")
    first, n1 = _fit(path, tmp_path, epochs=5, checkpoint_dir=ckpt)
    assert first.opt_state.evals == n1 == 5 and not first.opt_state.done
    # resumed from the checkpoint: the passes already made are not made again
    resumed, n2 = _fit(path, tmp_path, epochs=40, checkpoint_dir=ckpt)
    straight, n3 = _fit(path, tmp_path / "again", epochs=40)
    assert n1 + n2 == n3 == straight.opt_state.evals == resumed.opt_state.evals
    np.testing.assert_array_equal(resumed.params["w"], straight.params["w"])
    # the whole run's history, the initial loss included (the command's summary starts there)
    assert resumed.history["loss"] == straight.history["loss"]
    assert resumed.history["passes"] == straight.history["passes"]
    assert resumed.history["initial_loss"] == straight.history["initial_loss"]
    assert straight.history["initial_loss"][0] > straight.history["loss"][0]
    # steps= counts iterations (each one or more passes)
    two, n4 = _fit(path, tmp_path / "two", steps=2, epochs=None)
    assert two.step == 2 and n4 == two.opt_state.evals == 1 + sum(
        np.diff([1, *two.history["passes"]])
    )


@pytest.mark.filterwarnings("ignore::cubed_plugin.ReservedMemWarning")
def test_graph_mode_takes_the_same_steps(data, tmp_path):
    path, _, _ = data
    one, _ = _fit(path, tmp_path / "one", steps=3, epochs=None, mode="one-pass")
    graph, computations = _fit(path, tmp_path / "graph", steps=3, epochs=None, mode="graph")
    assert computations == graph.opt_state.evals == one.opt_state.evals
    np.testing.assert_allclose(graph.params["w"], one.params["w"], rtol=1e-9, atol=1e-12)


def test_lbfgs_refuses_mini_batches(data, tmp_path):
    path, _, _ = data
    with pytest.raises(ValueError, match="optim.lbfgs takes the full batch"):
        _fit(path, tmp_path, batch_rows=6_000)


@pytest.mark.filterwarnings("ignore::cubed_plugin.ReservedMemWarning")
def test_float32_data_and_parameters(tmp_path):
    rng = np.random.default_rng(0)
    Xn = rng.standard_normal((8_000, 6)).astype(np.float32)
    yn = (Xn @ rng.standard_normal(6) + rng.standard_normal(8_000) > 0).astype(np.float32)
    for name, a in (("X", Xn), ("y", yn)):
        z = zarr.open_array(
            str(tmp_path / f"{name}.zarr"),
            mode="w",
            shape=a.shape,
            dtype=a.dtype,
            chunks=(2_000, *a.shape[1:]),
        )
        z[...] = a
    spec, X, y = _arrays(tmp_path, tmp_path)
    params = init_params("logreg", 6, dtype=np.float32)
    result = fit(
        logreg_loss,
        params,
        (X, y),
        optim.lbfgs(),
        epochs=30,
        spec=spec,
        executor="single-threaded",
        progress=False,
        log=None,
    )
    want = _scipy(Xn.astype(np.float64), yn.astype(np.float64))
    assert result.params["w"].dtype == np.float32
    assert result.opt_state.done
    assert result.history["loss"][-1] == pytest.approx(want.fun, rel=1e-6)
    np.testing.assert_allclose(result.params["w"], want.x[:-1], atol=1e-4)
    assert pg.tree_leaves(result.opt_state.grad)[0].dtype == pg.namespace(np).float32
