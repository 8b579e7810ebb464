"""Worker baselines that hold: the memory a worker process holds before a task adds data to it
(what ``Spec.reserved_mem`` must cover), measured warm, kept per machine, and the margins the
planner and ``fit`` leave for its variation.

What a worker holds grows after its first tasks: the codecs, the thread pools of Zarr's reads and
of NumPy's BLAS, the caches of Cubed and Zarr. Measured on a fresh worker (one small task), the
baseline was 74.6 MB on the processes executor here, and the tasks of a graph-mode step started
at 81 MB after one step and 86 MB after forty (so ops whose tasks hold almost no data measured
87-90 MB against the 82-84 MB projected: the CLI's default run died at its first step). So:

- **Warm**: :func:`cubed_plugin.worker_baseline`'s task first does what a first task brings
  (imports, a Zarr read of compressed chunks through Zarr's thread pool, a BLAS product, a
  one-pass gradient on a small chunk), lets go of it, gives the freed memory back, and only
  then measures a small task: the figure is a warm worker's, on several tasks (the largest is kept).
- **Stable across processes**: the figures are kept in a file per machine, executor kind, Python
  environment and package versions (:func:`cache_path`; ``PYCOGRAD_XP_BASELINE_CACHE`` names
  another file, or ``off``); a process measures again only while fewer than :data:`SAMPLES`
  figures are kept, and uses the largest kept (and, for the rest of a process, the highest
  start ``fit`` has seen a task of that executor make: :func:`record_drift`).
- **Stated margins**: ``reserved_mem`` is that baseline plus :data:`MARGIN` (10 %: a run's
  creep, 0.6 MB over forty graph-mode steps here once tasks collect their garbage); the planner
  (``plan_rows``) and every refusal's advice leave :data:`HEADROOM` (5 % of
  ``reserved_mem``) of ``allowed_mem`` free, so that advice checked in one process still fits
  in another whose measured baseline is up to that much higher, and a re-plan after drift
  (:data:`DRIFT_PAD`) still fits.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import shutil
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

# reserved_mem over the warm baseline: Cubed's own tests reserve 10 % over a measured baseline;
# here it covers a long run's creep (docs/calibration.md#margin)
MARGIN = 1.1
# the share of reserved_mem the planner and the refusals' advice leave free under allowed_mem: a
# process whose baseline is up to 5 % higher (measured warm, baselines of one executor varied by
# up to 4 % between processes here) runs the advised chunks
HEADROOM = 0.05
# figures kept per executor kind before a process stops measuring and uses the largest kept
SAMPLES = 3
# fit's new reserved_mem after drift: the highest start seen, 1 % more
DRIFT_PAD = 1.01

# the baselines of this process, per executor (see _key)
_BASELINES: dict[Any, int] = {}
_IN_PROCESS = ("executors that run tasks in this process",)


def headroom(reserved_mem: int) -> int:
    """The bytes of ``allowed_mem`` the planner leaves free for a Spec of ``reserved_mem``
    (:data:`HEADROOM` of it)."""
    return math.ceil(HEADROOM * int(reserved_mem or 0))


# -- the file of kept figures ---------------------------------------------------------------------


def cache_path() -> Path | None:
    """The file the measured baselines are kept in: ``PYCOGRAD_XP_BASELINE_CACHE`` when set
    (``off``: none kept), else ``$XDG_CACHE_HOME/pycograd_xp/worker_baselines.json`` (default
    ``~/.cache``)."""
    env = os.environ.get("PYCOGRAD_XP_BASELINE_CACHE")
    if env is not None:
        return None if env.strip().lower() in ("", "off", "0", "none") else Path(env)
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "pycograd_xp" / "worker_baselines.json"


def _versions(dask: bool) -> str:
    from importlib.metadata import PackageNotFoundError, version

    names = ["numpy", "zarr", "numcodecs", "cubed", "pycograd-xp"] + (["distributed"] * dask)
    # the environment too: two virtual environments of one machine hold different packages,
    # and a worker imports what its environment has (a docs build's venv held 8 MB more)
    out = [f"python {platform.python_version()} in {sys.prefix}"]
    for name in names:
        try:
            out.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            out.append(f"{name} -")
    return ", ".join(out)


def _kind(ex: Any, compute_kwargs: dict | None) -> str:
    """The executor's kind as the kept figures name it: the machine its workers run on and
    the class that runs them (a Dask cluster's host; not its port, new each run)."""
    from ._measuring import MeasuringProcesses, is_dask_executor

    if isinstance(ex, MeasuringProcesses):
        return "processes (measuring_processes)"
    name = getattr(ex, "name", None) or type(ex).__qualname__
    if name in ("single-threaded", "threads"):
        return "in this process (single-threaded, threads)"
    if is_dask_executor(ex):
        address = str(
            ((compute_kwargs or {}).get("compute_kwargs") or {}).get("address")
            or ((getattr(ex, "kwargs", None) or {}).get("compute_kwargs") or {}).get("address")
            or ""
        )
        host = address.split("://")[-1].rpartition(":")[0] or "local"
        return f"dask on {host}"
    return f"{type(ex).__module__}.{type(ex).__qualname__}"


def _store(work_dir: str | None, reads: tuple = ()) -> str:
    """The object stores a baseline measured in ``work_dir``, reading ``reads``, warmed its
    workers with (their protocols: ``"s3"``), "" for local disk only: a worker that reads or
    writes there has loaded the store's client (s3fs, aiobotocore, botocore's service model, a
    connection pool), tens of MB more than one that touched local files only holds
    (docs/calibration.md#remote-read-copies), so the figures are kept apart."""
    from ._storage import is_url, protocol_of

    stores = {protocol_of(z) for z in reads}
    if work_dir is not None and is_url(work_dir):
        stores.add(str(work_dir).split("://", 1)[0])
    return "+".join(sorted(stores))


def remote_reads(data: Any) -> tuple:
    """The Zarr arrays behind ``data`` (Cubed or Zarr arrays) that are read from an object
    store: what a measured baseline task reads a chunk of (:func:`_baseline_task`)."""
    from ._cubed_seam import zarr_array_of
    from ._storage import is_remote_array, is_url

    out = []
    for x in data or ():
        if isinstance(x, str):  # a URL
            if not is_url(x):
                continue
            import zarr

            x = zarr.open_array(x, mode="r")
        z = x if hasattr(x, "store") and hasattr(x, "chunks") else zarr_array_of(x)
        if z is not None and hasattr(z, "store") and is_remote_array(z):
            out.append(z)
    return tuple(out)


def _disk_key(ex: Any, compute_kwargs: dict | None, store: str = "") -> str:
    from ._measuring import is_dask_executor

    kind = _kind(ex, compute_kwargs) + (f" with {store}:// storage" if store else "")
    return f"{platform.node()} | {kind} | {_versions(is_dask_executor(ex))}"


def _load() -> dict:
    path = cache_path()
    if path is None or not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _update(key: str, sample: int | None = None) -> dict:
    """The kept entry of ``key``, with ``sample`` added (the last 20 kept); written back
    atomically (a file that cannot be written is left alone)."""
    data = _load()
    got = data.get(key)
    entry = got if isinstance(got, dict) else {}
    samples = [int(s) for s in entry.get("samples", []) if isinstance(s, int | float)]
    if sample is not None:
        samples = (samples + [int(sample)])[-20:]
    entry = {"samples": samples}
    data[key] = entry
    path = cache_path()
    if path is not None and sample is not None:
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex}.tmp")
            tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
            os.replace(tmp, path)
    return entry


