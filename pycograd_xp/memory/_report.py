"""What a projection returns: one ``Row`` per backend call, the ``Projection`` with its peak and
table, and the allowance for Python's own objects."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._plot import _plot_panel
from ._units import _fmt, parse_bytes

if TYPE_CHECKING:
    from ._measure import Measurement

# Python's own objects live during a step beside the arrays' data: wrappers, tape nodes, frames,
# NumPy's array headers. tracemalloc counts them; the projection allows for them with a fixed
# part and a part per backend call: this many bytes times the call's ``objects`` (three, more
# under jvp and vmap, two in a compiled replay: pycograd_xp._abstract.objects; measured:
# docs/calibration.md#overhead).
OVERHEAD_FIXED = 24 * 1024
OVERHEAD_PER_CALL = 128


def _overhead(calls: int) -> int:
    """The allowance for ``calls`` backend calls; a call that returns several arrays counts once
    more for each output beyond its first (each holds a header and a wrapper as long as it
    lives: ``unstack``'s views; see :func:`_calls`)."""
    return OVERHEAD_FIXED + OVERHEAD_PER_CALL * calls


def _calls(rows: Sequence[Any]) -> int:
    """Calls to allow for (:func:`_overhead`): one per row, plus its outputs beyond the first,
    each as many times as its ``objects`` (a call under ``jvp`` or ``vmap`` counts more).
    The rows of a micro-batch (``"slice a:b ..."``, ``memory._batches``) count as the largest
    micro-batch's, plus one per micro-batch: a micro-batch's objects go with its tape, before
    the next one's are made."""
    outside, per = 0, dict[str, int]()
    for r in rows:
        n = max(1, len(r.outputs)) * r.objects
        if r.op.startswith("slice "):
            key = r.op.split(" ", 2)[1]
            per[key] = per.get(key, 0) + n
        else:
            outside += n
    return outside + (max(per.values()) + len(per) if per else 0)


class MemoryLimitError(ValueError):
    """A projected peak over the limit (raised before anything runs, by
    :meth:`Projection.check`)."""


@dataclass(frozen=True)
class Row:
    """One backend call of the projected step.

    Parameters
    ----------
    index : int
        Its position in the schedule.
    op : str
        The function called.
    phase : str
        ``"forward"``, ``"backward"`` or ``"update"`` (what runs after the backward pass: a
        step's optimizer update).
    outputs : list of (shape, dtype, bytes)
        Each output's shape, dtype name and the bytes it owns (0: a view).
    transient_bytes : int
        Allocated by the call beyond its outputs, while it runs.
    live_bytes : int
        Live right after the call.
    peak_bytes : int
        Live at the most, during the call.
    objects : int, default 2
        The allowances for Python's objects each output holds (two in a compiled replay, three
        eager, more under ``jvp`` and ``vmap``: a tangent's or a batch's wrappers;
        ``overhead_bytes``).
    """

    index: int
    op: str
    phase: str  # "forward", "backward" or "update"
    outputs: list[tuple[tuple[int, ...], str, int]]  # (shape, dtype, bytes it owns: 0 = a view)
    transient_bytes: int  # allocated by the call beyond its outputs, while it runs
    live_bytes: int  # live right after the call
    peak_bytes: int  # live at the most, during the call
    objects: int = 2  # allowances for Python's objects per output (_calls)


@dataclass
class Projection:
    """Projected memory of ``f`` and of its ``value_and_grad`` step (bytes, upper bounds).

    Or, for ``f`` taken as it is (``what`` is ``"as is"`` or ``"compiled replay"``, see
    :func:`~pycograd_xp.memory.project`), of one call of ``f``: then the forward figures are
    the call's own. Every figure counts everything live at that moment, the arguments
    included. ``str()`` of it is a table, one row per backend call.

    Parameters
    ----------
    forward_peak_bytes : int
        Evaluating ``f`` alone, no tape.
    peak_bytes : int
        The whole ``value_and_grad`` step (as is: the call).
    residual_bytes : int
        What the tape holds between the forward and the backward pass.
    argument_bytes : int
        The arguments (live throughout).
    overhead_bytes : int
        Allowed for Python's objects (included in the peaks above).
    traced_forward_peak_bytes, traced_peak_bytes : int
        The same peaks without what C libraries allocate by themselves (LAPACK and pocketfft
        workspaces): what tracemalloc can see, the scale of ``Measurement.peak_bytes``.
    peak_op : tuple of (str, str, int)
        (op, phase, row index) at the peak of the step.
    rows : list of Row
        The step, one row per backend call.
    forward_rows : list of Row
        ``f`` alone.
    what : str, default "value_and_grad"
        What was projected: ``"value_and_grad"``, ``"as is"``, ``"compiled replay"``.
    """

    forward_peak_bytes: int  # evaluating f alone, no tape
    peak_bytes: int  # the whole value_and_grad step (as is: the call)
    residual_bytes: int  # what the tape holds between the forward and the backward pass
    argument_bytes: int  # the arguments (live throughout)
    overhead_bytes: int  # allowed for Python's objects (included in the peaks above)
    # The same peaks without what C libraries allocate by themselves (LAPACK and pocketfft
    # workspaces): what tracemalloc can see, the scale of Measurement.peak_bytes.
    traced_forward_peak_bytes: int
    traced_peak_bytes: int
    peak_op: tuple[str, str, int]  # (op, phase, row index) at the peak of the step
    rows: list[Row] = field(repr=False)  # the step, one row per backend call
    forward_rows: list[Row] = field(repr=False)  # f alone
    what: str = "value_and_grad"  # what was projected: "value_and_grad", "as is", "compiled replay"

    def check(self, limit: int | float | str) -> Projection:
        """Raise :class:`MemoryLimitError` (before anything runs) if the step's projected peak
        exceeds ``limit``.

        Parameters
        ----------
        limit : int, float or str
            Bytes, or a string such as ``"2GB"`` (:func:`parse_bytes`).

        Returns
        -------
        Projection
            Self, for chaining.

        Raises
        ------
        MemoryLimitError
            Naming the op at the peak, the projected peak and the limit.
        """
        n = parse_bytes(limit)
        if self.peak_bytes > n:
            op, phase, i = self.peak_op
            raise MemoryLimitError(
                f"projected peak {_fmt(self.peak_bytes)} ({self.peak_bytes} bytes) at {op} "
                f"(row {i}, {phase}) exceeds the limit {_fmt(n)} ({n} bytes); reduce the batch, "
                "wrap segments in pycograd_xp.remat, or raise the limit"
            )
        return self

    def plot(
        self, path: str | None = None, measured: Measurement | None = None, title: str | None = None
    ) -> Any:
        """Live bytes over the op schedule, projected and measured, on one scale.

        One panel for ``f`` alone (no tape) and one for the ``value_and_grad`` step (its
        forward pass, which keeps the tape's residuals, and its backward pass, shaded), each
        with its projected peak and, when ``measured`` is given, its measured peak; ``f`` taken
        as it is draws one panel (the call). Needs matplotlib (the ``plot`` extra).

        Parameters
        ----------
        path : str, optional
            Where to save the figure (PNG, ...).
        measured : Measurement, optional
            Measured peaks to draw beside the projected ones.
        title : str, optional
            The title (default: the step, and where its peak happens).

        Returns
        -------
        matplotlib.figure.Figure
            The figure.

        Raises
        ------
        ImportError
            Without matplotlib.
        """
        try:
            import matplotlib

            if path is not None:
                matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError as e:
            raise ImportError(
                "Projection.plot needs matplotlib: pip install 'pycograd-xp[plot]'"
            ) from e
        both = self.what == "value_and_grad"
        panels = []
        if both:
            forward_measured = None if measured is None else measured.forward_peak_bytes
            panels.append(
                ("f alone, no tape", self.forward_rows, self.forward_peak_bytes, forward_measured)
            )
        panels.append(
            (
                "value_and_grad step" if both else "one call of f, as it is",
                self.rows,
                self.peak_bytes,
                None if measured is None else measured.peak_bytes,
            )
        )
        fig, axes = plt.subplots(
            len(panels), 1, figsize=(8, 3 + 2.5 * both), sharey=True, squeeze=False
        )
        for ax, (what, rows, peak, measured_peak) in zip(axes[:, 0], panels, strict=True):
            _plot_panel(ax, what, rows, peak, measured_peak)
        top = max(max([p[2], p[3] or 0, *(r.peak_bytes for r in p[1])]) for p in panels)
        axes[0, 0].set_ylim(0, top * 1e-6 * 1.05)  # one scale, from zero: the panels compare
        axes[-1, 0].set_xlabel("backend call")
        fig.suptitle(
            title or f"{panels[-1][0]}: peak at {self.peak_op[0]} ({self.peak_op[1]})",
            fontsize=10,
        )
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=120)
            plt.close(fig)
        return fig

    def as_dict(self) -> dict[str, Any]:
        """The projection as plain data (``dataclasses.asdict``), rows included.

        Returns
        -------
        dict
            Field name to value.
        """
        return dataclasses.asdict(self)

    def __str__(self) -> str:
        op, phase, i = self.peak_op
        alone = {
            "as is": "f as it is, no gradient added",
            "compiled replay": "f's compiled replay",
        }.get(self.what, f"forward alone {_fmt(self.forward_peak_bytes)}")
        at_row = (
            f"row {i}, {phase}: {_fmt(self.rows[i].peak_bytes)} in arrays + "
            f"{_fmt(self.overhead_bytes)} for Python's objects"
            if 0 <= i < len(self.rows)
            else f"{phase}"
        )
        head = [
            f"projected step: peak {_fmt(self.peak_bytes)} at {op} ({at_row}); {alone}; tape "
            f"holds {_fmt(self.residual_bytes)} between passes; arguments "
            f"{_fmt(self.argument_bytes)}",
            f"{'#':>4} {'phase':8} {'op':24} {'outputs':34} {'owns':>9} {'transient':>9} "
            f"{'live':>9} {'peak':>9}",
        ]
        lines = []
        for r in self.rows:
            outs = ", ".join(f"{d}{list(s)}" for s, d, _ in r.outputs) or "-"
            if len(outs) > 34:  # the first output and how many more, not a cut one
                more = f" +{len(r.outputs) - 1} more" if len(r.outputs) > 1 else ""
                s0, d0, _ = r.outputs[0]
                outs = f"{d0}{list(s0)}"[: 34 - len(more)] + more
            owned = sum(b for *_, b in r.outputs)
            mark = " <- peak" if r.index == i else ""
            lines.append(
                f"{r.index:>4} {r.phase:8} {r.op[:24]:24} {outs[:34]:34} "
                f"{_fmt(owned):>9} {_fmt(r.transient_bytes):>9} "
                f"{_fmt(r.live_bytes):>9} {_fmt(r.peak_bytes):>9}{mark}"
            )
        return "\n".join(head + lines)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))
