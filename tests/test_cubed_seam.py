"""The contract between cubed_plugin and Cubed's internals: ``cubed_plugin/_cubed_seam.py`` is
the only module of the plugin that touches them, and each internal it relies on is checked here
against the installed Cubed (names, signatures, the fields of plan nodes and of the objects in
them, the memory formulas), so that a new Cubed fails here, naming what changed, rather than
somewhere inside a training step.

Run it after installing a Cubed outside ``_cubed_seam.SUPPORTED``; each failure says what to
update in ``cubed_plugin/_cubed_seam.py``.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

cubed = pytest.importorskip("cubed")
zarr = pytest.importorskip("zarr")

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "cubed_plugin"
SEAM = PLUGIN / "_cubed_seam.py"
VERSION = ".".join(cubed.__version__.split(".")[:2])


def changed(what: str) -> str:
    return f"Cubed {VERSION} changed {what}; update cubed_plugin/_cubed_seam.py"


def _seam():
    from cubed_plugin import _cubed_seam

    return _cubed_seam


# -- the version --------------------------------------------------------------------------------


def test_the_installed_cubed_is_a_supported_version():
    from cubed_plugin._cubed_seam import SUPPORTED, _version_tuple

    assert _version_tuple(cubed.__version__) in SUPPORTED, (
        f"Cubed {cubed.__version__} is installed; cubed_plugin/_cubed_seam.py was checked with "
        f"{SUPPORTED}: run this file, update the seam where it fails, then add the version"
    )


def test_the_supported_versions_are_those_pyproject_pins():
    from cubed_plugin._cubed_seam import SUPPORTED

    pins = set(
        re.findall(r'"cubed>=(\d+)\.(\d+),<(\d+)\.(\d+)"', (ROOT / "pyproject.toml").read_text())
    )
    assert pins, "pyproject.toml pins no cubed>=X.Y,<X.Z"
    for lo_a, lo_b, hi_a, hi_b in pins:
        lo, hi = (int(lo_a), int(lo_b)), (int(hi_a), int(hi_b))
        assert SUPPORTED[0] == lo and SUPPORTED[-1] < hi <= (
            SUPPORTED[-1][0],
            SUPPORTED[-1][1] + 1,
        ), f"pyproject pins cubed>={lo},<{hi}; _cubed_seam.SUPPORTED is {SUPPORTED}"


def test_an_unsupported_version_is_refused_or_warned_naming_it():
    from cubed_plugin._cubed_seam import CubedVersionWarning, check_version

    with pytest.raises(ImportError, match=r"Cubed 0\.20\.1 is installed.*pip install"):
        check_version("0.20.1")
    with pytest.warns(CubedVersionWarning, match=r"Cubed 0\.31\.0 is installed.*test_cubed_seam"):
        check_version("0.31.0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_version("0.27.0")
        check_version("0.28.2")


# -- the names the seam imports -----------------------------------------------------------------


def _seam_imports() -> list[tuple[str, str]]:
    """``(module, name)`` of every ``from cubed... import name`` in the seam (at any depth)."""
    out = []
    for node in ast.walk(ast.parse(SEAM.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cubed"):
            out += [(node.module, a.name) for a in node.names]
    return out


def _import(module: str):
    """``module`` imported; skips when what it needs is an engine's extra that is absent (Cubed's
    executor modules import their engine: distributed, ray, ...)."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        missing = (getattr(e, "name", None) or "").split(".")[0]
        if missing and missing != "cubed":
            pytest.skip(f"{module} needs {missing}, not installed (an engine's extra)")
        pytest.fail(changed(f"its modules: {module} cannot be imported ({e})"))


@pytest.mark.parametrize("module,name", _seam_imports())
def test_every_internal_the_seam_imports_exists(module, name):
    mod = _import(module)
    if not hasattr(mod, name) and not importlib.util.find_spec(f"{module}.{name}"):
        pytest.fail(changed(f"{module}: it has no {name}"))


# -- signatures ---------------------------------------------------------------------------------

