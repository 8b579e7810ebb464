"""A decoder-only character-level transformer trained on the Python standard library's own
``.py`` sources (text on every machine that runs Python, no download).

    python examples/char_transformer.py [--steps 600] [--layers 2] [--width 128] [--heads 4]
                                        [--context 64] [--batch 32] [--lr 3e-3]

Learned token and position embeddings, pre-LN blocks of causal multi-head attention and an MLP
with GELU, a final layer norm and a linear head; float32. One training step (``make_step``:
loss, gradients, the update) goes through ``pycograd_xp.compile`` (traced once, then replayed),
with Adam after clipping the gradients' global norm. The fused rows of ``pycograd_xp.nn`` keep
the step's memory small: attention is flash-style (each row's log-sum-exp, never a score
matrix for the whole batch), layer norm and GELU save their inputs only, cross-entropy no
log-probabilities.

It prints the held-out loss against the unigram baseline (the entropy of the characters'
frequencies), tokens per second, a sample, and the step's peak memory as
``pycograd_xp.memory`` projects it beside what tracemalloc measures.
"""

from __future__ import annotations

import argparse
import math
import os
import sysconfig
import time
from dataclasses import dataclass

import numpy as np

import pycograd_xp as pg
from pycograd_xp import memory, nn, optim, random
from pycograd_xp.train import make_step


@dataclass
class Config:
    steps: int = 600
    layers: int = 2
    width: int = 128
    heads: int = 4
    context: int = 64
    batch: int = 32
    lr: float = 3e-3
    clip: float = 1.0
    corpus_bytes: int = 2_000_000
    eval_every: int = 100
    eval_batches: int = 8
    sample_chars: int = 300
    seed: int = 0


# -- the text ------------------------------------------------------------------------------------
def corpus(limit: int) -> str:
    """The standard library's ``.py`` files in a fixed order, up to ``limit`` characters."""
    root = sysconfig.get_paths()["stdlib"]
    parts, total = [], 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in ("site-packages", "test", "tests"))
        for name in sorted(filenames):
            if not name.endswith(".py"):
                continue
            try:
                with open(os.path.join(dirpath, name), encoding="utf-8") as fh:
                    text = fh.read()
            except (OSError, UnicodeDecodeError):
                continue
            parts.append(text)
            total += len(text)
            if total >= limit:
                return "".join(parts)[:limit]
    return "".join(parts)[:limit]


class Vocabulary:
    """The characters of the text (printable ASCII, newline and tab); any other is ``?``."""

    def __init__(self, text: str) -> None:
        keep = {c for c in text if c.isascii() and (c.isprintable() or c in "\n\t")}
        self.chars = sorted(keep | {"?"})
        self.index = {c: i for i, c in enumerate(self.chars)}

    def encode(self, text: str) -> np.ndarray:
        unknown = self.index["?"]
        return np.fromiter((self.index.get(c, unknown) for c in text), np.int64, len(text))

    def decode(self, ids) -> str:
        return "".join(self.chars[int(i)] for i in ids)

    def __len__(self) -> int:
        return len(self.chars)


def unigram_loss(train: np.ndarray, held_out: np.ndarray, vocab: int) -> float:
    """The held-out cross-entropy (nats) of the training text's character frequencies."""
    counts = np.bincount(train, minlength=vocab) + 1.0  # add-one: no character has p = 0
    logp = np.log(counts / counts.sum())
    return float(-logp[held_out].mean())


def windows(data: np.ndarray, rng: np.random.Generator, batch: int, context: int):
    """``batch`` random windows of ``context`` characters and the characters that follow."""
    starts = rng.integers(0, len(data) - context - 1, batch)
    x = np.stack([data[s : s + context] for s in starts])
    y = np.stack([data[s + 1 : s + context + 1] for s in starts])
    return x, y


