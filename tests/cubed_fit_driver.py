"""A small driver process that trains with ``cubed_plugin.fit`` on Cubed's processes executor
(used by test_cubed_training.py). Each task runs in a worker forked from a server that has
imported the libraries and resets its high-water mark before each task
(``cubed_plugin.train.measuring_processes``), so its measured peak is its own; the driver itself
starts from a fork, so its ``ru_maxrss`` is not its parent's.

``python cubed_fit_driver.py DATA_DIR WORK_DIR ALLOWED RESERVED STEPS MODEL[:MODE] ...`` trains
each model (logreg, mlp; in ``fit``'s mode MODE, "auto" when not given: one-pass for these
row losses) from ``init_params`` for STEPS full-batch SGD steps on DATA_DIR's
X.zarr and y.zarr (DATA_DIR and WORK_DIR may be URLs: ``s3://...``; RESERVED ``measured``:
``make_spec`` measures it on the executor, in WORK_DIR, reading the data) and prints, as JSON,
the final parameters and the MemoryRecorder's projected and measured task memory of every op.
"""

from __future__ import annotations

import json
import resource
import sys


def main(data: str, work: str, allowed: str, reserved: str, steps: str, *models: str) -> None:
    import cubed

    from cubed_plugin.train import (
        fit,
        init_params,
        logreg_loss,
        make_spec,
        measuring_processes,
        mlp_loss,
    )
    from pycograd_xp import optim

    if reserved == "measured":
        reads = [f"{data}/X.zarr", f"{data}/y.zarr"]  # on an object store: its client counted
        spec = make_spec(allowed, work_dir=work, executor=measuring_processes(), reads=reads)
    else:
        spec = cubed.Spec(work_dir=work, allowed_mem=allowed, reserved_mem=reserved)
    X = cubed.from_zarr(f"{data}/X.zarr", spec=spec)
    y = cubed.from_zarr(f"{data}/y.zarr", spec=spec)
    out: dict = {
        # what the driver holds of its own (its imports) before any step: its peak so far
        "driver_start": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "chunk_bytes": int(X.chunkmem),
        "allowed_mem": int(spec.allowed_mem),
        "reserved_mem": int(spec.reserved_mem),
        "data_bytes": int(X.nbytes + y.nbytes),
        "chunks": len(X.chunks[0]),
    }
    for run in models:
        model, _, mode = run.partition(":")
        loss = logreg_loss if model == "logreg" else mlp_loss
        result = fit(
            loss,
            init_params(model, X.shape[1], hidden=8),
            (X, y),
            optim.sgd(0.5),
            steps=int(steps),
            spec=spec,
            executor=measuring_processes(),
            progress=False,
            log=None,
            mode=mode or "auto",
        )
        out[run] = {
            "params": {k: v.tolist() for k, v in result.params.items()},
            "report": result.memory.report(),
            "max_projected": result.memory.max_projected(),
        }
    out["driver_peak"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps(out))


def _fresh_peak() -> None:
    """Run this script again in a forked child: a process started with exec (subprocess) keeps
    its parent's lifetime peak as its own ``ru_maxrss`` (a pytest process that wrote gigabytes
    of data), a forked child starts from its parent's current, small, resident set."""
    import os

    if os.environ.get("PYCOGRAD_FRESH_PEAK"):
        return
    os.environ["PYCOGRAD_FRESH_PEAK"] = "1"
    pid = os.fork()
    if pid == 0:
        os.execv(sys.executable, [sys.executable, *sys.argv])
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    _fresh_peak()
    main(*sys.argv[1:])
