"""Workload: one transformer-block training step beside PyTorch eager (issue 20), float32, one
thread; then the training step of ``examples/char_transformer.py`` and the small CNN step of
``bench_cnn.py`` the same way.

    python benchmarks/bench_transformer.py [--repeats N] [--no-char] [--no-cnn] [--gemms]
                                           [--json PATH]

The block: x (8, 256, 256) -> pre-LN causal multi-head attention (4 heads of 64) + residual ->
pre-LN MLP 256-1024-256 with gelu (tanh) + residual -> mean(h^2); ``value_and_grad`` over the
parameters (the four projections, the MLP's two weights, the two layer norms' weights).

Time: contenders interleaved in one process, medians of ``--repeats`` rounds, on the wall
clock and in CPU time (the process's: every contender runs on one thread, so CPU time is what
other load on a shared machine cannot inflate; the ratios to PyTorch eager are read from it,
with the quartiles of the per-round ratios beside them):

  pycograd_xp            ``pycograd_xp.nn`` (the fused rows: layer_norm, gelu, attention)
  pycograd_xp compiled   the same step through ``pycograd_xp.compile``
  pycograd_xp composed   the layers composed of standard functions, as before the rows
                         (``conformance/composed_nn.py``)
  PyTorch eager          ``torch.nn.functional``: layer_norm, gelu(approximate="tanh"),
                         scaled_dot_product_attention(is_causal=True)
  PyTorch eager, scores  the same with attention written out (scores, softmax, values), as
                         ``bench_memory_anchors.py`` writes it

``--gemms``: the block step's matrix products alone, each library's, beside PyTorch's whole
step: the six layers' 18 products (forward, input and weight cotangents), NumPy's both per
matrix of the (8, 256, k) stack and folded into one 2-D product (``ops.linear_algebra.
stack_product``), and the causal attention's products as our blocks of 64 query rows take them
(two forward, five backward), against PyTorch's ``mm`` and ``matmul`` on the same operands: the
floor the step's time cannot go below on each library's BLAS. In the same interleaved run, the
steps themselves, and so each step's time outside its products: per round, the step less its
library's products (NumPy's folded layers and attention for ours), the ratio to PyTorch's per
round, its median and quartiles.

The CNN step: ``bench_cnn.py``'s value_and_grad, uncompiled and compiled, beside PyTorch eager.

The character model's step (the example's default config: 2 layers of width 128, 4 heads,
context 64, batch 32, 96 characters) is a whole training step: loss, gradients, clipping of
their global norm and Adam, ``make_step`` uncompiled and compiled beside PyTorch eager
(``clip_grad_norm_``, ``torch.optim.Adam``).

Live peak: each contender's step in a fresh process of its own (``_common.step_peak``, after a
warm-up step), bytes beyond what was live before it: tracemalloc's peak where it sees the
allocations (ours: NumPy's buffers), and the resident-set growth with every malloc block of
16 KiB or more mapped on its own and unmapped when freed (``_common.MALLOC_SETTINGS["live"]``):
the live peak whoever allocates, the common scale (tracemalloc sees no tensor of PyTorch's).
Beside them the growth under the large fixed malloc thresholds the timings run with
(``"fixed"``, over the warm-up too: what the process keeps).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
from typing import Any

import _common
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import pycograd_xp as pg
from conformance import composed_nn
from pycograd_xp import memory, nn

B, L, D, HEADS, HIDDEN = 8, 256, 256, 4, 1024
LIVE = ("pycograd_xp", "pycograd_xp compiled", "PyTorch eager", "PyTorch eager, scores")


def init(dtype=np.float32):
    rng = np.random.default_rng(0)

    def a(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(dtype)

    params = {
        "wq": a(D, D, scale=D**-0.5),
        "wk": a(D, D, scale=D**-0.5),
        "wv": a(D, D, scale=D**-0.5),
        "wo": a(D, D, scale=D**-0.5),
        "w1": a(D, HIDDEN, scale=D**-0.5),
        "w2": a(HIDDEN, D, scale=HIDDEN**-0.5),
        "g1": np.ones(D, dtype),
        "g2": np.ones(D, dtype),
    }
    return params, a(B, L, D)


def block_loss(layers, p, x):
    """The block's loss with ``layers`` (``pycograd_xp.nn`` or ``composed_nn``)."""
    xp = x.__array_namespace__()
    h = x + layers.multi_head_attention(layers.layer_norm(x, p["g1"]), p, HEADS, causal=True)
    h = h + layers.gelu(layers.layer_norm(h, p["g2"]) @ p["w1"]) @ p["w2"]
    return xp.mean(h * h)