def _kept(entry: dict) -> int:
    return max(entry.get("samples", []), default=0)


# -- the measurement ------------------------------------------------------------------------------


def _warm_up(path: str) -> None:
    """What a worker's first tasks bring: the libraries a gradient step loads, a read of
    compressed Zarr chunks (codecs, Zarr's event loop and thread pool), NumPy's BLAS threads on a
    product large enough to start them, a one-pass gradient on a small chunk."""
    import zarr

    from cubed_plugin.steps import chunk_sums
    from pycograd_xp.tree import tree_flatten

    a = np.asarray(zarr.open_array(path, mode="r")[...])
    m = a.reshape(-1, 64)
    g = m.T @ m
    x = m[:1000, :8].copy()
    leaves, td = tree_flatten({"w": np.zeros(x.shape[1])})
    chunk_sums(_per_row, td, leaves, [x], 0, x.shape[0])
    del a, m, g, x


def _per_row(p: Any, x: Any) -> Any:
    xp = x.__array_namespace__()
    return xp.log(1.0 + xp.exp(-(x @ p["w"])))


def _baseline_task(block: np.ndarray, path: str = "", reads: tuple = ()) -> np.ndarray:
    """The task :func:`cubed_plugin.worker_baseline` runs: the warm-up (:func:`_warm_up`, when
    ``path`` names its Zarr array), its memory given back, then a small task measured (a tiny
    one-pass gradient): returns ``[process id, the warm peak (0 where it cannot be measured),
    0, 0]``."""
    import gc

    from cubed_plugin.steps import chunk_sums
    from pycograd_xp.tree import tree_flatten

    from ._measuring import current_peak, settled_peak_reset

    # warm: what the first tasks brought let go of, the mark reset (a cold task's peak holds
    # its imports' too)
    start = None
    if path:
        _warm_up(path)
        for z in reads:  # an object store's client loaded as reading the data loads it
            np.asarray(z[tuple(slice(0, c) for c in z.chunks)])
        gc.collect()
        start = settled_peak_reset()
    x = np.asarray(block, dtype=np.float64).reshape(-1, 1)
    x = x @ x.T
    leaves, td = tree_flatten({"w": np.zeros(x.shape[1])})
    chunk_sums(_per_row, td, leaves, [x], 0, x.shape[0])
    peak = current_peak() if start is not None else None
    return np.array([os.getpid(), peak or 0, 0, 0][: block.size], dtype=np.int64)


