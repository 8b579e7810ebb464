"""Training on 1 GB to 10 GB and more of Zarr within a 200 MB ``allowed_mem`` (issue 21, point 4).

For each data size (``--sizes``, in GB of float32 X and y together) the data is made once in
``--data`` (``bench_lbfgs.make_data``: ``cubed_plugin.train.synthetic``'s recipe, chunks of
``--chunk`` rows) and kept there; then, for each executor (``--executors``: "processes",
``measuring_processes`` with its workers kept and each task measured on its own; "dask", a
LocalCluster of one-thread workers) and each model (``--models``: the CLI's logistic
regression and MLP, float32 parameters), ``cubed_plugin.fit`` runs one full-batch SGD step
per epoch in one-pass mode, ``--epochs`` epochs, each a call of ``fit(epochs=1)`` from the last
parameters. Reported per run:

- seconds per epoch (the median of the epochs after the first, which pays plans and pools),
  GB/s, and the ratio to one read pass of the same data (every chunk of X and y read with Zarr
  in one thread, the floor a one-pass method can reach);
- the largest measured task peak against the largest projection, and the ops measured over
  their projection or ``allowed_mem`` (none is the promise; ``fit`` runs with
  ``memory_overrun="warn"`` so that an overrun is counted here instead of stopping the run);
- the intermediate storage written under the work directory (sampled every 0.1 s: the most
  seen at once) and what was left when ``fit`` returned;
- how the time scales: seconds per GB at each size over seconds per GB at the smallest (1.00
  everywhere is linear).

    python benchmarks/bench_scale.py [--sizes 1,3,10] [--data DIR] [--epochs 3]
        [--executors processes,dask] [--models logreg,mlp] [--chunks-per-task K] [--json PATH]

The data is about 18 GB on disk for the sizes 1, 3 and 10 (random floats compress little);
``--data`` keeps it for the next run (a temporary directory, removed at the end, otherwise).
It runs with glibc's default malloc thresholds, as users do. The "dask" executor needs the
``dask`` extra.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from typing import Any

# glibc's default malloc thresholds, as users run (the eager benchmarks fix them to steady their
# step timings; here they would hold freed chunks in every worker's heap)
os.environ.setdefault("PYCOGRAD_BENCH_KEEP_MALLOC", "1")

import _common  # noqa: F401  (thread pinning)
import numpy as np
from bench_epoch import ZarrRead
from bench_lbfgs import make_data

from cubed_plugin.__main__ import _du as dir_bytes  # the bytes under a directory


class StorageWatch:
    """The most bytes seen at once under a directory while the ``with`` block runs."""

    def __init__(self, path: str) -> None:
        self.path, self.most, self._stop = path, 0, threading.Event()

    def __enter__(self) -> StorageWatch:
        def watch() -> None:
            while not self._stop.wait(0.1):
                self.most = max(self.most, dir_bytes(self.path))

        self._thread = threading.Thread(target=watch, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.most = max(self.most, dir_bytes(self.path))


def data_dir(a: argparse.Namespace, gb: float) -> tuple[str, int]:
    """(the directory of the ``gb`` GB data, its rows), made when absent."""
    import zarr

    rows = int(gb * 1e9 / ((a.features + 1) * 4)) // a.chunk * a.chunk
    path = os.path.join(a.data, f"{gb:g}GB")
    x = f"{path}/X.zarr"
    if not (os.path.exists(x) and zarr.open_array(x).shape == (rows, a.features)):
        t0 = time.perf_counter()
        make_data(path, rows, a.features, a.chunk, a.noise)
        print(f"  made {gb:g} GB ({rows:,} rows) in {time.perf_counter() - t0:.0f} s", flush=True)
    return path, rows


def read_pass(path: str, chunk: int, epochs: int) -> float:
    """Median seconds of one Zarr read pass over X and y (after a first one): bench_epoch's
    floor, on this size's data."""
    floor = ZarrRead(argparse.Namespace(data=path, chunk=chunk))
    times = []
    for _ in range(epochs):
        t0 = time.perf_counter()
        floor.epoch()
        times.append(time.perf_counter() - t0)
    return statistics.median(times[1:] or times)


