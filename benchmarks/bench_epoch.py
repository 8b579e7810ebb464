"""Seconds per epoch of logistic regression on data in Zarr: ours beside what users run instead
(issue 21, point 8).

The data: ``--rows`` x ``--features`` float32 in Zarr, chunks of ``--chunk`` rows, made once
with ``bench_lbfgs.make_data`` (``cubed_plugin.train.synthetic``'s recipe; ``--noise 0.85``
gives an optimum near 0.48, as the issue's data). Every contender trains the same model, the
mean logistic loss of ``X w + b`` (float32 parameters, zeros at the start), for ``--epochs``
epochs, one pass over the data each:

- **one Zarr read pass** (the floor): every chunk of X and y read with Zarr, in one thread;
- **cubed.sum read pass**: ``cubed.compute(sum(X, axis=0), sum(y))`` on the threads executor;
- **ours**: ``cubed_plugin.fit`` with ``optim.sgd(--lr)``, ``allowed_mem`` ``--allowed-mem``
  (``make_spec``: reserved_mem measured per executor): one-pass mode full batch (one exact
  gradient step per epoch) on threads and on processes (``measuring_processes``: forked
  workers kept across steps, each task's memory measured on its own), graph mode full batch on
  threads, and mini-batches of ``--batch-chunks`` chunks (shuffled chunks, one SGD step per
  batch) on threads and on processes. Each epoch is a call of ``fit(epochs=1)`` from the last
  parameters (the shuffle drawn anew per epoch); ``fit`` keeps its planned steps across calls,
  so epochs after the first run the plan the first one made;
- **PyTorch** (float32, one thread) reading the Zarr chunks through a ``DataLoader`` with 0
  workers: mini-batch SGD over batches of ``--batch-chunks`` shuffled chunks, and full-batch
  accumulation (the gradient of each chunk's share of the mean added up, one step per epoch:
  ours' full-batch step);
- **scikit-learn** ``SGDClassifier(loss="log_loss").partial_fit`` on each chunk in turn;
- **dask-ml** on a LocalCluster (``--dask-workers`` processes of one thread, ``--dask-memory``
  each; skipped with a message when dask-ml is not installed): ``LogisticRegression(solver=
  "lbfgs")`` (seconds per pass over the data: its Dask computations, counted as
  ``bench_lbfgs`` counts them) and ``Incremental(SGDClassifier)`` (seconds per epoch). It runs
  after the others, not interleaved (a cluster of its own).

The contenders run interleaved, one epoch each per round, so that the noise of a shared machine
hits all of them alike; seconds per epoch is the median of the epochs after the first (which
pays imports, pools and plans). Peak memory is measured apart, each contender alone in a fresh
process for two epochs: the largest sum of the resident sets of that process and all its
children (workers included; pages shared between them counted in each), sampled every 10 ms.
The final loss is the mean logistic loss over all the data at each contender's final
parameters (one float64 NumPy pass). "exact": a full-batch gradient; "stochastic": steps on
parts of the data.

    python benchmarks/bench_epoch.py [--rows 2000000] [--features 50] [--chunk 50000]
        [--epochs 5] [--data DIR] [--json PATH] [--only NAME,NAME] [--no-rss] [--no-dask]

(short names for ``--only``: read, sum, ours-threads, ours-processes, ours-graph,
ours-batches-threads, ours-batches-processes, torch-full, torch-batches, sklearn, dask)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import _common  # noqa: F401  (thread pinning, glibc thresholds)
import numpy as np
from bench_lbfgs import make_data

FLOOR = "one Zarr read pass (the floor)"


class Contender:
    """One way of running an epoch: ``epoch()`` runs one, ``params()`` gives (w, b) after it
    (None for the read passes)."""

    name = ""
    gradient = "-"

    def epoch(self) -> None:
        raise NotImplementedError

    def params(self) -> tuple[np.ndarray, float] | None:
        return None


class ZarrRead(Contender):
    name, gradient = FLOOR, "-"

    def __init__(self, a: argparse.Namespace) -> None:
        import zarr

        self.zx, self.zy = zarr.open_array(f"{a.data}/X.zarr"), zarr.open_array(f"{a.data}/y.zarr")
        self.chunk = a.chunk

    def epoch(self) -> None:
        for start in range(0, self.zx.shape[0], self.chunk):
            self.zx[start : start + self.chunk]
            self.zy[start : start + self.chunk]


class CubedSum(Contender):
    name, gradient = "cubed.sum read pass, threads", "-"

    def __init__(self, a: argparse.Namespace) -> None:
        import cubed

        from cubed_plugin.train import make_spec

        spec = make_spec(a.allowed_mem, executor="threads", work_dir=_work(a, "sum"))
        self.X = cubed.from_zarr(f"{a.data}/X.zarr", spec=spec)
        self.y = cubed.from_zarr(f"{a.data}/y.zarr", spec=spec)

    def epoch(self) -> None:
        import cubed

        cubed.compute(cubed.sum(self.X, axis=0), cubed.sum(self.y), executor=None)


class Ours(Contender):
    """``cubed_plugin.fit``, one epoch per call, from the last parameters."""

    def __init__(
        self, a: argparse.Namespace, executor: str, mode: str = "one-pass", batch: bool = False
    ) -> None:
        import cubed

        from cubed_plugin.train import init_params, make_spec, measuring_processes
        from pycograd_xp import optim, random

        self.ex = measuring_processes() if executor == "processes" else executor
        self.spec = make_spec(a.allowed_mem, executor=self.ex, work_dir=_work(a, executor))
        self.X = cubed.from_zarr(f"{a.data}/X.zarr", spec=self.spec)
        self.y = cubed.from_zarr(f"{a.data}/y.zarr", spec=self.spec)
        self.p = init_params("logreg", a.features, dtype=np.float32)
        self.mode, self.optimizer = mode, optim.sgd(a.lr)
        self.batch_rows = a.batch_chunks * a.chunk if batch else None
        self.key, self.n = random.key(0), 0
        what = (
            f"mini-batches of {a.batch_chunks} chunks ({self.batch_rows:,} rows)"
            if batch
            else f"{mode}, full batch"
        )
        self.name = f"ours, {what}, {executor}"
        self.gradient = "stochastic" if batch else "exact"

    def epoch(self) -> None:
        from cubed_plugin.train import fit
        from pycograd_xp import random

        result = fit(
            _logreg(),
            self.p,
            (self.X, self.y),
            self.optimizer,
            epochs=1,
            batch_rows=self.batch_rows,
            mode=self.mode,
            spec=self.spec,
            executor=self.ex,
            key=random.fold_in(self.key, self.n),
            progress=False,
            log=None,
        )
        self.p, self.n = result.params, self.n + 1

    def params(self) -> tuple[np.ndarray, float]:
        return np.asarray(self.p["w"]), float(self.p["b"])


def _logreg() -> Any:
    from cubed_plugin.train import logreg_loss

    return logreg_loss


class Torch(Contender):
    """PyTorch reading the Zarr chunks through a DataLoader (0 workers), float32."""

    def __init__(self, a: argparse.Namespace, full_batch: bool) -> None:
        import torch
        import zarr

        torch.set_num_threads(1)
        zx, zy = zarr.open_array(f"{a.data}/X.zarr"), zarr.open_array(f"{a.data}/y.zarr")
        chunk, rows = a.chunk, zx.shape[0]

        class Chunks(torch.utils.data.Dataset):
            def __len__(self) -> int:
                return math.ceil(rows / chunk)

            def __getitem__(self, i: int) -> tuple:
                s = slice(i * chunk, (i + 1) * chunk)
                return torch.from_numpy(zx[s]), torch.from_numpy(zy[s])

        def cat(items: list) -> tuple:
            return torch.cat([x for x, _ in items]), torch.cat([y for _, y in items])

        self.full_batch, self.rows = full_batch, rows
        self.loader = torch.utils.data.DataLoader(
            Chunks(),
            batch_size=1 if full_batch else a.batch_chunks,
            shuffle=not full_batch,
            drop_last=not full_batch,
            collate_fn=cat,
            num_workers=0,
            generator=torch.Generator().manual_seed(0),
        )
        self.model = torch.nn.Linear(a.features, 1)
        torch.nn.init.zeros_(self.model.weight)
        torch.nn.init.zeros_(self.model.bias)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=a.lr)
        self.torch = torch
        self.name = (
            "PyTorch DataLoader, full-batch accumulation, 0 workers"
            if full_batch
            else f"PyTorch DataLoader, mini-batch SGD {a.batch_chunks * a.chunk:,}, 0 workers"
        )
        self.gradient = "exact" if full_batch else "stochastic"

    def epoch(self) -> None:
        bce = self.torch.nn.functional.binary_cross_entropy_with_logits
        if self.full_batch:
            self.opt.zero_grad()
            for X, y in self.loader:
                loss = bce(self.model(X).squeeze(1), y, reduction="sum") / self.rows
                loss.backward()
            self.opt.step()
            return
        for X, y in self.loader:
            self.opt.zero_grad()
            bce(self.model(X).squeeze(1), y).backward()
            self.opt.step()

    def params(self) -> tuple[np.ndarray, float]:
        return (
            self.model.weight.detach().numpy().reshape(-1).copy(),
            float(self.model.bias.detach()[0]),
        )


class SklearnSGD(Contender):
    name, gradient = "scikit-learn SGDClassifier.partial_fit per chunk", "stochastic"

    def __init__(self, a: argparse.Namespace) -> None:
        import zarr
        from sklearn.linear_model import SGDClassifier

        self.zx, self.zy = zarr.open_array(f"{a.data}/X.zarr"), zarr.open_array(f"{a.data}/y.zarr")
        self.chunk = a.chunk
        self.model = SGDClassifier(loss="log_loss", random_state=0)

    def epoch(self) -> None:
        for start in range(0, self.zx.shape[0], self.chunk):
            s = slice(start, start + self.chunk)
            self.model.partial_fit(self.zx[s], self.zy[s], classes=np.array([0.0, 1.0]))

    def params(self) -> tuple[np.ndarray, float]:
        return self.model.coef_.reshape(-1).copy(), float(self.model.intercept_[0])


def contenders(a: argparse.Namespace) -> dict[str, Callable[[], Contender]]:
    """The interleaved contenders, by a short name, each made when called."""
    return {
        "read": lambda: ZarrRead(a),
        "sum": lambda: CubedSum(a),
        "ours-threads": lambda: Ours(a, "threads"),
        "ours-processes": lambda: Ours(a, "processes"),
        "ours-graph": lambda: Ours(a, "threads", mode="graph"),
        "ours-batches-threads": lambda: Ours(a, "threads", batch=True),
        "ours-batches-processes": lambda: Ours(a, "processes", batch=True),
        "torch-full": lambda: Torch(a, full_batch=True),
        "torch-batches": lambda: Torch(a, full_batch=False),
        "sklearn": lambda: SklearnSGD(a),
    }


def _work(a: argparse.Namespace, name: str) -> str:
    path = os.path.join(a.work, name)
    os.makedirs(path, exist_ok=True)
    return path


def mean_loss(a: argparse.Namespace, w: np.ndarray, b: float) -> float:
    """The mean logistic loss over all the data at (w, b): one float64 NumPy pass."""
    import zarr

    zx, zy = zarr.open_array(f"{a.data}/X.zarr"), zarr.open_array(f"{a.data}/y.zarr")
    total, w = 0.0, np.asarray(w, dtype=np.float64)
    for start in range(0, zx.shape[0], a.chunk):
        s = slice(start, start + a.chunk)
        z = zx[s].astype(np.float64) @ w + b
        y = zy[s].astype(np.float64)
        total += float(np.sum(np.log1p(np.exp(-np.abs(z))) + np.maximum(z, 0.0) - y * z))
    return total / zx.shape[0]


# -- peak memory of a process tree ----------------------------------------------------------------


def tree_rss() -> int:
    """The resident sets of this process and all its children, added up (bytes)."""
    try:
        import psutil
    except ImportError:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    me = psutil.Process()
    total = 0
    for p in [me, *me.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


class Sampler:
    """The largest :func:`tree_rss` while it runs, sampled every ``every`` seconds."""

    def __init__(self, every: float = 0.01) -> None:
        self.every, self.peak, self.done = every, tree_rss(), threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.done.is_set():
            self.peak = max(self.peak, tree_rss())
            time.sleep(self.every)

    def __enter__(self) -> Sampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.done.set()
        self.thread.join()
        self.peak = max(self.peak, tree_rss())


def rss_alone(a: argparse.Namespace, which: str) -> int | None:
    """Peak resident memory of the process tree of ``which`` run alone for two epochs in a
    fresh process (None when it failed)."""
    args = [sys.executable, __file__, *_passed(a), "--rss-of", which]
    out = subprocess.run(args, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        print(f"  (peak memory of {which} not measured: {out.stderr.strip()[-300:]})")
        return None
    return int(json.loads(out.stdout.strip().splitlines()[-1])["peak"])


def _passed(a: argparse.Namespace) -> list[str]:
    return [
        f"--rows={a.rows}",
        f"--features={a.features}",
        f"--chunk={a.chunk}",
        f"--data={a.data}",
        f"--work={a.work}",
        f"--allowed-mem={a.allowed_mem}",
        f"--lr={a.lr}",
        f"--batch-chunks={a.batch_chunks}",
        f"--dask-workers={a.dask_workers}",
        f"--dask-memory={a.dask_memory}",
    ]


def measure_alone(a: argparse.Namespace) -> None:
    """``--rss-of NAME``: that contender alone, two epochs, its peak printed as JSON."""
    with Sampler() as s:
        if a.rss_of.startswith("dask"):
            dask_ml_rows(a, epochs=2, only=a.rss_of)
        else:
            c = contenders(a)[a.rss_of]()
            for _ in range(2):
                c.epoch()
    print(json.dumps({"peak": s.peak}))


# -- dask-ml ------------------------------------------------------------------------------------


def dask_ml_rows(a: argparse.Namespace, epochs: int, only: str | None = None) -> list[dict]:
    """dask-ml's rows on a LocalCluster (not interleaved): L-BFGS (seconds per pass over the
    data) and Incremental SGD (seconds per epoch)."""
    try:
        import dask.array as da
        import dask_glm.algorithms as algorithms
        import distributed
        from dask_ml.linear_model import LogisticRegression
        from dask_ml.wrappers import Incremental
        from sklearn.linear_model import SGDClassifier
    except ImportError as e:
        print(f"  (dask-ml not installed: its rows skipped; pip install dask-ml) [{e}]")
        return []
    rows = []
    # the fixed glibc thresholds of the timings keep every freed block in the heap: a Dask
    # worker's unmanaged memory then grows until the nanny pauses it; Dask's own settings
    env = {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "65536"}
    import dask

    with (
        dask.config.set({"distributed.nanny.pre-spawn-environ": env}),
        distributed.LocalCluster(
            n_workers=a.dask_workers,
            threads_per_worker=1,
            memory_limit=a.dask_memory,
            host="127.0.0.1",
            dashboard_address=None,
        ) as cluster,
        distributed.Client(cluster),
    ):
        X = da.from_zarr(f"{a.data}/X.zarr")
        y = da.from_zarr(f"{a.data}/y.zarr")
        if only in (None, "dask-lbfgs"):
            evaluations = [0]
            real = algorithms.fmin_l_bfgs_b

            def counted(func: Any, x0: Any, *args: Any, **kwargs: Any) -> Any:
                def f(beta: Any, *fargs: Any) -> Any:
                    evaluations[0] += 1
                    return func(beta, *fargs)

                return real(f, x0, *args, **kwargs)

            algorithms.fmin_l_bfgs_b = counted
            try:
                t0 = time.perf_counter()
                model = LogisticRegression(solver="lbfgs", C=1e12, max_iter=epochs)
                model.fit(X, y)
                seconds = time.perf_counter() - t0
            finally:
                algorithms.fmin_l_bfgs_b = real
            passes = evaluations[0] + 1  # and one pass standardizing the columns first
            rows.append(
                {
                    "name": f"dask-ml LogisticRegression(lbfgs), LocalCluster, per pass "
                    f"({passes} passes)",
                    "key": "dask-lbfgs",
                    "seconds": seconds / passes,
                    "gradient": "exact",
                    "params": (model.coef_.reshape(-1), float(model.intercept_)),
                }
            )
        if only in (None, "dask-incremental"):
            inc = Incremental(SGDClassifier(loss="log_loss", random_state=0))
            times = []
            for _ in range(epochs):
                t0 = time.perf_counter()
                inc.partial_fit(X, y, classes=[0.0, 1.0])
                times.append(time.perf_counter() - t0)
            est = inc.estimator_
            rows.append(
                {
                    "name": "dask-ml Incremental(SGDClassifier), LocalCluster",
                    "key": "dask-incremental",
                    "seconds": statistics.median(times[1:] or times),
                    "gradient": "stochastic",
                    "params": (est.coef_.reshape(-1), float(est.intercept_[0])),
                }
            )
    return rows


# -- the run ------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--features", type=int, default=50)
    ap.add_argument("--chunk", type=int, default=50_000)
    ap.add_argument("--noise", type=float, default=0.85)
    ap.add_argument("--epochs", type=int, default=5, help="epochs of each contender")
    ap.add_argument("--allowed-mem", default="200MB")
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--batch-chunks", type=int, default=4, help="chunks per mini-batch")
    ap.add_argument("--data", default=None, help="a directory to keep (or reuse) the data in")
    ap.add_argument("--work", default=None, help="Cubed's work directories (default: temporary)")
    ap.add_argument("--json", default=None, help="write the table to this file")
    ap.add_argument("--only", default=None, help="comma-separated contenders (short names)")
    ap.add_argument("--no-rss", action="store_true", help="skip the peak-memory runs")
    ap.add_argument("--no-dask", action="store_true", help="skip dask-ml")
    ap.add_argument("--dask-workers", type=int, default=2)
    ap.add_argument(
        "--dask-memory",
        default="1GB",
        help="memory_limit of each Dask worker (at 500MB its L-BFGS stalled on the full data: "
        "the nanny paused both workers)",
    )
    ap.add_argument("--rss-of", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.rss_of is not None:  # a run apart: the parent's directories
        measure_alone(a)
        return
    temporary = []  # the directories not asked for: removed at the end
    if a.data is None:
        a.data = tempfile.mkdtemp(prefix="bench-epoch-")
        temporary.append(a.data)
    if a.work is None:
        a.work = tempfile.mkdtemp(prefix="bench-epoch-work-")
        temporary.append(a.work)
    try:
        run(a)
    finally:
        for d in temporary:
            shutil.rmtree(d, ignore_errors=True)


def run(a: argparse.Namespace) -> None:
    """Make the data (unless kept), time the contenders interleaved, report."""
    import zarr

    shape = (a.rows, a.features)
    have = os.path.exists(f"{a.data}/X.zarr") and zarr.open_array(f"{a.data}/X.zarr").shape == shape
    if not have or zarr.open_array(f"{a.data}/X.zarr").chunks[0] != a.chunk:
        t0 = time.perf_counter()
        make_data(a.data, a.rows, a.features, a.chunk, a.noise)
        print(f"made the data in {time.perf_counter() - t0:.1f} s")
    nbytes = a.rows * (a.features + 1) * 4
    print(
        f"logistic regression, {a.rows:,} x {a.features} float32 in Zarr ({nbytes / 1e6:.0f} MB), "
        f"{math.ceil(a.rows / a.chunk)} chunks of {a.chunk:,} rows; allowed_mem {a.allowed_mem}; "
        f"SGD lr {a.lr}; {a.epochs} epochs each, interleaved"
    )
    makers = contenders(a)
    asked = list(makers) if a.only is None else a.only.split(",")
    keys = [k for k in asked if k in makers]
    made = {k: makers[k]() for k in keys}
    times: dict[str, list[float]] = {k: [] for k in keys}
    for r in range(a.epochs):
        for k in keys if r % 2 == 0 else reversed(keys):  # alternate the order each round
            t0 = time.perf_counter()
            made[k].epoch()
            times[k].append(time.perf_counter() - t0)
        print(f"  round {r + 1}: " + ", ".join(f"{k} {times[k][-1]:.2f}" for k in keys))
    rows = []
    for k in keys:
        c = made[k]
        p = c.params()
        rows.append(
            {
                "name": c.name,
                "key": k,
                "seconds": statistics.median(times[k][1:] or times[k]),
                "epochs": times[k],
                "gradient": c.gradient,
                "loss": None if p is None else mean_loss(a, *p),
            }
        )
    for row in rows:
        row["rss"] = None
    report(a, rows)  # the interleaved rows, before the runs apart
    if not a.no_dask and (a.only is None or any(k.startswith("dask") for k in asked)):
        for row in dask_ml_rows(a, a.epochs):
            row["loss"] = mean_loss(a, *row.pop("params"))
            row["rss"] = None
            rows.append(row)
    if not a.no_rss:
        for row in rows:
            row["rss"] = rss_alone(a, row["key"])
    report(a, rows)


def report(a: argparse.Namespace, rows: list[dict]) -> None:
    """Print the table of ``rows`` and write it to ``--json``."""
    floor = next((r["seconds"] for r in rows if r["name"] == FLOOR), None)
    print(
        f"\n  {'contender':66s} {'s/epoch':>8s} {'x read':>7s} {'peak RSS':>9s} "
        f"{'final loss':>10s}  gradient"
    )
    for row in rows:
        ratio = f"{row['seconds'] / floor:7.2f}" if floor else f"{'-':>7s}"
        rss = f"{row['rss'] / 1e6:6.0f} MB" if row["rss"] else f"{'-':>9s}"
        loss = f"{row['loss']:10.5f}" if row["loss"] is not None else f"{'-':>10s}"
        print(f"  {row['name']:66s} {row['seconds']:8.3f} {ratio} {rss} {loss}  {row['gradient']}")
        row["x_read_pass"] = row["seconds"] / floor if floor else None
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "rows": rows}, f, indent=1, default=float)
        print(f"written to {a.json}")


if __name__ == "__main__":
    sys.exit(main())
