"""Cubed budgets that are honest by default, and advice that works (issue 17, points 3 and 5).

``reserved_mem`` is measured (``make_spec``, ``worker_baseline``) and a Spec below the measured
baseline is warned of; every public compute path plans with ``graph_fusion``; a task measured
over its projection or ``allowed_mem`` fails the run, naming the op and its part of the loss;
refusals name the part of the loss, print figures that do not round into each other, and
propose a chunk size for which the step's check passes (lazily rechunked, or rewritten when a
rechunk cannot fit)."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import pytest

import pycograd_xp as pg
from pycograd_xp import memory, optim
from pycograd_xp.memory import format_byte_pair as fmt_pair
from pycograd_xp.memory import format_bytes as fmt_bytes

cubed = pytest.importorskip("cubed")
zarr = pytest.importorskip("zarr")

import cubed_plugin as cp  # noqa: E402
from cubed_plugin import ReservedMemWarning, TaskMemoryError, TaskMemoryWarning  # noqa: E402
from cubed_plugin import _fit_steps as fit_steps  # noqa: E402
from cubed_plugin._executors import MARGIN  # noqa: E402
from cubed_plugin.memory import (  # noqa: E402
    part_of,
    plan_rows,
    stand_in,
    step_projection,
)
from cubed_plugin.steps import row_loss  # noqa: E402
from cubed_plugin.train import (  # noqa: E402
    fit,
    init_params,
    logreg_loss,
    make_spec,
    measuring_processes,
    mlp_loss,
    synthetic,
)

XP = pg.namespace(cubed)


def _stored(tmp_path, spec, rows=4000, features=8, chunk=500, model="logreg"):
    synthetic(str(tmp_path), rows, features, chunk, model)
    return (
        cubed.from_zarr(str(tmp_path / "X.zarr"), spec=spec),
        cubed.from_zarr(str(tmp_path / "y.zarr"), spec=spec),
    )


def _fit(loss, data, spec, **kw):
    kw = {"steps": 1, "spec": spec, "progress": False, "log": None, **kw}
    return fit(
        loss,
        init_params("mlp" if loss is mlp_loss else "logreg", data[0].shape[1]),
        data,
        optim.sgd(0.1),
        **kw,
    )


def mlp(p, X, y):  # a loss written here, so its forward ops name this file's lines
    h = XP.tanh(X @ p["W1"] + p["b1"])
    return XP.mean((h @ p["w2"] - y) ** 2)


def _mlp_step(spec, n=4000, d=8, chunk=500):
    """The lazy loss and gradients of ``mlp`` on stored-like data (Zarr metadata only)."""
    p, *specs = _mlp_step_args(spec, n, d, chunk)
    return pg.value_and_grad(mlp)(p, *(XP.asarray(stand_in(s, spec)) for s in specs))


# -- reserved_mem is measured -------------------------------------------------------------------


def test_make_spec_removes_the_temporary_work_dir_it_made():
    """Without ``work_dir`` the spec's storage is a temporary directory, removed at exit (or
    when nothing holds the spec); a directory the user gives is never removed."""
    code = (
        "import cubed, numpy as np, cubed_plugin as cp, sys\n"
        "s = cp.make_spec('200MB', '10MB')\n"
        "x = cubed.from_array(np.ones((100, 10)), chunks=(50, 10), spec=s)\n"
        "assert float(cubed.sum(x).compute()) == 1000.0\n"
        "print(s.work_dir)\n"
        "kept = cp.make_spec('200MB', '10MB', work_dir=sys.argv[1])\n"
    )
    with tempfile.TemporaryDirectory() as mine:
        out = subprocess.run(
            [sys.executable, "-c", code, mine], capture_output=True, text=True, check=True
        )
        made = out.stdout.strip().splitlines()[-1]
        assert made.startswith(tempfile.gettempdir()) and not os.path.exists(made)
        assert os.path.isdir(mine)


def test_make_spec_measures_reserved_mem_and_caches_it(tmp_path):
    base = cp.worker_baseline("threads")
    # a Python process with NumPy, Zarr, Cubed and pycograd_xp holds tens of MB of its own
    assert 20_000_000 < base < 1_000_000_000
    spec = make_spec("1GB", work_dir=str(tmp_path))
    assert spec.reserved_mem == math.ceil(base * MARGIN)
    assert make_spec("1GB", "30MB", work_dir=str(tmp_path)).reserved_mem == 30_000_000
    assert cp.worker_baseline("single-threaded") == base  # both run tasks in this process
    assert list(tmp_path.iterdir()) == []  # the measurement left nothing in work_dir


def test_an_executor_that_cannot_be_measured_is_a_clear_error(tmp_path):
    """An executor whose tasks run in other processes and report no memory (Cubed's processes
    executor running its tasks without measuring them): make_spec says why it cannot measure
    it, and fit warns that reserved_mem 0 counts nothing for it."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from cubed.runtime.asyncio import async_map_dag
    from cubed.runtime.executors.local import (
        ProcessesExecutor,
        processes_create_futures_func,
        run_func_threads,
    )

    class Unmeasured(ProcessesExecutor):
        async def _async_execute_dag(
            self, dag, callbacks=None, spec=None, compute_arrays_in_parallel=None, **kwargs
        ):
            pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("forkserver"))
            try:  # run_func_threads: the task's timing, no memory
                await async_map_dag(
                    processes_create_futures_func(pool, run_func_threads),
                    dag=dag,
                    callbacks=callbacks,
                    compute_arrays_in_parallel=compute_arrays_in_parallel,
                )
            finally:
                pool.shutdown(wait=True)

    measuring_processes()  # the forkserver's preloads
    with pytest.raises(
        RuntimeError,
        match=r"runs tasks in other processes but reports no "
        r"measured task memory .*give reserved_mem yourself",
    ):
        make_spec("1GB", work_dir=str(tmp_path), executor=Unmeasured())
    zero = cubed.Spec(work_dir=str(tmp_path / "work"), allowed_mem="500MB", reserved_mem=0)
    with pytest.warns(
        ReservedMemWarning,
        match=r"fit: reserved_mem is 0, so every task's "
        r"projection leaves out .*cannot be measured here",
    ):
        _fit(logreg_loss, _stored(tmp_path, zero), zero, executor=Unmeasured())


