"""A small CNN trained on image chunks stored in Zarr, with Cubed: mini-batches in one pass over
each batch's chunks, a validation accuracy each epoch with early stopping, then predictions
written back to Zarr, every task within its memory budget.

    python examples/cubed_images.py [--rows 24000] [--chunk 1000] [--epochs 4]
                                    [--allowed-mem 1GB] [--executor threads]

The images are (rows, 1, 16, 16) float32, each a bar in one of four orientations (horizontal,
vertical, either diagonal) at a random place, under noise; the label is the orientation. The
model is conv(1->8, 3x3) - relu - max-pool - conv(8->16, 3x3) - relu - max-pool - linear(4),
trained with Adam on the mean cross-entropy (a ``row_loss``: one task per image chunk runs the
forward and backward pass on it with pycograd_xp's NumPy namespace, so each chunk is read once
a step). It prints each epoch's validation accuracy, then writes the predicted classes of the
validation images to Zarr with ``cubed_plugin.predict`` and ``cubed.to_zarr``.
"""

from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np

import pycograd_xp as pg
from pycograd_xp import nn, optim, random

SIZE = 16
CLASSES = 4


def images(rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, 1, 16, 16) float32 images of a bar (length 7) in one of 4 orientations at a
    random place, plus noise; the orientation as an int64 label."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, CLASSES, rows)
    x = 0.5 * rng.standard_normal((rows, 1, SIZE, SIZE)).astype(np.float32)
    steps = {0: (0, 1), 1: (1, 0), 2: (1, 1), 3: (1, -1)}  # (row, column) along the bar
    r0 = rng.integers(3, SIZE - 3, rows)
    c0 = rng.integers(3, SIZE - 3, rows)
    for t in range(-3, 4):
        dr = np.array([steps[k][0] for k in labels]) * t
        dc = np.array([steps[k][1] for k in labels]) * t
        x[np.arange(rows), 0, r0 + dr, c0 + dc] += 2.0
    return x, labels.astype(np.int64)


def write(path: str, rows: int, chunk: int, seed: int) -> None:
    """X.zarr (images) and y.zarr (labels) in ``path``, in row chunks of ``chunk`` images."""
    import zarr

    x, y = images(rows, seed)
    X = zarr.open_array(
        os.path.join(path, "X.zarr"),
        mode="w",
        shape=x.shape,
        chunks=(chunk, 1, SIZE, SIZE),
        dtype=x.dtype,
    )
    X[...] = x
    Y = zarr.open_array(
        os.path.join(path, "y.zarr"), mode="w", shape=y.shape, chunks=(chunk,), dtype=y.dtype
    )
    Y[...] = y


def init_params(key: random.Key) -> dict:
    """The CNN's parameters (float32, He-initialized), on NumPy."""
    xp = pg.namespace(np)
    k1, k2, k3 = random.split(key, 3)
    f32 = xp.float32
    return pg.tree_map(
        lambda a: np.asarray(pg.unwrap(a)),
        {
            "c1": nn.he_normal(k1, (8, 1, 3, 3), xp=xp, dtype=f32),
            "b1": xp.zeros(8, dtype=f32),
            "c2": nn.he_normal(k2, (16, 8, 3, 3), xp=xp, dtype=f32),
            "b2": xp.zeros(16, dtype=f32),
            "w": nn.glorot_normal(k3, (16 * 4 * 4, CLASSES), xp=xp, dtype=f32),
            "b": xp.zeros(CLASSES, dtype=f32),
        },
    )


def logits(p: dict, X):
    """(rows, 1, 16, 16) images -> (rows, 4) class logits."""
    xp = X.__array_namespace__()
    h = nn.max_pool2d(nn.relu(nn.conv2d(X, p["c1"], p["b1"], padding=1)), 2)  # (n, 8, 8, 8)
    h = nn.max_pool2d(nn.relu(nn.conv2d(h, p["c2"], p["b2"], padding=1)), 2)  # (n, 16, 4, 4)
    return xp.reshape(h, (h.shape[0], 16 * 4 * 4)) @ p["w"] + p["b"]


