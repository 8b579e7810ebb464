"""Projected memory of a gradient step on Cubed, in Cubed's own terms, before anything runs.

The namespace builds the forward and the backward graph lazily (nothing computes); Cubed's own
planner then says, for every operation, the memory one task of it will use (reserved memory,
the input and output chunk copies, the op's extra memory for transposes, reductions, rechunks,
and the fusion of ops) and how many tasks it has. :func:`project` reads that plan, as the
optimizer every public compute path uses makes it (``cubed_plugin.steps.graph_fusion``), tells
the forward ops from the backward ones (by the arrays the forward pass alone creates), and
reports the largest task of each pass against ``Spec.allowed_mem``, and the intermediate storage
the step writes. :func:`plan_rows` chooses how many rows of the data go in one chunk so that
every task of the step fits, for the mode ``fit`` runs (one-pass or graph).

Every op is named by the part of the user's program that built it (:func:`part_of`: "matmul in
mlp_loss (backward of tanh)"), and sizes are printed to three significant figures, with more
where two figures compared would otherwise read the same
(:func:`pycograd_xp.memory.format_byte_pair`).
"""

from __future__ import annotations

import atexit
import bisect
import contextlib
import dataclasses
import functools
import math
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from pycograd_xp import Array, unwrap
from pycograd_xp.memory import (
    MemoryLimitError,
    Spec,
    before_backward,
    format_byte_pair,
    format_bytes,
    parse_bytes,
)
from pycograd_xp.tree import tree_flatten, tree_map

from ._casting import stored_spec
from ._labels import label_of

__all__ = [
    "ChunkedProjection",
    "MemoryLimitError",
    "ReservedMemWarning",
    "TaskMemoryError",
    "TaskMemoryWarning",
    "TaskRow",
    "part_of",
    "plan_rows",
    "plan_slice_rows",
    "project",
    "stand_in",
    "step_projection",
]


class TaskMemoryError(RuntimeError):
    """A task's measured peak above its projection or above ``allowed_mem``.

    Raised by ``fit`` after the step that measured it (the parameters are not updated with that
    step).

    Parameters
    ----------
    message : str
        The message (naming the op, its part of the loss, both figures and the limit).
    overruns : list of Overrun, optional
        The ops over, largest excess first (:class:`~cubed_plugin.train.Overrun`).
    recorder : MemoryRecorder, optional
        Every op's figures (:class:`~cubed_plugin.train.MemoryRecorder`; ``.table()`` prints
        them).
    """

    def __init__(self, message: str, overruns: list | None = None, recorder: Any = None) -> None:
        super().__init__(message)
        self.overruns, self.recorder = overruns or [], recorder


class TaskMemoryWarning(UserWarning):
    """A measured overrun, when ``fit(memory_overrun="warn")`` was asked for."""


class ReservedMemWarning(UserWarning):
    """A Spec's ``reserved_mem`` below the memory the executor's workers measurably hold."""


# -- which part of the program an op is --------------------------------------------------------

# the attribute of a fused op node listing the labels of the ops fused into it
FUSED = "pycograd_xp_fused"
_COPY = "-copy"  # cubed_plugin._fusion's copies: the original's name and this suffix


def part_of(dag: Any, op: str) -> str:
    """What part of the user's program Cubed's op ``op`` of ``dag`` computes: the label the op
    got when it was made (:mod:`cubed_plugin._labels`), and those of the ops fused into it
    (plans made by ``cubed_plugin.plan``/``check``/``compute`` record them)."""
    from ._cubed_seam import node_mark

    own = label_of(dag, op)
    fused = [m for m in node_mark(dag, op, FUSED, ()) if m != own]
    if not fused:
        return own
    more = f" and {len(fused) - 4} more" if len(fused) > 4 else ""
    return f"{own}; fused with {', '.join(fused[:4])}{more}"


def _number(name: str) -> int:
    tail = name.split(_COPY)[0].rpartition("-")[2]
    return int(tail) if tail.isdigit() else -1


