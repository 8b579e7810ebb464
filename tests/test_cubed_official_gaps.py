"""What the official suite found missing on ``namespace(cubed)``, each against NumPy: several
integer-array indices, ``isin`` with a scalar, DLPack both ways; and the functions whose
output shape depends on the data refused naming that and the eager way out."""

from __future__ import annotations

import numpy as np
import pytest

import pycograd_xp as pg

cubed = pytest.importorskip("cubed")

CX = pg.namespace(cubed)
NX = pg.namespace(np)


def _keys(shape, rng, count):
    """Keys of integers and integer arrays (broadcasting together; negative entries too), with
    whole or stepped slices between them: NumPy's advanced indexing, adjacent or not."""
    for _ in range(count):
        key = []
        for n in shape:
            kind = rng.integers(0, 3)
            if kind == 0:
                key.append(int(rng.integers(-n, n)))
            elif kind == 1:
                dims = tuple(int(d) for d in rng.integers(1, 3, rng.integers(1, 3)))
                key.append(rng.integers(-n, n, dims if rng.random() < 0.5 else dims[-1:]))
            else:
                key.append(slice(None) if rng.random() < 0.6 else slice(None, None, -2))
        if sum(isinstance(k, np.ndarray) for k in key) == 0:
            key[0] = rng.integers(0, shape[0], 2)
        try:
            np.empty(shape)[tuple(key)]
        except (IndexError, ValueError):  # index arrays that do not broadcast together
            continue
        yield tuple(key)


@pytest.mark.parametrize("shape", [(5, 4), (3, 4, 2), (2, 3, 2, 3)])
def test_integer_array_indices_are_numpys_values_and_gradients(shape):
    rng = np.random.default_rng(len(shape))
    base = rng.standard_normal(shape)
    for key in _keys(shape, rng, 8):
        ck = tuple(CX.asarray(k) if isinstance(k, np.ndarray) else k for k in key)
        nk = tuple(NX.asarray(k) if isinstance(k, np.ndarray) else k for k in key)
        got = np.asarray(CX.asarray(base)[ck])
        want = base[key]
        assert got.shape == want.shape, key
        np.testing.assert_array_equal(got, want, err_msg=repr(key))

        def f(xp, k):
            return lambda a: xp.sum(xp.sin(a[k]) * 1.5)

        gc = pg.grad(f(CX, ck))(CX.asarray(base))
        gn = pg.grad(f(NX, nk))(NX.asarray(base))
        np.testing.assert_allclose(np.asarray(gc), np.asarray(gn), rtol=1e-13, err_msg=repr(key))


def test_isin_takes_a_scalar_on_either_side():
    a = np.arange(6.0).reshape(2, 3)
    x = CX.asarray(a)
    np.testing.assert_array_equal(np.asarray(CX.isin(x, 4.0)), np.isin(a, 4.0))
    np.testing.assert_array_equal(np.asarray(CX.isin(x, 4.0, invert=True)), ~np.isin(a, 4.0))
    assert bool(CX.isin(2.0, x)) and not bool(CX.isin(2.5, x))
    ints = CX.asarray(np.arange(4))
    np.testing.assert_array_equal(np.asarray(CX.isin(ints, 3.5)), [False] * 4)  # not cast to 3


def test_dlpack_both_ways():
    a = np.arange(6.0).reshape(2, 3)
    x = CX.asarray(a)
    assert x.__dlpack_device__()[0] == 1  # the CPU
    np.testing.assert_array_equal(np.from_dlpack(x), a)
    y = CX.from_dlpack(np.arange(3.0))
    np.testing.assert_array_equal(np.asarray(y), np.arange(3.0))
    with pytest.raises(ValueError, match=r"live on the CPU"):
        CX.from_dlpack(np.arange(3.0), device="cuda")


@pytest.mark.parametrize(
    "call",
    [
        lambda x: CX.unique_values(x),
        lambda x: CX.unique_counts(x),
        lambda x: CX.nonzero(x > 1),
        lambda x: x[x > 1],
    ],
    ids=["unique_values", "unique_counts", "nonzero", "boolean mask"],
)
def test_data_dependent_shapes_are_refused_with_the_way_out(call):
    x = CX.asarray(np.arange(4.0))
    with pytest.raises(NotImplementedError, match=r"shape depends on the data") as e:
        call(x)
    assert "eager" in str(e.value)


def test_empty_arrays_linspace_of_none_and_numpy_integer_keys():
    """Cubed 0.27 fails indexing an empty array and gives linspace(num=0) a 0-d result; a
    NumPy integer beside an index array is an integer index."""
    x = CX.asarray(np.zeros((0, 0, 1), dtype=bool))
    assert x[:, :, 0].shape == (0, 0)
    assert [u.shape for u in CX.unstack(x, axis=2)] == [(0, 0)]
    assert CX.linspace(0.0, 0.0, 0).shape == (0,)
    a = np.arange(8).reshape(2, 4)
    got = CX.asarray(a)[np.int64(1), CX.asarray([3, 0])]
    np.testing.assert_array_equal(np.asarray(got), a[1, [3, 0]])
    np.testing.assert_array_equal(np.asarray(CX.from_dlpack(CX.asarray(a))), a)


def test_zero_d_integer_arrays_index_as_integers():
    """A 0-d integer array as an index (the official suite indexes element by element so) is an
    integer index, alone or beside slices and index arrays; the gradient is NumPy's."""
    b = np.arange(24.0).reshape(2, 4, 3)
    x = CX.asarray(b)
    i, j = CX.asarray(1), CX.asarray(2)
    np.testing.assert_array_equal(np.asarray(x[i, j]), b[1, 2])
    np.testing.assert_array_equal(np.asarray(x[i]), b[1])
    np.testing.assert_array_equal(np.asarray(x[i, :, j]), b[1, :, 2])
    np.testing.assert_array_equal(np.asarray(x[i, CX.asarray([0, 3]), j]), b[1, [0, 3], 2])
    g = pg.grad(lambda a: CX.sum(a[i, j] * 2.0))(x)
    want = np.zeros_like(b)
    want[1, 2] = 2.0
    np.testing.assert_array_equal(np.asarray(g), want)
