"""Workload: one small-CNN training step (issue 11, point 6), float32, one thread.

    python benchmarks/bench_cnn.py

x (64, 1, 28, 28) -> conv 3x3x16 -> relu -> max-pool 2 -> conv 3x3x32 -> relu -> max-pool 2
-> linear 10 -> softmax cross-entropy, ``value_and_grad`` over the weights. Contenders side by
side in one process, interleaved, medians and ratios against hand-written NumPy backprop
(im2col through a sliding-window view and one GEMM per convolution, the same algorithm as the
rows): pycograd_xp with the convolution and pooling rows, pycograd_xp with the composed
convolution it used before (strided slices and a stack, ``conformance/composed_nn.py``), and
PyTorch eager when it is installed. Then the step's peak memory: measured (tracemalloc)
against ``pycograd_xp.memory.project``, and each contender's in a fresh process of its own
(``--memory-one NAME``): the resident-set growth of a step after a warm-up step, with glibc's
default malloc thresholds and with every block of 16 KiB or more mapped on its own (then the
growth is the live peak whoever allocates: PyTorch's buffers are invisible to tracemalloc, so
this is the common scale), and tracemalloc's peak where it sees the allocations (NumPy's).
"""

from __future__ import annotations

import json
import os
import sys

import _common  # pins threads before the contenders load
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import pycograd_xp as pg
from conformance import composed_nn
from pycograd_xp import memory, nn

N = 64
LR = 0.01


def init(dtype=np.float32):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, 1, 28, 28)).astype(dtype)
    y = rng.integers(0, 10, N)
    params = {
        "w1": (rng.standard_normal((16, 1, 3, 3)) * 0.3).astype(dtype),
        "b1": np.zeros(16, dtype),
        "w2": (rng.standard_normal((32, 16, 3, 3)) * 0.1).astype(dtype),
        "b2": np.zeros(32, dtype),
        "w3": (rng.standard_normal((32 * 5 * 5, 10)) * 0.05).astype(dtype),
        "b3": np.zeros(10, dtype),
    }
    return params, x, y


def loss_fn(layers, p, x, y):
    h = layers.max_pool2d(nn.relu(layers.conv2d(x, p["w1"], p["b1"])), 2)
    h = layers.max_pool2d(nn.relu(layers.conv2d(h, p["w2"], p["b2"])), 2)
    logits = nn.linear(h.__array_namespace__().reshape(h, (h.shape[0], -1)), p["w3"], p["b3"])
    return nn.cross_entropy(logits, y)


# -- hand-written NumPy ----------------------------------------------------------------------------
def _cols(x, k):  # (N, C, H, W) -> (N, C*k*k, H'*W'), one copy out of a window view
    v = sliding_window_view(x, (k, k), axis=(2, 3))  # (N, C, H', W', k, k)
    n, c, h, w = v.shape[:4]
    return np.transpose(v, (0, 1, 4, 5, 2, 3)).reshape(n, c * k * k, h * w), (h, w)


def _conv_fwd(x, w, b):
    cols, (h, ww) = _cols(x, w.shape[2])
    y = np.matmul(w.reshape(w.shape[0], -1), cols).reshape(x.shape[0], w.shape[0], h, ww)
    return y + b[None, :, None, None], cols


def _conv_bwd(g, x, w, cols, need_x):
    n, o = g.shape[:2]
    gm = g.reshape(n, o, -1)
    gw = np.matmul(gm, np.swapaxes(cols, 1, 2)).sum(0).reshape(w.shape)
    gb = g.sum(axis=(0, 2, 3))
    if not need_x:
        return None, gw, gb
    k = w.shape[2]
    gp = np.pad(g, ((0, 0), (0, 0), (k - 1, k - 1), (k - 1, k - 1)))
    wt = np.ascontiguousarray(np.flip(np.swapaxes(w, 0, 1), (2, 3)))
    gcols, (h, ww) = _cols(gp, k)
    gx = np.matmul(wt.reshape(wt.shape[0], -1), gcols).reshape(n, w.shape[1], h, ww)
    return gx, gw, gb


def _pool_fwd(x):
    h, w = x.shape[2] // 2 * 2, x.shape[3] // 2 * 2
    a, b = x[:, :, 0:h:2, 0:w:2], x[:, :, 0:h:2, 1:w:2]
    c, d = x[:, :, 1:h:2, 0:w:2], x[:, :, 1:h:2, 1:w:2]
    return np.maximum(np.maximum(a, b), np.maximum(c, d))