def annotate_fused(before: Any, after: Any) -> Any:
    """``after`` (``before`` optimized) with each fused op's node listing the labels of the ops
    fused into it (attribute ``FUSED``): the ops of ``before`` whose output the fused task
    computes instead of reading it from storage."""
    from ._cubed_seam import node_op, op_nodes, set_node_mark

    for name, po in list(op_nodes(after)):
        original = name.split(_COPY)[0]
        if original not in before:
            continue
        stored = {a.split(_COPY)[0] for a in po.source_array_names}
        members: set[str] = set()
        todo = [a for a in before.predecessors(original)]
        while todo:
            a = todo.pop()
            if a in stored:
                continue
            for producer in before.predecessors(a):
                if node_op(before, producer) is not None and producer not in members:
                    members.add(producer)
                    todo.extend(before.predecessors(producer))
        if members:
            labels = [label_of(before, m) for m in sorted(members, key=_number)]
            set_node_mark(after, name, FUSED, list(dict.fromkeys(labels)))
    return after


# -- the projection -----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class TaskRow:
    """One Cubed operation of the step, as planned before fusion."""

    op: str  # Cubed's name of the operation (op-012)
    kind: str  # what Cubed calls it (blockwise, rechunk, ...)
    phase: str  # "forward" or "backward" (graph mode), "one-pass" (one-pass mode)
    projected_bytes: int  # memory of one of its tasks, Cubed's projection
    num_tasks: int
    part: str = ""  # the part of the program that built it (part_of)


@dataclasses.dataclass
class ChunkedProjection:
    """Per-task memory of a gradient step on Cubed (bytes, Cubed's projections)."""

    max_task_bytes: int  # the largest task of the step as it will run (ops fused)
    max_task_op: str
    forward_max_task_bytes: int  # the largest task among the forward ops (before fusion)
    forward_max_task_op: str
    backward_max_task_bytes: int  # ... and among the backward ops
    backward_max_task_op: str
    intermediate_bytes: int  # intermediate storage the step writes (Zarr)
    allowed_mem: int
    reserved_mem: int
    num_tasks: int
    rows: list[TaskRow] = dataclasses.field(repr=False)
    max_task_part: str = ""  # the part of the program the largest task computes
    mode: str = "graph"  # the step projected: "graph" or "one-pass" (fit's modes)

    def check(self, limit: int | float | str | None = None) -> ChunkedProjection:
        """Raise :class:`MemoryLimitError` (before anything runs) if a task of the step would
        exceed ``limit`` (default: the Spec's ``allowed_mem``); return self."""
        n = self.allowed_mem if limit is None else parse_bytes(limit)
        if self.max_task_bytes > n:
            need, have = format_byte_pair(self.max_task_bytes, n)
            raise MemoryLimitError(
                f"projected task memory {need} of {self.max_task_op} ({self.max_task_part}) "
                f"exceeds the limit {have}, including reserved_mem "
                f"{format_bytes(self.reserved_mem)}; use smaller chunks "
                f"(cubed_plugin.memory.plan_rows(..., mode={self.mode!r}) chooses them) or "
                "raise allowed_mem"
            )
        return self

    def __str__(self) -> str:
        top = (
            f"largest task {format_bytes(self.max_task_bytes)} ({self.max_task_op}: "
            f"{self.max_task_part}) of allowed {format_bytes(self.allowed_mem)}"
        )
        if self.mode == "graph":
            top += (
                f"; forward {format_bytes(self.forward_max_task_bytes)} "
                f"({self.forward_max_task_op}), backward "
                f"{format_bytes(self.backward_max_task_bytes)} ({self.backward_max_task_op})"
            )
        head = [
            f"projected {self.mode} step on Cubed: {top}; {self.num_tasks} tasks; intermediate "
            f"storage {format_bytes(self.intermediate_bytes)}",
            f"{'op':10} {'kind':14} {'phase':9} {'task memory':>12} {'tasks':>6}  part",
        ]
        body = [
            f"{r.op:10} {r.kind:14} {r.phase:9} {format_bytes(r.projected_bytes):>12} "
            f"{r.num_tasks:>6}  {r.part}"
            for r in self.rows
        ]
        return "\n".join(head + body)


