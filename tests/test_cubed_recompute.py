"""One-pass tasks whose chunk's step does not fit their budget whole, fitted by recomputing
(issue 36): the step runs under a memory schedule chosen for what the task has left after its
reads, or in row slices, whichever the cost model (``cubed_plugin._chunk_plan``) projects
faster; the same values as the whole chunk's step; measured task peaks within the projection;
a clear error when neither fits."""

from __future__ import annotations

import math

import numpy as np
import pytest

cubed = pytest.importorskip("cubed")

from cubed_plugin import _baseline, row_loss  # noqa: E402
from cubed_plugin import _chunk_plan as chunk_plan  # noqa: E402
from cubed_plugin._baseline import headroom  # noqa: E402
from cubed_plugin._chunk_plan import plan_chunk, recompute_microseconds  # noqa: E402
from cubed_plugin._cubed_seam import op_nodes, plan_dag  # noqa: E402
from cubed_plugin._fit_steps import step_plan  # noqa: E402
from cubed_plugin._measuring import can_reset_peak  # noqa: E402
from cubed_plugin.memory import MemoryLimitError, part_of, step_projection  # noqa: E402
from cubed_plugin.steps import Recompute, chunk_projection, chunk_sums  # noqa: E402
from cubed_plugin.train import fit, make_executor, synthetic, worker_baseline  # noqa: E402
from pycograd_xp import memory, optim  # noqa: E402
from pycograd_xp.memory import _cost as cost  # noqa: E402
from pycograd_xp.tree import tree_flatten  # noqa: E402

measured = pytest.mark.skipif(
    not can_reset_peak(), reason="a task's own peak is measured on Linux only"
)

FEATURES, ROWS, CHUNK = 1024, 1600, 800


@row_loss
def wide_tanh(p, X, y):
    """A wide product, then elementwise layers whose outputs the tape keeps: its gradients'
    bytes (the parameters') make row slices dear, its elementwise outputs make recomputing
    cheap."""
    xp = X.__array_namespace__()
    h = X @ p["W"]
    for _ in range(6):
        h = xp.tanh(h) * 1.5
    z = h @ p["w"] / 32.0
    return xp.logaddexp(0.0, z) - y * z


def _params(width=FEATURES):
    rng = np.random.default_rng(0)
    return {"W": rng.standard_normal((width, width)) / width, "w": rng.standard_normal(width)}


def _data(tmp_path, spec, rows=ROWS, features=FEATURES, chunk=CHUNK):
    path = tmp_path / "data"
    if not (path / "X.zarr").exists():
        synthetic(str(path), rows, features, chunk, "logreg")
    return (
        cubed.from_zarr(str(path / "X.zarr"), spec=spec),
        cubed.from_zarr(str(path / "y.zarr"), spec=spec),
    )


def _allowed(tmp_path, reserved, params, fraction=0.85):
    """An allowed_mem that leaves a task ``fraction`` of its chunk's step after its reads
    (and the planner's headroom): under the whole chunk's task, within a schedule's reach."""
    allowed = 10**10
    for _ in range(3):  # (the plan optimizer's fusions depend on allowed_mem)
        spec = cubed.Spec(str(tmp_path / "work"), allowed_mem=allowed, reserved_mem=reserved)
        data = _data(tmp_path, spec)
        whole = step_projection(
            wide_tanh, [params, *data], data=(1, 2), mode="one-pass", spec=spec
        ).max_task_bytes
        step = chunk_projection(wide_tanh, params, data).peak_bytes
        allowed = whole - int((1 - fraction) * step) + headroom(reserved)
    assert allowed < whole, "a worker baseline this large needs larger chunks"
    return allowed


@pytest.fixture
def cheap_slices(monkeypatch):
    """The cost model with slices' fixed costs at nothing: slices are chosen where they fit."""
    for name in ("CALL_MICROSECONDS", "NODE_MICROSECONDS"):
        monkeypatch.setattr(cost, name, 0)
    monkeypatch.setattr(cost, "GRADIENT_ELEMENTS_PER_MICROSECOND", math.inf)


@pytest.fixture
def dear_slices(monkeypatch):
    """The cost model with a slice's call at a second: recomputing is chosen where it fits
    (for this model the two ways are projected within a few percent of each other, and which
    is cheaper moves with the schedule ``memory.within`` finds)."""
    monkeypatch.setattr(cost, "CALL_MICROSECONDS", 10**6)


# -- the choice ------------------------------------------------------------------------------


