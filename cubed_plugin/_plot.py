"""The picture of a run's plan: each op of the last step, in plan order, with the task memory
projected for it (what the plan was checked with) beside the most a task of it measured, against
``reserved_mem`` and ``allowed_mem`` (``MemoryRecorder.plot``; needs matplotlib)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pycograd_xp.memory import format_bytes

if TYPE_CHECKING:
    from ._callbacks import MemoryRecorder


def _label(op: str, kind: str, part: str, width: int = 70) -> str:
    """An op's line on the chart: its name and kind, and the part of the loss it computes."""
    text = f"{op} {kind}: {part}"
    return text if len(text) <= width else text[: width - 1] + "…"


def plot_task_memory(
    recorder: MemoryRecorder, path: str | None = None, title: str | None = None
) -> Any:
    """Draw ``recorder``'s last step: one bar per op (projected task memory, hollow; measured,
    filled, where the executor measures each task), with lines at ``reserved_mem`` and
    ``allowed_mem``. Returns the matplotlib figure; ``path`` saves it (the format from its
    suffix)."""
    try:
        import matplotlib

        if path is not None:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ImportError(
            "MemoryRecorder.plot needs matplotlib: pip install 'pycograd-xp[plot]'"
        ) from e
    if not recorder.steps:
        raise ValueError("MemoryRecorder.plot: no step computed yet; plot after fit or compute")
    ops = recorder.steps[-1]
    mb = 1e-6
    projected = [recorder.projected[op] * mb for op in ops]
    measured = [recorder.measured.get(op) for op in ops]
    fig, ax = plt.subplots(figsize=(9, 0.32 * len(ops) + 1.6), layout="constrained")
    y = list(range(len(ops)))[::-1]  # the plan's first op at the top
    ax.barh(y, projected, height=0.7, fill=False, edgecolor="black", label="projected per task")
    if any(m is not None for m in measured):
        over = [
            m is not None and m > recorder.projected[op]
            for op, m in zip(ops, measured, strict=True)
        ]
        ax.barh(
            y,
            [(m or 0) * mb for m in measured],
            height=0.4,
            color=["tab:red" if o else "tab:green" for o in over],
            label="measured (a task's own peak, the largest)",
        )
    allowed, reserved = max(recorder.limits[op] for op in ops)
    ax.axvline(reserved * mb, color="gray", ls=":", label=f"reserved_mem {format_bytes(reserved)}")
    ax.axvline(allowed * mb, color="tab:red", lw=1, label=f"allowed_mem {format_bytes(allowed)}")
    ax.set_yticks(y, [_label(op, recorder.kinds[op], recorder.parts[op]) for op in ops], fontsize=7)
    ax.set_xlabel("MB per task (the worker's own memory, reserved_mem, included)")
    ax.set_title(title or f"the plan of one step: {len(ops)} ops", fontsize=9, loc="left")
    ax.legend(fontsize=7, loc="center right")
    if not any(m is not None for m in measured):
        ax.text(
            0.99,
            0.01 + 0.12,
            f"measured: -, {recorder.cannot_measure()}"[:110],
            transform=ax.transAxes,
            ha="right",
            fontsize=6,
        )
    if path is not None:
        fig.savefig(path, dpi=110)
        plt.close(fig)
    return fig
