"""Workload (b): one MLP training step (784-512-512-10, tanh, softmax cross-entropy, SGD),
batch 256, float32 and float64.

    python benchmarks/bench_mlp.py

Contenders side by side in one process, interleaved, medians and ratios against hand-written
NumPy backprop: pycograd_xp over NumPy, HIPS autograd, PyTorch eager, JAX eager and jit.
For the fastest NumPy kernels run it with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset.
"""

from __future__ import annotations

import _common  # noqa: F401  (pins threads before the contenders load)
import numpy as np

import pycograd_xp as pg

SIZES = (784, 512, 512, 10)
BATCH, LR = 256, 0.01


def init(dtype, seed=0):
    rng = np.random.default_rng(seed)
    params = []
    for i, o in zip(SIZES[:-1], SIZES[1:], strict=True):
        params += [(rng.standard_normal((i, o)) / np.sqrt(i)).astype(dtype),
                   np.zeros(o, dtype)]  # fmt: skip
    x = rng.standard_normal((BATCH, SIZES[0])).astype(dtype)
    y = np.eye(SIZES[-1], dtype=dtype)[rng.integers(0, SIZES[-1], BATCH)]
    return params, x, y


def loss_fn(m, params, x, y):
    """The model as array code; ``m`` is any namespace with tanh/max/exp/log/sum/mean."""
    h = x
    for i in range(0, len(params) - 2, 2):
        h = m.tanh(h @ params[i] + params[i + 1])
    logits = h @ params[-2] + params[-1]
    z = logits - m.max(logits, axis=1, keepdims=True)
    logp = z - m.log(m.sum(m.exp(z), axis=1, keepdims=True))
    return -m.sum(y * logp) / x.shape[0]


def numpy_step(params, x, y):
    hs, h = [x], x
    for i in range(0, len(params) - 2, 2):
        h = np.tanh(h @ params[i] + params[i + 1])
        hs.append(h)
    logits = h @ params[-2] + params[-1]
    z = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    g = (p - y) / x.shape[0]
    for i in range(len(params) - 2, -1, -2):
        h = hs[i // 2]
        gw, gb = h.T @ g, g.sum(axis=0)
        if i:
            g = (g @ params[i].T) * (1 - h * h)
        params[i] -= LR * gw
        params[i + 1] -= LR * gb


def contenders(dtype):
    params, x, y = init(dtype)
    out = {}
    p_np = [p.copy() for p in params]
    out["numpy by hand"] = lambda: numpy_step(p_np, x, y)

    xp = pg.namespace(np)
    p_pg = [xp.asarray(p.copy()) for p in params]
    xa, ya = xp.asarray(x), xp.asarray(y)
    vg = pg.value_and_grad(lambda p: loss_fn(xp, p, xa, ya))

    def pg_step():
        _, grads = vg(p_pg)
        with pg.no_grad():
            for p, g in zip(p_pg, grads, strict=True):
                p -= LR * g

    out["pycograd_xp (numpy)"] = pg_step
    try:
        import autograd
        import autograd.numpy as anp

        p_ag = [p.copy() for p in params]
        g_ag = autograd.grad(lambda p: loss_fn(anp, p, x, y))

        def ag_step():
            for p, g in zip(p_ag, g_ag(p_ag), strict=True):
                p -= LR * g

        out["HIPS autograd"] = ag_step
    except ImportError:
        print("  (autograd not installed)")
    try:
        import torch

        torch.set_num_threads(1)
        p_t = [torch.tensor(p.copy(), requires_grad=True) for p in params]
        xt, yt = torch.tensor(x), torch.tensor(y)

        class T:  # torch's names for the few functions the model uses
            tanh, exp, log = torch.tanh, torch.exp, torch.log

            @staticmethod
            def max(a, axis, keepdims):
                return torch.amax(a, dim=axis, keepdim=keepdims)

            @staticmethod
            def sum(a, axis=None, keepdims=False):
                return torch.sum(a) if axis is None else torch.sum(a, dim=axis, keepdim=keepdims)

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
        print(_common.table(f"MLP step {'-'.join(map(str, SIZES))}, batch {BATCH}, "
                            f"{np.dtype(dtype).name}", med, "numpy by hand"))  # fmt: skip


if __name__ == "__main__":
    main()
