"""The character transformer of ``char_transformer.py`` trained on token chunks stored in Zarr,
with Cubed: each row a window of characters, mini-batches of row chunks in one pass, the
held-out loss and next-character accuracy each epoch, every task within its memory budget.

    python examples/cubed_tokens.py [--chars 400000] [--context 32] [--chunk 256]
                                    [--epochs 2] [--allowed-mem 1GB] [--executor threads]

The text (the standard library's ``.py`` sources, as in ``char_transformer.py``) is cut into
windows of ``context + 1`` characters: ``X.zarr`` holds each window's first ``context``
character ids (int32), ``y.zarr`` the ``context`` that follow them. The loss is a ``row_loss``,
each window's mean cross-entropy over its positions: one task per row chunk runs the model
forward and backward on its windows (causal attention within each window), so each chunk is
read once a step. The last tenth of the windows is the validation data.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

import pycograd_xp as pg
from pycograd_xp import nn, optim, random

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from char_transformer import Config, Vocabulary, corpus, logits_fn
from char_transformer import init_params as transformer_params


def windows(ids: np.ndarray, context: int) -> tuple[np.ndarray, np.ndarray]:
    """Non-overlapping windows of ``context + 1`` ids: (inputs, the next ids), int32."""
    n = (len(ids) - 1) // context
    x = ids[: n * context].reshape(n, context)
    y = ids[1 : n * context + 1].reshape(n, context)
    return x.astype(np.int32), y.astype(np.int32)


def main(
    chars: int = 400_000,
    context: int = 32,
    chunk: int = 256,
    epochs: int = 2,
    layers: int = 1,
    width: int = 64,
    heads: int = 2,
    lr: float = 1e-2,
    allowed_mem: str = "1GB",
    executor: str = "threads",
    workdir: str | None = None,
    quiet: bool = False,
) -> dict:
    """Write the windows to Zarr, train, validate each epoch; returns the figures."""
    import cubed
    import zarr

    from cubed_plugin import fit, make_spec, row_loss

    say = (lambda *a: None) if quiet else print
    text = corpus(chars)
    vocab = Vocabulary(text)
    x, y = windows(vocab.encode(text), context)
    n_val = max(len(x) // 10, chunk)
    d = workdir or tempfile.mkdtemp(prefix="cubed-tokens-")
    for part, rows in (("train", slice(0, len(x) - n_val)), ("val", slice(len(x) - n_val, None))):
        for name, a in (("X", x[rows]), ("y", y[rows])):
            z = zarr.open_array(
                os.path.join(d, part, f"{name}.zarr"),
                mode="w",
                shape=a.shape,
                chunks=(chunk, context),
                dtype=a.dtype,
            )
            z[...] = a
    spec = make_spec(allowed_mem, work_dir=os.path.join(d, "work"), executor=executor)

    def data(part: str) -> tuple:
        return tuple(
            cubed.from_zarr(os.path.join(d, part, f"{n}.zarr"), spec=spec) for n in ("X", "y")
        )

    X, Y = data("train")
    Xv, Yv = data("val")
    cfg = Config(layers=layers, width=width, heads=heads, context=context)
    params = pg.tree_map(
        lambda a: np.asarray(pg.unwrap(a)),
        transformer_params(random.key(0), cfg, len(vocab), pg.namespace(np)),
    )

    @row_loss
    def per_window(p, ids, nxt):
        xp = ids.__array_namespace__()
        losses = nn.cross_entropy(logits_fn(p, ids, heads), nxt, reduction="none")
        return xp.mean(losses, axis=1)

    def next_char_accuracy(p, ids, nxt):
        xp = ids.__array_namespace__()
        hits = xp.argmax(logits_fn(p, ids, heads), axis=2) == nxt
        return xp.mean(xp.astype(hits, xp.float32), axis=1)

    say(
        f"{X.shape[0]:,} training windows of {context} characters ({len(vocab)} symbols) in "
        f"chunks of {chunk}, {Xv.shape[0]:,} for validation ({d})"
    )
    result = fit(
        per_window,
        params,
        (X, Y),
        optim.adam(lr),
        epochs=epochs,
        batch_rows=chunk,
        spec=spec,
        executor=executor,
        validation=(Xv, Yv),
        metrics={"accuracy": next_char_accuracy},
        progress=False,
        log=None if quiet else (lambda line: print(line) if "validation" in line else None),
    )
    counts = np.bincount(x[: len(x) - n_val].ravel(), minlength=len(vocab)) + 1e-12
    freq = counts / counts.sum()
    unigram = float(-np.sum(freq * np.log(freq)))
    say(
        f"trained {result.step} steps: held-out loss {result.history['val_loss'][0]:.3f} -> "
        f"{result.history['val_loss'][-1]:.3f} (unigram baseline {unigram:.3f}), next-character "
        f"accuracy {result.history['val_accuracy'][-1]:.3f}; largest task "
        f"{result.memory.max_projected() / 1e6:.0f} MB projected of {spec.allowed_mem / 1e6:.0f}"
    )
    return {
        "steps": result.step,
        "val_loss": result.history["val_loss"],
        "val_accuracy": result.history["val_accuracy"],
        "unigram": unigram,
        "max_projected": result.memory.max_projected(),
        "allowed_mem": int(spec.allowed_mem),
    }


if __name__ == "__main__":  # the processes executor's workers import this file: guarded
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chars", type=int, default=400_000, help="characters of text")
    ap.add_argument("--context", type=int, default=32, help="characters per window")
    ap.add_argument("--chunk", type=int, default=256, help="windows per Zarr chunk (a batch)")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--allowed-mem", default="1GB", help="each task's memory budget")
    ap.add_argument("--executor", default="threads", help="threads, processes, dask, ...")
    a = ap.parse_args()
    main(a.chars, a.context, a.chunk, a.epochs, allowed_mem=a.allowed_mem, executor=a.executor)
