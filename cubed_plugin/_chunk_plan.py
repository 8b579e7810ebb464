"""How a one-pass task computes a stored row chunk whose step does not fit its budget whole.

A one-pass task holds its chunk's reads (Cubed's copies of each input chunk, ``reserved_mem``)
and the chunk's value_and_grad step (:func:`cubed_plugin.steps.chunk_projection`). When that is
over ``allowed_mem``, two ways fit it, both computing the same sums:

- **recompute**: the step runs under a memory schedule (:func:`pycograd_xp.memory.within`),
  its backward pass making some outputs of the forward pass again, chosen to fit the budget the
  task has left for its step after its reads; the task is projected with the schedule's peak
  (and checked against ``allowed_mem`` with the planner's headroom, as slices are);
- **slices**: the chunk is computed in row slices, one slice's step at a time
  (:func:`cubed_plugin.memory.plan_slice_rows`).

:func:`plan_chunk` takes the one projected to cost less time beyond the whole chunk's step, by
a model whose constants are measured (``docs/calibration.md#chunk-choice``,
``benchmarks/bench_chunk_choice.py``):

- recompute: the forward work made again (``Schedule``'s element operations, at the rate of a
  product or of the other rows), plus a fixed cost per output made again (its call);
- slices: per slice beyond the first, the fixed cost of a step call, of each node it records
  (dispatch, the tape, the VJP call) and of its gradients (each parameter's made, flattened and
  added to the sums), which do not shrink with the rows.

Neither changes the values: a schedule's gradients are the step's bit for bit, slices' sums are
the chunk's to rounding.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pycograd_xp import memory
from pycograd_xp.memory import MemoryLimitError, Schedule, format_bytes
from pycograd_xp.tree import tree_flatten

# the cost model (constants measured by benchmarks/bench_chunk_choice.py) is the core's: a
# budgeted eager step of a declared loss chooses between the same two ways with it
from ._cubed_seam import recompute_microseconds, slices_microseconds
from .steps import Recompute

__all__ = ["ChunkPlan", "how", "plan_chunk", "recompute_microseconds", "slices_microseconds"]


@dataclass(frozen=True)
class ChunkPlan:
    """How a one-pass task computes its row chunk (:func:`plan_chunk`).

    Attributes
    ----------
    how : {"whole", "recompute", "slices"}
        The way chosen.
    rows : int
        The rows of a chunk.
    projection : ChunkedProjection
        The projection of a one-chunk step computed so.
    slice_rows : int or None
        With "slices": the rows of a slice.
    recompute : Recompute or None
        With "recompute": the schedule the tasks run.
    schedule : Schedule or None
        The schedule that fits (chosen or not): its peak, what it makes again.
    step_budget : int
        The bytes the task has left for its step after its reads (0 with "whole").
    costs : dict of str to float
        The projected microseconds each way that fits adds to a chunk's step.
    why_not : dict of str to str
        Why a way does not fit.
    """

    how: str
    rows: int
    projection: Any
    slice_rows: int | None = None
    recompute: Recompute | None = None
    schedule: Schedule | None = None
    step_budget: int = 0
    costs: dict[str, float] = field(default_factory=dict)
    why_not: dict[str, str] = field(default_factory=dict)
    alternative_slice_rows: int | None = None

    def short(self) -> str:
        """The way, in a few words."""
        if self.how == "recompute":
            return f"under a memory schedule ({self.recompute})"
        if self.how == "slices":
            return f"in row slices of {self.slice_rows:,} rows"
        return "whole"

    def describe(self) -> str:
        """What ``fit``'s log says: the way chosen, and why (both projected costs)."""
        head = (
            f"a one-pass task cannot compute a row chunk of {self.rows:,} rows whole within "
            f"allowed_mem {format_bytes(self.projection.allowed_mem)}: "
        )
        largest = f"largest task {format_bytes(self.projection.max_task_bytes)}"
        if self.how == "recompute":
            s = self.schedule
            assert s is not None
            what = (
                f"each task computes its chunk's step under a memory schedule ({self.recompute}, "
                f"{100 * s.extra_forward:.1f}% of a forward pass's work again; step peak "
                f"{format_bytes(s.peak_bytes)} of the {format_bytes(self.step_budget)} a task "
                f"has for it after its reads; {largest})"
            )
            other = (
                f" against +{self.costs['slices'] / 1000:.2f} ms in row slices of "
                f"{self.alternative_slice_rows:,} rows"
                if "slices" in self.costs
                else " (row slices cannot fit)"
            )
            ms = self.costs["recompute"] / 1000
            return f"{head}{what}: projected +{ms:.2f} ms a chunk{other}"
        if self.how == "slices":
            what = (
                f"each task computes its chunk in slices of {self.slice_rows:,} rows (one "
                f"slice's activations at a time, the sums added in the task; {largest})"
            )
            other = (
                f" against +{self.costs['recompute'] / 1000:.2f} ms under a memory schedule "
                f"({Recompute(self.schedule.drop, self.schedule.names)})"
                if "recompute" in self.costs and self.schedule is not None
                else f" (no memory schedule fits: {self.why_not.get('recompute', '')})"
            )
            ms = self.costs["slices"] / 1000
            return f"{head}{what}: projected +{ms:.2f} ms a chunk{other}"
        return f"each task computes its chunk of {self.rows:,} rows whole ({largest})"


def how(chunk: ChunkPlan | None) -> tuple[int | None, Recompute | None]:
    """(slice_rows, recompute) of ``chunk`` as ``steps.one_pass_step`` takes them."""
    if chunk is None:
        return None, None
    return chunk.slice_rows, chunk.recompute


