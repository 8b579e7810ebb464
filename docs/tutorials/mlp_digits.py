# %% [markdown]
# # An MLP on digits
#
# A two-layer MLP trained on scikit-learn's bundled digits (8x8 images, shipped with
# scikit-learn: no download) with `pycograd_xp.nn`, Adam from `pycograd_xp.optim`, mini-batches
# from `pycograd_xp.data.Batches`, and the training step compiled once with
# `pycograd_xp.compile`. This page was executed when the site was built.

# %%
import time

import numpy as np
from sklearn.datasets import load_digits

import pycograd_xp as pg
from pycograd_xp import nn, optim, random
from pycograd_xp.data import Batches
from pycograd_xp.train import make_step

xp = pg.namespace(np)

digits = load_digits()
x = (digits.data / 16.0).astype(np.float32)  # (1797, 64), in [0, 1]
y = digits.target.astype(np.int64)
order = np.asarray(pg.unwrap(random.permutation(random.key(0), len(y))))
cut = int(0.8 * len(y))
x_train, y_train = x[order[:cut]], y[order[:cut]]
x_test, y_test = x[order[cut:]], y[order[cut:]]
x_train.shape, x_test.shape

# %% [markdown]
# The parameters are a pytree (a dict of `nn.Linear` modules, each a dataclass holding `w` of
# shape (in, out) and `b`); the loss is plain code over them.

# %%
k1, k2 = random.split(random.key(1))
params = {
    "l1": nn.Linear.init(k1, 64, 128, xp=xp, dtype=xp.float32),
    "l2": nn.Linear.init(k2, 128, 10, xp=xp, dtype=xp.float32),
}


def logits_fn(params, x):
    return params["l2"](nn.relu(params["l1"](x)))


def loss_fn(params, x, y):
    return nn.cross_entropy(logits_fn(params, x), y)


def accuracy(params, x, y):
    with pg.no_grad():
        pred = xp.argmax(logits_fn(params, xp.asarray(x)), axis=1)
    return float(np.mean(np.asarray(pg.unwrap(pred)) == y))


print(f"before training: test accuracy {accuracy(params, x_test, y_test):.3f}")

# %% [markdown]
# `make_step(loss, transformation)` returns `step(params, opt_state, batch) -> (params,
# opt_state, metrics)`: value and gradient, then the optimizer's update. `pg.compile` traces it
# once per shape of its arguments (here the full batches and the shorter last one) and then
# replays plain NumPy calls.

# %%
tx = optim.adam(3e-3)
opt_state = tx.init(params)
step = pg.compile(make_step(loss_fn, tx))
batches = Batches((x_train, y_train), 64, key=random.key(2), prefetch=0)

history = []
t0 = time.perf_counter()
for epoch in range(10):
    for batch in batches:
        params, opt_state, metrics = step(params, opt_state, batch)
    history.append(float(metrics["loss"]))
    if epoch % 5 == 4:
        print(
            f"epoch {epoch + 1:2d}  loss {history[-1]:.4f}  "
            f"test accuracy {accuracy(params, x_test, y_test):.3f}"
        )
print(f"{time.perf_counter() - t0:.1f} s; compiled traces: {len(step.traces)}")

# %%
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(6, 3))
ax.plot(range(1, len(history) + 1), history, marker="o")
ax.set_xlabel("epoch")
ax.set_ylabel("loss of the epoch's last batch")
ax.set_yscale("log")
fig.tight_layout()

# %% [markdown]
# `examples/digits.py` trains the same model for 30 epochs and times each epoch beside the same
# model in PyTorch.
