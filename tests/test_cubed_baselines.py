"""Worker baselines that hold (issue 33): the baseline is measured warm and kept per machine,
executor and versions; a drift of the workers' own memory is re-planned, or refused before the
next step, and reported as what it is; advice checked in one process holds in fresh ones; a
one-pass task computes a stored chunk too large for its budget in row slices."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

cubed = pytest.importorskip("cubed")

from cubed_plugin import _baseline  # noqa: E402
from cubed_plugin._fit_steps import step_plan  # noqa: E402
from cubed_plugin._measuring import can_reset_peak  # noqa: E402
from cubed_plugin.memory import MemoryLimitError, plan_slice_rows  # noqa: E402
from cubed_plugin.train import (  # noqa: E402
    fit,
    init_params,
    logreg_loss,
    make_executor,
    make_spec,
    mlp_loss,
    synthetic,
    worker_baseline,
)
from pycograd_xp import optim  # noqa: E402

measured = pytest.mark.skipif(
    not can_reset_peak(), reason="a task's own peak is measured on Linux only"
)


def _data(tmp_path, spec, rows=4000, features=8, chunk=500, model="logreg"):
    path = tmp_path / "data"
    if not (path / "X.zarr").exists():
        synthetic(str(path), rows, features, chunk, model)
    return (
        cubed.from_zarr(str(path / "X.zarr"), spec=spec),
        cubed.from_zarr(str(path / "y.zarr"), spec=spec),
    )


class Starts(cubed.Callback):
    """Every measured task's start and peak."""

    def __init__(self):
        self.tasks = []

    def on_task_end(self, event):
        if event.peak_measured_mem_start is not None:
            self.tasks.append((event.peak_measured_mem_start, event.peak_measured_mem_end))


@pytest.fixture(scope="module")
def processes():
    ex = make_executor("processes")
    yield ex
    ex.close()


# -- warm and kept ---------------------------------------------------------------------------


@measured
def test_a_warm_baseline_covers_every_task_start(tmp_path, processes):
    """Measured warm (after graph steps, a compressed read, BLAS), the baseline covers what a
    kept worker holds at the start of every task of later steps (a cold one did not: graph-mode
    tasks started 7-12 MB above it, their cyclic garbage uncollected), and the figure is
    kept in the file named for this machine, executor kind and package versions."""
    spec = make_spec("300MB", work_dir=str(tmp_path / "work"), executor=processes)
    base = worker_baseline(processes)
    assert spec.reserved_mem == math.ceil(base * _baseline.MARGIN)
    starts = Starts()
    result = fit(
        logreg_loss,
        init_params("logreg", 8),
        _data(tmp_path, spec),
        optim.sgd(0.5),
        steps=3,
        spec=spec,
        executor=processes,
        mode="graph",
        progress=False,
        log=None,
        callbacks=[starts],
    )
    assert len(starts.tasks) > 50 and not result.memory.overruns()
    highest = max(s for s, _ in starts.tasks)
    # within the warm baseline and a fraction of the margin: no drift to absorb
    assert highest <= base + (spec.reserved_mem - base) / 2, (highest, base)
    kept = json.loads(open(_baseline.cache_path()).read())
    (entry,) = [v for k, v in kept.items() if "processes (measuring_processes)" in k]
    assert base == max(entry["samples"]) and len(entry["samples"]) >= 1


def test_kept_baselines_are_measured_then_reused_then_raised(tmp_path, monkeypatch):
    """A process measures while fewer than SAMPLES figures are kept, then uses the largest kept;
    a drift ``fit`` records raises it for the rest of that process only."""
    monkeypatch.setenv("PYCOGRAD_XP_BASELINE_CACHE", str(tmp_path / "kept.json"))
    figures = iter([70_000_000, 72_000_000, 71_000_000])
    calls = []

    def fake(ex, work_dir, compute_kwargs, reads=()):
        calls.append(1)
        return next(figures)

    monkeypatch.setattr(_baseline, "_measure_once", fake)
    ex = make_executor("processes")
    seen = []
    for _ in range(_baseline.SAMPLES + 2):
        monkeypatch.setattr(_baseline, "_BASELINES", {})  # a new process
        seen.append(worker_baseline(ex))
    assert len(calls) == _baseline.SAMPLES == 3
    assert seen == [70_000_000, 72_000_000, 72_000_000, 72_000_000, 72_000_000]
    assert _baseline.record_drift(ex, None, 75_000_000) == 75_000_000
    assert worker_baseline(ex) == 75_000_000  # this process: the drift
    monkeypatch.setattr(_baseline, "_BASELINES", {})  # a new one: the kept figures, no drift
    assert worker_baseline(ex) == 72_000_000 and len(calls) == 3
    monkeypatch.setenv("PYCOGRAD_XP_BASELINE_CACHE", "off")  # nothing kept: measured again
    monkeypatch.setattr(_baseline, "_BASELINES", {})
    with pytest.raises(StopIteration):
        worker_baseline(ex)