def per_image_loss(p: dict, X, y):
    """Each image's cross-entropy (a row loss: ``fit`` runs it one chunk per task)."""
    return nn.cross_entropy(logits(p, X), y, reduction="none")


def correct(p: dict, X, y):
    """Whether each image's class is predicted (the validation metric)."""
    xp = X.__array_namespace__()
    return xp.argmax(logits(p, X), axis=1) == y


def predicted_class(p: dict, X):
    xp = X.__array_namespace__()
    return xp.argmax(logits(p, X), axis=1)


def main(
    rows: int = 24_000,
    chunk: int = 1_000,
    epochs: int = 4,
    batch_chunks: int = 1,
    allowed_mem: str = "1GB",
    executor: str = "threads",
    workdir: str | None = None,
    quiet: bool = False,
) -> dict:
    """Train, validate each epoch, predict; returns the figures."""
    import cubed

    from cubed_plugin import EarlyStopping, fit, make_spec, predict, row_loss

    say = (lambda *a: None) if quiet else print
    d = workdir or tempfile.mkdtemp(prefix="cubed-images-")
    write(os.path.join(d, "train"), rows, chunk, seed=0)
    write(os.path.join(d, "val"), max(rows // 6, chunk), chunk, seed=1)
    spec = make_spec(allowed_mem, work_dir=os.path.join(d, "work"), executor=executor)

    def data(part: str) -> tuple:
        return tuple(
            cubed.from_zarr(os.path.join(d, part, f"{n}.zarr"), spec=spec) for n in ("X", "y")
        )

    X, y = data("train")
    Xv, yv = data("val")
    say(f"{rows:,} images {tuple(X.shape[1:])} float32 in chunks of {chunk:,} ({d})")
    result = fit(
        row_loss(per_image_loss),
        init_params(random.key(0)),
        (X, y),
        optim.adam(1e-2),
        epochs=epochs,
        batch_rows=batch_chunks * chunk,
        spec=spec,
        executor=executor,
        validation=(Xv, yv),
        metrics={"accuracy": correct},
        early_stopping=EarlyStopping(patience=2, monitor="val_accuracy", mode="max"),
        progress=False,
        log=None if quiet else (lambda line: print(line) if "validation" in line else None),
    )
    classes = predict(predicted_class, result.params, Xv)  # lazy, a task per chunk
    cubed.to_zarr(classes, os.path.join(d, "val_predicted.zarr"))
    import zarr

    stored = zarr.open_array(os.path.join(d, "val_predicted.zarr"))[:]
    labels = zarr.open_array(os.path.join(d, "val", "y.zarr"))[:]
    accuracy = float(np.mean(stored == labels))
    say(
        f"trained {result.step} steps; validation accuracy "
        f"{result.history['val_accuracy'][0]:.3f} -> {result.history['val_accuracy'][-1]:.3f}; "
        f"the predictions written to Zarr: {accuracy:.3f} correct; largest task "
        f"{result.memory.max_projected() / 1e6:.0f} MB projected of {spec.allowed_mem / 1e6:.0f}"
    )
    return {
        "steps": result.step,
        "val_accuracy": result.history["val_accuracy"],
        "predicted_accuracy": accuracy,
        "max_projected": result.memory.max_projected(),
        "allowed_mem": int(spec.allowed_mem),
    }


if __name__ == "__main__":  # the processes executor's workers import this file: guarded
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=24_000, help="training images")
    ap.add_argument("--chunk", type=int, default=1_000, help="images per Zarr chunk")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--allowed-mem", default="1GB", help="each task's memory budget")
    ap.add_argument("--executor", default="threads", help="threads, processes, dask, ...")
    a = ap.parse_args()
    main(a.rows, a.chunk, a.epochs, allowed_mem=a.allowed_mem, executor=a.executor)
