"""Bounded-memory training on chunked data with Cubed: :func:`fit`.

:func:`fit` runs gradient steps over data chunked in Zarr (far larger than memory, if need be)
with parameters small and in memory: each step builds the loss and the gradients (one-pass or
graph mode, see :mod:`cubed_plugin.steps`), checks every task's projected memory against
``allowed_mem`` before running, computes them in one go, updates the parameters with a
``pycograd_xp.optim`` transformation on NumPy, deletes the step's intermediate storage, and
writes atomic checkpoints from which a killed run resumes with nothing lost. The executors it
runs on are in :mod:`cubed_plugin._executors`, its callbacks in :mod:`cubed_plugin._callbacks`,
its command line in :mod:`cubed_plugin.__main__`.
"""

from __future__ import annotations

import collections
import functools
import math
import os
import shutil
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np

import pycograd_xp as pg
from pycograd_xp import checkpoint, optim, random
from pycograd_xp.memory import MemoryLimitError, format_byte_pair, format_bytes

from ._callbacks import MemoryRecorder, Progress
from ._compute import SOUND, compute, refuse, warn_reserved
from ._compute import plan as plan_of
from ._executors import (
    NoRetryWarning,
    executor_of,
    measures_each_task,
    no_retry,
    returns_task_results,
    worker_baseline,
)
from ._one_pass import PlannedStep, stored_arrays
from .memory import TaskMemoryError, TaskMemoryWarning, part_of
from .namespace import label_ops
from .steps import RowLoss, graph_step, one_pass_step, unflatten_sums

__all__ = ["FitResult", "fit"]


@dataclass
class FitResult:
    """What :func:`fit` returns: the trained state, the history and the measured memory.

    Parameters
    ----------
    params : pytree of numpy.ndarray
        The trained parameters, in the structure and dtypes they were given in.
    opt_state : pytree
        The optimizer's state (an :class:`~pycograd_xp.optim.LBFGSState` for L-BFGS).
    step : int
        Steps done (a resumed run counts those before it).
    key : pycograd_xp.random.Key
        The key batches were drawn with.
    history : dict of str to list of float
        Per step: ``"loss"`` (the batch's loss at the step's start; for L-BFGS, the loss the
        step ends at), ``"seconds"``; for L-BFGS also ``"passes"`` over the data so far and
        ``"initial_loss"`` (one value: the loss at the starting parameters). A resumed run
        returns the whole run's history (kept in the checkpoint).
    memory : MemoryRecorder, optional
        The run's measured against projected task memory per op
        (:class:`~cubed_plugin.train.MemoryRecorder`): ``result.memory.table()`` prints it,
        ``result.memory.overruns()`` lists the ops over.
    """

    params: Any  # NumPy arrays
    opt_state: Any
    step: int
    key: random.Key
    history: dict[str, list[float]] = field(default_factory=dict)
    memory: Any = None  # the MemoryRecorder of the run

    def __repr__(self) -> str:
        # a summary: the parameters' shapes and dtypes, the loss's first and last values (the
        # dataclass's own repr printed every parameter value and every step of the history)
        from pycograd_xp.tree import tree_map

        def leaf(x: Any) -> str:
            shape = getattr(x, "shape", None)
            return f"{getattr(x, 'dtype', type(x).__name__)}{list(shape)}" if shape else repr(x)

        loss = self.history.get("loss") or []
        losses = f"{loss[0]:.6g} -> {loss[-1]:.6g}" if loss else "none"
        return (
            f"FitResult(step={self.step}, loss {losses} over {len(loss)} steps, "
            f"params={tree_map(leaf, self.params)!r}, memory={self.memory!r})"
        )


