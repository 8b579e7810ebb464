"""Cubed executors: the one that measures each task on its own, and the memory a worker of any
executor holds before a task adds data to it (what ``Spec.reserved_mem`` must cover).

Cubed's ``Spec`` defaults to ``reserved_mem=0``: its check then counts only a task's data, and a
worker process needs tens of megabytes of its own (the interpreter, NumPy, Zarr, Cubed,
pycograd_xp), so a plan that passes the check runs over ``allowed_mem`` without a word.
:func:`worker_baseline` (:mod:`cubed_plugin._baseline`) measures that memory, warm, on the
executor; :func:`make_spec`, ``check`` and ``fit`` use it.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import sys
import tempfile
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._baseline import MARGIN, measured_baseline

__all__ = ["MARGIN", "make_executor", "make_spec", "measuring_processes", "worker_baseline"]


# the executors by name that run on one machine (make_executor), each engine's extra
ENGINES = ("single-threaded", "threads", "processes", "dask", "ray", "beam", "lithops", "spark")
EXTRAS = {"dask": "dask", "ray": "ray", "beam": "beam", "lithops": "lithops", "spark": "spark"}
# the modules each engine needs
_NEEDS = {
    "dask": "distributed",
    "ray": "ray",
    "beam": "apache_beam",
    "lithops": "lithops",
    "spark": "pyspark",
}
# Apache Beam's DirectRunner modes (its direct_running_mode)
BEAM_MODES = ("in_memory", "multi_threading", "multi_processing")


def _need(name: str) -> None:
    import importlib.util

    module = _NEEDS.get(name)
    if module is not None and importlib.util.find_spec(module) is None:
        raise ImportError(
            f"the {name!r} executor needs {module}: pip install 'pycograd-xp[{EXTRAS[name]}]'"
        )


def make_executor(
    name: str,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    ray_address: str | None = None,
    beam_mode: str = "in_memory",
    retries: int = 2,
) -> Any:
    """A Cubed executor by ``name`` (one of :data:`ENGINES`), set up to run on this machine (or on
    the cluster named) with retries where the engine has them.

    - "single-threaded", "threads": tasks in this process (threads: several at once, so two
      tasks and the driver's own data share one process).
    - "processes": :func:`measuring_processes` (forked workers kept across tasks and steps,
      each task measured on its own; ``workers`` at a time). A failed task is tried again
      ``retries`` times, a worker that died included (Cubed's own processes executor retries
      nothing: one dead worker broke its pool and the run).
    - "dask": Dask distributed (``cubed_plugin``'s executor: works with distributed >= 2026.7,
      each task measured on its own on workers of one thread). ``scheduler``: the address of
      an existing cluster; without it a LocalCluster of ``workers`` processes of one thread
      each is started for this executor (closed at exit). Dask retries a task ``retries``
      times and reruns the tasks of a worker that died.
    - "ray": Ray; ``ray_address`` an existing cluster's ("auto": the local one), else a
      local Ray of ``workers`` CPUs is started (once per process). Ray retries a task whose
      worker died ``retries`` times.
    - "beam": Apache Beam's DirectRunner, ``beam_mode`` "in_memory" (tasks in this process),
      "multi_threading" or "multi_processing" (``workers`` processes). The DirectRunner
      retries nothing: a worker process killed fails the run (``fit`` says so before
      running).
    - "lithops": Lithops on localhost (its workers run this interpreter, ``sys.executable``:
      Lithops' default runtime is the ``python3`` on the PATH, which may lack the libraries),
      ``workers`` worker processes; Cubed retries a failed task ``retries`` times.
    - "spark": Spark in local mode, ``local[workers, retries + 1]`` (Spark's local mode tries
      a task once unless told otherwise); its Python workers run this interpreter
      (``PYSPARK_PYTHON`` is set to ``sys.executable`` when unset).

    Each needs its extra (``pip install 'pycograd-xp[NAME]'``; ImportError says which).

    Parameters
    ----------
    name : str
        The engine, as above.
    workers : int, optional
        Tasks (worker processes, CPUs) at a time; the engine's default when None.
    scheduler : str, optional
        "dask": an existing cluster's scheduler address.
    ray_address : str, optional
        "ray": an existing cluster's address ("auto": the local one).
    beam_mode : str, default "in_memory"
        "beam": the DirectRunner's mode.
    retries : int, default 2
        Retries of a failed task, where the engine has them.

    Returns
    -------
    cubed executor
        For ``fit(executor=...)``, :func:`~cubed_plugin.compute` and ``cubed.compute``.

    Raises
    ------
    ImportError
        If the engine's extra is not installed, naming it.
    """
    from ._cubed_seam import create_executor
    from ._measuring import dask_executor

    if name not in ENGINES:
        raise ValueError(f"make_executor: unknown executor {name!r}; one of {', '.join(ENGINES)}")
    if beam_mode not in BEAM_MODES:
        raise ValueError(f"make_executor: beam_mode must be one of {BEAM_MODES}, got {beam_mode!r}")
    _need(name)
    n = workers or min(os.cpu_count() or 1, 4)
    if name in ("single-threaded", "threads"):
        return create_executor(name)
    if name == "processes":
        ex = measuring_processes(retries=retries)
        if workers is not None:
            ex.kwargs["max_workers"] = workers
        return ex
    if name == "dask":
        if scheduler is None:
            scheduler = _local_dask_cluster(n)
        return dask_executor(compute_kwargs={"address": scheduler}, retries=retries)
    if name == "ray":
        import ray

        if not ray.is_initialized():
            if ray_address is not None:
                ray.init(address=ray_address)
            else:
                ray.init(num_cpus=n, include_dashboard=False, log_to_driver=False)
        return create_executor("ray", {"retries": retries})
    if name == "beam":
        from apache_beam.options.pipeline_options import PipelineOptions

        options = PipelineOptions(
            direct_running_mode=beam_mode, direct_num_workers=n if beam_mode != "in_memory" else 1
        )
        return create_executor("beam", {"runner": "DirectRunner", "options": options})
    if name == "lithops":
        config = {
            "lithops": {"backend": "localhost", "storage": "localhost"},
            "localhost": {"runtime": sys.executable, "worker_processes": n},
        }
        return create_executor("lithops", {"config": config, "retries": retries})
    # spark
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    SparkSession.builder.master(f"local[{n},{retries + 1}]").config(
        "spark.ui.enabled", "false"
    ).getOrCreate()
    return create_executor("spark")


def measures_each_task(executor: Any) -> tuple[bool, str]:
    """(whether the peaks ``executor`` reports are each task's own, why not): Ray's workers
    and Cubed's processes executor's run many tasks each and report the process's lifetime
    peak (the largest of every task it ran before), Lithops' are its own figures; those are
    not a task's. :func:`measuring_processes` and cubed_plugin's Dask
    executor (the peak reset per task, on workers of one thread) are; the in-process
    executors report none."""
    from ._cubed_seam import is_processes_executor
    from ._measuring import MeasuringProcesses

    name = getattr(executor, "name", "")
    if is_processes_executor(executor) and not isinstance(executor, MeasuringProcesses):
        return False, (
            "Cubed's processes executor reuses each worker for many tasks and reports its "
            "lifetime peak: use measuring_processes(), which resets it per task"
        )
    if name in ("ray", "lithops"):
        return False, (
            f"{name}'s workers run many tasks each and report the process's lifetime peak, "
            "not a task's"
        )
    return True, ""


def returns_task_results(executor: Any) -> bool:
    """Whether ``executor`` sends what each task returns back to the driver (Cubed's executors
    do, to its callbacks, all but Apache Beam's, which runs a pipeline and reports counts)."""
    return getattr(executor, "name", "") != "beam"


class NoRetryWarning(UserWarning):
    """The executor cannot retry a task whose worker dies in the mode it runs: a worker killed
    fails the run (resume it from ``fit``'s checkpoint).
    """


def no_retry(executor: Any) -> str | None:
    """Why a worker of ``executor`` that dies mid-task fails the run (its engine retries
    nothing in this mode), or None when the engine retries (or the tasks run in this process,
    where a dead worker is a dead run)."""
    from ._cubed_seam import is_processes_executor
    from ._measuring import MeasuringProcesses

    name = getattr(executor, "name", "")
    kwargs = getattr(executor, "kwargs", None) or {}
    if kwargs.get("retries") == 0:
        return (
            f"the {name!r} executor was made with retries=0: a task that fails (its worker "
            "killed) fails the run; resume it from fit's checkpoint_dir"
        )
    if is_processes_executor(executor) and not isinstance(executor, MeasuringProcesses):
        return (
            "Cubed's own processes executor retries nothing: a worker that dies breaks its "
            "pool and fails the run (BrokenProcessPool); make_executor('processes') (or "
            "executor='processes') retries, a dead worker's tasks included"
        )
    if name == "beam":
        options = kwargs.get("options")
        mode = options.get_all_options().get("direct_running_mode") if options else None
        if mode == "multi_processing":
            return (
                "Apache Beam's DirectRunner retries nothing: a worker process that dies fails "
                "the run ('Channel closed prematurely'); resume it from fit's checkpoint_dir"
            )
    if name == "spark":
        try:
            from pyspark.sql import SparkSession

            session = SparkSession.getActiveSession()
        except ImportError:
            return None
        master = session.sparkContext.master if session is not None else "local[*]"
        if master.startswith("local") and master.count(",") == 0:
            return (
                f"Spark's local mode ({master}) tries each task once: a worker that dies fails "
                "the run; make_executor('spark') starts local[N,F] (F tries per task)"
            )
    return None


_DASK_CLUSTERS: dict[int, Any] = {}


# A Dask worker's statistical profiler samples its threads every 10 ms and keeps a second's
# samples per entry for 1,000 entries: a worker's own memory grew by 0.45 MB per 100 tasks of a
# one-pass step, for about 17 minutes, and a 10 GB run's tasks went 7 MB over projections that
# had a worker's measured baseline plus 10 %. Without it the growth is the bounded logs' (0.2 MB
# per 100 tasks at first, then less: 1,000 entries each).
DASK_WORKER_CONFIG = {"distributed.worker.profile.enabled": False}


def _local_dask_cluster(workers: int) -> str:
    """The scheduler address of a LocalCluster of ``workers`` processes of one thread each,
    started once per process and size, closed at exit.

    Its workers run without Dask's statistical profiler (:data:`DASK_WORKER_CONFIG`) and with
    the allocator of the processes executor's workers (``_measuring.WORKER_MALLOC_ENV``, set
    through the nanny's ``pre-spawn-environ``, as the process starts): the nanny's own
    ``MALLOC_TRIM_THRESHOLD_=65536`` also fixes glibc's mmap threshold at 128 kB, so that
    every chunk-sized buffer was mapped afresh and paged in 4 kB at a time (6,400 page faults
    a task), and setting the allocator once the worker runs left the task thread's own arena
    untrimmed (tasks measured above their projections). The nanny takes these variables from
    this process's environment over its config, and writes its workers' environment into this
    process's: they are left out while the workers start, and the environment is put back
    once they have started."""
    if workers not in _DASK_CLUSTERS:
        import atexit

        import dask
        import distributed

        from ._measuring import WORKER_MALLOC_ENV

        environ = {
            f"distributed.nanny.pre-spawn-environ.{name}": value
            for name, value in WORKER_MALLOC_ENV.items()
        }
        saved = dict(os.environ)
        for name in WORKER_MALLOC_ENV:  # the nanny would take these over its config
            os.environ.pop(name, None)
        try:
            # the workers get the config when spawned
            with dask.config.set({**DASK_WORKER_CONFIG, **environ}):
                cluster = distributed.LocalCluster(
                    n_workers=workers,
                    threads_per_worker=1,
                    host="127.0.0.1",
                    dashboard_address=None,
                )
        finally:
            os.environ.clear()
            os.environ.update(saved)
        atexit.register(cluster.close)
        _DASK_CLUSTERS[workers] = cluster
    return str(_DASK_CLUSTERS[workers].scheduler_address)


def close_local_dask_clusters() -> None:
    """Close the LocalClusters ``executor="dask"`` started in this process now, rather than at
    exit: their event loop runs in a thread of this process, and tracemalloc counts its
    allocations in whatever runs meanwhile (``pycograd_xp.memory.measure``'s figures)."""
    import atexit

    while _DASK_CLUSTERS:
        _, cluster = _DASK_CLUSTERS.popitem()
        atexit.unregister(cluster.close)
        cluster.close()


def executor_of(executor: Any, spec: Any = None, compute_kwargs: dict | None = None) -> Any:
    """The executor object Cubed runs with for ``executor``: an executor, its name (as
    :func:`make_executor` makes it, with its defaults: "processes" is
    :func:`measuring_processes`, so each task's measured peak is its own and a task over its
    budget fails the run; "dask" runs on one LocalCluster per process, unless
    ``compute_kwargs`` name a cluster's address), or None (the Spec's executor, else Cubed's
    default, "threads")."""
    from ._cubed_seam import create_executor
    from ._measuring import dask_executor

    if executor == "dask":
        if ((compute_kwargs or {}).get("compute_kwargs") or {}).get("address"):
            return dask_executor()  # the cluster the compute names
        # not Cubed's executor bare: it starts a LocalCluster on every compute (every step)
        return make_executor("dask")
    if isinstance(executor, str):
        if executor in ENGINES:
            return make_executor(executor)
        try:  # another of Cubed's (modal, coiled, gcf, ...)
            return create_executor(executor)
        except ValueError as e:
            raise ValueError(
                f"executor {executor!r} is not an executor's name: one of "
                f"{', '.join(ENGINES)}, another of Cubed's, or an executor object"
            ) from e
    if executor is not None:
        return executor
    if spec is not None and spec.executor is not None:
        return spec.executor
    return create_executor("threads", spec.executor_options if spec is not None else None)


def worker_baseline(
    executor: Any = None,
    *,
    work_dir: str | None = None,
    compute_kwargs: dict | None = None,
    reads: Any = None,
) -> int:
    """The memory, in bytes, that a warm process running one of ``executor``'s tasks holds
    before the task adds any data.

    Measured warm: each of a few small tasks first does what a worker's first tasks bring
    (imports, a read of compressed Zarr chunks through Zarr's thread pool, NumPy's BLAS threads,
    a one-pass gradient on a small chunk), gives that memory back, then measures a small task;
    the largest figure is the baseline. Executors that run tasks in worker processes and measure
    them (processes, ``measuring_processes()``, dask, lithops, modal) are measured themselves.
    Executors that run tasks inside this process (single-threaded, threads) measure nothing per
    task: their baseline is that of a fresh Python process that runs the tasks itself, the least
    any process running them holds (this process holds that plus its own data).

    The figures are kept per machine, executor kind, Python environment and package versions
    in a file (``cubed_plugin._baseline.cache_path``; the environment variable
    ``PYCOGRAD_XP_BASELINE_CACHE`` names another, or ``off``): a process measures again while
    fewer than three are kept, and otherwise uses the largest kept (in a process where ``fit``
    saw a task of that executor start higher, that). Every process on the machine then gets the
    same ``reserved_mem`` (:func:`~cubed_plugin.make_spec`: this plus 10 %).

    Parameters
    ----------
    executor : optional
        A Cubed executor, its name, or None (Cubed's default, "threads").
    work_dir : str, optional
        Holds the small arrays (a temporary directory when None; a remote executor needs one its
        workers can reach).
    compute_kwargs : dict, optional
        Passed to ``cubed.compute`` (a Dask cluster's address).
    reads : sequence, optional
        The stored data the tasks will read (Cubed arrays, Zarr arrays or their URLs): a chunk
        of each one on an object store is read in the warm-up, so the baseline holds the
        store's client (as a work_dir on the store does); the figures are kept per store.

    Returns
    -------
    int
        The baseline, in bytes.

    Raises
    ------
    RuntimeError
        For an executor that neither measures its tasks nor runs them here (give
        ``reserved_mem`` yourself then).
    """
    return measured_baseline(
        executor_of(executor), work_dir=work_dir, compute_kwargs=compute_kwargs, reads=reads
    )


def make_spec(
    allowed_mem: str | int = "1GB",
    reserved_mem: str | int | None = None,
    work_dir: str | None = None,
    executor: Any = None,
    compute_kwargs: dict | None = None,
    storage_options: dict | None = None,
    reads: Any = None,
) -> Any:
    """A ``cubed.Spec`` whose ``reserved_mem`` covers what a worker of ``executor`` holds before any
    data.

    Parameters
    ----------
    allowed_mem : str or int, default "1GB"
        The memory each task may use, ``reserved_mem`` included.
    reserved_mem : str or int, optional
        None (the default): measured (:func:`worker_baseline`: a small task run on ``executor``,
        once per executor) and 10% added, as Cubed's own tests do (tasks' imports and buffers
        vary a little).
    work_dir : str, optional
        Cubed's intermediate storage: a local directory or an fsspec URL
        (``"s3://bucket/work"``). None: a new temporary directory, removed when the spec is no
        longer used (the arrays made with it hold it) or when Python exits.
    executor : optional
        The one the spec will compute with (an executor, its name, or None: Cubed's default,
        "threads", whose tasks run in this process and get a fresh worker's baseline).
    compute_kwargs : dict, optional
        Passed to ``cubed.compute`` when measuring (a Dask cluster's address).
    storage_options : dict, optional
        fsspec's options for the stores the plugin opens (``cubed_plugin.open_zarr``'s data,
        ``fit``'s checkpoints): the Spec's ``storage_options``.
    reads : sequence, optional
        The stored data the tasks will read (Zarr arrays or URLs), measured with
        (:func:`worker_baseline`): data on an object store loads its client in every worker.

    Returns
    -------
    cubed.Spec
        The spec.

    Raises
    ------
    RuntimeError
        If ``executor`` cannot be measured, saying why (then give ``reserved_mem``).
    """
    import cubed

    temporary = work_dir is None
    work_dir = work_dir or tempfile.mkdtemp(prefix="pycograd-cubed-")
    try:
        if reserved_mem is None:
            base = worker_baseline(
                executor, work_dir=work_dir, compute_kwargs=compute_kwargs, reads=reads
            )
            reserved_mem = math.ceil(base * MARGIN)
        spec = cubed.Spec(
            work_dir=work_dir,
            allowed_mem=allowed_mem,
            reserved_mem=reserved_mem,
            storage_options=storage_options,
        )
    except BaseException:
        if temporary:
            shutil.rmtree(work_dir, ignore_errors=True)
        raise
    if temporary:  # removed with the spec (arrays made with it hold it), or at exit
        weakref.finalize(spec, shutil.rmtree, work_dir, ignore_errors=True)
    return spec


_GUARD = re.compile(r"""^\s*if\s+__name__\s*==\s*['"]__main__['"]\s*:""", re.M)


def _check_main_guard() -> None:
    """Refuse, in one line, a main script without ``if __name__ == "__main__":``: each worker
    process imports it again as it starts, and its unguarded code would start the training (and
    more workers) in every worker, failing the pool with a long traceback."""
    import multiprocessing

    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if path is None or multiprocessing.parent_process() is not None:
        return  # an interactive session or a notebook (nothing is imported again), or a worker
    try:
        source = Path(path).read_text()
    except (OSError, UnicodeDecodeError):
        return
    if not _GUARD.search(source):
        raise RuntimeError(
            f"the processes executor's workers import {path} again as they start: put the "
            'code that trains under `if __name__ == "__main__":` (docs/guides/cubed.md, '
            "'The processes executor')"
        )


def measuring_processes(
    preload: Sequence[str] = ("numpy", "zarr", "cubed", "pycograd_xp", "cubed_plugin._fit"),
    retries: int = 2,
) -> Any:
    """A Cubed executor under which each task's measured peak is its own.

    Cubed's processes executor with its workers forked from a server that has already imported
    ``preload`` (a fork, not an interpreter start, per worker) and kept: for the tasks of a
    compute and for the computes after it (a fit's steps), until ``close()`` or exit. Before
    each task a worker resets its resident high-water mark (Linux's ``/proc/self/clear_refs``),
    so the peak a task reports is the process's during that task: what the worker holds, as a
    fresh one's baseline, plus the task's data. The memory earlier tasks freed is given back to
    the system first (glibc's ``malloc_trim``; a worker's threads share one malloc arena, whose
    top it can give back). Cubed's own executor reports a reused worker's
    lifetime peak (its largest task so far). Where the mark cannot be reset (not Linux) each
    task runs in a fresh worker instead (``max_tasks_per_child=1``), in a pool per compute that
    is stopped, waiting, before the compute returns (CPython 3.11's pool can otherwise lose a
    worker leaving after its one task, which hangs the interpreter's exit: gh-119592).

    Each worker imports the main script again when it starts (``multiprocessing`` prepares
    every child so; on Python 3.11 the forkserver's own preloading of ``__main__`` never takes
    effect): what the script imports and the server has not is imported once per worker. What
    a script that trains imports of the plugin is preloaded (``cubed_plugin._fit``; not
    ``cubed_plugin.train`` itself, which ``python -m cubed_plugin.train`` runs again in each
    worker as its main module); preload what else your script imports at its top.

    And another: a task that fails is tried again, ``retries`` times at most, a worker killed
    mid-task included (``cubed_plugin._pool.RetryingPool``: CPython's pool breaks for good when
    a worker dies, failing every task in flight; those are tried again on a fresh pool).

    Parameters
    ----------
    preload : sequence of str
        Modules the fork server imports once (default: numpy, zarr, cubed, pycograd_xp and
        cubed_plugin._fit).
    retries : int
        Tries of a failed task after its first (default 2, as Cubed's threads executor).

    Returns
    -------
    cubed executor
        For ``fit(executor=...)`` or ``cubed.compute(executor=...)``.
    """
    import multiprocessing

    _check_main_guard()
    multiprocessing.get_context("forkserver").set_forkserver_preload(list(preload))
    from ._measuring import MeasuringProcesses

    return MeasuringProcesses(retries=retries)
