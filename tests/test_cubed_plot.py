"""MemoryRecorder.plot: the last step's plan as bars, each op's projected task memory (and
measured, where the executor measures), with reserved_mem and allowed_mem."""

from __future__ import annotations

import pytest

pytest.importorskip("cubed")
pytest.importorskip("matplotlib")

import cubed

from cubed_plugin import fit
from cubed_plugin.train import MemoryRecorder, init_params, logreg_loss, synthetic
from pycograd_xp import optim


def test_plot_draws_each_op_of_the_last_step_at_its_projection(tmp_path):
    synthetic(str(tmp_path), 4_000, 5, 1_000, "logreg")
    spec = cubed.Spec(work_dir=str(tmp_path / "work"), allowed_mem="300MB", reserved_mem="250MB")
    X = cubed.from_zarr(str(tmp_path / "X.zarr"), spec=spec)
    y = cubed.from_zarr(str(tmp_path / "y.zarr"), spec=spec)
    result = fit(
        logreg_loss,
        init_params("logreg", 5),
        (X, y),
        optim.sgd(0.1),
        steps=2,
        spec=spec,
        executor="threads",
        mode="graph",
        progress=False,
        log=None,
    )
    rec = result.memory
    fig = rec.plot(str(tmp_path / "plan.png"), title="two steps")
    ax = fig.axes[0]
    ops = rec.steps[-1]
    widths = [round(p.get_width() * 1e6) for p in ax.patches]
    assert widths == [rec.projected[op] for op in ops]  # no measured bars on threads
    labels = [t.get_text() for t in ax.get_yticklabels()]  # in plan order, the first on top
    assert [lab.split()[0] for lab in labels] == ops
    assert any("in logreg_loss (backward of" in lab for lab in labels)
    lines = {line.get_label().split()[0]: line.get_xdata()[0] for line in ax.get_lines()}
    assert lines["allowed_mem"] == pytest.approx(300) and lines["reserved_mem"] == pytest.approx(
        250
    )
    assert "cannot measure" in " ".join(t.get_text() for t in ax.texts)
    assert (tmp_path / "plan.png").read_bytes()[:4] == b"\x89PNG"
    assert ax.get_title(loc="left") == "two steps"


def test_plot_before_any_step_says_so():
    with pytest.raises(ValueError, match=r"MemoryRecorder.plot: no step computed yet"):
        MemoryRecorder().plot()
