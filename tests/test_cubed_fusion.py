"""Graph mode's plan optimizer (cubed_plugin._fusion): cheap elementwise producers copied into
each consumer so Cubed fuses them, each block read once per task. Same values as Cubed's own
optimizer, fewer tasks, no array written twice, fewer reads."""

from __future__ import annotations

from collections import Counter
from functools import partial

import numpy as np
import pytest

import pycograd_xp as pg

cubed = pytest.importorskip("cubed")

from cubed.core.optimization import multiple_inputs_optimize_dag  # noqa: E402
from cubed.storage.zarr import LazyZarrArray  # noqa: E402
from cubed.utils import chunk_memory  # noqa: E402

from cubed_plugin._fusion import _COPY, duplicating_optimizer  # noqa: E402
from cubed_plugin.steps import graph_fusion, graph_step, row_loss  # noqa: E402
from cubed_plugin.train import synthetic  # noqa: E402

WIDE = partial(
    multiple_inputs_optimize_dag, max_total_source_arrays=32, max_total_num_input_blocks=80
)


def _logreg_tail(z, y):
    xp = z.__array_namespace__()
    return xp.log(1.0 + xp.exp(-xp.abs(z))) + xp.maximum(z, 0.0) - y * z


LOGREG = row_loss(lambda p, X, y: _logreg_tail(X @ p["w"], y))


@pytest.fixture
def data(tmp_path):
    synthetic(str(tmp_path), 4000, 8, 500, "logreg")
    spec = cubed.Spec(work_dir=str(tmp_path / "work"), allowed_mem="100MB", reserved_mem="10MB")
    X = cubed.from_zarr(str(tmp_path / "X.zarr"), spec=spec)
    y = cubed.from_zarr(str(tmp_path / "y.zarr"), spec=spec)
    return spec, X, y


def _arrays(spec, X, y):
    w = np.linspace(-0.3, 0.4, 8)
    v, g = graph_step(LOGREG, {"w": w}, (X, y), spec)
    return [pg.unwrap(v), pg.unwrap(g["w"])]


def _stored_targets(plan):
    return [
        d["target"]
        for n, d in plan.dag.nodes(data=True)
        if isinstance(d.get("target"), LazyZarrArray)
    ]


def test_same_values_as_cubeds_optimizer_with_fewer_tasks(data):
    spec, X, y = data
    want = cubed.compute(*_arrays(spec, X, y))
    got = cubed.compute(*_arrays(spec, X, y), optimize_function=graph_fusion())
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)
    ours = cubed.plan(*_arrays(spec, X, y), optimize_function=graph_fusion())
    wide = cubed.plan(*_arrays(spec, X, y), optimize_function=WIDE)
    assert ours.num_tasks < wide.num_tasks, (ours.num_tasks, wide.num_tasks)
    # every stored array is written by one op: no copy left standing, no target twice
    targets = _stored_targets(ours)
    assert len({id(t) for t in targets}) == len(targets)
    assert not any(_COPY in n for n in ours.dag.nodes)

    # of the row-sized intermediates only X @ w is stored: exp(-|z|), 1 + exp(-|z|) (read by
    # forward and backward) and the mean's broadcast cotangent (read by three terms) are not
    def rows(plan):
        return [t for t in _stored_targets(plan) if t.shape[:1] == (4000,)]

    assert len(rows(ours)) == 1, rows(ours)
    # a fused task reads all its input blocks before computing: its projection holds them all
    for name, d in ours.dag.nodes(data=True):
        po = d.get("primitive_op")
        if po is not None and len(po.source_array_names) > 1:
            blocks = sum(
                chunk_memory(ours.dag.nodes[a]["target"]) for a in set(po.source_array_names)
            )
            assert po.projected_mem >= po.reserved_mem + blocks, name
    assert len(rows(wide)) >= 4, rows(wide)


def test_copies_that_cannot_fuse_are_undone(data):
    """With a fusion that refuses every multi-source fusion, no copy fuses: the optimizer
    undoes them all and the plan is Cubed's own."""
    spec, X, y = data
    strict = partial(
        multiple_inputs_optimize_dag, max_total_source_arrays=1, max_total_num_input_blocks=1
    )
    opt = duplicating_optimizer(strict)
    plan = cubed.plan(*_arrays(spec, X, y), optimize_function=opt)
    assert not any(_COPY in n for n in plan.dag.nodes)
    targets = _stored_targets(plan)
    assert len({id(t) for t in targets}) == len(targets)
    want = cubed.compute(*_arrays(spec, X, y))
    got = cubed.compute(*_arrays(spec, X, y), optimize_function=opt)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_consumer_that_cannot_fuse_keeps_reading_the_original(tmp_path):
    """``e`` feeds two elementwise ops and a rechunk (which fuses with nothing): the elementwise
    consumers get copies, the rechunk reads the stored original."""
    spec = cubed.Spec(work_dir=str(tmp_path), allowed_mem="100MB", reserved_mem="10MB")
    x = cubed.from_array(np.linspace(0.0, 1.0, 1000), chunks=100, spec=spec)
    e = cubed.exp(x)
    a, b = e + 1.0, e * 2.0
    c = cubed.rechunk(e, 250)
    out = [cubed.sum(a), cubed.sum(b), cubed.sum(c)]
    got = cubed.compute(*out, optimize_function=graph_fusion())
    want = cubed.compute(*out)
    np.testing.assert_allclose(got, want, rtol=1e-15)
    plan = cubed.plan(*out, optimize_function=graph_fusion())
    assert not any(_COPY in n for n in plan.dag.nodes)
    targets = _stored_targets(plan)
    assert len({id(t) for t in targets}) == len(targets)


def test_each_block_is_read_once_per_task(data, monkeypatch):
    """The copies of exp(-|z|) in the backward all read z: the fused task reads each block of
    z once (counted at Zarr), where Cubed's apply_blockwise reads it once per chain."""
    import zarr

    spec, X, y = data
    reads: Counter = Counter()
    original = zarr.Array.__getitem__

    def counting(self, selection):
        first = selection[0] if isinstance(selection, tuple) and selection else None
        if isinstance(first, slice) and first.stop - first.start == 500:  # a task's rows
            reads[(self.store_path.path or str(self.store_path.store), str(selection))] += 1
        return original(self, selection)

    monkeypatch.setattr(zarr.Array, "__getitem__", counting)
    from cubed.runtime.create import create_executor

    ex = create_executor("single-threaded")
    cubed.compute(*_arrays(spec, X, y), optimize_function=graph_fusion(), executor=ex)
    ours = dict(reads)
    reads.clear()
    monkeypatch.setattr("cubed_plugin._fusion.read_once", lambda dag: dag)
    cubed.compute(*_arrays(spec, X, y), optimize_function=graph_fusion(), executor=ex)
    without = dict(reads)
    # two ops read data and residuals (the forward loss and the backward's matmul), and
    # each reads each block once; without, z's blocks are read once per chain (8 times)
    assert max(ours.values()) == 2, {k: n for k, n in ours.items() if n > 2}
    assert max(without.values()) >= 4
    assert sum(ours.values()) < sum(without.values())
