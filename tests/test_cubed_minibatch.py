"""Mini-batches of whole row chunks on Cubed cost one chunk per task, as the full batch does, and
``fit`` keeps the parameters' dtype.

A batch of stored chunks is a Zarr view with no task of its own (``cubed_plugin._row_chunks``),
so each task of a step on it is a task of the full batch on another chunk: the per-task
projection does not grow with ``batch_rows`` (it grew with it when batches were built with
``cubed.concat``, which declares one block of every piece per task)."""

from __future__ import annotations

import numpy as np
import pytest

import pycograd_xp as pg
from pycograd_xp import optim, random

cubed = pytest.importorskip("cubed")
zarr = pytest.importorskip("zarr")

from cubed_plugin._compute import check  # noqa: E402
from cubed_plugin._fit_steps import _batches, _take_chunks  # noqa: E402
from cubed_plugin._row_chunks import take_row_chunks  # noqa: E402
from cubed_plugin.steps import (  # noqa: E402
    chunk_projection,
    graph_fusion,
    graph_step,
    one_pass_step,
)
from cubed_plugin.train import (  # noqa: E402
    fit,
    init_params,
    logreg_loss,
    mlp_loss,
)

NP = pg.namespace(np)
LOSSES = {"logreg": logreg_loss, "mlp": mlp_loss}


