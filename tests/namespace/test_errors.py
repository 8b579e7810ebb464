"""Bad input: each error names the function, the value, and the way out."""

from __future__ import annotations

import numpy as np
import pytest

import pycograd_xp


@pytest.fixture
def two():
    import array_api_strict

    return pycograd_xp.namespace(np), pycograd_xp.namespace(array_api_strict)


def test_mixing_namespaces_is_a_type_error(two):
    a_ns, b_ns = two
    a, b = a_ns.asarray([1.0]), b_ns.asarray([1.0])
    msg = "cannot mix arrays of pycograd_xp.numpy and pycograd_xp.array_api_strict"
    with pytest.raises(TypeError, match=msg):
        a + b
    with pytest.raises(TypeError, match=msg):
        a_ns.add(a, b)
    with pytest.raises(TypeError, match=msg):
        a_ns.sum(b)
    with pytest.raises(TypeError, match=msg):
        a_ns.concat([a, b])
    with pytest.raises(TypeError, match="cannot mix"):
        a_ns.sin(b)


def test_raw_backend_arrays_are_refused(xp):
    raw = np.ones(2)
    with pytest.raises(TypeError, match=r"sum\(\): got a numpy.ndarray.*asarray"):
        xp.sum(raw)
    with pytest.raises(TypeError, match=r"sin\(\): got a numpy.ndarray.*asarray"):
        xp.sin(raw)
    with pytest.raises(TypeError, match=r"add\(\): got a numpy.ndarray"):
        xp.add(xp.ones(2), raw)
    with pytest.raises(TypeError, match="at least one argument must be an array"):
        xp.add(1.0, 2.0)
    with pytest.raises(TypeError, match=r"expected an array, got list"):
        xp.sin([1.0])


@pytest.mark.parametrize(
    "call, category",
    [
        (lambda xp: xp.sin(xp.asarray([1, 2])), "floating-point"),
        (lambda xp: xp.logical_and(xp.asarray([1.0]), xp.asarray([True])), "boolean"),
        (lambda xp: xp.bitwise_and(xp.asarray([1.0]), xp.asarray([1.0])), "integer or boolean"),
        (lambda xp: xp.floor(xp.asarray([1 + 1j])), "real numeric"),
        (lambda xp: xp.prod(xp.asarray([True])), "numeric"),
        (lambda xp: xp.linalg.inv(xp.eye(2, dtype=xp.int64)), "floating-point"),
        (lambda xp: xp.fft.fft(xp.asarray([1.0, 2.0])), "complex floating-point"),
    ],
)
def test_wrong_dtype_category(xp, call, category):
    with pytest.raises(TypeError, match=f"takes {category} dtypes.*astype"):
        call(xp)


@pytest.mark.parametrize("fname", ["sum", "max", "mean", "argmax", "cumulative_sum", "flip"])
def test_axis_out_of_range(xp, fname):
    x = xp.ones((2, 3))
    with pytest.raises(
        pycograd_xp.AxisError,
        match=rf"{fname}\(\): axis 2 is out of range.*"
        r"\[-2, 1\]",
    ):
        getattr(xp, fname)(x, axis=2)
    with pytest.raises(IndexError):  # AxisError is an IndexError and a ValueError, like NumPy's
        getattr(xp, fname)(x, axis=-3)
    with pytest.raises(TypeError, match="axis must be an int"):
        getattr(xp, fname)(x, axis=1.0)


def test_arrays_are_not_constructed_directly(xp):
    with pytest.raises(TypeError, match="creation functions"):
        xp.Array([1.0])


def test_bad_api_version(xp):
    with pytest.raises(ValueError, match="api_version '1999.01' is not supported"):
        xp.asarray(1.0).__array_namespace__(api_version="1999.01")


def test_cubed_setitem_of_a_data_dependent_key_points_to_where(cxp):
    """Writes on Cubed's immutable arrays are functional (tests/test_cubed_setitem.py); a key
    they cannot take (two integer arrays, a mask with an array value) says what to use."""
    x = cxp.zeros((3, 3))
    with pytest.raises(IndexError, match="xp.where"):
        x[cxp.asarray([0, 1]), cxp.asarray([0, 1])] = 1.0
    with pytest.raises(ValueError, match="xp.where"):
        x[x > 0] = cxp.asarray([1.0])
