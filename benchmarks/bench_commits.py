"""pycograd_xp at two git revisions side by side: is a change slower than what it replaces?

    python benchmarks/bench_commits.py OLD [NEW] [--rounds 3] [--only TEXT]

Each revision is checked out in a temporary worktree and imported by one long-lived process;
the same workloads (this file's, public API only) are timed on the two processes in turns, each
timing of one right after the other's, so that the machine's swings fall on both; and the Python
calls and bytecodes one call of each runs are counted (the same on a busy machine as on a quiet
one). NEW defaults to the working tree. Reports per workload the median time of each revision
and the median of the paired ratios (new / old: above 1 is slower), with the lowest and highest,
and the ratios of the counts.

Workloads: the chain of 50 elementwise ops of ``bench_chain.py`` (forward and backward, µs per op,
uncompiled and compiled, shapes (8,) and (100,); its jvp; per-example gradients of it under vmap);
single calls of a few general rows; the MLP step of ``bench_mlp.py`` (784-128-10, batch 64,
float32); the small CNN step of ``bench_cnn.py``; an epoch of ``examples/digits.py`` (its model,
Adam, ``make_step`` and ``Batches``, on random data of its shapes); a Cubed gradient step of
logistic regression (when Cubed is installed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

WORKER = textwrap.dedent("""
    import json, sys, timeit
    import numpy as np
    import pycograd_xp as pg
    from pycograd_xp import nn

    assert pg.__file__.startswith(sys.argv[1]), pg.__file__
    xp = pg.namespace(np)
    rng = np.random.default_rng(0)
    W = {}  # name -> (function, calls per timing, scale to the unit in the name)

    def chain(m, x):
        for _ in range(10):
            x = m.sin(x); x = x * 1.1; x = m.tanh(x); x = x + 0.2; x = x * x
        return m.sum(x)

    for n in (8, 100):
        x = xp.asarray(rng.standard_normal(n))
        g = pg.grad(lambda x: chain(xp, x))
        c = pg.compile(pg.grad(lambda x: chain(xp, x)))
        W[f"chain ({n},), µs/op"] = (lambda g=g, x=x: g(x), 20, 1e6 / 51)
        W[f"chain ({n},) compiled, µs/op"] = (lambda c=c, x=x: c(x), 200, 1e6 / 51)
    tangent = xp.ones_like(x)
    W["jvp of the chain (100,), µs/op"] = (
        lambda: pg.jvp(lambda x: chain(xp, x), (x,), (tangent,)), 20, 1e6 / 51)
    xb = xp.asarray(rng.standard_normal((16, 8)))
    per_example = pg.vmap(pg.grad(lambda x: chain(xp, x)))
    W["vmap(grad) of the chain (16, 8), µs/op"] = (lambda: per_example(xb), 10, 1e6 / 51)

    a = xp.asarray(rng.standard_normal((4, 5)))
    for name, f in {"xp.sum(x, axis=0)": lambda: xp.sum(a, axis=0),
                    "xp.reshape(x, (20,))": lambda: xp.reshape(a, (20,)),
                    "xp.concat([x, x])": lambda: xp.concat([a, a]),
                    "xp.clip(x, 0, 1)": lambda: xp.clip(a, 0.0, 1.0),
                    "xp.linspace(0, 1, 5)": lambda: xp.linspace(0, 1, 5)}.items():
        W[name + ", µs"] = (f, 2000, 1e6)

    def mlp_loss(params, x, y):
        h = x
        for i in range(0, len(params) - 2, 2):
            h = xp.tanh(h @ params[i] + params[i + 1])
        logits = h @ params[-2] + params[-1]
        z = logits - xp.max(logits, axis=1, keepdims=True)
        logp = z - xp.log(xp.sum(xp.exp(z), axis=1, keepdims=True))
        return -xp.sum(y * logp) / x.shape[0]

    sizes = (784, 128, 10)
    params = []
    for i, o in zip(sizes[:-1], sizes[1:]):
        params += [xp.asarray((rng.standard_normal((i, o)) / np.sqrt(i)).astype(np.float32)),
                   xp.asarray(np.zeros(o, np.float32))]
    X = xp.asarray(rng.standard_normal((64, 784)).astype(np.float32))
    Y = xp.asarray(np.eye(10, dtype=np.float32)[rng.integers(0, 10, 64)])
    step = pg.value_and_grad(mlp_loss)
    W["MLP step 784-128-10, ms"] = (lambda: step(params, X, Y), 20, 1e3)

    p = {"w1": xp.asarray((rng.standard_normal((16, 1, 3, 3)) * 0.3).astype(np.float32)),
         "b1": xp.asarray(np.zeros(16, np.float32)),
         "w2": xp.asarray((rng.standard_normal((32, 16, 3, 3)) * 0.1).astype(np.float32)),
         "b2": xp.asarray(np.zeros(32, np.float32)),
         "w3": xp.asarray((rng.standard_normal((800, 10)) * 0.05).astype(np.float32)),
         "b3": xp.asarray(np.zeros(10, np.float32))}
    xi = xp.asarray(rng.standard_normal((64, 1, 28, 28)).astype(np.float32))
    yi = xp.asarray(rng.integers(0, 10, 64))

    def cnn_loss(p):
        h = nn.max_pool2d(nn.relu(nn.conv2d(xi, p["w1"], p["b1"])), 2)
        h = nn.max_pool2d(nn.relu(nn.conv2d(h, p["w2"], p["b2"])), 2)
        return nn.cross_entropy(nn.linear(xp.reshape(h, (64, -1)), p["w3"], p["b3"]), yi)

    cnn = pg.value_and_grad(cnn_loss)
    W["CNN step (small), ms"] = (lambda: cnn(p), 5, 1e3)

    from pycograd_xp import optim, random  # the digits example's epoch (examples/digits.py)
    from pycograd_xp.data import Batches
    from pycograd_xp.train import make_step

    dx = (rng.integers(0, 17, (1437, 64)) / 16.0).astype(np.float32)
    dy = rng.integers(0, 10, 1437)
    k1, k2 = random.split(random.key(1))
    dparams = {"l1": nn.Linear.init(k1, 64, 128, xp=xp, dtype=xp.float32),
               "l2": nn.Linear.init(k2, 128, 10, xp=xp, dtype=xp.float32)}
    dtx = optim.adam(3e-3)
    dstep = make_step(lambda p, x, y: nn.cross_entropy(p["l2"](nn.relu(p["l1"](x))), y), dtx)
    dbatches = Batches((dx, dy), 64, key=random.key(2), prefetch=0)
    dstate = [dparams, dtx.init(dparams)]

    def digits_epoch():
        p, s = dstate
        for batch in dbatches:
            p, s, _ = dstep(p, s, batch)
        dstate[:] = p, s

    W["digits epoch (64-128-10, Adam, 22 batches), ms"] = (digits_epoch, 1, 1e3)

    try:
        import cubed
    except ImportError:
        cubed = None
    if cubed is not None:
        spec = cubed.Spec(allowed_mem="500MB")
        cx = pg.namespace(cubed)
        Xc = cx.asarray(cubed.from_array(rng.standard_normal((20000, 8)), chunks=(5000, 8),
                                         spec=spec))
        yc = cx.asarray(cubed.from_array((rng.standard_normal(20000) > 0).astype(np.float64),
                                         chunks=(5000,), spec=spec))
        w = cx.asarray(cubed.from_array(np.zeros(8), spec=spec))

        def logreg(w):
            z = Xc @ w
            return cx.mean(cx.log(1 + cx.exp(-z)) + (1 - yc) * z)

        grad = pg.grad(logreg)
        W["Cubed logistic-regression gradient (4 chunks), ms"] = (
            lambda: pg.unwrap(grad(w)).compute(), 1, 1e3)
    for f, _, _ in W.values():
        f()  # warm: traces, caches
    print(json.dumps(list(W)), flush=True)
    def count(f):  # the Python calls and bytecodes one call of f runs (this thread's)
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
        return [n["call"], n["opcode"]]

    for line in sys.stdin:  # a name: time it once (the best of 3 repeats), answer
        line = line.strip()
        if line.startswith("count "):  # deterministic: what one call runs in Python
            print(json.dumps(count(W[line[6:]][0])), flush=True)
            continue
        f, number, scale = W[line]
        t = min(timeit.repeat(f, number=number, repeat=3)) / number * scale
        print(json.dumps(t), flush=True)
