"""Workload (a): a chain of 50 small elementwise ops, forward + backward, µs per op.

    python benchmarks/bench_chain.py

Contenders side by side in one process, interleaved: hand-written NumPy backprop, HIPS autograd,
PyTorch eager, JAX eager and jit (CPU), pycograd_xp over NumPy, uncompiled and through
``pycograd_xp.compile``. Shapes (8,) and (100,).
"""

from __future__ import annotations

import _common  # pins threads before the contenders load
import numpy as np

import pycograd_xp as pg

N_CYCLES = 10  # 5 ops a cycle: 50 ops, then a sum


def chain(m, x):
    """The same program for every namespace-like module ``m`` with sin/tanh/sum."""
    for _ in range(N_CYCLES):
        x = m.sin(x)
        x = x * 1.1
        x = m.tanh(x)
        x = x + 0.2
        x = x * x
    return m.sum(x)


def numpy_by_hand(x):
    saved = []
    for _ in range(N_CYCLES):
        a = np.sin(x)
        b = a * 1.1
        c = np.tanh(b)
        d = c + 0.2
        saved.append((x, c, d))
        x = d * d
    g = np.ones_like(x)
    for x0, c, d in reversed(saved):
        g = g * 2 * d
        g = g * (1 - c * c) * 1.1
        g = g * np.cos(x0)
    return g


def contenders(shape):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(shape)
    out = {"numpy by hand": lambda: numpy_by_hand(a)}
    xp = pg.namespace(np)
    xa = xp.asarray(a)
    g_pg = pg.grad(lambda x: chain(xp, x))
    out["pycograd_xp (numpy)"] = lambda: g_pg(xa)
    g_c = pg.compile(g_pg)
    out["pycograd_xp compiled"] = lambda: g_c(xa)
    try:
        import autograd
        import autograd.numpy as anp

        g_ag = autograd.grad(lambda x: chain(anp, x))
        out["HIPS autograd"] = lambda: g_ag(a)
    except ImportError:
        print("  (autograd not installed)")
    try:
        import torch

        torch.set_num_threads(1)
        t = torch.tensor(a)

        def torch_step():
            x = t.detach().requires_grad_()
            chain(torch, x).backward()
            return x.grad

        out["PyTorch eager"] = torch_step
    except ImportError:
        print("  (torch not installed)")
    try:
        import jax
        import jax.numpy as jnp

        ja = jnp.asarray(a)
        g_j = jax.grad(lambda x: chain(jnp, x))
        g_jit = jax.jit(g_j)
        out["JAX eager"] = lambda: g_j(ja).block_until_ready()
        out["JAX jit"] = lambda: g_jit(ja).block_until_ready()
    except ImportError:
        print("  (jax not installed)")
    return out


def main() -> None:
    n_ops = 5 * N_CYCLES
    for shape in [(8,), (100,)]:
        cs = contenders(shape)
        number = {"JAX eager": 3}
        med = {}
        slow = {k: v for k, v in cs.items() if k in number}
        fast = {k: v for k, v in cs.items() if k not in number}
        med.update(_common.interleaved(fast, repeats=15, number=50))
        if slow:
            med.update(_common.interleaved(slow, repeats=5, number=3))
        per_op = {k: v / n_ops for k, v in med.items()}
        print(
            _common.table(
                f"chain of {n_ops} elementwise ops, shape {shape}: µs per op (forward + backward)",
                per_op,
                "numpy by hand",
                unit="µs/op",
                scale=1e6,
            )
        )
        r = per_op["pycograd_xp compiled"] / per_op["numpy by hand"]
        print(f"  pycograd_xp compiled / numpy by hand: {r:.2f} (goal <= 1.5)")
        if "PyTorch eager" in per_op:
            r = per_op["pycograd_xp (numpy)"] / per_op["PyTorch eager"]
            print(f"  pycograd_xp / PyTorch eager: {r:.2f}")


if __name__ == "__main__":
    main()
