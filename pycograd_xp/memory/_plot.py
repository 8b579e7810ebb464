"""The picture of a projection: live bytes over the schedule, the phases, the peaks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._units import _fmt

if TYPE_CHECKING:
    from ._report import Row


def _plot_panel(ax: Any, what: str, rows: list[Row], peak: int, measured_peak: int | None) -> None:
    """One panel of :meth:`~pycograd_xp.memory.Projection.plot`: ``rows``' live bytes, its
    peaks, every label naming ``what`` it is about."""
    mb = 1e-6
    x = [r.index for r in rows]
    ax.step(
        x, [r.live_bytes * mb for r in rows], where="post", color="black", label="projected live"
    )
    ax.plot(
        x,
        [r.peak_bytes * mb for r in rows],
        ".",
        color="gray",
        markersize=3,
        label="projected during each call",
    )
    first = x[0] if x else 0
    start = 0
    for phase, color in (
        ("forward", "tab:blue"),
        ("backward", "tab:orange"),
        ("update", "tab:olive"),
    ):
        end = start
        while end < len(rows) and rows[end].phase == phase:
            end += 1
        if end > start:  # the phases come in this order, each a run of rows
            ax.axvspan(first + start - 0.5, first + end - 0.5, color=color, alpha=0.08, label=phase)
        start = end
    again = [r for r in rows if r.op.startswith("recompute ")]
    if again:  # a memory schedule's outputs made again in the backward pass (memory.within)
        ax.plot(
            [r.index for r in again],
            [r.live_bytes * mb for r in again],
            "|",
            color="tab:purple",
            markersize=8,
            label=f"recomputed ({len(again)} calls)",
        )
    ax.axhline(peak * mb, color="tab:red", lw=1, label=f"projected peak of {what} {_fmt(peak)}")
    if measured_peak is not None:
        ax.axhline(
            measured_peak * mb,
            color="tab:green",
            lw=1,
            ls="--",
            label=f"measured peak of {what} {_fmt(measured_peak)}",
        )
    ax.set_ylabel("MB live")
    ax.set_title(what, fontsize=9, loc="left")
    ax.legend(fontsize=7, loc="lower right", ncols=2)