def _pool_bwd(g, x, out):  # the first maximum of a window takes it; masks multiply (np.where
    h, w = out.shape[2] * 2, out.shape[3] * 2  # on a random mask mispredicts a branch per element)
    gx = np.zeros_like(x)
    free = np.ones(out.shape, bool)
    for i, j in ((0, 0), (0, 1), (1, 0), (1, 1)):
        sl = (slice(None), slice(None), slice(i, h, 2), slice(j, w, 2))
        hit = free if (i, j) == (1, 1) else (x[sl] == out) & free
        np.multiply(g, hit, out=gx[sl])
        free &= ~hit
    return gx


def numpy_step(p, x, y):
    z1, c1 = _conv_fwd(x, p["w1"], p["b1"])
    a1 = np.maximum(z1, 0)
    m1 = _pool_fwd(a1)
    z2, c2 = _conv_fwd(m1, p["w2"], p["b2"])
    a2 = np.maximum(z2, 0)
    m2 = _pool_fwd(a2)
    f = m2.reshape(N, -1)
    logits = f @ p["w3"] + p["b3"]
    s = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(s)
    prob = e / e.sum(axis=1, keepdims=True)
    loss = -np.log(prob[np.arange(N), y]).mean()
    gl = prob
    gl[np.arange(N), y] -= 1
    gl /= N
    g = {"w3": f.T @ gl, "b3": gl.sum(0)}
    gm2 = (gl @ p["w3"].T).reshape(m2.shape)
    gz2 = _pool_bwd(gm2, a2, m2) * (z2 > 0)
    gm1, g["w2"], g["b2"] = _conv_bwd(gz2, m1, p["w2"], c2, True)
    gz1 = _pool_bwd(gm1, a1, m1) * (z1 > 0)
    _, g["w1"], g["b1"] = _conv_bwd(gz1, x, p["w1"], c1, False)
    return loss, g


def numpy_sgd(p, x, y):
    _, g = numpy_step(p, x, y)
    for k in p:
        p[k] -= LR * g[k]


def sgd_step(p, x, y):  # one function for pycograd_xp.compile: gradients, then SGD in place
    _, grads = pg.value_and_grad(lambda q: loss_fn(nn, q, x, y))(p)
    with pg.no_grad():
        for k, q in p.items():
            q -= LR * grads[k]


def contenders():
    params, x, y = init()
    xp = pg.namespace(np)
    p_x = {k: xp.asarray(v) for k, v in params.items()}
    x_x, y_x = xp.asarray(x), xp.asarray(y)
    rows = pg.value_and_grad(lambda p: loss_fn(nn, p, x_x, y_x))
    composed = pg.value_and_grad(lambda p: loss_fn(composed_nn, p, x_x, y_x))
    p_np = {k: v.copy() for k, v in params.items()}
    p_sgd = {k: xp.asarray(v.copy()) for k, v in params.items()}
    p_c = {k: xp.asarray(v.copy()) for k, v in params.items()}
    compiled = pg.compile(sgd_step)
    out = {
        "numpy by hand": lambda: numpy_step(params, x, y),
        "pycograd_xp (rows)": lambda: rows(p_x),
        "pycograd_xp (composed, old)": lambda: composed(p_x),
        "numpy by hand + SGD": lambda: numpy_sgd(p_np, x, y),
        "pycograd_xp + SGD": lambda: sgd_step(p_sgd, x_x, y_x),
        "pycograd_xp compiled + SGD": lambda: compiled(p_c, x_x, y_x),
    }
    # the compiled step updates as the uncompiled one does
    compiled(p_c, x_x, y_x)
    sgd_step(p_sgd, x_x, y_x)
    for k in params:
        np.testing.assert_allclose(
            pg.unwrap(p_c[k]), pg.unwrap(p_sgd[k]), rtol=1e-5, atol=1e-7, err_msg=k
        )
    # the same loss and gradients
    loss_n, g_n = numpy_step(params, x, y)
    loss_r, g_r = rows(p_x)
    assert abs(float(loss_r) - float(loss_n)) < 1e-4
    for k in params:
        np.testing.assert_allclose(pg.unwrap(g_r[k]), g_n[k], rtol=2e-3, atol=2e-5, err_msg=k)
    torch = _common.optional("torch")
    if torch is not None:
        out["PyTorch eager"] = torch_step_fn(torch, params, x, y)
    return out, (p_x, x_x, y_x)


def torch_step_fn(torch, params, x, y):
    """PyTorch's step: the loss and the gradients, returned as ours are (nothing kept in
    ``.grad``)."""
    torch.set_num_threads(1)
    import torch.nn.functional as tf

    p_t = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    xt, yt = torch.tensor(x), torch.tensor(y)

    def torch_step():
        h = tf.max_pool2d(tf.relu(tf.conv2d(xt, p_t["w1"], p_t["b1"])), 2)
        h = tf.max_pool2d(tf.relu(tf.conv2d(h, p_t["w2"], p_t["b2"])), 2)
        loss = tf.cross_entropy(h.reshape(N, -1) @ p_t["w3"] + p_t["b3"], yt)
        return loss, torch.autograd.grad(loss, list(p_t.values()))

    return torch_step


