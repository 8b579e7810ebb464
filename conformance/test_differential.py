"""Differential tests: our namespaces against array_api_strict called directly.

``hypothesis.extra.array_api`` draws array_api_strict arrays; each function runs on
array_api_strict itself (the oracle), on ``namespace(array_api_strict)`` and on
``namespace(numpy)``, and values, dtypes and shapes must agree. These always run (no checkout of
the official suite is needed).
"""

from __future__ import annotations

import array_api_strict as strict
import numpy as np
import pytest
from array_api_strict._array_object import Array as StrictArray
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.array_api import make_strategies_namespace

import pycograd_xp
from pycograd_xp.ops import REGISTRY

xps = make_strategies_namespace(strict)
SXP = pycograd_xp.namespace(strict)
NXP = pycograd_xp.namespace(np)
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))

INTEGERS = st.one_of(xps.integer_dtypes(), xps.unsigned_integer_dtypes())
DTYPES = {
    "all": xps.scalar_dtypes(),
    "numeric": xps.numeric_dtypes(),
    "real numeric": xps.real_dtypes(),
    "integer": INTEGERS,
    "integer or boolean": st.one_of(INTEGERS, xps.boolean_dtypes()),
    "boolean": xps.boolean_dtypes(),
    "real floating-point": xps.floating_dtypes(),
    "complex floating-point": xps.complex_dtypes(),
    "floating-point": st.one_of(xps.floating_dtypes(), xps.complex_dtypes()),
}
SHAPES = xps.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)


def as_numpy(x) -> np.ndarray:
    if isinstance(x, pycograd_xp.Array):
        x = pycograd_xp.unwrap(x)
    return np.asarray(x)


def assert_same(got, want) -> None:
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert_same(g, w)
        return
    assert isinstance(got, pycograd_xp.Array), type(got)
    assert tuple(got.shape) == tuple(want.shape)
    g, w = as_numpy(got), as_numpy(want)
    assert str(g.dtype) == str(w.dtype)
    if np.iscomplexobj(w):
        # NumPy's complex loops round differently by path (vectorised or not, fused
        # multiply-add or not): a complex64 product differed in the last place between a
        # (1, 1) array times a 0-d array and the same via array-api-strict. So a complex value
        # must match within a few units of rounding of its magnitude; and where a part
        # overflowed, the other part is a difference past overflow (-3.59e292+infj against
        # -3.99e292+infj), so there each part's kind must match (finite, +inf, -inf, nan).
        def kind(x):
            return np.where(np.isnan(x), 2.0, np.where(np.isinf(x), 3.0 * np.sign(x), 0.0))

        nan = np.isnan(w)  # a NaN part: NaN as a whole, as assert_array_equal has it
        np.testing.assert_array_equal(np.isnan(g), nan)
        over = ~np.isfinite(w) & ~nan
        for part in (np.real, np.imag):
            np.testing.assert_array_equal(kind(part(g))[over], kind(part(w))[over])
        over |= nan
        g, w = np.where(over, 0, g), np.where(over, 0, w)
        assert np.all(np.abs(g - w) <= 8 * np.finfo(w.dtype).eps * np.abs(w)), (g, w)
        return
    np.testing.assert_array_equal(g, w)


def to_ns(ns, a):
    """A strict array (or a list of them) as an array of our namespace ``ns``."""
    if isinstance(a, list):
        return [to_ns(ns, e) for e in a]
    if isinstance(a, StrictArray):
        return ns.asarray(a if ns is SXP else as_numpy(a))
    return a


def run_three(fname: str, args: tuple, kwargs: dict | None = None) -> None:
    """Call ``fname`` on strict directly, then on our two namespaces, and compare."""
    kwargs = kwargs or {}
    scope, _, short = fname.rpartition(".")

    def fn(ns):
        return getattr(getattr(ns, scope) if scope else ns, short)

    try:
        want = fn(strict)(*args, **kwargs)
    except Exception as e:  # the oracle refuses: we must refuse too, on the strict backend
        with pytest.raises(type(e)):
            fn(SXP)(*[to_ns(SXP, a) for a in args], **kwargs)
        return
    for ns in (SXP, NXP):
        got = fn(ns)(*[to_ns(ns, a) for a in args], **kwargs)
        assert_same(got, want)


