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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import pycograd_xp as pg
from pycograd_xp import checkpoint, optim, random
from pycograd_xp.memory._project import MemoryLimitError, _fmt

from ._compute import check
from .steps import (
    RowLoss,
    graph_fusion,
    graph_step,
    one_pass_step,
    plan_one_pass_rows,
    row_loss,
    unflatten_sums,
)

__all__ = ["FitResult", "MemoryRecorder", "Progress", "fit", "main", "make_spec",
           "measuring_processes", "row_loss"]


def make_spec(allowed_mem: str | int = "1GB", reserved_mem: str | int | None = None,
              work_dir: str | None = None, measure: bool = False) -> Any:  # fmt: skip
    """A ``cubed.Spec``; ``reserved_mem`` measured with ``cubed.measure_reserved_mem`` when
    ``measure`` (it runs a small task), else given (default 100 MB)."""
    import cubed

    work_dir = work_dir or tempfile.mkdtemp(prefix="pycograd-cubed-")
    if measure:
        reserved_mem = cubed.measure_reserved_mem(executor=None, work_dir=work_dir)
    return cubed.Spec(work_dir=work_dir, allowed_mem=allowed_mem,
                      reserved_mem=reserved_mem if reserved_mem is not None else "100MB")


def _executor(executor: Any) -> Any:
    if executor is None or not isinstance(executor, str):
        return executor
    from cubed.runtime.create import create_executor

    return create_executor(executor)


def measuring_processes(preload: Sequence[str] = ("numpy", "zarr", "cubed", "pycograd_xp",
                                                  "cubed_plugin.steps")) -> Any:  # fmt: skip
    """A Cubed executor (for ``fit(executor=...)`` or ``cubed.compute(executor=...)``) under
    which each task's measured peak is its own: Cubed's processes executor with every task in
    a fresh worker (``max_tasks_per_child=1``) forked from a server that has already imported
    ``preload`` (a fork, not an interpreter start, per task). A spawned worker reused for
    several tasks reports its largest so far, and one started with exec starts from its
    parent's lifetime peak; a forked one starts from the server's current, small, resident set.

    One change to Cubed's executor: a compute returns only after its pool has stopped every
    worker. Cubed shuts its pool down without waiting, and CPython's pool (gh-119592, not fixed
    in 3.11) then races with a worker leaving after its one task: the pool's manager thread
    finds the pool's state cleared, dies, and leaves an idle worker that the interpreter waits
    for at exit, forever. A failed compute also waits for its running tasks first."""
    import multiprocessing

    multiprocessing.get_context("forkserver").set_forkserver_preload(list(preload))
    return _measuring_executor_class()()


@functools.cache
def _measuring_executor_class() -> type:
    from cubed.runtime.asyncio import async_map_dag
    from cubed.runtime.backup import use_backups_default
    from cubed.runtime.executors.local import (
        ProcessesExecutor,
        check_runtime_memory,
        processes_create_futures_func,
        run_func_processes,
    )

    class MeasuringProcesses(ProcessesExecutor):
        """Cubed's ``ProcessesExecutor._async_execute_dag`` with a forkserver pool of one task
        per worker that is shut down waiting (see :func:`measuring_processes`)."""

        async def _async_execute_dag(self, dag: Any, callbacks: Any = None, spec: Any = None,
                                     compute_arrays_in_parallel: bool | None = None,
                                     **kwargs: Any) -> None:  # fmt: skip
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            max_workers = kwargs.pop("max_workers", os.cpu_count())
            if spec is not None:
                check_runtime_memory(spec, max_workers)
                if "use_backups" not in kwargs and use_backups_default(spec):
                    kwargs["use_backups"] = True
            pool = ProcessPoolExecutor(max_workers=max_workers, max_tasks_per_child=1,
                                       mp_context=multiprocessing.get_context("forkserver"))
            try:
                await async_map_dag(processes_create_futures_func(pool, run_func_processes),
                                    dag=dag, callbacks=callbacks,
                                    compute_arrays_in_parallel=compute_arrays_in_parallel,
                                    **kwargs)  # fmt: skip
            finally:
                # waits for the tasks already running (a failed compute's included), then for
                # every worker to stop: none outlives the compute
                pool.shutdown(wait=True, cancel_futures=True)

    return MeasuringProcesses


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


