"""Workload (b): one MLP training step (784-512-512-10, tanh, softmax cross-entropy, SGD),
batch 256, float32 and float64.

    python benchmarks/bench_mlp.py

Contenders side by side in one process, interleaved, medians and ratios against hand-written
NumPy backprop: pycograd_xp over NumPy, HIPS autograd, PyTorch eager, JAX eager and jit.
For the fastest NumPy kernels run it with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset.
"""

from __future__ import annotations

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


def main() -> None:
    try:
        from threadpoolctl import threadpool_info

        kernels = {i.get("internal_api"): i.get("architecture") for i in threadpool_info()}
        print(f"BLAS: {kernels}")
    except ImportError:
        pass
    for dtype in (np.float32, np.float64):
        med = _common.interleaved(contenders(dtype), repeats=11, number=5)
        print(
            _common.table(
                f"MLP step {'-'.join(map(str, SIZES))}, batch {BATCH}, {np.dtype(dtype).name}",
                med,
                "numpy by hand",
            )
        )


if __name__ == "__main__":
    main()
