"""Bounded-memory training on chunked data with Cubed, from the command line.

    python -m cubed_plugin --rows 2000000 --features 100 --allowed-mem 200MB

(or ``python -m cubed_plugin.train``, the same) makes synthetic data in Zarr, prints the memory
plan of a step, trains with a progress bar and reports the loss per step and the measured
memory against the projection. The data and Cubed's intermediate arrays go to a new temporary
work directory, printed first and removed at the end (``--keep`` keeps it); a directory the
user names (``--work-dir``, ``--data``) is never removed.
"""

from __future__ import annotations

import argparse
import math
import re
import shutil
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

import numpy as np

import pycograd_xp as pg
from pycograd_xp import optim, random
from pycograd_xp.memory import MemoryLimitError, format_bytes, parse_bytes

from ._cli_models import (
    accuracy,
    init_params,
    logreg_loss,
    mlp_loss,
    penalised,
    synthetic,
)
from ._executors import (
    BEAM_MODES,
    ENGINES,
    MARGIN,
    _need,
    make_executor,
    make_spec,
    worker_baseline,
)
from ._fit import FitResult, fit
from ._fit_steps import _batches, step_plan
from ._storage import configure, is_url, is_zarr, join, open_zarr, parse_option
from ._storage import size as stored_bytes
from .memory import TaskMemoryError, part_of
from .namespace import label_ops

__all__ = ["init_params", "logreg_loss", "main", "mlp_loss", "run", "synthetic"]


class _DefaultsHelp(argparse.ArgumentDefaultsHelpFormatter):
    """``--help`` shows each option's default; an option whose default is None (or a flag)
    says in its own help what happens without it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


def _parser(prog: str = "python -m cubed_plugin") -> argparse.ArgumentParser:
    """The command line's options, by group, with their defaults in ``--help``."""
    ap = argparse.ArgumentParser(
        prog=prog, description=__doc__.splitlines()[0], formatter_class=_DefaultsHelp
    )
    _data_options(ap.add_argument_group("the data"))
    _model_options(ap.add_argument_group("the model and its training"))
    _memory_options(ap.add_argument_group("memory"))
    _engine_options(ap.add_argument_group("where the tasks run"))
    _storage_options(ap.add_argument_group("where files go"))
    return ap


def _data_options(ap: Any) -> None:
    """The options of the data."""
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows of the synthetic data")
    ap.add_argument(
        "--features",
        type=int,
        default=None,
        help="columns of the synthetic data (default: 50; with --data: the data's)",
    )
    ap.add_argument(
        "--data",
        default=None,
        help="a directory or fsspec URL (s3://bucket/data) with X.zarr and y.zarr to train "
        "on, never removed (default: synthetic data made in the work directory)",
    )
    ap.add_argument(
        "--validation",
        default=None,
        metavar="DIR",
        help="a directory with X.zarr and y.zarr to validate on: the loss and the accuracy "
        "there after every epoch and the last step, without gradients, each task within "
        "--allowed-mem (default: no validation)",
    )


