# %% [markdown]
# # Per-example gradients
#
# `vmap(grad(loss), in_axes=(None, 0, 0))` gives one gradient per example of a batch in one
# batched pass: `vmap` runs the function once on the whole batch through each row's batching
# rule, never a Python loop. Per-example gradients are what differentially private SGD clips,
# and what influence and gradient-noise diagnostics read. This page was executed when the site
# was built.

# %%
import time

import numpy as np

import pycograd_xp as pg
from pycograd_xp import nn, random

xp = pg.namespace(np)

k1, k2, k3 = random.split(random.key(0), 3)
params = {
    "l1": nn.Linear.init(k1, 20, 64, xp=xp),
    "l2": nn.Linear.init(k2, 64, 3, xp=xp),
}
X = random.normal(k3, (256, 20), xp=xp)
Y = xp.asarray(np.random.default_rng(0).integers(0, 3, 256))


def loss(params, x, y):
    """The loss of one example: x of shape (20,), y a scalar label."""
    logits = params["l2"](nn.tanh(params["l1"](x)))
    return nn.cross_entropy(logits[None, :], y[None])


per_example = pg.vmap(pg.grad(loss), in_axes=(None, 0, 0))(params, X, Y)
pg.tree_map(lambda g: g.shape, per_example)

# %% [markdown]
# Each leaf has the batch as its first axis. The same numbers from a Python loop over the
# examples:


# %%
def loop(params, X, Y):
    grads = [pg.grad(loss)(params, X[i], Y[i]) for i in range(X.shape[0])]
    return pg.tree_map(lambda *g: xp.stack(g), *grads)


looped = loop(params, X, Y)
worst = max(
    float(xp.max(xp.abs(a - b)))
    for a, b in zip(pg.tree_leaves(per_example), pg.tree_leaves(looped), strict=True)
)
print(f"largest difference from the loop: {worst:.1e}")


# %%
def timed(f, repeats=3):
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return best


t_vmap = timed(lambda: pg.vmap(pg.grad(loss), in_axes=(None, 0, 0))(params, X, Y))
t_loop = timed(lambda: loop(params, X, Y))
print(
    f"vmap(grad): {1e3 * t_vmap:.1f} ms; Python loop: {1e3 * t_loop:.1f} ms "
    f"({t_loop / t_vmap:.0f}x)"
)

# %% [markdown]
# ## Clipping each example's gradient
#
# DP-SGD clips each example's gradient to a norm before averaging. With the per-example
# gradients at hand this is array code:


# %%
def clipped_mean(grads, max_norm=1.0):
    leaves = pg.tree_leaves(grads)
    sq = sum(xp.sum(xp.reshape(g * g, (g.shape[0], -1)), axis=1) for g in leaves)
    scale = xp.minimum(1.0, max_norm / (xp.sqrt(sq) + 1e-12))  # one factor per example
    return pg.tree_map(
        lambda g: xp.mean(g * xp.reshape(scale, (-1,) + (1,) * (g.ndim - 1)), axis=0), grads
    ), xp.sqrt(sq)


update, norms = clipped_mean(per_example)
print(
    f"per-example gradient norms: min {float(xp.min(norms)):.3f}, "
    f"median {float(np.median(np.asarray(pg.unwrap(norms)))):.3f}, "
    f"max {float(xp.max(norms)):.3f}"
)

# %% [markdown]
# `vmap` composes with `grad` and `jvp` in both orders and nests; a row that cannot batch
# (`nonzero`, `unique_*`: data-dependent shapes) raises naming itself.
# `benchmarks/bench_vmap.py` compares `vmap(grad)` with hand-written NumPy, a Python loop,
# `torch.func.vmap` and JAX on the 784-512-512-10 MLP (see [Benchmarks](../benchmarks.md)).