def ours(which: str):
    """(step, arguments) of one of our contenders."""
    params, x = init()
    xp = pg.namespace(np)
    p = {k: xp.asarray(v) for k, v in params.items()}
    xa = xp.asarray(x)
    layers = composed_nn if which == "pycograd_xp composed" else nn
    step = pg.value_and_grad(lambda p, x: block_loss(layers, p, x))
    if which == "pycograd_xp compiled":
        step = pg.compile(step)
    return step, (p, xa)


def torch_step(scores: bool):
    """PyTorch's step: the loss and the gradients, returned as ours are."""
    import torch
    import torch.nn.functional as tf

    torch.set_num_threads(1)
    params, x = init()
    p = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    xt = torch.tensor(x)
    hd = D // HEADS
    causal = torch.ones(L, L, dtype=torch.bool).tril()

    def attention(h):
        def split(w):
            return (h @ w).reshape(B, L, HEADS, hd).permute(0, 2, 1, 3)

        q, k, v = split(p["wq"]), split(p["wk"]), split(p["wv"])
        if scores:
            s = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
            o = torch.softmax(s.masked_fill(~causal, float("-inf")), dim=-1) @ v
        else:
            o = tf.scaled_dot_product_attention(q, k, v, is_causal=True)
        return o.permute(0, 2, 1, 3).reshape(B, L, D) @ p["wo"]

    def step():
        h = xt + attention(tf.layer_norm(xt, (D,), p["g1"]))
        h = h + tf.gelu(tf.layer_norm(h, (D,), p["g2"]) @ p["w1"], approximate="tanh") @ p["w2"]
        loss = torch.mean(h * h)
        return loss.detach(), torch.autograd.grad(loss, list(p.values()))

    return step


def check_same(step, args) -> None:
    """Our step gives PyTorch's loss and gradients (float32)."""
    import torch  # noqa: F401

    loss, grads = step(*args)
    t_loss, t_grads = torch_step(False)()
    assert abs(float(loss) - float(t_loss)) <= 1e-4 * abs(float(t_loss)), (loss, t_loss)
    for k, tg in zip(init()[0], t_grads, strict=True):  # PyTorch's in the parameters' order
        g, tg = np.asarray(pg.unwrap(grads[k])), tg.numpy()
        assert np.abs(g - tg).max() <= 2e-3 * np.abs(tg).max(), k


def contenders(torch_too: bool) -> dict:
    out = {}
    for name in ("pycograd_xp", "pycograd_xp compiled", "pycograd_xp composed"):
        step, args = ours(name)
        out[name] = lambda step=step, args=args: step(*args)
    if torch_too:
        check_same(*ours("pycograd_xp"))
        out["PyTorch eager"] = torch_step(False)
        out["PyTorch eager, scores"] = torch_step(True)
    return out


