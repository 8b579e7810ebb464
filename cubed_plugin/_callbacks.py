"""Callbacks for Cubed's computes: a progress bar of a step's tasks (:class:`Progress`) and
measured against projected task memory per op (:class:`MemoryRecorder`, whose
:meth:`~MemoryRecorder.overruns` are :class:`Overrun` records). Importing this module imports
Cubed (they are ``cubed.Callback`` subclasses)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import cubed

from pycograd_xp.memory import format_byte_pair, format_bytes

from ._cubed_seam import node_kind, op_nodes
from .memory import part_of

__all__ = ["MemoryRecorder", "Overrun", "Progress"]


class Progress(cubed.Callback):
    """A tqdm progress bar of a step's tasks (a ``cubed.Callback``; Cubed's own diagnostics pull
    rich and pandas).

    Parameters
    ----------
    desc : str, default "step"
        The bar's label.
    disable : bool, default False
        No bar.
    """

    def __init__(self, desc: str = "step", disable: bool = False) -> None:
        self.desc, self.disable, self.bar = desc, disable, None

    def on_compute_start(self, event: Any) -> None:
        if self.disable:  # tqdm.auto not even imported: in a notebook without ipywidgets its
            return  # import alone warns (TqdmWarning: IProgress not found)
        from tqdm.auto import tqdm

        total = sum(op.num_tasks for _, op in op_nodes(event.dag))
        self.bar = tqdm(total=total, desc=self.desc, unit="task", leave=False, disable=self.disable)

    def on_task_end(self, event: Any) -> None:
        if self.bar is not None:
            self.bar.update(event.num_tasks)

    def on_compute_end(self, event: Any) -> None:
        if self.bar is not None:
            self.bar.close()


@dataclass(frozen=True)
class Overrun:
    """A task whose measured peak went over its projection or over ``allowed_mem``.

    ``str()`` of it is one line naming the op, its part of the program and the figures.

    Parameters
    ----------
    op : str
        Cubed's name of the op.
    part : str
        The part of the program it computes (``cubed_plugin.memory.part_of``).
    measured : int
        The largest measured task peak of the op (bytes).
    projected : int
        Its projected task memory.
    allowed : int
        ``allowed_mem``.
    reserved : int
        ``reserved_mem``.
    start : int, optional
        The most its worker held when one of its tasks started (bytes; None where not
        measured).
    data : int, optional
        The most one of its tasks added to what its worker held at its start (bytes).
    """

    op: str  # Cubed's name of the op
    part: str  # the part of the program it computes (cubed_plugin.memory.part_of)
    measured: int  # the largest measured task peak of the op (bytes)
    projected: int  # its projected task memory
    allowed: int  # allowed_mem
    reserved: int  # reserved_mem
    start: int | None = None  # the most its worker held at a task's start
    data: int | None = None  # the most a task added to that

    @property
    def started_above(self) -> bool:
        """Whether a worker held more than ``reserved_mem`` when a task of the op started."""
        return self.start is not None and self.start > self.reserved

    @property
    def drift(self) -> bool:
        """Whether the overrun is the worker's own memory, not the task's data: a task started
        above ``reserved_mem``, and no task added more than its projection allows above the
        worker's baseline (``reserved_mem`` less its margin, ``cubed_plugin._baseline.MARGIN``:
        a task's own small allocations are in that margin)."""
        from ._baseline import MARGIN

        return (
            self.started_above
            and self.data is not None
            and self.data <= self.projected - math.floor(self.reserved / MARGIN)
        )

    def __str__(self) -> str:
        what = " and ".join(
            w
            for w, over in (
                ("its projection", self.measured > self.projected),
                ("allowed_mem", self.measured > self.allowed),
            )
            if over
        )
        m, p = format_byte_pair(self.measured, self.projected)
        _, a = format_byte_pair(self.measured, self.allowed)
        line = (
            f"{self.op} ({self.part}) measured {m} in a task, over {what}: projected {p}, "
            f"allowed_mem {a} (of which reserved_mem {format_bytes(self.reserved)})"
        )
        if self.started_above:
            held, reserved = format_byte_pair(int(self.start or 0), self.reserved)
            line += f"; the worker held {held} before this task; reserved_mem is {reserved}"
        return line


