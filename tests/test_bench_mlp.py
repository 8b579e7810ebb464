"""benchmarks/_mlp.py's NumPy contenders do the work they are named for: hand-written backprop
and reverse mode's own operations without a tape both take pycograd_xp's SGD step (the same
gradients), so their times in bench_mlp.py compare like with like."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import pycograd_xp as pg

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
import _mlp  # (the benchmarks' folder is not a package)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("ties", [False, True])
def test_the_numpy_steps_take_pycograd_xps_step(dtype, ties):
    params, x, y = _mlp.init((9, 7, 5, 4), 6, dtype, seed=3)
    if ties:  # two equal largest logits in every row: the max's rule shares its cotangent
        params[-2][:, 1] = params[-2][:, 0]
        params[-1][:2] = 10.0
    xp = pg.namespace(np)
    _, grads = pg.value_and_grad(lambda p: _mlp.loss_fn(xp, p, xp.asarray(x), xp.asarray(y)))(
        [xp.asarray(p) for p in params]
    )
    want = [p - 0.5 * np.asarray(pg.unwrap(g)) for p, g in zip(params, grads, strict=True)]
    tol = 1e-12 if dtype == np.float64 else 1e-6
    for step in (_mlp.numpy_step, _mlp.numpy_tape_floor_step):
        got = [p.copy() for p in params]
        step(got, x, y, 0.5)
        for a, b in zip(got, want, strict=True):
            assert a.dtype == dtype
            np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
