"""Every Cubed executor that runs on one machine, through ``fit`` and the command line: the same
parameters as the threads executor (bit-identical), a worker killed mid-run survived where the
engine retries, and measured task peaks that are each task's own. Each engine's tests skip
when its extra is absent; the slow ones (an engine started, a worker killed) are marked slow."""

from __future__ import annotations

import importlib.util
import os
import signal
import threading
import time

import numpy as np
import pytest

import pycograd_xp as pg
from pycograd_xp import optim

cubed = pytest.importorskip("cubed")
pytest.importorskip("zarr")

from cubed_plugin import make_executor  # noqa: E402
from cubed_plugin.steps import row_loss  # noqa: E402
from cubed_plugin.train import fit, init_params, logreg_loss, synthetic  # noqa: E402

NP = pg.namespace(np)
# a budget that covers what a worker process of any of these engines holds before any data
ALLOWED, RESERVED = "600MB", "300MB"


def _data(tmp_path, rows=4000, features=8, chunk=500):
    synthetic(str(tmp_path), rows, features, chunk, "logreg")
    spec = cubed.Spec(work_dir=str(tmp_path / "work"), allowed_mem=ALLOWED, reserved_mem=RESERVED)
    X = cubed.from_zarr(str(tmp_path / "X.zarr"), spec=spec)
    y = cubed.from_zarr(str(tmp_path / "y.zarr"), spec=spec)
    return spec, X, y


def _fit(spec, X, y, executor, loss=logreg_loss, steps=2, **kw):
    return fit(
        loss,
        init_params("logreg", 8),
        (X, y),
        optim.sgd(0.3),
        steps=steps,
        spec=spec,
        executor=executor,
        progress=False,
        log=None,
        **kw,
    )


def _same(got, want):
    for a, b in zip(pg.tree_leaves(got), pg.tree_leaves(want), strict=True):
        np.testing.assert_array_equal(a, b)


def _slow_tasks(marks):
    """A logistic loss whose tasks write their process id to ``marks`` (a directory) and then
    take half a second: a test kills a worker while tasks run."""

    @row_loss
    def slow(p, X, y):
        if X.__array_namespace__() is pg.namespace(np):  # in a task (not while projected)
            os.makedirs(marks, exist_ok=True)
            with open(os.path.join(marks, str(os.getpid())), "w"):
                pass
            time.sleep(0.5)
        return logreg_loss.per_row(p, X, y)

    return slow


def _kill_first_worker(marks, exclude, killed, timeout=120.0):
    """In a thread: wait for a task to start in a process other than ``exclude`` and kill it
    (SIGKILL, by its process id); its id goes into ``killed``."""

    def run():
        deadline = time.time() + timeout
        while time.time() < deadline:
            pids = [int(p) for p in os.listdir(marks)] if os.path.isdir(marks) else []
            pids = [p for p in pids if p not in exclude]
            if pids:
                os.kill(pids[0], signal.SIGKILL)
                killed.append(pids[0])
                return
            time.sleep(0.02)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


# -- processes ----------------------------------------------------------------------------------


def test_processes_survives_a_worker_killed_mid_run(tmp_path):
    """make_executor("processes") (measuring_processes) tries a task again when its worker
    dies, on a fresh pool with the tasks that were in flight beside it (CPython's pool breaks
    for good): the run ends with the parameters of an unkilled run."""
    spec, X, y = _data(tmp_path)
    want = _fit(spec, X, y, "threads", steps=1).params
    marks = str(tmp_path / "started")
    killed: list[int] = []
    t = _kill_first_worker(marks, {os.getpid()}, killed)
    ex = make_executor("processes", workers=2)
    got = _fit(spec, X, y, ex, loss=_slow_tasks(marks), steps=1).params
    t.join()
    assert killed, "no worker was killed"
    _same(got, want)


def test_executors_that_cannot_retry_say_so_before_running():
    from cubed_plugin import NoRetryWarning
    from cubed_plugin._cubed_seam import create_executor
    from cubed_plugin._executors import no_retry

    assert no_retry(make_executor("processes")) is None
    assert "retries nothing" in no_retry(create_executor("processes"))
    assert "retries=0" in no_retry(make_executor("processes", retries=0))
    assert no_retry(make_executor("threads")) is None
    assert issubclass(NoRetryWarning, UserWarning)


