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

import dataclasses
import functools
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import cubed
from cubed.core import plan as _plan_module
from cubed.core.ops import blockwise, general_blockwise, map_selection
from cubed.core.optimization import multiple_inputs_optimize_dag
from cubed.core.plan import FinalizedPlan, arrays_to_plan, gensym
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
from cubed.storage.virtual import VirtualInMemoryArray
from cubed.storage.zarr import LazyZarrArray
from cubed.utils import block_id_to_offset, chunk_memory, normalize_chunks

# the core's time model of recomputing against row slices (a private module of the core: the
# seam is where the plugin reaches those)
from pycograd_xp.memory._cost import recompute_microseconds, slices_microseconds

__all__ = [
    "recompute_microseconds",
    "slices_microseconds",
    "use_backups_default",
    "run_func_processes",
    "ProcessesExecutor",
    "processes_create_futures_func",
    "dask_internals",
    "check_runtime_memory",
    "async_map_dag",
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
    "default_spec",
    "CubedVersionWarning",
    "first_task_keys",
    "FunctionArgs",
    "general_blockwise",
    "is_blockwise",
    "is_op",
    "is_processes_executor",
    "intermediate_locations",
    "is_stored",
    "key_to_slices",
    "map_selection",
    "multiple_inputs_optimize_dag",
    "array_dag",
    "node_func",
    "node_stack",
    "node_kind",
    "node_label",
    "node_mark",
    "node_op",
    "node_target",
    "normalize_chunks",
    "op_counter",
    "op_nodes",
    "ops_since",
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
    "SUPPORTED",
    "task_keys",
    "tasks_plan",
    "unoptimized_plan",
    "with_reads",
    "with_spec",
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


# -- storage: an intermediate of a structured dtype, stored again -----------------------------


def _reopening(open_array: Callable[..., Any]) -> Callable[..., Any]:
    """Cubed 0.27's ``open_zarr_v3_array`` with a structured dtype (mean's ``{n, total}``,
    var's): mode ``"a"`` creates each field's array in the group, and raises zarr's
    ``ContainsArrayError`` when a second plan that shares the intermediate (``float(v)``, then
    the gradient of the same ``std``) stores it again. Opened for writing where the arrays are
    there (what ``"a"`` means), created where they are not."""

    @functools.wraps(open_array)
    def open_zarr_v3_array(store: Any, mode: Any, **kwargs: Any) -> Any:
        dtype = kwargs.get("dtype")
        if mode == "a" and getattr(dtype, "fields", None):
            try:
                return open_array(store, "r+", **kwargs)
            except (KeyError, FileNotFoundError, LookupError):  # not stored yet
                pass
            except Exception as e:  # zarr's "not found" errors
                if "not found" not in str(e).lower() and "no group" not in str(e).lower():
                    raise
        return open_array(store, mode, **kwargs)

    open_zarr_v3_array.reopens = True  # type: ignore[attr-defined]
    return open_zarr_v3_array


def _install_reopening() -> None:
    from cubed.storage.stores import zarr_python_v3

    if not getattr(zarr_python_v3.open_zarr_v3_array, "reopens", False):
        zarr_python_v3.open_zarr_v3_array = _reopening(zarr_python_v3.open_zarr_v3_array)


_install_reopening()


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
# made an op (Cubed's function and op names, where it was called from), the kind of node
_OP, _TARGET, _TYPE, _FUNC, _OP_NAME, _PIPELINE, _STACK = (
    "primitive_op",
    "target",
    "type",
    "func_name",
    "op_name",
    "pipeline",
    "stack_summaries",
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


def held_values(x: Any) -> Any:
    """The values of the Cubed array ``x`` where it holds them in memory (one made by
    ``cubed.asarray`` from a NumPy array: Cubed's ``VirtualInMemoryArray``), read without
    computing anything; None for any other array (a computed or stored one)."""
    z = getattr(x, "_zarray", None)
    return z.array if isinstance(z, VirtualInMemoryArray) else None


def is_stored(dag: Any, name: str) -> bool:
    """Whether the array node ``name`` is read from storage (Zarr), lazily opened or not."""
    t = node_target(dag, name)
    return isinstance(t, LazyZarrArray) or is_storage_array(t)


def intermediate_locations(dag: Any) -> list[str]:
    """Where the plan ``dag`` writes its intermediate arrays (Cubed's lazily created Zarr
    arrays in the Spec's work_dir: a local path or a URL each), to delete them after it ran."""
    out = []
    for name in dag.nodes:
        t = dag.nodes[name].get(_TARGET)
        if isinstance(t, LazyZarrArray) and isinstance(t.store, str) and t.path:
            out.append(f"{t.store.rstrip('/')}/{t.path}")
    return out


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


# -- labels: the ops a call made --------------------------------------------------------------


def array_dag(x: Any) -> Any:
    """The networkx graph of the plan that computes the Cubed array ``x`` (None for anything
    else): the graph a later op on ``x`` is built from, so a mark set on one of its op nodes
    now is in every plan made from ``x`` later."""
    plan = getattr(x, "_plan", None) if isinstance(x, cubed.Array) else None
    return getattr(plan, "dag", None)


def ops_since(dag: Any, counter: int) -> list[str]:
    """The op nodes of ``dag`` made after :func:`op_counter` read ``counter`` (Cubed numbers
    its nodes from that counter as it makes them: ``op-013``, its ``gensym``)."""
    now = _plan_module.sym_counter
    return [
        name
        for name in (f"op-{i:03}" for i in range(counter + 1, now + 1))
        if name in dag and dag.nodes[name].get(_TYPE) == "op"
    ]


def node_stack(dag: Any, name: str) -> list[tuple[str, int, str, str]]:
    """Where Cubed's function that made the op ``name`` was called from, as Cubed recorded it
    (its innermost ten frames): ``(filename, line, function, module)`` each, innermost first."""
    return [(s.filename, s.lineno, s.name, s.module) for s in dag.nodes[name].get(_STACK) or ()]


# -- executors ----------------------------------------------------------------------------------
# (the measuring executors built on these are cubed_plugin._measuring's)
def is_processes_executor(executor: Any) -> bool:
    """Whether ``executor`` is Cubed's local processes executor (or a subclass)."""
    return isinstance(executor, ProcessesExecutor)


def set_reserved_mem(spec: Any, reserved_mem: int) -> None:
    """Raise ``spec``'s ``reserved_mem`` to ``reserved_mem`` in place (Cubed's ``Spec`` has no
    setter; its private ``_reserved_mem``): the ops planned after it count it, and the arrays
    made with the spec keep an equal one."""
    spec._reserved_mem = int(reserved_mem)


def dask_internals() -> tuple[type, Callable[..., Any], Callable[..., Any]]:
    """Cubed's Dask executor class, its futures function and its runtime-memory check (they
    import ``distributed``: on first use)."""
    from cubed.runtime.executors.dask import (
        DaskExecutor,
        dask_create_futures_func,
    )
    from cubed.runtime.executors.dask import (
        check_runtime_memory as dask_check_runtime_memory,
    )

    return DaskExecutor, dask_create_futures_func, dask_check_runtime_memory
