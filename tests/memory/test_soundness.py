"""The projection is a bound on any program: random programs (``programs.py``) over the
differentiable rows, with float32 beside float64, integer and complex values, transposed and
strided views as arguments and intermediates, measured with tracemalloc.

Each program's forward pass and its ``value_and_grad`` step must measure at most their
projections (on tracemalloc's scale: ``Projection.traced_*``), and the projections must be
tight: the median of measured/projected over the default run's 2,000 programs at least 0.9.
``-m slow`` runs 4,000 more.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from programs import STEPS, program

import pycograd_xp as pg
from pycograd_xp import memory

XP = pg.namespace(np)
BATCH = 100
# 500 programs in the default run (about 15 s a batch of 100), 5,500 more in the slow one
DEFAULT = range(0, 500, BATCH)
SLOW = range(500, 6000, BATCH)


@functools.cache
def _batch(start: int) -> tuple[list[float], list[str]]:
    """(measured/projected of each program's step, the violations) for seeds start..+BATCH."""
    ratios, bad = [], []
    for seed in range(start, start + BATCH):
        pr = program(seed, XP)
        with np.errstate(all="ignore"):
            p = memory.project(pr.loss, *pr.args, argnums=pr.argnums)
            m = memory.measure(pr.loss, *pr.args, argnums=pr.argnums)
        ratios.append(m.peak_bytes / p.traced_peak_bytes)
        if m.peak_bytes > p.traced_peak_bytes or m.forward_peak_bytes > p.traced_forward_peak_bytes:
            bad.append(
                f"{pr.label}: step measured {m.peak_bytes} > projected "
                f"{p.traced_peak_bytes}, or forward {m.forward_peak_bytes} > "
                f"{p.traced_forward_peak_bytes}"
            )
    return ratios, bad


def _check(start: int) -> None:
    _, bad = _batch(start)
    assert not bad, "measured above projected:\n" + "\n".join(bad)


@pytest.mark.parametrize("start", DEFAULT)
def test_random_programs_never_exceed_their_projection(start):
    _check(start)


@pytest.mark.slow
@pytest.mark.parametrize("start", SLOW)
def test_more_random_programs_never_exceed_their_projection(start):
    _check(start)


def test_random_programs_are_projected_tightly():
    ratios = [r for start in DEFAULT for r in _batch(start)[0]]
    assert len(ratios) == len(DEFAULT) * BATCH
    assert np.median(ratios) >= 0.9, np.percentile(ratios, [10, 50, 90])


def test_the_programs_cover_mixed_dtypes_and_layouts():
    """The generator draws what the test claims: both float dtypes for each argument, each
    layout, and every step of the menu."""

    labels = [program(seed, XP).label for seed in range(300)]
    for part in (
        "X:float32 ",
        "X:float64 ",
        "X:float32T",
        "X:float64strided",
        "W:float32T",
        "b:float32strided",
        "K:uint8",
        "K:int32",
        "K:int64",
    ):
        assert any(part in label for label in labels), part
    used = {name for label in labels for name in label.split("steps=")[1].split(",")}
    assert used == {s.__name__ for s in STEPS}


@pytest.mark.parametrize("layout", ["C", "transposed"])
def test_float32_data_with_float64_parameters_within_ten_percent(layout):
    """The issue's first report: NumPy's matmul copies float32 data into float64 (a gufunc
    casts whole operands); the projection counts that copy, sound and within 10 %."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((4000, 100)).astype(np.float32)
    X = np.asfortranarray(X) if layout == "transposed" else X
    w = XP.asarray(rng.standard_normal(100))

    def loss(w, X):
        return XP.mean(XP.tanh(X @ w) ** 2)

    p = memory.project(loss, w, XP.asarray(X))
    m = memory.measure(loss, w, XP.asarray(X))
    for measured, projected in (
        (m.peak_bytes, p.traced_peak_bytes),
        (m.forward_peak_bytes, p.traced_forward_peak_bytes),
    ):
        assert 0.9 * projected <= measured <= projected, (measured, projected)