# -- the step's matrix products alone (--gemms) ---------------------------------------------------
def gemm_contenders(torch: Any) -> dict:
    """The block step's products on NumPy (per matrix and folded) and on PyTorch (when given),
    each contender one call of all of them."""
    rng = np.random.default_rng(0)
    linear = []  # (a, b) with a (B, L, k): forward, input cotangent, weight cotangent
    for k, m in [(D, D)] * 4 + [(D, HIDDEN), (HIDDEN, D)]:
        x = rng.standard_normal((B, L, k), dtype=np.float32)
        w = rng.standard_normal((k, m), dtype=np.float32)
        g = rng.standard_normal((B, L, m), dtype=np.float32)
        linear += [(x, w), (g, w.T), (x.reshape(-1, k).T, g.reshape(-1, m))]
    hd, rows = D // HEADS, 64
    q, k_, v, do = (rng.standard_normal((B, HEADS, L, hd), dtype=np.float32) for _ in range(4))
    attn = []  # the causal blocks' products: scores, values; backward: scores, dv, dp, dq, dk
    for i0 in range(0, L, rows):
        e = i0 + rows
        qs, ks, vs, gs = q[:, :, i0:e], k_[:, :, :e], v[:, :, :e], do[:, :, i0:e]
        p = rng.standard_normal((B, HEADS, rows, e), dtype=np.float32)
        attn += [(qs, ks.swapaxes(-1, -2)), (p, vs), (qs, ks.swapaxes(-1, -2))]
        attn += [(p.swapaxes(-1, -2), gs), (gs, vs.swapaxes(-1, -2)), (p, ks)]
        attn += [(p.swapaxes(-1, -2), qs)]

    def run(pairs: list, fold: bool = False):
        def f():
            for a, b in pairs:
                if fold and a.ndim == 3:
                    (a.reshape(-1, a.shape[-1]) @ b).reshape(*a.shape[:-1], b.shape[-1])
                else:
                    a @ b

        return f

    out = {
        "NumPy: layers, per matrix": run(linear),
        "NumPy: layers, folded": run(linear, fold=True),
        "NumPy: attention": run(attn),
    }
    if torch is not None:  # the same operands, strides included
        out["PyTorch: layers"] = run([tuple(map(torch.from_numpy, ab)) for ab in linear])
        out["PyTorch: attention"] = run([tuple(map(torch.from_numpy, ab)) for ab in attn])
    return out


def gemm_split(cs: dict, torch: Any, base: str, repeats: int) -> tuple[list[str], dict]:
    """The products alone beside the whole steps, and each step's time outside its products,
    all in one interleaved run: per round, a step's CPU time less its library's products (ours:
    NumPy's folded layers and attention; PyTorch's: its layers and attention), so a round's
    figures were measured back to back. The ratio is the ratio of the medians over the rounds,
    with its bootstrap quartiles (:func:`median_ratio`): a round's time outside its products is
    a small difference of two large times, so a ratio per round can have a denominator near
    zero (the median of those ratios once read 0.81 where the medians' ratio was 1.19)."""
    gemm = gemm_contenders(torch)
    steps = [n for n in ("pycograd_xp", "pycograd_xp compiled", base) if n in cs]
    wall, cpu = _common.interleaved_rounds({**gemm, **{n: cs[n] for n in steps}}, repeats, 1)
    lines = [
        "The block step's matrix products alone (6 layers x 3, and the causal attention's "
        f"in blocks of 64 rows), beside {base}'s whole step",
        f"  {'contender':24s} {'CPU ms':>8s}  {'/ ' + base:>8s}",
    ]
    med = {n: statistics.median(v) for n, v in cpu.items()}
    for name, t in med.items():
        lines.append(f"  {name:24s} {t * 1e3:8.1f} {t / med[base]:8.2f}")
    floor = {"numpy": ("NumPy: layers, folded", "NumPy: attention")}
    if torch is not None:
        floor["torch"] = ("PyTorch: layers", "PyTorch: attention")
    outside = {}  # name -> per-round CPU seconds outside the products
    for name in steps:
        parts = floor["torch" if name.startswith("PyTorch") else "numpy"]
        rounds = zip(cpu[name], *(cpu[p] for p in parts), strict=True)
        outside[name] = [t - sum(ps) for t, *ps in rounds]
    lines.append(
        "Each step's time outside its matrix products (the step less its library's products, "
        "per round)"
    )
    lines.append(
        f"  {'contender':24s} {'CPU ms':>8s}  {'/ ' + base:>8s}  {'(bootstrap quartiles)':>22s}"
    )
    summary = {}
    for name, v in outside.items():
        m, q1, q3 = median_ratio(v, outside[base])
        summary[name] = {"cpu": statistics.median(v), "ratio": m, "q1": q1, "q3": q3}
        cpu_ms = statistics.median(v) * 1e3
        lines.append(f"  {name:24s} {cpu_ms:8.1f} {m:8.2f}  {q1:14.2f}-{q3:.2f}")
    return lines, {"products": med, "outside": summary}


