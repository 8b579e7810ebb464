"""pycograd_xp at two git revisions side by side: is a change slower than what it replaces?

    python benchmarks/bench_commits.py OLD [NEW] [--rounds 3]

Each revision is checked out in a temporary worktree; the same workloads (this file's, public
API only) run in one subprocess per revision, the two alternating round by round so that the
machine's noise falls on both. NEW defaults to the working tree. Reports per workload the
median time per call of each revision, and the median of the rounds' ratios (new / old:
above 1 is slower; a round runs the two revisions back to back).

Workloads: the chain of 50 elementwise ops of ``bench_chain.py`` (forward and backward, µs per
op, uncompiled and compiled, shapes (8,) and (100,)); single calls of a few general rows; the
MLP step of ``bench_mlp.py`` (784-128-10, batch 64, float32); the small CNN step of
``bench_cnn.py``; a Cubed gradient step of logistic regression (when Cubed is installed).
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

ROOT = Path(__file__).resolve().parents[1]

WORKER = textwrap.dedent("""
    import json, sys, timeit
    import numpy as np
    import pycograd_xp as pg
    from pycograd_xp import nn

    assert pg.__file__.startswith(sys.argv[1]), pg.__file__
    xp = pg.namespace(np)
    rng = np.random.default_rng(0)
    out = {}

    def best(f, number):
        f()
        return min(timeit.repeat(f, number=number, repeat=5)) / number

    def chain(m, x):
        for _ in range(10):
            x = m.sin(x); x = x * 1.1; x = m.tanh(x); x = x + 0.2; x = x * x
        return m.sum(x)

    for n in (8, 100):
        x = xp.asarray(rng.standard_normal(n))
        g = pg.grad(lambda x: chain(xp, x))
        c = pg.compile(pg.grad(lambda x: chain(xp, x)))
        out[f"chain ({n},), µs/op"] = best(lambda: g(x), 20) / 51 * 1e6
        out[f"chain ({n},) compiled, µs/op"] = best(lambda: c(x), 200) / 51 * 1e6

    a = xp.asarray(rng.standard_normal((4, 5)))
    for name, f in {"xp.sum(x, axis=0)": lambda: xp.sum(a, axis=0),
                    "xp.reshape(x, (20,))": lambda: xp.reshape(a, (20,)),
                    "xp.concat([x, x])": lambda: xp.concat([a, a]),
                    "xp.clip(x, 0, 1)": lambda: xp.clip(a, 0.0, 1.0),
                    "xp.linspace(0, 1, 5)": lambda: xp.linspace(0, 1, 5)}.items():
        out[name + ", µs"] = best(f, 2000) * 1e6

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
    out["MLP step 784-128-10, ms"] = best(lambda: step(params, X, Y), 20) * 1e3

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
    out["CNN step (small), ms"] = best(lambda: cnn(p), 5) * 1e3

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
        out["Cubed logistic-regression gradient (4 chunks), ms"] = best(
            lambda: pg.unwrap(grad(w)).compute(), 1) * 1e3
    print(json.dumps(out))
""")


def _tree(rev: str, tmp: str) -> Path:
    path = Path(tmp) / rev.replace("/", "_")
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(path), rev], check=True
    )
    return path


def _run(tree: Path) -> dict[str, float]:
    env = {
        **os.environ,
        "PYTHONPATH": str(tree),
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    done = subprocess.run(
        [sys.executable, "-c", WORKER, str(tree)],
        env=env,
        cwd=tempfile.gettempdir(),
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise RuntimeError(f"the workloads failed on {tree}:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old")
    parser.add_argument("new", nargs="?", default=None, help="a revision (default: the tree)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"old": _tree(args.old, tmp), "new": _tree(args.new, tmp) if args.new else ROOT}
        try:
            runs: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
            for r in range(args.rounds):
                for side in ("old", "new") if r % 2 == 0 else ("new", "old"):
                    runs[side].append(_run(trees[side]))
        finally:
            for tree in trees.values():
                if tree != ROOT:
                    subprocess.run(
                        ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                        check=False,
                    )
    names = [k for k in runs["old"][0] if k in runs["new"][0]]
    width = max(len(n) for n in names)
    print(
        f"{'workload':<{width}}  {args.old[:10]:>10}  {(args.new or 'tree')[:10]:>10}"
        "  new/old (median of the rounds' ratios; lowest, highest)"
    )
    for n in names:
        old = statistics.median(r[n] for r in runs["old"])
        new = statistics.median(r[n] for r in runs["new"])
        ratios = [b[n] / a[n] for a, b in zip(runs["old"], runs["new"], strict=True)]
        print(
            f"{n:<{width}}  {old:10.3g}  {new:10.3g}  {statistics.median(ratios):7.2f}"
            f"  ({min(ratios):.2f}, {max(ratios):.2f})"
        )
    print(
        f"(times: medians of {args.rounds} rounds, each the best of 5 repeats; a round runs both "
        "revisions one after the other, so its ratio shares the machine's state)"
    )


if __name__ == "__main__":
    main()
