"""A small driver process for measuring Cubed tasks (used by test_chunked.py).

``python cubed_driver.py data DIR`` writes the training data to Zarr (in its own process, so
the driver stays small); ``python cubed_driver.py run DIR`` builds a logistic-regression
gradient step on namespace(cubed), projects it, computes it as ``cubed_plugin.compute`` does
(the plan optimizer ``graph_fusion``) with the processes executor (each task measured on its own:
``cubed_plugin.train.measuring_processes``) and prints,
as JSON, every op's measured task peak beside Cubed's projection for it.
"""

from __future__ import annotations

import json
import resource
import sys

N, D, CHUNK = 120_000, 100, 30_000


def data(path: str) -> None:
    import numpy as np
    import zarr

    rng = np.random.default_rng(0)
    X = rng.standard_normal((N, D))
    y = (X @ rng.standard_normal(D) > 0).astype("float64")
    zarr.open_array(f"{path}/X.zarr", mode="w", shape=(N, D), chunks=(CHUNK, D), dtype="f8")[:] = X
    zarr.open_array(f"{path}/y.zarr", mode="w", shape=(N,), chunks=(CHUNK,), dtype="f8")[:] = y


def run(path: str) -> None:
    import cubed
    import numpy as np

    import cubed_plugin as cp
    import pycograd_xp as pg
    from cubed_plugin.train import measuring_processes
    from pycograd_xp import memory

    imports_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    xp = pg.namespace(cubed)
    spec = cubed.Spec(work_dir=f"{path}/work", allowed_mem="500MB", reserved_mem="120MB")
    X = xp.asarray(cubed.from_zarr(f"{path}/X.zarr", spec=spec))
    y = xp.asarray(cubed.from_zarr(f"{path}/y.zarr", spec=spec))
    w = xp.asarray(cubed.asarray(np.zeros(D), spec=spec))

    def loss(w, X, y):
        z = X @ w
        return xp.mean(xp.log(1.0 + xp.exp(-z)) + (1.0 - y) * z)

    p = memory.project(loss, w, X, y)
    value, grad = pg.value_and_grad(loss)(w, X, y)
    plan = cp.plan(value, grad)  # what cubed_plugin.compute runs (graph_fusion)
    projected = {
        name: int(node["primitive_op"].projected_mem)
        for name, node in plan.dag.nodes(data=True)
        if node.get("primitive_op")
    }

    class Peaks(cubed.Callback):
        def __init__(self) -> None:
            self.peaks: dict[str, int] = {}

        def on_task_end(self, event) -> None:
            m = event.peak_measured_mem_end
            if m is not None:
                self.peaks[event.name] = max(self.peaks.get(event.name, 0), int(m))

    peaks = Peaks()
    driver_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    cp.compute(value, grad, executor=measuring_processes(), callbacks=[peaks])
    # the one-pass step: each task declares pycograd_xp.memory's projection of its chunk's step
    from cubed_plugin.steps import one_pass_step, row_loss

    @row_loss
    def per_row(p, X, y):
        z = X @ p["w"]
        return X.__array_namespace__().log(1.0 + X.__array_namespace__().exp(-z)) + (1.0 - y) * z

    total, _, _ = one_pass_step(per_row, {"w": np.zeros(D)}, (pg.unwrap(X), pg.unwrap(y)))
    for name, node in cp.plan(total).dag.nodes(data=True):
        if node.get("primitive_op"):
            projected[name] = int(node["primitive_op"].projected_mem)
    cp.compute(total, executor=measuring_processes(), callbacks=[peaks])
    print(
        json.dumps(
            {
                "max_task_bytes": p.max_task_bytes,
                "plan_max": int(plan.max_projected_mem),
                "allowed_mem": int(spec.allowed_mem),
                "driver_peak": driver_peak,
                "imports_peak": imports_peak,
                "data_bytes": N * D * 8,
                "measured": peaks.peaks,
                "projected": {k: projected[k] for k in peaks.peaks},
            }
        )
    )


if __name__ == "__main__":
    {"data": data, "run": run}[sys.argv[1]](sys.argv[2])
