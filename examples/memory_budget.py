"""State the bytes, get the step: a gradient step fitted to a memory budget before it runs.

A 16-layer MLP's step takes its unconstrained peak; ``memory.within`` (or ``grad(...,
budget=)``, ``make_step(..., budget=)``) chooses which outputs of the forward pass the backward
pass recomputes so that the projected peak fits 60 % of it, proves it by projection, and the
real step measures within it, with the same gradients bit for bit. Prints the schedule's table
and the figures, and draws the scheduled step (the recomputed calls marked) into ``--out``
(default: a new temporary file, whose path it prints).

    python examples/memory_budget.py [--out budget.png] [--fraction 0.6]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import numpy as np

import pycograd_xp as pg
from pycograd_xp import memory

xp = pg.namespace(np)


def loss(params, x):
    h = x
    for W, b in params:
        h = xp.tanh(h @ W + b)
    return xp.mean(h**2)


def main(out: str | None = None, fraction: float = 0.6) -> dict:
    """Fit, check, measure and draw; return the figures."""
    depth, width, batch = 16, 256, 2048
    rng = np.random.default_rng(0)
    params = [
        (xp.asarray(rng.standard_normal((width, width)) / width**0.5), xp.zeros(width))
        for _ in range(depth)
    ]
    x = xp.asarray(rng.standard_normal((batch, width)))
    full = memory.project(loss, params, x).peak_bytes
    budget = int(fraction * full)
    fitted = memory.within(loss, budget, params, x)  # chosen and proven now, before any run
    schedule = fitted.schedule(params, x)
    print(schedule.table(limit=9), "\n   ...")
    measured = memory.measure(fitted, params, x)
    same = all(
        bool(xp.all(a == b))
        for ga, gb in zip(pg.grad(loss)(params, x), pg.grad(fitted)(params, x), strict=True)
        for a, b in zip(ga, gb, strict=True)
    )
    print(
        f"unconstrained {full / 1e6:.1f} MB; budget {budget / 1e6:.1f} MB: projected "
        f"{schedule.peak_bytes / 1e6:.1f} MB, measured {measured.peak_bytes / 1e6:.1f} MB; "
        f"{len(schedule.drop)} outputs recomputed ({schedule.extra_forward:.0%} of a forward "
        f"pass again); gradients identical: {same}"
    )
    if out is None:
        fd, out = tempfile.mkstemp(prefix="memory_budget_", suffix=".png")
        os.close(fd)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    schedule.projection.plot(
        out,
        measured=measured,
        title=f"MLP {width}x{depth}, batch {batch}: the step fitted to {fraction:.0%} "
        f"of its peak ({budget / 1e6:.1f} MB)",
    )
    print(f"wrote {out}")
    return {
        "unconstrained": full,
        "budget": budget,
        "projected": schedule.peak_bytes,
        "measured": measured.peak_bytes,
        "same": same,
        "out": out,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="where to write the picture (default: a temporary file)")
    parser.add_argument("--fraction", type=float, default=0.6, help="budget / unconstrained peak")
    a = parser.parse_args()
    main(a.out, a.fraction)