""")


def _tree(rev: str, tmp: str) -> Path:
    path = Path(tmp) / rev.replace("/", "_")
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(path), rev], check=True
    )
    return path


class _Worker:
    """A process that imports pycograd_xp from ``tree`` and times a workload when asked."""

    def __init__(self, tree: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1",
               "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}  # fmt: skip
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WORKER, str(tree)], env=env, cwd=tempfile.gettempdir(),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.names = self._answer()

    def _answer(self) -> Any:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("a workload process failed (its error is above)")
        return json.loads(line)

    def time(self, name: str) -> float:
        assert self.proc.stdin is not None
        self.proc.stdin.write(name + "\n")
        self.proc.stdin.flush()
        return float(self._answer())

    def count(self, name: str) -> list[int]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"count {name}\n")
        self.proc.stdin.flush()
        return list(self._answer())

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old")
    parser.add_argument("new", nargs="?", default=None, help="a revision (default: the tree)")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--only", default=None, help="time only the workloads naming this")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"old": _tree(args.old, tmp), "new": _tree(args.new, tmp) if args.new else ROOT}
        workers = {side: _Worker(tree) for side, tree in trees.items()}
        try:
            names = [n for n in workers["old"].names if n in workers["new"].names]
            names = [n for n in names if args.only is None or args.only in n]
            counted = {
                n: {s: workers[s].count(n) for s in workers} for n in names if "Cubed" not in n
            }
            runs: dict[str, dict[str, list[float]]] = {"old": {}, "new": {}}
            for r in range(args.rounds):
                for n in names:  # the two revisions back to back, in turns
                    for side in ("old", "new") if r % 2 == 0 else ("new", "old"):
                        runs[side].setdefault(n, []).append(workers[side].time(n))
        finally:
            for w in workers.values():
                w.close()
            for tree in trees.values():
                if tree != ROOT:
                    subprocess.run(
                        ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                        check=False,
                    )
    width = max(len(n) for n in names)
    print(
        f"{'workload':<{width}}  {args.old[:10]:>10}  {(args.new or 'tree')[:10]:>10}"
        "  new/old (median of the rounds' ratios; lowest, highest)  best/best"
        "  Python calls, bytecodes new/old"
    )
    for n in names:
        old, new = statistics.median(runs["old"][n]), statistics.median(runs["new"][n])
        ratios = [b / a for a, b in zip(runs["old"][n], runs["new"][n], strict=True)]
        print(
            f"{n:<{width}}  {old:10.3g}  {new:10.3g}  {statistics.median(ratios):7.2f}"
            f"  ({min(ratios):.2f}, {max(ratios):.2f})"
            f"  {min(runs['new'][n]) / min(runs['old'][n]):9.2f}"
            + (
                "  {:.2f}  {:.2f}".format(
                    *(b / a for a, b in zip(*counted[n].values(), strict=True))
                )
                if n in counted
                else ""
            )
        )
    print(
        f"(times: medians of {args.rounds} rounds, each the best of 3 repeats; in a round each "
        "workload runs on both revisions back to back, so a ratio shares the machine's state; "
        "the calls and bytecodes are those one call runs in Python, counted by a tracer: "
        "deterministic, so a difference there is the code's, not the machine's; best/best is the "
        "ratio of each revision's fastest round, the least disturbed by other processes)"
    )


if __name__ == "__main__":
    main()
