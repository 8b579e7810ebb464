"""array-api-extra's whole public API (``array_api_extra.__all__``) on pycograd_xp arrays: values
against array-api-extra on NumPy, gradients against finite differences.

``at(x)[idx].<op>(y)`` writes into ``x`` itself when ``x`` is writeable (pycograd_xp arrays are,
for array-api-compat): those cases differentiate through writes into the function's own
argument.
"""

from __future__ import annotations

import numpy as np
import pytest
from _clients_common import XF, Case, frozen, grad_fd, make_tests

import pycograd_xp
from conformance.gradcheck import to_numpy

xpx = pytest.importorskip("array_api_extra")

R = np.random.default_rng(20240602)
A = R.standard_normal((4, 5))
B = R.standard_normal((2, 5))
C = R.standard_normal((3, 2))
SQ = R.standard_normal((4, 4))
V = R.standard_normal(6)
W = R.standard_normal(6)
PV = R.uniform(0.5, 2.0, 6)
NANS = np.array([0.3, np.nan, -1.2, 0.7, np.nan, 2.1])
INFS = np.array([0.3, np.nan, -1.2, np.inf, 0.7, -np.inf, 2.1])
NAN2 = np.array([[0.3, np.nan, -1.2], [np.nan, 0.7, 1.9]])
Z = R.standard_normal(5) + 1j * R.standard_normal(5)
DISTINCT = np.array([0.7, -1.3, 2.2, 0.1, -0.4, 1.6, -2.5])

frozen(globals())


def _at(method, idx, *, value=None, copy=None):
    """``at(x)[idx].<method>(y)`` with ``y`` a differentiated array (``value``: its shape) or
    the Python scalar 1.7."""
    if value is None:
        return Case(lambda xp, x: getattr(xpx.at(x)[idx], method)(1.7, copy=copy), (A,))
    y = R.uniform(0.5, 1.5, value)
    return Case(lambda xp, x, y: getattr(xpx.at(x)[idx], method)(y, copy=copy), (A, y))


def _alias(xp, x):
    """A write through ``at`` into an intermediate that is used again afterwards."""
    y = x * 1.5
    z = xpx.at(y)[0, :].set(y[1, :] * 2)  # writes into y: z is y
    return y + z + x


def _copy(xp, x):
    z = xpx.at(x)[1:3, :].multiply(2.0, copy=True)  # x itself unchanged
    return z * x


def _int_index(xp, x, v):
    return xpx.at(x)[xp.asarray([0, 2, 5])].add(v)


def _duplicate_index(xp, x, v):
    # NumPy's rule: the last of duplicate indices wins (the standard leaves it unspecified).
    return xpx.at(x)[xp.asarray([0, 2, 0])].set(v)


# The standard has no integer-array indices in __setitem__; array-api-strict refuses them.
STRICT_FANCY_SETITEM = XF(
    "array_api_extra.at(x)[int_array].<op> writes x[int_array] = ...; "
    "integer-array indices in __setitem__ are outside the Array API "
    "standard and array-api-strict raises IndexError",
    backends=("array_api_strict",),
    raises=IndexError,
)


