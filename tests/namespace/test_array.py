"""The Array class: attributes, operators, indexing, mutation, conversions."""

from __future__ import annotations

import operator

import numpy as np
import pytest

import pycograd_xp


def to_np(x) -> np.ndarray:
    data = pycograd_xp.unwrap(x)
    return np.asarray(data) if hasattr(data, "__array__") else np.asarray(x)


def test_attributes(xp):
    x = xp.reshape(xp.arange(6, dtype=xp.float64), (2, 3))
    assert x.shape == (2, 3) and x.ndim == 2 and x.size == 6
    assert x.dtype == xp.float64
    assert x.device == xp.__array_namespace_info__().default_device()
    assert x.T.shape == (3, 2) and x.mT.shape == (3, 2)
    assert type(x.T) is xp.Array
    with pytest.raises(ValueError, match="only defined for 2-D"):
        xp.ones((2, 2, 2)).T  # noqa: B018
    assert x.to_device(x.device).shape == (2, 3)


BINARY = [
    (operator.add, np.add),
    (operator.sub, np.subtract),
    (operator.mul, np.multiply),
    (operator.truediv, np.divide),
    (operator.floordiv, np.floor_divide),
    (operator.mod, np.remainder),
    (operator.pow, np.power),
    (operator.lt, np.less),
    (operator.le, np.less_equal),
    (operator.gt, np.greater),
    (operator.ge, np.greater_equal),
    (operator.eq, np.equal),
    (operator.ne, np.not_equal),
]


@pytest.mark.parametrize("op, ref", BINARY)
def test_operators_match_numpy(xp, op, ref):
    a, b = np.array([1.5, -2.0, 3.0]), np.array([2.0, 0.5, -1.0])
    x, y = xp.asarray(a), xp.asarray(b)
    for res, want in [(op(x, y), ref(a, b)), (op(x, 2.0), ref(a, 2.0)), (op(2.0, y), ref(2.0, b))]:
        assert type(res) is xp.Array
        np.testing.assert_allclose(to_np(res), want)


