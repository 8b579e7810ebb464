"""One step of :func:`~cubed_plugin._fit.fit`: planned (once per batch shape in one-pass mode on
stored data, :func:`_planner`; else a Cubed graph, :func:`_step`), refused with the way out
before running when a task does not fit (:func:`_advice`), computed, its intermediate storage
deleted (:func:`_clean_work`), and its measured task memory checked against the projections
(:func:`_measured_within`, which absorbs a drift of the workers' own memory by re-planning).
"""

from __future__ import annotations

import collections
import math
import os
import threading
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import pycograd_xp as pg
from pycograd_xp import random
from pycograd_xp.memory import MemoryLimitError, format_byte_pair, format_bytes

from ._casting import casts, compute_dtype, stored_spec
from ._chunk_plan import ChunkPlan, how, plan_chunk
from ._compute import plan as plan_of
from ._compute import refuse
from ._executors import executor_of, returns_task_results, worker_baseline
from ._one_pass import PlannedStep, stored_arrays
from .memory import TaskMemoryError, TaskMemoryWarning, part_of
from .steps import RowLoss, finish_sums, graph_step, one_pass_step


def _cubed_data(data: Sequence[Any], what: str = "data") -> None:
    """Refuse data that is not Cubed arrays (chunked, with a Spec), saying how to make them."""
    import cubed

    if not data:
        raise ValueError(f"fit: no {what}; give the data arrays, e.g. (X, y)")
    for i, x in enumerate(data):
        if not isinstance(x, cubed.Array):
            shape = getattr(x, "shape", None)
            rows = f"({shape[0]} rows)" if shape else ""
            raise TypeError(
                f"fit: {what} argument {i} is a {type(x).__module__}.{type(x).__qualname__}"
                f"{' ' + rows if rows else ''}, not a Cubed array: fit reads its data chunk by "
                "chunk; give cubed.from_zarr(path, spec=spec) for stored data, or "
                "cubed.from_array(x, chunks=(rows_per_chunk, ...), spec=spec) for an array in "
                "memory"
            )


def _rows(data: Sequence[Any]) -> int:
    n = int(data[0].shape[0])
    for i, x in enumerate(data):
        if int(x.shape[0]) != n:
            raise ValueError(f"fit: data argument {i} has {x.shape[0]} rows, argument 0 has {n}")
    return n


