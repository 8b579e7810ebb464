"""The one module of cubed_plugin that touches Cubed's internals.

Everything else of the plugin uses Cubed's public API (``cubed``'s top-level names and
``cubed.array_api``, ``cubed.Spec``, ``cubed.compute``/``plan``, ``cubed.Callback``, a plan's
``max_projected_mem`` and ``num_tasks``) and, for what Cubed does not make public, the functions
and names of this module: building blocks of ops (``general_blockwise``, ``map_selection``,
chunk keys), the plan's graph and the fields of its nodes, Cubed's optimizer and executors, its
op-name counter, its memory formulas. When Cubed changes one of them, this module is the one
to update, and ``tests/test_cubed_seam.py`` (a contract test per internal used here) says
which. ``tests/test_cubed_seam.py`` also checks that no other module of the plugin imports
Cubed's private modules.

Importing this module imports Cubed and checks its version (:data:`SUPPORTED`).
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import os
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import cubed
from cubed.core import plan as _plan_module
from cubed.core.ops import blockwise, general_blockwise, map_selection
from cubed.core.optimization import multiple_inputs_optimize_dag
from cubed.core.plan import FinalizedPlan, Plan, arrays_to_plan, gensym
from cubed.primitive.blockwise import ChunkKey, FunctionArgs, apply_blockwise, key_to_slices
from cubed.primitive.memory import calculate_projected_mem, get_buffer_copies
from cubed.primitive.types import PrimitiveOperation
from cubed.runtime.asyncio import async_map_dag
from cubed.runtime.backup import use_backups_default
from cubed.runtime.create import create_executor
from cubed.runtime.executors.local import (
    ProcessesExecutor,
    check_runtime_memory,
    processes_create_futures_func,
    run_func_processes,
)
from cubed.runtime.types import Callback, CubedPipeline
from cubed.spec import spec_from_config
from cubed.storage.store import is_storage_array
from cubed.storage.zarr import LazyZarrArray
from cubed.utils import block_id_to_offset, chunk_memory, normalize_chunks

__all__ = [
    "apply_blockwise",
    "arrays_to_plan",
    "block_id_to_offset",
    "blocks_per_input",
    "blockwise",
    "buffer_copies",
    "check_version",
    "chunk_memory",
    "ChunkKey",
    "copy_node",
    "create_executor",
    "current_peak",
    "dask_executor",
    "default_spec",
    "DASK_WORKERS_UNLISTED",
    "distributed_version",
    "CubedVersionWarning",
    "first_task_keys",
    "FunctionArgs",
    "general_blockwise",
    "install_op_hook",
    "is_blockwise",
    "is_op",
    "is_dask_executor",
    "is_processes_executor",
    "is_stored",
    "key_to_slices",
    "map_selection",
    "MeasuringProcesses",
    "multiple_inputs_optimize_dag",
    "node_func",
    "node_kind",
    "node_label",
    "node_mark",
    "node_op",
    "node_target",
    "normalize_chunks",
    "op_counter",
    "op_nodes",
    "plan_dag",
    "projected_mem",
    "reads_of",
    "run_tasks",
    "rechunk_task_mem",
    "replace_op",
    "run_with",
    "set_node_mark",
    "set_node_op",
    "set_reserved_mem",
    "settled_peak_reset",
    "SUPPORTED",
    "task_keys",
    "tasks_plan",
    "unoptimized_plan",
    "with_reads",
    "with_spec",
    "WORKER_MALLOC_ENV",
    "zarr_array_of",
]

# the Cubed versions (major, minor) this module was checked against (tests/test_cubed_seam.py
# passes on 0.27.0 installed and on 0.28.0's source); pyproject pins the same
SUPPORTED = ((0, 27), (0, 28))


class CubedVersionWarning(UserWarning):
    """The installed Cubed is newer than the versions cubed_plugin was checked against."""


def _version_tuple(version: str) -> tuple[int, int]:
    major, minor = (version.split(".") + ["0"])[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


def check_version(version: str) -> None:
    """Refuse a Cubed older than :data:`SUPPORTED` (ImportError); warn for a newer one
    (:class:`CubedVersionWarning`): its internals may have changed."""
    v = _version_tuple(version)
    lo, hi = SUPPORTED[0], SUPPORTED[-1]
    supported = ", ".join(f"{a}.{b}" for a, b in SUPPORTED)
    if v < lo:
        raise ImportError(
            f"cubed_plugin needs Cubed {lo[0]}.{lo[1]} or newer (checked with "
            f"{supported}); Cubed {version} is installed: pip install "
            f"'cubed>={lo[0]}.{lo[1]},<{hi[0]}.{hi[1] + 1}'"
        )
    if v > hi:
        warnings.warn(
            f"cubed_plugin was checked with Cubed {supported}; Cubed {version} is "
            f"installed and its internals may differ: run tests/test_cubed_seam.py, "
            f"which names what changed (update cubed_plugin/_cubed_seam.py), or pip "
            f"install 'cubed<{hi[0]}.{hi[1] + 1}'",
            CubedVersionWarning,
            stacklevel=2,
        )


check_version(cubed.__version__)


# -- memory formulas -------------------------------------------------------------------------


def buffer_copies(spec: Any) -> tuple[int, int]:
    """(read, write): the buffer copies Cubed counts for reading and for writing a stored chunk
    under ``spec`` (more on cloud storage)."""
    c = get_buffer_copies(spec)
    return c.read, c.write


def projected_mem(spec: Any, inputs: list[int], extra: int, output: int) -> int:
    """Cubed's projected memory of a blockwise task: reserved memory, each input chunk with its
    read buffers, the op's ``extra`` memory, the output chunk with its write buffers."""
    reserved = int(getattr(spec, "reserved_mem", 0) or 0)
    return calculate_projected_mem(reserved, inputs, extra, output, get_buffer_copies(spec))