# the parameters the plugin passes or receives, by name, for each internal function it calls
SIGNATURES = {
    ("cubed.core.ops", "general_blockwise"): (
        "func",
        "back_key_function",
        "arrays",
        "shapes",
        "dtypes",
        "chunkss",
        "target_stores",
        "extra_func_kwargs",
    ),
    ("cubed.core.ops", "map_selection"): (
        "func",
        "selection_function",
        "x",
        "shape",
        "dtype",
        "chunks",
        "max_num_input_blocks",
    ),
    ("cubed.core.ops", "blockwise"): (
        "func",
        "out_ind",
        "args",
        "dtype",
        "adjust_chunks",
        "new_axes",
        "extra_func_kwargs",
    ),
    ("cubed.core.optimization", "multiple_inputs_optimize_dag"): (
        "dag",
        "array_names",
        "max_total_source_arrays",
        "max_total_num_input_blocks",
        "never_fuse",
    ),
    ("cubed.core.plan", "arrays_to_plan"): ("arrays",),
    ("cubed.core.plan", "gensym"): ("name",),
    ("cubed.core.plan", "FinalizedPlan"): (
        "dag",
        "array_names",
        "optimized",
        "ops_exceeding_memory",
    ),
    ("cubed.core.plan", "FinalizedPlan.execute"): ("executor", "callbacks", "spec"),
    ("cubed.primitive.blockwise", "apply_blockwise"): ("out_coords", "config"),
    ("cubed.primitive.blockwise", "key_to_slices"): ("key", "arr"),
    ("cubed.primitive.memory", "calculate_projected_mem"): (
        "reserved_mem",
        "inputs",
        "operation",
        "output",
        "buffer_copies",
    ),
    ("cubed.primitive.memory", "get_buffer_copies"): ("spec",),
    ("cubed.runtime.create", "create_executor"): ("name", "executor_options"),
    ("cubed.runtime.asyncio", "async_map_dag"): (
        "create_futures_func",
        "dag",
        "callbacks",
        "compute_arrays_in_parallel",
    ),
    ("cubed.runtime.backup", "use_backups_default"): ("spec",),
    ("cubed.runtime.executors.local", "check_runtime_memory"): ("spec", "max_workers"),
    ("cubed.runtime.executors.local", "processes_create_futures_func"): (
        "concurrent_executor",
        "function",
    ),
    ("cubed.runtime.executors.dask", "check_runtime_memory"): ("spec", "client"),
    ("cubed.runtime.executors.dask", "dask_create_futures_func"): (
        "client",
        "function",
        "name",
        "retries",
    ),
    ("cubed.utils", "chunk_memory"): ("arr",),
    ("cubed.utils", "normalize_chunks"): ("chunks", "shape", "dtype"),
    ("cubed.utils", "block_id_to_offset"): ("block_id", "numblocks"),
}


@pytest.mark.parametrize("where,params", SIGNATURES.items(), ids=lambda v: str(v))
def test_internal_functions_take_the_parameters_the_plugin_passes(where, params):
    module, name = where
    f = _import(module)
    for part in name.split("."):
        f = getattr(f, part)
    have = inspect.signature(f).parameters
    missing = [p for p in params if p not in have]
    assert not missing, changed(
        f"the signature of {module}.{name}: no {missing} (it takes {list(have)})"
    )


def test_the_processes_executor_still_runs_a_dag_by_the_method_the_seam_overrides():
    from cubed.runtime.executors.local import ProcessesExecutor

    f = ProcessesExecutor.__dict__.get("_async_execute_dag")
    assert f is not None and inspect.iscoroutinefunction(f), changed(
        "ProcessesExecutor: it has no coroutine _async_execute_dag (MeasuringProcesses "
        "overrides it)"
    )
    params = list(inspect.signature(f).parameters)
    assert params[:5] == ["self", "dag", "callbacks", "spec", "compute_arrays_in_parallel"], (
        changed(f"ProcessesExecutor._async_execute_dag's parameters: {params}")
    )
    from cubed.runtime.executors.local import run_func_processes

    assert callable(run_func_processes), changed("cubed.runtime.executors.local.run_func_processes")