def _model_options(ap: Any) -> None:
    """The options of the model and its training."""
    ap.add_argument(
        "--model",
        choices=("logreg", "mlp"),
        default="logreg",
        help="logistic regression, or an MLP with one tanh layer of 32 units",
    )
    ap.add_argument(
        "--steps",
        type=int,
        default=10,
        help="optimizer steps (L-BFGS: iterations, each one or more passes over the data)",
    )
    ap.add_argument(
        "--optimizer",
        choices=("sgd", "adam", "lbfgs"),
        default="sgd",
        help="sgd and adam take --lr; lbfgs (full batch only) takes none: its line search "
        "picks each step (strong Wolfe conditions)",
    )
    ap.add_argument("--lr", type=float, default=0.5, help="the learning rate of sgd and adam")
    ap.add_argument(
        "--l2",
        type=float,
        default=0.0,
        metavar="ALPHA",
        help="an L2 penalty ALPHA/2 * ||weights||^2 (biases not penalised) added to the mean "
        "loss once per step by the driver (one-pass mode still); 1/(C * rows) is "
        "scikit-learn's LogisticRegression(C)",
    )
    ap.add_argument(
        "--batch-rows",
        type=int,
        default=None,
        help="rows per mini-batch, a multiple of the data's row chunks (default: full batch)",
    )
    ap.add_argument(
        "--mode",
        choices=("auto", "one-pass", "graph"),
        default="auto",
        help="one-pass: the loss and the gradients in one pass over the data; graph: one "
        "Cubed graph of the whole step; auto: one-pass for a row-separable loss (both "
        "models are)",
    )
    ap.add_argument(
        "--chunks-per-task",
        type=int,
        default=1,
        help="one-pass mode: row chunks each task reads and computes in turn (fewer tasks; on "
        "processes and dask later chunks reuse the heap the first paged in: 8 made a 10 GB "
        "epoch 1.4-1.7 times faster there, a task then peaking up to a few MB higher, still "
        "measured against its projection)",
    )
    ap.add_argument(
        "--patience",
        type=int,
        default=None,
        help="with --validation: stop when the validation loss has not improved for this "
        "many evaluations, and keep the best parameters (default: no early stopping)",
    )
    ap.add_argument("--quiet", action="store_true", help="no progress bars")


def _memory_options(ap: Any) -> None:
    """The options of memory."""
    ap.add_argument(
        "--allowed-mem",
        default="150MB",
        help="the memory each task may use, its worker's own included (per task, not per "
        "process: on threads and single-threaded the tasks run in this process, two at once "
        "on threads, beside the driver's own data; a worker process of dask, ray, lithops or "
        "spark holds its tasks, one at a time here, plus what it keeps between them)",
    )
    ap.add_argument(
        "--reserved-mem",
        default=None,
        help="memory a worker holds before any data (default: measured on the executor when the "
        "run starts, plus 10%%, and printed before the plan; on an executor that reports no "
        "task memory, beam and spark: a local processes worker's)",
    )


def _engine_options(ap: Any) -> None:
    """The options of where the tasks run."""
    ap.add_argument(
        "--executor",
        default="threads",
        choices=ENGINES,
        help="where tasks run (each engine needs its extra: pip install "
        "'pycograd-xp[dask]', [ray], [beam], [lithops], [spark])",
    )
    ap.add_argument(
        "--workers",
        type=int,
        default=None,
        help="worker processes (processes, a local Dask cluster, Ray's CPUs, Beam's "
        "multi-process workers, Lithops, Spark's local[N]; default: up to 4, the CPUs)",
    )
    ap.add_argument(
        "--scheduler",
        default=None,
        help="dask: an existing cluster's scheduler address (default: a LocalCluster of "
        "--workers processes of one thread, started for the run)",
    )
    ap.add_argument(
        "--ray-address",
        default=None,
        help="ray: an existing cluster's address ('auto': the local one; default: a local Ray "
        "started for the run)",
    )
    ap.add_argument(
        "--beam-mode",
        default="in_memory",
        choices=BEAM_MODES,
        help="beam: the DirectRunner's running mode (multi_processing retries nothing: a "
        "worker killed fails the run)",
    )
    ap.add_argument(
        "--retries",
        type=int,
        default=2,
        help="retries of a failed task, a dead worker's included (processes, dask, ray, "
        "lithops; spark: local[N, retries + 1]; beam's DirectRunner retries nothing)",
    )