# -- drift -----------------------------------------------------------------------------------


class Drift(cubed.Callback):
    """Make the workers of the ``on``-th compute look as if they held ``above`` bytes more
    than ``reserved`` when its tasks that add almost nothing started (a worker's own memory
    grown, as measured): the overruns that drift makes."""

    def __init__(self, reserved, above, on=1):
        self.reserved, self.above, self.on, self.compute = reserved, above, on, 0

    def on_compute_start(self, event):
        self.compute += 1

    def on_task_end(self, event):
        s, e = event.peak_measured_mem_start, event.peak_measured_mem_end
        if self.compute == self.on and s is not None and e - s < 300_000:
            shift = self.reserved + self.above - s
            event.peak_measured_mem_start, event.peak_measured_mem_end = s + shift, e + shift


@measured
def test_a_drift_is_replanned_and_the_run_goes_on(tmp_path, processes):
    spec = make_spec("300MB", work_dir=str(tmp_path / "work"), executor=processes)
    reserved = spec.reserved_mem
    lines = []
    result = fit(
        logreg_loss,
        init_params("logreg", 8),
        _data(tmp_path, spec),
        optim.sgd(0.5),
        steps=3,
        spec=spec,
        executor=processes,
        mode="graph",
        progress=False,
        log=lines.append,
        callbacks=[Drift(reserved, 2_000_000)],
    )
    assert result.step == 3
    assert spec.reserved_mem == math.ceil((reserved + 2_000_000) * _baseline.DRIFT_PAD)
    (note,) = [line for line in lines if "reserved_mem is now" in line]
    assert re.search(
        r"fit: step 1: a worker held [\d.]+ MB before a task, above reserved_mem", note
    )
    over = result.memory.overruns(result.memory.steps[0])
    assert over and all(o.drift for o in over)
    assert "the worker held" in str(over[0]) and "bug" not in str(over[0])
    assert not result.memory.overruns(result.memory.steps[-1])  # the later steps re-planned
    # this process's baseline for the executor was raised to the drift
    assert worker_baseline(processes) >= reserved + 2_000_000
    _baseline._BASELINES.clear()  # (the drift was made up: the next tests measure afresh)


@measured
def test_a_drift_the_step_no_longer_fits_is_refused_before_the_next_step(tmp_path, processes):
    """After a drift, the step is planned with the raised reserved_mem: when it no longer fits,
    the next step is refused before it runs (nothing over allowed_mem ran)."""
    wide = make_spec("300MB", work_dir=str(tmp_path / "work"), executor=processes)
    params = init_params("logreg", 8)
    top = step_plan(
        logreg_loss, params, _data(tmp_path, wide), None, wide, False, processes
    ).max_projected_mem
    tight = cubed.Spec(
        work_dir=str(tmp_path / "work"), allowed_mem=top + 1_000_000, reserved_mem=wide.reserved_mem
    )
    with pytest.raises(MemoryLimitError, match=r"fit: step 2 \(graph mode\) is refused before"):
        fit(
            logreg_loss,
            params,
            _data(tmp_path, tight),
            optim.sgd(0.5),
            steps=3,
            spec=tight,
            executor=processes,
            mode="graph",
            progress=False,
            log=None,
            callbacks=[Drift(tight.reserved_mem, 500_000)],
        )


