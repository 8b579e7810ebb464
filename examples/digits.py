"""An MLP on scikit-learn's bundled digits (8x8 images, no download) to >= 95% test accuracy,
with its time per epoch against the same model in PyTorch CPU, measured side by side, and the
same training step through ``pycograd_xp.compile`` (traced once, then replayed).

    python examples/digits.py

Same initial weights, same batches, same optimizer (Adam) for all; their epochs alternate, so
machine noise hits them alike. The compiled step ends with exactly the uncompiled parameters.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

import pycograd_xp as pg
from pycograd_xp import nn, optim, random
from pycograd_xp.data import Batches
from pycograd_xp.train import make_step

HIDDEN, LR, BATCH = 128, 3e-3, 64


def load(seed: int = 0):
    from sklearn.datasets import load_digits  # (here: the benchmarks import this module)

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    order = np.asarray(pg.unwrap(random.permutation(random.key(seed), len(y))))
    cut = int(0.8 * len(y))
    return x[order[:cut]], y[order[:cut]], x[order[cut:]], y[order[cut:]]


def init_params(key, xp):
    k1, k2 = random.split(key)
    return {
        "l1": nn.Linear.init(k1, 64, HIDDEN, xp=xp, dtype=xp.float32),
        "l2": nn.Linear.init(k2, HIDDEN, 10, xp=xp, dtype=xp.float32),
    }


def logits_fn(params, x):
    return params["l2"](nn.relu(params["l1"](x)))


def loss_fn(params, x, y):
    return nn.cross_entropy(logits_fn(params, x), y)


def accuracy(params, xp, x, y) -> float:
    with pg.no_grad():
        pred = xp.argmax(logits_fn(params, xp.asarray(x)), axis=1)
    return float(np.mean(np.asarray(pg.unwrap(pred)) == y))


def torch_trainer(params):
    """The same model, initial weights and optimizer in PyTorch; returns an epoch function."""
    import torch

    torch.set_num_threads(1)
    w = {
        n: torch.tensor(np.asarray(pg.unwrap(getattr(params[layer], f))), requires_grad=True)
        for layer in ("l1", "l2")
        for f, n in (("w", f"{layer}.w"), ("b", f"{layer}.b"))
    }
    opt = torch.optim.Adam(list(w.values()), lr=LR)

    def epoch(batches):
        for xb, yb in batches:
            x = torch.from_numpy(np.asarray(pg.unwrap(xb)))
            y = torch.from_numpy(np.asarray(pg.unwrap(yb)))
            h = torch.relu(x @ w["l1.w"] + w["l1.b"])
            loss = torch.nn.functional.cross_entropy(h @ w["l2.w"] + w["l2.b"], y)
            opt.zero_grad()
            loss.backward()
            opt.step()

    def acc(x, y):
        with torch.no_grad():
            h = torch.relu(torch.from_numpy(x) @ w["l1.w"] + w["l1.b"])
            return float(((h @ w["l2.w"] + w["l2.b"]).argmax(1).numpy() == y).mean())

    return epoch, acc


def main(epochs: int = 30, compare_torch: bool = True) -> dict[str, float]:
    xp = pg.namespace(np)
    x_train, y_train, x_test, y_test = load()
    params = init_params(random.key(1), xp)
    opt_state = optim.adam(LR).init(params)
    step = make_step(loss_fn, optim.adam(LR))
    batches = Batches((x_train, y_train), BATCH, key=random.key(2), prefetch=0)
    torch_epoch = None
    if compare_torch:
        try:
            torch_epoch, torch_acc = torch_trainer(params)
        except ImportError:
            print("PyTorch not installed: no side-by-side timing (pip install -e '.[bench]')")
    compiled_step = pg.compile(step)
    c_params, c_state = params, opt_state
    ours, compiled, theirs = [], [], []
    for epoch in range(epochs):
        t0 = time.perf_counter()
        for batch in batches:
            params, opt_state, metrics = step(params, opt_state, batch)
        ours.append(time.perf_counter() - t0)
        batches.epoch -= 1  # the same batches, in the same order
        t0 = time.perf_counter()
        for batch in batches:
            c_params, c_state, _ = compiled_step(c_params, c_state, batch)
        compiled.append(time.perf_counter() - t0)
        if torch_epoch is not None:  # the same batches, in the same order
            batches.epoch -= 1
            t0 = time.perf_counter()
            torch_epoch(batches)
            theirs.append(time.perf_counter() - t0)
        if epoch % 10 == 9 or epoch == epochs - 1:
            print(
                f"epoch {epoch + 1:3d}  loss {float(metrics['loss']):.4f}  "
                f"test accuracy {accuracy(params, xp, x_test, y_test):.4f}"
            )
    same = all(
        bool(xp.all(a == b))
        for a, b in zip(pg.tree_leaves(params), pg.tree_leaves(c_params), strict=True)
    )
    result = {
        "test_accuracy": accuracy(params, xp, x_test, y_test),
        "epoch_ms": 1e3 * statistics.median(ours),
        "compiled_test_accuracy": accuracy(c_params, xp, x_test, y_test),
        "compiled_epoch_ms": 1e3 * statistics.median(compiled),
        "compiled_traces": len(compiled_step.traces),
        "compiled_equals_uncompiled": same,
    }
    print(
        f"pycograd_xp: test accuracy {result['test_accuracy']:.4f}, "
        f"{result['epoch_ms']:.1f} ms/epoch (median)"
    )
    print(
        f"pycograd_xp compiled: test accuracy {result['compiled_test_accuracy']:.4f}, "
        f"{result['compiled_epoch_ms']:.1f} ms/epoch ({result['compiled_traces']} traces, "
        f"the same parameters as uncompiled: {same}); compiled / uncompiled = "
        f"{result['compiled_epoch_ms'] / result['epoch_ms']:.2f}"
    )
    if torch_epoch is not None:
        result["torch_epoch_ms"] = 1e3 * statistics.median(theirs)
        result["torch_test_accuracy"] = torch_acc(x_test, y_test)
        print(
            f"PyTorch CPU: test accuracy {result['torch_test_accuracy']:.4f}, "
            f"{result['torch_epoch_ms']:.1f} ms/epoch; pycograd_xp / PyTorch = "
            f"{result['epoch_ms'] / result['torch_epoch_ms']:.2f}, compiled / PyTorch = "
            f"{result['compiled_epoch_ms'] / result['torch_epoch_ms']:.2f}"
        )
    return result


if __name__ == "__main__":
    import argparse

    argparse.ArgumentParser(  # no options: --help shows what it does
        description=" ".join(__doc__.split("\n\n")[0].split())
    ).parse_args()
    main()