def test_unary_and_bitwise_operators(xp):
    x = xp.asarray([1.0, -2.0])
    np.testing.assert_array_equal(to_np(-x), [-1.0, 2.0])
    np.testing.assert_array_equal(to_np(+x), [1.0, -2.0])
    np.testing.assert_array_equal(to_np(abs(x)), [1.0, 2.0])
    i = xp.asarray([1, 6], dtype=xp.int32)
    np.testing.assert_array_equal(to_np(~i), [-2, -7])
    np.testing.assert_array_equal(to_np(i & 3), [1, 2])
    np.testing.assert_array_equal(to_np(i | 8), [9, 14])
    np.testing.assert_array_equal(to_np(i ^ 1), [0, 7])
    np.testing.assert_array_equal(to_np(i << 1), [2, 12])
    np.testing.assert_array_equal(to_np(i >> 1), [0, 3])
    m = xp.asarray([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(to_np(m @ m), [[7.0, 10.0], [15.0, 22.0]])


def test_scalar_promotion_keeps_array_dtype(xp):
    x = xp.asarray([1.0, 2.0], dtype=xp.float32)
    assert (x + 1).dtype == xp.float32
    assert (2.5 * x).dtype == xp.float32
    i = xp.asarray([1, 2], dtype=xp.int8)
    assert (i + 1).dtype == xp.int8
    assert (x > 1).dtype == xp.bool


def test_inplace_operators_rebind_and_keep_dtype(xp):
    x = xp.asarray([1.0, 2.0])
    same = x
    x += 1
    x *= xp.asarray([2.0, 3.0])
    assert x is same
    np.testing.assert_array_equal(to_np(x), [4.0, 9.0])
    f = xp.asarray([1.0, 2.0], dtype=xp.float32)
    with pytest.raises(TypeError, match="in-place operation must keep this array's dtype"):
        f += xp.asarray([1.0, 1.0], dtype=xp.float64)
    np.testing.assert_array_equal(to_np(f), [1.0, 2.0])  # untouched by the failed operation
    v = xp.asarray([1.0])
    with pytest.raises(ValueError, match="must keep this array's shape"):
        v += xp.asarray([1.0, 2.0])
    assert v.shape == (1,)


def test_getitem_every_index_kind(xp):
    a = np.arange(24.0).reshape(2, 3, 4)
    x = xp.asarray(a)
    keys = [
        (0, ...),
        (-1, ...),
        (1, 2, ...),
        (slice(None, None, -1), ...),
        (slice(1, None), slice(None, None, 2), ...),
        (Ellipsis, 1),
        (None, 0, ...),
        (0, None, Ellipsis, None),
        (0, 1, 2),
        (slice(None), 1, slice(0, 3, 2)),
    ]
    for key in keys:
        got = x[key]
        assert type(got) is xp.Array
        np.testing.assert_array_equal(to_np(got), a[key])
    idx = xp.asarray([1, 0, 1])
    np.testing.assert_array_equal(to_np(x[0, idx, 1]), a[0, [1, 0, 1], 1])
    np.testing.assert_array_equal(to_np(x[idx, idx, idx]), a[[1, 0, 1], [1, 0, 1], [1, 0, 1]])
    mask = x > 10
    np.testing.assert_array_equal(to_np(x[mask]), a[a > 10])
    assert x[0, 0, 0].shape == ()


def test_setitem_basic_integer_and_mask(xp):
    x = xp.zeros((3, 4))
    x[0, :] = 1.0
    x[2, 1] = xp.asarray(5.0)
    x[x > 4] = -1.0
    x[..., 3] = xp.asarray([7.0, 8.0, 9.0])
    want = np.zeros((3, 4))
    want[0, :] = 1.0
    want[2, 1] = -1.0
    want[..., 3] = [7.0, 8.0, 9.0]
    np.testing.assert_array_equal(to_np(x), want)


def test_setitem_integer_array_on_numpy():
    xp = pycograd_xp.namespace(np)
    x = xp.zeros((3,))
    x[xp.asarray([2, 0])] = xp.asarray([5.0, 6.0])
    np.testing.assert_array_equal(to_np(x), [6.0, 0.0, 5.0])


def test_python_conversions(xp):
    assert float(xp.asarray(2.5)) == 2.5
    assert int(xp.asarray(3)) == 3
    assert complex(xp.asarray(1 + 2j)) == 1 + 2j
    assert bool(xp.asarray(True)) is True
    assert [10, 20, 30][xp.asarray(1)] == 20


def test_dlpack_roundtrip(xp):
    x = xp.asarray([1.0, 2.0, 3.0])
    assert x.__dlpack_device__()[0] == 1  # CPU
    y = xp.from_dlpack(x)
    assert type(y) is xp.Array
    np.testing.assert_array_equal(to_np(y), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(np.from_dlpack(x), [1.0, 2.0, 3.0])


def test_repr_is_readable():
    xp = pycograd_xp.namespace(np)
    assert repr(xp.asarray([1.0, 2.0])) == "pycograd_xp.numpy.Array([1., 2.], dtype=float64)"
    # rows line up under the first one, after the whole prefix (NumPy's were for "array(")
    lines = repr(xp.reshape(xp.arange(4.0), (2, 2))).splitlines()
    assert lines == [
        "pycograd_xp.numpy.Array([[0., 1.],",
        "                         [2., 3.]], dtype=float64)",
    ]


def test_asarray_of_our_array_stays_ours(xp):
    x = xp.asarray([1.0, 2.0])
    assert xp.asarray(x) is not None and type(xp.asarray(x)) is xp.Array
    y = xp.asarray(x, dtype=xp.float32)
    assert type(y) is xp.Array and y.dtype == xp.float32


def test_asarray_of_nested_arrays_on_numpy():
    xp = pycograd_xp.namespace(np)
    z = xp.asarray([xp.asarray(1.0), xp.asarray(2.0)])
    assert type(z) is xp.Array and z.shape == (2,)


def test_numpy_cannot_absorb_our_arrays():
    """NumPy's operator hands the call to our array (its ``__array_ufunc__``): the result is one
    of ours, never an ndarray; and so is it with ours on the left (our operator leaves the
    ndarray to NumPy's reflected one). The namespace's functions take only its arrays."""
    xp = pycograd_xp.namespace(np)
    x = xp.asarray([1.0, 2.0])
    for r in (np.ones(2) + x, x + np.ones(2)):
        assert type(r) is xp.Array
        np.testing.assert_array_equal(np.asarray(r), [2.0, 3.0])
    with pytest.raises(TypeError, match=r"add\(\): got a numpy\.ndarray"):
        xp.add(x, np.ones(2))


def test_tuple_and_namedtuple_results(xp):
    x = xp.asarray([3.0, 1.0, 3.0])
    u = xp.unique_counts(x)
    assert type(u.values) is xp.Array and type(u.counts) is xp.Array
    assert u._fields == ("values", "counts")
    parts = xp.unstack(xp.ones((2, 3)))
    assert isinstance(parts, tuple) and all(type(p) is xp.Array for p in parts)
    assert isinstance(xp.meshgrid(x, x), tuple)
    assert isinstance(xp.broadcast_arrays(x, x), tuple)
