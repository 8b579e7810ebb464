"""What does each task of a Cubed training step hold? The plan, projected against measured.

Writes 100,000 x 64 float32 rows to Zarr in chunks of 10,000 rows, trains an MLP on them for two
steps in graph mode on the processes executor (each task's own peak measured), within a budget
of 160 MB a task, then prints each op of the step's plan (its projected task memory, the most a
task of it measured, the part of the loss it computes) and draws it into ``--out`` (default: a
new temporary file, whose path it prints).

    python examples/cubed_task_memory.py [--out plan.png]
"""

from __future__ import annotations

import argparse
import os
import tempfile

import cubed

from cubed_plugin import fit, make_spec
from cubed_plugin.train import init_params, measuring_processes, mlp_loss, synthetic
from pycograd_xp import optim


def main(out: str, rows: int = 100_000, features: int = 64, chunk: int = 10_000) -> None:
    d = tempfile.mkdtemp(prefix="cubed-task-memory-")
    synthetic(d, rows, features, chunk, "mlp")  # X.zarr and y.zarr in d
    executor = measuring_processes()  # each task's measured peak is its own
    spec = make_spec("160MB", work_dir=os.path.join(d, "work"), executor=executor)
    X = cubed.from_zarr(os.path.join(d, "X.zarr"), spec=spec)
    y = cubed.from_zarr(os.path.join(d, "y.zarr"), spec=spec)
    result = fit(
        mlp_loss,
        init_params("mlp", features),
        (X, y),
        optim.adam(0.05),
        steps=2,
        spec=spec,
        executor=executor,
        mode="graph",  # the step as Cubed ops: forward and backward, fused
        progress=False,
        log=None,
    )
    executor.close()
    print(result.memory.table(int(spec.allowed_mem)))
    result.memory.plot(out, title=f"one graph-mode step of an MLP on {rows:,} x {features} rows")
    print(f"picture: {out}")


if __name__ == "__main__":  # the processes executor's workers import this script again
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="the picture (default: a temporary file)")
    args = parser.parse_args()
    main(args.out or tempfile.mkstemp(suffix=".png", prefix="cubed-task-memory-")[1])
