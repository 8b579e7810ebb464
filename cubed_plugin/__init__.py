"""Cubed-specific integration for pycograd_xp. The core package never imports Cubed; code that
needs it lives here and is loaded only when a Cubed namespace is made (through the
``pycograd_xp.adapters`` entry point, :func:`adapt`).

- :func:`adapt`: Cubed's capabilities for the backend adapter (lazy, chunked, immutable, block
  sampling, scipy.special's functions one block at a time: ``cubed_plugin._special``), and
  Cubed's namespace completed with what Cubed 0.27 lacks (``sort``, ``argsort``,
  ``take_along_axis``, the ``fft`` extension, most of ``linalg``: ``cubed_plugin.namespace``).
  From then on every Cubed op says which part of the user's program built it
  ("matmul in mlp_loss (backward of tanh)"), in refusals, plans and measured tables.
- ``cubed_plugin.random``: chunked random sampling, each block drawn lazily from its own key.
- ``cubed_plugin.compute``/``plan``/``check``/``visualize``: our lazy arrays computed in one
  plan (NumPy results), its plan, and its memory checked before running, all with the plan
  optimizer whose projections hold for gradient graphs (``cubed_plugin.steps.graph_fusion``);
  ``check`` also warns when ``reserved_mem`` is below what the executor's workers measurably
  hold (:func:`worker_baseline`; ``cubed.Spec`` defaults to 0).
- ``cubed_plugin.fit`` (``cubed_plugin.train`` gathers its names): bounded-memory training on
  chunked data, one-pass or graph mode (``cubed_plugin.steps``, ``row_loss``), with
  validation figures and :class:`EarlyStopping` (``cubed_plugin._validation``), and
  :func:`predict`, a model applied to chunked data within the budget (``cubed_plugin._evaluate``);
  and
  ``python -m cubed_plugin`` (or ``python -m cubed_plugin.train``);
  ``make_spec`` makes a Spec whose ``reserved_mem`` is measured. A task measured over its
  projection or ``allowed_mem`` raises :class:`TaskMemoryError`.
- ``cubed_plugin.open_zarr``: stored data at a local path or an fsspec URL (``s3://``,
  ``gs://``) with storage options; ``fit``'s checkpoints and Cubed's ``work_dir`` take URLs too
  (:mod:`cubed_plugin._storage`).
- ``cubed_plugin.from_xarray``: training data from an ``xarray.Dataset`` of Cubed arrays
  (``cubed-xarray``), features stacked as columns, lazily, and predictions written back to
  Zarr as a Dataset in its coordinates (:mod:`cubed_plugin._xarray`).
- ``cubed_plugin._cubed_seam``: the one module that touches Cubed's internals (checked against
  the Cubed versions it supports at import, and by ``tests/test_cubed_seam.py``);
  ``cubed_plugin._measuring``: the executors that measure each task's own peak (processes,
  Dask), built on Cubed's through the seam, and their heap probes.
- ``cubed_plugin.memory``: per-task memory of a gradient step in Cubed's own terms, before it
  runs (what ``pycograd_xp.memory.project`` gives for Cubed arrays), and :func:`plan_rows`,
  which chooses the rows per chunk so every task of ``fit``'s step (in its mode) fits
  ``allowed_mem``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ._compute import check, compute, plan, visualize
from ._evaluate import predict
from ._executors import NoRetryWarning, make_executor, make_spec, worker_baseline
from ._storage import open_zarr
from ._validation import EarlyStopping
from .memory import ReservedMemWarning, TaskMemoryError, TaskMemoryWarning, plan_rows
from .namespace import augmented  # its import registers Cubed's implementations of rows
from .steps import row_loss

__all__ = [
    "EarlyStopping",
    "NoRetryWarning",
    "ReservedMemWarning",
    "TaskMemoryError",
    "TaskMemoryWarning",
    "XarrayData",
    "adapt",
    "check",
    "compute",
    "fit",
    "from_xarray",
    "make_executor",
    "make_spec",
    "open_zarr",
    "plan",
    "plan_rows",
    "predict",
    "row_loss",
    "visualize",
    "worker_baseline",
]


def __getattr__(name: str) -> Any:
    # imported on first use: fit imports Cubed (its callbacks subclass cubed.Callback)
    if name == "fit":
        from ._fit import fit

        return fit
    if name in ("from_xarray", "XarrayData"):  # imports xarray only when asked
        from . import _xarray

        return getattr(_xarray, name)
    raise AttributeError(f"module 'cubed_plugin' has no attribute {name!r}")


def adapt(backend: Any) -> Any:
    """Refine the probed :class:`pycograd_xp.namespace.Backend` of Cubed with what Cubed can do.

    Called through the ``pycograd_xp.adapters`` entry point when a Cubed namespace is made.

    Parameters
    ----------
    backend : Backend
        The capabilities probed from Cubed's namespace.

    Returns
    -------
    Backend
        Lazy, chunked, immutable, block sampling, Cubed's projector and scipy.special's functions
        per block, over Cubed's namespace completed with what it lacks; its ops named by the part
        of the program that built them.
    """
    from ._indexing import index, index_add
    from ._labels import OpLabeller
    from ._special import lookup
    from .memory import project
    from .random import sample

    return dataclasses.replace(
        backend,
        xp=augmented(),
        lazy=True,
        chunked=True,
        mutable=False,
        ordered_writes=False,
        block_sampler=sample,
        projector=project,
        like_kwargs=_spec_of,
        special=lookup,
        compute=_compute_values,
        getitem=index,
        index_add=index_add,
        labeller=OpLabeller,  # its ops named by the part of the program that built them
    )


def _compute_values(*arrays: Any) -> tuple:
    """Cubed arrays' values as NumPy arrays, computed in one plan (:func:`compute`): the
    Backend's ``compute`` capability (``pycograd_xp.optim.lbfgs``'s line search)."""
    if not arrays:
        return ()
    return tuple(compute(list(arrays)))


def _spec_of(*arrays: Any) -> dict:
    """``like_kwargs`` on Cubed: the Spec the arrays meet on (a user's over the default)."""
    from ._operands import common_spec

    found = [a for a in arrays if hasattr(a, "spec")]
    spec = common_spec(found) if found else None
    return {"spec": spec or found[0].spec} if found else {}
