"""``pycograd_xp._reductions``: NumPy's reductions called the way NumPy's functions call them give
NumPy's results exactly (values, dtypes, shapes, warnings and errors), and every other case is
handed to the namespace's own function."""

from __future__ import annotations

import warnings
from functools import partial

import array_api_compat.numpy as cnp
import array_api_strict
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import pycograd_xp as pg
from pycograd_xp import _reductions as fast

DTYPES = [
    np.float16,
    np.float32,
    np.float64,
    np.complex64,
    np.complex128,
    np.int8,
    np.int32,
    np.int64,
    np.uint16,
    np.bool_,
]
FLOATS = [np.float16, np.float32, np.float64, np.complex64, np.complex128]


def same(a, b) -> None:
    """The same value bit for bit, of the same type, dtype and shape."""
    assert type(a) is type(b)
    assert a.dtype == b.dtype and np.shape(a) == np.shape(b)
    assert np.asarray(a).tobytes() == np.asarray(b).tobytes()


@st.composite
def case(draw, dtypes):
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=6))
    x = draw(hnp.arrays(dtype, shape))
    axes = draw(
        st.one_of(
            st.none(),
            st.integers(-x.ndim, x.ndim - 1) if x.ndim else st.none(),
            st.lists(st.integers(0, max(x.ndim - 1, 0)), unique=True, max_size=x.ndim).map(tuple),
        )
    )
    layout = draw(st.sampled_from(["c", "f", "strided"]))
    if layout == "f":
        x = np.asfortranarray(x)
    elif layout == "strided" and x.ndim:
        x = np.repeat(x, 2, axis=-1)[..., ::2]  # a view with gaps
    return x, axes, draw(st.booleans())