def test_the_way_projected_faster_is_chosen(tmp_path):
    reserved = 10_000_000
    params = _params()
    spec = cubed.Spec(
        str(tmp_path / "work"),
        allowed_mem=_allowed(tmp_path, reserved, params),
        reserved_mem=reserved,
    )
    plan = plan_chunk(wide_tanh, params, *_data(tmp_path, spec))
    assert set(plan.costs) == {"recompute", "slices"}, plan.why_not  # both fit
    assert plan.how == min(plan.costs, key=plan.costs.__getitem__), plan.describe()
    assert plan.costs["slices"] == chunk_plan.slices_microseconds(
        len(plan.schedule.nodes), FEATURES * FEATURES + FEATURES, CHUNK, plan.alternative_slice_rows
    )


def test_a_chunk_too_large_is_recomputed_when_that_is_projected_faster(tmp_path, dear_slices):
    reserved = 10_000_000
    params = _params()
    allowed = _allowed(tmp_path, reserved, params)
    spec = cubed.Spec(str(tmp_path / "work"), allowed_mem=allowed, reserved_mem=reserved)
    X, y = _data(tmp_path, spec)
    plan = plan_chunk(wide_tanh, params, X, y)
    assert plan.how == "recompute", plan.describe()
    assert set(plan.costs) == {"recompute", "slices"}  # both fit: chosen by projected time
    assert plan.costs["recompute"] < plan.costs["slices"]
    s = plan.schedule
    assert s.drop and s.peak_bytes <= plan.step_budget < s.unconstrained_bytes
    assert plan.recompute == Recompute(s.drop, s.names)
    # the task projected with the schedule's peak fits, where the whole step did not
    assert plan.projection.max_task_bytes <= allowed - headroom(reserved)
    whole = step_projection(wide_tanh, [params, X, y], data=(1, 2), mode="one-pass", spec=spec)
    assert whole.max_task_bytes > allowed
    assert whole.max_task_bytes - plan.projection.max_task_bytes == (
        s.unconstrained_bytes - s.peak_bytes
    )
    assert "under a memory schedule" in plan.describe()
    assert f"in row slices of {plan.alternative_slice_rows:,} rows" in plan.describe()


def test_the_cost_model_decides(tmp_path, cheap_slices):
    """The same chunk and budget, slices' fixed costs at nothing: slices are chosen; each
    way's projected cost is the model's formula."""
    reserved = 10_000_000
    params = _params()
    spec = cubed.Spec(
        str(tmp_path / "work"),
        allowed_mem=_allowed(tmp_path, reserved, params),
        reserved_mem=reserved,
    )
    plan = plan_chunk(wide_tanh, params, *_data(tmp_path, spec))
    assert plan.how == "slices" and plan.slice_rows < CHUNK
    assert plan.costs["slices"] == 0 < plan.costs["recompute"]
    assert plan.costs["recompute"] == recompute_microseconds(plan.schedule)
    assert f"in slices of {plan.slice_rows:,} rows" in plan.describe()
    assert "under a memory schedule" in plan.describe()


def test_the_model_charges_slices_per_slice_and_recompute_per_output_made_again():
    sl = chunk_plan.slices_microseconds
    assert sl(10, 1000, 400, 400) == 0  # one slice: the whole chunk
    one = sl(10, 1000, 400, 200)
    assert one > 0 and sl(10, 1000, 400, 100) == 3 * one and sl(10, 1000, 400, 199) == 2 * one
    assert sl(20, 1000, 400, 200) > one and sl(10, 10**6, 400, 200) > one

    def step(p, x):
        import pycograd_xp as pg

        xp = pg.namespace(np)
        h = x @ p
        for _ in range(4):
            h = xp.tanh(h)
        return xp.sum(h)

    ps, xs = memory.spec((64, 64)), memory.spec((256, 64))
    full = memory.project(step, ps, xs).peak_bytes
    none = memory.within(step, full, ps, xs).schedule(ps, xs)
    some = memory.within(step, 0.9 * full, ps, xs).schedule(ps, xs)
    assert recompute_microseconds(none) == 0 < recompute_microseconds(some)


@pytest.mark.filterwarnings("ignore::cubed_plugin.ReservedMemWarning")
def test_neither_way_fits_is_refused_saying_why_for_each(tmp_path):
    reserved = 10_000_000
    params = _params()
    spec = cubed.Spec(str(tmp_path / "work"), allowed_mem="30MB", reserved_mem=reserved)
    data = _data(tmp_path, spec)
    with pytest.raises(MemoryLimitError) as e:
        plan_chunk(wide_tanh, params, *data)
    text = str(e.value)
    assert "neither under a memory schedule" in text and "nor in row slices" in text
    with pytest.raises(MemoryLimitError) as e:
        fit(
            wide_tanh,
            params,
            data,
            optim.sgd(0.1),
            steps=1,
            spec=spec,
            executor="threads",
            mode="one-pass",
            progress=False,
        )
    text = str(e.value)
    assert "row slices in its task cannot fit, nor recomputing" in text