def test_an_unknown_executor_name_is_refused_naming_the_choices(tmp_path):
    """fit(executor="bogus") says which names there are (it said Cubed's "Unrecognized
    executor name"), before anything runs; a name Cubed knows and this plugin does not wrap
    still reaches Cubed."""
    from cubed_plugin._executors import executor_of

    spec, X, y = _data(tmp_path)
    with pytest.raises(ValueError, match=r"'bogus' is not an executor's name: one of single-"):
        _fit(spec, X, y, "bogus")
    assert not (tmp_path / "work").exists() or not any((tmp_path / "work").iterdir())
    if importlib.util.find_spec("modal") is None:  # Cubed's name: Cubed imports its engine
        with pytest.raises(ModuleNotFoundError, match="modal"):
            executor_of("modal")


# -- Dask distributed ---------------------------------------------------------------------------


@pytest.fixture
def cluster():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, host="127.0.0.1", dashboard_address=None
    ) as c:
        yield c


def test_dask_on_an_existing_scheduler_gives_the_threads_parameters_bit_for_bit(tmp_path, cluster):
    spec, X, y = _data(tmp_path)
    want = _fit(spec, X, y, "threads").params
    ex = make_executor("dask", scheduler=cluster.scheduler_address)
    _same(_fit(spec, X, y, ex).params, want)
    # and by name, with the address in compute_kwargs (Cubed's way)
    kw = {"compute_kwargs": {"compute_kwargs": {"address": cluster.scheduler_address}}}
    _same(_fit(spec, X, y, "dask", **kw).params, want)


def test_dask_by_name_starts_one_cluster_for_all_the_steps(tmp_path, monkeypatch):
    """``executor="dask"`` without an address: one LocalCluster for the process, not Cubed's
    bare executor, which starts one on every compute (each step: seconds a step)."""
    distributed = pytest.importorskip("distributed")
    spec, X, y = _data(tmp_path)
    want = _fit(spec, X, y, "threads", steps=3).params
    made = []
    start = distributed.LocalCluster.__init__

    def counting(self, *args, **kwargs):
        made.append(1)
        start(self, *args, **kwargs)

    monkeypatch.setattr(distributed.LocalCluster, "__init__", counting)
    _same(_fit(spec, X, y, "dask", steps=3).params, want)
    assert len(made) <= 1  # (none when an earlier test of this process started it)


def test_dask_by_name_runs_workers_without_the_profiler():
    """The LocalCluster ``executor="dask"`` starts runs its workers without Dask's statistical
    profiler, whose history grew a worker's own memory past its measured baseline over a long
    run (``DASK_WORKER_CONFIG``)."""
    distributed = pytest.importorskip("distributed")
    from cubed_plugin._executors import _local_dask_cluster

    def profiling() -> bool:
        import dask

        return bool(dask.config.get("distributed.worker.profile.enabled"))

    with distributed.Client(_local_dask_cluster(2)) as client:
        assert list(client.run(profiling).values()) == [False, False]


def test_dask_by_name_runs_workers_with_the_measured_workers_allocator():
    """The LocalCluster ``executor="dask"`` starts gives its workers the allocator of the
    processes executor's workers from their start (one arena, fixed thresholds:
    ``WORKER_MALLOC_ENV``; the nanny's own fixed the mmap threshold at 128 kB, 6,400 page
    faults a task), and leaves this process's environment as it was."""
    distributed = pytest.importorskip("distributed")
    from cubed_plugin._executors import _local_dask_cluster
    from cubed_plugin._measuring import WORKER_MALLOC_ENV

    before = dict(os.environ)

    def environ() -> dict:
        import os

        return {name: os.environ.get(name) for name in WORKER_MALLOC_ENV}

    with distributed.Client(_local_dask_cluster(2)) as client:
        assert list(client.run(environ).values()) == [WORKER_MALLOC_ENV] * 2
    assert dict(os.environ) == before


