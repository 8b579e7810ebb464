"""``x[key] = value`` on Cubed's immutable arrays: the new array made of recorded functions
(``pycograd_xp.namespace._immutable``), equal to NumPy's write for every basic key and boolean
mask drawn, and differentiated like NumPy's (the gradient to ``x`` outside the region, to
``value`` inside it)."""

from __future__ import annotations

import numpy as np
import pytest

import pycograd_xp as pg

cubed = pytest.importorskip("cubed")

CX = pg.namespace(cubed)
NX = pg.namespace(np)


def _keys(shape, rng, count):
    """Basic keys for ``shape``: integers (negative too), slices (any step, empty), '...'."""

    def part(n):
        kind = rng.integers(0, 4)
        if kind == 0:
            return int(rng.integers(-n, n))
        if kind == 1:
            return slice(None)
        start, stop = (
            int(v) if rng.random() < 0.8 else None for v in rng.integers(-n - 1, n + 1, 2)
        )
        step = int(rng.choice([1, 2, 3, -1, -2]))
        return slice(start, stop, step)

    for _ in range(count):
        parts = [part(n) for n in shape[: rng.integers(1, len(shape) + 1)]]
        if rng.random() < 0.2:
            parts.insert(int(rng.integers(0, len(parts) + 1)), Ellipsis)
        yield tuple(parts) if len(parts) != 1 or rng.random() < 0.5 else parts[0]


@pytest.mark.parametrize("shape", [(7,), (4, 5), (3, 4, 2)])
def test_basic_writes_are_numpys(shape):
    rng = np.random.default_rng(sum(shape))
    base = rng.standard_normal(shape)
    for key in _keys(shape, rng, 25):
        want = base.copy()
        region = want[key].shape
        value = rng.standard_normal(region)
        want[key] = value
        x = CX.asarray(base)
        x[key] = CX.asarray(value)
        np.testing.assert_array_equal(np.asarray(x), want, err_msg=repr(key))
        # a scalar, and a value broadcast into the region
        want2 = base.copy()
        want2[key] = 2.5
        x2 = CX.asarray(base)
        x2[key] = 2.5
        np.testing.assert_array_equal(np.asarray(x2), want2, err_msg=repr(key))


def test_a_boolean_mask_write_and_errors():
    base = np.arange(12.0).reshape(3, 4)
    x = CX.asarray(base)
    x[x > 5] = -1.0
    want = base.copy()
    want[want > 5] = -1.0
    np.testing.assert_array_equal(np.asarray(x), want)
    row = CX.asarray(base)
    row[CX.asarray([True, False, True])] = 0.0  # a mask over the leading axis
    want = base.copy()
    want[np.array([True, False, True])] = 0.0
    np.testing.assert_array_equal(np.asarray(row), want)
    with pytest.raises(ValueError, match=r"the value must be a scalar"):
        x[x > 0] = CX.asarray([1.0, 2.0])
    with pytest.raises(IndexError, match=r"out of bounds for axis 0 with size 3"):
        x[3] = 1.0
    with pytest.raises(ValueError, match=r"cannot be written into a region of shape \(4,\)"):
        x[0] = CX.asarray([1.0, 2.0])
    with pytest.raises(IndexError, match=r"too many indices"):
        x[0, 0, 0] = 1.0


def test_writes_are_differentiated_as_numpys():
    """The gradient of a function that writes into an intermediate array, to the array and to
    the value written, on Cubed equals NumPy's (mutable, recorded) write."""
    rng = np.random.default_rng(0)
    base, value = rng.standard_normal((4, 5)), rng.standard_normal((2, 5))

    def f(xp):
        def loss(a, v):
            b = xp.sin(a)
            b[1:4:2, :] = v * 3.0
            b[0, -1] = v[0, 0]
            return xp.sum(b * b)

        return loss

    want = pg.grad(f(NX), argnums=(0, 1))(NX.asarray(base), NX.asarray(value))
    got = pg.grad(f(CX), argnums=(0, 1))(CX.asarray(base), CX.asarray(value))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-13)


def test_a_write_into_the_differentiated_argument_is_numpys():
    """Writing into the argument being differentiated: its overwritten element gets no
    gradient, on Cubed as on NumPy."""

    def loss(xp):
        def f(a):
            a[0] = 1.0
            return xp.sum(a * a)

        return f

    got = pg.grad(loss(CX))(CX.asarray(np.full(3, 2.0)))
    want = pg.grad(loss(NX))(NX.asarray(np.full(3, 2.0)))
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    np.testing.assert_array_equal(np.asarray(got), [0.0, 4.0, 4.0])