def test_the_dask_executor_still_runs_a_dag_by_the_method_the_seam_overrides():
    """MeasuringDask (cubed_plugin._measuring's Dask executor) overrides
    DaskExecutor._async_execute_dag, and its tasks return what Cubed's run_func returns:
    (result, stats)."""
    mod = _import("cubed.runtime.executors.dask")
    f = mod.DaskExecutor.__dict__.get("_async_execute_dag")
    assert f is not None and inspect.iscoroutinefunction(f), changed(
        "DaskExecutor: it has no coroutine _async_execute_dag (the seam's Dask executor "
        "overrides it)"
    )
    params = list(inspect.signature(f).parameters)
    want = ["self", "dag", "callbacks", "spec", "compute_kwargs", "compute_arrays_in_parallel"]
    assert params[:6] == want, changed(f"DaskExecutor._async_execute_dag's parameters: {params}")
    result, stats = mod.run_func(1, pipeline_func=lambda x, config=None: x + 1)
    assert result == 2 and "peak_measured_mem_end" in stats, changed(
        "cubed.runtime.executors.dask.run_func: it no longer returns (result, stats)"
    )
    from cubed_plugin._measuring import _dask_task

    assert _dask_task(1, pipeline_func=lambda x, config=None: x + 1)[0] == 2


def _task(item, config=None):
    return item, config["scale"] * item


@pytest.mark.parametrize("executor", ["single-threaded", "threads", "processes"])
def test_a_plan_of_the_plugins_own_tasks_runs_and_sends_their_results_back(tmp_path, executor):
    """``tasks_plan``: one op of tasks that read and write no array, run as Cubed runs a plan
    (callbacks get its compute, op and task events; a task's result comes back to the driver),
    any number of times, each run with the configuration's values at that time; Cubed refuses
    it when its projection exceeds allowed_mem."""
    from cubed_plugin._executors import executor_of

    s = _seam()
    config = {"scale": 2}
    plan = s.tasks_plan(
        _task,
        [0, 1, 2],
        config,
        projected_mem=1000,
        allowed_mem=10**9,
        reserved_mem=0,
        kind="mine",
        marks={"pycograd_xp_part": "my tasks"},
    )
    (name,) = [n for n, _ in s.op_nodes(plan.dag)]
    assert s.node_kind(plan.dag, name) == "mine" and plan.num_tasks == 3
    assert plan.max_projected_mem == 1000 and s.node_mark(plan.dag, name, "pycograd_xp_part")
    events: list[str] = []

    class Seen(cubed.Callback):
        def on_compute_start(self, event):
            events.append(f"start {len(list(s.op_nodes(event.dag)))}")

        def on_task_end(self, event):
            events.append(event.name)

        def on_compute_end(self, event):
            events.append("end")

    ex = executor_of(executor)
    spec = cubed.Spec(work_dir=str(tmp_path), allowed_mem="1GB")
    assert sorted(s.run_tasks(plan, ex, [Seen()], spec)) == [(0, 0), (1, 2), (2, 4)]
    assert events == ["start 1", name, name, name, "end"]
    config["scale"] = 3  # a later run ships the configuration as it is then
    assert sorted(s.run_tasks(plan, ex, [], spec)) == [(0, 0), (1, 3), (2, 6)]
    over = s.tasks_plan(
        _task, [0], config, projected_mem=2000, allowed_mem=1000, reserved_mem=0, kind="x", marks={}
    )
    with pytest.raises(ValueError, match="exceeds allowed_mem"):
        s.run_tasks(over, ex, [], spec)


