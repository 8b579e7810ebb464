"""The epoch of ``examples/digits.py`` (MLP 64-128-10, Adam, batches of 64): pycograd_xp uncompiled
and compiled beside PyTorch eager, one thread each, in one process.

    python benchmarks/bench_digits.py [--rounds 21] [--json PATH] [--no-count]

Run it with a Python that has PyTorch (``pip install -e '.[bench]'``); without PyTorch only ours
are timed. The data are scikit-learn's digits when scikit-learn is installed, else random data
of the same shapes (1437 rows of 64 features in [0, 1], 10 classes): an epoch's time depends on
the shapes only. Every contender trains the model of ``examples/digits.py`` from the same initial
weights over its own ``Batches`` with the same key (the same batches in the same order), as the
example does.

The contenders run interleaved, one epoch each per round, in turns (the order reversed every
other round), so that a shared machine's swings fall on all alike; the figure is the median over
the rounds of each round's ratio (ours / PyTorch), with its quartiles. Beside the times: the
Python calls and bytecodes one epoch runs, counted by a tracer as ``bench_commits.py`` counts
them (deterministic: the same on a busy machine as on a quiet one).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import _common  # noqa: F401  (thread pinning, glibc thresholds)
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import digits

import pycograd_xp as pg
from pycograd_xp import optim, random
from pycograd_xp.data import Batches
from pycograd_xp.train import make_step


def data() -> tuple[np.ndarray, np.ndarray, str]:
    """The training rows of digits (or random ones of the same shapes) and what they are."""
    try:
        x, y, _, _ = digits.load()
        return x, y, "scikit-learn's digits"
    except ImportError:
        rng = np.random.default_rng(0)
        x = rng.integers(0, 17, (1437, 64)).astype(np.float32) / 16.0
        return x, rng.integers(0, 10, 1437).astype(np.int64), "random data of digits' shapes"


def contenders(x: np.ndarray, y: np.ndarray) -> dict[str, Callable[[], None]]:
    """One epoch per call of each contender, each on its own parameters and batches."""
    xp = pg.namespace(np)
    params = digits.init_params(random.key(1), xp)
    tx = optim.adam(digits.LR)
    step = make_step(digits.loss_fn, tx)
    compiled = pg.compile(step)

    def epoch_of(step: Callable) -> Callable[[], None]:
        batches = Batches((x, y), digits.BATCH, key=random.key(2), prefetch=0)
        state = [params, tx.init(params)]

        def epoch() -> None:
            p, s = state
            for batch in batches:
                p, s, _ = step(p, s, batch)
            state[:] = p, s

        return epoch

    out = {"pycograd_xp": epoch_of(step), "pycograd_xp compiled": epoch_of(compiled)}
    try:
        torch_epoch, _ = digits.torch_trainer(params)
    except ImportError:
        print("(PyTorch not installed: ours only; pip install -e '.[bench]')")
        return out
    batches = Batches((x, y), digits.BATCH, key=random.key(2), prefetch=0)
    out["PyTorch eager"] = lambda: torch_epoch(batches)
    return out


def count(f: Callable[[], None]) -> tuple[int, int]:
    """The Python calls and bytecodes one call of ``f`` runs (this thread's)."""
    n = {"call": 0, "opcode": 0}

    def trace(frame, event, arg):
        frame.f_trace_opcodes = True
        if event in n:
            n[event] += 1
        return trace

    sys.settrace(trace)
    try:
        f()
    finally:
        sys.settrace(None)
    return n["call"], n["opcode"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--json", default=None, help="write the figures to this file")
    parser.add_argument("--no-count", action="store_true", help="skip the call counts")
    args = parser.parse_args()
    x, y, what = data()
    runs = contenders(x, y)
    for f in runs.values():  # warm: the trace of compile, first-call caches
        f()
        f()
    times: dict[str, list[float]] = {k: [] for k in runs}
    for r in range(args.rounds):
        for name in list(runs) if r % 2 == 0 else list(runs)[::-1]:
            t0 = time.perf_counter()
            runs[name]()
            times[name].append(time.perf_counter() - t0)
    base = "PyTorch eager" if "PyTorch eager" in runs else "pycograd_xp"
    result: dict[str, dict[str, float]] = {}
    print(f"digits epoch ({what}, {len(x) // digits.BATCH} batches of {digits.BATCH}), one thread")
    print(f"  {'contender':22s} {'ms/epoch':>9s} {'/' + base:>16s} {'(q1, q3)':>15s}", end="")
    print("" if args.no_count else f" {'Python calls':>13s} {'bytecodes':>10s}")
    for name, ts in times.items():
        ratios = sorted(t / b for t, b in zip(ts, times[base], strict=True))
        q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
        result[name] = {"ms": 1e3 * statistics.median(ts), "ratio": q[1], "q1": q[0], "q3": q[2]}
        line = f"  {name:22s} {result[name]['ms']:9.2f} {q[1]:16.3f}  ({q[0]:.3f}, {q[2]:.3f})"
        if not args.no_count:
            calls, ops = count(runs[name])
            result[name].update(calls=calls, bytecodes=ops)
            line += f" {calls:13d} {ops:10d}"
        print(line)
    print(
        f"(medians of {args.rounds} rounds; the ratio is the median of the rounds' paired ratios, "
        "each round's epochs back to back)"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
