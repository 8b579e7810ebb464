"""The constants of one-pass mode's choice between recomputing and row slices, measured.

A one-pass task whose chunk's step does not fit its budget whole computes it under a memory
schedule or in row slices, whichever ``cubed_plugin._chunk_plan``'s model projects faster.
This measures the model's constants on one thread (docs/calibration.md#chunk-choice), each
through the very call a task makes (``steps.chunk_sums``), then checks the model: for models
where either way fits, the projected and the measured time each way adds to the whole chunk's
step, and whether the choice was the faster one.

    python benchmarks/bench_chunk_choice.py           # measure, then check the model
    python benchmarks/bench_chunk_choice.py --quick   # fewer repeats
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import _common  # noqa: F401  (threads and malloc settings first)
import numpy as np

import pycograd_xp as pg
from cubed_plugin import _chunk_plan as cp
from cubed_plugin import row_loss
from cubed_plugin.steps import Recompute, chunk_specs, chunk_step, chunk_sums, sliced_sums
from pycograd_xp import memory
from pycograd_xp.tree import tree_flatten

XP = pg.namespace(np)
RNG = np.random.default_rng(0)


def best_seconds(f: Callable[[], object], repeats: int, number: int = 1) -> float:
    """The least of ``repeats`` timings of ``number`` calls, per call: the cost itself, what a
    shared machine's other load adds left out."""
    f()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(number):
            f()
        times.append((time.perf_counter() - t0) / number)
    return min(times)


def fit_line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """(intercept, slope) of the least-squares line."""
    slope, intercept = np.polyfit(np.asarray(xs, float), np.asarray(ys, float), 1)
    return float(intercept), float(slope)


class Chunk:
    """A loss's chunk step as a task computes it (``chunk_sums``), at NumPy data."""

    def __init__(self, loss, params: dict, data: list[np.ndarray]) -> None:
        self.loss, self.params, self.data = loss, params, data
        self.leaves, self.td = tree_flatten(params)
        self.rows = data[0].shape[0]
        self.size = sum(leaf.size for leaf in self.leaves)

    def specs(self):
        class Like:  # what chunk_specs reads of a data argument: chunks, shape, dtype
            def __init__(self, a):
                self.chunks, self.shape, self.dtype = ((a.shape[0],),), a.shape, a.dtype

        return chunk_specs(self.loss, self.params, tuple(Like(a) for a in self.data))

    def schedule(self, budget: float) -> memory.Schedule:
        ps, specs = self.specs()
        return memory.within(chunk_step(self.loss), budget, ps, *specs).schedule(ps, *specs)

    def peak(self) -> int:
        ps, specs = self.specs()
        return memory.project(chunk_step(self.loss), ps, *specs, argnums=0).peak_bytes

    def run(self, recompute: Recompute | None = None, slice_rows: int | None = None):
        pr = self.loss.per_row
        if slice_rows is not None:
            return lambda: sliced_sums(
                pr, self.td, self.leaves, self.data, 0, self.rows, slice_rows
            )
        return lambda: chunk_sums(
            pr, self.td, self.leaves, self.data, 0, self.rows, 0, (), recompute
        )


def chain(depth: int):
    @row_loss
    def loss(p, x):
        for _ in range(depth):
            x = x * p["a"]
        return x[:, 0]

    return loss


@row_loss
def linear(p, x):
    return (x @ p["W"])[:, 0]


def mlp(depth: int):
    @row_loss
    def loss(p, x, y):
        xp = x.__array_namespace__()
        h = x
        for W in p["Ws"]:
            h = xp.tanh(h @ W)
        z = h @ p["w"]
        return xp.logaddexp(0.0, z) - y * z

    return loss


def mlp_params(features: int, width: int, depth: int) -> dict:
    return {
        "Ws": [
            RNG.standard_normal((features if i == 0 else width, width)) / np.sqrt(width)
            for i in range(depth)
        ],
        "w": RNG.standard_normal(width) / np.sqrt(width),
    }