def _storage_options(ap: Any) -> None:
    """The options of where files go."""
    ap.add_argument(
        "--work-dir",
        default=None,
        help="where the synthetic data and Cubed's intermediate arrays go, a directory or an "
        "fsspec URL (s3://bucket/work), never removed (default: a new temporary directory, "
        "removed at the end unless --keep)",
    )
    ap.add_argument(
        "--keep",
        action="store_true",
        help="keep the temporary work directory at the end (it is printed first)",
    )
    ap.add_argument(
        "--checkpoint-dir",
        default=None,
        help="save the training state there every step, and resume from it when it holds one: "
        "a directory or an fsspec URL (s3://bucket/run; written atomically on both) "
        "(default: no checkpoints)",
    )
    ap.add_argument(
        "--storage-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an fsspec storage option for the URLs of --data, --validation, --work-dir and "
        "--checkpoint-dir (repeat it: --storage-option endpoint_url=http://127.0.0.1:9000 "
        "--storage-option anon=true; a VALUE that is JSON is read as JSON); set in fsspec's "
        "configuration of the protocol, as FSSPEC_S3='{...}' would, so Cubed's workers get "
        "them too. Credentials come from the store's usual environment (AWS_*, ...)",
    )


# the most row chunks the command makes its synthetic data in (a Zarr file and, each epoch, a
# task each): --batch-rows sets the chunks to at most a batch
MAX_SYNTHETIC_CHUNKS = 10_000