@functools.cache
def _stand_in_dir() -> str:
    path = tempfile.mkdtemp(prefix="pycograd-plan-")
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def stand_in(s: Spec, cubed_spec: Any) -> Any:
    """A Cubed array of the spec ``s`` (shape, dtype, chunks; "auto" chunks when None) that
    plans as stored data does: a Zarr array with its metadata only (nothing is written or
    read; planning never computes). ``cubed.empty`` would not do: a virtual array holds one
    value per chunk, and the plan optimizer sizes fusions by what an input's chunks hold."""
    import cubed
    import zarr

    dtype = s.dtype.name
    chunks = s.chunks if s.chunks is not None else "auto"
    chunks = cubed.empty(s.shape, dtype=dtype, chunks=chunks, spec=cubed_spec).chunksize
    path = os.path.join(_stand_in_dir(), f"{uuid.uuid4().hex}.zarr")
    zarr.open_array(path, mode="w", shape=s.shape, chunks=chunks, dtype=dtype)
    return cubed.from_zarr(path, spec=cubed_spec)


def _inputs(args: Any, cubed_spec: Any, xp: Any) -> Any:
    def one(leaf: Any) -> Any:
        return xp.asarray(stand_in(leaf, cubed_spec)) if isinstance(leaf, Spec) else leaf

    return tree_map(one, args)


def _spec_of(args: Any, backend: Any) -> Any:
    import cubed

    if isinstance(backend, cubed.Spec):
        return backend
    for leaf in tree_flatten(args)[0]:
        if isinstance(leaf, Array) and hasattr(unwrap(leaf), "spec"):
            return unwrap(leaf).spec
        if hasattr(leaf, "spec") and isinstance(leaf.spec, cubed.Spec):
            return leaf.spec
    return cubed.Spec()


def _op_rows(plan: Any, phase: Callable[[str], str]) -> list[TaskRow]:
    from ._cubed_seam import is_op, node_kind, op_nodes, plan_dag

    rows = []
    dag = plan_dag(plan)
    for name, op in op_nodes(dag):
        if not is_op(dag, name) or name == "create-arrays":
            continue
        rows.append(
            TaskRow(
                name,
                node_kind(dag, name),
                phase(name),
                int(op.projected_mem),
                int(op.num_tasks),
                part_of(dag, name),
            )
        )
    return sorted(rows, key=lambda r: _number(r.op))


def _largest(rows: list[TaskRow], phase: str) -> tuple[int, str]:
    picked = [r for r in rows if r.phase == phase]
    if not picked:
        return 0, "-"
    r = max(picked, key=lambda r: r.projected_bytes)
    return r.projected_bytes, r.op


def labelled_optimizer(optimize: Any, sound: bool) -> Any:
    """``optimize`` (an ``optimize_function`` for Cubed) recording in each fused op the labels
    of the ops fused into it (``cubed_plugin.memory.part_of`` names them)."""

    def optimize_labelled(dag: Any, array_names: Any) -> Any:
        out = optimize(dag, array_names=array_names)
        return out if out is dag else annotate_fused(dag, out)

    optimize_labelled.labelled, optimize_labelled.sound = True, sound  # type: ignore[attr-defined]
    return optimize_labelled


def sound_optimizer() -> Any:
    """``cubed_plugin.steps.graph_fusion()``, recording what each fused op computes."""
    from .steps import graph_fusion

    return labelled_optimizer(graph_fusion(), sound=True)


