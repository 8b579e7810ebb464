"""Projected memory of a gradient step on Cubed, in Cubed's own terms, before anything runs.

The namespace builds the forward and the backward graph lazily (nothing computes); Cubed's own
planner then says, for every operation, the memory one task of it will use (reserved memory,
the input and output chunk copies, the op's extra memory for transposes, reductions, rechunks,
and the fusion of ops) and how many tasks it has. :func:`project` reads that plan, tells the
forward ops from the backward ones (by the arrays the forward pass alone creates), and reports
the largest task of each pass against ``Spec.allowed_mem``, and the intermediate storage the
step writes. :func:`plan_rows` chooses how many rows of the data go in one chunk so that every
task of the step fits.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from pycograd_xp import _api
from pycograd_xp.memory._project import MemoryLimitError, Spec, _dtype_name, _fmt, parse_bytes
from pycograd_xp.namespace._array import Array
from pycograd_xp.tree import tree_flatten, tree_map


@dataclasses.dataclass(frozen=True)
class TaskRow:
    """One Cubed operation of the step, as planned before fusion."""

    op: str  # Cubed's name of the operation (op-012)
    kind: str  # what Cubed calls it (blockwise, rechunk, ...)
    phase: str  # "forward" or "backward"
    projected_bytes: int  # memory of one of its tasks, Cubed's projection
    num_tasks: int


@dataclasses.dataclass
class ChunkedProjection:
    """Per-task memory of the value_and_grad step on Cubed (bytes, Cubed's projections)."""

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

    def check(self, limit: int | float | str | None = None) -> ChunkedProjection:
        """Raise :class:`MemoryLimitError` (before anything runs) if a task of the step would
        exceed ``limit`` (default: the Spec's ``allowed_mem``); return self."""
        n = self.allowed_mem if limit is None else parse_bytes(limit)
        if self.max_task_bytes > n:
            raise MemoryLimitError(
                f"projected task memory {_fmt(self.max_task_bytes)} ({self.max_task_bytes} "
                f"bytes) of {self.max_task_op} exceeds the limit {_fmt(n)} ({n} bytes), "
                f"including reserved_mem {_fmt(self.reserved_mem)}; use smaller chunks "
                "(cubed_plugin.memory.plan_rows chooses them) or raise allowed_mem"
            )
        return self

    def __str__(self) -> str:
        head = [
            f"projected step on Cubed: largest task {_fmt(self.max_task_bytes)} "
            f"({self.max_task_op}) "
            f"of allowed {_fmt(self.allowed_mem)}; forward {_fmt(self.forward_max_task_bytes)} "
            f"({self.forward_max_task_op}), backward {_fmt(self.backward_max_task_bytes)} "
            f"({self.backward_max_task_op}); {self.num_tasks} tasks; intermediate storage "
            f"{_fmt(self.intermediate_bytes)}",
            f"{'op':10} {'kind':14} {'phase':9} {'task memory':>12} {'tasks':>6}",
        ]
        body = [f"{r.op:10} {r.kind:14} {r.phase:9} {_fmt(r.projected_bytes):>12} "
                f"{r.num_tasks:>6}" for r in self.rows]  # fmt: skip
        return "\n".join(head + body)


def _inputs(args: Any, cubed_spec: Any, xp: Any) -> Any:
    import cubed

    def one(leaf: Any) -> Any:
        if isinstance(leaf, Spec):
            chunks = leaf.chunks if leaf.chunks is not None else "auto"
            return xp.asarray(cubed.empty(leaf.shape, dtype=_dtype_name(leaf.dtype),
                                          chunks=chunks, spec=cubed_spec))  # fmt: skip
        return leaf

    return tree_map(one, args)


def _spec_of(args: Any, backend: Any) -> Any:
    import cubed

    if isinstance(backend, cubed.Spec):
        return backend
    for leaf in tree_flatten(args)[0]:
        if isinstance(leaf, Array) and hasattr(leaf._data, "spec"):
            return leaf._data.spec
    return cubed.Spec()


def _op_number(name: str) -> int:
    tail = name.rpartition("-")[2]
    return int(tail) if tail.isdigit() else -1


def _op_rows(plan: Any, last_forward: int) -> list[TaskRow]:
    rows = []
    for name, node in plan.dag.nodes(data=True):
        op = node.get("primitive_op")
        if node.get("type") != "op" or op is None or name == "create-arrays":
            continue
        phase = "forward" if _op_number(name) <= last_forward else "backward"
        rows.append(TaskRow(name, node.get("op_name", "?"), phase, int(op.projected_mem),
                            int(op.num_tasks)))  # fmt: skip
    return sorted(rows, key=lambda r: _op_number(r.op))


def _largest(rows: list[TaskRow], phase: str) -> tuple[int, str]:
    picked = [r for r in rows if r.phase == phase]
    if not picked:
        return 0, "-"
    r = max(picked, key=lambda r: r.projected_bytes)
    return r.projected_bytes, r.op


def project(f: Callable[..., Any], *args: Any, argnums: int | Sequence[int] = 0,
            backend: Any = None, **kwargs: Any) -> ChunkedProjection:  # fmt: skip
    """Project the per-task memory of ``value_and_grad(f, argnums)(*args, **kwargs)`` on Cubed.

    ``args`` are arrays of ``namespace(cubed)``, :func:`pycograd_xp.memory.spec` objects (with
    ``chunks``; they become virtual Cubed arrays), other values, or pytrees of them.
    ``backend`` may be a ``cubed.Spec`` (for the specs); otherwise the arrays' Spec is used.
    The graph is built, never computed.
    """
    import cubed
    from cubed.core import plan as cubed_plan

    import pycograd_xp

    xp = pycograd_xp.namespace(cubed)
    spec = _spec_of(args, backend)
    args = _inputs(args, spec, xp)
    kwargs = _inputs(kwargs, spec, xp)
    boundary: list[int] = []

    def mark() -> None:  # Cubed names its ops in creation order: later ones are backward ops
        boundary.append(cubed_plan.sym_counter)

    _api.HOOKS.before_backward = mark
    try:
        with cubed.raise_if_computes():
            value, grads = _api.value_and_grad(f, argnums)(*args, **kwargs)
            targets = [value._data] + [g._data for g in tree_flatten(grads)[0]]
            unfused = cubed.plan(*targets, optimize_graph=False)
            fused = cubed.plan(*targets)
    finally:
        _api.HOOKS.before_backward = None
    rows = _op_rows(unfused, boundary[0])
    fused_rows = _op_rows(fused, boundary[0])
    top = max(fused_rows, key=lambda r: r.projected_bytes)
    fwd, fwd_op = _largest(rows, "forward")
    bwd, bwd_op = _largest(rows, "backward")
    return ChunkedProjection(
        max_task_bytes=int(fused.max_projected_mem), max_task_op=top.op,
        forward_max_task_bytes=fwd, forward_max_task_op=fwd_op,
        backward_max_task_bytes=bwd, backward_max_task_op=bwd_op,
        intermediate_bytes=int(fused.total_intermediate_nbytes),
        allowed_mem=int(spec.allowed_mem), reserved_mem=int(spec.reserved_mem or 0),
        num_tasks=int(fused.num_tasks), rows=rows,
    )  # fmt: skip


def plan_rows(f: Callable[..., Any], *args: Any, rows: int, data: Sequence[int] = (1,),
              argnums: int | Sequence[int] = 0, backend: Any = None,
              **kwargs: Any) -> tuple[int, ChunkedProjection]:  # fmt: skip
    """The most rows per chunk (of the ``data`` arguments, chunked along their first axis and
    whole along the others) for which every task of the step fits ``allowed_mem``, and the
    projection at that size. ``args`` at positions ``data`` are :func:`~pycograd_xp.memory.spec`
    objects of ``rows`` rows. Raises :class:`MemoryLimitError` explaining why when even one row
    per chunk does not fit (then the parameters or a per-row op alone are too large)."""

    def at(n: int) -> ChunkedProjection:
        call = list(args)
        for i in data:
            s = args[i]
            call[i] = Spec(s.shape, s.dtype, (n, *s.shape[1:]))
        return project(f, *call, argnums=argnums, backend=backend, **kwargs)

    lo = at(1)
    if lo.max_task_bytes > lo.allowed_mem:
        raise MemoryLimitError(
            f"plan_rows: even one row per chunk needs {_fmt(lo.max_task_bytes)} in "
            f"{lo.max_task_op}, over allowed_mem {_fmt(lo.allowed_mem)}: the parameters or an "
            "op that does not depend on the rows are too large for the budget; raise "
            "allowed_mem or shrink the model"
        )
    best, best_p = 1, lo
    top = at(rows)
    if top.max_task_bytes <= top.allowed_mem:
        return rows, top
    a, b = 1, rows  # a fits, b does not
    while b - a > max(1, a // 64):  # within 1.5% of the largest that fits
        mid = (a + b) // 2
        p = at(mid)
        if p.max_task_bytes <= p.allowed_mem:
            a, best, best_p = mid, mid, p
        else:
            b = mid
    return best, best_p