# -- peak memory, each contender in a process of its own -------------------------------------------
MEMORY_CONTENDERS = ["numpy by hand", "pycograd_xp (rows)", "pycograd_xp compiled", "PyTorch eager"]


def _peak(fn) -> tuple[int | None, int]:
    return _common.step_peak(fn)


def memory_one(name: str) -> tuple[int | None, int]:
    params, x, y = init()
    if name == "numpy by hand":
        return _peak(lambda: numpy_step(params, x, y))
    if name == "PyTorch eager":
        import torch

        return None, _peak(torch_step_fn(torch, params, x, y))[1]  # tracemalloc sees no tensor
    xp = pg.namespace(np)
    p_x = {k: xp.asarray(v) for k, v in params.items()}
    x_x, y_x = xp.asarray(x), xp.asarray(y)
    step = pg.value_and_grad(lambda p: loss_fn(nn, p, x_x, y_x))
    if name == "pycograd_xp compiled":
        step = pg.compile(step)
    return _peak(lambda: step(p_x))


def memory_table() -> dict[str, tuple[int | None, int, int]]:
    """Each contender in fresh processes: with glibc's default malloc thresholds, and with every
    block of 16 KiB or more mapped on its own and unmapped when freed (MALLOC_MMAP_THRESHOLD_
    16384, MALLOC_TRIM_THRESHOLD_ 0), where the growth is the step's live peak whoever
    allocates (NumPy's, PyTorch's and oneDNN's buffers alike): the scale to compare on."""
    names = [
        n
        for n in MEMORY_CONTENDERS
        if n != "PyTorch eager" or _common.optional("torch") is not None
    ]
    found = {}
    for name in names:
        runs = []
        for malloc in ("default", "live"):
            runs.append(_common.in_fresh_process(__file__, ["--memory-one", name], malloc))
        found[name] = (runs[1][0], runs[0][1], runs[1][1])
    print(
        "Step peak memory, each contender in a fresh process, MiB beyond the arguments: "
        "resident-set growth of the second step with glibc's default malloc, and with every "
        "block >= 16 KiB mapped on its own (the live peak); tracemalloc peak"
    )
    print(f"  {'contender':28s} {'RSS default':>11s} {'RSS mapped':>11s} {'tracemalloc':>12s}")
    for name, (traced, default, mapped) in found.items():
        tm = f"{traced / 2**20:12.2f}" if traced is not None else f"{'-':>12s}"
        print(f"  {name:28s} {default / 2**20:11.2f} {mapped / 2**20:11.2f} {tm}")
    if "PyTorch eager" in found:
        print(
            f"  pycograd_xp (rows) / PyTorch eager, live peak (RSS mapped): "
            f"{found['pycograd_xp (rows)'][2] / found['PyTorch eager'][2]:.2f} (goal <= 1)"
        )
    return found


def main() -> None:
    cs, (p_x, x_x, y_x) = contenders()
    med = _common.interleaved(cs, repeats=11, number=5)
    print(
        _common.table(
            f"CNN step, x ({N}, 1, 28, 28) float32, conv 3x3x16, pool 2, conv 3x3x32, "
            "pool 2, linear 10",
            med,
            "numpy by hand",
        )
    )
    print(
        f"  with SGD: pycograd_xp / numpy by hand "
        f"{med['pycograd_xp + SGD'] / med['numpy by hand + SGD']:.2f}, compiled / numpy by hand "
        f"{med['pycograd_xp compiled + SGD'] / med['numpy by hand + SGD']:.2f}"
    )
    if "PyTorch eager" in med:
        print(
            f"  pycograd_xp (rows) / PyTorch eager: "
            f"{med['pycograd_xp (rows)'] / med['PyTorch eager']:.2f}"
        )
    f = lambda p: loss_fn(nn, p, x_x, y_x)
    proj = memory.project(f, p_x)
    meas = memory.measure(f, p_x)
    print(
        f"Step peak memory (rows): measured {meas.peak_bytes / 2**20:.2f} MiB (tracemalloc), "
        f"projected {proj.peak_bytes / 2**20:.2f} MiB "
        f"(traced part {proj.traced_peak_bytes / 2**20:.2f} MiB); "
        f"measured / projected {meas.peak_bytes / proj.peak_bytes:.2f}"
    )
    g = lambda p: loss_fn(composed_nn, p, x_x, y_x)
    meas_c = memory.measure(g, p_x)
    print(f"Step peak memory (composed, old): measured {meas_c.peak_bytes / 2**20:.2f} MiB")
    memory_table()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--memory-one"]:
        print(json.dumps(memory_one(sys.argv[2])))
    else:
        main()
