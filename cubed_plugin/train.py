"""Bounded-memory training on chunked data with Cubed: the public names, gathered.

:func:`fit` (:mod:`cubed_plugin._fit`) runs gradient steps over data chunked in Zarr with every
task's memory checked before it runs; :func:`make_spec`, :func:`measuring_processes` and
:func:`worker_baseline` (:mod:`cubed_plugin._executors`) make the Spec and the executor;
:class:`Progress` and :class:`MemoryRecorder` (:mod:`cubed_plugin._callbacks`) watch a compute;
the command line is :mod:`cubed_plugin.__main__`:

    python -m cubed_plugin.train --rows 2000000 --features 100 --allowed-mem 200MB

runs it as ``python -m cubed_plugin`` does.
"""

from __future__ import annotations

from .__main__ import init_params, logreg_loss, main, mlp_loss, run, synthetic
from ._callbacks import MemoryRecorder, Overrun, Progress
from ._evaluate import predict
from ._executors import make_executor, make_spec, measuring_processes, worker_baseline
from ._fit import FitResult, fit
from ._storage import open_zarr
from ._validation import EarlyStopping
from .steps import row_loss

__all__ = [
    "EarlyStopping",
    "FitResult",
    "MemoryRecorder",
    "Overrun",
    "Progress",
    "fit",
    "init_params",
    "logreg_loss",
    "main",
    "make_executor",
    "make_spec",
    "measuring_processes",
    "mlp_loss",
    "predict",
    "open_zarr",
    "row_loss",
    "run",
    "synthetic",
    "worker_baseline",
]

if __name__ == "__main__":
    run("python -m cubed_plugin.train")