@pytest.mark.parametrize(
    "key",
    [
        lambda xp: xp.asarray([2, 0]),
        lambda xp: (slice(None), xp.asarray([-1, 1, -1])),  # a duplicate: the last write wins
        lambda xp: (1, xp.asarray([[0, 3], [3, 2]])),
    ],
    ids=["rows", "duplicate columns", "int and 2-D index"],
)
def test_an_integer_array_write_is_numpys_values_and_gradients(key):
    """One integer-array index (NumPy's, beyond the standard), placed without reading the index
    as data: values and the gradients to the array and the value, duplicates included."""
    rng = np.random.default_rng(1)
    base = rng.standard_normal((3, 4))
    region = base[key(np)].shape
    value = rng.standard_normal(region)

    def f(xp):
        def loss(a, v):
            b = a * 2.0
            b[key(xp)] = v
            return xp.sum(xp.sin(b))

        return loss

    want = base * 2.0
    want[key(np)] = value
    x = CX.asarray(base * 2.0)
    x[key(CX)] = CX.asarray(value)
    np.testing.assert_array_equal(np.asarray(x), want)
    gw = pg.grad(f(NX), argnums=(0, 1))(NX.asarray(base), NX.asarray(value))
    gc = pg.grad(f(CX), argnums=(0, 1))(CX.asarray(base), CX.asarray(value))
    for g, w in zip(gc, gw, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-13, atol=1e-15)


def _array_keys(shape, rng, count):
    """Keys with one integer array (0 to 2 axes, negative entries too) among integers, slices
    and an ellipsis (of no axes too) for ``shape``: where a slice or the ellipsis stands between
    the array and an integer, NumPy puts the array's axes first (``x[0, :, i]``,
    ``x[:, 0, ..., i]``), else where the array stands."""
    for _ in range(count):
        nd = len(shape)
        at = int(rng.integers(0, nd))
        parts: list = []
        for axis, n in enumerate(shape):
            if axis == at:
                dims = tuple(int(d) for d in rng.integers(1, 3, int(rng.integers(0, 3))))
                parts.append(rng.integers(-n, n, dims))
            elif rng.random() < 0.5:
                parts.append(int(rng.integers(-n, n)))
            else:
                step = int(rng.choice([1, 2, -1]))
                parts.append(slice(None, None, step))
        if rng.random() < 0.5:  # an ellipsis for a run of axes the array is not in, or none
            i = int(rng.integers(0, nd + 1))
            j = i if rng.random() < 0.5 else int(rng.integers(i, nd + 1))
            if i <= at < j:
                i = j = at
            parts[i:j] = [Ellipsis]
        yield tuple(parts)


def _ours(xp, key):
    return tuple(xp.asarray(p) if isinstance(p, np.ndarray) else p for p in key)


@pytest.mark.slow  # 9-21 s: run by .ci/run's slow checks
@pytest.mark.parametrize("shape", [(3, 4, 2), (2, 3, 3), (4, 3)])
def test_keys_with_an_integer_array_read_and_write_as_numpys(shape):
    """Reads, writes and their gradients for keys with one integer array among integers,
    slices and an ellipsis (a generator's), against NumPy's. Cubed read ``x[:, 0, ..., i]`` and
    wrote ``x[0, :, i]`` with the array's axes in place, where NumPy puts them first: a
    transposed write when the region was square (a wrong value), a refused one otherwise."""
    rng = np.random.default_rng(len(shape) * 10 + shape[0])
    base = rng.standard_normal(shape)
    n = shape[-1]
    apart = [(0, slice(None), rng.integers(-n, n, n)), (slice(None), 0, ..., rng.integers(0, n, 2))]
    for key in (apart if len(shape) == 3 else []) + list(_array_keys(shape, rng, 8)):
        region = base[key].shape
        got = np.asarray(CX.asarray(base)[_ours(CX, key)])
        np.testing.assert_array_equal(got, base[key], err_msg=repr(key))
        value = rng.standard_normal(region)
        want = base.copy()
        want[key] = value
        x = CX.asarray(base)
        x[_ours(CX, key)] = CX.asarray(value)
        np.testing.assert_array_equal(np.asarray(x), want, err_msg=repr(key))

        def loss(a, v, xp, key=key):
            b = a * 2.0
            b[_ours(xp, key)] = v * v
            return xp.sum(xp.sin(b)) + xp.sum(b[_ours(xp, key)] ** 2)

        gw = pg.grad(loss, argnums=(0, 1))(NX.asarray(base), NX.asarray(value), NX)
        gc = pg.grad(loss, argnums=(0, 1))(CX.asarray(base), CX.asarray(value), CX)
        for g, w in zip(gc, gw, strict=True):
            np.testing.assert_allclose(
                np.asarray(g), np.asarray(w), rtol=1e-12, atol=1e-14, err_msg=repr(key)
            )


@pytest.mark.parametrize(
    "key",
    [([0, 1], [4, 1]), ([0, 1], [-5, 1]), ([3], [0]), (1, [5]), ([[0], [2]], [0, 9])],
    ids=repr,
)
def test_an_index_out_of_range_beside_another_is_refused_as_numpys(key):
    """Several index arrays take one flat index on Cubed: an index out of range (past the end,
    or below minus the axis) would pick another row's element there, where NumPy refuses it."""
    base = np.arange(12.0).reshape(3, 4)
    np_key = tuple(np.asarray(k) if type(k) is list else k for k in key)
    with pytest.raises(IndexError):
        base[np_key]
    with pytest.raises(IndexError, match="out of bounds for axis"):
        CX.asarray(base)[_ours(CX, np_key)]