def rechunk_task_mem(spec: Any, chunk_bytes: int) -> int:
    """What Cubed's rechunk planner budgets for copying chunks of ``chunk_bytes``: reserved
    memory and (1 + read + 1 + 1 + write) copies of the chunk (the input chunk and its read
    buffers, one for processing, the output and its write buffers). Cubed refuses a rechunk
    whose target chunk would exceed ``allowed_mem`` so (``cubed.core.ops._rechunk_plan``
    computes it inline; the contract test checks the boundary)."""
    read, write = buffer_copies(spec)
    reserved = int(getattr(spec, "reserved_mem", 0) or 0)
    return reserved + chunk_bytes * (1 + read + 1 + 1 + write)


# -- the plan's graph ---------------------------------------------------------------------------

# the fields of a plan's nodes read here: an op's PrimitiveOperation, an array's target, what
# made an op (Cubed's function and op names), the kind of node
_OP, _TARGET, _TYPE, _FUNC, _OP_NAME, _PIPELINE = (
    "primitive_op",
    "target",
    "type",
    "func_name",
    "op_name",
    "pipeline",
)


def plan_dag(plan: Any) -> Any:
    """The networkx graph of a ``cubed.plan(...)`` (op and array nodes)."""
    return plan.dag


def unoptimized_plan(arrays: list, optimize_function: Callable[..., Any]) -> tuple[Any, Any]:
    """The graphs of the plan of ``arrays`` before and after ``optimize_function``."""
    before = arrays_to_plan(*arrays)
    return before.dag, before.optimize(optimize_function).dag


def op_counter() -> int:
    """Cubed's op-name counter: ops made later have larger numbers (``op-012``)."""
    return _plan_module.sym_counter


def node_op(dag: Any, name: str) -> Any:
    """The ``PrimitiveOperation`` of the op node ``name`` (None for arrays and for ops with
    nothing to run). Its fields read by the plugin: ``projected_mem``, ``allowed_mem``,
    ``reserved_mem``, ``num_tasks``, ``source_array_names``, ``fusable_with_predecessors``,
    ``fusable_with_successors`` (checked by the contract test)."""
    return dag.nodes[name].get(_OP)


def set_node_op(dag: Any, name: str, op: Any) -> None:
    """Give the op node ``name`` the ``PrimitiveOperation`` ``op`` (and its pipeline)."""
    d = dag.nodes[name]
    d[_OP] = op
    if _PIPELINE in d:
        d[_PIPELINE] = op.pipeline


def op_nodes(dag: Any) -> Iterator[tuple[str, Any]]:
    """``(name, PrimitiveOperation)`` of every op node of ``dag`` that runs tasks."""
    for name, d in dag.nodes(data=True):
        op = d.get(_OP)
        if op is not None:
            yield name, op


def is_op(dag: Any, name: str) -> bool:
    """Whether ``name`` is an op node (not an array)."""
    return dag.nodes[name].get(_TYPE) == "op"


def node_label(dag: Any, name: str) -> str:
    """What Cubed calls the op ``name``: the function that made it, else its op name."""
    d = dag.nodes[name]
    return str(d.get(_FUNC) or d.get(_OP_NAME) or name)