def _check_args(ap: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    """Refuse, before anything is made, the options the run cannot use (exits with status 2)."""
    for name, least in (
        ("rows", 1),
        ("features", 1),
        ("steps", 1),
        ("workers", 1),
        ("batch_rows", 1),
        ("retries", 0),
        ("chunks_per_task", 1),
    ):
        value = getattr(a, name)
        if value is not None and value < least:
            ap.error(f"--{name.replace('_', '-')} must be at least {least}, got {value}")
    if a.chunks_per_task > 1 and (a.mode == "graph" or a.executor == "beam"):
        ap.error(
            f"--chunks-per-task {a.chunks_per_task} takes one-pass mode, which --mode "
            f"{a.mode} --executor {a.executor} does not run (graph mode, or Beam, which sends "
            "no task results back); leave it at 1"
        )
    if a.optimizer != "lbfgs" and not a.lr > 0:  # L-BFGS takes no learning rate
        ap.error(f"--lr must be positive, got {a.lr}")
    if not a.l2 >= 0:
        ap.error(f"--l2 must be at least 0, got {a.l2}")
    try:  # an engine whose extra is not installed: one line, before any data is made
        _need(a.executor)
    except ImportError as e:
        ap.error(f"--executor {a.executor}: {e}")
    for name in ("allowed_mem", "reserved_mem"):
        value = getattr(a, name)
        if value is None:
            continue
        option = f"--{name.replace('_', '-')}"
        try:
            n = parse_bytes(value)  # as Dask's parse_bytes: 150MB, 150mb, 100 KiB, 1e8
        except ValueError:
            ap.error(
                f"{option} {value!r} is not an amount of memory: a number and a unit (150MB, "
                "2GB, 512MiB)"
            )
        if re.fullmatch(r"\s*[0-9.eE+-]+\s*", str(value)):
            print(
                f"{ap.prog}: warning: {option} {value} has no unit: read as {n:,} bytes "
                f"({format_bytes(n)}); give one to mean more ({value}MB)",
                file=sys.stderr,
            )
        setattr(a, name, n)
    try:
        a.storage_options = dict(parse_option(o) for o in a.storage_option)
    except ValueError as e:
        ap.error(str(e))
    urls = [u for u in (a.data, a.validation, a.work_dir, a.checkpoint_dir) if u and is_url(u)]
    if a.storage_options:
        if not urls:
            ap.error(
                "--storage-option is for URLs (s3://...): no --data, --validation, "
                "--work-dir or --checkpoint-dir is one"
            )
        configure(urls, a.storage_options)
    if a.data is not None:  # a directory or a URL: what it must hold
        for part in ("X.zarr", "y.zarr"):
            if not is_zarr(join(a.data, part)):
                ap.error(
                    f"--data {a.data}: no {part} there (the data is a directory holding X.zarr, "
                    "the rows, and y.zarr, the labels; cubed_plugin.train.synthetic writes one)"
                )
    if a.validation is not None:
        for part in ("X.zarr", "y.zarr"):
            if not is_zarr(join(a.validation, part)):
                ap.error(
                    f"--validation {a.validation}: no {part} there (validation data is a "
                    "directory like --data's, holding X.zarr and y.zarr)"
                )
    if a.patience is not None:
        if a.validation is None:
            ap.error("--patience needs --validation: it watches the validation loss")
        if a.patience < 1:
            ap.error(f"--patience must be at least 1, got {a.patience}")
    if a.data is None and a.batch_rows is not None:
        chunks = -(-a.rows // a.batch_rows)
        if chunks > MAX_SYNTHETIC_CHUNKS:
            ap.error(
                f"--batch-rows {a.batch_rows} makes the synthetic data's row chunks at most "
                f"{a.batch_rows} rows (a batch is whole chunks): {chunks:,} chunks of "
                f"{a.rows:,} rows, a file and a task each; give --batch-rows at least "
                f"{-(-a.rows // MAX_SYNTHETIC_CHUNKS):,}, or fewer --rows"
            )


def _optimizer(a: argparse.Namespace) -> Any:
    """The optimizer ``--optimizer`` names."""
    if a.optimizer == "lbfgs":
        return optim.lbfgs()
    return optim.sgd(a.lr) if a.optimizer == "sgd" else optim.adam(a.lr)


def main(argv: Sequence[str] | None = None, prog: str = "python -m cubed_plugin") -> FitResult:
    """The command line: synthetic data (or ``--data``), the memory plan of a step, then
    :func:`~cubed_plugin._fit.fit` with a progress bar and the measured task memory. Without
    ``--work-dir``, everything is written to a new temporary directory, removed at the end
    (even when the run fails) unless ``--keep``.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments (None: ``sys.argv[1:]``); ``--help`` lists them with their defaults.
    prog : str, default "python -m cubed_plugin"
        The program's name in the help.

    Returns
    -------
    FitResult
        The run's result.
    """
    ap = _parser(prog)
    a = ap.parse_args(argv)
    a.prog = prog
    _check_args(ap, a)
    if a.optimizer == "lbfgs" and a.batch_rows is not None:
        ap.error(
            "--optimizer lbfgs takes the full batch (its line search compares losses over the "
            "same data): leave out --batch-rows, or use --optimizer sgd or adam"
        )
    if a.work_dir is not None:
        print(f"work directory {a.work_dir} (--work-dir: kept)")
        return _main(a, a.work_dir)
    work_dir = tempfile.mkdtemp(prefix="pycograd-cubed-")
    print(
        f"work directory {work_dir} (temporary: "
        + ("kept at the end, --keep)" if a.keep else "removed at the end; --keep keeps it)")
    )
    try:
        return _main(a, work_dir)
    finally:
        size = format_bytes(stored_bytes(work_dir))
        if a.keep:
            print(f"kept the work directory {work_dir} ({size})")
        else:
            shutil.rmtree(work_dir, ignore_errors=True)
            print(f"removed the work directory {work_dir} ({size})")


def _main(a: argparse.Namespace, work_dir: str) -> FitResult:
    """The command's run, phase by phase: the spec, the data, the plan of one step, the
    training, the report."""
    label_ops()  # the plan printed below names each op's part of the loss
    executor = make_executor(
        a.executor,
        workers=a.workers,
        scheduler=a.scheduler,
        ray_address=a.ray_address,
        beam_mode=a.beam_mode,
        retries=a.retries,
    )
    spec = _spec(a, executor, work_dir)
    loss = penalised(logreg_loss if a.model == "logreg" else mlp_loss, a.model, a.l2)
    one_pass = a.mode != "graph"  # both models are row losses
    X, y, params = _data(a, spec, loss, "one-pass" if one_pass else "graph")
    _print_plan(a, loss, params, (X, y), spec, one_pass, executor)
    validation, metrics = None, None
    if a.validation is not None:
        validation = (
            open_zarr(join(a.validation, "X.zarr"), spec=spec),
            open_zarr(join(a.validation, "y.zarr"), spec=spec),
        )
        metrics = {"accuracy": accuracy}
    try:
        result = fit(
            loss,
            params,
            (X, y),
            _optimizer(a),
            validation=validation,
            metrics=metrics,
            early_stopping=a.patience,
            steps=a.steps,
            batch_rows=a.batch_rows,
            spec=spec,
            executor=executor,
            checkpoint_dir=a.checkpoint_dir,
            mode=a.mode,
            progress=not a.quiet,
            chunks_per_task=a.chunks_per_task,
        )
    except TaskMemoryError as e:
        print("task memory per op, measured (each task's own peak) against projected:")
        print("  " + e.recorder.table(int(spec.allowed_mem)).replace("\n", "\n  "))
        raise
    _report(result, spec)
    return result


def _spec(a: argparse.Namespace, executor: Any, work_dir: str) -> Any:
    """The run's Spec: ``--allowed-mem``, and ``--reserved-mem`` or the executor's worker
    measured; exit 2 when the budget leaves no room for any data."""
    # the stores the run reads or writes: their storage options in the spec (for the data and
    # the checkpoints), the data on an object store read in the workers' measured warm-up (its
    # client loaded: cubed_plugin.worker_baseline's reads)
    reads = [join(d, f"{n}.zarr") for d in (a.data, a.validation) if d for n in ("X", "y")]
    options = a.storage_options or None
    try:
        spec = make_spec(
            a.allowed_mem,
            a.reserved_mem,
            work_dir,
            executor=executor,
            storage_options=options,
            reads=reads,
        )
    except RuntimeError as e:  # an executor that reports no task memory (beam, spark)
        print(f"{e}: reserving a local processes worker's memory instead")
        reserved = math.ceil(worker_baseline("processes") * MARGIN)
        spec = make_spec(
            a.allowed_mem,
            reserved,
            work_dir,
            executor=executor,
            storage_options=options,
            reads=reads,
        )
    else:
        if a.reserved_mem is None:
            from ._baseline import cache_path

            kept = cache_path()
            base = worker_baseline(executor, work_dir=work_dir, reads=reads)
            print(
                f"reserved_mem {format_bytes(spec.reserved_mem)}: a warm worker of --executor "
                f"{a.executor} holds {format_bytes(base)} before any data "
                f"(cubed_plugin.worker_baseline, kept in {kept or 'no file'}), and 10% more"
            )
    if spec.allowed_mem <= spec.reserved_mem:  # no room for any data: the budget, not the model
        sys.stderr.write(
            f"{a.prog}: error: --allowed-mem "
            f"{format_bytes(spec.allowed_mem)} is below what a worker of --executor "
            f"{a.executor} holds before any task ({format_bytes(spec.reserved_mem)}, its "
            "reserved_mem, measured with a margin): give --allowed-mem above it, e.g. "
            f"{format_bytes(2 * spec.reserved_mem)}\n"
        )
        raise SystemExit(2)
    return spec


def _data(a: argparse.Namespace, spec: Any, loss: Any, mode: str) -> tuple[Any, Any, Any]:
    """``(X, y, params)``: ``--data`` opened (the model fitted to its columns and floating
    dtype), or synthetic rows made in chunks as large as a ``mode`` step's tasks allow."""
    from .memory import plan_rows

    data_dir = a.data
    if data_dir is None:
        features = 50 if a.features is None else a.features
        params = init_params(a.model, features)
        data_dir = join(spec.work_dir, "data")
        specs = pg.memory.spec((a.rows, features)), pg.memory.spec((a.rows,))
        chunk, _ = plan_rows(
            loss,
            params,
            *specs,
            rows=a.rows,
            data=(1, 2),
            mode=mode,
            batch_rows=a.batch_rows,
            backend=spec,
        )
        print(
            f"making {a.rows} x {features} synthetic rows in Zarr in {data_dir}, {chunk} rows "
            "per chunk "
            f"(the most for which every task of a {mode} step fits: "
            "cubed_plugin.memory.plan_rows)"
        )
        synthetic(data_dir, a.rows, features, chunk, a.model)
    X = open_zarr(join(data_dir, "X.zarr"), spec=spec)
    y = open_zarr(join(data_dir, "y.zarr"), spec=spec)
    if a.data is not None:  # the model fits the data: its columns, its floating dtype
        if X.ndim != 2 or a.features not in (None, X.shape[1]):
            raise ValueError(
                f"--data {a.data}: X.zarr has shape {X.shape}; the models take "
                f"(rows, features) data (--features {a.features} does not match: "
                "leave it out with --data)"
            )
        floating = np.dtype(X.dtype).kind == "f"
        params = init_params(a.model, X.shape[1], dtype=X.dtype if floating else np.float64)
    print(
        f"data {format_bytes(X.nbytes + y.nbytes)} in chunks of {X.chunks[0][0]} rows; "
        f"allowed_mem {format_bytes(spec.allowed_mem)} (reserved_mem "
        f"{format_bytes(spec.reserved_mem)})"
    )
    return X, y, params


def _print_plan(
    a: argparse.Namespace,
    loss: Any,
    params: Any,
    data: tuple,
    spec: Any,
    one_pass: bool,
    executor: Any,
) -> None:
    """The memory plan of one step, per op, as it will run."""
    from ._cubed_seam import node_kind, op_nodes, plan_dag

    picks = _batches(data, a.batch_rows, random.key(0), 0)[0]
    plan = step_plan(loss, params, data, picks, spec, one_pass, executor, a.chunks_per_task)
    print(
        f"memory plan of one step ({'one-pass' if one_pass else 'graph'} mode; per task, "
        "as it will run):"
    )
    print(f"  {'op':10} {'kind':14} {'task memory':>12} {'tasks':>6}  part")
    dag = plan_dag(plan)
    for name, op in op_nodes(dag):
        if name != "create-arrays":
            print(
                f"  {name:10} {node_kind(dag, name):14} {format_bytes(op.projected_mem):>12} "
                f"{op.num_tasks:>6}  {part_of(dag, name)}"
            )
    print(
        f"  largest task {format_bytes(plan.max_projected_mem)} of allowed "
        f"{format_bytes(spec.allowed_mem)}; {plan.num_tasks} tasks"
    )


def _report(result: FitResult, spec: Any) -> None:
    """What the run did: the loss, the validation figures, each op's task memory measured
    against projected."""
    rec = result.memory
    measured = [m for _, _, m in rec.report() if m is not None]
    print(
        f"trained {result.step} steps: loss "
        f"{result.history.get('initial_loss', result.history['loss'])[0]:.4f} -> "
        f"{result.history['loss'][-1]:.4f}"
    )
    if result.history.get("val_loss"):
        val = result.history["val_loss"]
        acc = result.history.get("val_accuracy")
        print(
            f"validation loss {val[0]:.4f} -> {val[-1]:.4f}"
            + (f", accuracy {acc[0]:.3f} -> {acc[-1]:.3f}" if acc else "")
            + (
                f"; stopped early, parameters of step {result.best_step} (best validation loss)"
                if result.stopped_early
                else ""
            )
        )
    if measured:
        print("task memory per op, measured (each task's own peak) against projected:")
        print("  " + rec.table(int(spec.allowed_mem)).replace("\n", "\n  "))
    print(
        f"task memory: projected at most {format_bytes(rec.max_projected())}"
        + (
            f", measured at most {format_bytes(max(measured))}; every measured task within its "
            "projection and allowed_mem"
            if measured
            else f" (measured peaks: none, {rec.cannot_measure()}; use --executor processes, "
            "or dask on workers of one thread)"
        )
        + f"; allowed {format_bytes(spec.allowed_mem)}"
    )


def run(prog: str = "python -m cubed_plugin") -> None:
    """:func:`main` as a program: a refusal or a failed step exits with its message.

    Parameters
    ----------
    prog : str, default "python -m cubed_plugin"
        The program's name in the help.
    """
    try:
        main(prog=prog)
    except MemoryLimitError as e:
        sys.exit(f"refused before running: {e}")
    except TaskMemoryError as e:
        sys.exit(f"failed: {e}")


if __name__ == "__main__":
    run()