def test_the_dask_client_lists_the_workers_cubed_checks(cluster):
    """distributed >= 2026.7 gives an asynchronous client's scheduler_info() no workers; the
    seam's client fetches them (Cubed's executor refuses a cluster with none listed)."""
    import asyncio

    from cubed_plugin._measuring import _dask_classes

    client_class = _dask_classes()[1]

    async def workers():
        async with client_class(cluster.scheduler_address, asynchronous=True) as c:
            return c.scheduler_info().get("workers")

    assert len(asyncio.run(workers())) == 2


def test_dask_measures_each_task_on_its_own(tmp_path, cluster):
    """On a worker that runs many tasks, a task's measured peak is its own: a small task after
    a large one on the same worker is not reported at the large one's peak (Cubed's run_func
    reports the worker's lifetime peak)."""
    ex = make_executor("dask", scheduler=cluster.scheduler_address)
    spec = cubed.Spec(work_dir=str(tmp_path), allowed_mem="1GB", reserved_mem="300MB")
    peaks: dict[str, list[int | None]] = {}

    class Peaks(cubed.Callback):
        def on_task_end(self, event):
            peaks.setdefault(event.name, []).append(event.peak_measured_mem_end)

    def big(block):
        t = np.ones(40_000_000)  # 320 MB
        return block + t[:1].sum()

    def small(block):
        return block + 1

    a = cubed.ones((8,), chunks=(1,), spec=spec)
    b = cubed.map_blocks(big, a, dtype=a.dtype)
    c = cubed.map_blocks(small, b, dtype=a.dtype)
    cubed.compute(c, executor=ex, callbacks=[Peaks()], optimize_graph=False)
    by_size = sorted((max(v), k) for k, v in peaks.items() if None not in v)
    assert len(by_size) >= 2, peaks
    (small_peak, _), (big_peak, _) = by_size[0], by_size[-1]
    assert big_peak - small_peak > 250_000_000, by_size


def test_dask_workers_of_several_threads_measure_nothing(tmp_path):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, host="127.0.0.1", dashboard_address=None
    ) as c:
        spec, X, y = _data(tmp_path)
        result = _fit(spec, X, y, make_executor("dask", scheduler=c.scheduler_address), steps=1)
    assert result.memory.measured == {}
    assert "cannot measure" in result.memory.table()


@pytest.mark.slow
def test_dask_survives_a_worker_killed_mid_run(tmp_path, cluster):
    spec, X, y = _data(tmp_path)
    want = _fit(spec, X, y, "threads", steps=3).params
    marks = str(tmp_path / "started")
    killed: list[int] = []
    t = _kill_first_worker(marks, {os.getpid()}, killed)
    ex = make_executor("dask", scheduler=cluster.scheduler_address)
    got = _fit(spec, X, y, ex, loss=_slow_tasks(marks), steps=3).params
    t.join()
    assert killed, "no worker was killed"
    _same(got, want)


@pytest.mark.slow
def test_the_command_trains_on_dask_as_on_threads(tmp_path):
    pytest.importorskip("distributed")
    from cubed_plugin.train import main

    def run(*extra):
        args = ["--rows", "4000", "--features", "8", "--steps", "2", "--quiet"]
        args += ["--allowed-mem", ALLOWED, "--reserved-mem", RESERVED]
        args += ["--work-dir", str(tmp_path / f"work-{extra[1]}")]
        return main([*args, *extra]).params

    _same(run("--executor", "dask", "--workers", "2"), run("--executor", "threads"))


# -- Ray, Apache Beam, Lithops, Spark -----------------------------------------------------------

ENGINES = {
    "ray": ("ray", {}),
    "beam": ("apache_beam", {}),
    "beam-processes": ("apache_beam", {"beam_mode": "multi_processing", "workers": 2}),
    "lithops": ("lithops", {"workers": 2}),
    "spark": ("pyspark", {"workers": 2}),
}


@pytest.mark.slow
@pytest.mark.parametrize("engine", list(ENGINES))
def test_each_engine_gives_the_threads_parameters_bit_for_bit(tmp_path, engine):
    module, options = ENGINES[engine]
    pytest.importorskip(module)
    spec, X, y = _data(tmp_path)
    want = _fit(spec, X, y, "threads").params
    ex = make_executor(engine.split("-")[0], **options)
    _same(_fit(spec, X, y, ex).params, want)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["ray", "lithops", "spark"])
