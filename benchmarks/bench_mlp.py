"""Workload (b): one MLP training step (784-512-512-10, tanh, softmax cross-entropy, SGD),
batch 256, float32 and float64.

    python benchmarks/bench_mlp.py [--rounds 41]

Contenders side by side in one process, interleaved: pycograd_xp over NumPy (eager and
compiled), reverse mode's own operations written in NumPy without a tape (the floor an eager
tape could reach, ``_mlp.numpy_tape_floor_step``), HIPS autograd, PyTorch eager, JAX eager and
jit. The ratio is against hand-written NumPy backprop: the median over the rounds of each
round's ratio of times (two steps each, back to back), with its quartiles; the times are
medians. Wall-clock times: XLA's runtime spends CPU time on threads of its own beside the step
(JAX jit's step took 2x its wall time in CPU time here). For the fastest NumPy kernels run it
with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset.

    python benchmarks/bench_mlp.py --default-malloc [--launches 5]

Each contender in a process of its own with glibc's default malloc, as a user's training
process runs (the side-by-side run fixes glibc's thresholds for every contender alike:
``_common.py``): the median over the launches of its ms per step, its ratio to hand-written
NumPy's median, and the page faults per step that the default thresholds bring (memory handed
back to the system and faulted in again every step).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

import _common  # pins threads before the contenders load
import _mlp
import numpy as np

SIZES = (784, 512, 512, 10)
BATCH, LR = 256, 0.01


def init(dtype):
    return _mlp.init(SIZES, BATCH, dtype)


loss_fn = _mlp.loss_fn


def numpy_step(params, x, y):
    _mlp.numpy_step(params, x, y, LR)


def contenders(dtype):
    params, x, y = init(dtype)
    out = _mlp.numpy_contenders(params, x, y, LR)
    try:
        import torch

        torch.set_num_threads(1)
        p_t = [torch.tensor(p.copy(), requires_grad=True) for p in params]
        xt, yt = torch.tensor(x), torch.tensor(y)

        T = _mlp.torch_module()  # torch's names for the few functions the model uses

        def torch_step():
            loss = loss_fn(T, p_t, xt, yt)
            for p in p_t:
                p.grad = None
            loss.backward()
            with torch.no_grad():
                for p in p_t:
                    p -= LR * p.grad

        out["PyTorch eager"] = torch_step
    except ImportError:
        print("  (torch not installed)")
    try:
        import jax
        import jax.numpy as jnp

        p_j = [jnp.asarray(p) for p in params]
        xj, yj = jnp.asarray(x), jnp.asarray(y)

        def update(p):
            g = jax.grad(lambda q: loss_fn(jnp, q, xj, yj))(p)
            return [a - LR * b for a, b in zip(p, g, strict=True)]

        jitted = jax.jit(update)
        state = {"eager": p_j, "jit": p_j}

        def jax_eager():
            state["eager"] = update(state["eager"])
            state["eager"][0].block_until_ready()

        def jax_jit():
            state["jit"] = jitted(state["jit"])
            state["jit"][0].block_until_ready()

        out["JAX eager"] = jax_eager
        out["JAX jit"] = jax_jit
    except ImportError:
        print("  (jax not installed)")
    return out


def paired_table(title: str, steps: dict, rounds: int, base: str = "numpy by hand") -> str:
    """Median ms of each contender's step and the median (quartiles) of its per-round ratio."""
    wall, _ = _common.interleaved_rounds(steps, repeats=rounds, number=2)
    lines = [title, f"  {'contender':28s} {'ms':>10s} {'ratio':>8s} {'(q1, q3)':>15s}"]
    for name, times in wall.items():
        q1, ratio, q3 = _common.quartiles([t / b for t, b in zip(times, wall[base], strict=True)])
        ms = statistics.median(times) * 1e3
        lines.append(f"  {name:28s} {ms:10.3f} {ratio:8.3f} {f'({q1:.3f}, {q3:.3f})':>15s}")
    return "\n".join(lines)


def one_process(name: str, dtype: str, steps: int) -> dict:
    """``name``'s step run ``steps`` times after 10 to warm up, in this process: ms per step
    and minor page faults per step."""
    step = contenders(np.dtype(dtype))[name]
    for _ in range(10):
        step()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    seconds = time.perf_counter() - t0
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    return {"ms": seconds / steps * 1e3, "faults": faults / steps}


def default_malloc_table(dtype, launches: int, steps: int) -> str:
    """Each contender in a fresh process with glibc's default malloc, launched in turn
    ``launches`` times: median ms per step, ratio to hand-written NumPy's, faults per step."""
    names = list(contenders(dtype))
    env = {**os.environ, "PYCOGRAD_BENCH_KEEP_MALLOC": "1"}
    for var in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"):
        env.pop(var, None)
    runs: dict[str, list[dict]] = {n: [] for n in names}
    for _ in range(launches):
        for n in names:
            child = [sys.executable, __file__, "--child", n, np.dtype(dtype).name, str(steps)]
            out = subprocess.run(child, env=env, capture_output=True, text=True, check=True)
            runs[n].append(json.loads(out.stdout.strip().splitlines()[-1]))
    base = statistics.median(r["ms"] for r in runs["numpy by hand"])
    title = f"MLP step, {np.dtype(dtype).name}, one process each, glibc's default malloc"
    lines = [title, f"  {'contender':28s} {'ms':>10s} {'ratio':>8s} {'faults/step':>12s}"]
    for n, rs in runs.items():
        ms = statistics.median(r["ms"] for r in rs)
        faults = statistics.median(r["faults"] for r in rs)
        lines.append(f"  {n:28s} {ms:10.3f} {ms / base:8.3f} {faults:12.0f}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=41, help="interleaved rounds (41)")
    parser.add_argument(
        "--default-malloc",
        action="store_true",
        help="each contender in its own process with glibc's default malloc",
    )
    parser.add_argument("--launches", type=int, default=5, help="with --default-malloc (5)")
    parser.add_argument("--steps", type=int, default=60, help="with --default-malloc (60)")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)  # NAME DTYPE STEPS
    args = parser.parse_args()
    if args.child:
        name, dtype, steps = args.child
        print(json.dumps(one_process(name, dtype, int(steps))))
        return
    try:
        from threadpoolctl import threadpool_info

        kernels = {i.get("internal_api"): i.get("architecture") for i in threadpool_info()}
        print(f"BLAS: {kernels}")
    except ImportError:
        pass
    for dtype in (np.float32, np.float64):
        if args.default_malloc:
            print(default_malloc_table(dtype, args.launches, args.steps))
            continue
        title = f"MLP step {'-'.join(map(str, SIZES))}, batch {BATCH}, {np.dtype(dtype).name}"
        print(paired_table(title, contenders(dtype), args.rounds))


if __name__ == "__main__":
    main()