CASES: dict[str, Case] = {
    # -- at ------------------------------------------------------------------------------
    "at.set": _at("set", (1, slice(None))),
    "at.set-array": _at("set", (slice(1, 3), slice(None)), value=(2, 5)),
    "at.set-self": Case(lambda xp, x: xp.sum(xpx.at(x)[0, :].set(x[1, :] * 2) ** 2), (A,)),
    "at.set-self-1d": Case(lambda xp, x: xp.sum(xpx.at(x)[0].set(x[1] * 2) ** 2), (V,)),
    "at.set-copy": Case(lambda xp, x: xpx.at(x)[0, :].set(x[1, :] * 2, copy=True) + x, (A,)),
    "at.set-alias": Case(_alias, (A,)),
    "at.add": _at("add", (slice(None), 0), value=(4,)),
    "at.subtract": _at("subtract", (slice(0, 2), slice(1, 4)), value=(2, 3)),
    "at.multiply": _at("multiply", (slice(None), slice(2, None)), value=(3,)),
    "at.multiply-copy": Case(_copy, (A,)),
    "at.divide": _at("divide", (2, slice(None)), value=(5,)),
    "at.power": Case(lambda xp, x, y: xpx.at(x)[1, :].power(y), (np.abs(A) + 0.5, PV[:5])),
    "at.min": _at("min", (slice(None), 1), value=(4,)),
    "at.max": _at("max", (3, slice(None)), value=(5,)),
    "at.set-mask": Case(lambda xp, x: xpx.at(x)[x > 0].set(0.25), (A,)),
    "at.multiply-mask": Case(lambda xp, x: xpx.at(x, x < 0).multiply(-3.0), (A,)),
    "at.set-mask-self": Case(lambda xp, x: xp.sum(xpx.at(x)[x < 0].set(x[x < 0] ** 2) * x), (A,)),
    "at.add-int-index": Case(_int_index, (V, PV[:3]), value_xfail=STRICT_FANCY_SETITEM),
    "at.set-duplicate-index": Case(_duplicate_index, (V, PV[:3]), value_xfail=STRICT_FANCY_SETITEM),
    # -- the rest of the API -------------------------------------------------------------
    "angle": Case(lambda xp, z: xpx.angle(z), (Z,)),
    "angle-deg": Case(lambda xp, z: xpx.angle(z, deg=True), (Z,)),
    "apply_where": Case(lambda xp, x: xpx.apply_where(x > 0, x, xp.log, xp.exp), (A,)),
    "apply_where-two": Case(
        lambda xp, x, y: xpx.apply_where(x > 0, (x, y), lambda a, b: a * b, fill_value=-1.0),
        (A, A[::-1]),
    ),
    "argpartition": Case(
        lambda xp, x: xp.take(x, xpx.argpartition(x, 3))[3], (DISTINCT,), grad=False
    ),
    "atleast_nd": Case(lambda xp, x: xpx.atleast_nd(x, ndim=3), (V,)),
    "broadcast_shapes": Case(
        lambda xp: xpx.broadcast_shapes((2, 1, 3), (4, 1), ()), (), grad=False
    ),
    "cov": Case(lambda xp, m: xpx.cov(m), (A,)),
    "cov-axis0-correction0": Case(lambda xp, m: xpx.cov(m, axis=0, correction=0), (A,)),
    "cov-weights": Case(
        lambda xp, m, w: xpx.cov(m, aweights=w, fweights=xp.asarray([1, 2, 1, 3, 2])), (A, PV[:5])
    ),
    "create_diagonal": Case(lambda xp, x: xpx.create_diagonal(x, offset=1), (V,)),
    "create_diagonal-batch": Case(lambda xp, x: xpx.create_diagonal(x, offset=-2), (B,)),
    "deg2rad": Case(lambda xp, x: xpx.deg2rad(x), (V,)),
    "rad2deg": Case(lambda xp, x: xpx.rad2deg(x), (V,)),
    "diag_indices": Case(lambda xp, x: x[xpx.diag_indices(4, xp=xp)], (SQ,)),
    "tril_indices": Case(lambda xp, x: x[xpx.tril_indices(4, offset=-1, xp=xp)], (SQ,)),
    "triu_indices": Case(lambda xp, x: x[xpx.triu_indices(4, m=5, xp=xp)], (A,)),
    "expand_dims": Case(lambda xp, x: xpx.expand_dims(x, axis=(0, 2)), (B,)),
    "isclose": Case(lambda xp, a, b: xpx.isclose(a, b, atol=0.5), (V, W), grad=False),
    "isin": Case(
        lambda xp, a, b: xpx.isin(a, b),
        (np.array([1.0, 2.0, 3.0, 4.0]), np.array([2.0, 4.0, 6.0])),
        grad=False,
    ),
    "kron": Case(lambda xp, a, b: xpx.kron(a, b), (C, B)),
    "lazy_apply": Case(
        lambda xp, x: xpx.lazy_apply(lambda a: a**2 + 1, x, shape=x.shape, dtype=x.dtype), (A,)
    ),
    # as_numpy=True hands NumPy arrays to the function by design: a value, not a gradient.
    "lazy_apply-as_numpy": Case(
        lambda xp, x: xpx.lazy_apply(np.cumsum, x, as_numpy=True, shape=x.shape, dtype=x.dtype),
        (V,),
        grad=False,
    ),
    "nan_to_num": Case(lambda xp, x: xpx.nan_to_num(x, fill_value=-9.0), (NANS,)),
    # +-inf become +-finfo.max: finite differences through them lose all precision.
    "nan_to_num-inf": Case(lambda xp, x: xpx.nan_to_num(x), (INFS,), grad=False),
    "nanmax": Case(lambda xp, x: xpx.nanmax(x, axis=1), (NAN2,)),
    "nanmin": Case(lambda xp, x: xpx.nanmin(x), (NAN2,)),
    "nanmean": Case(lambda xp, x: xpx.nanmean(x, axis=0), (NAN2,)),
    "nansum": Case(lambda xp, x: xpx.nansum(x), (NAN2,)),
    "nunique": Case(
        lambda xp, x: xpx.nunique(x), (np.array([1.0, 2.0, 2.0, 5.0, 1.0]),), grad=False
    ),
    "one_hot": Case(
        lambda xp: xpx.one_hot(xp.asarray([0, 2, 1, 2]), 3, dtype=xp.float64), (), grad=False
    ),
    "one_hot-axis0": Case(lambda xp: xpx.one_hot(xp.asarray([3, 0]), 4, axis=0), (), grad=False),
    "pad": Case(lambda xp, x: xpx.pad(x, 2), (A,)),
    "pad-widths": Case(lambda xp, x: xpx.pad(x, ((1, 0), (0, 2)), constant_values=1.5), (A,)),
    "partition": Case(lambda xp, x: xp.sort(xpx.partition(x, 2)), (DISTINCT,)),
    "partition-kth": Case(
        lambda xp, x: xpx.partition(x, 2, axis=0)[2, :], (R.permutation(20).reshape(5, 4) * 0.1,)
    ),
    "searchsorted": Case(lambda xp, a, v: xpx.searchsorted(a, v), (np.sort(V), W), grad=False),
    "searchsorted-right": Case(
        lambda xp, a, v: xpx.searchsorted(a, v, side="right"),
        (np.array([0.0, 1.0, 1.0, 2.0]), np.array([1.0, 1.5])),
        grad=False,
    ),
    "setdiff1d": Case(
        lambda xp, a, b: xpx.setdiff1d(a, b),
        (np.array([5.0, 1.0, 3.0, 1.0, 7.0]), np.array([3.0, 9.0])),
        grad=False,
    ),
    "sinc": Case(lambda xp, x: xpx.sinc(x), (V,)),
    "union1d": Case(
        lambda xp, a, b: xpx.union1d(a, b),
        (np.array([5.0, 1.0, 3.0]), np.array([3.0, 9.0, 1.0])),
        grad=False,
    ),
    "unravel_index": Case(
        lambda xp: xpx.unravel_index(xp.asarray([0, 7, 11]), (3, 4)), (), grad=False
    ),
}