class MemoryRecorder(cubed.Callback):
    """Measured against projected task memory, per op (a ``cubed.Callback``), with the part of the
    program each op computes.

    Only executors that measure tasks (processes, dask, ...) report measured peaks;
    :meth:`overruns` lists the ops whose measured peak went over their projection or
    ``allowed_mem``, and :meth:`table` prints every op's figures (``FitResult.memory`` is one).

    Parameters
    ----------
    per_task : bool, default True
        False when the executor's measured peaks are not each task's own (a worker reused for
        many tasks reports its lifetime peak): they are not recorded, and the table says the
        executor cannot measure.
    why : str, default ""
        Why it cannot, for the table.
    """

    def __init__(self, per_task: bool = True, why: str = "") -> None:
        # per_task False: the executor's measured peaks are not each task's own (a worker
        # reused for many tasks reports its lifetime peak): they are not recorded, and the
        # table says the executor cannot measure (``why``)
        self.per_task, self.why = per_task, why
        self.unmeasured = 0  # tasks that reported no peak of their own
        self.projected: dict[str, int] = {}
        self.measured: dict[str, int] = {}
        self.started: dict[str, int] = {}  # the most a worker held at a task's start, per op
        self.added: dict[str, int] = {}  # the most a task added to that, per op
        self.kinds: dict[str, str] = {}
        self.parts: dict[str, str] = {}
        self.limits: dict[str, tuple[int, int]] = {}  # (allowed_mem, reserved_mem)
        self.steps: list[list[str]] = []  # the ops of each compute, in plan order

    def __repr__(self) -> str:
        measured = (
            f"{len(self.measured)} measured, {len(self.overruns())} over"
            if self.measured
            else "none measured"
        )
        return (
            f"MemoryRecorder({len(self.steps)} computes, {len(self.projected)} ops projected, "
            f"largest task {format_bytes(self.max_projected())}, {measured}; .table() shows them)"
        )

    def on_compute_start(self, event: Any) -> None:
        ops = []
        for name, op in op_nodes(event.dag):
            self.projected[name] = int(op.projected_mem)
            self.kinds[name] = node_kind(event.dag, name)
            self.parts[name] = part_of(event.dag, name)
            self.limits[name] = (int(op.allowed_mem), int(op.reserved_mem))
            ops.append(name)
        self.steps.append(ops)

    def on_task_end(self, event: Any) -> None:
        m = event.peak_measured_mem_end
        if m is None or not self.per_task:
            self.unmeasured += 1
        else:
            self.measured[event.name] = max(self.measured.get(event.name, 0), int(m))
            s = event.peak_measured_mem_start
            if s is not None:
                self.started[event.name] = max(self.started.get(event.name, 0), int(s))
                self.added[event.name] = max(self.added.get(event.name, 0), int(m) - int(s))

    def highest_start(self, ops: Sequence[str] | None = None) -> int | None:
        """The most a worker held when a task of ``ops`` (default: all recorded) started.

        Parameters
        ----------
        ops : sequence of str, optional
            The ops (None: every op recorded).

        Returns
        -------
        int or None
            Bytes (None when no task's start was measured).
        """
        starts = [
            self.started[op] for op in (self.started if ops is None else ops) if op in self.started
        ]
        return max(starts, default=None)

    def report(self) -> list[tuple[str, int, int | None]]:
        """Every op recorded, with its figures.

        Returns
        -------
        list of (str, int, int or None)
            ``(op, projected bytes, measured bytes or None)``.
        """
        return [(op, p, self.measured.get(op)) for op, p in self.projected.items()]

    def max_projected(self) -> int:
        """The largest projected task memory of any op.

        Returns
        -------
        int
            Bytes (0 when nothing was recorded).
        """
        return max(self.projected.values(), default=0)

    def over(self) -> dict[str, tuple[int, int]]:
        """The ops whose measured peak went over their projection.

        Returns
        -------
        dict of str to (int, int)
            ``{op: (measured, projected)}``.
        """
        return {
            op: (m, self.projected[op])
            for op, m in self.measured.items()
            if op in self.projected and m > self.projected[op]
        }

    def overruns(self, ops: Sequence[str] | None = None) -> list[Overrun]:
        """The ops whose measured task peak went over their projection or over ``allowed_mem``.

        Parameters
        ----------
        ops : sequence of str, optional
            The ops considered (default: all recorded).

        Returns
        -------
        list of Overrun
            Largest excess first.
        """
        out = []
        for op in self.projected if ops is None else ops:
            m = self.measured.get(op)
            if m is None:
                continue
            allowed, reserved = self.limits[op]
            if m > self.projected[op] or m > allowed:
                out.append(
                    Overrun(
                        op,
                        self.parts[op],
                        m,
                        self.projected[op],
                        allowed,
                        reserved,
                        self.started.get(op),
                        self.added.get(op),
                    )
                )
        return sorted(out, key=lambda o: o.projected - o.measured)

    def table(self, allowed_mem: int | None = None) -> str:
        """Measured against projected task memory per op of the last step, as text.

        One line per op of the last step's plan: its kind, projected and measured task memory, their
        ratio and the part of the program it computes; an op's measured peak is the largest over
        every step at its place in the plan (the steps' plans have one shape).

        Parameters
        ----------
        allowed_mem : int, optional
            Adds a line with the limit and the number of steps.

        Returns
        -------
        str
            The table ("no step computed" before any).
        """
        if not self.steps:
            return "no step computed"
        last = self.steps[-1]
        same = [s for s in self.steps if len(s) == len(last)]
        lines = [
            f"{'op':14} {'kind':14} {'projected':>11} {'measured':>11} "
            f"{'measured/projected':>19}  part"
        ]
        for j, op in enumerate(last):
            proj = max(self.projected[s[j]] for s in same)
            ms = [self.measured[s[j]] for s in same if s[j] in self.measured]
            meas = max(ms) if ms else None
            ratio = f"{meas / proj:19.2f}" if meas is not None and proj else f"{'-':>19}"
            p, m = format_byte_pair(proj, meas) if meas is not None else (format_bytes(proj), "-")
            lines.append(f"{op:14} {self.kinds[op]:14} {p:>11} {m:>11} {ratio}  {self.parts[op]}")
        if allowed_mem is not None:
            lines.append(f"allowed_mem {format_bytes(allowed_mem)}; over {len(same)} steps")
        if not self.measured:
            lines.append(f"measured: -, {self.cannot_measure()}")
        return "\n".join(lines)

    def plot(self, path: str | None = None, title: str | None = None) -> Any:
        """The last step's plan as a picture: one bar per op, in plan order, named by the part of
        the loss it computes, its projected task memory beside the most a task of it measured,
        with lines at ``reserved_mem`` and ``allowed_mem`` (needs matplotlib).

        Parameters
        ----------
        path : str, optional
            Where to save the picture (its format from the suffix: ``.png``, ``.svg``, ...).
        title : str, optional
            The title (default: how many ops the step has).

        Returns
        -------
        matplotlib.figure.Figure
            The figure.
        """
        from ._plot import plot_task_memory

        return plot_task_memory(self, path, title)

    def cannot_measure(self) -> str:
        """Why no task's peak of its own was measured.

        Returns
        -------
        str
            The reason, for the table.
        """
        return "this executor cannot measure a task's own peak" + (
            f" ({self.why})"
            if self.why
            else " (its tasks run in this process, or share their process, or it reports none)"
        )
