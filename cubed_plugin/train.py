"""Bounded-memory training on chunked data with Cubed, and its command line.

:func:`fit` runs gradient steps over data chunked in Zarr (far larger than memory, if need be)
with parameters small and in memory: each step builds the loss and the gradients (one-pass or
graph mode, see :mod:`cubed_plugin.steps`), checks every task's projected memory against
``allowed_mem`` before running, computes them in one go, updates the parameters with a
``pycograd_xp.optim`` transformation on NumPy, deletes the step's intermediate storage, and
writes atomic checkpoints from which a killed run resumes with nothing lost.

    python -m cubed_plugin.train --rows 2000000 --features 100 --allowed-mem 200MB

makes synthetic data in Zarr, prints the memory plan of a step, trains with a progress bar and
reports the loss per step and the measured memory against the projection.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import pycograd_xp as pg
from pycograd_xp import checkpoint, optim, random
from pycograd_xp.memory._project import MemoryLimitError

from ._compute import SOUND, compute, refuse, warn_reserved
from ._compute import plan as plan_of
from ._executors import MARGIN, executor_of, measuring_processes, worker_baseline
from .memory import TaskMemoryError, TaskMemoryWarning, fmt_bytes, fmt_pair, part_of
from .namespace import label_ops
from .steps import RowLoss, graph_step, one_pass_step, row_loss, unflatten_sums

__all__ = ["FitResult", "MemoryRecorder", "Progress", "fit", "main", "make_spec",
           "measuring_processes", "row_loss", "worker_baseline"]


def make_spec(allowed_mem: str | int = "1GB", reserved_mem: str | int | None = None,
              work_dir: str | None = None, executor: Any = None,
              compute_kwargs: dict | None = None) -> Any:  # fmt: skip
    """A ``cubed.Spec`` whose ``reserved_mem`` covers what a worker of ``executor`` holds
    before any data: when ``reserved_mem`` is None (the default) it is measured
    (:func:`worker_baseline`: a small task run on ``executor``, once per executor) and 10%
    added, as Cubed's own tests do (tasks' imports and buffers vary a little). ``executor``:
    the one the spec will compute with (an executor, its name, or None: Cubed's default,
    "threads", whose tasks run in this process and get a fresh worker's baseline). An executor
    that cannot be measured raises RuntimeError saying why (then give ``reserved_mem``).
    ``work_dir``: Cubed's intermediate storage (a new temporary directory when None)."""
    import cubed

    work_dir = work_dir or tempfile.mkdtemp(prefix="pycograd-cubed-")
    if reserved_mem is None:
        base = worker_baseline(executor, work_dir=work_dir, compute_kwargs=compute_kwargs)
        reserved_mem = math.ceil(base * MARGIN)
    return cubed.Spec(work_dir=work_dir, allowed_mem=allowed_mem, reserved_mem=reserved_mem)


class Progress:
    """A tqdm progress bar of a step's tasks (a ``cubed.Callback``; Cubed's own diagnostics
    pull rich and pandas)."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        import cubed

        class _Progress(cubed.Callback):
            def __init__(self, desc: str = "step", disable: bool = False) -> None:
                self.desc, self.disable, self.bar = desc, disable, None

            def on_compute_start(self, event: Any) -> None:
                from tqdm.auto import tqdm

                total = sum(node["primitive_op"].num_tasks for _, node in
                            event.dag.nodes(data=True) if node.get("primitive_op"))  # fmt: skip
                self.bar = tqdm(total=total, desc=self.desc, unit="task", leave=False,
                                disable=self.disable)  # fmt: skip

            def on_task_end(self, event: Any) -> None:
                if self.bar is not None:
                    self.bar.update(event.num_tasks)

            def on_compute_end(self, event: Any) -> None:
                if self.bar is not None:
                    self.bar.close()

        return _Progress(*args, **kwargs)


@dataclass(frozen=True)
class Overrun:
    """A task whose measured peak went over its projection or over ``allowed_mem``."""

    op: str  # Cubed's name of the op
    part: str  # the part of the program it computes (cubed_plugin.memory.part_of)
    measured: int  # the largest measured task peak of the op (bytes)
    projected: int  # its projected task memory
    allowed: int  # allowed_mem
    reserved: int  # reserved_mem

    def __str__(self) -> str:
        what = " and ".join(w for w, over in (("its projection", self.measured > self.projected),
                                              ("allowed_mem", self.measured > self.allowed))
                            if over)  # fmt: skip
        m, p = fmt_pair(self.measured, self.projected)
        _, a = fmt_pair(self.measured, self.allowed)
        return (f"{self.op} ({self.part}) measured {m} in a task, over {what}: projected {p}, "
                f"allowed_mem {a} (of which reserved_mem {fmt_bytes(self.reserved)})")


class MemoryRecorder:
    """Measured against projected task memory, per op (a ``cubed.Callback``), with the part of
    the program each op computes. Only executors that measure tasks (processes, dask, ...)
    report measured peaks; :meth:`overruns` lists the ops whose measured peak went over their
    projection or ``allowed_mem``."""

    def __new__(cls) -> Any:
        import cubed

        class _Recorder(cubed.Callback):
            def __init__(self) -> None:
                self.projected: dict[str, int] = {}
                self.measured: dict[str, int] = {}
                self.kinds: dict[str, str] = {}
                self.parts: dict[str, str] = {}
                self.limits: dict[str, tuple[int, int]] = {}  # (allowed_mem, reserved_mem)
                self.steps: list[list[str]] = []  # the ops of each compute, in plan order

            def on_compute_start(self, event: Any) -> None:
                ops = []
                for name, node in event.dag.nodes(data=True):
                    op = node.get("primitive_op")
                    if op is not None:
                        self.projected[name] = int(op.projected_mem)
                        self.kinds[name] = str(node.get("op_name", "?"))
                        self.parts[name] = part_of(event.dag, name)
                        self.limits[name] = (int(op.allowed_mem), int(op.reserved_mem))
                        ops.append(name)
                self.steps.append(ops)

            def on_task_end(self, event: Any) -> None:
                m = event.peak_measured_mem_end
                if m is not None:
                    self.measured[event.name] = max(self.measured.get(event.name, 0), int(m))

            def report(self) -> list[tuple[str, int, int | None]]:
                return [(op, p, self.measured.get(op)) for op, p in self.projected.items()]

            def max_projected(self) -> int:
                return max(self.projected.values(), default=0)

            def over(self) -> dict[str, tuple[int, int]]:
                return {op: (m, self.projected[op]) for op, m in self.measured.items()
                        if op in self.projected and m > self.projected[op]}  # fmt: skip

            def overruns(self, ops: Sequence[str] | None = None) -> list[Overrun]:
                """The ops (of ``ops``; default: all recorded) whose measured task peak went
                over their projection or over ``allowed_mem``, largest excess first."""
                out = []
                for op in self.projected if ops is None else ops:
                    m = self.measured.get(op)
                    if m is None:
                        continue
                    allowed, reserved = self.limits[op]
                    if m > self.projected[op] or m > allowed:
                        out.append(Overrun(op, self.parts[op], m, self.projected[op], allowed,
                                           reserved))  # fmt: skip
                return sorted(out, key=lambda o: o.projected - o.measured)

            def table(self, allowed_mem: int | None = None) -> str:
                """Measured against projected task memory per op of the last step, with the
                part of the program each computes; an op's measured peak is the largest over
                every step at its place in the plan (the steps' plans have one shape)."""
                if not self.steps:
                    return "no step computed"
                last = self.steps[-1]
                same = [s for s in self.steps if len(s) == len(last)]
                lines = [f"{'op':14} {'kind':14} {'projected':>11} {'measured':>11} "
                         f"{'measured/projected':>19}  part"]  # fmt: skip
                for j, op in enumerate(last):
                    proj = max(self.projected[s[j]] for s in same)
                    ms = [self.measured[s[j]] for s in same if s[j] in self.measured]
                    meas = max(ms) if ms else None
                    ratio = f"{meas / proj:19.2f}" if meas is not None and proj else f"{'-':>19}"
                    p, m = fmt_pair(proj, meas) if meas is not None else (fmt_bytes(proj), "-")
                    lines.append(f"{op:14} {self.kinds[op]:14} {p:>11} {m:>11} {ratio}  "
                                 f"{self.parts[op]}")  # fmt: skip
                if allowed_mem is not None:
                    lines.append(f"allowed_mem {fmt_bytes(allowed_mem)}; over {len(same)} steps")
                return "\n".join(lines)

        return _Recorder()


@dataclass
class FitResult:
    params: Any  # NumPy arrays
    opt_state: Any
    step: int
    key: random.Key
    history: dict[str, list[float]] = field(default_factory=dict)
    memory: Any = None  # the MemoryRecorder of the run


def _rows(data: Sequence[Any]) -> int:
    n = int(data[0].shape[0])
    for i, x in enumerate(data):
        if int(x.shape[0]) != n:
            raise ValueError(f"fit: data argument {i} has {x.shape[0]} rows, argument 0 has {n}")
    return n


def _batches(data: Sequence[Any], batch_rows: int | None, key: random.Key,
             epoch: int) -> list[list[int] | None]:  # fmt: skip
    """The epoch's batches, each the increasing numbers of the whole row chunks it takes, drawn
    by the key: the chunks shuffled, then taken ``batch_rows`` rows at a time (those left over
    wait for another epoch). ``[None]`` (one batch of all the data) when ``batch_rows`` is
    None: full batch."""
    if batch_rows is None:
        return [None]
    chunk = data[0].chunks[0]
    size = chunk[0]
    if batch_rows <= 0 or batch_rows % size or batch_rows // size > len(chunk):
        raise ValueError(f"fit: batch_rows={batch_rows} must be a multiple of the data's row "
                         f"chunks ({size} rows) of at most {len(chunk)} chunks: a batch is "
                         "made of whole chunks")  # fmt: skip
    per = batch_rows // size
    order = np.asarray(pg.unwrap(random.permutation(random.fold_in(key, epoch), len(chunk))))
    return [sorted(int(i) for i in order[b * per:(b + 1) * per])
            for b in range(len(chunk) // per)]  # fmt: skip


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
            raise TypeError(f"fit: parameter {i} (shape {h.shape}) has dtype {h.dtype}; "
                            "parameters must be real floating point: give them as float32 "
                            "or float64 arrays, e.g. np.zeros(n, dtype=np.float32)")  # fmt: skip
        host.append(h)
    dtypes = sorted({str(h.dtype) for h in host})
    data_dtypes = sorted({str(np.dtype(x.dtype)) for x in data})
    if log and len({*dtypes, *data_dtypes}) > 1:
        common = np.result_type(*dtypes, *data_dtypes)
        log(f"fit: parameters {'/'.join(dtypes)}, data {'/'.join(data_dtypes)}: each task "
            f"computes in {common} (NumPy's promotion; its copies are in the projected task "
            f"memory); the parameters stay {'/'.join(dtypes)}")  # fmt: skip
    return pg.tree_unflatten(td, host)


def _ckpt(directory: str | None) -> Path | None:
    if directory is None:
        return None
    Path(directory).mkdir(parents=True, exist_ok=True)
    return Path(directory) / "checkpoint.npz"


def fit(loss: Callable[..., Any], params: Any, data: Sequence[Any],
        optimizer: optim.GradientTransformation, *, steps: int | None = None,
        epochs: int | None = None, batch_rows: int | None = None, spec: Any = None,
        executor: Any = None, callbacks: Sequence[Any] = (), checkpoint_dir: str | None = None,
        checkpoint_every: int = 1, mode: str = "auto", key: random.Key | None = None,
        progress: bool = True, log: Callable[[str], None] | None = print,
        compute_kwargs: dict | None = None,
        memory_overrun: str = "raise") -> FitResult:  # fmt: skip
    """Train ``params`` (a pytree of NumPy arrays, or arrays of an eager namespace) on ``data``
    (Cubed arrays, e.g. ``cubed.from_zarr``, chunked along their rows and whole along the
    other axes) to minimize ``loss(params, *data)``.

    ``mode``: "one-pass" (the loss must be a :func:`row_loss`), "graph", or "auto" (one-pass
    when the loss declares itself row-separable). ``steps`` or ``epochs`` (a pass over all
    chunks); ``batch_rows`` rows per step (a multiple of the row chunk; None: full batch),
    drawn by ``key`` per epoch. Every step's plan is checked against ``allowed_mem`` first.
    With ``checkpoint_dir`` the state (parameters, optimizer state, step, key) is saved every
    ``checkpoint_every`` steps, atomically, and a run that finds a checkpoint resumes from it.
    The parameters keep the floating dtype they are given in (Python numbers: float64), as in
    JAX and PyTorch: float32 parameters on float32 data train in float32; when parameters
    and data differ in dtype, NumPy promotes in each task (``log`` says so) and the copies it
    makes are in each task's projected memory.
    ``executor``: a Cubed executor or its name ("single-threaded", "threads", "processes",
    "dask"); ``compute_kwargs`` go to ``cubed.compute`` (for "dask",
    ``{"compute_kwargs": {"address": cluster.scheduler_address}}`` points it at a cluster).

    Memory: every step is planned with ``cubed_plugin.steps.graph_fusion`` (in both modes) and
    refused before it runs when a task's projection exceeds ``allowed_mem``; the refusal names
    the op and the part of the loss it computes, and proposes the chunk size for which every
    task fits (``cubed_plugin.memory.plan_rows`` for this mode), checked with a lazy
    ``rechunk`` of the data or, when a rechunk cannot fit, how to rewrite the data. A warning
    (``ReservedMemWarning``) says when the Spec's ``reserved_mem`` is below what a worker of
    ``executor`` measurably holds (``worker_baseline``; ``cubed.Spec`` defaults to 0). On
    executors that measure tasks (``measuring_processes()``, processes, dask), a task whose
    measured peak exceeds its projection or ``allowed_mem`` raises ``TaskMemoryError`` after
    its step (naming the op, its part of the loss, both figures and the limit; parameters are
    not updated with that step), or warns (``TaskMemoryWarning``) with
    ``memory_overrun="warn"``.
    """
    if (steps is None) == (epochs is None):
        raise ValueError("fit: give exactly one of steps= or epochs=")
    if mode not in ("auto", "one-pass", "graph"):
        raise ValueError(f"fit: mode must be 'auto', 'one-pass' or 'graph', got {mode!r}")
    if memory_overrun not in ("raise", "warn"):
        raise ValueError(f"fit: memory_overrun must be 'raise' or 'warn', got "
                         f"{memory_overrun!r}")  # fmt: skip
    one_pass = mode == "one-pass" or (mode == "auto" and isinstance(loss, RowLoss))
    if one_pass and not isinstance(loss, RowLoss):
        raise TypeError("fit(mode='one-pass'): the loss must be declared row-separable with "
                        "cubed_plugin.row_loss (a per-row loss), or use mode='graph'")
    data = tuple(pg.unwrap(x) for x in data)
    spec = spec if spec is not None else data[0].spec
    _rows(data)
    key = key if key is not None else random.key(0)
    host = _host_params(params, data, log)
    xp = pg.namespace(np)
    p = pg.tree_map(xp.asarray, host)
    state = optimizer.init(p)
    step, history = 0, {"loss": [], "seconds": []}
    path = _ckpt(checkpoint_dir)
    like = {"params": p, "opt_state": state, "step": 0, "key": np.asarray(key.data)}
    if path is not None and path.exists():
        saved = checkpoint.load(path, like)
        p, state, step = saved["params"], saved["opt_state"], int(saved["step"])
        key = random.Key(tuple(int(k) for k in np.asarray(saved["key"])))
        if log:
            log(f"resumed from {path} at step {step}")
    per_epoch = len(_batches(data, batch_rows, key, 0))  # (checks batch_rows)
    total = steps if steps is not None else epochs * max(per_epoch, 1)
    label_ops()  # the ops of each step say which part of the loss they compute
    recorder = MemoryRecorder()
    ex = executor_of(executor, spec)
    warn_reserved(spec, ex, "fit", compute_kwargs=compute_kwargs)
    kw = {"optimize_function": SOUND, **(compute_kwargs or {})}
    while step < total:
        epoch, within = divmod(step, max(per_epoch, 1))
        picks = _batches(data, batch_rows, key, epoch)[within]
        t0 = time.perf_counter()
        host_p = pg.tree_map(lambda a: np.asarray(pg.unwrap(a)), p)
        work = _work_snapshot(spec)
        targets, finish, rows = _step(loss, host_p, data, picks, spec, one_pass)
        refuse(plan_of(*targets, optimize_function=kw["optimize_function"]),
               f"fit: step {step + 1} ({'one-pass' if one_pass else 'graph'} mode) is refused "
               "before running",
               functools.partial(_advice, loss, host_p, data, one_pass, batch_rows,
                                 spec))  # fmt: skip
        value, grads = finish(compute(*targets, executor=ex, callbacks=[*callbacks, recorder,
                              Progress(f"step {step + 1}", disable=not progress)], **kw))
        _clean_work(spec, work)
        _measured_within(recorder, step + 1, memory_overrun, ex, spec)
        # gradients in the parameters' dtypes (one-pass mode sums the chunks' in float64)
        grads = pg.tree_map(lambda g, a: np.asarray(g, dtype=a.dtype), grads, host_p)
        if not math.isfinite(value):
            raise FloatingPointError(f"fit: the loss is {value} at step {step + 1}; lower the "
                                     "learning rate or check the data")  # fmt: skip
        updates, state = optimizer.update(pg.tree_map(xp.asarray, grads), state, p)
        p = optim.apply_updates(p, updates)
        p = pg.tree_map(lambda a: xp.asarray(np.array(pg.unwrap(a))), p)  # materialized
        step += 1
        history["loss"].append(value)
        history["seconds"].append(time.perf_counter() - t0)
        if log:
            log(f"step {step}/{total}  loss {value:.6f}  ({history['seconds'][-1]:.2f} s, "
                f"{rows} rows)")  # fmt: skip
        if path is not None and (step % checkpoint_every == 0 or step == total):
            checkpoint.save(path, {"params": p, "opt_state": state, "step": step,
                                   "key": np.asarray(key.data)})  # fmt: skip
    out = pg.tree_map(lambda a: np.asarray(pg.unwrap(a)), p)
    return FitResult(out, state, step, key, history, recorder)


def _step(loss: Callable[..., Any], host_p: Any, data: tuple, picks: list[int] | None,
          spec: Any, one_pass: bool) -> tuple[list, Callable[[Any], Any], int]:  # fmt: skip
    """One step of :func:`fit` on the batch of row chunks ``picks`` of ``data``: the lazy arrays
    it computes, the function that turns their computed values into (loss, gradients), and
    the batch's rows."""
    batch = _take_chunks(data, picks)
    rows = _rows(batch)
    if one_pass:
        total_sums, td, shapes = one_pass_step(loss, host_p, batch, chunk_numbers=picks)
        return [total_sums], lambda sums: unflatten_sums(np.asarray(sums), td, shapes, rows,
                                                         loss.reduction), rows  # fmt: skip
    v, g = graph_step(loss, host_p, batch, spec)
    return [v, g], lambda vg: (float(vg[0]), vg[1]), rows


def _shape(x: Any, n: int) -> tuple[int, ...]:
    return (n, *(int(s) for s in x.shape[1:]))


def _advice(loss: Callable[..., Any], host_p: Any, data: tuple, one_pass: bool,
            batch_rows: int | None, spec: Any) -> str:  # fmt: skip
    """The way out of a refused step: the row chunk for which every task of ``fit``'s step
    fits (``plan_rows`` in fit's mode), checked with the data rechunked lazily to it; when that
    rechunk cannot fit, how to rewrite the data with that chunk."""
    from .memory import plan_rows

    mode = "one-pass" if one_pass else "graph"
    rows, have = int(data[0].shape[0]), int(data[0].chunks[0][0])
    specs = [pg.memory.spec(tuple(x.shape), str(x.dtype)) for x in data]
    batch = f", batch_rows={batch_rows}" if batch_rows is not None else ""
    call = (f"cubed_plugin.memory.plan_rows(loss, params, *data_specs, rows={rows}, "
            f"data={tuple(range(1, len(data) + 1))}, mode={mode!r}{batch}, backend=spec)")
    try:
        n, projection = plan_rows(loss, host_p, *specs, rows=rows,
                                  data=tuple(range(1, len(data) + 1)), mode=mode,
                                  batch_rows=batch_rows, backend=spec)  # fmt: skip
    except MemoryLimitError as e:
        return f"no chunk size fits: {e}"
    head = (f"chunks of at most {n:,} rows fit in {mode} mode (largest task "
            f"{fmt_bytes(projection.max_task_bytes)}: {call}); the data has chunks of "
            f"{have:,} rows")
    if n >= have:
        return (f"{head}: the op refused here does not shrink with the row chunk (data "
                "computed lazily rather than stored is copied per batch: write it with "
                "cubed.to_zarr first); raise allowed_mem")  # fmt: skip
    code = "; ".join(f"data[{i}] = data[{i}].rechunk({_shape(x, n)})" for i, x in enumerate(data))
    try:
        rechunked = tuple(x.rechunk(_shape(x, n)) for x in data)
    except ValueError as e:  # Cubed plans no rechunk whose source chunk exceeds the budget
        why = f"Cubed cannot plan it in this budget ({e})"
    else:
        picks = _batches(rechunked, batch_rows, random.key(0), 0)[0]
        p = plan_of(*_step(loss, host_p, rechunked, picks, spec, one_pass)[0])
        over = [(name, d) for name, d in p.dag.nodes(data=True)
                if d.get("primitive_op") is not None
                and d["primitive_op"].projected_mem > d["primitive_op"].allowed_mem]
        if not over:
            return (f"{head}. Rechunk it lazily ({code}): checked, every task of the step "
                    f"then fits (largest {fmt_bytes(p.max_projected_mem)}); every step then "
                    "rechunks the chunks it reads again, so to do it once write the rechunked "
                    "data to Zarr (cubed.to_zarr(x.rechunk(...), path); then "
                    "cubed.from_zarr(path))")  # fmt: skip
        name, d = max(over, key=lambda o: o[1]["primitive_op"].projected_mem)
        need, limit = fmt_pair(d["primitive_op"].projected_mem, d["primitive_op"].allowed_mem)
        why = (f"{name} ({part_of(p.dag, name)}) needs {need} per task, over allowed_mem "
               f"{limit}")
    shapes = ", ".join(f"data argument {i} with chunks {_shape(x, n)}"
                       for i, x in enumerate(data))  # fmt: skip
    return (f"{head}. A lazy rechunk ({code}) cannot fit: {why}; a rechunk holds whole stored "
            f"chunks of {have:,} rows. Rewrite the data once, outside this budget: {shapes}; "
            "e.g. cubed.to_zarr(x.rechunk(chunks), path) under a Spec with a larger "
            "allowed_mem, or zarr.open_array(path, mode='w', shape=x.shape, dtype=x.dtype, "
            "chunks=chunks) filled one stored chunk at a time; then train on "
            "cubed.from_zarr(path)")


def _measured_within(recorder: Any, step: int, memory_overrun: str, executor: Any,
                     spec: Any) -> None:  # fmt: skip
    """Raise :class:`TaskMemoryError` (or warn) if a task of the step just computed measured
    more than its projection or ``allowed_mem``."""
    over = recorder.overruns(recorder.steps[-1]) if recorder.steps else []
    if not over:
        return
    try:
        base = worker_baseline(executor, work_dir=spec.work_dir)
    except RuntimeError:
        base = None
    reserved = over[0].reserved
    if base is not None and reserved < base:
        have, need = fmt_pair(reserved, base)
        why = (f"reserved_mem {have} is below the {need} a worker of this executor holds "
               "before any data (cubed_plugin.worker_baseline): make the spec with "
               "cubed_plugin.train.make_spec (it measures reserved_mem) or raise reserved_mem")
    else:
        why = ("the projection is a promise this task broke: a bug of cubed_plugin's "
               "projections; please report it with this message, and raise allowed_mem and "
               "reserved_mem meanwhile")
    from cubed.runtime.executors.local import ProcessesExecutor

    from ._executors import _measuring_executor_class

    if isinstance(executor, ProcessesExecutor) and \
            not isinstance(executor, _measuring_executor_class()):  # fmt: skip
        why += (" (Cubed's processes executor reports for each task the most its worker has "
                "held, the peak of the process that started it included: "
                "cubed_plugin.train.measuring_processes() measures each task on its own)")
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


# -- the command line -----------------------------------------------------------------------------


def synthetic(path: str, rows: int, features: int, chunk_rows: int, model: str,
              seed: int = 0) -> None:  # fmt: skip
    """Write synthetic data to Zarr chunk by chunk (it never exists whole in memory)."""
    import zarr

    rng = np.random.default_rng(seed)
    w = rng.standard_normal(features) / math.sqrt(features)
    zx = zarr.open_array(f"{path}/X.zarr", mode="w", shape=(rows, features), dtype="f8",
                         chunks=(chunk_rows, features))  # fmt: skip
    zy = zarr.open_array(f"{path}/y.zarr", mode="w", shape=(rows,), dtype="f8",
                         chunks=(chunk_rows,))  # fmt: skip
    for start in range(0, rows, chunk_rows):
        stop = min(start + chunk_rows, rows)
        x = rng.standard_normal((stop - start, features))
        z = x @ w if model == "logreg" else np.tanh(x @ w) * 2.0
        zx[start:stop] = x
        zy[start:stop] = (z + 0.3 * rng.standard_normal(stop - start) > 0).astype("f8")


@row_loss
def logreg_loss(p: Any, X: Any, y: Any) -> Any:
    xp = X.__array_namespace__()
    z = X @ p["w"] + p["b"]
    return xp.log(1.0 + xp.exp(-xp.abs(z))) + xp.maximum(z, 0.0) - y * z


@row_loss
def mlp_loss(p: Any, X: Any, y: Any) -> Any:
    xp = X.__array_namespace__()
    z = xp.tanh(X @ p["W1"] + p["b1"]) @ p["w2"] + p["b2"]
    return xp.log(1.0 + xp.exp(-xp.abs(z))) + xp.maximum(z, 0.0) - y * z


def init_params(model: str, features: int, hidden: int = 32, seed: int = 0,
                dtype: Any = np.float64) -> dict:  # fmt: skip
    """The CLI models' starting parameters (logistic regression: zeros; the MLP: scaled
    normal weights, zero biases), in ``dtype`` (the data's, so that training stays in it)."""
    rng = np.random.default_rng(seed)
    if model == "logreg":
        p = {"w": np.zeros(features), "b": np.zeros(())}
    else:
        p = {"W1": rng.standard_normal((features, hidden)) / math.sqrt(features),
             "b1": np.zeros(hidden), "w2": rng.standard_normal(hidden) / math.sqrt(hidden),
             "b2": np.zeros(())}  # fmt: skip
    return {k: v.astype(dtype) for k, v in p.items()}


def main(argv: Sequence[str] | None = None) -> FitResult:
    ap = argparse.ArgumentParser(prog="python -m cubed_plugin.train",
                                 description=__doc__.splitlines()[0])  # fmt: skip
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--features", type=int, default=None,
                    help="columns of the synthetic data (default 50; with --data: the data's)")
    ap.add_argument("--model", choices=("logreg", "mlp"), default="logreg")
    ap.add_argument("--allowed-mem", default="150MB")
    ap.add_argument("--reserved-mem", default=None,
                    help="memory a worker holds before any data (default: measured on the "
                         "executor, plus 10%%)")  # fmt: skip
    ap.add_argument("--executor", default="threads",
                    choices=("single-threaded", "threads", "processes", "dask"))
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch-rows", type=int, default=None)
    ap.add_argument("--mode", choices=("auto", "one-pass", "graph"), default="auto")
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--data", default=None, help="a directory with X.zarr and y.zarr")
    ap.add_argument("--work-dir", default=None)
    ap.add_argument("--checkpoint-dir", default=None)
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    import cubed

    from .memory import plan_rows

    label_ops()  # the plan printed below names each op's part of the loss
    executor = measuring_processes() if a.executor == "processes" else a.executor
    spec = make_spec(a.allowed_mem, a.reserved_mem, a.work_dir, executor=executor)
    loss = logreg_loss if a.model == "logreg" else mlp_loss
    one_pass = a.mode != "graph"  # both models are row losses
    mode = "one-pass" if one_pass else "graph"
    data_dir = a.data
    if data_dir is None:
        features = 50 if a.features is None else a.features
        params = init_params(a.model, features)
        data_dir = os.path.join(spec.work_dir, "data")
        specs = pg.memory.spec((a.rows, features)), pg.memory.spec((a.rows,))
        chunk, _ = plan_rows(loss, params, *specs, rows=a.rows, data=(1, 2), mode=mode,
                             batch_rows=a.batch_rows, backend=spec)  # fmt: skip
        print(f"making {a.rows} x {features} synthetic rows in Zarr, {chunk} rows per chunk "
              f"(the most for which every task of a {mode} step fits: "
              "cubed_plugin.memory.plan_rows)")  # fmt: skip
        synthetic(data_dir, a.rows, features, chunk, a.model)
    X = cubed.from_zarr(f"{data_dir}/X.zarr", spec=spec)
    y = cubed.from_zarr(f"{data_dir}/y.zarr", spec=spec)
    if a.data is not None:  # the model fits the data: its columns, its floating dtype
        if X.ndim != 2 or a.features not in (None, X.shape[1]):
            raise ValueError(f"--data {a.data}: X.zarr has shape {X.shape}; the models take "
                             f"(rows, features) data (--features {a.features} does not match: "
                             "leave it out with --data)")  # fmt: skip
        floating = np.dtype(X.dtype).kind == "f"
        params = init_params(a.model, X.shape[1], dtype=X.dtype if floating else np.float64)
    print(f"data {fmt_bytes(X.nbytes + y.nbytes)} in chunks of {X.chunks[0][0]} rows; "
          f"allowed_mem {fmt_bytes(spec.allowed_mem)} (reserved_mem "
          f"{fmt_bytes(spec.reserved_mem)})")  # fmt: skip
    picks = _batches((X, y), a.batch_rows, random.key(0), 0)[0]
    targets, _, _ = _step(loss, params, (X, y), picks, spec, one_pass)
    plan = plan_of(*targets)
    print(f"memory plan of one step ({mode} mode; per task, as it will run):")
    print(f"  {'op':10} {'kind':14} {'task memory':>12} {'tasks':>6}  part")
    for name, node in plan.dag.nodes(data=True):
        op = node.get("primitive_op")
        if op is not None and name != "create-arrays":
            print(f"  {name:10} {node.get('op_name', '?'):14} {fmt_bytes(op.projected_mem):>12} "
                  f"{op.num_tasks:>6}  {part_of(plan.dag, name)}")  # fmt: skip
    print(f"  largest task {fmt_bytes(plan.max_projected_mem)} of allowed "
          f"{fmt_bytes(spec.allowed_mem)}; {plan.num_tasks} tasks")  # fmt: skip
    try:
        result = fit(loss, params, (X, y), optim.sgd(a.lr), steps=a.steps,
                     batch_rows=a.batch_rows, spec=spec, executor=executor,
                     checkpoint_dir=a.checkpoint_dir, mode=a.mode,
                     progress=not a.quiet)  # fmt: skip
    except TaskMemoryError as e:
        print("task memory per op, measured (one task per worker process) against projected:")
        print("  " + e.recorder.table(int(spec.allowed_mem)).replace("\n", "\n  "))
        raise
    rec = result.memory
    measured = [m for _, _, m in rec.report() if m is not None]
    print(f"trained {result.step} steps: loss {result.history['loss'][0]:.4f} -> "
          f"{result.history['loss'][-1]:.4f}")
    if measured:
        print("task memory per op, measured (one task per worker process) against projected:")
        print("  " + rec.table(int(spec.allowed_mem)).replace("\n", "\n  "))
    print(f"task memory: projected at most {fmt_bytes(rec.max_projected())}"
          + (f", measured at most {fmt_bytes(max(measured))}; every measured task within its "
             "projection and allowed_mem" if measured else
             " (measured peaks: use --executor processes)")
          + f"; allowed {fmt_bytes(spec.allowed_mem)}")
    return result


if __name__ == "__main__":
    try:
        main()
    except MemoryLimitError as e:
        sys.exit(f"refused before running: {e}")
    except TaskMemoryError as e:
        sys.exit(f"failed: {e}")