def test_a_spec_below_the_measured_baseline_warns(tmp_path):
    zero = cubed.Spec(work_dir=str(tmp_path / "work"), allowed_mem="500MB", reserved_mem=0)
    data = _stored(tmp_path, zero)
    with pytest.warns(
        ReservedMemWarning,
        match=r"fit: reserved_mem 0 B is below the [\d.]+ MB "
        r"a worker of the 'threads' executor measurably holds",
    ):
        _fit(logreg_loss, data, zero, executor="threads")
    v, g = _mlp_step(zero)
    with pytest.warns(ReservedMemWarning, match=r"check: reserved_mem 0 B is below"):
        cp.check(v, g)
    measured = make_spec("500MB", work_dir=str(tmp_path / "work"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReservedMemWarning)
        _fit(logreg_loss, _stored(tmp_path, measured), measured, executor="threads")
        cp.check(*_mlp_step(measured))


def _processes_overrun(tmp_path, **kw):
    zero = cubed.Spec(work_dir=str(tmp_path / "work"), allowed_mem="100MB", reserved_mem=0)
    data = _stored(tmp_path, zero)
    with pytest.warns(ReservedMemWarning):
        return _fit(logreg_loss, data, zero, executor=measuring_processes(), **kw)


def test_an_under_reserved_run_fails_loudly(tmp_path):
    """reserved_mem 0 on processes: every task measures its worker's own tens of MB over a
    projection of a few MB; fit raises after the step, naming the op, its part of the loss,
    both figures and the limit, and that reserved_mem is below the worker baseline."""
    with pytest.raises(TaskMemoryError) as e:
        _processes_overrun(tmp_path)
    text = str(e.value)
    assert re.search(
        r"fit: step 1 measured task memory over budget: op-\d+ \(\w+ in "
        r"the one-pass step of logreg_loss \(forward and backward of each row "
        r"chunk[^)]*\)[^;]*(; fused with [^;]*)?\) measured [\d.]+ MB in a task, over its "
        r"projection: projected [\d.]+ [kM]?B, allowed_mem 100 MB \(of which "
        r"reserved_mem 0 B\)",
        text,
    ), text
    assert re.search(
        r"reserved_mem 0 B is below the [\d.]+ MB a worker of this executor holds", text
    ), text
    for o in e.value.overruns:
        assert o.measured > o.projected and o.part
    assert e.value.recorder.overruns() == e.value.overruns


def test_an_overrun_can_be_a_warning_when_asked_for(tmp_path):
    with pytest.warns(TaskMemoryWarning, match=r"measured task memory over budget"):
        result = _processes_overrun(tmp_path, memory_overrun="warn", steps=2)
    assert result.step == 2 and result.memory.overruns()
    spec = make_spec("100MB", work_dir=str(tmp_path / "work"))
    with pytest.raises(ValueError, match="memory_overrun must be 'raise' or 'warn', got 'ignore'"):
        _fit(logreg_loss, _stored(tmp_path, spec), spec, memory_overrun="ignore")


def test_the_command_exits_non_zero_on_an_overrun(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "cubed_plugin.train",
            "--executor",
            "processes",
            "--rows",
            "20000",
            "--features",
            "8",
            "--steps",
            "1",
            "--quiet",
            "--allowed-mem",
            "100MB",
            "--reserved-mem",
            "0",
            "--work-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode != 0, out.stdout
    # with reserved_mem 0 every task is over (Cubed's create-arrays task too, by the worker's
    # own memory, which may come first): the failure names the step's op of the loss
    assert re.search(
        r"failed: fit: step 1 measured task memory over budget: (.*; )?op-\d+ "
        r"\(.* of logreg_loss",
        out.stderr,
    ), out.stderr
    assert "task memory per op, measured" in out.stdout  # the table, before the failure


# -- the sound optimizer on every public path ---------------------------------------------------


class _Plans(cubed.Callback):
    """The plans computed (``on_compute_start``'s dag)."""

    def __init__(self):
        self.dags = []

    def on_compute_start(self, event):
        self.dags.append(event.dag)


def _read_once(dag):
    """Whether the plan was made by graph_fusion (its fused tasks read each block once)."""
    from cubed_plugin._fusion import apply_blockwise_read_once

    return any(
        d["primitive_op"].pipeline.function is apply_blockwise_read_once
        for _, d in dag.nodes(data=True)
        if d.get("primitive_op") is not None
    )


def test_every_public_compute_path_uses_the_sound_optimizer(tmp_path):
    spec = make_spec("500MB", work_dir=str(tmp_path / "work"))
    v, g = _mlp_step(spec)
    assert _read_once(cp.plan(v, g).dag) and _read_once(cp.check(v, g).dag)
    assert not _read_once(cp.plan(v, g, optimize_function=None).dag)  # Cubed's own, on request
    plans = _Plans()
    X, y = _stored(tmp_path, spec, model="mlp")
    Xn = np.asarray(zarr.open_array(str(tmp_path / "X.zarr"))[:])
    w = XP.asarray(cubed.asarray(np.full(8, 0.1), spec=spec))
    lv, lg = pg.value_and_grad(lambda w, X: XP.sum(XP.tanh(X @ w) ** 2))(w, XP.asarray(X))
    _, grad = cp.compute(lv, lg, callbacks=[plans])
    t = np.tanh(Xn @ np.full(8, 0.1))
    np.testing.assert_allclose(grad, 2 * Xn.T @ (t * (1 - t**2)), rtol=1e-12)
    _fit(mlp_loss, (X, y), spec, mode="graph", callbacks=[plans])
    assert len(plans.dags) == 2 and all(_read_once(d) for d in plans.dags)
    # one-pass mode on stored data runs a planned step (cubed_plugin._one_pass): one op whose
    # tasks read their chunks, projected at the largest task of the step's graph as
    # graph_fusion plans it
    _fit(mlp_loss, (X, y), spec, mode="one-pass", callbacks=[plans])
    (step,) = [s for k, s in fit_steps._PLANNED.items() if k[1] == (X.name, y.name)]
    assert _read_once(step.reference.dag) and step.checked
    assert plans.dags[-1] is step.plan.dag
    assert step.plan.max_projected_mem == step.reference.max_projected_mem
    # cubed_plugin.memory.project (pycograd_xp.memory.project on Cubed, plan_rows) projects
    # the plan graph_fusion makes
    p = cp.memory.project(mlp, *_mlp_step_args(spec), backend=spec)
    assert p.max_task_bytes == cp.plan(v, g).max_projected_mem


def _mlp_step_args(spec, n=4000, d=8, chunk=500):
    rng = np.random.default_rng(0)
    p = {"W1": rng.standard_normal((d, 16)), "b1": np.zeros(16), "w2": rng.standard_normal(16)}
    p = pg.tree_map(lambda a: XP.asarray(cubed.asarray(a, spec=spec)), p)
    return p, memory.spec((n, d), chunks=(chunk, d)), memory.spec((n,), chunks=(chunk,))


def test_check_warns_where_cubeds_own_projection_falls_short():
    """A two-layer MLP's gradient planned with Cubed's own optimizer: it fuses the backward's
    producers into ops reading several blocks and projects less than those tasks hold."""
    spec = cubed.Spec(allowed_mem="400MB", reserved_mem="100MB")
    v, g = _mlp_step(spec, n=40_000, d=64, chunk=5000)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        cp.check(v, g, optimize_function=None)
    shortfalls = [str(w.message) for w in record]
    short = re.compile(
        r"check: this optimizer's plan projects op-\d+ \(matmul in mlp \(backward "
        r"of matmul\).*\) at [\d.]+ MB per task, but as Cubed runs it the task "
        r"can hold up to [\d.]+ MB"
    )
    assert any(short.search(w) for w in shortfalls), shortfalls
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # the threads executor's baseline is this process's: in a whole run it can pass the
        # 100 MB reserved here, which is another warning than the one this test is about
        warnings.simplefilter("ignore", ReservedMemWarning)
        cp.check(v, g)  # the default plan counts them: nothing to warn of


# -- advice that works ----------------------------------------------------------------------------


def test_ops_are_named_by_the_part_of_the_loss_that_built_them():
    spec = cubed.Spec(allowed_mem="500MB", reserved_mem="100MB")
    v, g = _mlp_step(spec)
    from cubed_plugin._cubed_seam import op_nodes
    from cubed_plugin.steps import read_peak

    unfused = cubed.plan(pg.unwrap(v), *map(pg.unwrap, pg.tree_leaves(g)), optimize_graph=False)
    parts = {
        part_of(unfused.dag, n)
        for n, d in unfused.dag.nodes(data=True)
        if d.get("primitive_op") is not None and n != "create-arrays"
    }
    line = mlp.__code__.co_firstlineno + 1  # h = XP.tanh(X @ p["W1"] + p["b1"])
    assert f"tanh in mlp (forward, test_cubed_budget.py:{line} in mlp)" in parts, parts
    assert "mul in mlp (backward of tanh)" in parts, parts
    assert any(re.fullmatch(r"matmul in mlp \(backward of matmul\)", p) for p in parts), parts
    # a fused op names the ops fused into it
    fused = cp.plan(v, g)
    assert any(
        "; fused with " in part_of(fused.dag, n)
        for n in fused.dag.nodes
        if fused.dag.nodes[n].get("primitive_op") is not None
    )
    # and a refusal names the part, with figures that do not round into each other (an op's
    # own projection, its reads' buffers counted, 1 byte over the limit: no plan fuses it away)
    top = max(max(po.projected_mem, read_peak(unfused.dag, n)) for n, po in op_nodes(unfused.dag))
    tight = cubed.Spec(allowed_mem=top - 1, reserved_mem="100MB")
    with pytest.raises(memory.MemoryLimitError) as e:
        cp.check(*_mlp_step(tight))
    need, have = re.search(
        r"op-\d+ \(.* in mlp .*\) needs (\S+ \S+) per task, over "
        r"allowed_mem (\S+ \S+)",
        str(e.value),
    ).groups()
    assert need != have and (need, have) == fmt_pair(top, top - 1)


def test_figures_read_three_significant_figures_without_misleading_rounding():
    assert fmt_bytes(152_345_678) == "152 MB" and fmt_bytes(1_234_567) == "1.23 MB"
    assert fmt_bytes(60_000_000) == "60.0 MB" and fmt_bytes(999) == "999 B"
    assert fmt_pair(100_600_000, 100_000_000) == ("101 MB", "100 MB")
    assert fmt_pair(100_400_000, 100_000_000) == ("100.4 MB", "100.0 MB")
    assert fmt_pair(99_960_000, 100_000_000) == ("99.96 MB", "100.00 MB")
    assert fmt_pair(100_000_001, 100_000_000) == ("100.000001 MB", "100.000000 MB")
    assert fmt_pair(1_000_000_001, 1_000_000_000) == ("1.000000001 GB", "1.000000000 GB")
    assert fmt_pair(5_080_000, 200_000) == ("5.08 MB", "200 kB")


def wide(p, X, y):  # a graph-mode loss whose hidden layer is wider than its data
    xp = X.__array_namespace__()
    return xp.mean((xp.sum(xp.tanh(X @ p["W"]), axis=1) - y) ** 2)


@row_loss
def wide_rows(p, X, y):  # the same loss, declared row-separable (fit's one-pass mode)
    xp = X.__array_namespace__()
    return (xp.sum(xp.tanh(X @ p["W"]), axis=1) - y) ** 2


@pytest.mark.slow  # 9-21 s: run by .ci/run's slow checks
def test_plan_rows_plans_the_mode_fit_runs():
    """One planner: auto plans what fit(mode="auto") runs (one-pass for a row loss, graph
    otherwise); the two modes hold different things per task, so they need different chunks;
    the answer is the largest that fits (within 1.5%); with batch_rows the chunk divides it."""
    spec = cubed.Spec(allowed_mem="1MB", reserved_mem="50kB")
    specs = memory.spec((4000, 2)), memory.spec((4000,))
    params = {"W": np.full((2, 64), 0.1)}
    auto, p_auto = plan_rows(wide_rows, params, *specs, rows=4000, data=(1, 2), backend=spec)
    graph, p_graph = plan_rows(
        wide_rows, params, *specs, rows=4000, data=(1, 2), backend=spec, mode="graph"
    )
    assert plan_rows(wide, params, *specs, rows=4000, data=(1, 2), backend=spec)[0] == graph
    assert auto != graph and p_auto.mode == "one-pass" and p_graph.mode == "graph"
    assert p_auto.max_task_bytes <= 1_000_000 and p_graph.max_task_bytes <= 1_000_000
    bigger = int(auto * 1.016) + 1
    over = step_projection(
        wide_rows,
        (
            params,
            memory.spec((4000, 2), chunks=(bigger, 2)),
            memory.spec((4000,), chunks=(bigger,)),
        ),
        data=(1, 2),
        mode="one-pass",
        spec=spec,
    )
    assert over.max_task_bytes > 1_000_000
    batch, p = plan_rows(
        wide_rows, params, *specs, rows=4000, data=(1, 2), backend=spec, batch_rows=1000
    )
    assert 1000 % batch == 0 and batch <= auto and p.max_task_bytes <= 1_000_000
    with pytest.raises(
        memory.MemoryLimitError,
        match=r"plan_rows \(one-pass mode\): even one "
        r"row per chunk needs .* \(\w+ in the one-pass step of wide_rows",
    ):
        plan_rows(
            wide_rows, {"W": np.zeros((2, 100_000))}, *specs, rows=4000, data=(1, 2), backend=spec
        )
    with pytest.raises(
        TypeError,
        match=r"plan_rows\(mode='one-pass'\): the loss must be "
        r"declared row-separable",
    ):
        plan_rows(wide, params, *specs, rows=4000, data=(1, 2), backend=spec, mode="one-pass")


def _advised_rows(message, mode):
    m = re.search(rf"chunks of at most ([\d,]+) rows fit in {mode} mode", message)
    assert m, message
    return int(m.group(1).replace(",", ""))


@pytest.mark.filterwarnings("ignore::cubed_plugin.ReservedMemWarning")
@pytest.mark.parametrize("mode", ["one-pass", "graph"])
def test_a_refusal_proposes_a_lazy_rechunk_that_passes(tmp_path, mode):
    """Stored chunks of 4,000 rows that no step of this budget fits, but a rechunk can read:
    the refusal names the op's part of the loss, proposes the rows per chunk of fit's mode,
    checked with the data rechunked lazily; fit on that rechunked data runs. In one-pass mode
    no refusal: each task computes its stored chunk in row slices."""
    spec = cubed.Spec(work_dir=str(tmp_path / "work"), allowed_mem="1MB", reserved_mem="50kB")
    X, y = _stored(tmp_path, spec, features=2, chunk=4000)
    loss = wide_rows if mode == "one-pass" else wide
    if mode == "one-pass":  # the stored chunks are computed in row slices: nothing refused
        lines: list[str] = []
        result = fit(
            loss,
            {"W": np.full((2, 64), 0.1)},
            (X, y),
            optim.sgd(0.1),
            steps=1,
            spec=spec,
            progress=False,
            log=lines.append,
        )
        assert any("each task computes its chunk in slices of" in line for line in lines), lines
        assert result.step == 1 and result.memory.max_projected() <= 1_000_000
        return
    with pytest.raises(memory.MemoryLimitError) as e:
        fit(
            loss,
            {"W": np.full((2, 64), 0.1)},
            (X, y),
            optim.sgd(0.1),
            steps=1,
            spec=spec,
            progress=False,
            log=None,
        )
    text = str(e.value)
    assert re.search(
        rf"fit: step 1 \({mode} mode\) is refused before running: op-\d+ \(.* "
        r"wide(_rows)? .*\) needs [\d.]+ MB per task, over allowed_mem 1.00 MB",
        text,
    ), text
    n = _advised_rows(text, mode)
    assert (
        f"Rechunk it lazily (data[0] = data[0].rechunk(({n}, 2)); data[1] = "
        f"data[1].rechunk(({n},))): checked" in text
    ), text
    result = fit(
        loss,
        {"W": np.full((2, 64), 0.1)},
        (X.rechunk((n, 2)), y.rechunk((n,))),
        optim.sgd(0.1),
        steps=1,
        spec=spec,
        progress=False,
        log=None,
    )
    assert result.step == 1 and result.memory.max_projected() <= 1_000_000


@pytest.mark.filterwarnings("ignore::cubed_plugin.ReservedMemWarning")
def test_a_refusal_says_how_to_rewrite_data_a_rechunk_cannot_read(tmp_path):
    """A budget in which neither a task (even in row slices) nor Cubed's rechunk can read a
    stored chunk: the refusal says so, and how to rewrite the data with the exact chunks; fit
    on data rewritten so runs."""
    spec = cubed.Spec(work_dir=str(tmp_path / "work"), allowed_mem="2MB", reserved_mem="1MB")
    X, y = _stored(tmp_path, spec, rows=16000, chunk=8000, model="mlp")
    with pytest.raises(memory.MemoryLimitError) as e:
        _fit(mlp_loss, (X, y), spec, mode="one-pass", batch_rows=8000)
    text = str(e.value)
    n = _advised_rows(text, "one-pass")
    assert 8000 % n == 0  # a batch of whole chunks
    assert "cannot fit" in text and "Rewrite the data once" in text, text
    # computing the chunks in row slices was tried first: reading one stored chunk does not fit
    assert 0 <= text.index("row slices in its task cannot fit") < text.index("Rewrite"), text
    assert f"data argument 0 with chunks ({n}, 8), data argument 1 with chunks ({n},)" in text
    for name, x in (("X", X), ("y", y)):
        z = zarr.open_array(
            str(tmp_path / f"{name}-{n}.zarr"),
            mode="w",
            shape=x.shape,
            dtype=x.dtype,
            chunks=(n, *x.shape[1:]),
        )
        z[...] = zarr.open_array(str(tmp_path / f"{name}.zarr"))[...]
    data = tuple(
        cubed.from_zarr(str(tmp_path / f"{name}-{n}.zarr"), spec=spec) for name in ("X", "y")
    )
    result = _fit(mlp_loss, data, spec, mode="one-pass", batch_rows=8000)
    assert result.step == 1 and result.memory.max_projected() <= 2_000_000


def test_check_returns_a_plan_that_prints_what_was_checked():
    xc = pg.namespace(cubed)
    x = xc.asarray(np.ones((100, 10)))
    p = cp.check(xc.sum(x * 2))
    assert p.num_tasks >= 1 and p.max_projected_mem > 0  # Cubed's plan's attributes
    text = repr(p)
    assert text.startswith("<checked plan: ") and "largest task" in text
    assert "of allowed_mem" in text and "FinalizedPlan" not in text