def _batches(
    data: Sequence[Any], batch_rows: int | None, key: random.Key, epoch: int
) -> list[list[int] | None]:
    """The epoch's batches, each the increasing numbers of the whole row chunks it takes, drawn
    by the key: the chunks shuffled, then taken ``batch_rows`` rows at a time (those left over
    wait for another epoch). ``[None]`` (one batch of all the data) when ``batch_rows`` is
    None: full batch."""
    if batch_rows is None:
        return [None]
    chunk = data[0].chunks[0]
    size = chunk[0]
    if batch_rows <= 0 or batch_rows % size or batch_rows // size > len(chunk):
        raise ValueError(
            f"fit: batch_rows={batch_rows} must be a multiple of the data's row "
            f"chunks ({size} rows) of at most {len(chunk)} chunks: a batch is "
            "made of whole chunks"
        )
    per = batch_rows // size
    order = np.asarray(pg.unwrap(random.permutation(random.fold_in(key, epoch), len(chunk))))
    return [
        sorted(int(i) for i in order[b * per : (b + 1) * per]) for b in range(len(chunk) // per)
    ]


def _host_params(
    params: Any, data: Sequence[Any], log: Callable[[str], None] | None, loss: Any = None
) -> Any:
    """``params`` as NumPy arrays (copies) of the dtype each was given in; Python numbers
    become float64. Refuses a parameter that is not real floating point, and logs the dtype
    each task computes in when parameters and data differ (NumPy's promotion: float64
    parameters make a float64 copy of a float32 chunk in matmul, projected with the task),
    and which data arguments each task casts to it after reading (float16 data, and those
    ``loss`` declares: ``cubed_plugin._casting``)."""
    leaves, td = pg.tree_flatten(params)
    host = []
    for i, a in enumerate(leaves):
        if isinstance(a, (int, float)) and not isinstance(a, bool):
            host.append(np.array(a, dtype=np.float64))
            continue
        h = np.array(pg.unwrap(a))
        if h.dtype.kind != "f":
            raise TypeError(
                f"fit: parameter {i} (shape {h.shape}) has dtype {h.dtype}; "
                "parameters must be real floating point: give them as float32 "
                "or float64 arrays, e.g. np.zeros(n, dtype=np.float32)"
            )
        if h.dtype.name not in ("float32", "float64"):
            raise TypeError(
                f"fit: parameter {i} (shape {h.shape}) has dtype {h.dtype}; the tasks compute "
                "in the parameters' dtype, float32 or float64 (the standard's floating "
                "dtypes): give them as float32 (data stored as float16 is cast to it in each "
                "task after the read)"
            )
        host.append(h)
    dtypes = sorted({str(h.dtype) for h in host})
    data_dtypes = sorted({str(np.dtype(x.dtype)) for x in data})
    targets = casts(loss, host, [x.dtype for x in data])
    cast = [f"data argument {i} ({np.dtype(x.dtype)})" for i, x in enumerate(data) if targets[i]]
    if log and cast:
        log(
            f"fit: parameters {'/'.join(dtypes)}: {', '.join(cast)} cast to "
            f"{compute_dtype(host)} in each task, one chunk at a time after its read (the "
            "copy is in the projected task memory)"
        )
    elif log and len({*dtypes, *data_dtypes}) > 1:
        common = np.result_type(*dtypes, *data_dtypes)
        log(
            f"fit: parameters {'/'.join(dtypes)}, data {'/'.join(data_dtypes)}: each task "
            f"computes in {common} (NumPy's promotion; its copies are in the projected task "
            f"memory); the parameters stay {'/'.join(dtypes)}"
        )
    return pg.tree_unflatten(td, host)


def _take_chunks(data: Sequence[Any], picks: list[int] | None) -> tuple[Any, ...]:
    """The batch of row chunks ``picks`` of every data argument (all of it for None), each
    task of a step reading one chunk as on the whole data (no ``concat``: it declared one
    chunk of every piece per task, projections in proportion to the batch)."""
    if picks is None:
        return tuple(data)
    from ._cubed_seam import op_counter
    from ._labels import label_new
    from ._row_chunks import take_row_chunks

    since = op_counter()
    batch = tuple(take_row_chunks(x, picks) for x in data)
    label_new(since, batch, lambda func: f"{func} of fit's mini-batch of row chunks")
    return batch


# the arguments of cubed.compute that make the plan (the rest go to the executor)
_PLANNING = ("optimize_function", "optimize_graph", "compile_function", "resume")

# the planned steps made, most recently used last: a later fit on the same data and loss (an
# outer loop, L-BFGS after SGD, a benchmark's rounds) runs the plans an earlier one made
_PLANNED: collections.OrderedDict[tuple, PlannedStep] = collections.OrderedDict()

_PLANNED_KEPT = 8

_PLANNED_LOCK = threading.Lock()


def _chunk_plan(
    loss: Callable[..., Any],
    host_p: Any,
    data: tuple,
    spec: Any,
    log: Callable[[str], None] | None,
) -> ChunkPlan | None:
    """How a one-pass task computes a row chunk too large for ``allowed_mem`` whole: under a
    memory schedule or in row slices, whichever is projected faster
    (:func:`cubed_plugin._chunk_plan.plan_chunk`; ``log`` says which and why); None when whole
    chunks fit, or when neither does (the step is then refused, with advice)."""
    try:
        chunk = plan_chunk(loss, host_p, *data, backend=spec)
    except MemoryLimitError:
        return None
    if chunk.how == "whole":
        return None
    if log:
        log(f"fit: {chunk.describe()}")
    return chunk


def _planner(
    loss: Callable[..., Any],
    data: tuple,
    executor: Any,
    one_pass: bool,
    chunks_per_task: int = 1,
    chunk: ChunkPlan | None = None,
) -> Callable[..., PlannedStep] | None:
    """In one-pass mode on stored data with an executor that sends task results back: the
    function giving the :class:`~cubed_plugin._one_pass.PlannedStep` of a batch, made once per
    batch shape (the data, the number of chunks, the parameters' shapes and dtypes) and kept
    for later steps and later calls of ``fit``, its projection checked against the budget
    before its first run (``where`` and ``advice`` given: ``refuse``'s), each chunk computed as
    ``chunk`` says (whole for None); else None (each step is a Cubed graph, planned and
    checked)."""
    if not (one_pass and returns_task_results(executor) and stored_arrays(data) is not None):
        return None
    assert isinstance(loss, RowLoss)
    slice_rows, recompute = how(chunk)

    def planned(
        host_p: Any,
        picks: list[int] | None,
        where: str | None = None,
        advice: Callable[[], str] | None = None,
    ) -> PlannedStep:
        leaves, _ = pg.tree_flatten(host_p)
        key = (
            loss,
            tuple(x.name for x in data),
            None if picks is None else len(picks),
            tuple((np.shape(a), np.asarray(a).dtype.str) for a in leaves),
            chunks_per_task,
            int(data[0].spec.reserved_mem or 0),  # raised after a drift: planned again
            slice_rows,
            recompute,
        )
        with _PLANNED_LOCK:  # fits running in threads share the plans
            if key not in _PLANNED:
                _PLANNED[key] = PlannedStep(
                    loss, host_p, data, picks, chunks_per_task, slice_rows, recompute
                )
                while len(_PLANNED) > _PLANNED_KEPT:
                    _PLANNED.popitem(last=False)
            _PLANNED.move_to_end(key)
            step = _PLANNED[key]
        if where is not None and not step.checked:
            refuse(step.reference, where, advice)
            step.checked = True
        return step

    return planned


def step_plan(
    loss: Callable[..., Any],
    params: Any,
    data: tuple,
    picks: list[int] | None,
    spec: Any,
    one_pass: bool,
    executor: Any,
    chunks_per_task: int = 1,
) -> Any:
    """The plan a step of ``fit`` runs on the batch ``picks`` (for showing it: its ops,
    their task memory and tasks; in one-pass mode on stored data, the plan ``fit`` will run
    with ``chunks_per_task``)."""
    data = tuple(pg.unwrap(x) for x in data)
    host = _host_params(params, data, None, loss)
    chunk = _chunk_plan(loss, host, data, spec, None) if one_pass else None
    ex = executor_of(executor, spec)
    planned = _planner(loss, data, ex, one_pass, chunks_per_task, chunk)
    if planned is not None:
        return planned(host, picks).plan
    return plan_of(*_step(loss, host, data, picks, spec, one_pass, chunk)[0])


def _step(
    loss: Callable[..., Any],
    host_p: Any,
    data: tuple,
    picks: list[int] | None,
    spec: Any,
    one_pass: bool,
    chunk: ChunkPlan | None = None,
) -> tuple[list, Callable[[Any], Any], int]:
    """One step of ``fit`` on the batch of row chunks ``picks`` of ``data``: the lazy arrays
    it computes, the function that turns their computed values into (loss, gradients), and
    the batch's rows (in one-pass mode each chunk computed as ``chunk`` says)."""
    batch = _take_chunks(data, picks)
    rows = _rows(batch)
    if one_pass:
        assert isinstance(loss, RowLoss)  # (fit refuses one-pass mode for other losses)
        slice_rows, recompute = how(chunk)
        total_sums, td, shapes = one_pass_step(
            loss, host_p, batch, chunk_numbers=picks, slice_rows=slice_rows, recompute=recompute
        )
        return (
            [total_sums],
            lambda sums: finish_sums(np.asarray(sums), td, shapes, rows, loss, host_p),
            rows,
        )
    v, g = graph_step(loss, host_p, batch, spec)
    return [v, g], lambda vg: (float(vg[0]), vg[1]), rows


def _shape(x: Any, n: int) -> tuple[int, ...]:
    return (n, *(int(s) for s in x.shape[1:]))


def _advice(
    loss: Callable[..., Any],
    host_p: Any,
    data: tuple,
    one_pass: bool,
    batch_rows: int | None,
    spec: Any,
) -> str:
    """The way out of a refused step. In one-pass mode, first why computing each stored chunk in
    row slices or under a memory schedule (what ``fit`` does before refusing, ``plan_chunk``)
    cannot fit; then the row chunk for which every task fits (:func:`_rechunk_advice`)."""
    slices = ""
    if one_pass:
        try:
            chunk = plan_chunk(loss, host_p, *data, backend=spec)
        except MemoryLimitError as e:
            slices = (
                "computing each stored chunk in row slices in its task cannot fit, nor "
                f"recomputing its step's outputs in the backward pass: {e}. "
            )
        else:
            if chunk.how != "whole":
                slices = (
                    f"each stored chunk computed {chunk.short()} fits (fit computes them so; "
                    "the op refused here is another). "
                )
    return slices + _rechunk_advice(loss, host_p, data, one_pass, batch_rows, spec)


def _rechunk_advice(
    loss: Callable[..., Any],
    host_p: Any,
    data: tuple,
    one_pass: bool,
    batch_rows: int | None,
    spec: Any,
) -> str:
    """The way out of a refused step: the row chunk for which every task of ``fit``'s step
    fits (``plan_rows`` in fit's mode), checked with the data rechunked lazily to it; when that
    rechunk cannot fit, how to rewrite the data with that chunk."""
    from ._baseline import headroom
    from ._cubed_seam import op_nodes, plan_dag
    from .memory import plan_rows

    mode = "one-pass" if one_pass else "graph"
    rows, have = int(data[0].shape[0]), int(data[0].chunks[0][0])
    specs = [stored_spec(tuple(x.shape), x.dtype) for x in data]
    batch = f", batch_rows={batch_rows}" if batch_rows is not None else ""
    call = (
        f"cubed_plugin.memory.plan_rows(loss, params, *data_specs, rows={rows}, "
        f"data={tuple(range(1, len(data) + 1))}, mode={mode!r}{batch}, backend=spec)"
    )
    try:
        n, projection = plan_rows(
            loss,
            host_p,
            *specs,
            rows=rows,
            data=tuple(range(1, len(data) + 1)),
            mode=mode,
            batch_rows=batch_rows,
            backend=spec,
        )
    except MemoryLimitError as e:
        return f"no chunk size fits: {e}"
    head = (
        f"chunks of at most {n:,} rows fit in {mode} mode (largest task "
        f"{format_bytes(projection.max_task_bytes)}: {call}); the data has chunks of "
        f"{have:,} rows"
    )
    if n >= have:
        return (
            f"{head}: the op refused here does not shrink with the row chunk (data "
            "computed lazily rather than stored is copied per batch: write it with "
            "cubed.to_zarr first); raise allowed_mem"
        )
    code = "; ".join(f"data[{i}] = data[{i}].rechunk({_shape(x, n)})" for i, x in enumerate(data))
    try:
        rechunked = tuple(x.rechunk(_shape(x, n)) for x in data)
    except ValueError as e:  # Cubed plans no rechunk whose source chunk exceeds the budget
        why = f"Cubed cannot plan it in this budget ({e})"
    else:
        picks = _batches(rechunked, batch_rows, random.key(0), 0)[0]
        p = plan_of(*_step(loss, host_p, rechunked, picks, spec, one_pass)[0])
        dag = plan_dag(p)
        over = [
            (name, op)
            for name, op in op_nodes(dag)
            if op.projected_mem > op.allowed_mem - headroom(op.reserved_mem)
        ]
        if not over:
            return (
                f"{head}. Rechunk it lazily ({code}): checked, every task of the step "
                f"then fits (largest {format_bytes(p.max_projected_mem)}, with "
                f"{format_bytes(headroom(spec.reserved_mem))} to spare for the workers' "
                "baseline to vary); every step then "
                "rechunks the chunks it reads again, so to do it once write the rechunked "
                "data to Zarr (cubed.to_zarr(x.rechunk(...), path); then "
                "cubed.from_zarr(path))"
            )
        name, op = max(over, key=lambda o: o[1].projected_mem)
        room = op.allowed_mem - headroom(op.reserved_mem)
        need, limit = format_byte_pair(op.projected_mem, room)
        why = (
            f"{name} ({part_of(dag, name)}) needs {need} per task, over the {limit} of "
            f"allowed_mem {format_bytes(op.allowed_mem)} a task is planned to (the rest left "
            "for the workers' baseline to vary)"
        )
    shapes = ", ".join(f"data argument {i} with chunks {_shape(x, n)}" for i, x in enumerate(data))
    return (
        f"{head}. A lazy rechunk ({code}) cannot fit: {why}; a rechunk holds whole stored "
        f"chunks of {have:,} rows. Rewrite the data once, outside this budget: {shapes}; "
        "e.g. cubed.to_zarr(x.rechunk(chunks), path) under a Spec with a larger "
        "allowed_mem, or zarr.open_array(path, mode='w', shape=x.shape, dtype=x.dtype, "
        "chunks=chunks) filled one stored chunk at a time; then train on "
        "cubed.from_zarr(path)"
    )


def _measured_within(
    recorder: Any,
    step: int,
    memory_overrun: str,
    executor: Any,
    spec: Any,
    data: Sequence[Any] = (),
    log: Callable[[str], None] | None = None,
    compute_kwargs: dict | None = None,
) -> None:
    """Raise :class:`TaskMemoryError` (or warn) if a task of the step just computed measured
    more than its projection or ``allowed_mem``.

    A drift of the workers' own memory is not an error when re-planning absorbs it: when every
    op over its projection is over only because its worker held more than ``reserved_mem`` when
    the task started (what the tasks added was within their projections) and no task went over
    ``allowed_mem``, the step stands, ``reserved_mem`` of ``spec`` (and of the data's specs) is
    raised to the highest start seen (1 % more: ``cubed_plugin._baseline.DRIFT_PAD``), this
    process's baseline for the executor too (``record_drift``), and the next steps are planned and
    checked with it (refused before running, with advice, when they no longer fit)."""
    from ._baseline import DRIFT_PAD, record_drift
    from ._cubed_seam import set_reserved_mem

    ops = recorder.steps[-1] if recorder.steps else []
    over = recorder.overruns(ops) if ops else []
    if not over:
        return
    try:
        base = worker_baseline(
            executor, work_dir=spec.work_dir, compute_kwargs=compute_kwargs, reads=data
        )
    except RuntimeError:
        base = None
    reserved = over[0].reserved
    held = recorder.highest_start(ops)
    if base is not None and reserved < base:
        have, need = format_byte_pair(reserved, base)
        why = (
            f"reserved_mem {have} is below the {need} a worker of this executor holds "
            "before any data (cubed_plugin.worker_baseline): make the spec with "
            "cubed_plugin.make_spec (it measures reserved_mem) or raise reserved_mem"
        )
    elif held is not None and all(o.drift for o in over):
        shown, limit = format_byte_pair(held, reserved)
        if all(o.measured <= o.allowed for o in over):
            new = max(reserved, math.ceil(held * DRIFT_PAD))
            kept = record_drift(executor, compute_kwargs, held, spec.work_dir, data)
            for s in {id(s): s for s in (spec, *(x.spec for x in data))}.values():
                set_reserved_mem(s, new)
            if log:
                log(
                    f"fit: step {step}: a worker held {shown} before a task, above "
                    f"reserved_mem {limit}; {len(over)} op{'s' * (len(over) > 1)} measured "
                    "over their projections by that much, their data within them and every "
                    f"task within allowed_mem: reserved_mem is now {format_bytes(new)} "
                    "(the highest start, 1% more; this process's baseline for the executor: "
                    f"{format_bytes(kept)}) and the next steps are planned with it"
                )
            return
        why = (
            f"the worker held {shown} before the task; reserved_mem is {limit}: the worker's "
            "own memory (imports, caches, thread pools) grew past what reserved_mem covers, "
            "and with it the task went over allowed_mem (what the task added was within its "
            "projection): raise allowed_mem, or use smaller chunks"
        )
        record_drift(executor, compute_kwargs, held, spec.work_dir, data)
    else:
        why = (
            "the projection is a promise this task broke: a bug of cubed_plugin's "
            "projections; please report it with this message, and raise allowed_mem and "
            "reserved_mem meanwhile"
        )
    from ._cubed_seam import is_processes_executor
    from ._measuring import MeasuringProcesses, is_dask_executor

    if is_dask_executor(executor):
        why += (
            " (on Dask, a worker's own memory grows as it runs tasks, most of all with Dask's "
            "statistical profiler on: start the workers with "
            "DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED=False, as executor='dask' does for the "
            "LocalCluster it starts, or give reserved_mem room above the measured baseline)"
        )
    elif is_processes_executor(executor) and not isinstance(executor, MeasuringProcesses):
        why += (
            " (Cubed's processes executor reports for each task the most its worker has "
            "held, the peak of the process that started it included: "
            "cubed_plugin.train.measuring_processes() measures each task on its own)"
        )
    lines = "; ".join(str(o) for o in over[:3])
    more = f" (and {len(over) - 3} more ops)" if len(over) > 3 else ""
    message = f"fit: step {step} measured task memory over budget: {lines}{more}. {why}"
    if memory_overrun == "warn":
        warnings.warn(message, TaskMemoryWarning, stacklevel=3)
    else:
        raise TaskMemoryError(message, over, recorder)


def _work_snapshot(spec: Any) -> set[str]:
    """The parameter stores (``steps.ParameterStore``) under the Spec's work_dir, a local path
    or a URL."""
    from ._storage import filesystem, is_url

    root = spec.work_dir
    if root is None:
        return set()
    if not is_url(root):
        return (
            {str(q) for q in Path(root).glob("pycograd-params-*.zarr")}
            if os.path.isdir(root)
            else set()
        )
    fs, p = filesystem(root, spec.storage_options)
    return set(fs.glob(f"{p.rstrip('/')}/pycograd-params-*.zarr"))


def _clean_work(spec: Any, before: set[str], plan: Any = None) -> None:
    """Delete the intermediate storage a step wrote (Cubed deletes it only at process exit: a
    long run would fill the disk): the parameter stores it made and the intermediate arrays of
    its ``plan``, in a local work_dir or on an object store."""
    from ._cubed_seam import intermediate_locations, plan_dag
    from ._storage import filesystem, is_url, remove

    made = sorted(_work_snapshot(spec) - before)
    if spec.work_dir is not None and is_url(spec.work_dir):
        fs, _ = filesystem(spec.work_dir, spec.storage_options)
        made = [fs.unstrip_protocol(q) for q in made]
    if plan is not None:
        made += intermediate_locations(plan_dag(plan))
    for q in made:
        remove(q, spec.storage_options if is_url(q) else None)
