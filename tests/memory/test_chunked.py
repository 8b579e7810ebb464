"""Projected memory on Cubed: per-task, in Cubed's own terms, equal to Cubed's plan, forward and
backward told apart, refused before running when over budget; rows per chunk chosen to fit;
and (slow) Cubed's measured task peaks never above the projections."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pycograd_xp as pg
from pycograd_xp import memory

cubed = pytest.importorskip("cubed")
import cubed_plugin as cp  # noqa: E402
from cubed_plugin.memory import stand_in  # noqa: E402

SPEC = cubed.Spec(allowed_mem="400MB", reserved_mem="50MB")


def least_squares(xp):
    return lambda w, X, y: xp.mean((X @ w - y) ** 2)


def logistic(xp):
    def loss(w, X, y):
        z = X @ w
        return xp.mean(xp.log(1.0 + xp.exp(-z)) + (1.0 - y) * z)

    return loss


def mlp(xp):
    def loss(params, X, y):
        W1, b1, W2 = params
        return xp.mean((xp.tanh(X @ W1 + b1) @ W2 - y) ** 2)

    return loss


def _params(which, d):
    xp = pg.namespace(cubed)
    if which == "mlp":
        return [
            xp.asarray(cubed.asarray(np.full((d, 16), 0.01), spec=SPEC)),
            xp.asarray(cubed.asarray(np.zeros(16), spec=SPEC)),
            xp.asarray(cubed.asarray(np.full(16, 0.1), spec=SPEC)),
        ]
    return xp.asarray(cubed.asarray(np.zeros(d), spec=SPEC))


WORKLOADS = {"least_squares": least_squares, "logistic": logistic, "mlp": mlp}


@pytest.mark.parametrize("which", list(WORKLOADS))
def test_per_task_projection_equals_cubeds_plan(which):
    xp = pg.namespace(cubed)
    n, d = 40000, 50
    loss = WORKLOADS[which](xp)
    params = _params(which, d)
    X, y = memory.spec((n, d), chunks=(5000, d)), memory.spec((n,), chunks=(5000,))
    p = memory.project(loss, params, X, y, backend=SPEC)
    # the same graph, built by hand from the same inputs (stored arrays, as the specs stand
    # for), planned as every public compute path plans it (graph_fusion)
    Xc, yc = (xp.asarray(stand_in(s, SPEC)) for s in (X, y))
    with cubed.raise_if_computes():
        v, g = pg.value_and_grad(loss)(params, Xc, yc)
        plan = cp.plan(v, g)
    assert p.max_task_bytes == plan.max_projected_mem
    assert p.intermediate_bytes == plan.total_intermediate_nbytes
    assert p.num_tasks == plan.num_tasks
    assert p.allowed_mem == 400_000_000 and p.reserved_mem == 50_000_000
    phases = {r.phase for r in p.rows}
    assert phases == {"forward", "backward"}
    assert p.forward_max_task_bytes > p.reserved_mem and p.backward_max_task_bytes > p.reserved_mem
    assert "largest task" in str(p) and len(str(p).splitlines()) == 2 + len(p.rows)
    # arrays of namespace(cubed) project the same as specs
    assert memory.project(loss, params, Xc, yc).max_task_bytes == p.max_task_bytes


def test_over_budget_is_refused_before_running():
    xp = pg.namespace(cubed)
    tight = cubed.Spec(allowed_mem="60MB", reserved_mem="50MB")
    w = xp.asarray(cubed.asarray(np.zeros(100), spec=tight))
    p = memory.project(
        least_squares(xp),
        w,
        memory.spec((100000, 100), chunks=(50000, 100)),
        memory.spec((100000,), chunks=(50000,)),
        backend=tight,
    )
    with pytest.raises(
        memory.MemoryLimitError,
        match=r"projected task memory .* of op-\d+ "
        r"\(.* in <lambda> .*\) exceeds the limit 60\.0 MB.*reserved_mem "
        r"50\.0 MB.*plan_rows\(\.\.\., mode='graph'\)",
    ):
        p.check()
    assert p.check("1GB") is p


def test_plan_rows_chooses_the_largest_chunks_that_fit():
    from cubed_plugin.memory import plan_rows

    xp = pg.namespace(cubed)
    small = cubed.Spec(allowed_mem="100MB", reserved_mem="20MB")
    w = xp.asarray(cubed.asarray(np.zeros(100), spec=small))
    loss = logistic(xp)
    rows, p = plan_rows(
        loss,
        w,
        memory.spec((200000, 100)),
        memory.spec((200000,)),
        rows=200000,
        data=(1, 2),
        backend=small,
    )
    assert p.max_task_bytes <= p.allowed_mem
    bigger = int(rows * 1.05) + 1
    over = memory.project(
        loss,
        w,
        memory.spec((200000, 100), chunks=(bigger, 100)),
        memory.spec((200000,), chunks=(bigger,)),
        backend=small,
    )
    assert over.max_task_bytes > over.allowed_mem
    tiny = cubed.Spec(allowed_mem="25MB", reserved_mem="20MB")
    big_w = xp.asarray(cubed.zeros((1000, 1000), spec=tiny))
    with pytest.raises(memory.MemoryLimitError, match="even one row per chunk"):
        plan_rows(
            lambda W, X: xp.sum(X @ W),
            big_w,
            memory.spec((1000, 1000)),
            rows=1000,
            data=(1,),
            backend=tiny,
        )


def test_chunked_specs_need_a_chunked_backend():
    with pytest.raises(ValueError, match="chunked backend"):
        memory.project(lambda x: x, memory.spec((10,), chunks=(5,)))


DRIVER = Path(__file__).with_name("cubed_driver.py")


@pytest.mark.slow
def test_measured_task_peaks_never_exceed_projected(tmp_path):
    """Cubed's processes executor measures each task's peak (workers forked from a server
    that imported the libraries, each task measured on its own, ``measuring_processes``; the
    driver is a small process of its own).
    reserved_mem is 120 MB; a fresh worker measures about 81 MB here."""
    subprocess.run([sys.executable, str(DRIVER), "data", str(tmp_path)], check=True, timeout=300)
    out = subprocess.run(
        [sys.executable, str(DRIVER), "run", str(tmp_path)],
        check=True,
        capture_output=True,
        text=True,
        timeout=900,
    ).stdout
    report = json.loads(out.strip().splitlines()[-1])
    assert report["measured"], "no task reported a measured peak"
    # the driver does no task's work: what it holds beyond its imports when it starts the plan
    # is below the data (96 MB of X; a driver that read X would hold all of it). Its peak RSS
    # itself varies with the allocator's arenas and threads (96 MB to 137 MB on one AMD EPYC,
    # between runs of the same code; 6 MB beyond the imports in a run of 95 MB), so it is not
    # compared with a task's projection
    grown = report["driver_peak"] - report["imports_peak"]
    assert grown < 0.75 * report["data_bytes"], report
    over = {
        op: (m, report["projected"][op])
        for op, m in report["measured"].items()
        if m > report["projected"][op]
    }
    assert over == {}, over
    assert report["max_task_bytes"] == report["plan_max"] <= report["allowed_mem"]
