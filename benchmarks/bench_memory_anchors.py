"""Memory projections side by side (issue 17, point 6): pycograd_xp, PyTorch and JAX each
project the peak memory of one ``value_and_grad`` step before it runs, then the step runs and
is measured; the table says how close each projection came and whether it bounds the step.

    python benchmarks/bench_memory_anchors.py [--json PATH] [--libraries pycograd_xp,torch,jax]
                                              [--workloads deep_mlp,...,mlp_1e9]

Workloads: the deep MLP, wide MLP, transformer block and conv net of
``tests/memory/test_workloads.py`` (imported, their shapes and values cast to float32), and a
tanh MLP of about 1e9 parameters given as specs (shapes and dtypes only; projected, never run).
Each library writes the same computation with its own standard functions (PyTorch's
``torch.nn.functional``, ``jax.nn`` and ``jax.lax``); attention is written out (scores, softmax,
values) in all three, as ``pycograd_xp.nn.multi_head_attention`` does. The gradient is taken
with respect to the first argument (the parameters), as ``memory.project`` does.

Projections (bytes live at the step's peak, the arguments included):
  pycograd_xp  ``memory.project(loss, *args).peak_bytes`` (``traced_peak_bytes`` beside
               tracemalloc);
  PyTorch      ``FakeTensorMode`` with ``torch.distributed._tools.mem_tracker.MemTracker``: the
               step on fake tensors, the tracker's peak total (arguments tracked as external);
  JAX          ``jax.jit(value_and_grad(loss)).lower(ShapeDtypeStructs).compile()
               .memory_analysis()``: argument + output + temp - alias bytes.
Projection time: median of three projections in the process, after one untimed projection
(lazy imports, the backend's start-up), each on a fresh function object (JAX retraces and
recompiles).

Measurements, each library's step in a fresh process of its own, float32, one thread:
  tracemalloc  ``memory.measure`` (pycograd_xp over NumPy only: tracemalloc sees NumPy's
               buffers, not PyTorch's or XLA's);
  RSS growth   the median resident-set growth of three steps after a warm-up step, each after
               a pause in which the previous step's buffers are freed
               (``_common.resident_step_peak``; XLA frees them on its own threads), plus the
               arguments' bytes, with every malloc block of 16 KiB or more mapped on its own and
               unmapped when freed (``_common.MALLOC_SETTINGS["live"]``), so that the growth is
               the live peak whoever allocates. Neither PyTorch nor JAX exposes allocator
               statistics on the CPU (``torch.cpu`` has none; ``jax.Device.memory_stats()``
               is None), so this is their measurement. It also holds what the kernels allocate
               for themselves (GEMM packing buffers, oneDNN's and XLA's scratch), which none of
               the three projections counts as buffers of the step.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
import time

import _common  # pins threads and malloc before the contenders load
import numpy as np

_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, _ROOT)
sys.path.insert(0, os.path.join(_ROOT, "tests", "memory"))

import test_workloads  # noqa: E402

import pycograd_xp as pg  # noqa: E402
from pycograd_xp import memory  # noqa: E402

LIBRARIES = ["pycograd_xp", "torch", "jax"]
WORKLOADS = {
    "deep_mlp": ("deep MLP", test_workloads.deep_mlp),
    "wide_mlp": ("wide MLP", test_workloads.wide_mlp),
    "transformer": ("transformer block", test_workloads.transformer_block),
    "small_cnn": ("small CNN", test_workloads.conv_net),
}
# deep_mlp's loss (tanh layers, mean squared error) on about 1e9 parameters: specs only
BIG, BIG_LABEL = "mlp_1e9", "MLP 1e9 params (specs)"
BIG_SIZES, BIG_BATCH = [16000] * 5 + [10], 512
DTYPE = np.float32


# -- the workloads, as pycograd_xp's loss and NumPy (or spec) arguments ---------------------------
def workload(key: str):
    """(pycograd_xp loss, its arguments, the same arguments as NumPy arrays or specs)."""
    if key == BIG:
        loss, _ = test_workloads.deep_mlp()
        pairs = zip(BIG_SIZES[:-1], BIG_SIZES[1:], strict=True)
        args = (
            [(memory.spec((m, n), "float32"), memory.spec(n, "float32")) for m, n in pairs],
            memory.spec((BIG_BATCH, BIG_SIZES[0]), "float32"),
            memory.spec((BIG_BATCH, BIG_SIZES[-1]), "float32"),
        )
        return loss, args, args
    loss, args = WORKLOADS[key][1]()

    def to_numpy(a):
        a = np.asarray(pg.unwrap(a))
        return a.astype(DTYPE) if np.issubdtype(a.dtype, np.floating) else a

    host = pg.tree_map(to_numpy, args)
    return loss, pg.tree_map(test_workloads.XP.asarray, host), host


def _heads(loss) -> int:
    """The head count transformer_block's loss closes over (one source for every library)."""
    cells = dict(zip(loss.__code__.co_freevars, loss.__closure__, strict=True))
    return cells["heads"].cell_contents