def node_func(dag: Any, name: str) -> str:
    """The Cubed function that made the op ``name`` ("?" when unknown)."""
    return str(dag.nodes[name].get(_FUNC) or "?")


def node_kind(dag: Any, name: str) -> str:
    """Cubed's op name of the op ``name`` (blockwise, rechunk, ...; "?" when none)."""
    return str(dag.nodes[name].get(_OP_NAME, "?"))


def node_target(dag: Any, name: str) -> Any:
    """The stored (or virtual) array behind the array node ``name`` (None when none)."""
    return dag.nodes[name].get(_TARGET)


def default_spec() -> Any:
    """The Spec Cubed gives an array made without one (from its configuration)."""
    return spec_from_config(cubed.config)


def with_spec(x: Any, spec: Any) -> Any:
    """The Cubed array ``x``, given ``spec`` instead of its own (its attribute ``spec``, set in
    place, so that every holder of ``x`` sees it: a residual a VJP rule saved, combined later
    with Cubed's operators); the same node of the same plan."""
    x.spec = spec
    return x


def zarr_array_of(x: Any) -> Any:
    """The array behind a Cubed array (Cubed's private ``_zarray``): the ``zarr.Array`` that
    one made by ``cubed.from_zarr`` reads, Cubed's lazy array for one it computes; None when
    it has none."""
    return getattr(x, "_zarray", None)


def is_stored(dag: Any, name: str) -> bool:
    """Whether the array node ``name`` is read from storage (Zarr), lazily opened or not."""
    t = node_target(dag, name)
    return isinstance(t, LazyZarrArray) or is_storage_array(t)


def node_mark(dag: Any, name: str, key: str, default: Any = None) -> Any:
    """The plugin's own attribute ``key`` of node ``name`` (labels, fused ops)."""
    return dag.nodes[name].get(key, default)


def set_node_mark(dag: Any, name: str, key: str, value: Any) -> None:
    """Set the plugin's own attribute ``key`` of node ``name``."""
    dag.nodes[name][key] = value


def copy_node(dag: Any, name: str, new: str, op: Any = None) -> None:
    """Add node ``new``, a copy of node ``name`` (with the PrimitiveOperation ``op`` when
    given)."""
    d = dict(dag.nodes[name], name=new)
    if op is not None:
        d[_OP] = op
    dag.add_node(new, **d)


def replace_op(op: Any, **changes: Any) -> Any:
    """A copy of the PrimitiveOperation ``op`` with ``changes`` to its fields."""
    return dataclasses.replace(op, **changes)


# -- an op's pipeline ---------------------------------------------------------------------------


def is_blockwise(op: Any, *also: Callable[..., Any]) -> bool:
    """Whether the PrimitiveOperation ``op`` runs Cubed's blockwise task function (or one of
    ``also``)."""
    return op is not None and (
        op.pipeline.function is apply_blockwise or op.pipeline.function in also
    )


def blocks_per_input(op: Any) -> tuple[int, ...]:
    """The most blocks a task of ``op`` reads of each input (Cubed's ``num_input_blocks``)."""
    return tuple(op.pipeline.config.num_input_blocks)


def first_task_keys(op: Any) -> Any:
    """The (nested) input chunk keys the first task of ``op`` reads."""
    first = next(iter(op.pipeline.mappable))
    return op.pipeline.config.back_key_function(ChunkKey("out", tuple(first)))


def task_keys(config: Any, out_coords: list) -> Any:
    """The (nested) input chunk keys a task of the blockwise ``config`` reads."""
    return config.back_key_function(ChunkKey("out", tuple(out_coords)))


def with_reads(config: Any, reads_map: dict) -> Any:
    """The blockwise ``config`` reading through ``reads_map`` (``{array name: proxy}``)."""
    return dataclasses.replace(config, reads_map=reads_map)


def reads_of(config: Any) -> dict:
    """``{array name: read proxy}`` of the blockwise ``config``."""
    return config.reads_map


def run_with(op: Any, function: Callable[..., Any]) -> Any:
    """A copy of the blockwise ``op`` whose tasks run ``function`` in place of Cubed's."""
    pipeline = dataclasses.replace(op.pipeline, function=function)
    return dataclasses.replace(op, pipeline=pipeline)


# -- the plugin's own tasks ---------------------------------------------------------------------