def _key(ex: Any, compute_kwargs: dict | None, store: str = "") -> tuple:
    kind = type(ex)
    options = sorted((k, repr(v)) for k, v in (getattr(ex, "kwargs", None) or {}).items())
    return (
        kind.__module__,
        kind.__qualname__,
        repr(options),
        repr(sorted((compute_kwargs or {}).items())),
        store,
    )


# the measuring computation's tasks (each warms up and measures in whichever worker runs it)
_TASKS = 4


def _measure(
    ex: Any, work_dir: str, compute_kwargs: dict | None, warm: bool = True, reads: tuple = ()
) -> tuple[int | None, int | None, int]:
    """(the largest warm figure the tasks measured themselves, or None; the largest peak the
    executor reported, or None when it reports none; a task's process id) of the small
    computation of :func:`_baseline_task` on ``ex`` (after the warm-up, when ``warm``)."""
    import functools

    import cubed
    import zarr

    from ._storage import remove

    root = os.path.join(work_dir, f"pycograd-baseline-{uuid.uuid4().hex}")
    spec = cubed.Spec(work_dir=root, allowed_mem="500MB", reserved_mem=0)
    path = os.path.join(root, "input.zarr")
    warm_path = os.path.join(root, "warm.zarr")
    zarr.open_array(path, mode="w", shape=(4 * _TASKS,), chunks=(4,), dtype="f8")[:] = 1.0
    rng = np.random.default_rng(0)
    w = zarr.open_array(warm_path, mode="w", shape=(4 * 2**17,), chunks=(2**17,), dtype="f8")
    w[:] = rng.standard_normal(4 * 2**17)
    peaks: list[int | None] = []

    class Peaks(cubed.Callback):
        def on_task_end(self, event: Any) -> None:
            peaks.append(event.peak_measured_mem_end)

    try:
        if warm:
            _warm_compute(ex, spec, root, compute_kwargs)
        task = functools.partial(
            _baseline_task, path=warm_path if warm else "", reads=reads if warm else ()
        )
        out = cubed.map_blocks(task, cubed.from_zarr(path, spec=spec), dtype=np.int64)
        res = cubed.compute(out, executor=ex, callbacks=[Peaks()], **(compute_kwargs or {}))[0]
    finally:
        remove(root)  # a local directory or a URL (a work_dir on an object store)
    rows = np.asarray(res).reshape(_TASKS, 4)
    warm_peaks = [int(r[1]) for r in rows if r[1] > 0]
    measured = [p for p in peaks if p is not None]
    return (
        max(warm_peaks) if warm_peaks else None,
        max(measured) if measured else None,
        int(rows[0, 0]),
    )


def _warm_loss(p: Any, X: Any, y: Any) -> Any:
    xp = X.__array_namespace__()
    z = X @ p["w"]
    return xp.mean(xp.log(1.0 + xp.exp(-xp.abs(z))) + xp.maximum(z, 0.0) - y * z)


# steps of the warm-up computation (each a graph-mode gradient step of several tasks a worker)
_WARM_STEPS = 2


def _warm_compute(ex: Any, spec: Any, root: str, compute_kwargs: dict | None) -> None:
    """What a worker's first steps bring, run on ``ex`` before the baseline is measured: graph-mode
    gradient steps of a logistic regression on small stored data (Cubed's task machinery, its
    reads and compressed writes of intermediate arrays, the fused ops' functions, BLAS)."""
    import cubed
    import zarr

    from pycograd_xp import tree_leaves, unwrap

    from .steps import graph_fusion, graph_step

    rng = np.random.default_rng(1)
    rows, cols, chunk = 8 * 1000, 16, 1000
    for name, shape, chunks in (("X", (rows, cols), (chunk, cols)), ("y", (rows,), (chunk,))):
        z = zarr.open_array(
            os.path.join(root, f"{name}.zarr"), mode="w", shape=shape, chunks=chunks, dtype="f8"
        )
        z[...] = rng.standard_normal(shape) if name == "X" else rng.integers(0, 2, shape)
    X = cubed.from_zarr(os.path.join(root, "X.zarr"), spec=spec)
    y = cubed.from_zarr(os.path.join(root, "y.zarr"), spec=spec)
    for _ in range(_WARM_STEPS):
        v, g = graph_step(_warm_loss, {"w": np.zeros(cols)}, (X, y), spec)
        arrays = [unwrap(a) for a in tree_leaves((v, g))]
        cubed.compute(
            *arrays, executor=ex, optimize_function=graph_fusion(), **(compute_kwargs or {})
        )


