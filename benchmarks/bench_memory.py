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
import _mlp
import numpy as np

LAYERS, WIDTH, BATCH, CLASSES, LR = 20, 512, 512, 10, 1e-3
SIZES = [WIDTH] * (LAYERS + 1) + [CLASSES]


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
    print(
        f"{LAYERS}-layer MLP, width {WIDTH}, batch {BATCH}, {np.dtype(dtype).name}: "
        f"activations that must be saved = {saved / 2**20:.1f} MiB"
    )
    params, x, y = _mlp.init(SIZES, BATCH, dtype)
    results = {}
    for name, step in _mlp.numpy_contenders(params, x, y, LR).items():
        step()  # warm up: first-call allocations are not the step's
        results[name] = measure(step)
    print(f"  {'contender':24s} {'peak MiB':>10s} {'peak / saved':>13s}")
    for name, peak in results.items():
        print(f"  {name:24s} {peak / 2**20:10.1f} {peak / saved:13.3f}")


if __name__ == "__main__":
    main()
