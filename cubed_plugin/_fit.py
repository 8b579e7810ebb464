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

import functools
import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

import pycograd_xp as pg
from pycograd_xp import optim, random

from ._callbacks import MemoryRecorder, Progress
from ._compute import SOUND, compute, refuse, warn_reserved
from ._compute import plan as plan_of
from ._executors import (
    NoRetryWarning,
    executor_of,
    measures_each_task,
    no_retry,
)
from ._fit_state import _ckpt, _RunState, _start
from ._fit_steps import (
    _PLANNING,
    _advice,
    _batches,
    _chunk_plan,
    _clean_work,
    _cubed_data,
    _host_params,
    _measured_within,
    _planner,
    _rows,
    _step,
    _work_snapshot,
)
from ._storage import Checkpoints
from ._validation import (
    EarlyStopping,
    Validation,
    after_evaluation,
    check_validation,
    early_stopping_of,
    returned,
)
from .namespace import label_ops
from .penalties import smooth
from .steps import RowLoss

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
        ``"initial_loss"`` (one value: the loss at the starting parameters). With validation
        data, per evaluation (each epoch's end and the last step): ``"val_step"`` (the step it
        followed), ``"val_loss"`` and ``"val_<metric>"``. A resumed run returns the whole run's
        history (kept in the checkpoint).
    memory : MemoryRecorder, optional
        The run's measured against projected task memory per op
        (:class:`~cubed_plugin.train.MemoryRecorder`): ``result.memory.table()`` prints it,
        ``result.memory.overruns()`` lists the ops over.
    best_step : int, optional
        With ``early_stopping``: the step after which the monitored figure was best (the
        parameters returned are that step's when ``restore_best``).
    stopped_early : bool
        Whether ``early_stopping`` ended the run.
    """

    params: Any  # NumPy arrays
    opt_state: Any
    step: int
    key: random.Key
    history: dict[str, list[float]] = field(default_factory=dict)
    memory: Any = None  # the MemoryRecorder of the run
    best_step: int | None = None
    stopped_early: bool = False

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
    validation: Sequence[Any] | None = None,
    metrics: dict[str, Callable[..., Any]] | None = None,
    early_stopping: EarlyStopping | int | None = None,
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
    stored row chunk too large for a task's budget is first computed inside its task under a
    memory schedule (its backward pass makes some of the step's outputs again:
    ``pycograd_xp.memory.within``, the budget what the task has left after its reads) or in row
    slices (one slice's activations at a time, the sums added in the task;
    ``cubed_plugin.memory.plan_slice_rows``), whichever is projected faster
    (``cubed_plugin._chunk_plan``; ``log`` says which, and both projected costs); the refusal
    names the op and the part of the loss it computes, says why neither can help, and proposes
    the chunk size for
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
        A local directory or an fsspec URL (``"s3://bucket/run"``, opened with
        ``spec.storage_options``): on an object store each checkpoint is written under a key
        of its own and a pointer to it last, so a reader never sees half of one.
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
    validation : sequence of cubed arrays, optional
        Validation data, the same arguments of the loss as ``data`` (e.g. ``(X_val, y_val)``).
        At the end of every epoch and after the last step (after every step with L-BFGS), the
        loss and the ``metrics`` are computed there at the current parameters, without
        gradients and in one read of the validation data (one task per row chunk computes
        every figure's sum; a loss that is not a ``row_loss`` is its own graph), each task
        within ``allowed_mem`` as a step's: planned and checked before it runs, measured after.
        The figures go into ``history`` and the log.
    metrics : dict of str to callable, optional
        Per-row functions ``metric(params, *rows) -> one value per row``; the figure is their
        mean over the validation rows (a ``row_loss(reduction="sum")`` gives the sum), e.g.
        ``{"accuracy": lambda p, X, y: xp.argmax(X @ p["w"], axis=1) == y}``. History key:
        ``"val_<name>"``.
    early_stopping : EarlyStopping or int, optional
        End the run when the monitored figure (default ``"val_loss"``) has not improved for
        ``patience`` evaluations (an int: the patience), returning the best parameters seen
        (``restore_best``); they are kept in the checkpoint, so a resumed run goes on counting.

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
    one_pass = _check_arguments(
        loss, optimizer, steps, epochs, batch_rows, mode, memory_overrun, chunks_per_task
    )
    data = tuple(pg.unwrap(x) for x in data)
    _cubed_data(data)
    _rows(data)
    early = early_stopping_of(early_stopping)
    val_data = check_validation(loss, validation, metrics, early, len(data))
    if val_data is not None:
        _cubed_data(val_data, "validation")
        _rows(val_data)
    validate = Validation(loss, metrics, val_data, early) if val_data is not None else None
    spec = spec if spec is not None else data[0].spec
    host = _host_params(params, data, log, loss)
    # resume: the run so far from its checkpoint, or its start
    path = _ckpt(checkpoint_dir, spec)
    run = _start(optimizer, host, key if key is not None else random.key(0), path, log, validate)
    # plan: how each step is computed (and checked before it runs)
    stepper = _Stepper.plan(
        loss,
        host,
        data,
        spec,
        one_pass,
        batch_rows,
        executor,
        compute_kwargs,
        chunks_per_task,
        callbacks,
        progress,
        log,
        memory_overrun,
    )
    # train: epochs of mini-batches (or L-BFGS' full-batch iterations), checkpointed
    after = functools.partial(after_evaluation, stepper, validate, log) if validate else None
    if isinstance(optimizer, optim.LBFGS):
        _fit_lbfgs(
            optimizer, run, steps, epochs, stepper.evaluate, path, log, checkpoint_every, after
        )
    else:
        per_epoch = max(len(_batches(data, batch_rows, run.key, 0)), 1)  # (checks batch_rows)
        total = steps if steps is not None else cast(int, epochs) * per_epoch
        _epochs(
            optimizer,
            run,
            total,
            per_epoch,
            stepper,
            batch_rows,
            path,
            log,
            checkpoint_every,
            after,
        )
    final, best_step = returned(run, early, log)
    out = pg.tree_map(lambda a: np.asarray(pg.unwrap(a)), final)
    return FitResult(
        out,
        run.opt_state,
        run.step,
        run.key,
        run.history,
        stepper.recorder,
        best_step,
        run.stopped,
    )


def _check_arguments(
    loss: Callable[..., Any],
    optimizer: Any,
    steps: int | None,
    epochs: int | None,
    batch_rows: int | None,
    mode: str,
    memory_overrun: str,
    chunks_per_task: int,
) -> bool:
    """Refuse :func:`fit`'s inconsistent arguments before anything runs; whether the run is in
    one-pass mode."""
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
    penalty = getattr(loss, "penalty", None)
    if isinstance(optimizer, optim.LBFGS) and penalty is not None and not smooth(penalty):
        raise ValueError(
            f"fit: optim.lbfgs needs a smooth loss, and the row loss's penalty "
            f"{getattr(penalty, 'name', penalty)!r} is not differentiable at 0 (its line search "
            "and curvature pairs assume a differentiable function); train an L1 penalty with a "
            "gradient transformation (optim.sgd, optim.adam: its subgradient), or use "
            "penalties.l2"
        )
    if isinstance(optimizer, optim.LBFGS) and batch_rows is not None:
        raise ValueError(
            "fit: optim.lbfgs takes the full batch (batch_rows=None): its line search compares "
            "losses of one function, and a mini-batch's loss changes from step to step; use a "
            "gradient transformation (optim.sgd, optim.adam) for mini-batches"
        )
    return one_pass


@dataclass
class _Stepper:
    """How each step of a :func:`fit` run is computed: :meth:`evaluate` gives the loss and
    gradients at some parameters on a batch, its plan checked against the budget first (in
    one-pass mode on stored data: planned once per batch shape, then reused), its measured
    task memory checked against the projections after."""

    loss: Callable[..., Any]
    data: tuple
    spec: Any
    one_pass: bool
    batch_rows: int | None
    executor: Any
    recorder: MemoryRecorder
    callbacks: Sequence[Any]
    progress: bool
    log: Callable[[str], None] | None
    memory_overrun: str
    compute_kwargs: dict | None
    chunk: Any  # how each one-pass task computes its chunk (a ChunkPlan), or None: whole
    planned: Callable[..., Any] | None

    @classmethod
    def plan(
        cls,
        loss: Callable[..., Any],
        host: Any,
        data: tuple,
        spec: Any,
        one_pass: bool,
        batch_rows: int | None,
        executor: Any,
        compute_kwargs: dict | None,
        chunks_per_task: int,
        callbacks: Sequence[Any],
        progress: bool,
        log: Callable[[str], None] | None,
        memory_overrun: str,
    ) -> _Stepper:
        """The executor made and checked (retries, ``reserved_mem``), the ops labelled, and,
        in one-pass mode, how a chunk too large is computed (recomputed or in row slices) and
        the planner."""
        label_ops()  # the ops of each step say which part of the loss they compute
        ex = executor_of(executor, spec, compute_kwargs)
        why = no_retry(ex)
        if why is not None:
            warnings.warn(f"fit: {why}", NoRetryWarning, stacklevel=3)
        warn_reserved(spec, ex, "fit", compute_kwargs=compute_kwargs, reads=data)
        chunk = _chunk_plan(loss, host, data, spec, log) if one_pass else None
        planned = _planner(loss, data, ex, one_pass, chunks_per_task, chunk)
        if planned is None and chunks_per_task != 1:
            raise ValueError(
                f"fit: chunks_per_task={chunks_per_task} takes one-pass mode on data stored in "
                "Zarr (cubed.from_zarr, unsharded) and an executor that sends task results "
                f"back; this run is {'one-pass' if one_pass else 'graph'} mode"
                + ("" if not one_pass else " on data Cubed computes, or on Apache Beam")
                + ": leave chunks_per_task at 1"
            )
        recorder = MemoryRecorder(*measures_each_task(ex))
        return cls(
            loss,
            data,
            spec,
            one_pass,
            batch_rows,
            ex,
            recorder,
            callbacks,
            progress,
            log,
            memory_overrun,
            compute_kwargs,
            chunk,
            planned,
        )

    def evaluate(self, host_p: Any, picks: list[int] | None, step: int, desc: str) -> tuple:
        """(loss, gradients, rows) at ``host_p`` on the batch ``picks``: one computation (one
        pass over the batch in one-pass mode), its plan checked against the budget first (in
        one-pass mode on stored data: once per batch shape, the plan then reused)."""
        spec, data = self.spec, self.data
        mode = "one-pass" if self.one_pass else "graph"
        where = f"fit: step {step} ({mode} mode) is refused before running"
        advice = functools.partial(
            _advice, self.loss, host_p, data, self.one_pass, self.batch_rows, spec
        )
        kw = {"optimize_function": SOUND, **(self.compute_kwargs or {})}
        callbacks = [*self.callbacks, self.recorder, Progress(desc, disable=not self.progress)]
        if self.planned is not None:
            run_kw = {k: v for k, v in kw.items() if k not in _PLANNING}
            planned = self.planned(host_p, picks, where, advice)
            value, grads, rows = planned.run(
                host_p, picks, self.executor, callbacks, data[0].spec, **run_kw
            )
        else:
            work = _work_snapshot(spec)
            targets, finish, rows = _step(
                self.loss, host_p, data, picks, spec, self.one_pass, self.chunk
            )
            p = plan_of(*targets, optimize_function=kw["optimize_function"])
            refuse(p, where, advice)
            value, grads = finish(
                compute(*targets, executor=self.executor, callbacks=callbacks, **kw)
            )
            _clean_work(spec, work, p)
        _measured_within(
            self.recorder,
            step,
            self.memory_overrun,
            self.executor,
            spec,
            data,
            self.log,
            self.compute_kwargs,
        )
        # gradients in the parameters' dtypes (one-pass mode sums the chunks' in float64)
        return value, pg.tree_map(lambda g, a: np.asarray(g, dtype=a.dtype), grads, host_p), rows

    def validate(self, validation: Validation, host_p: Any, step: int) -> dict[str, float]:
        """The validation figures at ``host_p``: one computation (one read of the validation
        data), its plan checked against the budget first, its measured task memory after."""
        where = f"fit: the validation after step {step} is refused before running"
        kw = {"optimize_function": SOUND, **(self.compute_kwargs or {})}
        desc = f"validation after step {step}"
        callbacks = [*self.callbacks, self.recorder, Progress(desc, disable=not self.progress)]
        work = _work_snapshot(self.spec)
        targets, finish = validation.targets(host_p, self.spec)
        refuse(plan_of(*targets, optimize_function=kw["optimize_function"]), where)
        values = compute(*targets, executor=self.executor, callbacks=callbacks, **kw)
        _clean_work(self.spec, work)
        _measured_within(
            self.recorder,
            step,
            self.memory_overrun,
            self.executor,
            self.spec,
            validation.data,
            self.log,
            self.compute_kwargs,
        )
        return finish(list(values) if len(targets) > 1 else [values])


def _epochs(
    optimizer: Any,
    run: _RunState,
    total: int,
    per_epoch: int,
    stepper: _Stepper,
    batch_rows: int | None,
    path: Checkpoints | None,
    log: Callable[[str], None] | None,
    checkpoint_every: int,
    after_epoch: Callable[[_RunState], None] | None = None,
) -> None:
    """:func:`fit`'s loop with a gradient transformation: ``total`` steps, each on the next
    batch of its epoch (drawn by the run's key), the parameters updated on NumPy, the history
    extended, ``after_epoch`` (the validation) at each epoch's end and the last step, a
    checkpoint every ``checkpoint_every`` steps and at the end."""
    xp = pg.namespace(np)
    while run.step < total and not run.stopped:
        epoch, within = divmod(run.step, per_epoch)
        picks = _batches(stepper.data, batch_rows, run.key, epoch)[within]
        t0 = time.perf_counter()
        host_p = pg.tree_map(lambda a: np.asarray(pg.unwrap(a)), run.params)
        value, grads, rows = stepper.evaluate(host_p, picks, run.step + 1, f"step {run.step + 1}")
        if not math.isfinite(value):
            raise FloatingPointError(
                f"fit: the loss is {value} at step {run.step + 1}; lower the "
                "learning rate or check the data"
            )
        updates, run.opt_state = optimizer.update(
            pg.tree_map(xp.asarray, grads), run.opt_state, run.params
        )
        p = optim.apply_updates(run.params, updates)
        run.params = pg.tree_map(lambda a: xp.asarray(np.array(pg.unwrap(a))), p)  # materialized
        run.step += 1
        run.history["loss"].append(value)
        run.history["seconds"].append(time.perf_counter() - t0)
        if log:
            log(
                f"step {run.step}/{total}  loss {value:.6f}  "
                f"({run.history['seconds'][-1]:.2f} s, {rows} rows)"
            )
        if after_epoch is not None and (run.step % per_epoch == 0 or run.step == total):
            after_epoch(run)
        if run.step % checkpoint_every == 0 or run.step == total or run.stopped:
            run.save(path)


def _fit_lbfgs(
    solver: optim.LBFGS,
    run: _RunState,
    steps: int | None,
    passes: int | None,
    evaluate: Callable[..., tuple],
    path: Checkpoints | None,
    log: Callable[[str], None] | None,
    checkpoint_every: int,
    after_step: Callable[[_RunState], None] | None = None,
) -> None:
    """:func:`fit`'s loop with ``optim.lbfgs``: every evaluation of the solver's function is
    one computation of the loss and gradient over all the data (one pass in one-pass mode);
    ``after_step`` (the validation) after every step."""
    xp = pg.namespace(np)
    history = run.history

    def value_and_grad(x: Any) -> tuple[Any, Any]:
        host_p = pg.tree_map(lambda a: np.asarray(pg.unwrap(a)), x)
        n = run.opt_state.evals + count[0] + 1
        step = run.step + 1
        try:
            value, grads, _ = evaluate(host_p, None, step, f"step {step}, pass {n}")
        except FloatingPointError:  # one-pass mode: a chunk's loss overflowed at a trial point
            if not count[0] and not run.opt_state.evals:
                raise
            value, grads = math.inf, pg.tree_map(np.zeros_like, host_p)
        count[0] += 1
        return xp.asarray(value), pg.tree_map(xp.asarray, grads)

    count = [0]
    if not run.resumed:
        t0 = time.perf_counter()
        run.opt_state = solver.init(run.params, value_and_grad)
        history["initial_loss"] = [float(run.opt_state.value)]
        if log:
            log(
                f"initial loss {run.opt_state.value:.6f}  "
                f"(pass 1, {time.perf_counter() - t0:.2f} s)"
            )
    total = steps if steps is not None else math.inf
    while run.step < total and not run.opt_state.done and not run.stopped:
        left = None if passes is None else passes - run.opt_state.evals
        if left is not None and left <= 0:
            break
        t0 = time.perf_counter()
        count[0] = 0
        run.params, run.opt_state = solver.step(
            run.params, run.opt_state, value_and_grad, max_evals=left
        )
        run.step += 1
        state = run.opt_state
        history["loss"].append(state.value)
        history["seconds"].append(time.perf_counter() - t0)
        history["passes"].append(state.evals)
        if log:
            budget = f"/{passes}" if passes is not None else ""
            took = f"{state.last.evals} pass{'es' if state.last.evals > 1 else ''}"
            ending = f"; stopped: {state.reason}" if state.done else ""
            log(
                f"step {run.step}{'/' + str(steps) if steps is not None else ''}  loss "
                f"{state.value:.6f}  ({took}, {state.evals}{budget} in all, "
                f"step length {state.last.step:.3g}; {history['seconds'][-1]:.2f} s){ending}"
            )
        if after_step is not None:
            after_step(run)
        if run.step % checkpoint_every == 0 or state.done or run.stopped:
            run.save(path)
