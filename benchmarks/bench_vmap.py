"""Per-example gradients: ``vmap(grad(loss), in_axes=(None, 0, 0))`` of the 784-512-512-10 tanh
MLP (softmax cross-entropy, float32, batch 128, one thread).

    python benchmarks/bench_vmap.py

Contenders side by side in one process, interleaved, medians and ratios against hand-written
NumPy (batched forward and backward, then one broadcast outer product per layer):

* ``vmap(grad)``: pycograd_xp.vmap of pycograd_xp.grad over NumPy;
* ``python loop``: pycograd_xp.grad once per example, stacked;
* ``torch.func.vmap(grad)`` and JAX ``vmap(grad)`` (eager and jit) when installed.

The issue's goal: vmap(grad) at most 1.2x hand-written NumPy.
"""

from __future__ import annotations

import _common  # pins threads before the contenders load
import _mlp
import numpy as np

import pycograd_xp as pg

SIZES = (784, 512, 512, 10)
BATCH = 128


def example_loss(m, params, x, y):
    """Cross-entropy of one example (x: (784,), y: one-hot (10,)); ``m`` is any module."""
    h = x
    for i in range(0, len(params) - 2, 2):
        h = m.tanh(h @ params[i] + params[i + 1])
    logits = h @ params[-2] + params[-1]
    z = logits - m.max(logits)
    return -m.sum(y * (z - m.log(m.sum(m.exp(z)))))


def numpy_per_example(params, x, y):
    """Hand-written: batched forward and backward, one broadcast outer product per layer."""
    hs, h = [x], x
    for i in range(0, len(params) - 2, 2):
        h = np.tanh(h @ params[i] + params[i + 1])
        hs.append(h)
    logits = h @ params[-2] + params[-1]
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    g = p - y
    grads = [None] * len(params)
    for i in range(len(params) - 2, -1, -2):
        h = hs.pop()
        grads[i], grads[i + 1] = h[:, :, None] * g[:, None, :], g
        if i:
            g = (g @ params[i].T) * (1 - h * h)
    return grads


def main() -> None:
    params, x, y = _mlp.init(SIZES, BATCH, np.float32)
    xp = pg.namespace(np)
    P, X, Y = [xp.asarray(p) for p in params], xp.asarray(x), xp.asarray(y)

    def loss(ps, xi, yi):
        return example_loss(xp, ps, xi, yi)

    per_example = pg.vmap(pg.grad(loss), in_axes=(None, 0, 0))
    grad = pg.grad(loss)

    def loop():
        rows = [grad(P, X[i], Y[i]) for i in range(BATCH)]
        return [xp.stack([r[k] for r in rows]) for k in range(len(P))]

    ref = numpy_per_example(params, x, y)
    for got_v, got_l, r in zip(per_example(P, X, Y), loop(), ref, strict=True):
        assert pg.unwrap(got_v).dtype == np.float32
        np.testing.assert_allclose(pg.unwrap(got_v), r, rtol=2e-3, atol=2e-5)
        np.testing.assert_allclose(pg.unwrap(got_l), r, rtol=2e-3, atol=2e-5)

    contenders = {
        "numpy (hand-written)": lambda: numpy_per_example(params, x, y),
        "vmap(grad)": lambda: per_example(P, X, Y),
        "python loop": loop,
    }
    try:
        import torch
        import torch.func

        torch.set_num_threads(1)
        pt, xt, yt = [torch.tensor(p) for p in params], torch.tensor(x), torch.tensor(y)
        tg = torch.func.vmap(
            torch.func.grad(lambda ps, a, b: example_loss(torch, ps, a, b)), in_dims=(None, 0, 0)
        )
        contenders["torch.func.vmap(grad)"] = lambda: tg(pt, xt, yt)
    except ImportError:
        print("  (torch not installed: torch.func.vmap(grad) skipped; pip install -e '.[bench]')")
    try:
        import jax
        import jax.numpy as jnp

        pj, xj, yj = [jnp.asarray(p) for p in params], jnp.asarray(x), jnp.asarray(y)
        jg = jax.vmap(jax.grad(lambda ps, a, b: example_loss(jnp, ps, a, b)), in_axes=(None, 0, 0))
        jj = jax.jit(jg)
        contenders["jax vmap(grad) eager"] = lambda: jax.block_until_ready(jg(pj, xj, yj))
        contenders["jax vmap(grad) jit"] = lambda: jax.block_until_ready(jj(pj, xj, yj))
    except ImportError:
        print("  (jax not installed: jax vmap(grad) skipped; pip install -e '.[bench]')")
    med = _common.interleaved(contenders, repeats=7, number=2)
    print(
        _common.table(
            f"per-example gradients of the MLP {SIZES}, tanh, float32, batch {BATCH}",
            med,
            "numpy (hand-written)",
        )
    )
    ratio = med["vmap(grad)"] / med["numpy (hand-written)"]
    print(
        f"vmap(grad) / hand-written NumPy = {ratio:.2f} (goal: 1.20) -> "
        f"{'ok' if ratio <= 1.2 else 'OVER'}"
    )


if __name__ == "__main__":
    main()