# -- the model ------------------------------------------------------------------------------------
def init_params(key, cfg: Config, vocab: int, xp) -> dict:
    d, f32 = cfg.width, xp.float32
    keys = iter(random.split(key, 4 + 6 * cfg.layers))

    def normal(shape, std):
        return nn.normal(next(keys), shape, std, xp=xp, dtype=f32)

    def ones():
        return xp.ones(d, dtype=f32)

    blocks = [
        {
            "g1": ones(),
            "wq": normal((d, d), d**-0.5),
            "wk": normal((d, d), d**-0.5),
            "wv": normal((d, d), d**-0.5),
            "wo": normal((d, d), (2 * cfg.layers * d) ** -0.5),
            "g2": ones(),
            "w1": normal((d, 4 * d), d**-0.5),
            "b1": xp.zeros(4 * d, dtype=f32),
            "w2": normal((4 * d, d), (2 * cfg.layers * 4 * d) ** -0.5),
            "b2": xp.zeros(d, dtype=f32),
        }
        for _ in range(cfg.layers)
    ]
    return {
        "tok": normal((vocab, d), 0.02),
        "pos": normal((cfg.context, d), 0.02),
        "blocks": blocks,
        "gf": ones(),
        "head": normal((d, vocab), d**-0.5),
    }


def logits_fn(params: dict, ids, heads: int):
    """(B, T) character ids -> (B, T, vocabulary) logits, each position seeing only its past."""
    t = ids.shape[1]
    h = nn.embedding(ids, params["tok"]) + params["pos"][:t, :]
    for blk in params["blocks"]:
        h = h + nn.multi_head_attention(nn.layer_norm(h, blk["g1"]), blk, heads, causal=True)
        h = h + nn.linear(
            nn.gelu(nn.linear(nn.layer_norm(h, blk["g2"]), blk["w1"], blk["b1"])),
            blk["w2"],
            blk["b2"],
        )
    return nn.layer_norm(h, params["gf"]) @ params["head"]


def make_loss(heads: int):
    def loss_fn(params, x, y):
        return nn.cross_entropy(logits_fn(params, x, heads), y)

    return loss_fn


def sample(params, vocab: Vocabulary, cfg: Config, xp, prompt: str, n: int, seed: int) -> str:
    """``n`` characters after ``prompt``, each drawn from the softmax of the model's logits
    (temperature 0.8) over the last ``context`` characters."""
    rng = np.random.default_rng(seed)
    ids = list(vocab.encode(prompt))
    with pg.no_grad():
        for _ in range(n):
            window = xp.asarray(np.asarray(ids[-cfg.context :])[None, :])
            last = logits_fn(params, window, cfg.heads)[0, -1, :] / 0.8
            p = np.asarray(pg.unwrap(nn.softmax(last)), dtype=np.float64)
            ids.append(int(rng.choice(len(p), p=p / p.sum())))
    return vocab.decode(ids[len(prompt) :])


def held_out_loss(params, data, cfg: Config, xp, loss_fn, rng) -> float:
    with pg.no_grad():
        losses = [
            float(
                loss_fn(
                    params, *(xp.asarray(a) for a in windows(data, rng, cfg.batch, cfg.context))
                )
            )
            for _ in range(cfg.eval_batches)
        ]
    return float(np.mean(losses))