def test_the_ops_a_call_made_are_found_from_the_counter_and_the_arrays_plan():
    """What cubed_plugin._labels reads to label the ops a call made: the plan's graph of the
    array it returned (a mark set there stays in the plans made from the array later), the op
    nodes numbered after the counter, and Cubed's record of where each was called from."""
    s = _seam()
    x = cubed.ones((4,), chunks=2)
    since = s.op_counter()
    y = cubed.exp(x) * x  # two ops
    dag = s.array_dag(y)
    assert dag is not None and s.array_dag(np.ones(2)) is None
    made = s.ops_since(dag, since)
    assert len(made) == 2 and all(s.is_op(dag, op) for op in made), changed(
        f"Cubed's op names: {sorted(dag.nodes)} (the seam expects op-NNN from its counter)"
    )
    assert {s.node_func(dag, op) for op in made} == {"exp", "__mul__"}
    stack = s.node_stack(dag, made[0])
    assert stack and all(isinstance(line, int) for _, line, _, _ in stack), changed(
        "op nodes: no 'stack_summaries' (filename, lineno, name, module)"
    )
    assert any(f == __file__ for f, *_ in stack), stack  # this test's line is in the record
    s.set_node_mark(dag, made[0], "mark", 1)
    later = s.array_dag(y * 2)
    assert s.node_mark(later, made[0], "mark") == 1, changed("a plan made later copies marks")


def test_no_cubed_class_is_patched_and_no_frame_is_read():
    """Labelling ops changes nothing of Cubed (its op constructor is its own after a gradient
    on Cubed) and reads no Python frames (no module of the plugin calls for one)."""
    from cubed.core.plan import Plan

    import pycograd_xp as pg

    xp = pg.namespace(cubed)
    pg.grad(lambda v: xp.sum(xp.tanh(v)))(xp.asarray(np.ones(3)))
    assert Plan.__dict__["_new"].__func__.__module__ == "cubed.core.plan"
    frames = re.compile(r"_getframe|f_locals|f_back|currentframe|inspect\.stack|walk_stack")
    readers = [p.name for p in PLUGIN.rglob("*.py") if frames.search(p.read_text())]
    assert readers == [], readers


# -- the objects in a plan ----------------------------------------------------------------------

PRIMITIVE_OP_FIELDS = (
    "pipeline",
    "source_array_names",
    "target_array",
    "projected_mem",
    "allowed_mem",
    "reserved_mem",
    "num_tasks",
    "fusable_with_predecessors",
    "fusable_with_successors",
)
PIPELINE_FIELDS = ("function", "name", "mappable", "config")
BLOCKWISE_SPEC_FIELDS = ("back_key_function", "num_input_blocks", "reads_map")


