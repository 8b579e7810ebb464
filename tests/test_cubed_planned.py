"""One-pass steps on stored data are planned once and run at new parameters on new batches
(``cubed_plugin._one_pass``): a mini-batch epoch builds one plan and runs one computation per
step, writes no storage, and ends at the parameters the step built as a Cubed graph reaches, to
the bit; the driver's sum of the tasks' rows is Cubed's sum to the bit."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import pycograd_xp as pg
from pycograd_xp import optim

cubed = pytest.importorskip("cubed")
zarr = pytest.importorskip("zarr")

from cubed_plugin import _fit as fit_module  # noqa: E402
from cubed_plugin import _fit_steps as fit_steps  # noqa: E402
from cubed_plugin import _one_pass  # noqa: E402
from cubed_plugin.memory import ReservedMemWarning  # noqa: E402
from cubed_plugin.steps import one_pass_fan_in, tree_sum  # noqa: E402
from cubed_plugin.train import fit, init_params, logreg_loss, mlp_loss  # noqa: E402

LOSSES = {"logreg": logreg_loss, "mlp": mlp_loss}
CHUNK = 200


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReservedMemWarning)
        yield


def _data(tmp_path, rows=8000, features=8, dtype="float32", allowed="100MB", reserved="0"):
    """Logistic-regression data in Zarr, 40 row chunks of 200 rows (the sum of 40 partial rows
    takes Cubed two rounds: 32 and 8, then 2)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((rows, features)).astype(dtype)
    y = (X @ rng.standard_normal(features) > 0).astype(dtype)
    path = tmp_path / "data"
    zarr.open_array(
        str(path / "X.zarr"), mode="w", shape=X.shape, chunks=(CHUNK, features), dtype=dtype
    )[...] = X
    zarr.open_array(str(path / "y.zarr"), mode="w", shape=y.shape, chunks=(CHUNK,), dtype=dtype)[
        ...
    ] = y
    spec = cubed.Spec(work_dir=str(tmp_path / "work"), allowed_mem=allowed, reserved_mem=reserved)
    return spec, *(cubed.from_zarr(str(path / f"{n}.zarr"), spec=spec) for n in ("X", "y"))


def _train(loss, params, data, spec, batch_rows, steps=3, executor="threads", graph=False, **kw):
    """fit as it runs, or with each step built as a Cubed graph (``graph``: the one-pass step
    before steps were planned)."""
    kw = dict(spec=spec, executor=executor, progress=False, log=None, batch_rows=batch_rows, **kw)
    if not graph:
        return fit(loss, params, data, optim.adam(0.05), steps=steps, **kw)
    real = fit_module._planner
    fit_module._planner = lambda *a, **k: None
    try:
        return fit(loss, params, data, optim.adam(0.05), steps=steps, **kw)
    finally:
        fit_module._planner = real


@pytest.mark.parametrize("n", [1, 2, 3, 4, 31, 32, 33, 40, 70])
def test_the_drivers_sum_of_the_rows_is_cubeds_to_the_bit(n):
    """Cubed's ``sum(axis=0, split_every=...)`` over rows of partial sums of every magnitude,
    as one-pass mode summed them, and :func:`tree_sum` in the driver agree bit for bit."""
    rng = np.random.default_rng(n)
    rows = rng.standard_normal((n, 7)) * 10.0 ** rng.integers(-8, 8, size=(n, 7))
    parts = cubed.from_array(rows, chunks=(1, 7))
    want = cubed.sum(parts, axis=0, split_every=one_pass_fan_in(n)).compute()
    np.testing.assert_array_equal(tree_sum(list(rows), one_pass_fan_in(n)), want)