def _write(path, rows, features, chunk, dtype, seed=0):
    """Logistic-regression data in Zarr of ``dtype``, written chunk by chunk; also returned."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(features) / np.sqrt(features)
    X = rng.standard_normal((rows, features)).astype(dtype)
    y = (X @ w + 0.3 * rng.standard_normal(rows) > 0).astype(dtype)
    zx = zarr.open_array(
        f"{path}/X.zarr", mode="w", shape=X.shape, dtype=dtype, chunks=(chunk, features)
    )
    zy = zarr.open_array(f"{path}/y.zarr", mode="w", shape=y.shape, dtype=dtype, chunks=(chunk,))
    zx[...], zy[...] = X, y
    return X, y


def _data(
    tmp_path, dtype="float64", rows=8000, features=8, chunk=500, allowed="100MB", reserved="0"
):
    Xn, yn = _write(tmp_path / dtype, rows, features, chunk, dtype)
    spec = cubed.Spec(work_dir=str(tmp_path / "work"), allowed_mem=allowed, reserved_mem=reserved)
    X = cubed.from_zarr(str(tmp_path / dtype / "X.zarr"), spec=spec)
    y = cubed.from_zarr(str(tmp_path / dtype / "y.zarr"), spec=spec)
    return spec, X, y, Xn, yn


def _params(model, features, dtype):
    return {k: v.astype(dtype) for k, v in init_params(model, features, hidden=8).items()}


# -- the batch itself ---------------------------------------------------------------------------


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_batch_of_stored_chunks_reads_them_and_adds_no_task(tmp_path, zarr_format):
    """The contract with Zarr and Cubed: the view of chunks 1, 4 and 10 (the short last one)
    of a (43, 5) array in (4, 3) chunks holds those rows, chunked as the data along both axes,
    and computing it or a reduction over it runs no task of its own."""
    a = np.arange(43 * 5.0).reshape(43, 5)
    z = zarr.open_array(
        str(tmp_path / "a.zarr"),
        mode="w",
        shape=a.shape,
        chunks=(4, 3),
        dtype="f8",
        zarr_format=zarr_format,
    )
    z[...] = a
    spec = cubed.Spec(work_dir=str(tmp_path / "work"), allowed_mem="100MB", reserved_mem="0")
    x = cubed.from_zarr(str(tmp_path / "a.zarr"), spec=spec)
    b = take_row_chunks(x, [1, 4, 10])
    want = np.concatenate([a[4:8], a[16:20], a[40:43]])
    assert b.chunks == ((4, 4, 3), (3, 2))
    assert cubed.plan(b).num_tasks == 0
    np.testing.assert_array_equal(b.compute(), want)
    total = cubed.sum(b, axis=0)
    # the same plan as on data stored as the batch is: the reduction's ops, nothing before them
    alike = zarr.open_array(
        str(tmp_path / "b.zarr"),
        mode="w",
        shape=want.shape,
        chunks=(4, 3),
        dtype="f8",
        zarr_format=zarr_format,
    )
    alike[...] = want
    ops = [
        [
            (d["op_name"], d["primitive_op"].num_tasks, d["primitive_op"].projected_mem)
            for _, d in cubed.plan(s, optimize_graph=False).dag.nodes(data=True)
            if "primitive_op" in d
        ]
        for s in (total, cubed.sum(cubed.from_zarr(str(tmp_path / "b.zarr"), spec=spec), axis=0))
    ]
    assert ops[0] == ops[1]
    np.testing.assert_array_equal(total.compute(), want.sum(axis=0))
    np.testing.assert_array_equal(take_row_chunks(x, [10]).compute(), a[40:43])


def test_a_batch_of_computed_data_copies_one_chunk_per_task(tmp_path):
    """Data Cubed computes (here from NumPy) is copied by one op reading one chunk per task:
    the same per-task projection for 1, 2 and 8 chunks."""
    a = np.arange(43 * 5.0).reshape(43, 5)
    spec = cubed.Spec(work_dir=str(tmp_path / "work"), allowed_mem="100MB", reserved_mem="0")
    x = cubed.from_array(a, chunks=(4, 5), spec=spec)
    projected = set()
    for picks in ([3], [2, 7], [0, 1, 2, 3, 4, 5, 6, 10]):
        b = take_row_chunks(x, picks)
        np.testing.assert_array_equal(
            b.compute(), np.concatenate([a[4 * i : 4 * i + 4] for i in picks])
        )
        ops = [
            d["primitive_op"]
            for _, d in cubed.plan(b, optimize_graph=False).dag.nodes(data=True)
            if d.get("op_name") == "blockwise"
        ]
        assert ops[-1].num_tasks == len(picks)
        projected.add(ops[-1].projected_mem)
    assert len(projected) == 1


def test_picks_must_be_increasing_chunk_numbers(tmp_path):
    spec, X, y, _, _ = _data(tmp_path)
    for picks in ([], [3, 1], [2, 2], [-1], [16]):
        with pytest.raises(
            ValueError,
            match=r"take_row_chunks: picks must be increasing chunk "
            r"numbers from 0 to 15 .*got",
        ):
            take_row_chunks(X, picks)


def test_batch_rows_must_be_whole_chunks_within_the_data(tmp_path):
    spec, X, y, _, _ = _data(tmp_path)
    for bad in (0, 750, 8500):
        with pytest.raises(
            ValueError,
            match=rf"fit: batch_rows={bad} must be a multiple of the "
            r"data's row chunks \(500 rows\) of at most 16",
        ):
            fit(
                logreg_loss,
                init_params("logreg", 8),
                (X, y),
                optim.sgd(0.1),
                steps=1,
                batch_rows=bad,
                spec=spec,
                progress=False,
                log=None,
            )


def test_the_shuffle_draws_whole_chunks_each_epoch(tmp_path):
    """Each epoch takes disjoint batches of ``batch_rows / chunk`` whole chunks (increasing
    numbers), in an order drawn anew by the key each epoch."""
    spec, X, y, _, _ = _data(tmp_path)
    key = random.key(3)
    epochs = [_batches((X, y), 1500, key, e) for e in range(3)]
    for batches in epochs:
        assert len(batches) == 5  # 16 chunks, 3 a batch: one chunk waits for another epoch
        taken = [i for b in batches for i in b]
        assert all(len(b) == 3 and b == sorted(b) for b in batches)
        assert len(set(taken)) == 15 and set(taken) <= set(range(16))
    assert epochs[0] != epochs[1] != epochs[2]
    assert _batches((X, y), 1500, key, 1) == epochs[1]  # the key decides
    assert _batches((X, y), None, key, 0) == [None]


@pytest.mark.parametrize("mode", ["one-pass", "graph"])
def test_mini_batch_training_steps_on_the_drawn_chunks(tmp_path, mode):
    """``fit`` with 2-chunk batches ends with the parameters of NumPy SGD on the same chunks
    (each step the mean over its batch's rows): the batches hold the chunks drawn."""
    spec, X, y, Xn, yn = _data(tmp_path)
    key = random.key(1)
    params = init_params("mlp", 8, hidden=8)
    steps = 10 if mode == "one-pass" else 3  # (graph mode plans each step for seconds)
    result = fit(
        mlp_loss,
        params,
        (X, y),
        optim.sgd(0.5),
        steps=steps,
        batch_rows=1000,
        key=key,
        spec=spec,
        mode=mode,
        executor="single-threaded",
        progress=False,
        log=None,
    )
    p = pg.tree_map(NP.asarray, params)
    for step in range(steps):  # 8 batches an epoch: one-pass mode's run starts a second one
        picks = _batches((X, y), 1000, key, step // 8)[step % 8]
        rows = np.concatenate([np.arange(500 * i, 500 * i + 500) for i in picks])
        g = pg.grad(mlp_loss)(p, NP.asarray(Xn[rows]), NP.asarray(yn[rows]))
        p = pg.tree_map(lambda a, b: a - 0.5 * b, p, g)
    for k, v in result.params.items():
        np.testing.assert_allclose(v, np.asarray(pg.unwrap(p[k])), rtol=1e-10, atol=1e-14)


# -- per-task memory ----------------------------------------------------------------------------


def _max_task(loss, params, batch, spec, mode):
    if mode == "one-pass":
        total, _, _ = one_pass_step(loss, params, batch)
        return int(check(total).max_projected_mem)
    v, g = graph_step(loss, params, batch, spec)
    return int(check(v, g, optimize_function=graph_fusion()).max_projected_mem)


@pytest.mark.parametrize("mode", ["one-pass", "graph"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("model", ["logreg", "mlp"])
def test_per_task_projection_does_not_grow_with_the_batch(tmp_path, model, dtype, mode):
    """Batches of 1, 2 and 8 of the 16 chunks plan with tasks no larger than the full batch's
    (one-pass mode: the same; graph mode: reductions over fewer chunks fuse differently, and
    one chunk, with no reduction round, fuses a few scalars more: up to a kilobyte), and pass
    the check under the allowed_mem the full batch needs: a mini-batch is not refused where
    the full batch trains. With ``concat`` the one-pass task grew by two chunks per chunk
    batched."""
    spec, X, y, _, _ = _data(tmp_path, dtype, rows=32_000, features=20, chunk=2000, reserved="70MB")
    loss, params = LOSSES[model], _params(model, 20, dtype)
    full = _max_task(loss, params, (X, y), spec, mode)
    slack = 0 if mode == "one-pass" else 1024
    tight = cubed.Spec(
        work_dir=spec.work_dir, allowed_mem=full + slack, reserved_mem=spec.reserved_mem
    )
    Xt, yt = (cubed.from_zarr(str(tmp_path / dtype / f"{n}.zarr"), spec=tight) for n in "Xy")
    _max_task(loss, params, (Xt, yt), tight, mode)  # the full batch trains in it
    for per in (1, 2, 8):
        picks = _batches((X, y), 2000 * per, random.key(0), 0)[0]
        task = _max_task(loss, params, _take_chunks((Xt, yt), picks), tight, mode)  # no refusal
        assert task == full if mode == "one-pass" else task <= full + slack, (per, task, full)


def test_a_cast_is_in_the_projection(tmp_path):
    """float64 parameters on float32 data: NumPy's matmul makes a float64 copy of each chunk.
    The projection of a chunk's step (what one-pass mode declares for its task) holds the
    chunk and its copy, three float32 chunks; with float32 parameters it holds less."""
    spec, X, y, _, _ = _data(tmp_path, "float32", rows=32_000, features=20, chunk=2000)
    chunk = 2000 * 20 * 4
    same = chunk_projection(logreg_loss, _params("logreg", 20, "float32"), (X, y)).peak_bytes
    mixed = chunk_projection(logreg_loss, _params("logreg", 20, "float64"), (X, y)).peak_bytes
    assert same < 3 * chunk <= mixed, (same, mixed, chunk)


# -- the parameters' dtype ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["one-pass", "graph"])
def test_float32_parameters_on_float32_data_stay_float32(tmp_path, mode):
    """As in JAX and PyTorch: parameters, optimizer state and the gradients they are updated
    with stay float32, the run says nothing about promotion, and it ends where a NumPy float32
    run on the same batches does."""
    spec, X, y, Xn, yn = _data(tmp_path, "float32")
    params = _params("mlp", 8, "float32")
    logged: list[str] = []
    result = fit(
        mlp_loss,
        params,
        (X, y),
        optim.adam(0.05),
        steps=2,
        batch_rows=1000,
        spec=spec,
        mode=mode,
        executor="single-threaded",
        progress=False,
        log=logged.append,
    )
    assert not any("promotion" in line for line in logged), logged
    assert {v.dtype for v in result.params.values()} == {np.dtype("float32")}
    assert {leaf.dtype for leaf in pg.tree_leaves(result.opt_state) if hasattr(leaf, "dtype")} == {
        np.dtype("float32")
    }
    p = pg.tree_map(NP.asarray, params)
    tx = optim.adam(0.05)
    state = tx.init(p)
    for step in range(2):
        picks = _batches((X, y), 1000, random.key(0), 0)[step]
        rows = np.concatenate([np.arange(500 * i, 500 * i + 500) for i in picks])
        g = pg.grad(mlp_loss)(p, NP.asarray(Xn[rows]), NP.asarray(yn[rows]))
        updates, state = tx.update(g, state, p)
        p = optim.apply_updates(p, updates)
    for k, v in result.params.items():
        assert np.asarray(pg.unwrap(p[k])).dtype == np.float32
        np.testing.assert_allclose(v, np.asarray(pg.unwrap(p[k])), rtol=2e-4, atol=1e-5)


@pytest.mark.parametrize(
    ("param_dtype", "data_dtype"), [("float64", "float32"), ("float32", "float64")]
)
def test_mixed_dtypes_are_logged_and_the_parameters_keep_theirs(tmp_path, param_dtype, data_dtype):
    spec, X, y, _, _ = _data(tmp_path, data_dtype)
    logged: list[str] = []
    result = fit(
        logreg_loss,
        _params("logreg", 8, param_dtype),
        (X, y),
        optim.sgd(0.1),
        steps=1,
        spec=spec,
        executor="single-threaded",
        progress=False,
        log=logged.append,
    )
    assert any(
        f"parameters {param_dtype}, data {data_dtype}: each task computes in float64" in line
        for line in logged
    ), logged
    assert {v.dtype for v in result.params.values()} == {np.dtype(param_dtype)}


def test_parameters_that_are_not_floating_point_are_refused(tmp_path):
    spec, X, y, _, _ = _data(tmp_path)
    with pytest.raises(
        TypeError,
        match=r"fit: parameter 0 \(shape \(\)\) has dtype int64; "
        r"parameters must be real floating point",
    ):
        fit(
            logreg_loss,
            {"b": np.zeros((), dtype=np.int64), "w": np.zeros(8)},
            (X, y),
            optim.sgd(0.1),
            steps=1,
            spec=spec,
            progress=False,
            log=None,
        )


def test_bad_data_in_a_mini_batch_is_named_by_its_chunk_in_the_data(tmp_path):
    """A NaN in chunk 5 is reported as chunk 5 and its rows in the data, not by its place in
    the batch that drew it."""
    Xn, _ = _write(tmp_path / "float64", 8000, 8, 500, "float64")
    zarr.open_array(str(tmp_path / "float64" / "X.zarr"), mode="r+")[2600, 3] = np.nan
    spec = cubed.Spec(work_dir=str(tmp_path / "work"), allowed_mem="100MB", reserved_mem="0")
    X, y = (cubed.from_zarr(str(tmp_path / "float64" / f"{n}.zarr"), spec=spec) for n in "Xy")
    batches = _batches((X, y), 1000, random.key(0), 0)
    step = next(i for i, b in enumerate(batches) if 5 in b)
    with pytest.raises(ValueError, match=r"chunk 5 \(rows 2500 to 2999\): NaN"):
        fit(
            logreg_loss,
            init_params("logreg", 8),
            (X, y),
            optim.sgd(0.1),
            steps=step + 1,
            batch_rows=1000,
            spec=spec,
            executor="single-threaded",
            progress=False,
            log=None,
        )


# -- measured on the processes executor ---------------------------------------------------------


@pytest.mark.slow
def test_measured_task_peaks_stay_within_projections_at_every_batch_size(tmp_path):
    """On the processes executor (each task in its own worker, its peak measured): logistic
    regression and the MLP on float32 and float64 Zarr data, with parameters of the data's
    dtype, full batch and 2- and 8-chunk mini-batches, in one-pass mode (what ``fit`` picks
    for these losses), and in graph mode on float32 (float64's full batch is measured in
    test_cubed_training.py): no op is measured above its projection, and the task projection
    is the same at every batch size in one-pass mode, no larger than the full batch's in
    graph mode. Then float64 parameters on the float32 data (each task's float64 copy of its
    chunk projected): none measured above its projection either."""
    from cubed_plugin.train import measuring_processes

    rows, features, chunk = 16 * 40_000, 20, 40_000  # chunks of 6.4 MB (float64)
    for dtype in ("float32", "float64"):
        _write(tmp_path / dtype, rows, features, chunk, dtype)
    spec = cubed.Spec(work_dir=str(tmp_path / "work"), allowed_mem="300MB", reserved_mem="100MB")
    for dtype in ("float32", "float64"):
        X, y = (cubed.from_zarr(str(tmp_path / dtype / f"{n}.zarr"), spec=spec) for n in "Xy")
        for model in ("logreg", "mlp"):
            for mode in ("one-pass", "graph") if dtype == "float32" else ("one-pass",):
                projected = {}
                for per in (None, 2, 8):
                    result = fit(
                        LOSSES[model],
                        _params(model, features, dtype),
                        (X, y),
                        optim.sgd(0.5),
                        steps=1,
                        spec=spec,
                        mode=mode,
                        batch_rows=None if per is None else per * chunk,
                        executor=measuring_processes(),
                        progress=False,
                        log=None,
                    )
                    rec = result.memory
                    report = rec.report()
                    assert all(m is not None for _, _, m in report), report
                    assert rec.over() == {}, (dtype, model, mode, per, rec.over())
                    assert {v.dtype for v in result.params.values()} == {np.dtype(dtype)}
                    projected[per] = rec.max_projected()
                run = (dtype, model, mode, projected)
                if mode == "one-pass":
                    assert len(set(projected.values())) == 1, run
                else:
                    assert max(projected.values()) == projected[None], run
    X, y = (cubed.from_zarr(str(tmp_path / "float32" / f"{n}.zarr"), spec=spec) for n in "Xy")
    for model in ("logreg", "mlp"):
        rec = fit(
            LOSSES[model],
            _params(model, features, "float64"),
            (X, y),
            optim.sgd(0.5),
            steps=1,
            spec=spec,
            batch_rows=8 * chunk,
            executor=measuring_processes(),
            progress=False,
            log=None,
        ).memory
        assert rec.over() == {} and all(m is not None for _, _, m in rec.report()), model


def test_the_ops_taking_a_batch_of_computed_data_are_labelled_as_fits_mini_batch(tmp_path):
    """The ops that take a mini-batch's row chunks out of data Cubed computes say so in the
    plan (the label follows the function by its code object, not its module's name: it was
    lost when the function moved)."""
    from cubed_plugin._cubed_seam import op_nodes
    from cubed_plugin.memory import part_of
    from cubed_plugin.namespace import label_ops

    spec = cubed.Spec(work_dir=str(tmp_path), allowed_mem="400MB", reserved_mem="100MB")
    label_ops()
    X = cubed.from_array(np.ones((40, 3)), chunks=(10, 3), spec=spec) * 1.0
    (batch,) = _take_chunks((X,), [0, 2])
    plan = cubed.plan(batch, optimize_graph=False)
    parts = {part_of(plan.dag, n) for n, _ in op_nodes(plan.dag)}
    assert "map_selection of fit's mini-batch of row chunks" in parts, parts