test_value, test_grad, test_xfail_list_is_current = make_tests(CASES, __file__)


def test_cases_cover_the_public_api():
    tested = {name.split("-")[0].split(".")[0] for name in CASES}
    untested = set(xpx.__all__) - tested - {"__version__", "default_dtype", "testing"}
    assert not untested, f"array_api_extra functions without a case: {sorted(untested)}"


def test_default_dtype(xp):
    assert xpx.default_dtype(xp) == xp.float64
    assert xpx.default_dtype(xp, "complex floating") == xp.complex128
    assert xpx.default_dtype(xp, "integral") == xp.int64
    assert xpx.default_dtype(xp, "indexing") == xp.int64


def test_testing_helpers(xp):
    a = xp.asarray(A)
    xpx.testing.assert_equal(a, xp.asarray(A))
    xpx.testing.assert_close(a + 1e-12, xp.asarray(A))
    xpx.testing.assert_close_nulp(a, xp.asarray(A))
    xpx.testing.assert_less(a, a + 1.0)
    with pytest.raises(AssertionError):
        xpx.testing.assert_equal(a, a + 1.0)


def test_testing_helpers_on_traced_arrays(xp):
    """The testing helpers, like any NumPy conversion, refuse arrays being differentiated."""

    def f(x):
        xpx.testing.assert_close(x, x)
        return xp.sum(x)

    with pytest.raises(TypeError, match="stop_gradient"):
        pycograd_xp.grad(f)(xp.asarray(A))


def test_lazy_xp_function_marks_for_the_testing_plugin():
    def f(x):
        return x + 1

    xpx.testing.lazy_xp_function(f)
    assert callable(f)


def test_at_write_gradient_elementwise(xp):
    """The brief's example, checked entry by entry: d/dx sum(at(x)[0].set(2 x[1]) ** 2)."""
    g = grad_fd(xp, lambda x: xp.sum(xpx.at(x)[0, :].set(x[1, :] * 2) ** 2), A)
    expected = 2 * A
    expected[0] = 0
    expected[1] = 2 * A[1] + 8 * A[1]
    np.testing.assert_allclose(g, expected, rtol=1e-12)


def test_at_leaves_the_differentiated_input_intact(xp):
    """Under grad, the caller's array keeps its value after ``at`` wrote into the function's
    argument, and so does the value the function returns alongside."""
    x = xp.asarray(A)

    def f(x):
        y = xpx.at(x)[0, :].set(100.0)
        return xp.sum(y * y)

    v, g = pycograd_xp.value_and_grad(f)(x)
    np.testing.assert_array_equal(to_numpy(x), A)
    expected = A.copy()
    expected[0] = 100.0
    assert float(to_numpy(v)) == pytest.approx(np.sum(expected**2))
    ge = 2 * A
    ge[0] = 0
    np.testing.assert_allclose(to_numpy(g), ge)
