"""namespace(cubed) at the edges its differential programs do not reach: strided slices of
one chunk, degrees of freedom used up, scans into a wider dtype, differences and repeats past an
axis, arrays with no element (forward and gradients). Each against namespace(numpy); each once
failed or gave other numbers (Cubed 0.27's own errors, passed through)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import pycograd_xp as pg
from pycograd_xp import nn

cubed = pytest.importorskip("cubed")
nxp = pg.namespace(np)


def chunked(cxp, a, chunks):
    return cxp.asarray(cubed.from_array(a, chunks=chunks))


def test_strided_slices_of_one_chunk(cxp):
    """Cubed 0.27 refuses y[0:8:2] of one chunk of 10 ("Chunks (10,) must be a multiple of
    array's chunks (4,)"), and average pooling with a stride over one chunk with it."""
    y = np.arange(10.0)
    for k in (slice(0, 8, 2), slice(0, 6, 3), slice(1, 9, 2), slice(8, 0, -3)):
        np.testing.assert_array_equal(np.asarray(chunked(cxp, y, 10)[k]), y[k])
    x = np.arange(42.0).reshape(6, 7)
    for key in ((slice(0, 4), slice(0, 5, 2)), (slice(0, 6, 2), slice(1, 4)), (1, slice(0, 5, 3))):
        np.testing.assert_array_equal(np.asarray(chunked(cxp, x, (6, 7))[key]), x[key])
    a = np.random.default_rng(0).standard_normal((2, 3, 6, 7))
    got = nn.avg_pool2d(chunked(cxp, a, a.shape), (3, 2), stride=(1, 2))
    want = nn.avg_pool2d(nxp.asarray(a), (3, 2), stride=(1, 2))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12)


def test_var_and_std_with_no_degree_of_freedom_left(cxp):
    """correction >= N: NumPy's sum of squares over max(N - correction, 0), inf (Cubed 0.27
    divided by the negative count: -40, and NaN for std)."""
    x = np.arange(10.0).reshape(5, 2)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        for f in ("var", "std"):
            for c in (5, 6):
                got = getattr(cxp, f)(chunked(cxp, x, (2, 1)), axis=0, correction=c)
                want = getattr(nxp, f)(nxp.asarray(x), axis=0, correction=c)
                np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_scans_sum_in_the_wider_dtype(cxp):
    """cumulative_sum(x_f32, dtype=float64) sums in float64 (Cubed 0.27 summed in float32 and
    cast: off by 1e-7)."""
    x = np.random.default_rng(1).standard_normal(300).astype(np.float32)
    for f in ("cumulative_sum", "cumulative_prod"):
        got = getattr(cxp, f)(chunked(cxp, x * 0.01 + 1, 40), dtype=cxp.float64)
        want = getattr(np, f"cum{f.split('_')[1]}")((x * 0.01 + 1).astype(np.float64))
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-14)  # float32's: 1e-7


def test_diff_and_repeat_past_an_axis(cxp):
    x = np.arange(6.0)
    assert np.asarray(cxp.diff(chunked(cxp, x, 4), n=7)).shape == (0,)
    m = np.arange(30.0).reshape(5, 6)
    for chunks in ((2, 4), (5, 6)):
        assert np.asarray(cxp.repeat(chunked(cxp, m, chunks), 0, axis=1)).shape == (5, 0)


FORWARD = {
    "flip": lambda xp, a: xp.flip(a),
    "reshape": lambda xp, a: xp.reshape(a, (-1,)),
    "roll": lambda xp, a: xp.roll(a, 1),
    "roll axis 0": lambda xp, a: xp.roll(a, 1, axis=0),
    "diff": lambda xp, a: xp.diff(a, axis=0),
    "take": lambda xp, a: xp.take(a, xp.asarray([0, 0][: a.shape[-1]], dtype=xp.int64), axis=-1),
    "prod": lambda xp, a: xp.prod(a, axis=0),
    "cumulative_prod": lambda xp, a: xp.cumulative_prod(a, axis=-1, include_initial=True),
    "cumulative_sum": lambda xp, a: xp.cumulative_sum(a, axis=0, include_initial=True),
    "concat": lambda xp, a: xp.concat([a, a], axis=0),
    "stack": lambda xp, a: xp.stack([a, a]),
    "tile": lambda xp, a: xp.tile(a, (2, 2)),
    "softmax": lambda xp, a: nn.softmax(a, axis=-1),
    "log_softmax": lambda xp, a: nn.log_softmax(a, axis=0),
}


@pytest.mark.parametrize("name", list(FORWARD))
@pytest.mark.parametrize("shape", [(0, 4), (3, 0)])
def test_arrays_with_no_element_and_their_gradients(cxp, name, shape):
    """An operand with no element: the result's shape and dtype are NumPy's (Cubed 0.27 fails
    on many: a division by a chunk count of 0, "Chunks and shape must be of the same length"),
    and the gradient is zeros of the input's shape (a VJP of an empty output runs no rule)."""
    f = FORWARD[name]
    a = np.zeros(shape)
    want = f(nxp, nxp.asarray(a))
    got = f(cxp, chunked(cxp, a, (2, 2)))
    assert np.asarray(got).shape == tuple(want.shape) and got.dtype == want.dtype
    g = pg.grad(lambda t: cxp.sum(f(cxp, t)))(chunked(cxp, a, (2, 2)))
    assert np.asarray(g).shape == shape and not np.asarray(g).any()


def test_searchsorted_with_a_sorter(cxp):
    """Cubed 0.27 refuses ``sorter``: x1 is taken in the sorter's order first."""
    x1 = np.array([3.0, 1.0, 4.0, 1.5, 9.0, 2.6])
    order = np.argsort(x1)
    v = np.array([0.0, 1.2, 3.0, 10.0])
    for side in ("left", "right"):
        got = cxp.searchsorted(
            chunked(cxp, x1, 4), chunked(cxp, v, 3), side=side, sorter=chunked(cxp, order, 4)
        )
        np.testing.assert_array_equal(np.asarray(got), np.searchsorted(x1, v, side, order))