def _projection(targets: list, spec: Any, mode: str, last_forward: int = 0) -> ChunkedProjection:
    """The projection of computing ``targets`` together with the sound optimizer (what
    ``cubed_plugin.compute`` and ``fit`` run), its ops listed as planned before fusion."""
    import cubed

    if mode == "graph":

        def phase(name: str) -> str:
            return "forward" if _number(name) <= last_forward else "backward"
    else:

        def phase(name: str) -> str:
            return mode

    unfused = cubed.plan(*targets, optimize_graph=False)
    fused = cubed.plan(*targets, optimize_function=sound_optimizer())
    rows = _op_rows(unfused, phase)
    top = max(_op_rows(fused, phase), key=lambda r: r.projected_bytes)
    fwd, fwd_op = _largest(rows, "forward")
    bwd, bwd_op = _largest(rows, "backward")
    return ChunkedProjection(
        max_task_bytes=int(fused.max_projected_mem),
        max_task_op=top.op,
        forward_max_task_bytes=fwd,
        forward_max_task_op=fwd_op,
        backward_max_task_bytes=bwd,
        backward_max_task_op=bwd_op,
        intermediate_bytes=int(fused.total_intermediate_nbytes),
        allowed_mem=int(spec.allowed_mem),
        reserved_mem=int(spec.reserved_mem or 0),
        num_tasks=int(fused.num_tasks),
        rows=rows,
        max_task_part=top.part,
        mode=mode,
    )


@contextlib.contextmanager
def planning_only(caller: str) -> Iterator[None]:
    """Cubed's ``raise_if_computes`` (a projection builds the plan and never runs it), with its
    bare "'compute' was called" said in the user's terms: what computed, and the way out."""
    import cubed

    try:
        with cubed.raise_if_computes():
            yield
    except RuntimeError as e:
        if str(e) != "'compute' was called":
            raise
        raise ValueError(
            f"{caller}: building the plan needed values Cubed must compute first, which a "
            "projection does not run: Cubed 0.27 computes the integer index array of a "
            "gather (x[idx], take) and the counts of repeat to plan them, and here they are "
            "computed by the function or its gradient (a gather by computed indices, or the "
            "gradient of a gradient through a gather). Indices and counts given as constants "
            "(xp.asarray of a NumPy array) are read without computing; or project the "
            "first-order gradient, or measure instead (cubed_plugin.compute with its memory "
            "callbacks)"
        ) from None


def project(
    f: Callable[..., Any],
    *args: Any,
    argnums: int | Sequence[int] = 0,
    backend: Any = None,
    **kwargs: Any,
) -> ChunkedProjection:
    """Project the per-task memory of ``value_and_grad(f, argnums)(*args, **kwargs)`` on Cubed,
    computed as ``cubed_plugin.compute`` (and ``fit``'s graph mode) computes it: with the
    plan optimizer ``cubed_plugin.steps.graph_fusion``.

    ``args`` are arrays of ``namespace(cubed)``, :func:`pycograd_xp.memory.spec` objects (with
    ``chunks``; they become virtual Cubed arrays), other values, or pytrees of them.
    ``backend`` may be a ``cubed.Spec`` (for the specs); otherwise the arrays' Spec is used.
    The graph is built, never computed.
    """
    import cubed

    import pycograd_xp

    from ._cubed_seam import op_counter
    from .namespace import label_ops

    label_ops()
    xp = pycograd_xp.namespace(cubed)
    spec = _spec_of(args, backend)
    args = _inputs(args, spec, xp)
    kwargs = _inputs(kwargs, spec, xp)
    boundary: list[int] = []

    def mark() -> None:  # Cubed names its ops in creation order: later ones are backward ops
        boundary.append(op_counter())

    with before_backward(mark), planning_only("memory.project()"):
        value, grads = pycograd_xp.value_and_grad(f, argnums)(*args, **kwargs)
        targets = [unwrap(value)] + [unwrap(g) for g in tree_flatten(grads)[0]]
        return _projection(targets, spec, "graph", boundary[0])


# -- the planner --------------------------------------------------------------------------------


def _zeros_like(a: Any) -> np.ndarray:
    """A NumPy stand-in of a parameter's shape and dtype (nothing is computed)."""
    a = unwrap(a)
    return np.zeros(tuple(int(s) for s in a.shape), dtype=np.dtype(str(a.dtype)))


