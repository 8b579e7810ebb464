"""Workload (c): peak memory of one training step of a 20-layer, 512-wide tanh MLP at batch 512,
divided by the bytes of the activations that must be saved for backward.

    python benchmarks/bench_memory.py

Measured with tracemalloc (NumPy reports its buffers to it), above a baseline holding the
parameters and the batch. The activations that must be saved are the 20 hidden outputs (each
is both the next layer's matmul input and its own tanh's derivative) and the logits: a lower
bound no reverse-mode step can beat without recomputation. Contenders that allocate through
NumPy are measured: hand-written backprop, pycograd_xp, HIPS autograd.
"""

from __future__ import annotations

import gc
import tracemalloc

import _common  # noqa: F401
import numpy as np

import pycograd_xp as pg

LAYERS, WIDTH, BATCH, CLASSES, LR = 20, 512, 512, 10, 1e-3


def init(dtype):
    rng = np.random.default_rng(0)
    params = []
    sizes = [WIDTH] * (LAYERS + 1) + [CLASSES]
    for i, o in zip(sizes[:-1], sizes[1:], strict=True):
        params += [(rng.standard_normal((i, o)) / np.sqrt(i)).astype(dtype), np.zeros(o, dtype)]
    x = rng.standard_normal((BATCH, WIDTH)).astype(dtype)
    y = np.eye(CLASSES, dtype=dtype)[rng.integers(0, CLASSES, BATCH)]
    return params, x, y


def loss_fn(m, params, x, y):
    h = x
    for i in range(0, len(params) - 2, 2):
        h = m.tanh(h @ params[i] + params[i + 1])
    logits = h @ params[-2] + params[-1]
    z = logits - m.max(logits, axis=1, keepdims=True)
    return -m.sum(y * (z - m.log(m.sum(m.exp(z), axis=1, keepdims=True)))) / x.shape[0]


def numpy_step(params, x, y):
    hs, h = [x], x
    for i in range(0, len(params) - 2, 2):
        h = np.tanh(h @ params[i] + params[i + 1])
        hs.append(h)
    logits = h @ params[-2] + params[-1]
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    g = (p - y) / x.shape[0]
    del p, logits
    for i in range(len(params) - 2, -1, -2):
        h = hs.pop()
        gw, gb = h.T @ g, g.sum(axis=0)
        if i:
            g = g @ params[i].T
            g *= 1 - h * h
        del h
        params[i] -= LR * gw
        params[i + 1] -= LR * gb
        del gw, gb


def measure(step) -> int:
    gc.collect()
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    step()
    gc.collect()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak - base


def main() -> None:
    dtype = np.float32
    itemsize = np.dtype(dtype).itemsize
    saved = (LAYERS * BATCH * WIDTH + BATCH * CLASSES) * itemsize
    print(f"{LAYERS}-layer MLP, width {WIDTH}, batch {BATCH}, {np.dtype(dtype).name}: "
          f"activations that must be saved = {saved / 2**20:.1f} MiB")  # fmt: skip
    results = {}

    params, x, y = init(dtype)
    p_np = [p.copy() for p in params]
    numpy_step(p_np, x, y)
    results["numpy by hand"] = measure(lambda: numpy_step(p_np, x, y))

    xp = pg.namespace(np)
    p_pg = [xp.asarray(p.copy()) for p in params]
    xa, ya = xp.asarray(x), xp.asarray(y)
    vg = pg.value_and_grad(lambda p: loss_fn(xp, p, xa, ya))

    def pg_step():
        _, grads = vg(p_pg)
        with pg.no_grad():
            for p, g in zip(p_pg, grads, strict=True):
                p -= LR * g

    pg_step()
    results["pycograd_xp (numpy)"] = measure(pg_step)
    try:
        import autograd
        import autograd.numpy as anp

        p_ag = [p.copy() for p in params]
        g_ag = autograd.grad(lambda p: loss_fn(anp, p, x, y))

        def ag_step():
            for p, g in zip(p_ag, g_ag(p_ag), strict=True):
                p -= LR * g

        ag_step()
        results["HIPS autograd"] = measure(ag_step)
    except ImportError:
        print("  (autograd not installed)")
    print(f"  {'contender':24s} {'peak MiB':>10s} {'peak / saved':>13s}")
    for name, peak in results.items():
        print(f"  {name:24s} {peak / 2**20:10.1f} {peak / saved:13.3f}")


if __name__ == "__main__":
    main()