def tasks_plan(
    function: Callable[..., Any],
    items: list,
    config: Any,
    *,
    projected_mem: int,
    allowed_mem: int,
    reserved_mem: int,
    kind: str,
    marks: dict[str, Any],
) -> Any:
    """A finalized Cubed plan of one op of ``len(items)`` tasks, each ``function(item,
    config=config)``, that reads and writes no Cubed array: what a task returns comes back to
    the driver (:func:`run_tasks`). Made once, it runs any number of times; ``config`` is
    shipped to the tasks each time it runs (pickled when they run elsewhere: a mutable config
    gives each run the values it holds then). The op is named as Cubed names ops (op-NNN), its
    kind is ``kind`` (:func:`node_kind`), and it declares ``projected_mem`` per task, as a
    blockwise op does, for the callbacks and the check; ``marks`` are the plugin's own
    attributes of its node (:func:`node_mark`)."""
    import networkx as nx

    name = gensym("op")
    pipeline = CubedPipeline(function, name, list(items), config)
    op = PrimitiveOperation(
        pipeline=pipeline,
        source_array_names=[],
        target_array=None,
        projected_mem=int(projected_mem),
        allowed_mem=int(allowed_mem),
        reserved_mem=int(reserved_mem),
        num_tasks=len(items),
        fusable_with_predecessors=False,
        fusable_with_successors=False,
    )
    dag = nx.MultiDiGraph()
    dag.add_node(
        name,
        name=name,
        op_name=kind,
        type="op",
        func_name=kind,
        primitive_op=op,
        pipeline=pipeline,
        **marks,
    )
    over = [(name, op)] if op.projected_mem > op.allowed_mem else []
    return FinalizedPlan(nx.freeze(dag), (), True, over)


def run_tasks(
    plan: Any, executor: Any, callbacks: Any = None, spec: Any = None, **kwargs: Any
) -> list:
    """Run the plan of :func:`tasks_plan` on ``executor`` as ``cubed.compute`` runs a plan
    (Cubed refuses it when a task's projection exceeds ``allowed_mem``; ``callbacks``, with
    the callbacks active in a ``with`` block, get its compute, op and task events; ``kwargs``
    go to the executor) and return what its tasks returned, in the order they ended (a task
    retried or backed up may appear twice). Executors that send no results back to the driver
    (Apache Beam's) give fewer."""
    results: list = []

    class Results(Callback):
        def on_task_end(self, event: Any) -> None:
            if event.result is not None:
                results.append(event.result)

    plan.execute(
        executor=executor,
        callbacks=[*Callback.active, *(callbacks or ()), Results()],
        spec=spec,
        **kwargs,
    )
    return results


# -- labels: every op made --------------------------------------------------------------------


def install_op_hook(hook: Callable[[Any, str, Any], None]) -> None:
    """Call ``hook(dag, op name, frame)`` for each op node Cubed makes (its op constructor,
    the classmethod ``Plan._new``, through which every op is created), ``frame`` being the
    caller of the constructor. Installed once; later calls replace the hook."""
    import sys

    _HOOK[0] = hook
    if getattr(Plan, "_pycograd_xp_hooked", False):
        return
    new = Plan.__dict__["_new"].__func__

    @functools.wraps(new)
    def _new(cls: type, name: Any, *args: Any, **kwargs: Any) -> Any:
        plan = new(cls, name, *args, **kwargs)
        first = name[0] if isinstance(name, list) and name else name
        if not isinstance(first, str) or first not in plan.dag:  # labels never stop a plan
            return plan
        for op in plan.dag.predecessors(first):
            if is_op(plan.dag, op):
                _HOOK[0](plan.dag, op, sys._getframe(1))
        return plan

    Plan._new = classmethod(_new)
    Plan._pycograd_xp_hooked = True


_HOOK: list[Any] = [None]


# -- executors ----------------------------------------------------------------------------------


def is_processes_executor(executor: Any) -> bool:
    """Whether ``executor`` is Cubed's local processes executor (or a subclass)."""
    return isinstance(executor, ProcessesExecutor)


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


def set_reserved_mem(spec: Any, reserved_mem: int) -> None:
    """Raise ``spec``'s ``reserved_mem`` to ``reserved_mem`` in place (Cubed's ``Spec`` has no
    setter; its private ``_reserved_mem``): the ops planned after it count it, and the arrays
    made with the spec keep an equal one."""
    spec._reserved_mem = int(reserved_mem)


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
    from cubed.runtime.executors.dask import (
        DaskExecutor,
        dask_create_futures_func,
    )
    from cubed.runtime.executors.dask import (
        check_runtime_memory as dask_check_runtime_memory,
    )
    from distributed import Client

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

    class MeasuringDask(DaskExecutor):
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