@pytest.mark.parametrize("model", ["logreg", "mlp"])
@pytest.mark.parametrize("batch_chunks", [None, 4])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_planned_steps_end_at_the_graphs_parameters_to_the_bit(
    tmp_path, model, batch_chunks, dtype
):
    spec, X, y = _data(tmp_path)
    params = init_params(model, 8, hidden=8, dtype=dtype)
    batch = None if batch_chunks is None else batch_chunks * CHUNK
    planned = _train(LOSSES[model], params, (X, y), spec, batch)
    graph = _train(LOSSES[model], params, (X, y), spec, batch, graph=True)
    assert planned.history["loss"] == graph.history["loss"]
    for a, b in zip(pg.tree_leaves(planned.params), pg.tree_leaves(graph.params), strict=True):
        assert a.dtype == b.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(a, b)


class _Computes(cubed.Callback):
    def __init__(self):
        self.computes, self.ops = 0, set()

    def on_compute_start(self, event):
        self.computes += 1

    def on_task_end(self, event):
        self.ops.add(event.name)


def test_a_mini_batch_epoch_plans_once_runs_one_compute_per_step_and_writes_nothing(
    tmp_path, monkeypatch
):
    spec, X, y = _data(tmp_path)
    made, plans = [], []

    class Counted(_one_pass.PlannedStep):
        def __init__(self, *args, **kwargs):
            made.append(args)
            super().__init__(*args, **kwargs)

    real_plan = _one_pass.plan_of
    monkeypatch.setattr(fit_steps, "PlannedStep", Counted)
    monkeypatch.setattr(_one_pass, "plan_of", lambda *a, **k: plans.append(a) or real_plan(*a, **k))
    monkeypatch.setattr(
        fit_module, "plan_of", lambda *a, **k: pytest.fail("a step made a Cubed plan")
    )
    seen = _Computes()
    params = init_params("logreg", 8, dtype=np.float32)
    result = fit(
        logreg_loss,
        params,
        (X, y),
        optim.sgd(0.5),
        epochs=1,
        batch_rows=4 * CHUNK,
        spec=spec,
        executor="threads",
        callbacks=[seen],
        progress=False,
        log=None,
    )
    assert result.step == 10  # 40 chunks, 4 a step
    assert len(made) == 1 and len(plans) == 1  # one plan made, its projection checked once
    assert seen.computes == 10 and len(seen.ops) == 1  # one computation a step, of one op
    work = tmp_path / "work"
    assert not work.exists() or [q for q in work.rglob("*") if q.is_file()] == []
    # a later fit on the same data and loss runs the plan the first one made
    again = fit(
        logreg_loss,
        result.params,
        (X, y),
        optim.sgd(0.5),
        steps=3,
        batch_rows=4 * CHUNK,
        spec=spec,
        executor="threads",
        callbacks=[seen],
        progress=False,
        log=None,
    )
    assert len(made) == 1 and seen.computes == 13 and len(seen.ops) == 1
    assert again.history["loss"][0] < result.history["loss"][0]


def test_a_full_batch_step_reads_each_chunk_once_in_one_compute(tmp_path):
    spec, X, y = _data(tmp_path)
    seen = _Computes()
    tasks: list[str] = []

    class Tasks(cubed.Callback):
        def on_task_end(self, event):
            tasks.append(event.name)

    fit(
        logreg_loss,
        init_params("logreg", 8, dtype=np.float32),
        (X, y),
        optim.sgd(0.5),
        steps=2,
        spec=spec,
        executor="threads",
        callbacks=[seen, Tasks()],
        progress=False,
        log=None,
    )
    assert seen.computes == 2 and len(tasks) == 2 * 40  # a task per chunk, nothing else


def test_data_computed_by_cubed_or_an_executor_without_results_runs_as_a_graph(tmp_path):
    """The planned step reads stored chunks and needs each task's result: data Cubed computes
    and Apache Beam's executor (which sends no task results back) get the Cubed graph, with the
    same parameters."""
    spec, X, y = _data(tmp_path)

    class Beam:
        name = "beam"

    assert fit_module._planner(logreg_loss, (X, y), Beam(), True) is None
    assert fit_module._planner(logreg_loss, (X * 1.0, y), "threads", True) is None
    assert fit_module._planner(logreg_loss, (X, y), "threads", False) is None
    assert fit_module._planner(logreg_loss, (X, y), "threads", True) is not None
    params = init_params("logreg", 8, dtype=np.float32)
    computed = _train(logreg_loss, params, (X * 1.0, y), spec, 4 * CHUNK)
    stored = _train(logreg_loss, params, (X, y), spec, 4 * CHUNK)
    assert computed.history["loss"] == stored.history["loss"]


