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
    colors = {"forward": "tab:blue", "backward": "tab:orange", "update": "tab:olive"}
    labelled: set[str] = set()
    start = 0
    while start < len(rows):  # each run of one phase (micro-batches: one pair of runs each)
        phase, end = rows[start].phase, start
        while end < len(rows) and rows[end].phase == phase:
            end += 1
        if phase in colors:
            ax.axvspan(
                first + start - 0.5,
                first + end - 0.5,
                color=colors[phase],
                alpha=0.08,
                label=phase if phase not in labelled else None,
            )
            labelled.add(phase)
        start = end
    again = [r for r in rows if "recompute " in r.op]
    if again:  # a memory schedule's outputs made again in the backward pass (memory.within)
        ax.plot(
            [r.index for r in again],
            [r.live_bytes * mb for r in again],
            "|",
            color="tab:purple",
            markersize=8,
            label=f"recomputed ({len(again)} calls)",
        )
    starts = _micro_batches(rows)
    for k, i in enumerate(starts):  # a micro-batched step (memory.batch_mean): each one's start
        ax.axvline(
            i - 0.5,
            color="tab:gray",
            lw=0.6,
            ls=":",
            label=f"micro-batches ({len(starts)})" if k == 0 else None,
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


def _micro_batches(rows: list[Row]) -> list[int]:
    """The index of the first row of each micro-batch (rows named ``"slice a:b ..."``)."""
    starts, seen = [], set()
    for r in rows:
        if r.op.startswith("slice "):
            key = r.op.split(" ", 2)[1]
            if key not in seen:
                seen.add(key)
                starts.append(r.index)
    return starts
