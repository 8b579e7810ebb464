"""One-pass mode's step on stored data, planned once and run at new parameters on new batches.

A step of ``fit`` in one-pass mode (:func:`cubed_plugin.steps.one_pass_step`) is one task per
row chunk, each computing its chunk's loss and gradient sums. Built as a Cubed graph, every step
made a new plan for its parameters and its batch: the graph (a view of the picked chunks, the
row numbers, the tasks, a tree sum), Cubed's optimizer and the check, intermediate Zarr arrays
for the partial sums, then a Cubed compute; about 0.1 s of the driver's time and a few
stored arrays per step whatever the batch, which made a step on a few chunks cost many
times the work of its chunks.

:class:`PlannedStep` plans a step once per batch shape (the number of chunks, the parameters'
shapes and dtypes): it checks the projection of that graph against ``allowed_mem`` once (every
step of the shape runs the same tasks on chunks of the same size, so one check covers them all),
and makes a plan of one op whose tasks read their chunk of each data argument from Zarr
themselves and return their row of sums to the driver, writing nothing. A task may take several
chunks in turn (``chunks_per_task``): fewer tasks (Dask schedules each in a few milliseconds)
and, in a worker measured task by task, the later chunks read into the heap the earlier ones
freed, where each task's first chunk pages in memory the worker gave back before it. A step then
sets the parameters and the chunks in the tasks' configuration (``steps.TaskConfig``; shipped to the
tasks with each run: pickled for workers in other processes, shared by threads) and runs the
plan on the executor: one run of the plan per step, no plan built, no storage written. The
driver adds the rows as Cubed's sum did (:func:`cubed_plugin.steps.tree_sum`): the parameters
are the graph's to the bit.

It takes data stored as Cubed reads it (``cubed.from_zarr``, unsharded, Cubed's chunks the Zarr
chunks) and an executor that sends task results back (every one but Apache Beam's); ``fit`` runs
the graph otherwise.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from pycograd_xp.tree import tree_flatten

from ._casting import casts
from ._compute import plan as plan_of
from ._labels import LABEL, fn_name
from ._row_chunks import _stored, take_row_chunks
from .steps import (
    Recompute,
    RowLoss,
    TaskConfig,
    finish_sums,
    one_pass_fan_in,
    one_pass_step,
    one_pass_task,
    tree_sum,
)

__all__ = ["PlannedStep", "stored_arrays"]


def stored_arrays(data: Sequence[Any]) -> tuple | None:
    """The Zarr arrays holding ``data`` when every argument is stored data read as it is stored
    (``cubed.from_zarr``; unsharded, Cubed's chunks the Zarr chunks), else None."""
    arrays = tuple(_stored(x) for x in data)
    return None if any(z is None for z in arrays) else arrays


class PlannedStep:
    """One-pass mode's step on batches of ``len(picks)`` row chunks of stored ``data`` (all of
    them for ``picks`` None), at parameters shaped as ``host_p``: planned once, run at any
    parameters on any batch of that many chunks (:meth:`run`).

    ``reference`` is Cubed's plan of the step as a graph (``one_pass_step`` on the batch
    ``picks``), made with the plugin's plan optimizer: check it against ``allowed_mem``
    (``cubed_plugin._compute.refuse``) before the first run. ``plan`` is what runs: one op of a
    task per chunk, each projected at the largest task of ``reference`` (its chunk's reads, the
    forward and backward step, its row of sums); with ``chunks_per_task`` k, each task takes k
    chunks of the batch in turn (the last task what is left) and returns a row per chunk; with
    ``slice_rows``, each task computes a chunk in row slices of that size
    (:func:`cubed_plugin.steps.sliced_sums`); with ``recompute``, under that memory schedule
    (:class:`cubed_plugin.steps.Recompute`)."""

    def __init__(
        self,
        loss: RowLoss,
        host_p: Any,
        data: Sequence[Any],
        picks: list[int] | None,
        chunks_per_task: int = 1,
        slice_rows: int | None = None,
        recompute: Recompute | None = None,
    ) -> None:
        from ._cubed_seam import op_nodes, plan_dag, tasks_plan

        arrays = stored_arrays(data)
        if arrays is None:
            raise ValueError("PlannedStep: the data must be stored in Zarr (cubed.from_zarr)")
        batch = tuple(data) if picks is None else tuple(take_row_chunks(x, picks) for x in data)
        sums, treedef, self.shapes = one_pass_step(
            loss, host_p, batch, chunk_numbers=picks, slice_rows=slice_rows, recompute=recompute
        )
        self.reference = plan_of(sums)
        _, top = max(op_nodes(plan_dag(self.reference)), key=lambda o: o[1].projected_mem)
        self.chunks = tuple(int(c) for c in data[0].chunks[0])
        self.picked = len(batch[0].chunks[0])  # chunks in a batch
        self.tasks = -(-self.picked // chunks_per_task)
        self.loss = loss
        self.config = TaskConfig(
            loss.per_row,
            arrays,
            self.chunks[0],
            treedef,
            chunks_per_task=chunks_per_task,
            slice_rows=slice_rows,
            recompute=recompute,
            casts=casts(loss, host_p, [x.dtype for x in data]),
        )
        self.lock = threading.Lock()  # one run at a time: the runs share the configuration
        self.checked = False  # whether ``reference`` was checked against the budget
        how = "" if recompute is None else f", {recompute}"
        self.plan = tasks_plan(
            one_pass_task,
            list(range(self.tasks)),
            self.config,
            projected_mem=top.projected_mem,
            allowed_mem=top.allowed_mem,
            reserved_mem=top.reserved_mem,
            kind="one-pass",
            marks={
                LABEL: f"tasks in the one-pass step of {fn_name(loss)} (forward and backward "
                f"of each row chunk{how}, read from Zarr, sums added by the driver)"
            },
        )

    def run(
        self,
        host_p: Any,
        picks: list[int] | None,
        executor: Any,
        callbacks: Sequence[Any] = (),
        spec: Any = None,
        **kwargs: Any,
    ) -> tuple[float, Any, int]:
        """(loss, gradients, rows) at the parameters ``host_p`` (NumPy) on the row chunks
        ``picks`` of the data (all for None): one run of ``self.plan`` on ``executor``
        (``kwargs`` go to it, as ``cubed.compute``'s)."""
        from ._cubed_seam import run_tasks

        picks = list(range(len(self.chunks))) if picks is None else [int(i) for i in picks]
        if len(picks) != self.picked:
            raise ValueError(
                f"PlannedStep.run: a batch of {len(picks)} chunks for a step planned for "
                f"{self.picked}; plan another step"
            )
        leaves, _ = tree_flatten(host_p)
        with self.lock:
            self.config.leaves = [np.asarray(leaf) for leaf in leaves]
            self.config.picks = picks
            results = dict(run_tasks(self.plan, executor, callbacks, spec, **kwargs))
        if len(results) != self.tasks:
            name = getattr(executor, "name", type(executor).__name__)
            raise RuntimeError(
                f"fit: the {name!r} executor sent back {len(results)} of the {self.tasks} "
                "tasks' results; one-pass mode needs each task's result (or data it cannot "
                "read directly, which runs as a Cubed graph)"
            )
        chunk_rows = [row for b in range(self.tasks) for row in results[b]]  # in chunk order
        total = tree_sum(chunk_rows, one_pass_fan_in(self.picked))
        rows = sum(self.chunks[i] for i in picks)
        value, grads = finish_sums(total, self.config.treedef, self.shapes, rows, self.loss, host_p)
        return value, grads, rows