def measure_constants(repeats: int) -> dict[str, float]:
    out = {}
    # a step's nodes: chains of multiplies on one row (the slope); its call: the shortest chain
    # less its nodes
    nodes, times = [], []
    for depth in (1, 8, 32, 64):
        c = Chunk(chain(depth), {"a": np.ones(4)}, [np.ones((1, 4))])
        nodes.append(len(c.schedule(1 << 62).nodes))
        times.append(best_seconds(c.run(), 3 * repeats, 20) * 1e6)
    _, node = fit_line(nodes, times)
    out["CALL_MICROSECONDS"], out["NODE_MICROSECONDS"] = times[0] - node * nodes[0], node
    # the parameters' share of a slice: one row through a product of growing weights
    sizes, times = [], []
    for width in (64, 256, 512, 1024):
        c = Chunk(linear, {"W": np.ones((width, width))}, [np.ones((1, width))])
        sizes.append(width * width)
        times.append(best_seconds(c.run(), repeats, 5) * 1e6)
    _, per = fit_line(sizes, times)
    out["GRADIENT_ELEMENTS_PER_MICROSECOND"] = 1 / per
    # an output made again: the chain with everything dropped, against nothing dropped
    c = Chunk(chain(64), {"a": np.ones(4)}, [np.ones((1, 4))])
    probe = c.schedule(1 << 62)
    drop = frozenset(r.index for r in probe.nodes if r.droppable)
    rec = Recompute(drop, probe.names)
    base = best_seconds(c.run(), repeats, 20)
    again = best_seconds(c.run(rec), repeats, 20)
    out["REDO_MICROSECONDS"] = (again - base) * 1e6 / max(1, len(drop))
    # the work's rates: a layer's product, and its elementwise rows (tanh, add)
    x = XP.asarray(RNG.standard_normal((20000, 128)))
    w = XP.asarray(RNG.standard_normal((128, 128)) / 12)
    t = best_seconds(lambda: x @ w, repeats)
    out["PRODUCT_OPS_PER_MICROSECOND"] = 2 * 20000 * 128 * 128 / (t * 1e6)
    n = 20000 * 128
    t = best_seconds(lambda: XP.tanh(x + x), repeats)
    out["ELEMENT_OPS_PER_MICROSECOND"] = (3 * n + 2 * n) / (t * 1e6)
    return out


def check_model(repeats: int) -> None:
    cases = [
        ("mlp 6x128, 20,000 rows", mlp(6), mlp_params(32, 128, 6), 20000, 32),
        ("mlp 8x512, 2,000 rows", mlp(8), mlp_params(64, 512, 8), 2000, 64),
        ("mlp 12x256, 1,000 rows", mlp(12), mlp_params(256, 256, 12), 1000, 256),
    ]
    print(
        f"{'model':<24} {'fraction':>8} {'way':<10} {'projected ms':>12} {'measured ms':>12} chosen"
    )
    for name, loss, params, rows, features in cases:
        c = Chunk(
            loss, params, [RNG.standard_normal((rows, features)), RNG.integers(0, 2, rows) * 1.0]
        )
        full = c.peak()
        whole = best_seconds(c.run(), repeats)
        for fraction in (0.9, 0.75):
            try:
                s = c.schedule(fraction * full)
            except memory.MemoryLimitError:
                continue
            # the slices of the same step peak
            lo, hi = 1, rows
            while hi - lo > 1:
                mid = (lo + hi) // 2
                small = Chunk(loss, params, [a[:mid] for a in c.data])
                lo, hi = (mid, hi) if small.peak() <= fraction * full else (lo, mid)
            rec = Recompute(s.drop, s.names)
            ways = {
                "recompute": (cp.recompute_microseconds(s), c.run(rec)),
                "slices": (
                    cp.slices_microseconds(len(s.nodes), c.size, rows, lo),
                    c.run(slice_rows=lo),
                ),
            }
            measured = {k: (best_seconds(f, repeats) - whole) * 1e3 for k, (_, f) in ways.items()}
            chosen = min(ways, key=lambda k: ways[k][0])
            faster = min(measured, key=measured.__getitem__)
            for k, (us, _) in ways.items():
                mark = ("chosen" if k == chosen else "") + (" (faster)" if k == faster else "")
                print(
                    f"{name:<24} {fraction:>8.2f} {k:<10} {us / 1e3:>12.2f} {measured[k]:>12.2f} "
                    f"{mark}"
                )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    repeats = 5 if args.quick else 15
    for k, v in measure_constants(repeats).items():
        print(f"{k:<36} {v:12.3f}   (in the code: {getattr(cp, k, '-')})")
    check_model(repeats)


if __name__ == "__main__":
    main()