# -- the values ------------------------------------------------------------------------------


def test_a_scheduled_chunk_step_is_the_whole_steps_bit_for_bit():
    rng = np.random.default_rng(1)
    params = _params(256)
    X, y = rng.standard_normal((300, 256)), (rng.random(300) > 0.5) * 1.0
    leaves, td = tree_flatten(params)

    class Like:
        def __init__(self, a):
            self.chunks, self.shape, self.dtype = ((a.shape[0],),), a.shape, a.dtype

    step = chunk_projection(wide_tanh, params, (Like(X), Like(y))).peak_bytes
    from cubed_plugin.steps import chunk_specs, chunk_step

    ps, specs = chunk_specs(wide_tanh, params, (Like(X), Like(y)))
    s = memory.within(chunk_step(wide_tanh), 0.8 * step, ps, *specs).schedule(ps, *specs)
    assert s.drop
    plain = chunk_sums(wide_tanh.per_row, td, leaves, [X, y], 0, 300)
    scheduled = chunk_sums(
        wide_tanh.per_row, td, leaves, [X, y], 0, 300, 0, (), Recompute(s.drop, s.names)
    )
    np.testing.assert_array_equal(scheduled, plain)


@pytest.mark.slow  # 9-21 s: run by .ci/run's slow checks
@pytest.mark.filterwarnings("ignore::cubed_plugin.ReservedMemWarning")
def test_fit_recomputes_a_chunk_too_large_with_the_whole_chunks_values(
    tmp_path, monkeypatch, dear_slices
):
    """fit in one-pass mode on chunks whose step is over the budget: recomputed (the log and
    the plan say so), the parameters and losses those of whole chunks bit for bit, and those
    of row slices to rounding."""
    reserved = 10_000_000
    params = _params()
    allowed = _allowed(tmp_path, reserved, params)

    def run(allowed_mem, log=None):
        spec = cubed.Spec(str(tmp_path / "work"), allowed_mem=allowed_mem, reserved_mem=reserved)
        data = _data(tmp_path, spec)
        return (
            fit(
                wide_tanh,
                params,
                data,
                optim.sgd(0.5),
                steps=2,
                spec=spec,
                executor="threads",
                mode="one-pass",
                progress=False,
                log=log,
            ),
            data,
            spec,
        )

    rows: list[str] = []
    whole, _, _ = run("10GB")
    recomputed, data, spec = run(allowed, rows.append)
    assert any("under a memory schedule" in r and "made again" in r for r in rows), rows
    dag = plan_dag(step_plan(wide_tanh, params, data, None, spec, True, "threads"))
    parts = [part_of(dag, name) for name, _ in op_nodes(dag)]
    assert any("outputs made again in the backward pass" in p for p in parts), parts
    assert "outputs made again in the backward pass" in recomputed.memory.table()
    assert recomputed.history["loss"] == whole.history["loss"]
    for k in whole.params:
        np.testing.assert_array_equal(recomputed.params[k], whole.params[k])
    for name in ("CALL_MICROSECONDS", "NODE_MICROSECONDS"):
        monkeypatch.setattr(cost, name, 0)
    monkeypatch.setattr(cost, "GRADIENT_ELEMENTS_PER_MICROSECOND", math.inf)
    rows.clear()  # (slices' fixed costs at nothing: slices chosen)
    sliced, _, _ = run(allowed, rows.append)
    assert any("in slices of" in r for r in rows), rows
    np.testing.assert_allclose(sliced.history["loss"], whole.history["loss"], rtol=1e-12)
    for k in whole.params:
        np.testing.assert_allclose(sliced.params[k], whole.params[k], rtol=1e-10, atol=1e-14)


# -- the memory ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def processes():
    ex = make_executor("processes")
    yield ex
    ex.close()


@measured
def test_recomputed_tasks_measure_within_their_projection(tmp_path, processes, dear_slices):
    reserved = math.ceil(worker_baseline(processes) * _baseline.MARGIN)
    params = _params()
    allowed = _allowed(tmp_path, reserved, params)
    spec = cubed.Spec(str(tmp_path / "work"), allowed_mem=allowed, reserved_mem=reserved)
    data = _data(tmp_path, spec)
    assert plan_chunk(wide_tanh, params, *data).how == "recompute"
    result = fit(
        wide_tanh,
        params,
        data,
        optim.sgd(0.5),
        steps=2,
        spec=spec,
        executor=processes,
        mode="one-pass",
        progress=False,
    )
    assert result.memory.measured and not result.memory.overruns()
    assert "outputs made again in the backward pass" in result.memory.table()