# We honour the standard's special cases at infinities where NumPy (and so strict) does not.
FINITE_ONLY = {"floor_divide", "expm1"}
UNARY = sorted(n for n, p in REGISTRY.items() if p.kind == "unary")
BINARY = sorted(n for n, p in REGISTRY.items() if p.kind == "binary")


@pytest.mark.parametrize("fname", UNARY)
@SETTINGS
@given(data=st.data())
def test_unary(fname, data):
    dtype = data.draw(DTYPES[REGISTRY[fname].dtypes], label="dtype")
    elements = {"allow_infinity": False} if fname in FINITE_ONLY else None
    x = data.draw(xps.arrays(dtype, SHAPES, elements=elements), label="x")
    with np.errstate(all="ignore"):
        run_three(fname, (x,))


@pytest.mark.parametrize("fname", BINARY)
@SETTINGS
@given(data=st.data())
def test_binary(fname, data):
    dtype = data.draw(DTYPES[REGISTRY[fname].dtypes], label="dtype")
    shapes = xps.mutually_broadcastable_shapes(2, max_dims=3, max_side=3)
    s1, s2 = data.draw(shapes, label="shapes").input_shapes
    elements = {"min_value": 0, "max_value": 7} if "shift" in fname else None
    if fname in FINITE_ONLY and dtype in (strict.float32, strict.float64):
        elements = {"allow_infinity": False}
    x1 = data.draw(xps.arrays(dtype, s1, elements=elements), label="x1")
    x2 = data.draw(xps.arrays(dtype, s2, elements=elements), label="x2")
    with np.errstate(all="ignore"):
        run_three(fname, (x1, x2))


REDUCTIONS = {
    "sum": "numeric",
    "prod": "numeric",
    "max": "real numeric",
    "min": "real numeric",
    "mean": "real floating-point",
    "std": "real floating-point",
    "var": "real floating-point",
    "all": "all",
    "any": "all",
    "argmax": "real numeric",
    "argmin": "real numeric",
    "count_nonzero": "all",
}


@pytest.mark.parametrize("fname", sorted(REDUCTIONS))
@SETTINGS
@given(data=st.data())
def test_reductions(fname, data):
    dtype = data.draw(DTYPES[REDUCTIONS[fname]], label="dtype")
    x = data.draw(
        xps.arrays(dtype, xps.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4)),
        label="x",
    )
    kwargs = {"keepdims": data.draw(st.booleans(), label="keepdims")}
    if fname in ("argmax", "argmin"):
        kwargs["axis"] = data.draw(st.sampled_from([None, *range(-x.ndim, x.ndim)]), label="axis")
    else:
        kwargs["axis"] = data.draw(st.none() | xps.valid_tuple_axes(x.ndim), label="axis")
    if fname in ("std", "var"):
        kwargs["correction"] = data.draw(st.sampled_from([0, 1]), label="correction")
    with np.errstate(all="ignore"):
        run_three(fname, (x,), kwargs)


@SETTINGS
@given(data=st.data())
def test_manipulation(data):
    x = data.draw(xps.arrays(xps.scalar_dtypes(), xps.array_shapes(min_dims=1, max_dims=3)))
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1), label="axis")
    run_three("flip", (x,), {"axis": axis})
    run_three("roll", (x,), {"shift": 1, "axis": axis})
    run_three("expand_dims", (x,), {"axis": axis})
    run_three("permute_dims", (x,), {"axes": tuple(reversed(range(x.ndim)))})
    run_three("reshape", (x,), {"shape": (-1,)})
    run_three("concat", ([x, x],), {"axis": axis})
    run_three("stack", ([x, x],), {"axis": axis})
    run_three("unstack", (x,), {"axis": axis})
    run_three("tile", (x, (2,)))
    run_three("moveaxis", (x, axis, 0))


@SETTINGS
@given(data=st.data())
def test_linear_algebra(data):
    dtype = data.draw(xps.floating_dtypes(), label="dtype")
    n, k, m = (data.draw(st.integers(1, 3)) for _ in range(3))
    a = data.draw(xps.arrays(dtype, (n, k), elements={"min_value": -4, "max_value": 4}))
    b = data.draw(xps.arrays(dtype, (k, m), elements={"min_value": -4, "max_value": 4}))
    run_three("matmul", (a, b))
    run_three("tensordot", (a, b), {"axes": 1})
    run_three("vecdot", (a, a))
    run_three("matrix_transpose", (a,))
    run_three("linalg.outer", (a[0, ...], b[:, 0]))