def ours(a: argparse.Namespace, path: str, model: str, executor: str) -> dict[str, Any]:
    """``fit`` in one-pass mode, one epoch per call: times, memory, storage."""
    import cubed

    from cubed_plugin.train import fit, init_params, logreg_loss, make_spec, mlp_loss
    from pycograd_xp import optim

    work = tempfile.mkdtemp(prefix="bench-scale-work-", dir=a.work)
    try:
        spec = make_spec(a.allowed_mem, executor=executor, work_dir=work)
        X = cubed.from_zarr(f"{path}/X.zarr", spec=spec)
        y = cubed.from_zarr(f"{path}/y.zarr", spec=spec)
        params = init_params(model, a.features, dtype=np.float32)
        loss = {"logreg": logreg_loss, "mlp": mlp_loss}[model]
        times, measured, projected, over = [], 0, 0, []
        with StorageWatch(work) as storage:
            for _ in range(a.epochs):
                t0 = time.perf_counter()
                result = fit(
                    loss,
                    params,
                    (X, y),
                    optim.sgd(a.lr),
                    epochs=1,
                    mode="one-pass",
                    spec=spec,
                    executor=executor,
                    progress=False,
                    log=None,
                    memory_overrun="warn",  # recorded and reported here, not raised
                    chunks_per_task=a.chunks_per_task,
                )
                times.append(time.perf_counter() - t0)
                params = result.params
                rec = result.memory
                measured = max([measured, *rec.measured.values()])
                projected = max(projected, rec.max_projected())
                over += [str(o) for o in rec.overruns()]
        left = dir_bytes(work)
        return {
            "seconds": statistics.median(times[1:] or times),
            "epochs": times,
            "measured": measured,
            "projected": projected,
            "allowed": int(spec.allowed_mem),
            "reserved": int(spec.reserved_mem),
            "over": over,
            "storage_most": storage.most,
            "storage_left": left,
            "loss": float(result.history["loss"][-1]),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1,3,10", help="GB of data, comma-separated")
    ap.add_argument("--features", type=int, default=50)
    ap.add_argument("--chunk", type=int, default=50_000)
    ap.add_argument("--noise", type=float, default=0.85)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--allowed-mem", default="200MB")
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--executors", default="processes,dask")
    ap.add_argument(
        "--chunks-per-task", type=int, default=1, help="fit's chunks_per_task (one-pass tasks)"
    )
    ap.add_argument("--models", default="logreg,mlp")
    ap.add_argument("--data", default=None, help="a directory to keep (or reuse) the data in")
    ap.add_argument("--work", default=None, help="where Cubed's work directories go")
    ap.add_argument("--json", default=None, help="write the rows to this file")
    a = ap.parse_args()
    if a.work is not None:
        os.makedirs(a.work, exist_ok=True)
    temporary = a.data is None
    a.data = a.data or tempfile.mkdtemp(prefix="bench-scale-")
    sizes = [float(s) for s in a.sizes.split(",")]
    print(
        f"one-pass full-batch SGD, {a.features} features float32, chunks of {a.chunk:,} rows, "
        f"allowed_mem {a.allowed_mem}, {a.epochs} epochs per run, {a.chunks_per_task} chunks "
        f"per task; cpus {os.cpu_count()}",
        flush=True,
    )
    rows: list[dict[str, Any]] = []
    try:
        for gb in sizes:
            path, n = data_dir(a, gb)
            nbytes = n * (a.features + 1) * 4
            floor = read_pass(path, a.chunk, a.epochs)
            print(
                f"  {gb:g} GB ({n:,} rows, {dir_bytes(path) / 1e9:.2f} GB on disk): read pass "
                f"{floor:.2f} s, {nbytes / floor / 1e9:.2f} GB/s",
                flush=True,
            )
            for executor in a.executors.split(","):
                for model in a.models.split(","):
                    r = ours(a, path, model, executor)
                    r.update(gb=gb, rows=n, bytes=nbytes, floor=floor, executor=executor)
                    r.update(model=model, gb_per_s=nbytes / r["seconds"] / 1e9)
                    rows.append(r)
                    print(
                        f"    {executor:9s} {model:6s} {r['seconds']:7.2f} s/epoch "
                        f"{r['gb_per_s']:5.2f} GB/s {r['seconds'] / floor:5.2f}x read; task peak "
                        f"{r['measured'] / 1e6:.0f} MB of {r['projected'] / 1e6:.0f} MB projected; "
                        f"storage {r['storage_most'] / 1e6:.0f} MB, left "
                        f"{r['storage_left'] / 1e6:.0f} MB; over: {len(r['over'])}",
                        flush=True,
                    )
    finally:
        if temporary:
            shutil.rmtree(a.data, ignore_errors=True)
    report(rows)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


def report(rows: list[dict[str, Any]]) -> None:
    """The table, and seconds per GB at each size over the smallest size's."""
    print(
        f"\n  {'size':>6s} {'executor':9s} {'model':6s} {'s/epoch':>8s} {'GB/s':>5s} "
        f"{'x read':>6s} {'task peak':>9s} {'projected':>9s} {'over':>4s} {'storage':>8s} "
        f"{'s/GB vs smallest':>16s}"
    )
    smallest: dict[tuple[str, str], float] = {}
    for r in sorted(rows, key=lambda r: (r["executor"], r["model"], r["gb"])):
        per_gb = r["seconds"] / (r["bytes"] / 1e9)
        base = smallest.setdefault((r["executor"], r["model"]), per_gb)
        print(
            f"  {r['gb']:5g}G {r['executor']:9s} {r['model']:6s} {r['seconds']:8.2f} "
            f"{r['gb_per_s']:5.2f} {r['seconds'] / r['floor']:6.2f} "
            f"{r['measured'] / 1e6:6.0f} MB {r['projected'] / 1e6:6.0f} MB {len(r['over']):4d} "
            f"{r['storage_most'] / 1e6:5.0f} MB {per_gb / base:16.2f}"
        )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