def median_ratio(v: list[float], b: list[float], draws: int = 2000) -> tuple[float, float, float]:
    """``median(v) / median(b)`` over paired rounds, and the quartiles of that ratio over
    ``draws`` bootstrap resamples of the rounds (pairs kept together; a fixed seed: the same
    figures for the same measurements)."""
    rng = np.random.default_rng(0)
    pairs = np.asarray([v, b], dtype=float)
    picks = rng.integers(0, pairs.shape[1], (draws, pairs.shape[1]))
    resampled = np.median(pairs[:, picks], axis=-1)  # (2, draws)
    ratios = resampled[0] / resampled[1]
    q1, q3 = np.quantile(ratios, [0.25, 0.75])
    return statistics.median(v) / statistics.median(b), float(q1), float(q3)


# -- the character model's training step ---------------------------------------------------------
VOCAB = 96


def _char_module():
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
    import char_transformer

    return char_transformer


def char_batch(cfg):
    rng = np.random.default_rng(3)
    ids = rng.integers(0, VOCAB, (cfg.batch, cfg.context + 1))
    return ids[:, :-1], ids[:, 1:]


def char_ours(compiled: bool):
    """Our training step of the example's model and its arguments."""
    from pycograd_xp import optim, random
    from pycograd_xp.train import make_step

    ct = _char_module()
    cfg = ct.Config()
    xp = pg.namespace(np)
    params = ct.init_params(random.key(0), cfg, VOCAB, xp)
    tx = optim.chain(optim.clip_by_global_norm(cfg.clip), optim.adam(cfg.lr))
    step = make_step(ct.make_loss(cfg.heads), tx)
    if compiled:
        step = pg.compile(step)
    batch = tuple(xp.asarray(a) for a in char_batch(cfg))
    return step, (params, tx.init(params), batch)


def char_torch():
    """The same model, initial weights and update in PyTorch: one training step."""
    import torch
    import torch.nn.functional as tf

    from pycograd_xp import random

    torch.set_num_threads(1)
    ct = _char_module()
    cfg = ct.Config()
    init = ct.init_params(random.key(0), cfg, VOCAB, pg.namespace(np))
    flat, tree = pg.tree_flatten(init)
    leaves = [torch.tensor(np.asarray(pg.unwrap(a)), requires_grad=True) for a in flat]
    p = pg.tree_unflatten(tree, leaves)
    opt = torch.optim.Adam(leaves, lr=cfg.lr)
    x, y = (torch.from_numpy(a) for a in char_batch(cfg))
    d, hd = cfg.width, cfg.width // cfg.heads

    def forward():
        b, t = x.shape
        h = p["tok"][x] + p["pos"][:t]
        for blk in p["blocks"]:
            a = tf.layer_norm(h, (d,), blk["g1"])

            def split(w, a=a):
                return (a @ w).reshape(b, t, cfg.heads, hd).transpose(1, 2)

            q, k, v = split(blk["wq"]), split(blk["wk"]), split(blk["wv"])
            o = tf.scaled_dot_product_attention(q, k, v, is_causal=True)
            h = h + o.transpose(1, 2).reshape(b, t, d) @ blk["wo"]
            m = tf.layer_norm(h, (d,), blk["g2"]) @ blk["w1"] + blk["b1"]
            h = h + tf.gelu(m, approximate="tanh") @ blk["w2"] + blk["b2"]
        logits = tf.layer_norm(h, (d,), p["gf"]) @ p["head"]
        return tf.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = forward()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(leaves, cfg.clip)
        opt.step()
        return loss.detach()

    return step