def test_a_drift_over_allowed_mem_is_reported_as_what_it_is(monkeypatch):
    """A task over allowed_mem because its worker held more than reserved_mem when it started:
    the error says so, not that the projection is a bug."""
    from cubed_plugin._callbacks import MemoryRecorder
    from cubed_plugin._fit_steps import _measured_within
    from cubed_plugin.memory import TaskMemoryError

    rec = MemoryRecorder()
    rec.steps = [["op-001"]]
    rec.projected["op-001"], rec.kinds["op-001"], rec.parts["op-001"] = 95_000_000, "b", "sum"
    rec.limits["op-001"] = (100_000_000, 80_000_000)
    rec.measured["op-001"] = 101_000_000
    rec.started["op-001"], rec.added["op-001"] = 86_000_000, 15_000_000
    spec = cubed.Spec(allowed_mem="100MB", reserved_mem="80MB")
    monkeypatch.setattr("cubed_plugin._fit_steps.worker_baseline", lambda *a, **k: 72_000_000)
    drifts = []
    monkeypatch.setattr(_baseline, "record_drift", lambda *a: drifts.append(a[2]))
    with pytest.raises(TaskMemoryError) as e:
        _measured_within(rec, 1, "raise", "threads", spec)
    text = str(e.value)
    assert "the worker held 86.0 MB before this task; reserved_mem is 80.0 MB" in text
    assert "bug" not in text and drifts == [86_000_000]


# -- advice that holds in a new process ------------------------------------------------------

_FRESH = textwrap.dedent(
    """
    import sys, warnings
    warnings.simplefilter("ignore")
    import cubed
    import pycograd_xp as pg
    from cubed_plugin.memory import step_projection
    from cubed_plugin.train import init_params, logreg_loss, make_executor, make_spec

    if __name__ == "__main__":
        allowed, rows, features, chunk, work = sys.argv[1:]
        rows, features, chunk = int(rows), int(features), int(chunk)
        spec = make_spec(allowed, work_dir=work, executor=make_executor("processes"))
        X = pg.memory.spec((rows, features), "float64", (chunk, features))
        y = pg.memory.spec((rows,), "float64", (chunk,))
        p = step_projection(logreg_loss, [init_params("logreg", features), X, y],
                            data=(1, 2), mode="graph", spec=spec)
        print(p.max_task_bytes, p.allowed_mem, spec.reserved_mem)
    """
)


def _advice_in_fresh_processes(tmp_path, processes, runs):
    rows, features, chunk = 20_000, 50, 10_000
    spec = make_spec("300MB", work_dir=str(tmp_path / "work"), executor=processes)
    allowed = spec.reserved_mem + 6_000_000
    tight = cubed.Spec(
        work_dir=str(tmp_path / "work"), allowed_mem=allowed, reserved_mem=spec.reserved_mem
    )
    with pytest.raises(MemoryLimitError) as e:
        fit(
            logreg_loss,
            init_params("logreg", features),
            _data(tmp_path, tight, rows, features, chunk),
            optim.sgd(0.5),
            steps=1,
            spec=tight,
            executor=processes,
            mode="graph",
            progress=False,
            log=None,
        )
    advised = int(
        re.search(r"chunks of at most ([\d,]+) rows fit", str(e.value))[1].replace(",", "")
    )
    script = tmp_path / "fresh.py"
    script.write_text(_FRESH)
    env = {**os.environ, "PYCOGRAD_XP_BASELINE_CACHE": "off"}  # each measures its own
    env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), env.get("PYTHONPATH", "")])
    figures = []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, str(script), str(allowed), str(rows), str(features),
             str(advised), str(tmp_path / "work")],
            capture_output=True, text=True, check=True, env=env, timeout=600,
        )  # fmt: skip
        figures.append(tuple(int(v) for v in out.stdout.split()[-3:]))
    over = [f for f in figures if f[0] > f[1]]
    assert not over, (advised, spec.reserved_mem, figures)


@measured
@pytest.mark.slow  # 9-21 s: run by .ci/run's slow checks
def test_advice_holds_in_fresh_processes(tmp_path, processes):
    """The chunk a refusal advises, planned in fresh interpreters that each measure their own
    baseline (nothing kept), fits there: the advice leaves headroom for the variation."""
    _advice_in_fresh_processes(tmp_path, processes, runs=2)


@pytest.mark.slow
@measured
def test_advice_holds_in_ten_fresh_processes(tmp_path, processes):
    _advice_in_fresh_processes(tmp_path, processes, runs=10)


