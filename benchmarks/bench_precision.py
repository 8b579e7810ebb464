"""Seconds per epoch of ``fit`` on float16 storage against float32 storage of the same values
(issue 38, item 5).

The data: ``--rows`` x ``--features`` drawn as ``bench_lbfgs.make_data`` draws them, rounded to
float16 and stored twice in Zarr, chunks of ``--chunk`` rows: ``X16.zarr`` (float16, half the
bytes) and ``X32.zarr`` (float32 of the same values), with one float32 ``y.zarr``. Contenders,
one epoch each per round, interleaved (the noise of a shared machine hits them alike):

- **read pass**: every chunk of X and y read with Zarr in one thread (the floor of an epoch);
- **fit**: ``cubed_plugin.fit`` of the mean logistic loss, float32 parameters, one-pass mode,
  full batch (``optim.sgd``), ``epochs=1`` per call from the last parameters, on
  ``--executor`` with ``--chunks-per-task``; on float16 each task casts its chunk to float32
  after the read (``cubed_plugin._casting``).

Seconds per epoch: the median of the rounds after the first (imports, pools, plans). The two
``fit`` runs end at the same parameters to the bit (checked: the cast chunk is the float32
chunk).

    python benchmarks/bench_precision.py [--rows 2000000] [--features 50] [--chunk 50000]
        [--epochs 6] [--executor threads] [--data DIR] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _common  # noqa: F401  (one BLAS thread, kept malloc thresholds)
import numpy as np


def make_data(path: str, rows: int, features: int, chunk: int, noise: float = 0.85) -> None:
    """X16.zarr, X32.zarr (the same float16 values) and y.zarr in ``path``, made once."""
    import zarr

    if os.path.exists(f"{path}/X16.zarr"):
        return
    from bench_lbfgs import make_data as float32_data

    float32_data(path, rows, features, chunk, noise)
    zx = zarr.open_array(f"{path}/X.zarr")
    shape, chunks = (rows, features), (chunk, features)
    z16 = zarr.open_array(f"{path}/X16.zarr", mode="w", shape=shape, dtype="f2", chunks=chunks)
    z32 = zarr.open_array(f"{path}/X32.zarr", mode="w", shape=shape, dtype="f4", chunks=chunks)
    for start in range(0, rows, chunk):
        x = np.asarray(zx[start : start + chunk]).astype(np.float16)
        z16[start : start + chunk] = x
        z32[start : start + chunk] = x.astype(np.float32)


def _logreg():
    from cubed_plugin import row_loss

    @row_loss
    def logreg(p, X, y):
        xp = X.__array_namespace__()
        z = X @ p["w"] + p["b"]
        return xp.logaddexp(0.0, z) - y * z

    return logreg


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--features", type=int, default=50)
    ap.add_argument("--chunk", type=int, default=50_000)
    ap.add_argument("--epochs", type=int, default=6, help="rounds (the first is not counted)")
    ap.add_argument("--executor", default="threads")
    ap.add_argument("--chunks-per-task", type=int, default=1)
    ap.add_argument("--allowed-mem", default="200MB")
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--data", default=None, help="a directory to keep (or reuse) the data in")
    ap.add_argument("--json", default=None, help="write the figures to this file")
    a = ap.parse_args()

    import cubed
    import zarr

    from cubed_plugin import fit, make_spec
    from pycograd_xp import optim

    path = a.data or tempfile.mkdtemp(prefix="bench-precision-")
    os.makedirs(path, exist_ok=True)
    make_data(path, a.rows, a.features, a.chunk)
    work = tempfile.mkdtemp(prefix="bench-precision-work-")
    spec = make_spec(a.allowed_mem, work_dir=work, executor=a.executor)
    loss = _logreg()
    state = {}

    def reader(name: str):
        zx, zy = zarr.open_array(f"{path}/{name}.zarr"), zarr.open_array(f"{path}/y.zarr")

        def run() -> None:
            for start in range(0, a.rows, a.chunk):
                zx[start : start + a.chunk]
                zy[start : start + a.chunk]

        return run

    def trainer(name: str):
        X = cubed.from_zarr(f"{path}/{name}.zarr", spec=spec)
        y = cubed.from_zarr(f"{path}/y.zarr", spec=spec)
        state[name] = {"w": np.zeros(a.features, np.float32), "b": np.zeros((), np.float32)}

        def run() -> None:
            result = fit(
                loss,
                state[name],
                (X, y),
                optim.sgd(a.lr),
                epochs=1,
                spec=spec,
                executor=a.executor,
                chunks_per_task=a.chunks_per_task,
                progress=False,
                log=None,
            )
            state[name] = result.params

        return run

    contenders = {
        "read pass, float32 storage": reader("X32"),
        "read pass, float16 storage": reader("X16"),
        "fit epoch, float32 storage": trainer("X32"),
        "fit epoch, float16 storage": trainer("X16"),
    }
    times: dict[str, list[float]] = {k: [] for k in contenders}
    for _ in range(a.epochs):
        for name, f in contenders.items():
            t0 = time.perf_counter()
            f()
            times[name].append(time.perf_counter() - t0)
    for k in ("w", "b"):  # the same values, cast in the task: the same training, to the bit
        np.testing.assert_array_equal(state["X16"][k], state["X32"][k])
    sizes = {
        name: sum(
            os.path.getsize(os.path.join(root, f))
            for root, _, files in os.walk(f"{path}/{name}.zarr")
            for f in files
        )
        for name in ("X32", "X16")
    }
    rows = {k: statistics.median(v[1:] or v) for k, v in times.items()}
    print(
        f"{a.rows:,} x {a.features} rows, chunks of {a.chunk:,}; X stored "
        f"{sizes['X32'] / 1e6:.0f} MB as float32, {sizes['X16'] / 1e6:.0f} MB as float16; "
        f"fit on {a.executor!r}, {a.chunks_per_task} chunk(s) per task, load "
        f"{os.getloadavg()[0]:.2f}"
    )
    print(f"{'':32s} {'s / epoch':>10s}")
    for k, v in rows.items():
        print(f"{k:32s} {v:10.3f}")
    ratio = rows["fit epoch, float16 storage"] / rows["fit epoch, float32 storage"]
    print(f"fit epoch, float16 / float32 storage: {ratio:.2f}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"seconds": rows, "bytes": sizes, "ratio": ratio, "args": vars(a)}, fh)


if __name__ == "__main__":
    main()
