"""The measuring executors: Cubed's processes and Dask executors with each task's peak measured
on its own (a worker's resident high-water mark reset before each task, the memory earlier
tasks freed given back first), failed tasks tried again, workers kept; and the heap probes they
and one-pass tasks use (:func:`heap_in_use`, :func:`reads_let_go`, :func:`settled_peak_reset`).

Built on Cubed's executors through :mod:`cubed_plugin._cubed_seam` (its ``ProcessesExecutor``,
``async_map_dag``, :func:`~cubed_plugin._cubed_seam.dask_internals`, ...), the one module that
touches Cubed's internals; the choice and the making of an executor are
:mod:`cubed_plugin._executors`'.
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

from ._cubed_seam import (
    ProcessesExecutor,
    _version_tuple,
    async_map_dag,
    check_runtime_memory,
    dask_internals,
    processes_create_futures_func,
    run_func_processes,
    use_backups_default,
)

__all__ = [
    "current_peak",
    "dask_executor",
    "DASK_WORKERS_UNLISTED",
    "distributed_version",
    "heap_in_use",
    "is_dask_executor",
    "MeasuringProcesses",
    "reads_let_go",
    "settled_peak_reset",
    "WORKER_MALLOC_ENV",
]


class MeasuringProcesses(ProcessesExecutor):
    """Cubed's processes executor with each task's peak measured on its own, a failed task
    tried again ``retries`` times (option, default 2), its worker's death included
    (``cubed_plugin._pool.RetryingPool``; Cubed's retries nothing), and its workers kept.

    Workers are forked from a forkserver and reused, for the tasks of one compute and of the
    computes after it (a fit's steps): before each task a worker gives the C heap's free memory
    back to the system and resets its process's resident high-water mark
    (:func:`_process_task`, :func:`_worker_malloc`), so that the peak it reports is the
    process's during this task, what a fresh worker would report. Where the mark cannot be reset
    (not Linux), each task runs in a fresh worker instead, in a pool per compute. :meth:`close`
    stops the workers; they stop at exit otherwise. Overrides the executor's private
    ``_async_execute_dag``."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._pools: dict[tuple[int, int], Any] = {}
        self._pools_lock = threading.Lock()

    def __getstate__(self) -> dict:  # pools stay with the process that made them
        return {**self.__dict__, "_pools": {}, "_pools_lock": None}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _pools_lock=threading.Lock())

    def _pool(self, max_workers: int, retries: int) -> Any:
        """The kept pool of ``max_workers`` workers and ``retries`` retries (made on first use)."""
        with self._pools_lock:
            pool = self._pools.get((max_workers, retries))
            if pool is None:
                pool = self._pools[max_workers, retries] = _processes_pool(
                    max_workers, retries, per_task=False
                )
            return pool

    def close(self) -> None:
        """Stop the kept workers (waiting for them); the next compute starts new ones."""
        with self._pools_lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.shutdown(wait=True, cancel_futures=True)

    async def _async_execute_dag(
        self,
        dag: Any,
        callbacks: Any = None,
        spec: Any = None,
        compute_arrays_in_parallel: bool | None = None,
        **kwargs: Any,
    ) -> None:
        max_workers = kwargs.pop("max_workers", None) or os.cpu_count() or 1
        retries = kwargs.pop("retries", 2)
        if spec is not None:
            check_runtime_memory(spec, max_workers)
            if "use_backups" not in kwargs and use_backups_default(spec):
                kwargs["use_backups"] = True
        reused = can_reset_peak()
        # a kept pool: this compute's tasks tracked, so that a failed compute leaves none
        # queued or running behind it
        pool = (
            self._pool(max_workers, retries).tracked()
            if reused
            else _processes_pool(max_workers, retries, per_task=True)
        )
        try:
            await async_map_dag(
                processes_create_futures_func(
                    pool, _process_task if reused else run_func_processes
                ),
                dag=dag,
                callbacks=callbacks,
                compute_arrays_in_parallel=compute_arrays_in_parallel,
                **kwargs,
            )
        finally:
            if reused:
                pool.settle()
            else:
                # waits for the running tasks, then for every worker to stop: CPython's pool
                # (gh-119592, not fixed in 3.11) can lose a worker leaving after its one task
                # when the pool is shut down without waiting, and the interpreter waits for
                # that worker at exit, forever
                pool.shutdown(wait=True, cancel_futures=True)


def _processes_pool(max_workers: int, retries: int, per_task: bool) -> Any:
    """A retrying pool of ``max_workers`` forkserver workers, each for one task (``per_task``)
    or for many."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from ._pool import RetryingPool

    return RetryingPool(
        lambda: ProcessPoolExecutor(
            max_workers=max_workers,
            max_tasks_per_child=1 if per_task else None,
            mp_context=multiprocessing.get_context("forkserver"),
            initializer=None if per_task else _worker_malloc,
        ),
        retries,
    )


@functools.cache
def can_reset_peak() -> bool:
    """Whether a process can reset its resident high-water mark here (Linux's clear_refs)."""
    return _reset_peak() is not None


@functools.cache
def _libc(name: str) -> Any:
    """The C library's function ``name`` (glibc's ``malloc_trim``, ``mallopt``), or None where
    the C library has none."""
    import ctypes
    import ctypes.util

    try:
        return getattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"), name)
    except (OSError, AttributeError):
        return None


# glibc's mallopt parameters
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8
# A measured worker's allocator (:func:`_worker_malloc`): one arena, 32 MiB (the most glibc
# takes) before a block is mapped on its own, 1 GiB of free heap top before glibc trims it.
_WORKER_ARENAS, _WORKER_MMAP_THRESHOLD, _WORKER_TRIM_THRESHOLD = 1, 32 * 2**20, 2**30
# The same, as the environment variables that set it when a process starts (Dask's workers,
# which cubed_plugin does not start itself: ``_executors._local_dask_cluster``).
WORKER_MALLOC_ENV = {
    "MALLOC_ARENA_MAX": str(_WORKER_ARENAS),
    "MALLOC_MMAP_THRESHOLD_": str(_WORKER_MMAP_THRESHOLD),
    "MALLOC_TRIM_THRESHOLD_": str(_WORKER_TRIM_THRESHOLD),
}


def _worker_malloc() -> None:
    """A kept worker's start: glibc's allocator set so that :func:`_measured` can give the memory
    a task freed back to the system before the next task, and a task pages in no more than it
    must.

    - One malloc arena for all the worker's threads (``M_ARENA_MAX``): Zarr decodes chunks in
      threads, and glibc gives threads arenas of their own, whose tops ``malloc_trim`` does
      not give back (glibc's ``mtrim`` trims only the main arena's top): a worker held 20-50
      MB more at the start of each task than a fresh one, and its tasks measured above their
      projections.
    - Fixed thresholds (``M_MMAP_THRESHOLD`` 32 MiB, the most glibc takes, ``M_TRIM_THRESHOLD``
      1 GiB): with one arena and glibc's adaptive ones, the arena's top was trimmed after
      every read and paged in again (5,000 page faults per chunk read; reads took 45 ms
      instead of 25 ms); now none within a task."""
    mallopt = _libc("mallopt")
    if mallopt is not None:
        mallopt(_M_ARENA_MAX, _WORKER_ARENAS)
        mallopt(_M_MMAP_THRESHOLD, _WORKER_MMAP_THRESHOLD)
        mallopt(_M_TRIM_THRESHOLD, _WORKER_TRIM_THRESHOLD)


def _process_task(
    input: Any, func: Any = None, config: Any = None, name: Any = None, compute_id: Any = None
) -> tuple[Any, dict]:
    """A task in a kept worker of :class:`MeasuringProcesses`, measured on its own: the memory
    the worker's earlier tasks freed goes back to the system first (``malloc_trim``), then the
    process's high-water mark is reset to its resident set, so the peak reported is the
    process's during this task, what a fresh worker would report. A worker runs one task at a
    time."""
    return _measured(lambda: func(input, config=config), measure=True)


def _measured(run: Callable[[], Any], measure: bool) -> tuple[Any, dict]:
    """``run()`` as a task measured on its own (``measure``; else measured not at all), with
    Cubed's task statistics: the memory the worker's earlier tasks freed given back first, then
    the resident high-water mark reset (:func:`_settled_start`).

    The trim comes before every task, not only when the op changes: the freed memory of the
    last task of the same op is not all reused by the next (the allocator splits its free
    blocks differently each time), so a kept, untrimmed worker's resident set crept up task by
    task (in a graph-mode MLP step, a 28.8 MB chunk's tasks started at 70, 157, 169 then 181 MB
    and peaked 11-22 MB above a fresh worker's, 5 MB under their projection; trimmed, 159 MB, as
    a fresh worker's). The memory is paged in again each task: a one-pass epoch on processes
    (2,000,000 x 50 float32, 40 chunks of 50,000 rows) takes 1.3 times the threads executor's
    time instead of 0.8 times. Keeping the heap's top (``malloc_trim(pad)``) or transparent
    huge pages made it 1.1 and 0.9 times, each with tasks again 11-13 MB above a fresh
    worker's."""
    import time

    global _alone
    start = _settled_start() if measure else None
    t0 = time.time()
    _alone = measure
    try:
        result = run()
    finally:
        _alone = False
    t1 = time.time()
    return result, {
        "function_start_tstamp": t0,
        "function_end_tstamp": t1,
        "peak_measured_mem_start": start,
        "peak_measured_mem_end": _peak() if start is not None else None,
    }


# A task's start more than this above the last task's is taken as the last task's memory that its
# threads are still freeing (:func:`_settled_start`). Measured in graph-mode steps: what the
# threads held was 11 MB and more (28.8 MB chunks); an op's first tasks start up to 3.8 MB
# above the last op's, the worker's own (caches), which would wait for nothing.
_LINGERING = 4 * 2**20
# The longest a task waits for that memory: about 0.5 s, in pauses doubling from 1 ms (on a
# loaded machine, 64 ms was not always enough for the pool thread to run: a Dask task of a
# graph-mode step started 18 MB high, a 9.4 MB chunk's bytes and decoded copy, and measured
# over allowed_mem). The wait happens only while memory lingers (about one task in 1,000).
_LINGER_PAUSES = (0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256)
# This process's resident set when its last measured task started (None before the first).
_last_start: int | None = None
# Whether this worker froze what it held at its first measured task (:func:`_collect_garbage`)
_frozen = False


def _collect_garbage() -> None:
    """Collect the cyclic garbage earlier tasks left, before a measured task starts.

    Python frees objects in reference cycles only when its cyclic collector runs, and its
    oldest generation rarely does: a kept worker's tasks (unpickled task configurations, Zarr's
    and Cubed's objects) left megabytes of such garbage resident, so that a graph-mode step's
    tasks started 7 MB above the worker's measured baseline after one step and 12 MB above it
    after forty (tasks over their projections: the CLI's default run died at its first step).
    Collected before each task, they started within 0.6 MB of it over the forty steps. A full
    collection of a worker's heap takes about 0.2 s here (90,000 objects: NumPy, Zarr, Cubed),
    so the first measured task of a process collects once and freezes what is left
    (``gc.freeze``: the imported modules, which live as long as the worker), and each later
    task's collection scans only what came after (microseconds)."""
    import gc

    global _frozen
    gc.collect()
    if not _frozen:
        gc.freeze()
        _frozen = True


def _settled_start() -> int | None:
    """The memory the worker's earlier tasks freed given back to the system (``malloc_trim``)
    and the resident high-water mark reset, once the earlier tasks' threads have let go of
    their memory; returns the resident set the task starts from (None where the high-water
    mark cannot be reset).

    A task's last buffers can outlive it: Zarr reads and decodes each chunk in a thread pool
    (``asyncio.to_thread``), and a pool thread lets go of its work item (the chunk's bytes and
    its decoded copy) only when it next runs, which can be after the task has returned and the
    next has started. That memory is then resident when the next task's peak is reset, and
    freed during the task into a heap that may not reuse it: about one task in 1,000 of a
    graph-mode step (28.8 MB chunks) started 56 MB above the worker's usual start, and one
    measured 192 MB against its 186 MB projection. So when the resident set is more than
    :data:`_LINGERING` above the last task's start, the worker lets its threads run (pauses
    of 1, 2, 4, ... ms, about 0.5 s at most) and trims again;
    a level that stays is the worker's own (imports, caches) and the next tasks' reference.
    Cyclic garbage that earlier tasks left is collected first (:func:`_collect_garbage`)."""
    global _last_start

    trim = _libc("malloc_trim")
    _collect_garbage()

    def trimmed_start() -> int | None:
        if trim is not None:
            trim(0)
        return _reset_peak()

    start = trimmed_start()
    if start is not None and _last_start is not None and start > _last_start + _LINGERING:
        start = _waited(trimmed_start, _last_start + _LINGERING, _LINGER_PAUSES)
    _last_start = start
    return start


def _waited(read: Callable[[], int | None], limit: int, pauses: Sequence[float]) -> int | None:
    """``read()`` after each of ``pauses`` (seconds, letting other threads run) until it is at
    most ``limit`` (or None); the last value read."""
    import time

    value = None
    for pause in pauses:
        time.sleep(pause)
        value = read()
        if value is None or value <= limit:
            break
    return value


# Whether the task running now is the only one in its process (a measured task: its process's
# heap is then its own, :func:`reads_let_go`).
_alone = False


class _Mallinfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2``."""

    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd",
            "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


def heap_in_use() -> int | None:
    """The bytes this process's C heap has allocated and not freed (glibc's ``mallinfo2``: the
    arenas' blocks in use and the blocks mapped on their own), or None without glibc."""
    info = _libc("mallinfo2")
    if info is None:
        return None
    info.restype = _Mallinfo2
    m = info()
    return int(m.uordblks + m.hblkhd)


def reads_let_go(level: int | None) -> int | None:
    """In a task alone in its process, before it reads its next chunk: wait (pauses of 0, 1, 2,
    ... ms, about 64 ms at most) until the heap in use is back within 1 MiB of ``level`` (what
    was in use before the task's first chunk); returns the level for the next chunk (the heap
    in use now, when it stayed higher: the worker's own, a cache filled by the first chunk).
    Zarr reads and decodes a chunk in pool threads that let go of its bytes and decoded copy
    only when they next run (:func:`_settled_start`); read on top of them, the next chunk's
    arrays do not fit the heap the last chunk freed, and the task peaks a chunk higher (in a
    task of 4 chunks on the processes executor, 123 MB measured against the 105 MB of a
    one-chunk task). Elsewhere (the threads executor: other tasks share the heap) it returns at
    once."""
    if not _alone or level is None:
        return level
    now = _waited(heap_in_use, level + 2**20, (0.0, *_LINGER_PAUSES))
    return level if now is None or now <= level + 2**20 else now


# -- Dask distributed ---------------------------------------------------------------------------

# distributed 2026.7 made an asynchronous client's ``scheduler_info()`` a cache of cluster-wide
# totals with no workers listed; Cubed's Dask executor (0.27, 0.28) checks the workers there and
# raises "Cluster has no workers running". From that version on, :func:`dask_executor`'s client
# fetches the workers itself (``scheduler.identity(n_workers=-1)``) when it starts.
DASK_WORKERS_UNLISTED = (2026, 7)


def distributed_version() -> tuple[int, int] | None:
    """(year, month) of the installed ``distributed``, or None when it is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return _version_tuple(version("distributed"))
    except PackageNotFoundError:
        return None


def settled_peak_reset() -> int | None:
    """In a worker: the memory its earlier work freed given back to the system and its resident
    high-water mark reset, once its threads have let go of that memory
    (:func:`_settled_start`); returns the resident set it starts from (None where the mark
    cannot be reset). ``cubed_plugin._baseline`` measures a warm worker so."""
    return _settled_start()


def current_peak() -> int | None:
    """This process's resident-memory high-water mark in bytes (None where unknown)."""
    return _peak()


def _reset_peak() -> int | None:
    """Reset this process's resident-memory high-water mark to its current resident set
    (Linux: ``/proc/self/clear_refs``, which ``getrusage``'s ``ru_maxrss`` follows) and return
    it; None where it cannot be reset."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return None
    return _peak()


def _peak() -> int | None:
    """This process's resident-memory high-water mark in bytes (None where unknown)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _alone_in_worker() -> bool:
    """Whether this task runs in a Dask worker process of one thread (so that no other task
    shares the process while it runs)."""
    try:
        from distributed import get_worker

        worker = get_worker()
    except (ImportError, ValueError):
        return False
    return getattr(getattr(worker, "state", worker), "nthreads", None) == 1


def _dask_task(
    input: Any,
    pipeline_func: Any = None,
    config: Any = None,
    name: Any = None,
    compute_id: Any = None,
) -> tuple[Any, dict]:
    """A task on a Dask worker, measured on its own: Cubed's ``run_func`` reports the worker
    process's lifetime peak (every task it ran before included); this resets the process's
    high-water mark when the task starts, so that the peak reported is the process's during
    this task (what it held before, as a fresh worker's baseline, plus the task's data). On a
    worker of several threads other tasks share the process: the peak is then not this task's
    and None is reported (measured nothing)."""
    return _measured(lambda: pipeline_func(input, config=config), _alone_in_worker())


@functools.cache
def _dask_classes() -> tuple[type, type]:
    """(the Dask executor class, the client class it uses), made on first use (they import
    ``distributed``)."""
    from distributed import Client

    DaskExecutor, dask_create_futures_func, dask_check_runtime_memory = dask_internals()

    class ListingClient(Client):
        """An asynchronous client whose ``scheduler_info()`` lists the workers, fetched when it
        starts (distributed >= 2026.7 caches no workers for asynchronous clients)."""

        _workers_listed: Any = None

        async def __aenter__(self) -> Any:
            await super().__aenter__()
            self._workers_listed = await self.scheduler.identity(n_workers=-1)
            return self

        def scheduler_info(self, n_workers: int = -1, **kwargs: Any) -> Any:
            if self.asynchronous and self._workers_listed is not None:
                return self._workers_listed
            return super().scheduler_info(n_workers, **kwargs)

    v = distributed_version()
    client_class = ListingClient if v is not None and v >= DASK_WORKERS_UNLISTED else Client

    class MeasuringDask(DaskExecutor):  # type: ignore[valid-type,misc]  # a class from a function
        """Cubed's Dask executor with each task's peak measured on its own (:func:`_dask_task`)
        and, with distributed >= 2026.7, a client that lists the workers Cubed checks
        (:data:`DASK_WORKERS_UNLISTED`). Overrides the executor's private
        ``_async_execute_dag`` (Cubed 0.27's, with these two changes)."""

        async def _async_execute_dag(
            self,
            dag: Any,
            callbacks: Any = None,
            spec: Any = None,
            compute_kwargs: dict | None = None,
            compute_arrays_in_parallel: bool | None = None,
            **kwargs: Any,
        ) -> None:
            retries = kwargs.pop("retries", 2)
            name = kwargs.get("name", None)
            async with client_class(asynchronous=True, **(compute_kwargs or {})) as client:
                if spec is not None:
                    dask_check_runtime_memory(spec, client)
                    if "use_backups" not in kwargs and use_backups_default(spec):
                        kwargs["use_backups"] = True
                await async_map_dag(
                    dask_create_futures_func(client, _dask_task, name, retries=retries),
                    dag=dag,
                    callbacks=callbacks,
                    compute_arrays_in_parallel=compute_arrays_in_parallel,
                    create_backup_futures_func=dask_create_futures_func(client, _dask_task, name),
                    **kwargs,
                )

    return MeasuringDask, client_class


def dask_executor(**options: Any) -> Any:
    """Cubed's Dask distributed executor as cubed_plugin runs it (``options`` as Cubed's:
    ``compute_kwargs={"address": ...}`` for an existing cluster, ``retries``): each task's
    measured peak is its own (on workers of one thread; none is reported on workers of
    several), and it works with distributed >= 2026.7 (see :data:`DASK_WORKERS_UNLISTED`)."""
    return _dask_classes()[0](**options)


def is_dask_executor(executor: Any) -> bool:
    """Whether ``executor`` is Cubed's Dask executor (or a subclass)."""
    return getattr(executor, "name", None) == "dask"
