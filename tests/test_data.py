"""Batches: order, shuffling with keys, the uneven last batch, masks, Zarr sources, prefetch."""

from __future__ import annotations

import numpy as np
import pytest

import pycograd_xp as pg
from pycograd_xp import random
from pycograd_xp.data import Batches

X = np.arange(20.0).reshape(10, 2)
Y = np.arange(10)


def rows(batches):
    return [np.asarray(pg.unwrap(b[1])).tolist() for b in batches]


def test_in_order_and_drop_last():
    b = Batches((X, Y), 4, prefetch=0)
    assert len(b) == 2 and rows(b) == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_shuffle_is_reproducible_and_new_each_epoch():
    b1, b2 = (Batches((X, Y), 5, key=random.key(3)) for _ in range(2))
    e1, e2 = rows(b1), rows(b1)
    assert rows(b2) == e1 and e1 != e2
    assert sorted(sum(e1, [])) == list(range(10))


def test_uneven_last_batch_with_mask(xp):
    b = Batches((X, Y), 4, drop_last=False, xp=xp, prefetch=0)
    batches = list(b)
    assert len(batches) == 3 and all(t[0].shape == (4, 2) for t in batches)
    mask = np.asarray(pg.unwrap(batches[-1][2]))
    np.testing.assert_array_equal(mask, [1, 1, 0, 0])
    # a masked mean over all batches is the plain mean
    total = sum(float(xp.sum(x[:, 0] * m)) for x, _, m in batches)
    count = sum(float(xp.sum(m)) for _, _, m in batches)
    assert total / count == pytest.approx(X[:, 0].mean())


def test_zarr_source_and_our_arrays():
    zarr = pytest.importorskip("zarr")
    z = zarr.create_array(
        store=zarr.storage.MemoryStore(), shape=X.shape, chunks=(3, 2), dtype="float64"
    )
    z[:] = X
    xp = pg.namespace(np)
    b = Batches((z, xp.asarray(Y)), 5, key=random.key(1))
    for x, y in b:
        np.testing.assert_array_equal(np.asarray(pg.unwrap(x)), X[np.asarray(pg.unwrap(y))])


def test_errors_propagate_from_the_prefetch_thread():
    class Broken:
        shape = (10,)

        def __getitem__(self, rows):
            raise OSError("disk gone")

    with pytest.raises(OSError, match="disk gone"):
        list(Batches((Broken(),), 5))
    with pytest.raises(ValueError, match="different lengths"):
        Batches((X, Y[:5]), 2)


def test_bad_arguments_are_refused_saying_the_way_out():
    """No arrays, arrays of different lengths, a batch size below one, and a batch size above
    the rows with drop_last (no batch at all: a training loop over it ran zero steps in
    silence) are refused when the batches are made."""
    X = np.zeros((10, 3))
    with pytest.raises(ValueError, match=r"Batches: no arrays; give the sources"):
        Batches([], 4)
    with pytest.raises(ValueError, match=r"different lengths \[9, 10\]"):
        Batches([X, np.zeros(9)], 4)
    with pytest.raises(ValueError, match="batch_size must be positive, got 0"):
        Batches([X], 0)
    with pytest.raises(
        ValueError, match=r"batch_size 20 is more than the 10 rows.*at most 10, or pass drop_last"
    ):
        Batches([X], 20)
    assert [b[0].shape for b in Batches([X], 20, drop_last=False)] == [(20, 3)]
    assert [b[0].shape for b in Batches([X], 10)] == [(10, 3)]


def test_pandas_sources_are_taken_by_position():
    """A DataFrame indexed with the shuffled rows picked columns (KeyError), and a Series with
    an integer index picks by label: the rows of X and y went apart. Both are taken by their
    values' positions."""
    pd = pytest.importorskip("pandas")
    X = np.arange(20.0).reshape(10, 2)
    frame = pd.DataFrame(X)
    labels = pd.Series(np.arange(10) * 10, index=np.arange(10)[::-1])  # labels != positions
    got = list(Batches([frame, labels], 4, key=random.key(0), prefetch=0))
    want = list(Batches([X, np.arange(10) * 10], 4, key=random.key(0), prefetch=0))
    assert len(got) == len(want) == 2
    for (xg, yg), (xw, yw) in zip(got, want, strict=True):
        np.testing.assert_array_equal(pg.unwrap(xg), pg.unwrap(xw))
        np.testing.assert_array_equal(pg.unwrap(yg), pg.unwrap(yw))
        np.testing.assert_array_equal(pg.unwrap(xg)[:, 0] * 5, pg.unwrap(yg))  # rows together


def test_batches_of_a_numpy_namespace_are_its_arrays_as_asarray_makes_them():
    """Over NumPy the batch's rows are wrapped as they are (no asarray call): the same class,
    dtype and values as ``xp.asarray`` gives, a view for unshuffled rows as before; another
    namespace's batches still come from its asarray."""
    xp = pg.namespace(np)
    X = np.arange(24, dtype=np.float32).reshape(8, 3)
    y = np.arange(8)
    for key in (None, random.key(0)):
        for xb, yb in Batches([X, y], 4, key=key, prefetch=0):
            want = xp.asarray(pg.unwrap(xb))
            assert type(xb) is type(want) and xb.dtype == want.dtype == xp.float32
            assert yb.dtype == xp.int64 and xb._node is None
            rows = np.asarray(pg.unwrap(yb))
            assert np.array_equal(np.asarray(pg.unwrap(xb)), X[rows])
            assert np.shares_memory(pg.unwrap(xb), X) == (key is None)
    strict = pytest.importorskip("array_api_strict")
    sx = pg.namespace(strict)
    (xb, yb), *_ = Batches([X, y], 4, xp=sx, prefetch=0)
    assert type(xb) is type(sx.asarray([1.0]))