def _graph_params(tree: Any, spec: Any) -> Any:
    """NumPy leaves of ``tree`` as Cubed arrays of namespace(cubed), as ``fit``'s graph mode
    gives them to the loss (larger than 1 MB: stored, here a virtual array of one chunk)."""
    import cubed

    import pycograd_xp as pg

    from .steps import ParameterStore

    xp = pg.namespace(cubed)

    def one(leaf: Any) -> Any:
        if not isinstance(leaf, np.ndarray):
            return leaf
        if leaf.nbytes <= ParameterStore.LIMIT:
            return xp.asarray(cubed.asarray(leaf, spec=spec))
        return xp.asarray(cubed.empty(leaf.shape, dtype=leaf.dtype, chunks=leaf.shape, spec=spec))

    return tree_map(one, tree)


def step_projection(
    f: Callable[..., Any],
    args: Sequence[Any],
    *,
    data: Sequence[int],
    mode: str,
    spec: Any,
    argnums: int | Sequence[int] = 0,
    slice_rows: int | None = None,
    recompute: Any = None,
    **kwargs: Any,
) -> ChunkedProjection:
    """The projection of ``fit``'s step in ``mode`` ("graph" or "one-pass") of ``f`` on
    ``args``, whose positions ``data`` hold the data (Cubed arrays, or specs with chunks); in
    one-pass mode with ``slice_rows``, each task computing its chunk in slices of that many
    rows, with ``recompute`` (a :class:`~cubed_plugin.steps.Recompute`), under that memory
    schedule."""
    import cubed

    import pycograd_xp as pg

    from .namespace import label_ops

    label_ops()
    if mode == "graph":
        from ._casting import StoredSpec, cast_lazily, casts

        xp = pg.namespace(cubed)
        # data stored as float16 (or declared cast) enters the plan cast, as fit's graph step
        params = [a for i, a in enumerate(args) if i not in data]
        targets = dict(zip(data, casts(f, params, [args[i].dtype for i in data]), strict=True))

        def datum(i: int, a: Any) -> Any:
            if isinstance(a, Array) or (isinstance(a, Spec) and targets[i] is None):
                return a
            raw = stand_in(a, spec) if isinstance(a, StoredSpec | Spec) else a
            return xp.asarray(cast_lazily(raw, targets[i]))

        call = [datum(i, a) if i in data else _graph_params(a, spec) for i, a in enumerate(args)]
        return project(f, *call, argnums=argnums, backend=spec, **kwargs)
    from .steps import RowLoss, one_pass_step

    if not isinstance(f, RowLoss):
        raise TypeError(
            "plan_rows(mode='one-pass'): the loss must be declared row-separable "
            "with cubed_plugin.row_loss, or plan mode='graph'"
        )
    if list(data) != list(range(1, len(args))) or argnums != 0 or kwargs:
        raise ValueError(
            "plan_rows(mode='one-pass'): fit's one-pass step is "
            "loss(params, *data): give the parameters first and the data after "
            f"them, data=(1, ..., {len(args) - 1}), argnums=0, no keyword "
            "arguments"
        )

    def array(s: Any) -> Any:
        return stand_in(s, spec) if isinstance(s, Spec) else pg.unwrap(s)

    params = tree_map(_zeros_like, args[0])
    with planning_only("plan_rows(mode='one-pass')"):
        total, _, _ = one_pass_step(
            f,
            params,
            tuple(array(s) for s in args[1:]),
            slice_rows=slice_rows,
            recompute=recompute,
        )
        return _projection([total], spec, "one-pass")


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small) | {n // d for d in small})


def plan_rows(
    f: Callable[..., Any],
    *args: Any,
    rows: int,
    data: Sequence[int] = (1,),
    argnums: int | Sequence[int] = 0,
    backend: Any = None,
    mode: str = "auto",
    batch_rows: int | None = None,
    **kwargs: Any,
) -> tuple[int, ChunkedProjection]:
    """The most rows per chunk for which every task of the step fits ``allowed_mem``, and the
    projection at that size.

    Each task is planned to leave 5 % of ``reserved_mem`` of ``allowed_mem`` free
    (``cubed_plugin._baseline.HEADROOM``): the room for a worker baseline that varies between
    processes and for a run's re-plan after its workers' memory grew, so that chunks planned in
    one process still fit in another.

    The ``data`` arguments are chunked along their first axis and whole along the others;
    nothing is computed.

    Parameters
    ----------
    f : callable
        The loss (a :func:`~cubed_plugin.row_loss` for the one-pass mode).
    *args : pytree
        Its arguments; those at positions ``data`` are :func:`~pycograd_xp.memory.spec`
        objects of ``rows`` rows.
    rows : int
        The rows of the data.
    data : sequence of int, default (1,)
        The positions of the data arguments.
    argnums : int or sequence of int, default 0
        The arguments differentiated (the parameters).
    backend : cubed.Spec, optional
        The spec (its ``allowed_mem`` and ``reserved_mem``).
    mode : {"auto", "graph", "one-pass"}, default "auto"
        The step planned, as ``fit`` runs it:

        - ``"graph"``: ``value_and_grad(f, argnums)`` on ``namespace(cubed)``, computed with
          ``graph_fusion`` (``fit``'s graph mode, ``cubed_plugin.compute``); parameters may be
          arrays of ``namespace(cubed)`` or NumPy arrays (made Cubed arrays as ``fit`` makes
          them);
        - ``"one-pass"``: ``fit``'s one-pass step (one task per row chunk runs the chunk's forward
          and backward): ``f`` is a :func:`~cubed_plugin.row_loss` and ``args`` are
          ``(params, *data)``; its tasks hold a whole chunk's step, so its chunks are smaller;
        - ``"auto"``: what ``fit(mode="auto")`` runs: one-pass for a ``row_loss``, else graph.
    batch_rows : int, optional
        ``fit``'s mini-batch rows; a batch is made of whole chunks, so only chunk sizes that
        divide it are considered.
    **kwargs : Any
        Keyword arguments of ``f``.

    Returns
    -------
    rows_per_chunk : int
        The largest chunk that fits.
    projection : ChunkedProjection
        The projection at that size.

    Raises
    ------
    MemoryLimitError
        Explaining why, when even the smallest chunk does not fit (then the parameters or a
        per-row op alone are too large).
    """
    from ._baseline import headroom
    from .steps import RowLoss

    if mode not in ("auto", "one-pass", "graph"):
        raise ValueError(f"plan_rows: mode must be 'auto', 'one-pass' or 'graph', got {mode!r}")
    if mode == "auto":
        mode = "one-pass" if isinstance(f, RowLoss) else "graph"
    spec = _spec_of(args, backend)
    if batch_rows is not None and not 0 < batch_rows <= rows:
        raise ValueError(f"plan_rows: batch_rows={batch_rows} must be between 1 and rows={rows}")

    def at(n: int) -> ChunkedProjection:
        call = list(args)
        for i in data:
            s = args[i]
            call[i] = stored_spec(s.shape, s.dtype, (n, *s.shape[1:]))
        return step_projection(f, call, data=data, mode=mode, spec=spec, argnums=argnums, **kwargs)

    def fits(p: ChunkedProjection) -> bool:  # with room for the baseline's variation
        return p.max_task_bytes <= p.allowed_mem - headroom(p.reserved_mem)

    sizes = range(1, rows + 1) if batch_rows is None else _divisors(batch_rows)
    hi = len(sizes) - 1
    over = at(sizes[hi])
    if fits(over):
        return sizes[hi], over
    while True:  # halve until a size fits: the small sizes, slow to plan, only when needed
        lo = max(0, min(hi - 1, bisect.bisect_right(sizes, sizes[hi] // 2) - 1))
        best = at(sizes[lo])
        if fits(best):
            break
        if lo == 0:
            need, have = format_byte_pair(best.max_task_bytes, best.allowed_mem)
            smallest = "one row" if sizes[0] == 1 else f"{sizes[0]:,} rows"
            raise MemoryLimitError(
                f"plan_rows ({mode} mode): even {smallest} per chunk needs {need} per task "
                f"in {best.max_task_op} ({best.max_task_part}), over allowed_mem {have} (of "
                f"which reserved_mem {format_bytes(best.reserved_mem)}; "
                f"{format_bytes(headroom(best.reserved_mem))} of it left free for the workers' "
                "baseline to vary): the parameters or an op "
                "that does not depend on the rows are too large for the budget; raise "
                "allowed_mem or shrink the model"
            )
        hi, over = lo, best
    # sizes[lo] fits, sizes[hi] does not: narrow to within 1.5% of the largest that fits, by
    # interpolation (a task's memory grows about linearly with its rows, and each plan is slow
    # to make), kept inside the middle three quarters of the interval so that it shrinks by
    # an eighth at least each time
    while hi - lo > 1 and sizes[hi] - sizes[lo] > max(1, sizes[lo] // 64):
        under, limit = best.max_task_bytes, best.allowed_mem
        guess = lo + (hi - lo) * (limit - under) / max(1, over.max_task_bytes - under)
        span = (hi - lo) / 8
        mid = min(max(int(min(max(guess, lo + span), hi - span)), lo + 1), hi - 1)
        p = at(sizes[mid])
        if fits(p):
            lo, best = mid, p
        else:
            hi, over = mid, p
    return sizes[lo], best


def one_chunk(x: Any) -> Spec:
    """The stored spec of one row chunk of ``x`` (a Cubed array, or a spec with chunks) whole:
    what a one-pass task reads (float16 data: a spec the tasks cast)."""
    shape = tuple(int(n) for n in x.shape)
    chunks: Any = getattr(x, "chunks", None) or shape
    rows = int(chunks[0][0]) if isinstance(chunks[0], tuple) else int(chunks[0])
    one = (rows, *shape[1:])
    return stored_spec(one, x.dtype, one)


def plan_slice_rows(
    f: Callable[..., Any], params: Any, *data: Any, backend: Any = None
) -> tuple[int | None, ChunkedProjection]:
    """In one-pass mode, how a task computes a stored row chunk of ``data``: whole when its
    step fits ``allowed_mem`` (None), else in row slices of the most rows for which it fits
    with the planner's headroom (``cubed_plugin._baseline.HEADROOM``), one slice's activations
    at a time and the sums added in the task; and the projection of that task. ``fit`` runs
    its one-pass steps so, and says so, before it refuses chunks too large: the data need no
    rewrite while a slice fits.

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
    slice_rows : int or None
        The rows of a slice; None when the whole chunk fits.
    projection : ChunkedProjection
        The projection of a one-chunk step computed so.

    Raises
    ------
    MemoryLimitError
        When not even one row per slice fits: reading one stored chunk (its compressed bytes,
        its decoded buffer and the chunk) is then over the budget; use smaller chunks.
    """
    from ._baseline import headroom

    spec = _spec_of((params, *data), backend)
    one = [one_chunk(x) for x in data]
    rows = int(one[0].shape[0])
    idx = tuple(range(1, len(data) + 1))

    def at(k: int | None) -> ChunkedProjection:
        return step_projection(
            f, [params, *one], data=idx, mode="one-pass", spec=spec, slice_rows=k
        )

    whole = at(None)
    if whole.max_task_bytes <= whole.allowed_mem:
        return None, whole
    room = whole.allowed_mem - headroom(whole.reserved_mem)
    lo, hi = 0, rows  # a slice of hi rows does not fit; of lo rows (0: none known) does
    best = None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        p = at(mid)
        if p.max_task_bytes <= room:
            lo, best = mid, p
        else:
            hi = mid
    if best is None:
        p = at(1)
        need, have = format_byte_pair(p.max_task_bytes, room)
        raise MemoryLimitError(
            f"a one-pass task cannot compute a chunk of {rows:,} rows in this budget even one "
            f"row at a time: it needs {need} (reading the stored chunk: its compressed bytes, "
            f"its decoded buffer and the chunk; and one row's step), over the {have} of "
            f"allowed_mem {format_bytes(whole.allowed_mem)} a task is planned to"
        )
    return lo, best
