"""Forward mode: ``jvp`` of the 784-512-512-10 tanh MLP (float64, batch 256) with respect to
all its parameters, against its forward pass alone.

    python benchmarks/bench_jvp.py

Contenders side by side in one process, interleaved, medians and ratios against the forward
pass alone (pycograd_xp over NumPy, nothing recorded):

* ``jvp (rules)``: pycograd_xp.jvp as shipped (hand-written rules for the elementwise rows
  and the products, the row itself for linear rows);
* ``jvp (derived)``: the same with every row's JVP derived from its VJP rule by transposition
  (what the rows that have no hand-written rule use), the mechanism the rules were chosen over;
* hand-written NumPy (forward and tangent written out), ``torch.func.jvp`` and JAX eager
  ``jax.jvp`` when installed.

The issue's bound: ``jvp`` at most 3x the forward alone.
"""

from __future__ import annotations

import contextlib

import _common  # pins threads before the contenders load
import _mlp
import numpy as np

import pycograd_xp as pg
from pycograd_xp._forward import transposed_rule
from pycograd_xp.ops import REGISTRY

SIZES = (784, 512, 512, 10)
BATCH = 256


def mlp(m, params, x):
    h = x
    for i in range(0, len(params) - 2, 2):
        h = m.tanh(h @ params[i] + params[i + 1])
    return h @ params[-2] + params[-1]


def numpy_jvp(params, tangents, x):
    h, t = x, None
    for i in range(0, len(params), 2):
        w, b, tw, tb = params[i], params[i + 1], tangents[i], tangents[i + 1]
        z = h @ w + b
        tz = h @ tw + tb if t is None else h @ tw + t @ w + tb
        if i + 2 < len(params):
            h = np.tanh(z)
            t = tz * (1 - h * h)
        else:
            h, t = z, tz
    return h, t


def main() -> None:
    params, x, y = _mlp.init(SIZES, BATCH, np.float64)
    rng = np.random.default_rng(1)
    tangents = [rng.standard_normal(p.shape) for p in params]
    xp = pg.namespace(np)
    P, T, X = (
        tuple(xp.asarray(p) for p in params),
        tuple(xp.asarray(t) for t in tangents),
        xp.asarray(x),
    )

    def forward():
        with pg.no_grad():
            return mlp(xp, P, X)

    def jvp():
        return pg.jvp(lambda *ps: mlp(xp, ps, X), P, T)

    def loss_forward():
        with pg.no_grad():
            return _mlp.loss_fn(xp, P, X, xp.asarray(y))

    def loss_jvp():
        return pg.jvp(lambda *ps: _mlp.loss_fn(xp, ps, X, xp.asarray(y)), P, T)

    # the rules agree with the hand-written tangent
    ref = numpy_jvp(params, tangents, x)[1]
    np.testing.assert_allclose(np.asarray(pg.unwrap(jvp()[1])), ref, rtol=1e-10, atol=1e-10)

    contenders = {
        "forward alone": forward,
        "jvp (rules)": jvp,
        "numpy forward": lambda: mlp(np, params, x),
        "numpy jvp (hand-written)": lambda: numpy_jvp(params, tangents, x),
    }
    try:
        import torch
        import torch.func

        torch.set_num_threads(1)
        pt, tt, xt = (
            [torch.tensor(p) for p in params],
            [torch.tensor(t) for t in tangents],
            torch.tensor(x),
        )
        contenders["torch.func.jvp"] = lambda: torch.func.jvp(
            lambda *ps: mlp(torch, ps, xt), tuple(pt), tuple(tt)
        )
    except ImportError:
        print("  (torch not installed: torch.func.jvp skipped; pip install -e '.[bench]')")
    try:
        import jax
        import jax.numpy as jnp

        pj, tj, xj = (
            [jnp.asarray(p) for p in params],
            [jnp.asarray(t) for t in tangents],
            jnp.asarray(x),
        )
        contenders["jax.jvp (eager)"] = lambda: jax.block_until_ready(
            jax.jvp(lambda *ps: mlp(jnp, ps, xj), tuple(pj), tuple(tj))
        )
    except ImportError:
        print("  (jax not installed: jax.jvp skipped; pip install -e '.[bench]')")
    med = _common.interleaved(contenders, repeats=15, number=3)
    print(
        _common.table(f"jvp of the MLP {SIZES}, tanh, float64, batch {BATCH}", med, "forward alone")
    )

    loss = _common.interleaved(
        {"loss forward alone": loss_forward, "loss jvp (rules)": loss_jvp}, repeats=9, number=3
    )
    print(_common.table("jvp of the MLP's cross-entropy loss", loss, "loss forward alone"))

    # the alternative mechanism: every rule derived from the VJP by transposition
    with contextlib.ExitStack() as swapped:  # the rows are frozen: swap each rule for the run
        for p in REGISTRY.values():
            if p.vjp is not None:
                swapped.enter_context(p.replaced(jvp=transposed_rule(p)))
        np.testing.assert_allclose(np.asarray(pg.unwrap(jvp()[1])), ref, rtol=1e-10, atol=1e-10)
        derived = _common.interleaved(
            {"forward alone": forward, "jvp (derived)": jvp}, repeats=9, number=3
        )
    print(
        _common.table(
            "the same, every rule derived from its VJP by transposition", derived, "forward alone"
        )
    )
    ratio = med["jvp (rules)"] / med["forward alone"]
    print(f"jvp / forward = {ratio:.2f} (bound: 3.00) -> {'ok' if ratio <= 3 else 'OVER'}")


if __name__ == "__main__":
    main()
