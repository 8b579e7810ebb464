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
"""

from __future__ import annotations

import argparse
import statistics

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=41, help="interleaved rounds (41)")
    args = parser.parse_args()
    try:
        from threadpoolctl import threadpool_info

        kernels = {i.get("internal_api"): i.get("architecture") for i in threadpool_info()}
        print(f"BLAS: {kernels}")
    except ImportError:
        pass
    for dtype in (np.float32, np.float64):
        title = f"MLP step {'-'.join(map(str, SIZES))}, batch {BATCH}, {np.dtype(dtype).name}"
        print(paired_table(title, contenders(dtype), args.rounds))


if __name__ == "__main__":
    main()