def outcome(f):
    """f()'s result, or the type and message of what it raised, with the warnings it gave."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            r = f()
        except Exception as e:  # (compared by the caller)
            r = (type(e), str(e))
    return r, [(x.category, str(x.message)) for x in w]


@pytest.mark.parametrize("bk", [np, cnp], ids=["numpy", "compat"])
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_each_reduction_is_numpys_bit_for_bit(bk, data):
    x, axis, keepdims = data.draw(case(DTYPES))
    pairs = [
        (
            partial(fast.sum, bk, x, axis, None, keepdims),
            partial(np.sum, x, axis, None, None, keepdims),
        ),
        (
            partial(fast.prod, bk, x, axis, None, keepdims),
            partial(np.prod, x, axis, None, None, keepdims),
        ),
        (partial(fast.max, bk, x, axis, keepdims), partial(np.max, x, axis, None, keepdims)),
        (partial(fast.min, bk, x, axis, keepdims), partial(np.min, x, axis, None, keepdims)),
    ]
    if x.dtype.kind in "fc":
        wide = np.float64 if x.dtype.kind == "f" else np.complex128
        pairs += [
            (
                partial(fast.mean, bk, x, axis, keepdims),
                partial(np.mean, x, axis, None, None, keepdims),
            ),
            (
                partial(fast.sum, bk, x, axis, wide, keepdims),
                partial(np.sum, x, axis, wide, None, keepdims),
            ),
        ]
    for ours, numpys in pairs:
        (a, wa), (b, wb) = outcome(ours), outcome(numpys)
        assert wa == wb
        if isinstance(b, tuple):  # an error: the same one
            assert a == b
        else:
            same(a, b)


def test_mean_of_many_elements_divides_by_the_exact_count():
    # 2**24 + 1 elements: as a float32 the count would round to 2**24; NumPy divides by the
    # exact count (an intp), and so do we
    x = np.ones(2**24 + 1, np.float32)
    x[0] = 3.0
    same(fast.mean(np, x), np.mean(x))
    same(fast.mean(cnp, x[None], axis=1, keepdims=True), np.mean(x[None], axis=1, keepdims=True))


@pytest.mark.parametrize("dtype", FLOATS)
def test_mean_edges(dtype):
    for shape, axis in [((3, 0), 1), ((0, 5), 1), ((0,), None), ((), None), ((4, 5), ())]:
        x = np.arange(np.prod(shape, dtype=int), dtype=dtype).reshape(shape)
        (a, wa), (b, wb) = (
            outcome(partial(fast.mean, np, x, axis)),
            outcome(partial(np.mean, x, axis)),
        )
        assert wa == wb
        np.testing.assert_array_equal(a, b)
        assert type(a) is type(b) and a.dtype == b.dtype


def test_errors_are_numpys():
    x = np.ones((2, 3), np.float32)
    for f, g in [
        (lambda: fast.sum(np, x, 2), lambda: np.sum(x, 2)),
        (lambda: fast.mean(np, x, (0, 0)), lambda: np.mean(x, (0, 0))),
        (lambda: fast.max(np, np.ones(0)), lambda: np.max(np.ones(0))),
        (lambda: fast.mean(np, x, 5), lambda: np.mean(x, 5)),
    ]:
        (a, _), (b, _) = outcome(f), outcome(g)
        assert isinstance(a, tuple) and a[0] is b[0]


def test_anything_else_goes_to_the_namespace():
    calls = []

    class Spy:
        def __getattr__(self, name):
            def f(x, **kw):
                calls.append(name)
                return getattr(cnp, name)(np.asarray(x), **kw)

            return f

    spy = Spy()
    x = np.ones((2, 3), np.float32)
    for f in (fast.sum, fast.max, fast.min, fast.prod, fast.mean):
        f(spy, x)  # another namespace, even over NumPy's arrays

    class Sub(np.ndarray):
        pass

    fast.sum(np, x.view(Sub))  # (NumPy's own sum then: a subclass' method)
    assert calls == ["sum", "max", "min", "prod", "mean"]
    fast.mean(spy, x.astype(np.float16))
    assert calls[-1] == "mean"
    s = array_api_strict.asarray([1.0, 2.0])
    assert float(fast.sum(array_api_strict, s)) == 3.0
    assert float(fast.mean(array_api_strict, s)) == 1.5


def test_the_namespace_rows_and_rules_give_the_same_values():
    # the rows and the rules that call these: forward and gradient as NumPy's functions give
    xp = pg.namespace(np)
    rng = np.random.default_rng(0)
    z = rng.standard_normal((7, 5)).astype(np.float32)
    y = rng.integers(-5, 5, 7)

    def f(a):
        return (
            xp.mean(a)
            + xp.sum(xp.max(a, axis=0) * xp.min(a, axis=1, keepdims=True))
            + xp.prod(a[0])
            + pg.nn.cross_entropy(a, xp.asarray(y))
        )

    value, g = pg.value_and_grad(f)(xp.asarray(z))
    zz = z.astype(np.float64)
    lse = np.log(np.exp(zz - zz.max(1, keepdims=True)).sum(1)) + zz.max(1)
    ce = np.mean(lse - zz[np.arange(7), y % 5])
    want = zz.mean() + np.sum(zz.max(0) * zz.min(1, keepdims=True)) + np.prod(zz[0]) + ce
    assert abs(float(value) - want) < 1e-4
    assert np.asarray(pg.unwrap(g)).dtype == np.float32


@st.composite
def broadcast_case(draw):
    """An array (any layout) and a shape it may or may not broadcast to."""
    x, _, _ = draw(case(DTYPES))
    lead = draw(st.lists(st.integers(0, 4), max_size=2))
    shape = [draw(st.sampled_from([n, n, 3] if n == 1 else [n, n, n + 1])) for n in x.shape]
    return x, (*lead, *shape)


@pytest.mark.parametrize("bk", [np, cnp], ids=["numpy", "compat"])
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_broadcast_to_is_numpys_view(bk, data):
    # the view sum's and mean's cotangents are: NumPy's shape, strides, flags and values, read
    # only, over the same memory; NumPy's error where the shapes do not broadcast
    x, shape = data.draw(broadcast_case())
    (a, _), (b, _) = (
        outcome(partial(fast.broadcast_to, bk, x, shape)),
        outcome(partial(np.broadcast_to, x, shape)),
    )
    if isinstance(b, tuple):
        assert isinstance(a, tuple) and a[0] is b[0]
        return
    assert type(a) is np.ndarray and a.shape == b.shape and a.dtype == b.dtype
    assert a.strides == b.strides
    assert (a.flags.c_contiguous, a.flags.f_contiguous) == (
        b.flags.c_contiguous,
        b.flags.f_contiguous,
    )
    assert not a.flags.writeable
    assert a.tobytes() == b.tobytes()
    assert a.size == 0 or np.shares_memory(a, x)