class MemoryRecorder:
    """Measured against projected task memory, per op (a ``cubed.Callback``). Only executors
    that measure tasks (processes) report measured peaks."""

    def __new__(cls) -> Any:
        import cubed

        class _Recorder(cubed.Callback):
            def __init__(self) -> None:
                self.projected: dict[str, int] = {}
                self.measured: dict[str, int] = {}
                self.kinds: dict[str, str] = {}
                self.steps: list[list[str]] = []  # the ops of each compute, in plan order

            def on_compute_start(self, event: Any) -> None:
                ops = []
                for name, node in event.dag.nodes(data=True):
                    op = node.get("primitive_op")
                    if op is not None:
                        self.projected[name] = int(op.projected_mem)
                        self.kinds[name] = str(node.get("op_name", "?"))
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

            def table(self, allowed_mem: int | None = None) -> str:
                """Measured against projected task memory per op of the last step; an op's
                measured peak is the largest over every step at its place in the plan (the
                steps' plans have one shape)."""
                if not self.steps:
                    return "no step computed"
                last = self.steps[-1]
                same = [s for s in self.steps if len(s) == len(last)]
                lines = [f"{'op':14} {'kind':14} {'projected':>11} {'measured':>11} "
                         f"{'measured/projected':>19}"]  # fmt: skip
                for j, op in enumerate(last):
                    proj = max(self.projected[s[j]] for s in same)
                    ms = [self.measured[s[j]] for s in same if s[j] in self.measured]
                    meas = max(ms) if ms else None
                    ratio = f"{meas / proj:19.2f}" if meas is not None and proj else f"{'-':>19}"
                    lines.append(f"{op:14} {self.kinds[op]:14} {_fmt(proj):>11} "
                                 f"{_fmt(meas) if meas is not None else '-':>11} {ratio}")
                if allowed_mem is not None:
                    lines.append(f"allowed_mem {_fmt(allowed_mem)}; over {len(same)} steps")
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
        compute_kwargs: dict | None = None) -> FitResult:  # fmt: skip
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
    """
    import cubed

    if (steps is None) == (epochs is None):
        raise ValueError("fit: give exactly one of steps= or epochs=")
    if mode not in ("auto", "one-pass", "graph"):
        raise ValueError(f"fit: mode must be 'auto', 'one-pass' or 'graph', got {mode!r}")
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
    recorder = MemoryRecorder()
    ex = _executor(executor)
    while step < total:
        epoch, within = divmod(step, max(per_epoch, 1))
        picks = _batches(data, batch_rows, key, epoch)[within]
        batch = _take_chunks(data, picks)
        rows = _rows(batch)
        t0 = time.perf_counter()
        host_p = pg.tree_map(lambda a: np.asarray(pg.unwrap(a)), p)
        work = _work_snapshot(spec)
        if one_pass:
            total_sums, td, shapes = one_pass_step(loss, host_p, batch,
                                                   chunk_numbers=picks)
            check(total_sums)
            sums = cubed.compute(total_sums, executor=ex, callbacks=[*callbacks, recorder,
                                 Progress(f"step {step + 1}", disable=not progress)],
                                 **(compute_kwargs or {}))[0]  # fmt: skip
            value, grads = unflatten_sums(np.asarray(sums), td, shapes, rows, loss.reduction)
        else:
            v, g = graph_step(loss, host_p, batch, spec)
            kw = {"optimize_function": graph_fusion(), **(compute_kwargs or {})}
            check(v, g, optimize_function=kw["optimize_function"])
            from ._compute import compute

            value, grads = compute(v, g, executor=ex, callbacks=[*callbacks, recorder,
                                   Progress(f"step {step + 1}", disable=not progress)],
                                   **kw)  # fmt: skip
            value = float(value)
        _clean_work(spec, work)
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


def init_params(model: str, features: int, hidden: int = 32, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    if model == "logreg":
        return {"w": np.zeros(features), "b": np.zeros(())}
    return {"W1": rng.standard_normal((features, hidden)) / math.sqrt(features),
            "b1": np.zeros(hidden), "w2": rng.standard_normal(hidden) / math.sqrt(hidden),
            "b2": np.zeros(())}  # fmt: skip


def main(argv: Sequence[str] | None = None) -> FitResult:
    ap = argparse.ArgumentParser(prog="python -m cubed_plugin.train",
                                 description=__doc__.splitlines()[0])  # fmt: skip
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--features", type=int, default=50)
    ap.add_argument("--model", choices=("logreg", "mlp"), default="logreg")
    ap.add_argument("--allowed-mem", default="150MB")
    ap.add_argument("--reserved-mem", default="80MB")
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
    from .memory import project as project_chunked

    spec = make_spec(a.allowed_mem, a.reserved_mem, a.work_dir)
    loss = logreg_loss if a.model == "logreg" else mlp_loss
    params = init_params(a.model, a.features)
    xp = pg.namespace(cubed)
    one_pass = a.mode != "graph"  # both models are row losses
    data_dir = a.data
    if data_dir is None:
        data_dir = os.path.join(spec.work_dir, "data")
        spec_x = pg.memory.spec((a.rows, a.features))
        spec_y = pg.memory.spec((a.rows,))
        if one_pass:
            chunk, _ = plan_one_pass_rows(loss, params, (spec_x, spec_y), a.rows, spec)
        else:
            w = pg.tree_map(lambda v: xp.asarray(cubed.asarray(v, spec=spec)), params)
            chunk, _ = plan_rows(loss, w, spec_x, spec_y, rows=a.rows, data=(1, 2),
                                 backend=spec)  # fmt: skip
        chunk = max(1, min(chunk, a.rows))
        print(f"making {a.rows} x {a.features} synthetic rows in Zarr, {chunk} rows per chunk")
        synthetic(data_dir, a.rows, a.features, chunk, a.model)
    X = cubed.from_zarr(f"{data_dir}/X.zarr", spec=spec)
    y = cubed.from_zarr(f"{data_dir}/y.zarr", spec=spec)
    print(f"data {_fmt(X.nbytes + y.nbytes)} in chunks of {X.chunks[0][0]} rows; allowed_mem "
          f"{_fmt(spec.allowed_mem)} (reserved {_fmt(spec.reserved_mem)})")
    if one_pass:
        total, _, _ = one_pass_step(loss, params, (X, y))
        plan = cubed.plan(total)
        print("memory plan of one step (one-pass mode: forward and backward of a chunk in one "
              "task; per task, Cubed's projections):")  # fmt: skip
        print(f"  {'op':10} {'kind':14} {'task memory':>12} {'tasks':>6}")
        for name, node in plan.dag.nodes(data=True):
            op = node.get("primitive_op")
            if op is not None and name != "create-arrays":
                print(f"  {name:10} {node.get('op_name', '?'):14} {_fmt(op.projected_mem):>12} "
                      f"{op.num_tasks:>6}")  # fmt: skip
        print(f"  largest task {_fmt(plan.max_projected_mem)} of allowed "
              f"{_fmt(spec.allowed_mem)}; {plan.num_tasks} tasks")  # fmt: skip
    else:
        w = pg.tree_map(lambda v: xp.asarray(cubed.asarray(v, spec=spec)), params)
        plan = project_chunked(loss, w, xp.asarray(X), xp.asarray(y))
        lines = str(plan).splitlines()
        top = sorted(plan.rows, key=lambda r: -r.projected_bytes)[:8]
        print("memory plan of one step (graph mode; per task, Cubed's projections):")
        print("  " + lines[0] + "\n  " + lines[1])
        for r in top:
            print(f"  {r.op:10} {r.kind:14} {r.phase:9} {_fmt(r.projected_bytes):>12} "
                  f"{r.num_tasks:>6}")  # fmt: skip
        print(f"  ... and {len(plan.rows) - len(top)} more ops")
    executor = measuring_processes() if a.executor == "processes" else a.executor
    result = fit(loss, params, (X, y), optim.sgd(a.lr), steps=a.steps, batch_rows=a.batch_rows,
                 spec=spec, executor=executor, checkpoint_dir=a.checkpoint_dir, mode=a.mode,
                 progress=not a.quiet)  # fmt: skip
    rec = result.memory
    measured = [m for _, _, m in rec.report() if m is not None]
    print(f"trained {result.step} steps: loss {result.history['loss'][0]:.4f} -> "
          f"{result.history['loss'][-1]:.4f}")
    if measured:
        print("task memory per op, measured (one task per worker process) against projected:")
        print("  " + rec.table(int(spec.allowed_mem)).replace("\n", "\n  "))
    print(f"task memory: projected at most {_fmt(rec.max_projected())}"
          + (f", measured at most {_fmt(max(measured))}" if measured else
             " (measured peaks: use --executor processes)")
          + f"; allowed {_fmt(spec.allowed_mem)}; over projected: {len(rec.over())} ops")
    return result


if __name__ == "__main__":
    try:
        main()
    except MemoryLimitError as e:
        sys.exit(f"refused before running: {e}")