# -- row slices ------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::cubed_plugin.ReservedMemWarning")
def test_one_pass_tasks_compute_a_chunk_too_large_in_row_slices(tmp_path):
    """A stored chunk whose one-pass step does not fit the budget is computed in row slices
    (the log says so), and trains as whole chunks do (to rounding); chunks whose very read
    does not fit are refused, the advice saying why slices cannot help before it proposes to
    rewrite the data."""
    rows = []

    def run(allowed):
        spec = cubed.Spec(str(tmp_path / "work"), allowed_mem=allowed, reserved_mem="10MB")
        data = _data(tmp_path, spec, 40_000, 50, 20_000, "mlp")
        return fit(
            mlp_loss,
            init_params("mlp", 50),
            data,
            optim.sgd(0.5),
            steps=2,
            spec=spec,
            executor="threads",
            mode="one-pass",
            progress=False,
            log=rows.append,
        ), plan_slice_rows(mlp_loss, init_params("mlp", 50), *data)

    (whole, (n0, _)), (sliced, (n, p)) = run("500MB"), run("40MB")
    assert n0 is None and n is not None and 0 < n < 20_000 and p.max_task_bytes <= 40_000_000
    assert any(f"in slices of {n:,} rows" in r for r in rows)
    np.testing.assert_allclose(sliced.history["loss"], whole.history["loss"], rtol=1e-12)
    for k in whole.params:
        np.testing.assert_allclose(sliced.params[k], whole.params[k], rtol=1e-10, atol=1e-14)
    with pytest.raises(MemoryLimitError) as e:
        run("30MB")
    text = str(e.value)
    assert "row slices in its task cannot fit" in text
    assert text.index("row slices") < text.index("Rewrite the data")


@measured
def test_row_sliced_tasks_measure_within_their_projection(tmp_path, processes):
    reserved = math.ceil(worker_baseline(processes) * _baseline.MARGIN)
    # a budget 4 MB below what a whole chunk's task takes (measured from its projection, so
    # that a row's memory model may change): its tasks go in row slices
    roomy = cubed.Spec(str(tmp_path / "work"), allowed_mem=reserved + 10**9, reserved_mem=reserved)
    whole = plan_slice_rows(
        mlp_loss, init_params("mlp", 50), *_data(tmp_path, roomy, 40_000, 50, 20_000, "mlp")
    )[1].max_task_bytes
    spec = cubed.Spec(str(tmp_path / "work"), allowed_mem=whole - 4_000_000, reserved_mem=reserved)
    data = _data(tmp_path, spec, 40_000, 50, 20_000, "mlp")
    n, _ = plan_slice_rows(mlp_loss, init_params("mlp", 50), *data)
    assert n is not None
    result = fit(
        mlp_loss,
        init_params("mlp", 50),
        data,
        optim.sgd(0.5),
        steps=2,
        spec=spec,
        executor=processes,
        mode="one-pass",
        progress=False,
        log=None,
    )
    assert result.memory.measured and not result.memory.overruns()


# -- the command of issue 33 ------------------------------------------------------------------


@pytest.mark.slow
@measured
@pytest.mark.parametrize("executor", ["processes", "dask"])
@pytest.mark.parametrize("mode", ["graph", "one-pass"])
def test_the_default_command_trains_to_the_end_within_its_projections(tmp_path, executor, mode):
    """``python -m cubed_plugin.train --rows 1100000 --features 120 --allowed-mem 100MB`` (1.06 GB
    of data in a 100 MB budget) on processes and Dask, in both modes: every step runs and every
    measured task is within its projection (it died at its first step: tasks started above
    reserved_mem as the workers' uncollected garbage grew)."""
    # a Dask worker holds about 105 MB of its own here (warm; a processes worker 77 MB): a
    # 100 MB budget is refused before anything runs (exit 2, naming the worker's memory), so
    # Dask trains the same data in 150 MB
    allowed = "100MB"
    if executor == "dask":
        pytest.importorskip("distributed")
        allowed = "150MB"
    out = subprocess.run(
        [sys.executable, "-m", "cubed_plugin.train", "--rows", "1100000", "--features", "120",
         "--model", "logreg", "--allowed-mem", allowed, "--executor", executor, "--steps", "3",
         "--mode", mode, "--quiet", "--work-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "trained 3 steps" in out.stdout
    assert "every measured task within its projection and allowed_mem" in out.stdout, out.stdout


def test_the_kept_figures_are_per_python_environment():
    """Two virtual environments of one machine import different packages into a worker (a docs
    build's held 8 MB more than the test venv's figure, and its tasks went over): the kept
    figures' key names the environment."""
    import sys

    assert f"in {sys.prefix}" in _baseline._versions(False)