def _cubed_data(data: Sequence[Any]) -> None:
    """Refuse data that is not Cubed arrays (chunked, with a Spec), saying how to make them."""
    import cubed

    if not data:
        raise ValueError("fit: no data; give the data arrays, e.g. (X, y)")
    for i, x in enumerate(data):
        if not isinstance(x, cubed.Array):
            shape = getattr(x, "shape", None)
            rows = f"({shape[0]} rows)" if shape else ""
            raise TypeError(
                f"fit: data argument {i} is a {type(x).__module__}.{type(x).__qualname__}"
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


def _take_chunks(data: Sequence[Any], picks: list[int] | None) -> tuple[Any, ...]:
    """The batch of row chunks ``picks`` of every data argument (all of it for None), each
    task of a step reading one chunk as on the whole data (no ``concat``: it declared one
    chunk of every piece per task, projections in proportion to the batch)."""
    if picks is None:
        return tuple(data)
    from ._row_chunks import take_row_chunks

    return tuple(take_row_chunks(x, picks) for x in data)


def _host_params(params: Any, data: Sequence[Any], log: Callable[[str], None] | None) -> Any:
    """``params`` as NumPy arrays (copies) of the dtype each was given in; Python numbers
    become float64. Refuses a parameter that is not real floating point, and logs the dtype
    each task computes in when parameters and data differ (NumPy's promotion: float64
    parameters make a float64 copy of a float32 chunk in matmul, projected with the task)."""
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
        host.append(h)
    dtypes = sorted({str(h.dtype) for h in host})
    data_dtypes = sorted({str(np.dtype(x.dtype)) for x in data})
    if log and len({*dtypes, *data_dtypes}) > 1:
        common = np.result_type(*dtypes, *data_dtypes)
        log(
            f"fit: parameters {'/'.join(dtypes)}, data {'/'.join(data_dtypes)}: each task "
            f"computes in {common} (NumPy's promotion; its copies are in the projected task "
            f"memory); the parameters stay {'/'.join(dtypes)}"
        )
    return pg.tree_unflatten(td, host)


def _ckpt(directory: str | None) -> Path | None:
    if directory is None:
        return None
    Path(directory).mkdir(parents=True, exist_ok=True)
    return Path(directory) / "checkpoint.npz"


def fit(
    loss: Callable[..., Any],
    params: Any,
    data: Sequence[Any],
    optimizer: optim.GradientTransformation | optim.LBFGS,
    *,
    steps: int | None = None,
    epochs: int | None = None,
    batch_rows: int | None = None,
    spec: Any = None,
    executor: Any = None,
    callbacks: Sequence[Any] = (),
    checkpoint_dir: str | None = None,
    checkpoint_every: int = 1,
    mode: str = "auto",
    key: random.Key | None = None,
    progress: bool = True,
    log: Callable[[str], None] | None = print,
    compute_kwargs: dict | None = None,
    memory_overrun: str = "raise",
    chunks_per_task: int = 1,
) -> FitResult:
    """Train ``params`` on chunked ``data`` to minimize ``loss(params, *data)``, every task's
    memory checked before it runs.

    Every step's plan is checked against ``allowed_mem`` first. The parameters keep the
    floating dtype they are given in (Python numbers: float64), as in JAX and PyTorch: float32
    parameters on float32 data train in float32; when parameters and data differ in dtype,
    NumPy promotes in each task (``log`` says so) and the copies it makes are in each task's
    projected memory. ``allowed_mem`` bounds each task, not a process: on "threads" two tasks
    and the driver share one process.

    Memory: every step is planned with ``cubed_plugin.steps.graph_fusion`` (in both modes) and
    refused before it runs when a task's projection exceeds ``allowed_mem``. In one-pass mode a
    stored row chunk too large for a task's budget is first computed in row slices inside its
    task (one slice's activations at a time, the sums added in the task;
    ``cubed_plugin.memory.plan_slice_rows``; ``log`` says so); the refusal names the op and the
    part of the loss it computes, says why slices cannot help, and proposes the chunk size for
    which every task fits (``cubed_plugin.memory.plan_rows`` for this mode, leaving 5 % of
    ``reserved_mem`` free for the baseline's variation), checked with a lazy ``rechunk`` of the
    data or, when a rechunk cannot fit, how to rewrite the data. A warning
    (``ReservedMemWarning``) says when the Spec's ``reserved_mem`` is below what a worker of
    ``executor`` measurably holds (``worker_baseline``; ``cubed.Spec`` defaults to 0). On
    executors that measure each task on its own ("processes", which is
    ``measuring_processes()``, and "dask"), a task whose
    measured peak exceeds its projection or ``allowed_mem`` raises ``TaskMemoryError`` after
    its step (naming the op, its part of the loss, both figures and the limit; parameters are
    not updated with that step), or warns (``TaskMemoryWarning``) with
    ``memory_overrun="warn"``. A task over its projection only because its worker held more
    than ``reserved_mem`` when it started (the worker's own memory grew) is not an error while
    re-planning absorbs it: when that is every overrun of the step and no task went over
    ``allowed_mem``, the step stands, ``reserved_mem`` is raised to the highest start seen (in
    the Spec given, and this process's ``worker_baseline`` for the executor), ``log`` says so,
    and the next steps are planned with it (refused before running when they no longer fit); past
    ``allowed_mem``, the error says what the worker held before the task.

    ``optimizer`` is a gradient transformation (one pass over the batch per step), or
    ``optim.lbfgs()`` (quasi-Newton, full batch only): fit gives it the loss and gradient over
    all the data as its function, each evaluation one computation, so one pass over the data
    in one-pass mode. It costs one pass at the start, then each step (an L-BFGS iteration) the
    evaluations of its line search (usually one; ``result.opt_state.last.evals``). ``steps``
    counts iterations; ``epochs`` counts passes over the data (the budget: the last line search
    is cut to fit it, keeping its lowest point with sufficient decrease); the run also ends when
    the solver's tolerances are met (``result.opt_state.reason``). ``history["passes"]`` holds
    the passes done by the end of each step; the log and the progress bars count them.
    Checkpoints hold the solver's state (the loss and gradient at the parameters included:
    a resumed run computes nothing again).

    Parameters
    ----------
    loss : callable
        ``loss(params, *data)``, a real scalar; a :func:`~cubed_plugin.row_loss` for the
        one-pass mode.
    params : pytree
        NumPy arrays, or arrays of an eager namespace (real floating point).
    data : sequence of cubed arrays
        E.g. ``cubed.from_zarr``, chunked along their rows and whole along the other axes
        (arrays of ``namespace(cubed)`` too).
    optimizer : GradientTransformation or LBFGS
        ``optim.adam(...)``, ``optim.sgd(...)``, ... or ``optim.lbfgs()`` (see above).
    steps : int, optional
        Steps to run (give exactly one of ``steps`` and ``epochs``).
    epochs : int, optional
        Passes over all chunks.
    batch_rows : int, optional
        Rows per step: a multiple of the row chunk, drawn by ``key`` per epoch (None: full
        batch).
    spec : cubed.Spec, optional
        The spec (None: the data's).
    executor : optional
        A Cubed executor (:func:`~cubed_plugin.make_executor` makes one with options: a
        scheduler address, a Ray address, Beam's mode, retries) or its name
        ("single-threaded", "threads", "processes", "dask", "ray", "beam", "lithops",
        "spark"; each engine is an extra).
    callbacks : sequence, default ()
        More Cubed callbacks for every compute.
    checkpoint_dir : str, optional
        Save the state (parameters, optimizer state, step, key) there every
        ``checkpoint_every`` steps, atomically; a run that finds a checkpoint resumes from it.
    checkpoint_every : int, default 1
        Steps between checkpoints.
    mode : {"auto", "one-pass", "graph"}, default "auto"
        "one-pass" (the loss must be a :func:`~cubed_plugin.row_loss`), "graph", or "auto"
        (one-pass when the loss declares itself row-separable).
    key : pycograd_xp.random.Key, optional
        Draws the batches (None: ``random.key(0)``).
    progress : bool, default True
        Progress bars of each step's tasks.
    log : callable or None, default print
        Called with a line per step and the run's notes (None: silent).
    compute_kwargs : dict, optional
        Passed to ``cubed.compute``.
    memory_overrun : {"raise", "warn"}, default "raise"
        What a measured overrun does (see above).
    chunks_per_task : int, default 1
        In one-pass mode on data stored in Zarr, the row chunks each task reads and computes
        in turn (one chunk's arrays held at a time). More than 1 means fewer tasks (Dask
        schedules each in milliseconds) and, on "processes" and "dask", later chunks read into
        the heap the task's first chunk paged in, instead of paging it in again: on 1 GB
        (98 chunks of 10 MB, two workers), 8 chunks a task made an epoch 1.3-1.8 times faster,
        and on 10 GB 1.4-1.7 times (0.7-1.1 times one Zarr read pass of the data).
        A task may then measure a few megabytes above a one-chunk task when the allocator
        fits a later chunk's arrays less well (up to two of an MLP's 6.4 MB activations in a
        measured loop); each task is still measured against its projection.

    Returns
    -------
    FitResult
        The trained parameters (NumPy arrays), the optimizer state, the step, the key, the
        history and the measured memory (``result.memory.table()``).

    Raises
    ------
    MemoryLimitError
        Before a step runs, when a task's projection exceeds ``allowed_mem``.
    TaskMemoryError
        After a step, when a task measured more than its projection or ``allowed_mem``.
    ValueError
        For inconsistent arguments (both or neither of ``steps`` and ``epochs``, an unknown
        ``mode``, ``batch_rows`` not made of whole chunks, data of different rows, no data), or
        a ``row_loss`` that does not give one loss per row.
    TypeError
        For a one-pass mode without a ``row_loss``, a parameter not real floating point, or
        data that is not Cubed arrays.

    Examples
    --------
    >>> import tempfile
    >>> import numpy as np, cubed, cubed.array_api as cxp
    >>> from pycograd_xp import optim
    >>> from cubed_plugin import fit, row_loss
    >>> @row_loss
    ... def squared_error(p, X, y):
    ...     return (X @ p["w"] - y) ** 2
    >>> rng = np.random.default_rng(0)
    >>> Xn = rng.standard_normal((1000, 3))
    >>> spec = cubed.Spec(tempfile.mkdtemp(), allowed_mem="200MB", reserved_mem="100MB")
    >>> X = cxp.asarray(Xn, chunks=(250, 3), spec=spec)
    >>> y = cxp.asarray(Xn @ np.array([1.0, -2.0, 0.5]), chunks=(250,), spec=spec)
    >>> result = fit(squared_error, {"w": np.zeros(3)}, (X, y), optim.adam(0.1), steps=3,
    ...              progress=False, log=None)
    >>> result.step, len(result.history["loss"])
    (3, 3)
    >>> result.memory
    MemoryRecorder(3 computes, ...; .table() shows them)
    """
    if (steps is None) == (epochs is None):
        raise ValueError("fit: give exactly one of steps= or epochs=")
    if mode not in ("auto", "one-pass", "graph"):
        raise ValueError(f"fit: mode must be 'auto', 'one-pass' or 'graph', got {mode!r}")
    if memory_overrun not in ("raise", "warn"):
        raise ValueError(f"fit: memory_overrun must be 'raise' or 'warn', got {memory_overrun!r}")
    if not isinstance(chunks_per_task, int) or isinstance(chunks_per_task, bool):
        raise TypeError(f"fit: chunks_per_task must be an int, got {chunks_per_task!r}")
    if chunks_per_task < 1:
        raise ValueError(f"fit: chunks_per_task must be at least 1, got {chunks_per_task}")
    one_pass = mode == "one-pass" or (mode == "auto" and isinstance(loss, RowLoss))
    if one_pass and not isinstance(loss, RowLoss):
        raise TypeError(
            "fit(mode='one-pass'): the loss must be declared row-separable with "
            "cubed_plugin.row_loss (a per-row loss), or use mode='graph'"
        )
    data = tuple(pg.unwrap(x) for x in data)
    _cubed_data(data)
    spec = spec if spec is not None else data[0].spec
    _rows(data)
    key = key if key is not None else random.key(0)
    host = _host_params(params, data, log)
    xp = pg.namespace(np)
    p = pg.tree_map(xp.asarray, host)
    if isinstance(optimizer, optim.LBFGS) and batch_rows is not None:
        raise ValueError(
            "fit: optim.lbfgs takes the full batch (batch_rows=None): its line search compares "
            "losses of one function, and a mini-batch's loss changes from step to step; use a "
            "gradient transformation (optim.sgd, optim.adam) for mini-batches"
        )
    # L-BFGS: a state of the right structure, computed from nothing (its first pass comes below)
    state = (
        optimizer.init(p, value=0.0, grad=pg.tree_map(xp.zeros_like, p))
        if isinstance(optimizer, optim.LBFGS)
        else optimizer.init(p)
    )
    step = 0
    history: dict[str, list[float]] = {"loss": [], "seconds": []}
    if isinstance(optimizer, optim.LBFGS):
        history.update(passes=[], initial_loss=[])
    path = _ckpt(checkpoint_dir)
    if path is not None and path.exists():
        p, state, step, key, history = _resume(path, p, state, key, history)
        if log:
            log(f"resumed from {path} at step {step}")
    per_epoch = len(_batches(data, batch_rows, key, 0))  # (checks batch_rows)
    total = steps if steps is not None else cast(int, epochs) * max(per_epoch, 1)
    label_ops()  # the ops of each step say which part of the loss they compute
    ex = executor_of(executor, spec, compute_kwargs)
    recorder = MemoryRecorder(*measures_each_task(ex))
    why = no_retry(ex)
    if why is not None:
        warnings.warn(f"fit: {why}", NoRetryWarning, stacklevel=2)
    warn_reserved(spec, ex, "fit", compute_kwargs=compute_kwargs)
    kw = {"optimize_function": SOUND, **(compute_kwargs or {})}
    mode_name = "one-pass" if one_pass else "graph"
    slice_rows = _slices(loss, host, data, spec, log) if one_pass else None
    planned = _planner(loss, data, ex, one_pass, chunks_per_task, slice_rows)
    if planned is None and chunks_per_task != 1:
        raise ValueError(
            f"fit: chunks_per_task={chunks_per_task} takes one-pass mode on data stored in Zarr "
            "(cubed.from_zarr, unsharded) and an executor that sends task results back; this "
            f"run is {mode_name} mode"
            + ("" if not one_pass else " on data Cubed computes, or on Apache Beam")
            + ": leave chunks_per_task at 1"
        )
    run_kw = {k: v for k, v in kw.items() if k not in _PLANNING}

    def evaluate(host_p: Any, picks: list[int] | None, step: int, desc: str) -> tuple:
        """(loss, gradients, rows) at ``host_p`` on the batch ``picks``: one computation (one
        pass over the batch in one-pass mode), its plan checked against the budget first (in
        one-pass mode on stored data: once per batch shape, the plan then reused)."""
        where = f"fit: step {step} ({mode_name} mode) is refused before running"
        advice = functools.partial(_advice, loss, host_p, data, one_pass, batch_rows, spec)
        if planned is not None:
            planned_step = planned(host_p, picks, where, advice)
            value, grads, rows = planned_step.run(
                host_p,
                picks,
                ex,
                [*callbacks, recorder, Progress(desc, disable=not progress)],
                data[0].spec,
                **run_kw,
            )
            _measured_within(recorder, step, memory_overrun, ex, spec, data, log, compute_kwargs)
            return (
                value,
                pg.tree_map(lambda g, a: np.asarray(g, dtype=a.dtype), grads, host_p),
                rows,
            )
        work = _work_snapshot(spec)
        targets, finish, rows = _step(loss, host_p, data, picks, spec, one_pass, slice_rows)
        refuse(plan_of(*targets, optimize_function=kw["optimize_function"]), where, advice)
        value, grads = finish(
            compute(
                *targets,
                executor=ex,
                callbacks=[*callbacks, recorder, Progress(desc, disable=not progress)],
                **kw,
            )
        )
        _clean_work(spec, work)
        _measured_within(recorder, step, memory_overrun, ex, spec, data, log, compute_kwargs)
        # gradients in the parameters' dtypes (one-pass mode sums the chunks' in float64)
        return value, pg.tree_map(lambda g, a: np.asarray(g, dtype=a.dtype), grads, host_p), rows

    if isinstance(optimizer, optim.LBFGS):
        p, state, step = _fit_lbfgs(
            optimizer,
            p,
            state,
            step,
            steps,
            epochs,
            evaluate,
            history,
            path,
            key,
            log,
            checkpoint_every,
            resumed=path is not None and path.exists(),
        )
        out = pg.tree_map(lambda a: np.asarray(pg.unwrap(a)), p)
        return FitResult(out, state, step, key, history, recorder)
    while step < total:
        epoch, within = divmod(step, max(per_epoch, 1))
        picks = _batches(data, batch_rows, key, epoch)[within]
        t0 = time.perf_counter()
        host_p = pg.tree_map(lambda a: np.asarray(pg.unwrap(a)), p)
        value, grads, rows = evaluate(host_p, picks, step + 1, f"step {step + 1}")
        if not math.isfinite(value):
            raise FloatingPointError(
                f"fit: the loss is {value} at step {step + 1}; lower the "
                "learning rate or check the data"
            )
        updates, state = optimizer.update(pg.tree_map(xp.asarray, grads), state, p)
        p = optim.apply_updates(p, updates)
        p = pg.tree_map(lambda a: xp.asarray(np.array(pg.unwrap(a))), p)  # materialized
        step += 1
        history["loss"].append(value)
        history["seconds"].append(time.perf_counter() - t0)
        if log:
            log(
                f"step {step}/{total}  loss {value:.6f}  ({history['seconds'][-1]:.2f} s, "
                f"{rows} rows)"
            )
        if path is not None and (step % checkpoint_every == 0 or step == total):
            checkpoint.save(path, _saved(p, state, step, key, history))
    out = pg.tree_map(lambda a: np.asarray(pg.unwrap(a)), p)
    return FitResult(out, state, step, key, history, recorder)


def _saved(p: Any, state: Any, step: int, key: random.Key, history: dict) -> dict:
    """What a checkpoint of :func:`fit` holds: the training state and the history so far (a
    resumed run returns the whole run's history, as an uninterrupted one does)."""
    return {
        "params": p,
        "opt_state": state,
        "step": step,
        "key": np.asarray(key.data),
        "history": {k: np.asarray(v, dtype=np.float64) for k, v in history.items()},
    }


def _difference(e: Exception) -> str:
    """What ``checkpoint.load``'s refusal ``e`` says differs, without its advice to the caller
    of ``load`` (``fit``'s user passed no ``like`` tree)."""
    said = str(e).partition("): ")[2].removesuffix("; load it with a `like` tree of the same kind")
    return (
        said.replace("only the file has", "only the checkpoint has")
        .replace("only `like` has", "only this run has")
        .replace("in `like`", "in this run")
    )


def _resume(path: Path, p: Any, state: Any, key: random.Key, history: dict) -> tuple:
    """``(params, opt_state, step, key, history)`` from the checkpoint at ``path``, refused in
    one line naming the directory when it holds another run's state (another model, optimizer
    or dtype). A checkpoint written before histories were kept resumes with the history of the
    new steps only."""
    like = _saved(p, state, 0, key, history)
    way_out = "give another checkpoint_dir, or delete that checkpoint to start afresh"
    try:
        saved = checkpoint.load(path, like)
    except Exception as e:  # noqa: BLE001  (told apart below, re-raised in one line)
        if not str(e).startswith("checkpoint.load("):
            raise ValueError(
                f"fit: {str(path)!r} in checkpoint_dir is not a checkpoint fit can read "
                f"({type(e).__name__}: {e}); {way_out}"
            ) from e
        del like["history"]
        try:
            saved = checkpoint.load(path, like)  # a checkpoint without the history
        except ValueError:
            raise ValueError(
                f"fit: checkpoint_dir {str(path.parent)!r} holds the state of another run "
                f"(another model, optimizer or dtype: {_difference(e)}); "
                f"{way_out}"
            ) from None
        saved["history"] = history
    restored = {
        k: [int(v) if k == "passes" else float(v) for v in np.asarray(a)]
        for k, a in saved["history"].items()
    }
    return (
        saved["params"],
        saved["opt_state"],
        int(saved["step"]),
        random.Key(tuple(int(k) for k in np.asarray(saved["key"]))),
        restored,
    )


def _fit_lbfgs(
    solver: optim.LBFGS,
    p: Any,
    state: Any,
    step: int,
    steps: int | None,
    passes: int | None,
    evaluate: Callable[..., tuple],
    history: dict[str, list[float]],
    path: Path | None,
    key: random.Key,
    log: Callable[[str], None] | None,
    checkpoint_every: int,
    resumed: bool,
) -> tuple[Any, Any, int]:
    """:func:`fit`'s loop with ``optim.lbfgs``: every evaluation of the solver's function is
    one computation of the loss and gradient over all the data (one pass in one-pass mode)."""
    xp = pg.namespace(np)

    def value_and_grad(x: Any) -> tuple[Any, Any]:
        host_p = pg.tree_map(lambda a: np.asarray(pg.unwrap(a)), x)
        n = state.evals + count[0] + 1
        try:
            value, grads, _ = evaluate(host_p, None, step + 1, f"step {step + 1}, pass {n}")
        except FloatingPointError:  # one-pass mode: a chunk's loss overflowed at a trial point
            if not count[0] and not state.evals:
                raise
            value, grads = math.inf, pg.tree_map(np.zeros_like, host_p)
        count[0] += 1
        return xp.asarray(value), pg.tree_map(xp.asarray, grads)

    count = [0]
    if not resumed:
        t0 = time.perf_counter()
        state = solver.init(p, value_and_grad)
        history["initial_loss"] = [float(state.value)]
        if log:
            log(f"initial loss {state.value:.6f}  (pass 1, {time.perf_counter() - t0:.2f} s)")
    total = steps if steps is not None else math.inf
    while step < total and not state.done:
        left = None if passes is None else passes - state.evals
        if left is not None and left <= 0:
            break
        t0 = time.perf_counter()
        count[0] = 0
        p, state = solver.step(p, state, value_and_grad, max_evals=left)
        step += 1
        history["loss"].append(state.value)
        history["seconds"].append(time.perf_counter() - t0)
        history["passes"].append(state.evals)
        if log:
            budget = f"/{passes}" if passes is not None else ""
            took = f"{state.last.evals} pass{'es' if state.last.evals > 1 else ''}"
            ending = f"; stopped: {state.reason}" if state.done else ""
            log(
                f"step {step}{'/' + str(steps) if steps is not None else ''}  loss "
                f"{state.value:.6f}  ({took}, {state.evals}{budget} in all, "
                f"step length {state.last.step:.3g}; {history['seconds'][-1]:.2f} s){ending}"
            )
        if path is not None and (step % checkpoint_every == 0 or state.done):
            checkpoint.save(path, _saved(p, state, step, key, history))
    return p, state, step


# the arguments of cubed.compute that make the plan (the rest go to the executor)
_PLANNING = ("optimize_function", "optimize_graph", "compile_function", "resume")


# the planned steps made, most recently used last: a later fit on the same data and loss (an
# outer loop, L-BFGS after SGD, a benchmark's rounds) runs the plans an earlier one made
_PLANNED: collections.OrderedDict[tuple, PlannedStep] = collections.OrderedDict()
_PLANNED_KEPT = 8
_PLANNED_LOCK = threading.Lock()


def _slices(
    loss: Callable[..., Any],
    host_p: Any,
    data: tuple,
    spec: Any,
    log: Callable[[str], None] | None,
) -> int | None:
    """The rows of the slices in which a one-pass task computes a row chunk too large for
    ``allowed_mem`` whole (``cubed_plugin.memory.plan_slice_rows``), or None: whole chunks fit,
    or not even one-row slices do (the step is then refused, with advice)."""
    from .memory import plan_slice_rows

    try:
        n, projection = plan_slice_rows(loss, host_p, *data, backend=spec)
    except MemoryLimitError:
        return None
    if n is not None and log:
        log(
            f"fit: a one-pass task cannot compute a row chunk of {int(data[0].chunks[0][0]):,} "
            f"rows whole within allowed_mem {format_bytes(spec.allowed_mem)}: each task "
            f"computes its chunk in slices of {n:,} rows (one slice's activations at a time, "
            f"the sums added in the task; largest task {format_bytes(projection.max_task_bytes)})"
        )
    return n


def _planner(
    loss: Callable[..., Any],
    data: tuple,
    executor: Any,
    one_pass: bool,
    chunks_per_task: int = 1,
    slice_rows: int | None = None,
) -> Callable[..., PlannedStep] | None:
    """In one-pass mode on stored data with an executor that sends task results back: the
    function giving the :class:`~cubed_plugin._one_pass.PlannedStep` of a batch, made once per
    batch shape (the data, the number of chunks, the parameters' shapes and dtypes) and kept
    for later steps and later calls of :func:`fit`, its projection checked against the budget
    before its first run (``where`` and ``advice`` given: ``refuse``'s); else None (each step
    is a Cubed graph, planned and checked)."""
    if not (one_pass and returns_task_results(executor) and stored_arrays(data) is not None):
        return None
    assert isinstance(loss, RowLoss)

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
        )
        with _PLANNED_LOCK:  # fits running in threads share the plans
            if key not in _PLANNED:
                _PLANNED[key] = PlannedStep(loss, host_p, data, picks, chunks_per_task, slice_rows)
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
    """The plan a step of :func:`fit` runs on the batch ``picks`` (for showing it: its ops,
    their task memory and tasks; in one-pass mode on stored data, the plan ``fit`` will run
    with ``chunks_per_task``)."""
    data = tuple(pg.unwrap(x) for x in data)
    host = _host_params(params, data, None)
    slices = _slices(loss, host, data, spec, None) if one_pass else None
    ex = executor_of(executor, spec)
    planned = _planner(loss, data, ex, one_pass, chunks_per_task, slices)
    if planned is not None:
        return planned(host, picks).plan
    return plan_of(*_step(loss, host, data, picks, spec, one_pass, slices)[0])