def _fields(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()


@pytest.mark.parametrize(
    "module,name,fields",
    [
        ("cubed.primitive.types", "PrimitiveOperation", PRIMITIVE_OP_FIELDS),
        ("cubed.runtime.types", "CubedPipeline", PIPELINE_FIELDS),
        ("cubed.primitive.blockwise", "BlockwiseSpec", BLOCKWISE_SPEC_FIELDS),
        ("cubed.primitive.blockwise", "ChunkKey", ("name", "coords")),
    ],
)
def test_the_dataclasses_in_a_plan_have_the_fields_the_plugin_reads(module, name, fields):
    cls = getattr(importlib.import_module(module), name)
    missing = [f for f in fields if f not in _fields(cls)]
    assert not missing, changed(
        f"{module}.{name}: it has no field {missing} (dataclasses."
        "replace and attribute reads of the seam use them)"
    )


def test_function_args_hold_their_keys_in_args():
    from cubed.primitive.blockwise import FunctionArgs

    assert FunctionArgs(1, 2, output_name="a").args == (1, 2), changed(
        "FunctionArgs: its keys are not in .args"
    )


def _plan(spec):
    x = cubed.ones((1000, 100), chunks=(100, 100), spec=spec)
    return _seam().plan_dag(cubed.plan(x + 1, optimize_graph=False))


def _add(dag):
    """The blockwise op of ``x + 1`` (another op, an ``asarray``, makes the 1 an array)."""
    s = _seam()
    return [
        n
        for n in dag.nodes
        if s.is_op(dag, n)
        and s.node_func(dag, n) == "__add__"
        and s.node_kind(dag, n) == "blockwise"
    ]


def test_plan_nodes_have_the_fields_the_seam_reads(tmp_path):
    import networkx as nx

    s = _seam()
    dag = _plan(cubed.Spec(work_dir=str(tmp_path), allowed_mem="100MB"))
    assert isinstance(dag, nx.MultiDiGraph), changed(f"a plan's dag: a {type(dag).__name__}")
    ops = [n for n in dag.nodes if s.is_op(dag, n)]
    assert ops, changed("plan nodes: none has type 'op'")
    (add,) = _add(dag) or [None]
    assert add is not None, changed(
        f"plan nodes: no op's {s._FUNC!r} and {s._OP_NAME!r} name "
        f"the function that made it and its kind "
        f"({[dict(dag.nodes[n]) for n in ops]})"
    )
    d = dag.nodes[add]
    for key in (s._OP, s._OP_NAME, s._PIPELINE):
        assert key in d, changed(f"op nodes of a plan: no {key!r} field (has {sorted(d)})")
    assert d[s._OP_NAME] == "blockwise" and s.is_blockwise(s.node_op(dag, add)), changed(
        "an elementwise op: not a blockwise op run by apply_blockwise"
    )
    assert d[s._PIPELINE] is d[s._OP].pipeline, changed("op nodes: 'pipeline' is not the op's")
    (out,) = dag.successors(add)
    assert s.node_target(dag, out) is not None, changed(f"array nodes: no {s._TARGET!r} field")
    assert s.blocks_per_input(s.node_op(dag, add)) == (1, 1)
    keys = list(s.first_task_keys(s.node_op(dag, add)).args)
    assert keys and all(isinstance(k, s.ChunkKey) for k in keys), changed(
        f"a blockwise op's back_key_function: gives {keys}"
    )


def test_arrays_read_from_zarr_keep_the_zarr_array_they_read(tmp_path):
    s = _seam()
    z = zarr.open_array(str(tmp_path / "a.zarr"), mode="w", shape=(4,), chunks=(2,), dtype="f8")
    x = cubed.from_zarr(str(tmp_path / "a.zarr"))
    assert isinstance(s.zarr_array_of(x), zarr.Array), changed(
        "cubed.from_zarr: its array keeps no _zarray (the zarr.Array it reads)"
    )
    assert s.zarr_array_of(x).store_path == z.store_path
    assert not isinstance(s.zarr_array_of(x + 1), zarr.Array)  # computed: Cubed's lazy array


def test_an_array_made_without_a_spec_has_the_default_and_can_take_another(tmp_path):
    s = _seam()
    c = cubed.asarray(np.arange(3.0))
    assert c.spec == s.default_spec(), changed("the Spec of an array made without one")
    spec = cubed.Spec(work_dir=str(tmp_path), allowed_mem="10MB")
    d = s.with_spec(c, spec)
    assert d is c and c.spec == spec, changed("an array's spec attribute")
    x = cubed.from_array(np.ones(3), chunks=2, spec=spec)
    np.testing.assert_array_equal((x + d).compute(), [1.0, 2.0, 3.0])


def test_the_op_counter_counts_the_ops_made():
    s = _seam()
    before = s.op_counter()
    cubed.ones((4,), chunks=2) + 1
    assert s.op_counter() > before, changed(
        "cubed.core.plan.sym_counter: it does not count the ops made"
    )


def test_stored_arrays_are_told_apart(tmp_path):
    import zarr

    s = _seam()
    zarr.open_array(str(tmp_path / "x.zarr"), mode="w", shape=(4,), chunks=(2,), dtype="f8")
    x = cubed.from_zarr(str(tmp_path / "x.zarr"))
    dag = s.plan_dag(cubed.plan(x + 1, optimize_graph=False))
    stored = {n for n in dag.nodes if not s.is_op(dag, n) and s.is_stored(dag, n)}
    assert stored, changed(
        "the target of a from_zarr array node: neither a LazyZarrArray nor a storage array"
    )
    virtual = cubed.ones((4,), chunks=2)
    dag = s.plan_dag(cubed.plan(virtual, optimize_graph=False))
    assert not any(s.is_stored(dag, n) for n in dag.nodes if not s.is_op(dag, n))


def test_intermediate_locations_are_where_the_plan_writes(tmp_path):
    s = _seam()
    spec = cubed.Spec(work_dir=str(tmp_path), allowed_mem="100MB")
    x = cubed.ones((8, 4), chunks=(2, 4), spec=spec)
    y = cubed.sum(x @ cubed.ones((4, 3), chunks=(4, 3), spec=spec), axis=0)
    p = cubed.plan(y, optimize_graph=False)
    where = s.intermediate_locations(s.plan_dag(p))
    assert where and all(w.startswith(str(tmp_path)) for w in where), changed(
        "cubed.storage.zarr.LazyZarrArray's store and path: the intermediate arrays' locations"
    )
    cubed.compute(y, optimize_graph=False)
    # the arrays' metadata, one level inside Cubed's context directory (a group of its own)
    written = {str(q) for q in tmp_path.glob("*/*/zarr.json")}
    assert written and all(any(w.startswith(loc) for loc in where) for w in written), changed(
        "an intermediate array was written outside the locations its LazyZarrArray names"
    )


# -- the memory formulas ------------------------------------------------------------------------


def test_the_blockwise_formula_is_cubeds_projection(tmp_path):
    s = _seam()
    spec = cubed.Spec(work_dir=str(tmp_path), allowed_mem="100MB", reserved_mem=1000)
    dag = _plan(spec)
    (add,) = _add(dag)
    chunk = 100 * 100 * 8
    # x + 1: a chunk of x, the scalar's one element, and a chunk out
    want = s.projected_mem(spec, [chunk, 8], 0, chunk)
    assert s.node_op(dag, add).projected_mem == want, changed(
        f"the projected memory of a blockwise op ({s.node_op(dag, add).projected_mem}, the "
        f"seam's projected_mem says {want})"
    )


@pytest.mark.parametrize("reserved", [0, 1000])
def test_the_rechunk_formula_is_where_cubed_refuses_a_rechunk(tmp_path, reserved):
    """Cubed refuses a rechunk whose target chunk, with its copies, exceeds allowed_mem:
    ``rechunk_task_mem`` is that bound, to the byte."""
    s = _seam()
    chunk = 1000 * 100 * 8  # the whole array, one target chunk
    fits = cubed.Spec(work_dir=str(tmp_path), allowed_mem=1, reserved_mem=reserved)
    need = s.rechunk_task_mem(fits, chunk)
    for allowed, ok in ((need, True), (need - 1, False)):
        spec = cubed.Spec(work_dir=str(tmp_path), allowed_mem=allowed, reserved_mem=reserved)
        x = cubed.ones((1000, 100), chunks=(100, 100), spec=spec)
        try:
            x.rechunk((1000, 100))
            refused = False
        except ValueError:
            refused = True
        assert refused != ok, changed(
            f"the memory its rechunk planner budgets: with allowed_mem {allowed} and "
            f"reserved_mem {reserved} a {chunk}-byte chunk was {'refused' if refused else 'let'}"
            f" (the seam's rechunk_task_mem says it needs {need})"
        )


def test_buffer_copies_are_one_each_on_local_storage(tmp_path):
    s = _seam()
    assert s.buffer_copies(cubed.Spec(work_dir=str(tmp_path))) == (1, 1), changed(
        "get_buffer_copies for a local work_dir"
    )


# -- the plugin's other modules stay off Cubed's internals and the core's private names -------

# Cubed's public API, for the plugin: the top-level names of ``cubed`` (its ``__all__``: the
# array API, Spec, compute, plan, Callback, from_zarr/to_zarr, map_blocks, ...) and
# ``cubed.array_api``/``cubed.linalg``/``cubed.random``. Private: every other submodule
# (cubed.core, cubed.primitive, cubed.runtime, cubed.storage, cubed.utils, cubed.spec, ...).
PUBLIC_SUBMODULES = {"cubed.array_api", "cubed.linalg", "cubed.random"}
# the fields of plan nodes and of the objects in them that only the seam may read
PRIVATE_KEYS = {"primitive_op", "func_name", "op_name", "stack_summaries", "pipeline"}
PRIVATE_ATTRIBUTES = {
    "pipeline",
    "back_key_function",
    "reads_map",
    "mappable",
    "num_input_blocks",
    "sym_counter",
    "_new",
    "_async_execute_dag",
    "target_array",
}


def _modules() -> list[Path]:
    return sorted(p for p in PLUGIN.glob("*.py") if p.name != SEAM.name)


def _offences(path: Path) -> list[str]:
    public = set(cubed.__all__) | {"__version__", "__doc__", "__name__"}
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        where = f"{path.name}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import):
            out += [
                f"{where} import {a.name}"
                for a in node.names
                if a.name.startswith("cubed.") and a.name not in PUBLIC_SUBMODULES
            ]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            mod = node.module or ""
            if mod.startswith("cubed.") and mod not in PUBLIC_SUBMODULES:
                out.append(f"{where} from {mod} import ...")
            elif mod == "cubed":
                out += [
                    f"{where} from cubed import {a.name}"
                    for a in node.names
                    if a.name not in public
                ]
            elif mod.startswith("pycograd_xp") and any(
                part.startswith("_") for part in mod.split(".")
            ):
                out.append(f"{where} from {mod} import ... (a private module of the core)")
            elif mod.startswith("pycograd_xp"):
                out += [
                    f"{where} from {mod} import {a.name} (a private name of the core)"
                    for a in node.names
                    if a.name.startswith("_")
                ]
        elif isinstance(node, ast.Attribute):
            if (
                isinstance(node.value, ast.Name)
                and node.value.id == "cubed"
                and node.attr not in public
                and f"cubed.{node.attr}" not in PUBLIC_SUBMODULES
            ):
                out.append(f"{where} cubed.{node.attr}")
            if node.attr in PRIVATE_ATTRIBUTES:
                out.append(f"{where} .{node.attr}")
        elif isinstance(node, ast.Constant) and node.value in PRIVATE_KEYS:
            out.append(f"{where} {node.value!r}")
    return out


def test_no_other_module_of_the_plugin_touches_cubeds_internals():
    found = [o for p in _modules() for o in _offences(p)]
    assert not found, (
        "only cubed_plugin/_cubed_seam.py may use Cubed's internals or the "
        "core's private names; move these behind a function of the seam (or "
        "make the core's name public):\n  " + "\n  ".join(found)
    )


def test_the_check_sees_what_it_forbids(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import cubed\nfrom cubed.core.plan import Plan\nfrom cubed import Array\n"
        "from pycograd_xp.memory._units import _fmt\nx = d['primitive_op']\n"
        "y = op.pipeline.config\nz = cubed.core\n"
    )
    found = _offences(bad)
    assert len(found) == 5, found


def test_an_intermediate_of_a_structured_dtype_is_stored_again_by_a_second_plan():
    """Cubed 0.27 stores mean's and var's intermediate ({n, total}) as a zarr group, and a
    second plan sharing it (float(v), then the gradient of the same std) created its field
    arrays again: zarr's ContainsArrayError. The seam opens them where they are stored
    (``_cubed_seam._reopening``, over ``zarr_python_v3.open_zarr_v3_array``, which Cubed's
    store imports at each call)."""
    from cubed.storage.stores import zarr_python_v3

    import pycograd_xp as pg

    xp = pg.namespace(cubed)
    a = np.arange(35.0).reshape(5, 7)
    x = xp.asarray(cubed.from_array(a, chunks=(2, 3)))
    v, g = pg.value_and_grad(lambda x: xp.std(x))(x)
    assert float(v) == pytest.approx(a.std())
    np.testing.assert_allclose(np.asarray(g), (a - a.mean()) / (a.size * a.std()), rtol=1e-12)
    m = xp.mean(x)
    assert [float(m), float(m + 1), float(xp.var(x) + 1)] == [17.0, 18.0, a.var() + 1]
    assert getattr(zarr_python_v3.open_zarr_v3_array, "reopens", False), changed(
        "zarr_python_v3.open_zarr_v3_array"
    )