def char_contenders(torch_too: bool) -> dict:
    out = {}
    for name, compiled in (("pycograd_xp", False), ("pycograd_xp compiled", True)):
        step, args = char_ours(compiled)
        out[name] = lambda step=step, args=args: step(*args)
    if torch_too:
        out["PyTorch eager"] = char_torch()
    return out


# -- the live peak, each contender in a process of its own ---------------------------------------
def memory_one(name: str, which: str) -> list:
    """[tracemalloc peak or None, RSS growth] of one step of ``name`` of workload ``which``
    ("block", "char" or "cnn") in this process."""
    if which == "cnn":
        import bench_cnn

        return list(bench_cnn.memory_one(name))
    rss_over_warmup = os.environ.get("MALLOC_MMAP_THRESHOLD_") == str(2**30)
    if name.startswith("PyTorch"):
        if which == "char":
            fn = char_torch()
        else:
            fn = torch_step(name.endswith("scores"))
        return [None, _common.step_peak(fn, rss_over_warmup)[1]]
    if which == "char":
        step, args = char_ours(name.endswith("compiled"))
    else:
        step, args = ours(name)
    return list(_common.step_peak(lambda: step(*args), rss_over_warmup))


def live_peaks(names: list[str], which: str = "block") -> dict[str, dict]:
    found = {}
    for name in names:
        args = ["--memory-one", name, which]
        live = _common.in_fresh_process(__file__, args, "live")
        fixed = _common.in_fresh_process(__file__, args, "fixed")
        found[name] = {"tracemalloc": live[0], "rss_live": live[1], "rss_fixed": fixed[1]}
    return found


def _mib(n) -> str:
    return "-" if n is None else f"{n / 2**20:8.2f}"