def main(cfg: Config | None = None, quiet: bool = False) -> dict:
    cfg = cfg or Config()
    say = (lambda *a: None) if quiet else print
    xp = pg.namespace(np)
    text = corpus(cfg.corpus_bytes)
    vocab = Vocabulary(text)
    data = vocab.encode(text)
    cut = int(0.9 * len(data))
    train, held = data[:cut], data[cut:]
    baseline = unigram_loss(train, held, len(vocab))
    say(
        f"corpus: {len(text):,} characters of the standard library's .py files, vocabulary "
        f"{len(vocab)}; held-out unigram baseline {baseline:.3f} nats"
    )
    params = init_params(random.key(cfg.seed), cfg, len(vocab), xp)
    n_params = sum(math.prod(p.shape) for p in pg.tree_leaves(params))
    tx = optim.chain(optim.clip_by_global_norm(cfg.clip), optim.adam(cfg.lr))
    opt_state = tx.init(params)
    loss_fn = make_loss(cfg.heads)
    step = make_step(loss_fn, tx)
    compiled = pg.compile(step)
    rng, eval_rng = np.random.default_rng(cfg.seed + 1), np.random.default_rng(cfg.seed + 2)
    say(
        f"model: {cfg.layers} layers, width {cfg.width}, {cfg.heads} heads, context "
        f"{cfg.context}, {n_params:,} parameters; batch {cfg.batch} x {cfg.context} tokens"
    )
    history, seconds, tokens = [], 0.0, 0
    for i in range(1, cfg.steps + 1):
        batch = tuple(xp.asarray(a) for a in windows(train, rng, cfg.batch, cfg.context))
        t0 = time.perf_counter()
        params, opt_state, metrics = compiled(params, opt_state, batch)
        loss = float(metrics["loss"])
        if i > 1:  # the first call traces
            seconds += time.perf_counter() - t0
            tokens += cfg.batch * cfg.context
        if i % cfg.eval_every == 0 or i == cfg.steps:
            held_loss = held_out_loss(params, held, cfg, xp, loss_fn, eval_rng)
            history.append((i, loss, held_loss))
            say(f"step {i:5d}  train loss {loss:.3f}  held-out loss {held_loss:.3f}")
    tokens_per_s = tokens / seconds if seconds else float("nan")
    final = history[-1][2]
    say(
        f"held-out loss {final:.3f} nats against the unigram baseline {baseline:.3f} "
        f"({final / baseline:.2f}x); {tokens_per_s:,.0f} tokens/s (compiled step, Adam, clip)"
    )
    text_out = sample(params, vocab, cfg, xp, "def ", cfg.sample_chars, cfg.seed)
    say("sample:\n" + "def " + text_out)
    batch = tuple(xp.asarray(a) for a in windows(train, rng, cfg.batch, cfg.context))
    projected = memory.project(step, params, opt_state, batch)
    measured = memory.measure(step, params, opt_state, batch)
    ratio = measured.peak_bytes / projected.traced_peak_bytes
    say(
        f"step peak memory: projected {projected.traced_peak_bytes / 2**20:.2f} MiB, measured "
        f"{measured.peak_bytes / 2**20:.2f} MiB (tracemalloc; measured / projected {ratio:.3f})"
    )
    return {
        "baseline": baseline,
        "held_out_loss": final,
        "history": history,
        "tokens_per_s": tokens_per_s,
        "sample": text_out,
        "projected_bytes": projected.traced_peak_bytes,
        "measured_bytes": measured.peak_bytes,
        "compiled_traces": len(compiled.traces),
    }


if __name__ == "__main__":
    ap = argparse.ArgumentParser(
        description=" ".join(__doc__.split("\n\n")[0].split()),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    defaults = Config()
    for name, what in (
        ("steps", "training steps"),
        ("layers", "transformer blocks"),
        ("width", "model width (embedding size)"),
        ("heads", "attention heads per block (must divide --width)"),
        ("context", "characters per training sequence"),
        ("batch", "sequences per step"),
    ):
        ap.add_argument(f"--{name}", type=int, default=getattr(defaults, name), help=what)
    ap.add_argument("--lr", type=float, default=defaults.lr, help="Adam's learning rate")
    a = ap.parse_args()
    for name in ("steps", "layers", "width", "heads", "context", "batch"):
        if getattr(a, name) < 1:
            ap.error(f"--{name} must be at least 1, got {getattr(a, name)}")
    if a.width % a.heads:
        ap.error(f"--heads {a.heads} does not divide --width {a.width}; pick a divisor")
    if not a.lr > 0:
        ap.error(f"--lr must be positive, got {a.lr}")
    main(Config(**vars(a)))