# tries of the step's budget: when the schedule's task projects over the room (its reads
# counted otherwise than the whole chunk's task suggested), the budget lowered by the excess
_TRIES = 3


def plan_chunk(f: Any, params: Any, *data: Any, backend: Any = None) -> ChunkPlan:
    """How a one-pass task computes a stored row chunk of ``data``: whole when its step fits
    ``allowed_mem``; else under a memory schedule or in row slices, whichever fits and is
    projected faster (see the module's docstring).

    Parameters
    ----------
    f : RowLoss
        The loss (a :func:`~cubed_plugin.row_loss`).
    params : pytree
        The parameters (NumPy arrays).
    *data : cubed.Array or Spec
        The data (Cubed arrays, or specs with chunks), chunked along their rows alike.
    backend : cubed.Spec, optional
        The spec (default: the data's).

    Returns
    -------
    ChunkPlan
        The way, its projection, and both ways' projected costs.

    Raises
    ------
    MemoryLimitError
        When neither way fits, saying why for each.
    """
    from ._baseline import headroom
    from .memory import _spec_of, one_chunk, plan_slice_rows, step_projection

    spec = _spec_of((params, *data), backend)
    one = [one_chunk(x) for x in data]
    rows = int(one[0].shape[0])
    idx = tuple(range(1, len(data) + 1))

    def at(recompute: Recompute | None = None) -> Any:
        return step_projection(
            f, [params, *one], data=idx, mode="one-pass", spec=spec, recompute=recompute
        )

    whole = at()
    if whole.max_task_bytes <= whole.allowed_mem:
        return ChunkPlan("whole", rows, whole)
    room = whole.allowed_mem - headroom(whole.reserved_mem)
    costs: dict[str, float] = {}
    why: dict[str, str] = {}
    schedule, rec, p_rec, budget = None, None, None, 0
    try:
        schedule, rec, p_rec, budget = _fit_by_recompute(f, params, one, spec, whole, room, at)
        costs["recompute"] = recompute_microseconds(schedule)
    except MemoryLimitError as e:
        why["recompute"] = str(e)
    n, p_sl = None, None
    try:
        n, p_sl = plan_slice_rows(f, params, *one, backend=spec)
    except MemoryLimitError as e:
        why["slices"] = str(e)
    if n is not None:
        nodes = len(schedule.nodes) if schedule is not None else _nodes(f, params, one, spec)
        size = sum(int(np.size(leaf)) for leaf in tree_flatten(params)[0])
        costs["slices"] = slices_microseconds(nodes, size, rows, n)
    if not costs:
        raise MemoryLimitError(
            f"a one-pass task cannot compute a chunk of {rows:,} rows within allowed_mem "
            f"{format_bytes(whole.allowed_mem)} (its step whole: "
            f"{format_bytes(whole.max_task_bytes)}): neither under a memory schedule "
            f"({why['recompute']}) nor in row slices ({why['slices']})"
        )
    if "recompute" in costs and costs["recompute"] <= costs.get("slices", float("inf")):
        how, projection, slice_rows, recompute = "recompute", p_rec, None, rec
    else:
        how, projection, slice_rows, recompute = "slices", p_sl, n, None
    return ChunkPlan(
        how,
        rows,
        projection,
        slice_rows=slice_rows,
        recompute=recompute,
        schedule=schedule,
        step_budget=budget,
        costs=costs,
        why_not=why,
        alternative_slice_rows=n,
    )


def _fit_by_recompute(
    f: Any, params: Any, one: list, spec: Any, whole: Any, room: int, at: Callable[..., Any]
) -> tuple[Schedule, Recompute, Any, int]:
    """The schedule of a chunk's step that fits what its task has left after its reads (the
    whole chunk's task less its step), its task's projection within ``room``, and the step's
    budget; MemoryLimitError when there is none."""
    from .memory import stand_in
    from .steps import chunk_projection, chunk_specs, chunk_step

    arrays = tuple(stand_in(s, spec) for s in one)
    # the task without its step: its reads, reserved_mem, what a cast holds, its output
    reads = whole.max_task_bytes - chunk_projection(f, params, arrays).peak_bytes
    budget = room - reads
    param_specs, specs = chunk_specs(f, params, arrays)
    step = chunk_step(f)
    for _ in range(_TRIES):
        if budget <= 0:
            raise MemoryLimitError(
                f"the task's reads alone take {format_bytes(reads)} of the "
                f"{format_bytes(room)} it is planned to"
            )
        schedule = memory.within(step, budget, param_specs, *specs, argnums=0).schedule(
            param_specs, *specs
        )
        rec = Recompute(schedule.drop, schedule.names)
        p = at(rec)
        if p.max_task_bytes <= room:
            return schedule, rec, p, budget
        budget -= p.max_task_bytes - room
    raise MemoryLimitError(
        f"a task under the schedule that fits its step's budget projects "
        f"{format_bytes(p.max_task_bytes)}, over the {format_bytes(room)} it is planned to"
    )


def _nodes(f: Any, params: Any, one: list, spec: Any) -> int:
    """The nodes a chunk's step records (a schedule's probe)."""
    from .memory import stand_in
    from .steps import chunk_specs, chunk_step

    arrays = tuple(stand_in(s, spec) for s in one)
    param_specs, specs = chunk_specs(f, params, arrays)
    unbounded = 1 << 62
    schedule = memory.within(chunk_step(f), unbounded, param_specs, *specs, argnums=0)
    return len(schedule.schedule(param_specs, *specs).nodes)