def _nbytes(host) -> int:
    return sum(math.prod(a.shape) * np.dtype(a.dtype).itemsize for a in pg.tree_leaves(host))


def _timed(project) -> tuple[int, float]:
    """(projected bytes, median seconds of three projections after an untimed one)."""
    nbytes = project()
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        project()
        times.append(time.perf_counter() - t0)
    return nbytes, statistics.median(times)


# -- PyTorch ---------------------------------------------------------------------------------------
def torch_loss(key: str, heads: int | None):
    import torch
    import torch.nn.functional as tf

    def deep(params, x, y):
        h = x
        for w, b in params[:-1]:
            h = torch.tanh(h @ w + b)
        w, b = params[-1]
        return torch.mean((h @ w + b - y) ** 2)

    def wide(params, x, labels):
        (w1, b1), (w2, b2) = params
        return tf.cross_entropy(tf.relu(x @ w1 + b1) @ w2 + b2, labels)

    def attention(x, p):
        b, length, d = x.shape

        def split(w):
            return (x @ w).reshape(b, length, heads, d // heads).permute(0, 2, 1, 3)

        q, k, v = split(p["wq"]), split(p["wk"]), split(p["wv"])
        a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d // heads), dim=-1) @ v
        return a.permute(0, 2, 1, 3).reshape(b, length, d) @ p["wo"]

    def transformer(p, x):
        d = (x.shape[-1],)
        h = x + attention(tf.layer_norm(x, d, p["g1"]), p)
        h = h + tf.gelu(tf.layer_norm(h, d, p["g2"]) @ p["w1"], approximate="tanh") @ p["w2"]
        return torch.mean(h * h)

    def cnn(p, x, labels):
        h = tf.max_pool2d(tf.relu(tf.conv2d(x, p["c1"], p["b1"])), 2)
        h = tf.max_pool2d(tf.relu(tf.conv2d(h, p["c2"], p["b2"])), 2)
        return tf.cross_entropy(h.reshape(h.shape[0], -1) @ p["w"], labels)

    return {
        "deep_mlp": deep,
        BIG: deep,
        "wide_mlp": wide,
        "transformer": transformer,
        "small_cnn": cnn,
    }[key]


def torch_rows(key: str, pg_loss, host) -> list[dict]:
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.mem_tracker import MemTracker

    torch.set_num_threads(1)
    loss = torch_loss(key, _heads(pg_loss) if key == "transformer" else None)

    def tensors(make):  # the parameters (argument 0) require gradients
        params = pg.tree_map(lambda a: make(a).requires_grad_(True), host[0])
        return (params, *pg.tree_map(make, host[1:]))

    def project() -> int:
        with FakeTensorMode():
            args = tensors(
                lambda a: torch.empty(a.shape, dtype=getattr(torch, np.dtype(a.dtype).name))
            )
            tracker = MemTracker()
            tracker.track_external(*pg.tree_leaves(args))
            with tracker:
                out = loss(*args)
                grads = torch.autograd.grad(out, pg.tree_leaves(args[0]))
                del out, grads
            return tracker.get_tracker_snapshot("peak")[torch.device("cpu")]["Total"]

    projected, seconds = _timed(project)
    row = {
        "library": "PyTorch",
        "method": "FakeTensor + MemTracker",
        "projected": projected,
        "seconds": seconds,
    }
    if key == BIG:
        return [row]
    args = tensors(lambda a: torch.from_numpy(a.copy()))
    params = pg.tree_leaves(args[0])

    def step():
        out = loss(*args)
        return out.detach(), torch.autograd.grad(out, params)

    return [
        dict(
            row, measured=_common.resident_step_peak(step) + _nbytes(host), measured_by="RSS growth"
        )
    ]


# -- JAX -------------------------------------------------------------------------------------------
def jax_loss(key: str, heads: int | None):
    import jax
    import jax.numpy as jnp
    from jax import lax

    def deep(params, x, y):
        h = x
        for w, b in params[:-1]:
            h = jnp.tanh(h @ w + b)
        w, b = params[-1]
        return jnp.mean((h @ w + b - y) ** 2)

    def cross_entropy(logits, labels):
        logp = jax.nn.log_softmax(logits)
        return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=-1))

    def wide(params, x, labels):
        (w1, b1), (w2, b2) = params
        return cross_entropy(jax.nn.relu(x @ w1 + b1) @ w2 + b2, labels)

    def layer_norm(x, g):
        mu, var = jnp.mean(x, -1, keepdims=True), jnp.var(x, -1, keepdims=True)
        return (x - mu) / jnp.sqrt(var + 1e-5) * g

    def attention(x, p):
        b, length, d = x.shape

        def split(w):
            return (x @ w).reshape(b, length, heads, d // heads).transpose(0, 2, 1, 3)

        q, k, v = split(p["wq"]), split(p["wk"]), split(p["wv"])
        a = jax.nn.softmax(q @ k.swapaxes(-1, -2) / math.sqrt(d // heads), axis=-1) @ v
        return a.transpose(0, 2, 1, 3).reshape(b, length, d) @ p["wo"]

    def transformer(p, x):
        h = x + attention(layer_norm(x, p["g1"]), p)
        h = h + jax.nn.gelu(layer_norm(h, p["g2"]) @ p["w1"], approximate=True) @ p["w2"]
        return jnp.mean(h * h)

    def conv(x, w, b):
        y = lax.conv_general_dilated(
            x, w, (1, 1), "VALID", dimension_numbers=("NCHW", "OIHW", "NCHW")
        )
        return y + b[None, :, None, None]

    def pool(x):
        return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

    def cnn(p, x, labels):
        h = pool(jax.nn.relu(conv(x, p["c1"], p["b1"])))
        h = pool(jax.nn.relu(conv(h, p["c2"], p["b2"])))
        return cross_entropy(h.reshape(h.shape[0], -1) @ p["w"], labels)

    return {
        "deep_mlp": deep,
        BIG: deep,
        "wide_mlp": wide,
        "transformer": transformer,
        "small_cnn": cnn,
    }[key]


def jax_rows(key: str, pg_loss, host) -> list[dict]:
    import jax

    loss = jax_loss(key, _heads(pg_loss) if key == "transformer" else None)
    structs = pg.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, np.dtype(a.dtype)), host)
    jax.devices()  # the CPU client starts before the timing

    def project() -> int:
        fresh = jax.jit(jax.value_and_grad(lambda *a: loss(*a)))  # a new trace, a new compile
        m = fresh.lower(*structs).compile().memory_analysis()
        return (
            m.argument_size_in_bytes
            + m.output_size_in_bytes
            + m.temp_size_in_bytes
            - m.alias_size_in_bytes
        )

    projected, seconds = _timed(project)
    row = {
        "library": "JAX",
        "method": "lower/compile memory_analysis",
        "projected": projected,
        "seconds": seconds,
    }
    if key == BIG:
        return [row]
    args = pg.tree_map(jax.numpy.asarray, host)
    step = jax.jit(jax.value_and_grad(loss))
    measured = _common.resident_step_peak(lambda: jax.block_until_ready(step(*args)))
    measured += _nbytes(host)
    return [dict(row, measured=measured, measured_by="RSS growth")]


# -- pycograd_xp -----------------------------------------------------------------------------------
def pycograd_rows(key: str, loss, args, host) -> list[dict]:
    found = {}

    def project() -> int:
        found["p"] = memory.project(loss, *args)
        return found["p"].peak_bytes

    projected, seconds = _timed(project)
    row = {
        "library": "pycograd_xp",
        "method": "memory.project",
        "projected": projected,
        "seconds": seconds,
    }
    if key == BIG:
        return [row]
    traced = memory.measure(loss, *args).peak_bytes
    step = pg.value_and_grad(loss)
    rss = _common.resident_step_peak(lambda: step(*args)) + _nbytes(host)
    return [
        dict(
            row, projected=found["p"].traced_peak_bytes, measured=traced, measured_by="tracemalloc"
        ),
        dict(row, measured=rss, measured_by="RSS growth"),
    ]


def one(key: str, library: str) -> list[dict]:
    """The rows of one library on one workload (run in a fresh process)."""
    loss, args, host = workload(key)
    if library == "pycograd_xp":
        rows = pycograd_rows(key, loss, args, host)
    else:
        rows = {"torch": torch_rows, "jax": jax_rows}[library](key, loss, host)
    return [dict(r, argument_bytes=_nbytes(host)) for r in rows]


# -- the table -------------------------------------------------------------------------------------
def _installed(library: str) -> bool:
    if library == "pycograd_xp" or importlib.util.find_spec(library) is not None:
        return True
    print(f"  ({library} not installed: skipped; pip install -e '.[bench]')")
    return False


def run(keys: list[str], libraries: list[str]) -> list[dict]:
    rows = []
    libraries = [lib for lib in libraries if _installed(lib)]
    for key in keys:
        label = WORKLOADS[key][0] if key in WORKLOADS else BIG_LABEL
        for library in libraries:
            try:
                found = _common.in_fresh_process(__file__, ["--one", key, library], "live")
            except subprocess.CalledProcessError as e:
                tail = (e.stderr or "").strip().splitlines()[-1:] or ["no output"]
                print(f"  ({library} on {label} failed: {tail[0]})")
                continue
            rows += [dict(r, workload=label) for r in found]
    return rows


def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:.2f}"