def _peak_here() -> int:
    """This process's peak resident memory in bytes (its address space's own high-water mark:
    unlike ``ru_maxrss``, it does not carry the peak of the process that started it)."""
    from ._measuring import current_peak

    peak = current_peak()
    if peak is not None:
        return peak
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak * 1024 if sys.platform.startswith("linux") else peak


def _fresh_main(work_dir: str) -> None:
    """In a fresh interpreter: the computation of :func:`_measure`, in this process, without
    the warm-up (this process is the driver: what its planning holds is its own, and its tasks
    are not measured one by one), then print its peak."""
    from ._cubed_seam import create_executor

    _measure(create_executor("single-threaded"), work_dir, None, warm=False)
    print(_peak_here())


def _measure_fresh(work_dir: str) -> int:
    """The warm figure of a fresh Python process that runs :func:`_measure`'s tasks in itself
    (started as a new interpreter, not by multiprocessing, which would run the caller's script
    again)."""
    import subprocess

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from cubed_plugin._baseline import _fresh_main; _fresh_main(sys.argv[1])",
            work_dir,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if out.returncode != 0:
        raise RuntimeError(
            f"worker_baseline: the fresh worker measuring it failed: "
            f"{out.stderr.strip().splitlines()[-1:]}"
        )
    return int(out.stdout.strip().splitlines()[-1])


def _measure_once(ex: Any, work_dir: str, compute_kwargs: dict | None, reads: tuple = ()) -> int:
    """One warm figure of ``ex`` (see :func:`cubed_plugin.worker_baseline`)."""
    in_process = getattr(ex, "name", None) in ("single-threaded", "threads")
    warm, peak, pid = (
        (None, None, os.getpid())
        if in_process
        else _measure(ex, work_dir, compute_kwargs, reads=reads)
    )
    if pid == os.getpid():  # tasks run in this process: a fresh one's figure
        if _IN_PROCESS not in _BASELINES:
            _BASELINES[_IN_PROCESS] = _measure_fresh(work_dir)
        return _BASELINES[_IN_PROCESS]
    if peak is None:
        raise RuntimeError(
            f"worker_baseline: the {getattr(ex, 'name', type(ex).__name__)!r} executor runs "
            "tasks in other processes but reports no measured task memory "
            "(peak_measured_mem_end is None), so its workers' own memory cannot be "
            "measured; give reserved_mem yourself, at least what such a worker holds before "
            "any data (worker_baseline('processes') measures a local one), or measure on an "
            "executor that reports task memory (processes, dask, lithops, modal)"
        )
    return int(warm or peak)


@contextlib.contextmanager
def _work(work_dir: str | None) -> Iterator[str]:
    if work_dir is not None:
        yield work_dir
        return
    made = tempfile.mkdtemp(prefix="pycograd-baseline-")
    try:
        yield made
    finally:
        shutil.rmtree(made, ignore_errors=True)


def measured_baseline(
    ex: Any, *, work_dir: str | None = None, compute_kwargs: dict | None = None, reads: Any = ()
) -> int:
    """:func:`cubed_plugin.worker_baseline` of the executor object ``ex`` (names are resolved
    there, by ``cubed_plugin._executors.executor_of``)."""
    reads = remote_reads(reads)
    store = _store(work_dir, reads)
    key = _key(ex, compute_kwargs, store)
    if key in _BASELINES:
        return _BASELINES[key]
    disk = _disk_key(ex, compute_kwargs, store)
    entry = _load().get(disk)
    if not (isinstance(entry, dict) and len(entry.get("samples", [])) >= SAMPLES):
        with _work(work_dir) as where:
            entry = _update(disk, sample=_measure_once(ex, where, compute_kwargs, reads))
    _BASELINES[key] = _kept(entry)
    return _BASELINES[key]


def record_drift(
    executor: Any,
    compute_kwargs: dict | None,
    held: int,
    work_dir: str | None = None,
    reads: Any = (),
) -> int:
    """Record that a worker of ``executor`` (the executor object ``fit`` runs on) held ``held``
    bytes at a task's start (above the Spec's ``reserved_mem``): the baseline this process uses
    from now on is at least that. Returns the new baseline.

    Not kept for later processes: a start can be high for a moment (a pool thread still holding
    the last chunk it read on a loaded machine), and a kept figure would make every later run
    on the machine plan smaller chunks for it (one such start, kept, cut a Dask run's chunks
    from 9,849 rows to 1,145)."""
    key = _key(executor, compute_kwargs, _store(work_dir, remote_reads(reads)))
    _BASELINES[key] = max(_BASELINES.get(key, 0), int(held))
    return _BASELINES[key]
