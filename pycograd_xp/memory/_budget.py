"""``within``: the step that fits a memory budget, its schedule chosen and proven by projection.

A schedule says which outputs of the forward pass the tape keeps for the backward pass and which
the backward pass makes again (``pycograd_xp._recompute``). The projection runs the step with a
schedule on abstract arrays through the very engine that will run it, so a schedule's projected
peak is the bound the real step is held to; choosing one is a search over schedules, each tried
by projecting it:

1. A probe: the step projected with nothing dropped lists every node the step records (its row,
   its output's bytes, the work of making it again). If it fits, nothing is recomputed.
2. Checkpoints, as Chen et al. 2016's greedy: walk the nodes in order, drop each while the bytes
   dropped since the last checkpoint stay under a segment size ``B``, and keep the node that
   would pass it (a checkpoint). A small ``B`` keeps nearly everything (little recompute, much
   memory), a large one keeps few checkpoints but makes long segments again at once. The
   segment sizes are tried from small to large, and the smallest that fits is narrowed by
   bisection: the fewest outputs dropped.
3. Refinement: the dropped outputs that cost the most to make again (matrix products first) are
   kept again one by one, each kept only if the schedule still fits.

Every schedule returned was projected at or under the budget; when none is found, the error
names the smallest peak any schedule reached, and the op that set it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from .. import _api
from .._host import HostScalar
from .._schedule import Plan, Recorded, outside, recomputed
from .._state import STACK, Remat, interpreting
from ..namespace._array import Array
from ..tree import tree_flatten, tree_map
from ._batches import (
    MAX_SLICES,
    MicroBatched,
    Slicing,
    batch_mean,
    batch_sum,
    slice_count,
    slicing,
    under,
)
from ._cost import faster
from ._project import AS_IS, _name, _which, project, step_peak
from ._report import MemoryLimitError, Projection
from ._scheduled import scheduled
from ._spec import _dtype_name, spec
from ._units import format_bytes, parse_bytes

# Schedules tried at most while keeping dropped outputs again (step 3): each is one projection.
REFINE_TRIES = 16
REFINE_MISSES = 4  # tries in a row that did not fit: the refinement stops
# Segment sizes tried (step 2): a geometric grid over the dropped bytes, then bisection.
GRID = 16
BISECT = 5
# When no size of the grid fits (step 2): sizes tried evenly, each also with its checkpoints
# shifted, at most this many new projections.
DENSE = 48
DENSE_TRIES = 40


@dataclass(frozen=True)
class Schedule:
    """What a budgeted step keeps and recomputes, and what it was proven to cost.

    Attributes
    ----------
    budget_bytes : int
        The budget asked for.
    peak_bytes : int
        The projected peak of the step under this schedule (at most the budget).
    unconstrained_bytes : int
        The projected peak of the step with nothing recomputed.
    nodes : tuple of Recorded
        Every node the step records (in micro-batches: one micro-batch's step), in order:
        ``index``, ``name`` (its row), ``nbytes`` (its
        output), ``cost`` (the work of making it again, in element operations), ``droppable``.
    drop : frozenset of int
        The indices of the nodes whose outputs the backward pass makes again.
    recompute_cost, forward_cost : int
        The work of the outputs made again, and of the whole forward pass (element operations:
        2 m n k for a product); their ratio is the extra forward work the schedule costs.
    projection : Projection
        The projection of the scheduled step (its rows show every recompute, in the backward).
    tries : int
        How many schedules were projected to choose this one.
    batch_rows, slice_rows : int or None
        In micro-batches (a loss declared by :func:`batch_mean`/:func:`batch_sum`): the batch's
        rows and the most rows of a micro-batch (they are as even as can be); None for the
        whole batch at once.
        ``slices`` counts the micro-batches, ``micro_batches`` says them in words.
    """

    budget_bytes: int
    peak_bytes: int
    unconstrained_bytes: int
    nodes: tuple[Recorded, ...]
    drop: frozenset[int]
    recompute_cost: int
    forward_cost: int
    projection: Projection = field(repr=False)
    tries: int = 0
    batch_rows: int | None = None
    slice_rows: int | None = None

    @property
    def slices(self) -> int:
        """How many micro-batches the step runs (1: the whole batch at once)."""
        if self.slice_rows is None or self.batch_rows is None:
            return 1
        return slice_count(self.batch_rows, self.slice_rows)

    @property
    def micro_batches(self) -> str:
        """The micro-batches in words ("4 micro-batches of 16 rows"; "" for the whole batch)."""
        n, count = self.batch_rows, self.slices
        if count == 1 or n is None:
            return ""
        rows = f"{n // count}" if n % count == 0 else f"{n // count} or {n // count + 1}"
        return f"{count} micro-batches of {rows} rows"

    @property
    def names(self) -> tuple[str, ...]:
        """The row of each node, in order (a run recording other rows stops dropping)."""
        return tuple(r.name for r in self.nodes)

    @property
    def recomputed(self) -> list[Recorded]:
        """The nodes whose outputs the backward pass makes again."""
        return [r for r in self.nodes if r.index in self.drop]

    @property
    def kept(self) -> list[Recorded]:
        """The droppable nodes whose outputs stay (the checkpoints)."""
        return [r for r in self.nodes if r.droppable and r.index not in self.drop]

    @property
    def extra_forward(self) -> float:
        """The recompute as a fraction of one forward pass's work."""
        return self.recompute_cost / self.forward_cost if self.forward_cost else 0.0

    def table(self, limit: int = 40) -> str:
        """The schedule as text: the peaks, then one line per node (kept or made again).

        Parameters
        ----------
        limit : int, default 40
            The most node lines shown.

        Returns
        -------
        str
            The table.
        """
        split = f"; {self.micro_batches}, each with" if self.micro_batches else ";"
        lines = [
            f"budget {format_bytes(self.budget_bytes)}: projected peak "
            f"{format_bytes(self.peak_bytes)} (unconstrained "
            f"{format_bytes(self.unconstrained_bytes)}){split} {len(self.drop)} of "
            f"{len(self.nodes)} outputs recomputed, "
            f"{100 * self.extra_forward:.0f}% of a forward pass's work again "
            f"({self.tries} schedules projected)",
            f"{'#':>4}  {'op':<18} {'shape':<18} {'bytes':>10}  {'schedule':<10} {'cost':>12}",
        ]
        for r in self.nodes[:limit]:
            what = "recompute" if r.index in self.drop else ("keep" if r.droppable else "fixed")
            lines.append(
                f"{r.index:>4}  {r.name:<18} {str(r.shape):<18} {format_bytes(r.nbytes):>10}  "
                f"{what:<10} {r.cost:>12}"
            )
        if len(self.nodes) > limit:
            lines.append(f"... {len(self.nodes) - limit} more")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def _greedy(
    cands: list[Recorded], held: set[int], segment: float, offset: float = 0.0
) -> frozenset[int]:
    """Chen's greedy over the outputs the tape holds (``held``: a rule reads them): drop while
    the bytes dropped since the last checkpoint stay under ``segment``, keep the output that
    would pass it (the first segment ``offset`` bytes shorter: the checkpoints shifted). An
    output no rule reads is dropped (made again only if a dropped output needs it)."""
    drop, acc = set(), offset
    for r in cands:
        if r.index not in held or r.nbytes == 0:
            drop.add(r.index)
        elif acc + r.nbytes > segment:
            acc = 0
        else:
            drop.add(r.index)
            acc += r.nbytes
    return frozenset(drop)


# pycograd_xp.compile, set by it on import (it builds on this package): a schedule for a
# compiled step is proven on the replay compile generates
COMPILE: list[Any] = [None]


class _Search:
    """The schedules tried, each projected once (its step's peak and op: ``step_peak``; with
    ``compiled``, the replay ``compile`` generates for it; with ``rows``, the step in
    micro-batches of that many rows, each dropping the schedule's outputs)."""

    def __init__(
        self,
        f: Any,
        args: tuple,
        kwargs: dict,
        nums: Any,
        compiled: bool = False,
        rows: int | None = None,
    ) -> None:
        self.f, self.args, self.kwargs, self.nums = f, args, kwargs, nums
        self.compiled, self.rows = compiled, rows
        self.names: tuple[str, ...] | None = None
        self.seen: dict[frozenset[int], tuple[int, tuple[str, str, int]]] = {}

    def step(self, drop: frozenset[int], logs: list | None = None) -> Any:
        """The step under the schedule dropping ``drop``, as it is projected."""
        if self.rows is not None:
            return under(self.f, Slicing(self.rows, drop, self.names, logs))
        g = scheduled(self.f, drop, self.names, logs)
        if not self.compiled:
            return g
        return COMPILE[0](g if self.nums == () else _api.value_and_grad(g, self.nums))

    def __call__(self, drop: frozenset[int]) -> int:
        """The projected peak of the step under the schedule dropping ``drop``."""
        got = self.seen.get(drop)
        if got is None:
            if self.compiled:
                p = self.projection(drop)
                got = (p.peak_bytes, p.peak_op)
            else:
                got = step_peak(self.step(drop), self.args, self.kwargs, self.nums)
            self.seen[drop] = got
        return got[0]

    def projection(self, drop: frozenset[int], logs: list | None = None) -> Projection:
        """The whole projection of the step under a schedule (the rows, both passes)."""
        nums = () if self.compiled else self.nums
        return project(self.step(drop, logs), *self.args, argnums=nums, **self.kwargs)

    def lowest(self) -> tuple[int, tuple[str, str, int]]:
        return min(self.seen.values(), key=lambda p: p[0])

    def probe(self) -> tuple[Projection, tuple[Recorded, ...]]:
        """The step projected with nothing dropped, and the nodes it records (in
        micro-batches: the first micro-batch's)."""
        logs: list = []
        full = self.projection(frozenset(), logs)
        nodes = tuple(logs[0 if self.rows is not None else -1]) if logs else ()
        self.names = tuple(r.name for r in nodes)
        self.seen[frozenset()] = (full.peak_bytes, full.peak_op)
        return full, nodes


def choose(
    f: Callable[..., Any],
    budget: int | float | str,
    *args: Any,
    argnums: int | Sequence[int] | None = None,
    compiled: bool = False,
    micro: Any = None,
    **kwargs: Any,
) -> Schedule:
    """The schedule of ``f``'s step (as :func:`project` takes it; ``compiled``: the replay
    ``compile`` generates for it) that fits ``budget``, the fewest and cheapest outputs made
    again; with ``micro`` (``(loss, rows_of)``: the :class:`MicroBatched` loss ``f`` calls and
    the batch's rows of a call's arguments), in the fewest micro-batches when the whole batch
    fits no schedule (:func:`choose_slices`); raises
    :class:`MemoryLimitError` when none does."""
    where = f"memory.within({_name(f)})"
    limit = parse_bytes(budget)
    nums = _which(f, argnums)
    if any(
        isinstance(leaf, Array) and leaf._backend.chunked
        for leaf in tree_flatten((args, kwargs))[0]
    ):
        raise NotImplementedError(
            f"{where}: a budget is chosen for eager steps (NumPy, array-api-strict, CuPy); on "
            "a chunked backend each task's memory is Cubed's: cubed_plugin.fit(one_pass=True) "
            "fits a chunk too large for its task by recompute or row slices"
        )
    if micro is not None:
        micro[1](args)  # the batch's rows: batch arguments that disagree are refused first
    search = _Search(f, args, kwargs, nums, compiled)
    full, nodes = search.probe()
    if full.peak_bytes <= limit:
        return _done(search, limit, full, full, nodes, frozenset())
    drop, why = fit_drop(search, nodes, limit)
    if drop is not None:
        whole = _done(search, limit, full, full, nodes, drop)
        if micro is None or compiled:
            return whole
        try:  # declared: the micro-batches that fit instead, where projected faster
            split = choose_slices(f, limit, args, kwargs, nums, micro, full, search, where)
        except MemoryLimitError:
            return whole
        return faster(whole, split, args, nums)
    if micro is not None and not compiled:
        return choose_slices(f, limit, args, kwargs, nums, micro, full, search, where)
    if micro is not None:
        why = (why + "; " if why else "") + (
            "under compile a step is not split into micro-batches: call it eagerly"
        )
    splittable = nums != () or getattr(f, AS_IS, False)  # a loss, or make_step's step
    _refuse(where, limit, full, search, why, hint=micro is None and not compiled and splittable)


def _done(
    search: _Search,
    limit: int,
    full: Projection,
    base: Projection,
    nodes: tuple[Recorded, ...],
    drop: frozenset[int],
    batch_rows: int | None = None,
    tries: int | None = None,
) -> Schedule:
    """The schedule dropping ``drop`` (``base``: its projection with nothing dropped; ``full``:
    the unconstrained step's), projected once more for its rows."""
    projection = search.projection(drop) if drop else base
    by_index = {r.index: r for r in nodes}
    return Schedule(
        budget_bytes=limit,
        peak_bytes=projection.peak_bytes,
        unconstrained_bytes=full.peak_bytes,
        nodes=nodes,
        drop=drop,
        recompute_cost=sum(by_index[i].cost for i in recomputed(nodes, drop)),
        forward_cost=sum(r.cost for r in nodes),
        projection=projection,
        tries=len(search.seen) if tries is None else tries,
        batch_rows=batch_rows,
        slice_rows=search.rows,
    )


def fit_drop(
    search: _Search, nodes: tuple[Recorded, ...], limit: int
) -> tuple[frozenset[int] | None, str]:
    """The schedule (the outputs dropped) that fits ``limit``, the fewest and dearest kept
    (module docstring, steps 2 and 3); ``(None, why)`` when none is found."""
    by_index = {r.index: r for r in nodes}
    cands = [r for r in nodes if r.droppable]
    held = {i for r in nodes for i in r.reads} | {r.index for r in nodes if r.reads_out}
    total = sum(r.nbytes for r in cands if r.index in held)
    sizes = sorted({r.nbytes for r in cands if r.nbytes > 0 and r.index in held})
    if not sizes:
        return None, "no output of the step can be recomputed"
    # step 2: segment sizes from the smallest output to all of them, geometrically
    lo, hi = float(sizes[0]), float(total)
    grid = [lo * (hi / lo) ** (i / (GRID - 1)) for i in range(GRID)] if hi > lo else [lo]
    fit, below = None, 0.0
    for segment in grid:
        if search(_greedy(cands, held, segment)) <= limit:
            fit = segment
            break
        below = segment
    if fit is not None:
        for _ in range(BISECT):  # the smallest segment that fits: the fewest outputs dropped
            mid = (below + fit) / 2
            if search(_greedy(cands, held, mid)) <= limit:
                fit = mid
            else:
                below = mid
        drop = _greedy(cands, held, fit)
    else:  # the peak is no smooth function of the segment: every size, the checkpoints shifted
        found = _dense(cands, held, lo, hi, limit, search)
        if found is None:
            return None, ""
        drop = found
    # step 3: keep again the dearest outputs while the schedule still fits
    made = recomputed(nodes, drop)
    misses = 0
    for i in sorted(made, key=lambda i: -by_index[i].cost)[:REFINE_TRIES]:
        trial = drop - {i}
        if search(trial) <= limit:
            drop, misses = trial, 0
        else:
            misses += 1
            if misses == REFINE_MISSES:  # (the rest cost less and fit no better)
                break
    return drop, ""


def _dense(
    cands: list[Recorded], held: set[int], lo: float, hi: float, limit: int, search: _Search
) -> frozenset[int] | None:
    """The schedule of the smallest segment size that fits, among ``DENSE`` sizes from ``lo``
    to ``hi``, each with its checkpoints where the greedy puts them and shifted by half a
    segment (at most ``DENSE_TRIES`` new projections); None when none fits."""
    tried = len(search.seen)
    for k in range(DENSE):
        segment = lo + (hi - lo) * k / (DENSE - 1)
        for shift in (0.0, 0.5):
            drop = _greedy(cands, held, segment, shift * segment)
            if search(drop) <= limit:
                return drop
            if len(search.seen) - tried >= DENSE_TRIES:
                return None
    return None


def choose_slices(
    f: Callable[..., Any],
    limit: int,
    args: tuple,
    kwargs: dict,
    nums: Any,
    micro: tuple[MicroBatched, Callable[[tuple], int]],
    full: Any,
    whole: Any,
    where: str,
) -> Any:
    """The schedule in the fewest micro-batches whose whole projected step fits ``limit``, when
    no schedule of the whole batch does (``whole``: that search; ``full``: its unconstrained
    projection).

    1. The most rows per micro-batch whose step, nothing recomputed, fits: by bisection over
       the rows (each candidate projected: every micro-batch, the accumulators, the
       arguments; ``R`` rows at most make ``ceil(n / R)`` micro-batches as even as can be).
    2. One micro-batch fewer, each recomputing (the recompute search of ``memory.within`` on
       the micro-batched step): taken when some schedule fits (fewer micro-batches, some work
       made again).
    3. At most :data:`MAX_SLICES` micro-batches: when those do not fit as they are, they are
       tried recomputing, and else refused (the smallest projected peak named) before any
       bisection.

    Raises :class:`MemoryLimitError` naming the smallest peak found when nothing fits.
    """
    _, rows_of = micro
    n = rows_of(args)
    searches: dict[int, Any] = {}

    def at(rows: int) -> Any:
        s = searches.get(rows)
        if s is None:
            s = searches[rows] = _Search(f, args, kwargs, nums, rows=rows)
        return s

    def tries() -> int:
        return len(whole.seen) + sum(len(s.seen) for s in searches.values())

    def recomputing(rows: int) -> Any:
        """The schedule of micro-batches of ``rows`` rows, each recomputing, that fits; None
        when even dropping every output the tape holds does not."""
        s = at(rows)
        base, nodes = s.probe()
        cands = [r for r in nodes if r.droppable]
        held = {i for r in nodes for i in r.reads} | {r.index for r in nodes if r.reads_out}
        if s(_greedy(cands, held, math.inf)) > limit:
            return None
        drop, _ = fit_drop(s, nodes, limit)
        if drop is None:
            return None
        return _done(s, limit, full, base, nodes, drop, n, tries())

    least = max(1, math.ceil(n / MAX_SLICES))  # the fewest rows a micro-batch is given
    if n <= 1 or at(least)(frozenset()) > limit:  # the floor first: nothing smaller is tried
        few = recomputing(least) if n > 1 else None
        if few is not None:
            return few
        _refuse_split(where, limit, n, least, full, [whole, *searches.values()])
    lo, hi = least, n  # micro-batches of hi rows do not fit (the whole batch: none fits); of lo do
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if at(mid)(frozenset()) <= limit:
            lo = mid
        else:
            hi = mid
    count = slice_count(n, lo)
    if count > 2:  # one micro-batch fewer, recomputing (two fewer is the whole batch)
        fewer = recomputing(math.ceil(n / (count - 1)))
        if fewer is not None:
            return fewer
    s = at(lo)
    base, nodes = s.probe()
    return _done(s, limit, full, base, nodes, frozenset(), n, tries())


def _refuse_split(
    where: str, limit: int, n: int, least: int, full: Any, searches: list
) -> NoReturn:
    best, (op, phase, i) = min((p for s in searches for p in s.seen.values()), key=lambda p: p[0])
    smallest = f"{least} row" + ("s" if least > 1 else "")
    raise MemoryLimitError(
        f"{where}: no schedule fits {format_bytes(limit)} ({limit} bytes), not even in "
        f"micro-batches of {smallest} of the {n} (at most {MAX_SLICES} micro-batches), "
        f"recomputing: the smallest projected peak found is {format_bytes(best)} ({best} bytes), "
        f"at {op} (row {i}, {phase}), against {format_bytes(full.peak_bytes)} for the whole "
        "batch with nothing recomputed; raise the budget to at least that (a micro-batch's step "
        "beside what every one keeps: the arguments, the parameters' gradients and their sums)"
    )


def _refuse(
    where: str, limit: int, full: Projection, search: _Search, why: str, hint: bool = False
) -> NoReturn:
    best, (op, phase, i) = search.lowest()
    if not why and best >= full.peak_bytes:
        why = (
            f"recomputing does not lower this step's peak: it is set by {op} in the {phase}, "
            "not by what the tape keeps"
        )
    reason = f" ({why})" if why else ""
    way = (
        "; or, if the loss is a mean (or sum) over independent rows of its batch arguments, "
        "declare it so, to split the batch into micro-batches (gradient accumulation): "
        "memory.batch_mean(loss) (every argument after the first is the batch; batch=(1, 2) "
        "names them), or memory.batch_sum(loss)"
        if hint
        else ""
    )
    raise MemoryLimitError(
        f"{where}: no schedule fits {format_bytes(limit)} ({limit} bytes){reason}: the "
        f"smallest projected peak found is {format_bytes(best)} "
        f"({best} bytes), at {op} (row {i}, {phase}), against "
        f"{format_bytes(full.peak_bytes)} with nothing recomputed; raise the budget to at "
        f"least that, or make the batch smaller{way}"
    )


def _example(leaf: Any) -> Any:
    """A leaf of a trace as what it stands for: a host scalar (an optimizer's step count) as
    its value, an array of the trace as its spec."""
    if isinstance(leaf, HostScalar):
        return leaf.example
    if isinstance(leaf, Array) and leaf._backend.abstract:
        return spec(tuple(leaf.shape), _dtype_name(leaf.dtype))
    return leaf


def _signature(args: tuple, kwargs: dict) -> tuple:
    """What a schedule depends on: each leaf's shape and dtype (other values as they are)."""
    out: list[tuple] = []
    for leaf in tree_flatten((args, kwargs))[0]:
        shape = getattr(leaf, "shape", None)
        if shape is not None:
            out.append((tuple(shape), _dtype_name(getattr(leaf, "dtype", None))))
        else:
            out.append((type(leaf).__name__, leaf if isinstance(leaf, int | float | str) else 0))
    return tuple(out)


class Budgeted:
    """``f`` with a memory schedule: its step's projected peak is within ``budget`` (see
    :func:`within`, which makes one). Called with arguments of new shapes or dtypes, it chooses
    their schedule first (once per signature).

    Parameters
    ----------
    f : callable
        The loss, or a function that differentiates inside (``argnums=()``).
    budget : int, float or str
        Bytes, or a string such as ``"200 MB"``.
    argnums : int, sequence of int, or None
        What must fit, as :func:`project` takes it.
    has_aux : bool, default False
        Whether ``f`` returns ``(loss, aux)``.
    micro : tuple, optional
        For a function that calls a declared loss inside (``train.make_step``'s step):
        ``(the declared loss, rows_of)``, ``rows_of(args)`` the batch's rows of a call.
    """

    def __init__(
        self,
        f: Callable[..., Any],
        budget: int | float | str,
        argnums: int | Sequence[int] | None = None,
        has_aux: bool = False,
        *,
        micro: tuple[MicroBatched, Callable[[tuple], int]] | None = None,
    ) -> None:
        if isinstance(f, MicroBatched):  # memory.batch_mean(loss): micro-batches allowed
            where = f"memory.within({_name(f)})"
            if has_aux:
                raise NotImplementedError(
                    f"{where}: {f!r} with has_aux: an aux output is not added up over "
                    "micro-batches; return the loss alone, or leave it undeclared"
                )
            if argnums == ():
                raise ValueError(
                    f"{where}: {f!r} declares a loss's batch, and argnums=() takes f as it is "
                    "(no loss): give the budget to the loss's gradient, or to train.make_step"
                )
            micro = (f, f.rows)
        functools.update_wrapper(self, f)  # (first: f's attributes never hide these)
        self.f, self.budget, self.argnums = f, parse_bytes(budget), argnums
        self.micro = micro
        self.schedules: dict[tuple, Schedule] = {}
        # what is projected: the loss alone (an aux output records no other nodes)
        self.loss = _first(f) if has_aux else f
        if getattr(f, AS_IS, False):
            setattr(self, AS_IS, True)

    def schedule(self, *args: Any, **kwargs: Any) -> Schedule:
        """The schedule for arguments like these (chosen and projected on first use).

        Parameters
        ----------
        *args, **kwargs : Any
            Arguments like the step's (arrays or specs: their shapes and dtypes are read).

        Returns
        -------
        Schedule
            What is kept and recomputed (and the micro-batches), and the projected peaks.

        Raises
        ------
        MemoryLimitError
            When no schedule fits the budget.
        """
        return self._schedule(args, kwargs, compiled=False)

    def _schedule(self, args: tuple, kwargs: dict, compiled: bool) -> Schedule:
        key = (_signature(args, kwargs), compiled)
        s = self.schedules.get(key)
        if s is None:
            with outside(), slicing(None):  # (called inside grad's trace: project the step
                # as it will run)
                s = choose(
                    self.loss,
                    self.budget,
                    *args,
                    argnums=self.argnums,
                    compiled=compiled,
                    micro=self.micro,
                    **kwargs,
                )
            self.schedules[key] = s
        return s

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if STACK.batch is not None:
            raise NotImplementedError(
                f"{self!r} under vmap: the budget is for the whole batched step; give it to the "
                "vmapped function instead: memory.within(vmap(grad(f), ...), budget, *args, "
                "argnums=())"
            )
        if STACK.tracing:  # compile: chosen on the replay, which records its recomputes
            specs, kw = tree_map(_example, (args, kwargs))
            s = self._schedule(specs, kw, compiled=True)
        elif STACK.redirect is not None:  # memory.project: chosen from the arguments' specs,
            # as for a call (projected from its abstract arrays, it chose for other inputs:
            # a schedule over the budget, then run so, or a budget it meets refused)
            specs, kw = tree_map(_example, (args, kwargs))
            s = self.schedule(*specs, **kw)
        else:
            s = self.schedule(*args, **kwargs)
        if s.slice_rows is not None:  # micro-batches: each runs its schedule (_batches)
            with slicing(Slicing(s.slice_rows, s.drop, s.names)):
                return self.f(*args, **kwargs)
        if not s.drop:
            return self.f(*args, **kwargs)
        plan = Plan(s.drop, s.names)
        with interpreting(Remat(plan)):
            return self.f(*args, **kwargs)

    def __repr__(self) -> str:
        return f"memory.within({_name(self.f)}, {format_bytes(self.budget)})"


def _first(f: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(f)
    def loss(*args: Any, **kwargs: Any) -> Any:
        return f(*args, **kwargs)[0]

    return loss


def within(
    f: Callable[..., Any],
    budget: int | float | str,
    *args: Any,
    argnums: int | Sequence[int] | None = None,
    has_aux: bool = False,
    **kwargs: Any,
) -> Budgeted:
    """``f``, with what its gradient step keeps and recomputes chosen to fit ``budget``, proven
    by projection before anything runs.

    The returned function computes ``f``'s values, and its gradients are ``f``'s, bit for bit:
    each output the schedule drops is made again in the backward pass by the same function on
    the same arguments. Differentiate it as ``f`` (``grad``, ``value_and_grad``, ``vjp``); the
    step's projected peak (:func:`project`, the bound the tests hold the measured peak to) is at
    most ``budget``. Among the schedules that fit, it makes the fewest outputs again, the dear
    ones (matrix products) last (see :mod:`pycograd_xp.memory._budget` for the search).

    A step whose peak is one layer's transients (a convolution's), not what the tape keeps, no
    recompute lowers. If the loss is a mean (or a sum) over independent rows of its batch
    arguments, declare it (:func:`batch_mean`, :func:`batch_sum`): when no schedule of the
    whole batch fits, the step runs in the fewest micro-batches whose whole projected step fits
    (each micro-batch's forward and backward pass in turn, the gradients added: gradient
    accumulation; see :mod:`pycograd_xp.memory._batches`). The loss and gradients then agree
    with ``f``'s to rounding, not bit for bit (the rows are added in another order), and only
    first derivatives are taken (``grad`` of ``grad``, ``jvp`` over it and ``vmap`` inside
    raise). An undeclared loss is never split.

    Parameters
    ----------
    f : callable
        A loss (``argnums`` an int or ints: its ``value_and_grad`` step is what must fit), or a
        function that differentiates inside (``argnums=()``, the default for
        ``train.make_step``'s steps: the whole step, its optimizer's update included).
    budget : int, float or str
        Bytes, or a string such as ``"200 MB"`` (:func:`parse_bytes`).
    *args : Array, Spec, or pytree of them
        Arguments like the ones the step will get (their shapes and dtypes): the schedule is
        chosen now. Without them it is chosen at the first call, for that call's shapes (and
        again for each new signature).
    argnums : int, sequence of int, or None
        As :func:`project`.
    has_aux : bool, default False
        Whether ``f`` returns ``(loss, aux)`` (as ``value_and_grad``'s ``has_aux``).
    **kwargs : Any
        Keyword arguments of ``f``, like ``args``.

    Returns
    -------
    Budgeted
        The function; ``.schedule(*args)`` gives its :class:`Schedule` (the peaks, each node kept
        or recomputed, the micro-batches, the extra work; ``print`` it for the table).

    Raises
    ------
    MemoryLimitError
        When no schedule fits: naming the smallest peak any schedule reached and its op.

    Examples
    --------
    >>> import numpy, pycograd_xp as pg
    >>> from pycograd_xp import memory
    >>> xp = pg.namespace(numpy)
    >>> def loss(ws, x):
    ...     for w in ws:
    ...         x = xp.tanh(x @ w)
    ...     return xp.mean(x**2)
    >>> ws = [xp.ones((64, 64)) / 64 for _ in range(8)]
    >>> x = xp.ones((256, 64))
    >>> full = memory.project(loss, ws, x).peak_bytes
    >>> fitted = memory.within(loss, 0.8 * full, ws, x)
    >>> fitted.schedule(ws, x).peak_bytes <= 0.8 * full
    True
    >>> g1 = pg.grad(fitted)(ws, x)
    >>> g2 = pg.grad(loss)(ws, x)
    >>> all(bool(xp.all(a == b)) for a, b in zip(g1, g2))
    True

    Declared a mean over the rows of ``x``, in micro-batches at 60 % (recompute alone fits 80 %,
    not 70 %):

    >>> split = memory.within(memory.batch_mean(loss), 0.6 * full, ws, x)
    >>> s = split.schedule(ws, x)
    >>> s.micro_batches
    '4 micro-batches of 64 rows'
    >>> s.peak_bytes <= 0.6 * full
    True
    >>> g3 = pg.grad(split)(ws, x)
    >>> all(bool(xp.all(xp.abs(a - b) <= 1e-12)) for a, b in zip(g3, g2))
    True
    """
    b = Budgeted(f, budget, argnums, has_aux)
    if args or kwargs:
        b.schedule(*args, **kwargs)
    return b


_api.BUDGETED[0] = Budgeted  # grad(..., budget=) and value_and_grad(..., budget=)
__all__ = ["Budgeted", "Schedule", "batch_mean", "batch_sum", "scheduled", "within"]