def test_each_engine_that_retries_survives_a_worker_killed_mid_run(tmp_path, engine):
    module, options = ENGINES[engine]
    pytest.importorskip(module)
    spec, X, y = _data(tmp_path)
    want = _fit(spec, X, y, "threads", steps=3).params
    ex = make_executor(engine, **options)
    marks = str(tmp_path / "started")
    killed: list[int] = []
    t = _kill_first_worker(marks, {os.getpid()}, killed)
    got = _fit(spec, X, y, ex, loss=_slow_tasks(marks), steps=3).params
    t.join()
    assert killed, "no worker was killed"
    _same(got, want)


def test_beam_multi_process_says_before_running_that_it_cannot_retry(tmp_path):
    pytest.importorskip("apache_beam")
    from cubed_plugin import NoRetryWarning

    spec, X, y = _data(tmp_path)
    ex = make_executor("beam", beam_mode="multi_processing", workers=2)
    with pytest.warns(NoRetryWarning, match="retries nothing"):
        with pytest.raises(RuntimeError, match="stop here"):
            _fit(spec, X, y, ex, callbacks=[_Stop()])


@pytest.mark.slow
def test_a_spark_session_that_tries_tasks_once_is_named_before_running(tmp_path):
    """A Spark session the user made in local mode without retries (local[2]) is the one
    make_executor("spark") gets; fit says before running that a dead worker fails the run.
    Without one, make_executor starts local[N,F], which retries."""
    pytest.importorskip("pyspark")
    import sys

    from pyspark.sql import SparkSession

    from cubed_plugin import NoRetryWarning
    from cubed_plugin._executors import no_retry

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    user = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
    session = user.getOrCreate()
    try:
        ex = make_executor("spark", workers=2)
        assert "tries each task once" in no_retry(ex)
        spec, X, y = _data(tmp_path)
        with pytest.warns(NoRetryWarning, match="local\\[2\\]"):
            with pytest.raises(RuntimeError, match="stop here"):
                _fit(spec, X, y, ex, callbacks=[_Stop()])
    finally:
        session.stop()
    assert no_retry(make_executor("spark", workers=2)) is None


class _Stop(cubed.Callback):
    def on_compute_start(self, event):
        raise RuntimeError("stop here")


CLI = {
    "ray": ("ray", []),
    "beam": ("apache_beam", []),
    "beam-processes": ("apache_beam", ["--beam-mode", "multi_processing", "--workers", "2"]),
    "lithops": ("lithops", ["--workers", "2"]),
    "spark": ("pyspark", ["--workers", "2"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("engine", list(CLI))
def test_the_command_trains_on_each_engine_as_on_threads(tmp_path, engine):
    module, options = CLI[engine]
    pytest.importorskip(module)
    from cubed_plugin.train import main

    def run(name, *extra):
        args = ["--rows", "4000", "--features", "8", "--steps", "2", "--quiet"]
        args += ["--allowed-mem", ALLOWED, "--reserved-mem", RESERVED]
        args += ["--work-dir", str(tmp_path / f"work-{name}")]
        return main([*args, "--executor", name, *extra]).params

    _same(run(engine.split("-")[0], *options), run("threads"))


def test_the_processes_executor_refuses_a_script_without_the_main_guard(tmp_path):
    """Its workers import the main script again: unguarded, each would start the training
    (Python's long traceback). Refused in one line before any worker starts; a guarded script
    passes."""
    import subprocess
    import sys

    for guarded in (False, True):
        body = 'ex = make_executor("processes")\nprint("made")\n'
        if guarded:
            body = 'if __name__ == "__main__":\n' + "".join(
                "    " + ln + "\n" for ln in body.splitlines()
            )
        script = tmp_path / f"train_{guarded}.py"
        script.write_text("from cubed_plugin import make_executor\n" + body)
        r = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, timeout=300
        )
        if guarded:
            assert r.returncode == 0 and "made" in r.stdout, r.stderr
        else:
            assert r.returncode != 0
            last = r.stderr.strip().splitlines()[-1]
            assert last.startswith("RuntimeError: the processes executor's workers import")
            assert '`if __name__ == "__main__":`' in last
