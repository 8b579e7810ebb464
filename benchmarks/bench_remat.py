"""Budgeted steps (``memory.within``) against the unconstrained step and sqrt(n) checkpointing.

For a 20-layer MLP, a stack of 8 transformer blocks and the small CNN, at budgets from 30 % to
100 % of the unconstrained step's projected peak: the schedule chosen (or the refusal, naming
the smallest peak any schedule reaches), the measured peak (tracemalloc, never above the budget),
and the step's CPU time against the unconstrained step (the median of paired ratios over
rounds in one process, a second's worth at least). The sqrt(n)
row wraps every round(sqrt(n)) layers in ``pg.remat`` (Chen et al. 2016), its own measured peak
beside it. The CNN's loss is declared a mean over its batch (``memory.batch_mean``): where no
recompute schedule fits (its peak is its first convolution's transients), the step runs in
micro-batches (gradient accumulation); the MLP and the transformer are shown both ways at each
budget: undeclared (recompute only, bit for bit) and "declared" (``within`` takes recomputing
or micro-batches, whichever its time model projects faster; not with ``--quick``).
``--torch`` runs PyTorch's ``activation_memory_budget`` (``torch.compile`` only) on the same
three models at 100, 50 and 30 % (with torch and a working inductor: a C++ compiler), and
PyTorch's eager gradient accumulation on the CNN in as many micro-batches as ``memory.within``
chose at 50 % and 30 %.

    python benchmarks/bench_remat.py            # all three models
    python benchmarks/bench_remat.py --quick    # smaller models (the default test run's size)
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import _common  # noqa: F401  (threads and malloc settings first)
import numpy as np

import pycograd_xp as pg
from pycograd_xp import memory, nn

XP = pg.namespace(np)
FRACTIONS = (1.0, 0.8, 0.6, 0.5, 0.4, 0.3)


def mlp(depth: int = 20, width: int = 256, batch: int = 4096) -> tuple[Callable, Callable, tuple]:
    """(loss, sqrt(n)-checkpointed loss, args): tanh layers, float32."""
    rng = np.random.default_rng(0)
    params = [
        (
            XP.asarray((rng.standard_normal((width, width)) / math.sqrt(width)).astype("f4")),
            XP.asarray(np.zeros(width, "f4")),
        )
        for _ in range(depth)
    ]
    x = XP.asarray(rng.standard_normal((batch, width)).astype("f4"))

    def layer(h: Any, w: Any, b: Any) -> Any:
        return XP.tanh(h @ w + b)

    def loss(params: Any, x: Any) -> Any:
        h = x
        for w, b in params:
            h = layer(h, w, b)
        return XP.mean(h**2)

    k = max(1, round(math.sqrt(depth)))

    def segment(h: Any, *wb: Any) -> Any:
        for i in range(0, len(wb), 2):
            h = layer(h, wb[i], wb[i + 1])
        return h

    seg = pg.remat(segment)

    def sqrt_n(params: Any, x: Any) -> Any:
        h = x
        for i in range(0, len(params), k):
            h = seg(h, *[a for wb in params[i : i + k] for a in wb])
        return XP.mean(h**2)

    return loss, sqrt_n, (params, x)


def transformer(blocks: int = 8, d: int = 128, t: int = 256, batch: int = 8) -> tuple:
    """Pre-LN blocks: causal attention (4 heads) and a 4d GELU MLP, float32."""
    rng = np.random.default_rng(1)

    def w(*shape: int) -> Any:
        return XP.asarray((rng.standard_normal(shape) / math.sqrt(shape[0])).astype("f4"))

    params = [
        {"qkv": w(d, 3 * d), "o": w(d, d), "w1": w(d, 4 * d), "w2": w(4 * d, d)}
        for _ in range(blocks)
    ]
    x = XP.asarray(rng.standard_normal((batch, t, d)).astype("f4"))
    heads = 4

    def block(x: Any, p: dict) -> Any:
        b = x.shape[0]  # (the rows of a micro-batch, or the batch's)
        h = nn.layer_norm(x) @ p["qkv"]
        q, k, v = (
            XP.permute_dims(
                XP.reshape(h[..., i * d : (i + 1) * d], (b, t, heads, -1)), (0, 2, 1, 3)
            )
            for i in range(3)
        )
        a = nn.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + XP.reshape(XP.permute_dims(a, (0, 2, 1, 3)), (b, t, d)) @ p["o"]
        return x + nn.gelu(nn.layer_norm(x) @ p["w1"]) @ p["w2"]

    def loss(params: Any, x: Any) -> Any:
        for p in params:
            x = block(x, p)
        return XP.mean(x**2)

    k = max(1, round(math.sqrt(blocks)))

    def segment(x: Any, ps: list) -> Any:
        for p in ps:
            x = block(x, p)
        return x

    seg = pg.remat(segment)

    def sqrt_n(params: Any, x: Any) -> Any:
        for i in range(0, len(params), k):
            x = seg(x, params[i : i + k])
        return XP.mean(x**2)

    return loss, sqrt_n, (params, x)


def cnn(batch: int = 64) -> tuple:
    """conv8-pool-conv16-pool-linear10 with cross-entropy (the memory anchors' CNN)."""
    rng = np.random.default_rng(2)
    p = {
        "c1": XP.asarray((rng.standard_normal((8, 1, 3, 3)) / 3).astype("f4")),
        "c2": XP.asarray((rng.standard_normal((16, 8, 3, 3)) / 8).astype("f4")),
        "w": XP.asarray((rng.standard_normal((16 * 7 * 7, 10)) / 28).astype("f4")),
    }
    x = XP.asarray(rng.standard_normal((batch, 1, 28, 28)).astype("f4"))
    y = XP.asarray(rng.integers(0, 10, batch))

    def features(h: Any, c1: Any, c2: Any) -> Any:
        h = nn.max_pool2d(nn.relu(nn.conv2d(h, c1, padding=1)), 2)
        return nn.max_pool2d(nn.relu(nn.conv2d(h, c2, padding=1)), 2)

    def loss(p: Any, x: Any, y: Any) -> Any:
        h = features(x, p["c1"], p["c2"])
        return nn.cross_entropy(XP.reshape(h, (h.shape[0], -1)) @ p["w"], y)

    seg = pg.remat(features)

    def sqrt_n(p: Any, x: Any, y: Any) -> Any:
        h = seg(x, p["c1"], p["c2"])
        return nn.cross_entropy(XP.reshape(h, (h.shape[0], -1)) @ p["w"], y)

    return loss, sqrt_n, (p, x, y)


def _time(contenders: dict[str, Callable[[], Any]], repeats: int) -> dict[str, float]:
    """Each contender's CPU time over the first's: the median over rounds of each round's ratio
    (the contenders back to back, their order reversed every other round, so that a shared
    machine's swings fall on all alike). At least ``repeats`` rounds, more for a fast step (a
    second of the first contender's time at least)."""
    for f in contenders.values():
        f()
    first = next(iter(contenders.values()))
    t0 = time.process_time()
    first()
    rounds = max(repeats, min(200, int(1.0 / max(time.process_time() - t0, 1e-4))))
    ratios: dict[str, list[float]] = {k: [] for k in contenders}
    names = list(contenders)
    for r in range(rounds):
        took = {}
        for name in names if r % 2 == 0 else names[::-1]:
            t0 = time.process_time()
            contenders[name]()
            took[name] = time.process_time() - t0
        for name in names:
            ratios[name].append(took[name] / max(took[names[0]], 1e-9))
    return {k: statistics.median(v) for k, v in ratios.items()}


def run(
    name: str,
    loss: Callable,
    sqrt_n: Callable,
    args: tuple,
    repeats: int,
    batch_mean: bool | str = False,
) -> list[str]:
    """The model's rows: each budget fitted (``batch_mean``: the loss declared a mean over its
    batch, micro-batches allowed; ``"both"``: a row undeclared, recompute only, and a declared
    row, at each budget)."""
    full = memory.project(loss, *args)
    measured_full = memory.measure(loss, *args).peak_bytes
    measured_sqrt = memory.measure(sqrt_n, *args).peak_bytes
    steps: dict[str, Callable[[], Any]] = {
        "unconstrained": lambda: pg.grad(loss)(*args),
        "sqrt(n) remat": lambda: pg.grad(sqrt_n)(*args),
    }
    rows = []
    declared = memory.batch_mean(loss)
    for frac in FRACTIONS:
        budget = int(frac * full.peak_bytes)
        tries = [("", declared if batch_mean is True else loss)]
        if batch_mean == "both":
            tries.append((" declared", declared))
        for tag, f0 in tries:
            t0 = time.perf_counter()
            try:
                f = memory.within(f0, budget, *args)
            except memory.MemoryLimitError as e:
                why = str(e).split(": ", 2)[-1][:90]
                rows.append((frac, tag, budget, None, why, time.perf_counter() - t0))
                continue
            s = f.schedule(*args)
            m = memory.measure(f, *args).peak_bytes
            steps[f"{frac:.0%}{tag}"] = lambda f=f: pg.grad(f)(*args)
            rows.append((frac, tag, budget, (s, m), "", time.perf_counter() - t0))
    times = _time(steps, repeats)
    base = times["unconstrained"]
    mb = 1e-6
    out = [
        f"## {name}: unconstrained peak projected {full.peak_bytes * mb:.1f} MB, measured "
        f"{measured_full * mb:.1f} MB; sqrt(n) remat measured {measured_sqrt * mb:.1f} MB, "
        f"time {times['sqrt(n) remat'] / base:.2f}x",
        "",
        "| budget | projected | measured | <= budget | micro-batches | recomputed | "
        "extra forward | time | choose (s) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for frac, tag, budget, got, why, took in rows:
        head = f"| {frac:.0%} ({budget * mb:.1f} MB){tag} |"
        if got is None:
            out.append(f"{head} refused | | | | | | | {took:.2f} | <!-- {why} -->")
            continue
        s, m = got
        out.append(
            f"{head} {s.peak_bytes * mb:.1f} MB | {m * mb:.1f} MB | "
            f"{'yes' if m <= budget else '**NO**'} | "
            f"{s.micro_batches.replace(' micro-batches of ', ' x ') or '1'} | "
            f"{len(s.drop)}/{len(s.nodes)}{' each' if s.slices > 1 else ''} | "
            f"{s.extra_forward:.0%} | {times[f'{frac:.0%}{tag}'] / base:.2f}x | {took:.2f} |"
        )
    refusals = [why for *_, got, why, _ in rows if got is None]
    if refusals:
        out += ["", f"refused: {refusals[0]}"]
    return out


def cnn_micro_batches(fractions: tuple[float, ...] = (0.5, 0.3)) -> dict[float, int]:
    """How many micro-batches ``memory.within`` runs the CNN in at these fractions of its
    unconstrained peak (the peer row's count)."""
    loss, _, args = cnn()
    full = memory.project(loss, *args).peak_bytes
    out = {}
    for frac in fractions:
        try:
            declared = memory.batch_mean(loss)
            s = memory.within(declared, int(frac * full), *args).schedule(*args)
        except memory.MemoryLimitError:
            continue
        out[frac] = s.slices
    return out


def torch_models(
    repeats: int = 5,
    fractions: tuple[float, ...] = (1.0, 0.5, 0.3),
    micro: dict[float, int] | None = None,
    only: str = "",
) -> list[str]:
    """PyTorch's answer for the three models: ``torch._functorch.config.
    activation_memory_budget`` (a fraction, ``torch.compile`` only), each step's peak from the
    profiler's allocation events (allocations during the step: the arguments not included) and
    its CPU time against PyTorch's eager step of the same model; for the CNN, its eager gradient
    accumulation in ``micro[frac]`` micro-batches (the count ``memory.within`` chose at that
    fraction of the budget)."""
    import torch
    import torch._functorch.config as functorch_config
    import torch.nn.functional as tf
    from torch.profiler import ProfilerActivity, profile

    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)

    def w(*shape: int) -> Any:
        return (torch.randn(*shape, generator=g) / math.sqrt(shape[0])).requires_grad_(True)

    def mlp_model() -> tuple:
        ws = [w(256, 256) for _ in range(20)]
        bs = [torch.zeros(256, requires_grad=True) for _ in range(20)]

        def loss(x: Any) -> Any:
            h = x
            for a, b in zip(ws, bs, strict=True):
                h = torch.tanh(h @ a + b)
            return (h**2).mean()

        return loss, ws + bs, (torch.randn(4096, 256, generator=g),)

    def transformer_model(blocks: int = 8, d: int = 128, t: int = 256, batch: int = 8) -> tuple:
        ps = [
            {"qkv": w(d, 3 * d), "o": w(d, d), "w1": w(d, 4 * d), "w2": w(4 * d, d)}
            for _ in range(blocks)
        ]

        def block(x: Any, p: dict) -> Any:
            q, k, v = (
                part.reshape(batch, t, 4, -1).permute(0, 2, 1, 3)
                for part in (tf.layer_norm(x, (d,)) @ p["qkv"]).split(d, dim=-1)
            )
            a = tf.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + a.permute(0, 2, 1, 3).reshape(batch, t, d) @ p["o"]
            return x + tf.gelu(tf.layer_norm(x, (d,)) @ p["w1"], approximate="tanh") @ p["w2"]

        def loss(x: Any) -> Any:
            for p in ps:
                x = block(x, p)
            return (x**2).mean()

        params = [a for p in ps for a in p.values()]
        return loss, params, (torch.randn(batch, t, d, generator=g),)

    def cnn_model(batch: int = 64) -> tuple:
        c1, c2, fc = w(8, 1, 3, 3), w(16, 8, 3, 3), w(16 * 7 * 7, 10)
        y = torch.randint(0, 10, (batch,), generator=g)

        def loss(x: Any, y: Any) -> Any:
            h = tf.max_pool2d(torch.relu(tf.conv2d(x, c1, padding=1)), 2)
            h = tf.max_pool2d(torch.relu(tf.conv2d(h, c2, padding=1)), 2)
            return tf.cross_entropy(h.reshape(h.shape[0], -1) @ fc, y)

        return loss, [c1, c2, fc], (torch.randn(batch, 1, 28, 28, generator=g), y)

    def accumulated(loss: Callable, params: list, args: tuple, k: int) -> Callable[[], Any]:
        """PyTorch's eager gradient accumulation: ``k`` micro-batches (``torch.chunk``'s rows,
        as ``memory.within`` evens them), each loss weighted by its rows, gradients added."""
        n = args[0].shape[0]

        def run() -> Any:
            total = None
            for part in zip(*(a.chunk(k) for a in args), strict=True):
                grads = torch.autograd.grad(loss(*part) * (part[0].shape[0] / n), params)
                if total is None:
                    total = list(grads)
                else:
                    for t, gr in zip(total, grads, strict=True):
                        t.add_(gr)
                del grads
            return total

        return run

    def peak(run: Callable[[], Any]) -> int:
        run()
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            out = run()
            del out
        events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
        live = top = 0
        for e in sorted(events, key=lambda e: e.start_ns()):
            live += e.nbytes()
            top = max(top, live)
        return top

    out = [
        f"## PyTorch {torch.__version__}: activation_memory_budget under torch.compile (peak: "
        "the profiler's allocation events during the step, arguments not included; time: CPU "
        "time against PyTorch's eager step)",
        "",
        "| model | step | peak | time |",
        "|---|---|---|---|",
    ]
    models = {
        "MLP 20x256, batch 4096": mlp_model,
        "transformer 8 blocks d=128 T=256 batch 8": transformer_model,
        "CNN batch 64": cnn_model,
    }
    for name, make in models.items():
        if only.lower() not in name.lower():
            continue
        loss, params, args = make()

        def step(f: Callable, params: list = params, args: tuple = args) -> Callable[[], Any]:
            return lambda: torch.autograd.grad(f(*args), params)

        runs = {"eager": step(loss)}
        for frac, k in (micro or {}).items() if name.startswith("CNN") else ():
            runs[f"eager, {k} micro-batches (as memory.within at {frac:.0%})"] = accumulated(
                loss, params, args, k
            )
        for frac in fractions:
            functorch_config.activation_memory_budget = frac
            torch._dynamo.reset()
            runs[f"compile, budget {frac}"] = step(torch.compile(loss))
            runs[f"compile, budget {frac}"]()  # compiled here, under this budget
        peaks = {k: peak(r) for k, r in runs.items()}
        times = _time(runs, repeats)
        rows = [
            f"| {name} | {k} | {peaks[k] * 1e-6:.1f} MB | {times[k] / times['eager']:.2f}x |"
            for k in runs
        ]
        print("\n".join(rows), file=sys.stderr, flush=True)  # (progress: compiling is slow)
        out += rows
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller models, fewer repeats")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument(
        "--torch", action="store_true", help="PyTorch's activation_memory_budget only (torch)"
    )
    ap.add_argument("--only", default="", help="the models whose name contains this (cnn)")
    a = ap.parse_args()
    if a.torch:
        micro = cnn_micro_batches() if a.only.lower() in "cnn batch 64" else {}
        print("\n".join(torch_models(repeats=a.repeats, micro=micro, only=a.only)))
        return
    if a.quick:
        models = {
            "MLP 20x128, batch 512": mlp(20, 128, 512),
            "transformer 4 blocks d=64 T=64": transformer(4, 64, 64, 4),
            "CNN batch 16": cnn(16),
        }
        repeats = 3
    else:
        models = {
            "MLP 20x256, batch 4096, float32": mlp(),
            "transformer 8 blocks d=128 T=256 batch 8": transformer(),
            "CNN batch 64": cnn(),
        }
        repeats = a.repeats
    for name, (loss, sqrt_n, args) in models.items():
        if a.only.lower() not in name.lower():
            continue
        # each loss is a mean over its batch's rows: the CNN (whose peak no recompute lowers)
        # declared so, the others both ways (not in --quick, the test suite's run: each
        # declared row projects its micro-batches, tens of projections)
        declared = True if name.startswith("CNN") else (not a.quick and "both")
        print("\n".join(run(name, loss, sqrt_n, args, repeats, batch_mean=declared)))
        print()


if __name__ == "__main__":
    main()
