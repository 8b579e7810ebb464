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


def test_default_malloc_mode_runs_a_contender_in_a_process_of_its_own():
    """``bench_mlp.py --default-malloc`` launches each contender alone, with glibc's default
    thresholds (``PYCOGRAD_BENCH_KEEP_MALLOC``: no re-execution with fixed ones); a launch
    reports its ms per step and page faults per step as JSON."""
    import json
    import subprocess

    script = os.path.join(os.path.dirname(_mlp.__file__), "bench_mlp.py")
    env = {**os.environ, "PYCOGRAD_BENCH_KEEP_MALLOC": "1"}
    env.pop("MALLOC_TRIM_THRESHOLD_", None)
    child = [sys.executable, script, "--child", "pycograd_xp (numpy)", "float32", "2"]
    out = subprocess.run(child, env=env, capture_output=True, text=True, check=True, timeout=300)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["ms"] > 0 and got["faults"] >= 0