def table(rows: list[dict]) -> str:
    head = (
        f"{'workload':24s} {'library':12s} {'projected MiB':>13s} {'measured MiB':>12s} "
        f"{'measured by':12s} {'meas/proj':>9s} {'sound':>5s} "
        f"{'projection ms':>13s}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        measured = r.get("measured")
        ratio = "-" if measured is None else f"{measured / r['projected']:.3f}"
        sound = "-" if measured is None else ("yes" if measured <= r["projected"] else "NO")
        lines.append(
            f"{r['workload']:24s} {r['library']:12s} {_mib(r['projected']):>13s} "
            f"{_mib(measured):>12s} {r.get('measured_by', 'not run'):12s} "
            f"{ratio:>9s} {sound:>5s} {r['seconds'] * 1e3:13.1f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--libraries", default=",".join(LIBRARIES))
    ap.add_argument("--workloads", default=",".join([*WORKLOADS, BIG]))
    ap.add_argument("--json", metavar="PATH", help="also write the rows as JSON to PATH")
    a = ap.parse_args(argv)
    keys, libraries = a.workloads.split(","), a.libraries.split(",")
    for k in keys:
        if k not in WORKLOADS and k != BIG:
            ap.error(f"unknown workload {k!r}: choose from {', '.join([*WORKLOADS, BIG])}")
    for lib in libraries:
        if lib not in LIBRARIES:
            ap.error(f"unknown library {lib!r}: choose from {', '.join(LIBRARIES)}")
    n = sum(math.prod(s) for s in zip(BIG_SIZES[:-1], BIG_SIZES[1:], strict=True)) + sum(
        BIG_SIZES[1:]
    )
    print(
        f"Peak memory of one value_and_grad step, float32, one thread ({BIG_LABEL}: "
        f"{n:.3g} parameters, batch {BIG_BATCH}); bytes live at the peak, "
        "arguments included"
    )
    rows = run(keys, libraries)
    print(table(rows))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        print(json.dumps(one(sys.argv[2], sys.argv[3])))
    else:
        main()