def _step(
    loss: Callable[..., Any],
    host_p: Any,
    data: tuple,
    picks: list[int] | None,
    spec: Any,
    one_pass: bool,
    slice_rows: int | None = None,
) -> tuple[list, Callable[[Any], Any], int]:
    """One step of :func:`fit` on the batch of row chunks ``picks`` of ``data``: the lazy arrays
    it computes, the function that turns their computed values into (loss, gradients), and
    the batch's rows."""
    batch = _take_chunks(data, picks)
    rows = _rows(batch)
    if one_pass:
        assert isinstance(loss, RowLoss)  # (fit refuses one-pass mode for other losses)
        total_sums, td, shapes = one_pass_step(
            loss, host_p, batch, chunk_numbers=picks, slice_rows=slice_rows
        )
        return (
            [total_sums],
            lambda sums: unflatten_sums(np.asarray(sums), td, shapes, rows, loss.reduction),
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
    row slices (what ``fit`` does before refusing, ``plan_slice_rows``) cannot fit; then the
    row chunk for which every task fits (:func:`_rechunk_advice`)."""
    slices = ""
    if one_pass:
        from .memory import plan_slice_rows

        try:
            n, _ = plan_slice_rows(loss, host_p, *data, backend=spec)
        except MemoryLimitError as e:
            slices = f"computing each stored chunk in row slices in its task cannot fit: {e}. "
        else:
            if n is not None:
                slices = (
                    f"each stored chunk computed in row slices of {n:,} rows fits "
                    "(fit computes them so; the op refused here is another). "
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
    specs = [pg.memory.spec(tuple(x.shape), str(x.dtype)) for x in data]
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
        base = worker_baseline(executor, work_dir=spec.work_dir, compute_kwargs=compute_kwargs)
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
            kept = record_drift(executor, compute_kwargs, held)
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
        record_drift(executor, compute_kwargs, held)
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
    root = spec.work_dir
    if root is None or not os.path.isdir(root):
        return set()
    return {str(q) for q in Path(root).rglob("*.zarr") if q.is_dir()}


def _clean_work(spec: Any, before: set[str]) -> None:
    """Delete the intermediate storage a step wrote (Cubed deletes it only at process exit: a
    long run would fill the disk)."""
    for q in _work_snapshot(spec) - before:
        shutil.rmtree(q, ignore_errors=True)