def test_an_over_budget_planned_step_is_refused_before_running(tmp_path):
    spec, X, y = _data(tmp_path)
    tight = cubed.Spec(work_dir=spec.work_dir, allowed_mem="10kB", reserved_mem="0")
    X, y = (cubed.from_zarr(str(tmp_path / "data" / f"{n}.zarr"), spec=tight) for n in "Xy")
    with pytest.raises(
        pg.memory.MemoryLimitError, match=r"fit: step 1 \(one-pass mode\) is refused"
    ):
        fit(
            logreg_loss,
            init_params("logreg", 8, dtype=np.float32),
            (X, y),
            optim.sgd(0.5),
            steps=1,
            batch_rows=4 * CHUNK,
            spec=tight,
            executor="threads",
            progress=False,
            log=None,
        )


@pytest.mark.parametrize("per_task", [2, 3, 40, 64])
@pytest.mark.parametrize("batch_chunks", [None, 4])
def test_several_chunks_per_task_end_at_the_same_parameters_to_the_bit(
    tmp_path, per_task, batch_chunks
):
    """``chunks_per_task``: each task computes several chunks in turn and returns a row per
    chunk; the driver adds them as before, so the parameters are one-chunk tasks' to the bit
    (40 chunks in tasks of 3: the last task takes 1; of 64: one task of 40; mini-batches of 4
    chunks in tasks of 3: one of 3 and one of 1). The plan has that many tasks."""
    spec, X, y = _data(tmp_path)
    params = init_params("mlp", 8, hidden=8, dtype="float32")
    batch = None if batch_chunks is None else batch_chunks * CHUNK
    one = _train(mlp_loss, params, (X, y), spec, batch)
    several = _train(mlp_loss, params, (X, y), spec, batch, chunks_per_task=per_task)
    assert several.history["loss"] == one.history["loss"]
    for a, b in zip(pg.tree_leaves(several.params), pg.tree_leaves(one.params), strict=True):
        np.testing.assert_array_equal(a, b)
    picks = None if batch_chunks is None else list(range(batch_chunks))
    chunks = 40 if batch_chunks is None else batch_chunks
    plan = fit_steps.step_plan(
        mlp_loss, params, (X, y), picks, spec, True, "threads", chunks_per_task=per_task
    )
    assert plan.num_tasks == -(-chunks // per_task)


def test_several_chunks_per_task_on_the_processes_executor(tmp_path):
    """Workers measured task by task read a task's later chunks into the heap its first paged
    in (:func:`_measuring.reads_let_go` between them): same parameters as the threads
    executor, every task measured within its projection."""
    from cubed_plugin.train import measuring_processes

    spec, X, y = _data(tmp_path, allowed="400MB", reserved="150MB")
    params = init_params("logreg", 8, dtype="float32")
    want = _train(logreg_loss, params, (X, y), spec, None, steps=2)
    got = _train(
        logreg_loss,
        params,
        (X, y),
        spec,
        None,
        steps=2,
        executor=measuring_processes(),
        chunks_per_task=8,
    )
    for a, b in zip(pg.tree_leaves(got.params), pg.tree_leaves(want.params), strict=True):
        np.testing.assert_array_equal(a, b)
    assert got.memory.overruns() == []
    assert max(got.memory.measured.values()) > 0


@pytest.mark.parametrize(
    "kw, error, message",
    [
        (dict(chunks_per_task=0), ValueError, r"fit: chunks_per_task must be at least 1, got 0"),
        (dict(chunks_per_task=2.0), TypeError, r"fit: chunks_per_task must be an int, got 2.0"),
        (
            dict(chunks_per_task=2, mode="graph"),
            ValueError,
            r"fit: chunks_per_task=2 takes one-pass mode on data stored in Zarr .* this run is "
            r"graph mode: leave chunks_per_task at 1",
        ),
    ],
    ids=str,
)
def test_chunks_per_task_out_of_place_is_refused(tmp_path, kw, error, message):
    spec, X, y = _data(tmp_path)
    with pytest.raises(error, match=message):
        _train(logreg_loss, init_params("logreg", 8), (X, y), spec, None, **kw)


def test_chunks_per_task_on_data_cubed_computes_is_refused(tmp_path):
    spec, X, y = _data(tmp_path)
    with pytest.raises(ValueError, match=r"one-pass mode on data Cubed computes, or on Apache"):
        _train(logreg_loss, init_params("logreg", 8), (X * 1.0, y), spec, None, chunks_per_task=2)


def _pauses_of_this_thread(monkeypatch) -> list[float]:
    """The pauses this thread asks ``time.sleep`` for from now on (slept as asked): what a
    wait did, counted, not timed (the machines here are shared and noisy)."""
    import threading
    import time

    me, sleep, asked = threading.get_ident(), time.sleep, []

    def recorded(seconds):
        if threading.get_ident() == me:
            asked.append(seconds)
        sleep(seconds)

    monkeypatch.setattr(time, "sleep", recorded)
    return asked


def test_a_task_alone_in_its_process_waits_for_its_threads_to_let_go_of_a_read(monkeypatch):
    """Between a task's chunks, :func:`reads_let_go` waits until the heap in use is back where
    it was before the task's first chunk (a thread that holds 40 MB and frees it 20 ms later:
    the wait ends after it, with the memory freed), and only in a task alone in its process
    (on the threads executor other tasks share the heap: no wait)."""
    import threading
    import time

    from cubed_plugin import _measuring

    if _measuring.heap_in_use() is None:
        pytest.skip("no glibc mallinfo2 here")
    freed = threading.Event()

    def hold_then_free(parts):
        def free_later():
            time.sleep(0.02)
            parts.clear()
            freed.set()

        threading.Thread(target=free_later).start()

    for alone in (True, False):
        freed.clear()
        level = _measuring.heap_in_use()
        parts = [np.ones(125_000) for _ in range(40)]  # 40 MB in 1 MB buffers, on the heap
        pauses = _pauses_of_this_thread(monkeypatch)
        hold_then_free(parts)
        _measuring._alone = alone
        try:
            kept = _measuring.reads_let_go(level)
        finally:
            _measuring._alone = False
        assert kept == level
        if alone:  # it waited for the thread: the memory is freed when it returns
            assert parts == [] and sum(pauses) > 0, pauses  # (cleared, then `freed` is set)
            assert _measuring.heap_in_use() <= level + 2**20
        else:  # returned at once, before the thread let go
            assert pauses == [] and len(parts) == 40, pauses
        freed.wait(5)


def test_a_heap_that_stays_higher_becomes_the_next_chunks_level(monkeypatch):
    """Memory a task's first chunk keeps (a cache it fills) is waited for once, through the
    whole schedule of pauses, then taken as the level: the task's later chunks do not each wait
    for it."""
    from cubed_plugin import _measuring

    if _measuring.heap_in_use() is None:
        pytest.skip("no glibc mallinfo2 here")
    level = _measuring.heap_in_use()
    kept = [np.ones(125_000) for _ in range(8)]  # 8 MB that stay
    _measuring._alone = True
    try:
        pauses = _pauses_of_this_thread(monkeypatch)
        new = _measuring.reads_let_go(level)
        first = list(pauses)
        pauses.clear()
        again = _measuring.reads_let_go(new)
    finally:
        _measuring._alone = False
    assert new >= level + 7e6 and again == new and len(kept) == 8
    assert first == [0.0, *_measuring._LINGER_PAUSES], first  # the whole schedule, once
    assert pauses == [0.0], pauses  # the next chunk: one look, no wait
