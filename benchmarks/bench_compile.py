"""pycograd_xp.compile side by side with uncompiled pycograd_xp and hand-written NumPy.

    python benchmarks/bench_compile.py

In one run: the cost of the first call (the trace) against a replay; the per-op chain (50
elementwise ops, forward + backward, shapes (8,) and (100,)); the MLP step 784-512-512-10 (batch
256, float32, SGD in place); and the step peak memory of a 20-layer tanh MLP (batch 512,
float32) by tracemalloc and by resident-set growth, compiled against uncompiled. PyTorch joins
the memory comparison when it is installed. (bench_chain.py, bench_mlp.py, bench_digits.py and
examples/digits.py report the same contenders in their own workloads.)
"""

from __future__ import annotations

import json
import os
import sys
import time

import _common  # pins threads before the contenders load
import _mlp
import bench_chain
import numpy as np

import pycograd_xp as pg

xp = pg.namespace(np)


def _chain_contenders(shape: tuple[int, ...]) -> dict:
    a = np.random.default_rng(0).standard_normal(shape)
    g = pg.grad(lambda x: bench_chain.chain(xp, x))
    c = pg.compile(g)
    xa = xp.asarray(a)
    return {
        "numpy by hand": lambda: bench_chain.numpy_by_hand(a),
        "pycograd_xp": lambda: g(xa),
        "pycograd_xp compiled": lambda: c(xa),
    }


def chain() -> None:
    n = 5 * bench_chain.N_CYCLES
    for shape in [(8,), (100,)]:
        med = _common.interleaved(_chain_contenders(shape), repeats=15, number=50)
        print(
            _common.table(
                f"chain of {n} elementwise ops, shape {shape}: µs per op",
                {k: v / n for k, v in med.items()},
                "numpy by hand",
                unit="µs/op",
                scale=1e6,
            )
        )


def mlp_step() -> None:
    params, x, y = _mlp.init((784, 512, 512, 10), 256, np.float32)
    out = _mlp.numpy_contenders(params, x, y, 0.01)
    out.pop("HIPS autograd", None)
    med = _common.interleaved(out, repeats=9, number=3)
    print(
        _common.table(
            "MLP step 784-512-512-10, batch 256, float32 (SGD in place)", med, "numpy by hand"
        )
    )


def trace_cost() -> None:
    params, x, y = _mlp.init((784, 512, 512, 10), 256, np.float32)
    p = [xp.asarray(q) for q in params]
    xa, ya = xp.asarray(x), xp.asarray(y)
    vg = pg.value_and_grad(lambda q, x, y: _mlp.loss_fn(xp, q, x, y))
    c = pg.compile(vg)
    t0 = time.perf_counter()
    c(p, xa, ya)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(5):
        c(p, xa, ya)
    replay = (time.perf_counter() - t0) / 5
    tr = c.traces[0]
    print(
        f"MLP value_and_grad: first call (trace + generate) {first * 1e3:.1f} ms, replay "
        f"{replay * 1e3:.1f} ms; {tr.calls} backend calls, {tr.elided} of them may write into "
        "a dead temporary"
    )


def _peak(fn) -> tuple[int, int]:
    # under the fixed large thresholds the growth spans the warm-up (see step_peak)
    fixed = _common.MALLOC_SETTINGS["fixed"]["MALLOC_MMAP_THRESHOLD_"]
    return _common.step_peak(fn, os.environ.get("MALLOC_MMAP_THRESHOLD_") == fixed)


def _memory_contender(name: str) -> tuple[int | None, int]:
    sizes = [256] + [1024] * 20 + [10]
    params, x, y = _mlp.init(sizes, 512, np.float32)
    if name == "PyTorch eager":
        import torch

        torch.set_num_threads(1)
        pt = [torch.tensor(q, requires_grad=True) for q in params]
        xt, yt = torch.tensor(x), torch.tensor(y)

        def torch_step():  # value and gradients, returned as ours are (nothing kept in .grad)
            loss = _mlp.loss_fn(_mlp.torch_module(), pt, xt, yt)
            return loss, torch.autograd.grad(loss, pt)

        return None, _peak(torch_step)[1]
    p = [xp.asarray(q) for q in params]
    xa, ya = xp.asarray(x), xp.asarray(y)
    vg = pg.value_and_grad(lambda q, x, y: _mlp.loss_fn(xp, q, x, y))
    step = pg.compile(vg) if name == "pycograd_xp compiled" else vg
    return _peak(lambda: step(p, xa, ya))


def memory() -> None:
    """Each contender in a fresh process (its resident set is its own), with glibc's default
    malloc thresholds and with the large fixed ones the timings use."""
    names = ["pycograd_xp", "pycograd_xp compiled"]
    try:
        import torch  # noqa: F401

        names.append("PyTorch eager")
    except ImportError:
        print("  (torch not installed: no PyTorch row)")
    print(
        "step peak memory, 20-layer tanh MLP (1024 wide), batch 512, float32, MB beyond the "
        "arguments (84 MB of parameters); RSS growth of the second call with glibc's default "
        "malloc and with every block >= 16 KiB mapped on its own and unmapped when freed "
        "(the live peak, whoever allocates), and of the first two calls with the fixed "
        "thresholds the timings use (the first call's start-up included)"
    )
    print(
        f"  {'contender':24s} {'tracemalloc':>12s} {'RSS default':>12s} {'RSS live':>12s} "
        f"{'RSS fixed':>12s}"
    )
    found = {}
    for name in names:
        runs = {}
        for malloc in ("default", "live", "fixed"):
            runs[malloc] = _common.in_fresh_process(__file__, ["--memory-one", name], malloc)
        traced = runs["fixed"][0]
        found[name] = traced
        tm = f"{traced / 1e6:12.1f}" if traced is not None else f"{'-':>12s}"
        print(
            f"  {name:24s} {tm} {runs['default'][1] / 1e6:12.1f} "
            f"{runs['live'][1] / 1e6:12.1f} {runs['fixed'][1] / 1e6:12.1f}"
        )
    print(
        f"  compiled / uncompiled (tracemalloc): "
        f"{found['pycograd_xp compiled'] / found['pycograd_xp']:.2f} (goal <= 1)"
    )


def main() -> None:
    trace_cost()
    chain()
    mlp_step()
    memory()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--memory-one"]:
        print(json.dumps(_memory_contender(sys.argv[2])))
    else:
        main()