def report(
    title: str, times: dict, peaks: dict, base: str, ours_name: str, time_goal: float
) -> list[str]:
    lines = [
        title,
        f"  {'contender':24s} {'wall ms':>8s} {'CPU ms':>8s}  {'CPU / ' + base:>20s}  "
        f"{'(quartiles)':>14s}",
    ]
    for name, t in times.items():
        lines.append(
            f"  {name:24s} {t['wall'] * 1e3:8.1f} {t['cpu'] * 1e3:8.1f}  "
            f"{t['cpu'] / times[base]['cpu']:20.2f}  {t['q1']:6.2f}-{t['q3']:.2f}"
        )
    lines += [
        "step peak, MiB beyond the arguments",
        f"  {'contender':36s} {'tracemalloc':>11s}  {'RSS live':>9s}  {'RSS fixed':>9s}  "
        f"{'live / ' + base:>22s}",
    ]
    for name, m in peaks.items():
        ratio = m["rss_live"] / peaks[base]["rss_live"] if base in peaks else float("nan")
        lines.append(
            f"  {name:36s} {_mib(m['tracemalloc']):>11s}  {_mib(m['rss_live']):>9s}  "
            f"{_mib(m['rss_fixed']):>9s}  {ratio:22.2f}"
        )
    if base in peaks and ours_name in peaks:
        o, t = peaks[ours_name], peaks[base]
        ratio = times[ours_name]["cpu"] / times[base]["cpu"]
        lines.append(
            f"  {ours_name} / {base}: CPU time {ratio:.2f} "
            f"(quartiles {times[ours_name]['q1']:.2f}-{times[ours_name]['q3']:.2f}; "
            f"goal <= {time_goal}), "
            f"live peak {o['rss_live'] / t['rss_live']:.2f} (RSS), "
            f"{o['tracemalloc'] / t['rss_live']:.2f} (tracemalloc / RSS) (goal <= 1.0)"
        )
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--no-char", action="store_true", help="skip the character model's step")
    ap.add_argument("--no-cnn", action="store_true", help="skip the CNN step")
    ap.add_argument(
        "--gemms", action="store_true", help="also time the block step's matrix products alone"
    )
    ap.add_argument("--json", metavar="PATH", help="also write the measurements as JSON")
    a = ap.parse_args(argv)
    torch = _common.optional("torch")
    cs = contenders(torch is not None)
    base = "PyTorch eager" if torch is not None else "pycograd_xp composed"
    times = _common.interleaved_clocks(cs, repeats=a.repeats, number=1, base=base)
    live = [n for n in LIVE if n in cs] + ["pycograd_xp composed"]
    peaks = live_peaks(live)
    step, args = ours("pycograd_xp")
    loss = lambda p, x: block_loss(nn, p, x)
    proj, meas = memory.project(loss, *args), memory.measure(loss, *args)
    lines = report(
        f"Transformer block step, x ({B}, {L}, {D}) float32, causal, pre-LN, {HEADS} heads, "
        f"MLP {HIDDEN} gelu: medians of {a.repeats}",
        times,
        peaks,
        base,
        "pycograd_xp",
        0.8,
    )
    lines.append(
        f"  memory.project: {proj.traced_peak_bytes / 2**20:.2f} MiB, memory.measure: "
        f"{meas.peak_bytes / 2**20:.2f} MiB (arguments included; measured / projected "
        f"{meas.peak_bytes / proj.traced_peak_bytes:.3f})"
    )
    result = {"transformer": {"times": times, "peaks": peaks}}
    if a.gemms:
        lines_g, result["gemms"] = gemm_split(cs, torch, base, a.repeats)
        lines += lines_g
    if not a.no_char:
        cbase = "PyTorch eager" if torch is not None else "pycograd_xp"
        char_times = _common.interleaved_clocks(
            char_contenders(torch is not None), repeats=a.repeats, number=1, base=cbase
        )
        names = ["pycograd_xp", "pycograd_xp compiled"] + (
            ["PyTorch eager"] if torch is not None else []
        )
        char_peaks = live_peaks(names, "char")
        lines += report(
            "Character model's training step (examples/char_transformer.py's default: 2 layers, "
            f"width 128, 4 heads, context 64, batch 32; clip, Adam): medians of {a.repeats}",
            char_times,
            char_peaks,
            cbase,
            "pycograd_xp",
            0.8,
        )
        result["char"] = {"times": char_times, "peaks": char_peaks}
    if not a.no_cnn:
        import bench_cnn

        ccs, (p_x, x_x, y_x) = bench_cnn.contenders()
        compiled = pg.compile(pg.value_and_grad(lambda p: bench_cnn.loss_fn(nn, p, x_x, y_x)))
        cnn = {"pycograd_xp (rows)": ccs["pycograd_xp (rows)"]}
        cnn["pycograd_xp compiled"] = lambda: compiled(p_x)
        if "PyTorch eager" in ccs:
            cnn["PyTorch eager"] = ccs["PyTorch eager"]
        cbase = "PyTorch eager" if torch is not None else "pycograd_xp (rows)"
        cnn_times = _common.interleaved_clocks(cnn, repeats=a.repeats, number=5, base=cbase)
        names = ["pycograd_xp (rows)", "pycograd_xp compiled"] + (
            ["PyTorch eager"] if torch is not None else []
        )
        cnn_peaks = live_peaks(names, "cnn")
        lines += report(
            f"CNN step (bench_cnn.py), x ({bench_cnn.N}, 1, 28, 28) float32: medians of "
            f"{a.repeats} x 5",
            cnn_times,
            cnn_peaks,
            cbase,
            "pycograd_xp (rows)",
            1.0,
        )
        result["cnn"] = {"times": cnn_times, "peaks": cnn_peaks}
    print("\n".join(lines))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(result, fh, indent=1)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--memory-one"]:
        print(json.dumps(memory_one(sys.argv[2], sys.argv[3])))
    else:
        main()
