"""NumPy's own functions on arrays of ``namespace(numpy)`` (issue 19): ``__array_ufunc__`` and
``__array_function__`` (``pycograd_xp/numpy_api/``).

Every mapped ufunc and function is swept here: on arrays being differentiated its value equals
NumPy's own on the raw arrays (float64 and float32, dtype included) and, where it is
differentiable, its VJP passes the dot-product test against central differences of NumPy's own
function; ``test_every_mapped_name_has_a_case`` keeps the sweep complete. Then the methods
(``reduce``, ``accumulate``, ``outer``, ``at``), ``out=``, the refusals of functions without a
rule on arrays being differentiated, NumPy's own answer on arrays that are not, the nan
reductions (zero gradient at NaN), vmap and compile through the protocols, and xarray.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import pycograd_xp as pg
from conformance.gradcheck import check_vjp
from pycograd_xp import numpy_api as protocols

XP = pg.namespace(np)
rng = np.random.default_rng(19)


def U(*shape, lo=0.5, hi=2.0):
    return rng.uniform(lo, hi, shape)


def S(*shape):
    """Signed values away from zero."""
    a = rng.uniform(0.3, 2.0, shape)
    return a * np.where(rng.uniform(size=shape) < 0.5, -1.0, 1.0)


MASK = np.array([[True, False, True], [True, True, False]])


def SPD(n):
    a = rng.standard_normal((n, n))
    return a @ a.T + n * np.eye(n)


def _np(a):
    return np.asarray(pg.stop_gradient(a))


def _leaves(r):
    if isinstance(r, tuple | list):
        return [leaf for e in r for leaf in _leaves(e)]
    return [r]


def _tracked(*arrays):
    out = []
    for a in arrays:
        x = XP.asarray(a)
        if a.dtype.kind in "fc":
            x.requires_grad_()
        out.append(x)
    return out


def check_forward(f, args, dtype=np.float64, rtol=1e-12, atol=1e-12, grad=True):
    """``f`` on arrays being differentiated equals NumPy's own ``f`` on the raw arrays (values
    and dtypes), and a differentiable result carries a gradient (the rows ran, not NumPy)."""
    raw = [np.asarray(a).astype(dtype) if np.asarray(a).dtype.kind == "f" else a for a in args]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = f(*[np.array(a) for a in raw])
        got = f(*_tracked(*raw))
    got_l, want_l = _leaves(got), _leaves(want)
    assert len(got_l) == len(want_l)
    for g, w in zip(got_l, want_l, strict=True):
        assert isinstance(g, pg.Array), type(g)
        w = np.asarray(w)
        assert _np(g).dtype == w.dtype, (_np(g).dtype, w.dtype)
        assert _np(g).shape == w.shape
        np.testing.assert_allclose(_np(g), w, rtol=rtol, atol=atol)
    if grad:
        assert any(g.requires_grad for g in got_l if _np(g).dtype.kind in "fc")


def check_grad(f, args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        check_vjp(XP, f, *args, **kw)


# -- ufuncs: __call__ ------------------------------------------------------------------------------

UNARY = {
    "absolute": S,
    "fabs": S,
    "arccos": lambda *s: U(*s, lo=-0.8, hi=0.8),
    "arccosh": lambda *s: U(*s, lo=1.2, hi=3.0),
    "arcsin": lambda *s: U(*s, lo=-0.8, hi=0.8),
    "arcsinh": S,
    "arctan": S,
    "arctanh": lambda *s: U(*s, lo=-0.8, hi=0.8),
    "cbrt": S,
    "conjugate": S,
    "cos": S,
    "cosh": S,
    "deg2rad": S,
    "degrees": S,
    "exp": S,
    "exp2": S,
    "expm1": S,
    "log": U,
    "log10": U,
    "log1p": U,
    "log2": U,
    "negative": S,
    "positive": S,
    "rad2deg": S,
    "radians": S,
    "reciprocal": S,
    "sin": S,
    "sinh": S,
    "sqrt": U,
    "square": S,
    "tan": lambda *s: U(*s, lo=-1.2, hi=1.2),
    "tanh": S,
}
UNARY_NONDIFF = {
    "ceil": S,
    "floor": S,
    "rint": S,
    "trunc": S,
    "sign": S,
    "signbit": S,
    "isfinite": S,
    "isinf": S,
    "isnan": S,
    "logical_not": S,
}
MULTI = {"modf": S}
BINARY = {
    "add": (S, S),
    "subtract": (S, S),
    "multiply": (S, S),
    "divide": (S, S),
    "power": (U, S),
    "float_power": (U, S),
    "arctan2": (S, S),
    "hypot": (S, S),
    "logaddexp": (S, S),
    "logaddexp2": (S, S),
    "maximum": (S, S),
    "minimum": (S, S),
    "fmax": (S, S),
    "fmin": (S, S),
    "copysign": (S, S),
    "remainder": (lambda *s: U(*s, lo=0.1, hi=5.0), lambda *s: U(*s, lo=0.7, hi=1.3)),
    "fmod": (S, lambda *s: U(*s, lo=0.7, hi=1.3)),
    "heaviside": (S, S),
}
BINARY_NONDIFF = {
    "equal": (S, S),
    "not_equal": (S, S),
    "less": (S, S),
    "less_equal": (S, S),
    "greater": (S, S),
    "greater_equal": (S, S),
    "logical_and": (S, S),
    "logical_or": (S, S),
    "logical_xor": (S, S),
    "floor_divide": (S, S),
    "nextafter": (S, S),
}
MULTI_BINARY = {"divmod": (lambda *s: U(*s, lo=0.1, hi=5.0), lambda *s: U(*s, lo=0.7, hi=1.3))}
INTEGER = ["bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift", "invert"]
GUFUNCS = {
    "matmul": [((2, 3), (3, 4)), ((3,), (3, 2)), ((2, 2, 3), (3,))],
    "vecdot": [((2, 3), (2, 3)), ((3,), (2, 3))],
    "matvec": [((2, 3), (3,)), ((4, 2, 3), (3,))],
    "vecmat": [((3,), (3, 2)), ((2, 3), (2, 3, 4))],
}
LDEXP = "ldexp"
SHAPES = [(), (3,), (2, 3)]
PAIRS = [((2, 3), (2, 3)), ((2, 3), (3,)), ((1, 3), (2, 1)), ((), (2, 3))]


def _ufunc_params():
    out = []
    for name, gen in {**UNARY, **UNARY_NONDIFF, **MULTI}.items():
        for sh in SHAPES:
            out.append(pytest.param(name, (gen(*sh),), id=f"{name}-{sh}"))
    for name, (g1, g2) in {**BINARY, **BINARY_NONDIFF, **MULTI_BINARY}.items():
        for s1, s2 in PAIRS:
            out.append(pytest.param(name, (g1(*s1), g2(*s2)), id=f"{name}-{s1}-{s2}"))
    for name, shapes in GUFUNCS.items():
        for s1, s2 in shapes:
            out.append(pytest.param(name, (S(*s1), S(*s2)), id=f"{name}-{s1}-{s2}"))
    return [p for p in out if hasattr(np, p.values[0])]


UFUNC_PARAMS = _ufunc_params()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name, args", UFUNC_PARAMS)
def test_ufunc_values_equal_numpys(name, args, dtype):
    ufunc = getattr(np, name)
    diff = name not in UNARY_NONDIFF and name not in BINARY_NONDIFF
    rtol = 1e-12 if dtype == np.float64 else 2e-6
    check_forward(ufunc, args, dtype, rtol=rtol, atol=rtol, grad=diff)


@pytest.mark.parametrize("name, args", UFUNC_PARAMS)
def test_ufunc_gradients_match_finite_differences(name, args):
    if name in UNARY_NONDIFF or name in BINARY_NONDIFF:
        pytest.skip("no gradient (integer, boolean or piecewise-constant values)")
    if name in ("divmod", "modf"):  # one differentiable output of two: the other is constant
        check_grad(lambda *xs: getattr(np, name)(*xs)[0 if name == "modf" else 1], args)
        return
    check_grad(getattr(np, name), args)


def test_ldexp():
    x, e = S(2, 3), np.array([[1, -2, 3], [0, 2, 1]])
    check_forward(np.ldexp, (x, e))
    check_grad(lambda a: np.ldexp(a, e), (x,))


@pytest.mark.parametrize("name", INTEGER)
def test_integer_ufuncs_through_vmap(name):
    """Integer ufuncs reach the rows where NumPy cannot take the call itself: inside vmap."""
    ufunc = getattr(np, name)
    a = rng.integers(0, 7, (3, 4))
    b = rng.integers(0, 3, (3, 4))
    args = (a,) if ufunc.nin == 1 else (a, b)
    got = pg.vmap(ufunc)(*[XP.asarray(v) for v in args])
    np.testing.assert_array_equal(_np(got), ufunc(*args))


def test_python_and_numpy_scalars_and_arrays_mix_in():
    x = S(2, 3)
    for f in (
        lambda a: np.add(a, 2.0),
        lambda a: np.multiply(3, a),
        lambda a: np.add(a * np.float64(2.0), np.ones(3)),
        lambda a: np.ones(3) + a,  # NumPy's operator hands the call over
        lambda a: np.divide(a, np.arange(1, 4)),  # integers cast as NumPy's loop does
        lambda a: np.exp(np.arange(3)) * a,
        lambda a: np.ones((2, 3)) * a,
        lambda a: np.float32(2.0) * a,
        lambda a: np.power(a, 2),
        lambda a: np.subtract(np.arange(3.0), a),
        # ours on the left: NumPy's operand goes to its reflected operator, so to the ufunc
        lambda a: a + np.ones(3),
        lambda a: a * np.float32(2.0) - np.arange(3.0) / a,
        lambda a: (a @ np.ones((3, 2))) ** np.int64(2),
        lambda a: a / np.full((2, 1), 4.0) + a * np.bool_(True),
        lambda a: a * np.asarray(a > np.zeros(3), dtype=np.float64),
    ):
        check_forward(f, (x,))
        check_forward(f, (x,), np.float32, rtol=2e-6, atol=2e-6)
        check_grad(f, (x,))


def test_operators_with_numpy_operands_promote_and_rebind_as_numpy():
    for o in (np.float32(2), np.float64(2), np.int64(2), np.bool_(True), np.arange(3.0)):
        for dt in (np.float32, np.float64):
            a = XP.asarray(np.ones(3, dtype=dt))
            for r, want in ((a * o, np.ones(3, dt) * o), (o * a, o * np.ones(3, dt))):
                assert isinstance(r, pg.Array) and r.dtype == want.dtype, (o, dt, r.dtype)
                np.testing.assert_array_equal(_np(r), want)
            assert bool(XP.all((a < o) == (np.ones(3, dt) < o)))
    b = XP.asarray(np.ones(3))
    alias = b
    b += np.arange(3.0)  # in place, as NumPy's: the same array object
    assert alias is b
    np.testing.assert_array_equal(_np(b), [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="in-place operation must keep this array's shape"):
        b @= np.ones((3, 2))
    w = XP.asarray(np.ones(3))
    w.requires_grad_()
    with pytest.raises(RuntimeError, match="leaf that requires grad"):
        w += np.ones(3)
    g = pg.grad(lambda v: XP.sum(XP.astype(v < np.ones(3), v.dtype) + (v - np.ones(3)) ** 2))
    np.testing.assert_array_equal(_np(g(XP.asarray(np.arange(3.0)))), [-2.0, 0.0, 2.0])


# -- ufunc methods ---------------------------------------------------------------------------------

REDUCE_AXES = [0, -1, None, (0, 1)]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", REDUCE_AXES, ids=str)
@pytest.mark.parametrize("name", list(protocols.REDUCTIONS))
def test_reduce(name, axis, keepdims, dtype):
    ufunc = getattr(np, name)
    x = U(2, 3)

    def f(a):
        return ufunc.reduce(a, axis=axis, keepdims=keepdims)

    diff = name not in ("logical_and", "logical_or")
    check_forward(f, (x,), dtype, rtol=1e-6 if dtype == np.float32 else 1e-12, grad=diff)
    if diff and dtype == np.float64:
        check_grad(f, (x,))


def test_reduce_options():
    x, m = U(2, 3), np.array([[True, False, True], [True, True, False]])
    for f in (
        lambda a: np.add.reduce(a),  # axis 0 by default
        lambda a: np.add.reduce(a, axis=1, initial=2.0),
        lambda a: np.multiply.reduce(a, axis=None, initial=0.5),
        lambda a: np.add.reduce(a, axis=1, where=m),
        lambda a: np.maximum.reduce(a, axis=0, initial=1.0),
        lambda a: np.minimum.reduce(a, axis=1, initial=0.0, where=m),
    ):
        check_forward(f, (x,), rtol=1e-6, atol=1e-6)
        check_grad(f, (x,))
    check_forward(lambda a: np.add.reduce(a, axis=0, dtype=np.float32), (x,), rtol=1e-6)


@pytest.mark.parametrize("name", list(protocols.ACCUMULATIONS))
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_accumulate(name, axis):
    ufunc = getattr(np, name)
    x = U(2, 3)
    check_forward(lambda a: ufunc.accumulate(a, axis=axis), (x,))
    check_forward(lambda a: ufunc.accumulate(a, axis=axis), (x,), np.float32, rtol=1e-6)
    check_grad(lambda a: ufunc.accumulate(a, axis=axis), (x,))


@pytest.mark.parametrize("name", ["add", "multiply", "subtract", "maximum", "arctan2", "less"])
def test_outer(name):
    ufunc = getattr(np, name)
    a, b = S(3), S(2, 2)
    check_forward(ufunc.outer, (a, b), grad=name != "less")
    if name != "less":
        check_grad(ufunc.outer, (a, b))


@pytest.mark.parametrize(
    "name, idx",
    [
        ("add", np.array([0, 2, 0, 0, 3])),  # duplicates accumulate, in order
        ("subtract", np.array([1, 1, 4])),
        ("multiply", np.array([2, 2, 0])),
        ("maximum", np.array([3, 1, 3])),
        ("add", (np.array([0, 1, 1]), np.array([2, 0, 0]))),  # a 2-D target
        ("add", slice(1, 4)),
        ("negative", np.array([0, 0, 2])),  # a unary ufunc: applied once per occurrence
    ],
)
def test_at_accumulates_duplicates_as_numpy(name, idx):
    ufunc = getattr(np, name)
    two_d = isinstance(idx, tuple)
    x0 = S(2, 3) if two_d else S(5)
    n = len(idx[0]) if two_d else (3 if isinstance(idx, slice) else len(idx))
    v0 = S(n)

    def run(x, v):
        y = x * 1.0  # a fresh array the call writes into
        if ufunc.nin == 1:
            ufunc.at(y, idx)
        else:
            ufunc.at(y, idx, v)
        return y * y

    check_forward(run, (x0, v0))
    check_grad(run, (x0, v0))


def test_at_on_a_leaf_refuses_and_on_numpy_data_refuses():
    w = XP.asarray(S(4))
    w.requires_grad_()
    with pytest.raises(RuntimeError, match="leaf that requires grad"):
        np.add.at(w, [0, 0], 1.0)
    with pytest.raises(TypeError, match=r"numpy\.add\.at\(\).*NumPy array.*drop"):
        np.add.at(np.zeros(4), [0, 1], w[:2])


# -- out= -----------------------------------------------------------------------------------------


def test_out_rebinds_like_the_inplace_operator():
    a0, b0 = S(2, 3), S(2, 3)

    def f(a, b):
        c = a * 1.0
        r = np.add(c, b, out=c)  # c += b
        assert r is c
        np.multiply(c, c, out=c)
        np.exp(b, out=(c,)) if False else None
        return c

    check_forward(f, (a0, b0))
    check_grad(f, (a0, b0))


def test_out_forms():
    a0 = S(2, 3)

    def f(a):
        o = XP.zeros((2, 3))
        np.sin(a, out=o)  # a constant written with a tracked value: rebound and recorded
        s = XP.zeros((3,))
        np.sum(a, axis=0, out=s)
        m = XP.zeros((2, 3))
        np.add(a, 1.0, out=m, where=a > 0)  # where=: keep out's values elsewhere
        q, r = XP.zeros((2, 3)), XP.zeros((2, 3))
        np.divmod(a, 0.7, out=(q, r))
        return o * s + m + r

    check_forward(f, (a0,))
    check_grad(f, (a0,))


def test_out_refusals():
    w = XP.asarray(S(3))
    w.requires_grad_()
    with pytest.raises(RuntimeError, match=r"numpy\.add\(out=\.\.\.\).*leaf that requires grad"):
        np.add(w, 1.0, out=w)
    with pytest.raises(TypeError, match=r"out is a NumPy array.*drop its gradient"):
        np.add(w, 1.0, out=np.zeros(3))
    with pytest.raises(TypeError, match=r"cannot cast the result from float64"):
        np.add(w, 1.0, out=XP.zeros(3, dtype=XP.int64))
    with pytest.raises(TypeError, match=r"where= without out="):
        np.add(w, 1.0, where=w > 0)
    with pg.no_grad():  # as an optimizer step: the leaf is updated in place
        np.subtract(w, 0.5, out=w)
    assert w.requires_grad


def test_out_on_undifferentiated_arrays_writes_in_place_keeping_views():
    x = XP.asarray(np.arange(6.0).reshape(2, 3))
    row = x[0]
    r = np.add(x, 1.0, out=x)
    assert r is x
    np.testing.assert_array_equal(_np(x), np.arange(6.0).reshape(2, 3) + 1)
    np.testing.assert_array_equal(_np(row), [1.0, 2.0, 3.0])
    s = XP.zeros(3)
    assert np.sum(x, axis=0, out=s) is s
    np.testing.assert_array_equal(_np(s), [5.0, 7.0, 9.0])


def test_numpys_writing_functions_go_through_setitem():
    """np.copyto, np.put, np.fill_diagonal on arrays not being differentiated: NumPy's values,
    written as x[...] = v (a buffer the tape saved keeps its old value for the backward)."""
    x = XP.zeros((3, 3))
    np.copyto(x, np.arange(9.0).reshape(3, 3))
    np.put(x, [0, 4], [-1.0, -2.0])
    np.fill_diagonal(x, 7.0)
    want = np.arange(9.0).reshape(3, 3)
    np.put(want, [0, 4], [-1.0, -2.0])
    np.fill_diagonal(want, 7.0)
    np.testing.assert_array_equal(_np(x), want)
    c = XP.asarray(S(3))
    c0 = _np(c).copy()

    def f(v):
        y = v * c
        np.copyto(c, np.zeros(3))
        return XP.sum(y)

    np.testing.assert_allclose(_np(pg.grad(f)(XP.asarray(S(3)))), c0)


def test_out_into_a_buffer_the_tape_saved_keeps_the_saved_value():
    """A constant the tape saved (x * c saves c) written with out=: the gradient still sees the
    old value, as with c[...] = ..."""
    c = XP.asarray(S(3))

    def f(x):
        y = x * c
        np.multiply(c, 0.0, out=c)
        return XP.sum(y)

    c0 = _np(c).copy()
    g = pg.grad(f)(XP.asarray(S(3)))
    np.testing.assert_allclose(_np(g), c0)


# -- functions -------------------------------------------------------------------------------------


def _fcases():
    C = []

    def case(name, f, *args, grad=True, rtol32=2e-5, **kw):
        C.append(pytest.param(name, f, args, grad, rtol32, kw, id=f"{name}-{len(C)}"))

    x23, x234 = S(2, 3), S(2, 3, 4)
    for fname in ("sum", "prod", "mean", "max", "amax", "min", "amin", "ptp"):
        f = getattr(np, fname)
        for axis in (None, 0, -1, (0, 1)):
            if fname == "ptp" and isinstance(axis, tuple):
                continue
            for keepdims in (False, True):
                case(fname, lambda a, f=f, ax=axis, k=keepdims: f(a, axis=ax, keepdims=k), x23)
    case("sum", lambda a: np.sum(a, axis=1, dtype=np.float32), x23, grad=False)
    case("sum", lambda a: np.sum(a, initial=1.5, where=a > 0), x23)
    case("prod", lambda a: np.prod(a, axis=0, where=a > 0), x23)
    case("mean", lambda a, m=MASK: np.mean(a, axis=0, where=m), x23)
    case("max", lambda a: np.max(a, axis=1, initial=0.5), x23)
    for fname in ("std", "var"):
        f = getattr(np, fname)
        for axis in (None, 0, (0, 1)):
            for ddof in (0, 1):
                case(fname, lambda a, f=f, ax=axis, d=ddof: f(a, axis=ax, ddof=d), x23)
        case(fname, lambda a, f=f: f(a, axis=1, keepdims=True, where=a > -1.5), x23)
        case(fname, lambda a, f=f: f(a, correction=1), x23)
    case("all", lambda a: np.all(a > 0, axis=0), x23, grad=False)
    case("all", lambda a: np.all(a), x23, grad=False)
    case("any", lambda a: np.any(a > 1.0, axis=1, keepdims=True), x23, grad=False)
    case("average", lambda a: np.average(a, axis=1), x23)
    w3 = U(3)
    case("average", lambda a, w=w3: np.average(a, axis=1, weights=w), x23)
    case("average", lambda a, w: np.average(a, weights=w, returned=True), x23, U(2, 3))
    for fname in ("nansum", "nanprod", "nanmean", "nanmax", "nanmin", "nanstd", "nanvar"):
        f = getattr(np, fname)
        for axis in (None, 0, -1):
            case(fname, lambda a, f=f, ax=axis: f(a, axis=ax), x23)
        case(fname, lambda a, f=f: f(a, axis=0, keepdims=True), x23)
    case("nanstd", lambda a: np.nanstd(a, axis=1, ddof=1), x23)
    case("nanvar", lambda a: np.nanvar(a, ddof=1), x23)
    case("nanargmax", lambda a: np.nanargmax(a, axis=1), x23, grad=False)
    case("nanargmin", lambda a: np.nanargmin(a), x23, grad=False)
    for fname in ("cumsum", "cumprod", "nancumsum", "nancumprod"):
        f = getattr(np, fname)
        for axis in (None, 0, 1):
            case(fname, lambda a, f=f, ax=axis: f(a, axis=ax), x23)
    if hasattr(np, "cumulative_sum"):
        case("cumulative_sum", lambda a: np.cumulative_sum(a, axis=1, include_initial=True), x23)
        case("cumulative_prod", lambda a: np.cumulative_prod(a, axis=0), x23)
    case("diff", lambda a: np.diff(a), x23)
    e21 = S(2, 1)
    case("diff", lambda a, e=e21: np.diff(a, n=2, axis=-1, prepend=0.5, append=e), x23)
    case("diff", lambda a: np.diff(a, axis=0), x23)
    # elementwise functions that are not ufuncs
    case("clip", lambda a: np.clip(a, -1.0, 1.0), x23)
    case("clip", lambda a, lo: np.clip(a, lo, None), x23, S(3))
    case("clip", lambda a: np.clip(a, a_min=-0.5, a_max=np.full(3, 0.8)), x23)
    case("where", lambda a, b: np.where(a > 0, a, b), x23, S(2, 3))
    case("where", lambda a: np.where(a > 0, a, 0.0), x23)
    case("where", lambda a: np.where(a > 0), x23, grad=False)
    case("round", lambda a: np.round(a), x23, grad=False)
    case("round", lambda a: np.round(a, 1), x23, grad=False)
    case("around", lambda a: np.around(a, 2), x23, grad=False)
    case("fix", lambda a: np.fix(a), x23, grad=False)
    case("real", lambda a: np.real(a), x23)
    case("imag", lambda a: np.imag(a), x23, grad=False)
    case("real", lambda a: np.real(a * (1 + 2j)), x23)
    case("imag", lambda a: np.imag(a * (1 + 2j)), x23)
    case("angle", lambda a: np.angle(a * (1 + 2j) + 0.5j), x23)
    case("angle", lambda a: np.angle(a, deg=True), x23, grad=False)
    case("nan_to_num", lambda a: np.nan_to_num(np.log(a)), x23)
    # (forward only: the division's own gradient at the infinities is 0 / 0, as in JAX)
    f = lambda a: np.nan_to_num(np.divide(a, a > 0), posinf=9.0, neginf=-9.0)  # noqa: E731
    case("nan_to_num", f, x23, grad=False)
    case("isposinf", lambda a: np.isposinf(np.divide(a, a > 0)), x23, grad=False)
    case("isneginf", lambda a: np.isneginf(np.divide(a, a > 0)), x23, grad=False)
    case("copy", lambda a: np.copy(a), x23)
    # shapes
    case("reshape", lambda a: np.reshape(a, (3, 2)), x23)
    case("reshape", lambda a: np.reshape(a, -1), x23)
    case("reshape", lambda a: np.reshape(a, shape=(6, 1)), x23)
    case("ravel", lambda a: np.ravel(a), x234)
    case("transpose", lambda a: np.transpose(a), x234)
    case("transpose", lambda a: np.transpose(a, (1, 0, 2)), x234)
    if hasattr(np, "permute_dims"):
        case("permute_dims", lambda a: np.permute_dims(a, (2, 0, 1)), x234)
    if hasattr(np, "matrix_transpose"):
        case("matrix_transpose", lambda a: np.matrix_transpose(a), x234)
    case("linalg.matrix_transpose", lambda a: np.linalg.matrix_transpose(a), x234)
    case("swapaxes", lambda a: np.swapaxes(a, 0, 2), x234)
    case("moveaxis", lambda a: np.moveaxis(a, 0, -1), x234)
    case("moveaxis", lambda a: np.moveaxis(a, [0, 1], [2, 0]), x234)
    case("rollaxis", lambda a: np.rollaxis(a, 2), x234)
    case("rollaxis", lambda a: np.rollaxis(a, 0, 2), x234)
    case("expand_dims", lambda a: np.expand_dims(a, 1), x23)
    case("expand_dims", lambda a: np.expand_dims(a, (0, -1)), x23)
    case("squeeze", lambda a: np.squeeze(a), S(1, 3, 1))
    case("squeeze", lambda a: np.squeeze(a, axis=0), S(1, 3, 1))
    case("concatenate", lambda a, b: np.concatenate([a, b]), x23, S(1, 3))
    case("concatenate", lambda a, b: np.concatenate((a, b), axis=None), x23, S(4))
    case("concatenate", lambda a: np.concatenate([a, np.ones((2, 1))], axis=1), x23)
    if hasattr(np, "concat"):
        case("concat", lambda a, b: np.concat([a, b], axis=1), x23, S(2, 2))
    case("stack", lambda a, b: np.stack([a, b], axis=1), x23, S(2, 3))
    case("stack", lambda a: np.stack([a, a * 2]), x23)
    case("vstack", lambda a, b: np.vstack([a, b]), S(3), S(2, 3))
    case("row_stack", lambda a, b: np.vstack([a, b]), S(3), S(3))
    case("hstack", lambda a, b: np.hstack([a, b]), x23, S(2, 2))
    case("hstack", lambda a, b: np.hstack([a, b]), S(3), S(2))
    case("dstack", lambda a, b: np.dstack([a, b]), x23, S(2, 3))
    case("column_stack", lambda a, b: np.column_stack([a, b]), S(3), S(3, 2))
    for nd in (1, 2, 3):
        f = getattr(np, f"atleast_{nd}d")
        for sh in ((), (3,), (2, 3)):
            case(f"atleast_{nd}d", lambda a, f=f: f(a), S(*sh))
        case(f"atleast_{nd}d", lambda a, b, f=f: f(a, b), S(), S(2, 3))
    case("append", lambda a, b: np.append(a, b), x23, S(2))
    case("append", lambda a, b: np.append(a, b, axis=0), x23, S(1, 3))
    case("split", lambda a: np.split(a, 2, axis=1), S(2, 4))
    case("split", lambda a: np.split(a, [1, 3]), S(5))
    case("array_split", lambda a: np.array_split(a, 3), S(7))
    case("array_split", lambda a: np.array_split(a, [2, 10], axis=1), S(2, 5))
    case("hsplit", lambda a: np.hsplit(a, 2), S(2, 4))
    case("vsplit", lambda a: np.vsplit(a, [1]), S(3, 2))
    case("dsplit", lambda a: np.dsplit(a, 2), S(2, 2, 4))
    if hasattr(np, "unstack"):
        case("unstack", lambda a: np.unstack(a, axis=1), x23)
    case("flip", lambda a: np.flip(a), x23)
    case("flip", lambda a: np.flip(a, axis=1), x23)
    case("fliplr", lambda a: np.fliplr(a), x23)
    case("flipud", lambda a: np.flipud(a), x23)
    case("roll", lambda a: np.roll(a, 2), x23)
    case("roll", lambda a: np.roll(a, (1, -1), axis=(0, 1)), x23)
    case("tile", lambda a: np.tile(a, 2), x23)
    case("tile", lambda a: np.tile(a, (2, 1, 2)), x23)
    case("repeat", lambda a: np.repeat(a, 2), x23)
    case("repeat", lambda a: np.repeat(a, [1, 3], axis=0), x23)
    case("broadcast_to", lambda a: np.broadcast_to(a, (4, 3)), S(3))
    case("broadcast_arrays", lambda a, b: np.broadcast_arrays(a, b), S(3), S(2, 1))
    case("take", lambda a: np.take(a, [0, 2, 2]), x23)
    case("take", lambda a: np.take(a, np.array([[0, 1], [1, 1]]), axis=1), x23)
    case("take_along_axis", lambda a: np.take_along_axis(a, np.argsort(a, axis=1), 1), x23)
    case("diagonal", lambda a: np.diagonal(a), S(3, 3))
    case("diagonal", lambda a: np.diagonal(a, 1, 1, 2), x234)
    case("trace", lambda a: np.trace(a), S(3, 3))
    case("trace", lambda a: np.trace(a, -1, 0, 2), x234)
    case("tril", lambda a: np.tril(a), S(3, 3))
    case("triu", lambda a: np.triu(a, 1), S(3, 3))
    case("sort", lambda a: np.sort(a), x23)
    case("sort", lambda a: np.sort(a, axis=None), x23)
    case("sort", lambda a: np.sort(a, axis=0), x23)
    case("argsort", lambda a: np.argsort(a, axis=0), x23, grad=False)
    case("argmax", lambda a: np.argmax(a), x23, grad=False)
    case("argmax", lambda a: np.argmax(a, axis=1, keepdims=True), x23, grad=False)
    case("argmin", lambda a: np.argmin(a, axis=0), x23, grad=False)
    case("nonzero", lambda a: np.nonzero(a > 0), x23, grad=False)
    case("unique", lambda a: np.unique(np.round(a)), x23, grad=False)
    case("unique", lambda a: np.unique(a), x23)
    for fname in ("unique_values", "unique_counts", "unique_inverse", "unique_all"):
        if hasattr(np, fname):
            uf = getattr(np, fname)
            case(fname, lambda a, f=uf: f(a), S(5), grad=fname == "unique_values")
    case("zeros_like", lambda a: np.zeros_like(a), x23, grad=False)
    case("ones_like", lambda a: np.ones_like(a, dtype=np.float32), x23, grad=False)
    case("empty_like", lambda a: np.empty_like(a).shape and np.zeros_like(a), x23, grad=False)
    case("zeros_like", lambda a: np.zeros_like(a, shape=(4,)), x23, grad=False)
    case("full_like", lambda a: np.full_like(a, 2.5), x23, grad=False)
    case("full_like", lambda a: np.full_like(a, 7, shape=(2,)), x23, grad=False)
    case("meshgrid", lambda a, b: np.meshgrid(a, b), S(3), S(2))
    case("meshgrid", lambda a, b: np.meshgrid(a, b, indexing="ij"), S(3), S(2))
    # products
    case("dot", lambda a, b: np.dot(a, b), S(3), S(3))
    case("dot", lambda a, b: np.dot(a, b), x23, S(3, 4))
    case("dot", lambda a, b: np.dot(a, b), S(3), S(3, 2))
    case("dot", lambda a, b: np.dot(a, b), x234, S(4))
    case("dot", lambda a, b: np.dot(a, b), x234, S(3, 4, 2))
    case("dot", lambda a, b: np.dot(a, b), S(), x23)
    case("vdot", lambda a, b: np.vdot(a, b), x23, S(2, 3))
    case("vdot", lambda a, b: np.vdot(a * 1j + b, b), x23, S(2, 3))
    case("inner", lambda a, b: np.inner(a, b), x23, S(4, 3))
    case("inner", lambda a, b: np.inner(a, b), S(3), S(3))
    case("outer", lambda a, b: np.outer(a, b), x23, S(2))
    case("linalg.outer", lambda a, b: np.linalg.outer(a, b), S(3), S(2))
    case("tensordot", lambda a, b: np.tensordot(a, b), x234, S(3, 4))
    case("tensordot", lambda a, b: np.tensordot(a, b, axes=1), x23, S(3, 2))
    case("tensordot", lambda a, b: np.tensordot(a, b, axes=(1, 0)), x23, S(3, 2))
    case("tensordot", lambda a, b: np.tensordot(a, b, axes=([0, 2], [1, 0])), x234, S(4, 2))
    case("linalg.tensordot", lambda a, b: np.linalg.tensordot(a, b, axes=1), x23, S(3, 2))
    case("linalg.matmul", lambda a, b: np.linalg.matmul(a, b), x23, S(3, 2))
    case("linalg.vecdot", lambda a, b: np.linalg.vecdot(a, b), x23, S(3))
    case("cross", lambda a, b: np.cross(a, b), S(2, 3), S(3))
    case("cross", lambda a, b: np.cross(a, b, axis=0), S(3, 2), S(3, 2))
    case("linalg.cross", lambda a, b: np.linalg.cross(a, b), S(2, 3), S(2, 3))
    case("kron", lambda a, b: np.kron(a, b), x23, S(2, 2))
    case("kron", lambda a, b: np.kron(a, b), S(3), S(2))
    for spec, shapes in [
        ("ij,jk->ik", [(2, 3), (3, 4)]),
        ("ij,jk", [(2, 3), (3, 4)]),
        ("ii->", [(3, 3)]),
        ("ii", [(3, 3)]),
        ("ij->j", [(2, 3)]),
        ("i,j->ij", [(2,), (3,)]),
        ("...ij,...jk->...ik", [(2, 2, 3), (2, 3, 4)]),
        ("bi,bj,ij->b", [(4, 2), (4, 3), (2, 3)]),
        ("ijk,kj->i", [(2, 3, 4), (4, 3)]),
    ]:
        case("einsum", lambda *ops, s=spec: np.einsum(s, *ops), *[S(*sh) for sh in shapes])
    case("einsum", lambda a, b: np.einsum(a, [0, 1], b, [1, 2], [0, 2]), x23, S(3, 4))
    case("einsum", lambda a, b: np.einsum("ij,jk->ik", a, b, optimize=True), x23, S(3, 4))
    case("linalg.multi_dot", lambda a, b, c: np.linalg.multi_dot([a, b, c]), S(3), S(3, 4), S(4))
    case("linalg.multi_dot", lambda a, b: np.linalg.multi_dot([a, b]), x23, S(3, 2))
    # numpy.linalg
    sq, spd = S(3, 3) + 3 * np.eye(3), SPD(3)
    case("linalg.inv", lambda a: np.linalg.inv(a), sq)
    case("linalg.det", lambda a: np.linalg.det(a), sq)
    case("linalg.slogdet", lambda a: np.linalg.slogdet(a)[1], sq)
    case("linalg.solve", lambda a, b: np.linalg.solve(a, b), sq, S(3))
    case("linalg.solve", lambda a, b: np.linalg.solve(a, b), sq, S(3, 2))
    case(
        "linalg.cholesky",
        lambda a: np.linalg.cholesky(np.add(np.matmul(a, np.transpose(a)), 3 * np.eye(3))),
        sq,
        rtol32=1e-4,
    )
    case("linalg.qr", lambda a: np.linalg.qr(a), S(4, 3), rtol32=1e-4)
    case("linalg.qr", lambda a: np.linalg.qr(a, mode="r"), S(4, 3), rtol32=1e-4)
    case("linalg.svd", lambda a: np.linalg.svd(a, compute_uv=False), S(4, 3), rtol32=1e-4)
    case(
        "linalg.svd",
        lambda a: (lambda u, s, vh: (np.abs(u[:, :3]), s, np.abs(vh)))(
            *np.linalg.svd(a, full_matrices=False)
        ),
        S(4, 3),
        rtol32=1e-4,
    )
    case("linalg.svdvals", lambda a: np.linalg.svdvals(a), S(4, 3), rtol32=1e-4)
    case("linalg.eigh", lambda a: np.linalg.eigh(a)[0], spd, rtol32=1e-4)
    case("linalg.eigh", lambda a: np.abs(np.linalg.eigh(a, UPLO="U")[1]), S(3, 3) + 3 * spd)
    case("linalg.eigvalsh", lambda a: np.linalg.eigvalsh(a), S(3, 3) + spd, rtol32=1e-4)
    case("linalg.pinv", lambda a: np.linalg.pinv(a), S(4, 3), rtol32=1e-4)
    case("linalg.matrix_power", lambda a: np.linalg.matrix_power(a, 3), S(3, 3))
    case("linalg.matrix_rank", lambda a: np.linalg.matrix_rank(a), S(4, 3), grad=False)
    case("linalg.trace", lambda a: np.linalg.trace(a, offset=1), x234)
    case("linalg.diagonal", lambda a: np.linalg.diagonal(a), x234)
    case("linalg.matrix_norm", lambda a: np.linalg.matrix_norm(a, ord=1), S(3, 3))
    case("linalg.vector_norm", lambda a: np.linalg.vector_norm(a, axis=1, ord=3), x23)
    for ord_, axis, shape in [
        (None, None, (2, 3)),
        (None, None, (2, 3, 4)),
        (None, 1, (2, 3)),
        (1, None, (4,)),
        (np.inf, None, (4,)),
        (-np.inf, 0, (4, 2)),
        (3, -1, (2, 3)),
        (0, 1, (2, 3)),
        ("fro", None, (3, 3)),
        ("nuc", None, (3, 3)),
        (1, None, (3, 3)),
        (-1, (0, 1), (3, 3)),
        (np.inf, (1, 0), (3, 3)),
        (2, None, (3, 3)),
        (-2, (0, 2), (3, 2, 3)),
        (None, (0, 2), (3, 2, 3)),
    ]:
        for keep in (False, True):
            case(
                "linalg.norm",
                lambda a, o=ord_, ax=axis, k=keep: np.linalg.norm(a, o, ax, k),
                S(*shape),
                grad=ord_ != 0,
                rtol32=1e-4,
            )
    # numpy.fft
    for fname in ("fft", "ifft", "rfft", "hfft", "ihfft", "irfft"):
        f = getattr(np.fft, fname)
        for norm in (None, "ortho", "forward"):
            for n in (None, 6):
                case(f"fft.{fname}", lambda a, f=f, n=n, m=norm: f(a, n=n, norm=m), x23)
        case(f"fft.{fname}", lambda a, f=f: f(a, axis=0), S(4, 3))
    case("fft.fft", lambda a: np.fft.fft(a * (1 + 0.5j)), x23)
    for fname in ("fftn", "ifftn", "rfftn", "irfftn", "fft2", "ifft2", "rfft2", "irfft2"):
        f = getattr(np.fft, fname)
        case(f"fft.{fname}", lambda a, f=f: f(a), x234, rtol32=1e-4)
        case(
            f"fft.{fname}",
            lambda a, f=f: f(a, s=(4, 6), axes=(1, 2), norm="ortho"),
            x234,
            rtol32=1e-4,
        )
        case(f"fft.{fname}", lambda a, f=f: f(a, axes=(0, 2)), x234, rtol32=1e-4)
    case("fft.fftshift", lambda a: np.fft.fftshift(a), x23)
    case("fft.ifftshift", lambda a: np.fft.ifftshift(a, axes=1), x23)
    # order statistics (NumPy's method "linear"), covariance, padding, interpolation,
    # finite differences, convolution, polynomials
    for fname in ("quantile", "nanquantile", "percentile", "nanpercentile"):
        f, scale = getattr(np, fname), 100 if "percentile" in fname else 1
        for q in (0.3, 0.5, 1, [0.1, 0.9], np.array([[0.2], [0.75]])):
            qs = q * scale if not isinstance(q, list) else [v * scale for v in q]
            for axis in (None, 0, (0, 1)):
                case(fname, lambda a, f=f, q=qs, ax=axis: f(a, q, axis=ax), x23)
            case(fname, lambda a, f=f, q=qs: f(a, q, axis=-1, keepdims=True), x234)
    for method in (
        "inverted_cdf",
        "averaged_inverted_cdf",
        "closest_observation",
        "interpolated_inverted_cdf",
        "hazen",
        "weibull",
        "median_unbiased",
        "normal_unbiased",
        "lower",
        "higher",
        "midpoint",
        "nearest",
    ):
        for f in (np.quantile, np.percentile):
            qs = [0.1, 0.37, 0.5, 0.9] if f is np.quantile else [10, 37, 50, 90]
            case(
                f"{f.__name__}/{method}",
                lambda a, f=f, q=qs, m=method: f(a, q, axis=1, method=m),
                S(3, 5),
            )
    for fname in ("median", "nanmedian"):
        f = getattr(np, fname)
        for axis in (None, 0, 1, (0, 2)):
            for keepdims in (False, True):
                case(fname, lambda a, f=f, ax=axis, k=keepdims: f(a, axis=ax, keepdims=k), x234)
    ties = np.array([[1.0, 2.0, 2.0, 3.0], [0.5, 0.5, 0.5, -1.0]])
    # at ties (values only: finite differences are one-sided there; the gradient is below)
    case("median", lambda a: np.median(a, axis=1), ties, grad=False)
    case("quantile", lambda a: np.quantile(a, [0.25, 0.5], axis=1), ties, grad=False)
    x35 = S(3, 5)
    case("cov", lambda a: np.cov(a), x35)
    case("cov", lambda a: np.cov(a, rowvar=False), x35)
    case("cov", lambda a: np.cov(a, bias=True), x35)
    case("cov", lambda a: np.cov(a, ddof=2), x35)
    case("cov", lambda a, b: np.cov(a, b), x35, S(2, 5))
    case("cov", lambda a: np.cov(a[0]), x35)
    case("cov", lambda a: np.cov(a, aweights=[1, 2, 3, 1, 0.5]), x35)
    case("cov", lambda a: np.cov(a, fweights=[1, 2, 3, 1, 1], aweights=[1, 2, 3, 1, 0.5]), x35)
    case("corrcoef", lambda a: np.corrcoef(a), x35)
    case("corrcoef", lambda a, b: np.corrcoef(a, b, rowvar=False), S(5, 2), S(5, 3))
    case("corrcoef", lambda a: np.corrcoef(a[0], a[1]), x35)
    for mode in ("constant", "edge", "reflect", "symmetric", "wrap"):
        for width in (2, (1, 3), ((1, 2), (7, 0))):
            case("pad", lambda a, m=mode, w=width: np.pad(a, w, mode=m), x23)
    case("pad", lambda a: np.pad(a, 2, constant_values=(1.5, -2)), x23)
    case("pad", lambda a: np.pad(a, (3, 1), mode="reflect"), S(4))
    for mode, kw in (
        ("linear_ramp", {}),
        ("linear_ramp", {"end_values": ((-1.0, 2.0), (0.5, -3.0))}),
        ("maximum", {}),
        ("minimum", {"stat_length": 2}),
        ("mean", {}),
        ("mean", {"stat_length": ((1, 2), (3, 1))}),
        ("median", {}),
        ("median", {"stat_length": (2, 3)}),
    ):
        for width in (2, ((1, 2), (0, 3))):
            case("pad", lambda a, m=mode, w=width, k=kw: np.pad(a, w, mode=m, **k), S(3, 4))
    xs, fs = np.sort(rng.uniform(-2, 2, 6)), S(6)
    xq = rng.uniform(-3, 3, (2, 7))
    case("interp", lambda x, p, f: np.interp(x, p, f), xq, xs, fs)
    case("interp", lambda x, p, f: np.interp(x, p, f, left=-5.0, right=7.0), xq, xs, fs)
    case("interp", lambda x, f: np.interp(x, [-1.0, 0.0, 2.0], f), xq, S(3))
    nodes = np.array([-1.0, 0.0, 2.0])
    case("interp", lambda f, n=nodes: np.interp(np.array([-1.5, 0.0, 0.5, 2.0, 3.0]), n, f), S(3))
    for eo in (1, 2):
        case("gradient", lambda a, e=eo: np.gradient(a, edge_order=e), x35)
        case("gradient", lambda a, e=eo: np.gradient(a, 0.5, 2.0, edge_order=e), x35)
        case("gradient", lambda a, e=eo: np.gradient(a, 0.5, axis=1, edge_order=e), x35)
        case("gradient", lambda a, e=eo: np.gradient(a, 3.0, edge_order=e), S(6))
    for mode in ("full", "same", "valid"):
        for n1, n2 in ((7, 3), (3, 7), (4, 4), (2, 5), (6, 1)):
            for fname in ("convolve", "correlate"):
                f = getattr(np, fname)
                case(fname, lambda a, b, f=f, m=mode: f(a, b, mode=m), S(n1), S(n2))
    case("convolve", lambda a, b: np.convolve(a, b), S(5), S(3))
    case("correlate", lambda a, b: np.correlate(a, b), S(5), S(3))
    case("polyval", lambda p, x: np.polyval(p, x), S(4), x23)
    case("polyval", lambda p: np.polyval(p, 1.5), S(4))
    case("polyval", lambda x: np.polyval([1.0, -2.0, 0.5], x), x23)
    swv = np.lib.stride_tricks.sliding_window_view
    sw = "lib.stride_tricks.sliding_window_view"
    case(sw, lambda a, f=swv: f(a, 3), S(6))
    case(sw, lambda a, f=swv: f(a, 2, axis=0), x35)
    case(sw, lambda a, f=swv: f(a, (2, 3)), x35)
    case(sw, lambda a, f=swv: f(a, (2, 2), axis=(1, 1)), x35)
    case("sinc", lambda a: np.sinc(a), x23)
    case("sinc", lambda a: np.sinc(a * np.array([[0.0, 1.0, 1.0], [1.0, 0.0, 1.0]])), x23)
    case("trapezoid", lambda a: np.trapezoid(a), x23)
    case("trapezoid", lambda a: np.trapezoid(a, dx=0.5, axis=0), x23)
    case("trapezoid", lambda a, t: np.trapezoid(a, t), x23, np.sort(S(3)))
    case("trapezoid", lambda a, t: np.trapezoid(a, t, axis=0), S(4, 2), np.sort(S(4)))
    case("trapezoid", lambda a, t: np.trapezoid(a, t, axis=1), x23, np.sort(S(2, 3), axis=1))
    lstsq = np.linalg.lstsq

    def no_rank(r):  # (x, residuals, s): the rank is an int, compared in its own test
        return r[0], r[1], r[3]

    case("linalg.lstsq", lambda a, b: no_rank(lstsq(a, b)), S(5, 3), S(5), rtol32=1e-4)
    case("linalg.lstsq", lambda a, b: no_rank(lstsq(a, b)), S(5, 3), S(5, 2), rtol32=1e-4)
    case("linalg.lstsq", lambda a, b: no_rank(lstsq(a, b)), S(3, 5), S(3, 2), rtol32=1e-4)
    case("linalg.lstsq", lambda a, b: no_rank(lstsq(a, b, rcond=1e-3)), S(4, 4), S(4), rtol32=1e-4)
    # functions computed on the values (no gradient): NumPy's answer
    case("isclose", lambda a, b: np.isclose(a, b), x23, x23 + 1e-12, grad=False)
    case("count_nonzero", lambda a: np.count_nonzero(a > 0, axis=0), x23, grad=False)
    case("argwhere", lambda a: np.argwhere(a > 0), x23, grad=False)
    case("flatnonzero", lambda a: np.flatnonzero(a > 0), x23, grad=False)
    case("isin", lambda a: np.isin(np.round(a), [1.0, -1.0]), x23, grad=False)
    case("searchsorted", lambda a: np.searchsorted(np.arange(-2.0, 3.0), a), x23, grad=False)
    case("digitize", lambda a: np.digitize(a, np.arange(-2.0, 3.0)), x23, grad=False)
    case("iscomplex", lambda a: np.iscomplex(a), x23, grad=False)
    case("isreal", lambda a: np.isreal(a), x23, grad=False)
    return C


FCASES = _fcases()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name, f, args, grad, rtol32, kw", FCASES)
def test_function_values_equal_numpys(name, f, args, grad, rtol32, kw, dtype):
    rtol = 1e-10 if dtype == np.float64 else rtol32
    check_forward(f, args, dtype, rtol=rtol, atol=rtol, grad=grad)


@pytest.mark.parametrize("name, f, args, grad, rtol32, kw", FCASES)
def test_function_gradients_match_finite_differences(name, f, args, grad, rtol32, kw):
    if not grad:
        pytest.skip("no gradient")
    check_grad(f, args, **kw)


def test_order_statistics_at_ties_send_the_gradient_to_the_elements_used():
    """median and quantile sort, then interpolate between the two neighbours of NumPy's virtual
    index: the gradient goes to those elements (a tie's copies in their order), weighted as the
    interpolation weighs them."""
    x = XP.asarray(np.array([[3.0, 2.0, 2.0, 1.0], [0.5, 0.5, 0.5, -1.0]]))
    g = pg.grad(lambda a: XP.sum(np.median(a, axis=1)))(x)
    np.testing.assert_array_equal(_np(g), [[0.0, 0.5, 0.5, 0.0], [0.5, 0.5, 0.0, 0.0]])
    g = pg.grad(lambda a: np.quantile(a, 0.4))(XP.asarray(np.array([4.0, 1.0, 2.0, 3.0])))
    np.testing.assert_allclose(_np(g), [0.0, 0.0, 0.8, 0.2])  # index 1.2: 0.8 x[2] + 0.2 x[3]
    g = pg.grad(lambda a: np.nanmedian(a))(XP.asarray(np.array([4.0, np.nan, 1.0, 2.0])))
    np.testing.assert_array_equal(_np(g), [0.0, 0.0, 0.0, 1.0])


def test_functions_with_unsupported_options_refuse_clearly():
    w = XP.asarray(S(2, 3))
    w.requires_grad_()

    def ramp(vector, width, axis, kwargs):  # NumPy's callable mode: it writes in place
        vector[: width[0]] = 0.0

    with pytest.raises(TypeError, match=r"numpy\.pad\(\): mode='ramp'.*stop_gradient"):
        np.pad(w, 1, mode=ramp)
    with pytest.raises(ValueError, match=r"numpy\.pad\(\): stat_length of 0"):
        np.pad(w, 1, mode="mean", stat_length=0)
    with pytest.raises(ValueError, match=r"numpy\.pad\(\): unsupported keyword.*'end_values'"):
        np.pad(w, 1, mode="mean", end_values=1.0)
    with pytest.raises(TypeError, match=r"numpy\.pad\(\): reflect_type='odd'"):
        np.pad(w, 1, mode="reflect", reflect_type="odd")
    with pytest.raises(TypeError, match=r"numpy\.nanquantile\(\): method='nearest'"):
        np.nanquantile(w, 0.5, method="nearest")
    with pytest.raises(ValueError, match=r"numpy\.quantile\(\): method='closest'"):
        np.quantile(w, 0.5, method="closest")
    with pytest.raises(TypeError, match=r"numpy\.gradient\(\): coordinate arrays"):
        np.gradient(w, [0.0, 1.0], [0.0, 1.0, 3.0])
    with pytest.raises(TypeError, match=r"numpy\.interp\(\): period="):
        np.interp(w, [0.0, 1.0], [1.0, 2.0], period=2.0)
    with pytest.raises(ValueError, match=r"range \[0, 1\]"):
        np.quantile(w, 1.5)


def test_value_functions_answer_as_numpy():
    """Functions whose result carries no gradient compare the values: NumPy's Python answers."""
    w = XP.asarray(S(2, 3))
    w.requires_grad_()
    v = _np(w)
    assert np.allclose(w, w + 1e-12) is True
    assert np.allclose(w, v + 1.0) is False
    assert np.array_equal(w, v) is True
    assert np.array_equiv(w, v[None]) is True
    assert np.shape(w) == (2, 3) and np.ndim(w) == 2 and np.size(w) == 6
    assert np.result_type(w, np.float32) == np.float64
    assert np.iscomplexobj(w) is False and np.isrealobj(w) is True
    assert np.can_cast(w, np.float32) is False
    assert np.min_scalar_type(w[0, 0] * 0 + 1) == np.min_scalar_type(1.0)


def test_what_an_array_is_needs_no_values():
    """shape, ndim, size, result_type: from the shape and dtype, inside vmap too."""

    def f(r):
        assert np.shape(r) == (4,) and np.ndim(r) == 1 and np.size(r) == 4
        assert np.result_type(r, 1.0) == np.float64 and not np.iscomplexobj(r)
        assert np.isrealobj(r) and np.size(np.ones((2, 3)) * 1.0) == 6
        return np.sum(r)

    a = S(3, 4)
    np.testing.assert_allclose(_np(pg.vmap(f)(XP.asarray(a))), a.sum(axis=1))
    with pytest.raises(TypeError, match=r"numpy\.allclose\(\).*vmap is batching"):
        pg.vmap(lambda r: XP.asarray(float(np.allclose(r, r))))(XP.asarray(a))


def test_every_mapped_name_has_a_case():
    """Every ufunc and function of the tables is swept above (the coverage the doc lists)."""
    tested = {p.values[0] for p in UFUNC_PARAMS} | set(INTEGER) | {LDEXP}
    tested |= set(protocols.REDUCTIONS) | set(protocols.ACCUMULATIONS)
    cov = protocols.covered()
    ufuncs = {u.split(" ")[0] for u in cov["ufuncs"]}
    assert ufuncs - tested == set()
    described = {"shape", "ndim", "size", "result_type", "iscomplexobj", "isrealobj", "can_cast"}
    functions = {p.values[0] for p in FCASES} | described
    values = functions | {"allclose", "array_equal", "array_equiv", "min_scalar_type"}
    assert set(cov["functions"]) - functions == set()
    assert set(cov["values"]) - values == set()


def test_the_coverage_listing():
    cov = protocols.covered()
    assert "exp -> exp" in cov["ufuncs"] and "arctan2 -> atan2" in cov["ufuncs"]
    assert "add.reduce -> sum" in cov["ufunc.reduce"]
    assert {"einsum", "linalg.norm", "fft.rfft", "nanmean"} <= set(cov["functions"])
    out = subprocess.run(
        [sys.executable, "-m", "pycograd_xp.ops", "--numpy"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "numpy.einsum" in out and "numpy.add.reduce -> xp.sum" in out


# -- NaN-ignoring reductions: zero gradient at NaN ------------------------------------------------

NANS = np.array([[1.0, np.nan, 2.0], [np.nan, np.nan, np.nan], [0.5, -1.5, np.nan]])


@pytest.mark.parametrize(
    "f",
    [
        lambda a: np.nansum(a, axis=1),
        lambda a: np.nanmean(a, axis=0),
        lambda a: np.nanmean(a),
        lambda a: np.nanvar(a, axis=0),
        lambda a: np.nanstd(a),
        lambda a: np.nanmax(a, axis=0),
        lambda a: np.nanmin(a),
        lambda a: np.nanprod(a, axis=1),
        lambda a: np.nancumsum(a, axis=1),
        lambda a: np.nanmedian(a, axis=1),
        lambda a: np.nanmedian(a, axis=0),
        lambda a: np.nanquantile(a, [0.3, 0.5], axis=1),
        lambda a: np.nanpercentile(a, 70.0),
    ],
)
def test_nan_reductions_ignore_nans_and_give_them_zero_gradient(f):
    check_forward(f, (NANS,))
    x = XP.asarray(NANS)
    g = pg.grad(lambda a: XP.sum(XP.where(XP.isnan(f(a)), 0.0, f(a))))(x)
    g = _np(g)
    assert np.all(np.isfinite(g))
    assert np.all(g[np.isnan(NANS)] == 0.0)
    check_grad(lambda a: np.nan_to_num(f(a)), (NANS,))


# -- the boundary: refusals, and NumPy's own answer on arrays not being differentiated ------------


def test_lstsq_rank_and_residuals_as_numpys_when_differentiated():
    rng_ = np.random.default_rng(3)
    full = rng_.standard_normal((5, 3))
    deficient = full[:, :2] @ rng_.standard_normal((2, 3))
    for a in (full, deficient, full.T):
        b = rng_.standard_normal(a.shape[0])
        w = XP.asarray(a)
        w.requires_grad_()
        x, res, rank, s = np.linalg.lstsq(w, b)
        want = np.linalg.lstsq(a, b)
        assert int(rank) == want[2] and _np(rank).dtype == np.asarray(want[2]).dtype
        assert _np(res).shape == want[1].shape
        np.testing.assert_allclose(_np(x), want[0], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(_np(s), want[3], rtol=1e-12)
    with pytest.raises(np.linalg.LinAlgError, match=r"lstsq\(\): incompatible dimensions"):
        np.linalg.lstsq(w, np.ones(4))


def test_lstsq_per_example_gradients():
    """vmap(grad) through np.linalg.lstsq: the rank of each example cannot be branched on, so
    the residuals take the full-rank case's shape (NumPy's where a has rank N)."""
    rng_ = np.random.default_rng(4)
    A, B = XP.asarray(rng_.standard_normal((3, 5, 2))), XP.asarray(rng_.standard_normal((3, 5)))

    def f(a, b):
        x, res, _, _ = np.linalg.lstsq(a, b)
        return XP.sum(x**2) + XP.sum(res)

    got = pg.vmap(pg.grad(f, argnums=(0, 1)))(A, B)
    for i in range(3):
        want = pg.grad(f, argnums=(0, 1))(A[i], B[i])
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(_np(g[i]), _np(w), rtol=1e-12, atol=1e-14)


def test_cov_weights_differentiate_and_errors_name_them():
    rng_ = np.random.default_rng(5)
    x, aw = rng_.standard_normal((3, 6)), rng_.uniform(0.5, 2.0, 6)
    fw = np.array([1, 2, 1, 3, 1, 1])
    for kw in (dict(aweights=aw), dict(aweights=aw, fweights=fw), dict(aweights=aw, ddof=0)):
        ours = {k: XP.asarray(v) if k == "aweights" else v for k, v in kw.items()}
        np.testing.assert_allclose(_np(np.cov(XP.asarray(x), **ours)), np.cov(x, **kw), rtol=1e-13)
    check_vjp(XP, lambda a, w: np.cov(a, aweights=w), x, aw)  # in the data and the weights
    per = pg.vmap(lambda w: np.cov(XP.asarray(x), aweights=w))(XP.asarray(np.stack([aw, 2 * aw])))
    np.testing.assert_allclose(_np(per[1]), np.cov(x, aweights=2 * aw), rtol=1e-13)
    w = XP.asarray(fw.astype(float))
    w.requires_grad_()
    with pytest.raises(TypeError, match=r"fweights being differentiated"):
        np.cov(XP.asarray(x), fweights=w)
    xt = XP.asarray(x)
    xt.requires_grad_()  # ours, not NumPy's own (which words it "aweights cannot be negative")
    with pytest.raises(ValueError, match=r"aweights must be 1-D, non-negative"):
        np.cov(xt, aweights=XP.asarray(-aw))


@pytest.mark.parametrize(
    "call, what",
    [
        (lambda w: np.vander(w), "vander"),
        (lambda w: np.histogram(w, bins=2), "histogram"),
        (lambda w: np.spacing(w), "spacing"),
        (lambda w: np.add.reduceat(w, [0, 1]), r"add\.reduceat"),
        (lambda w: np.logaddexp.reduce(w), r"logaddexp\.reduce"),
        (lambda w: np.polyfit(np.arange(3.0), w, 1), "polyfit"),
        (lambda w: np.linalg.eig(w[:, None] * w), r"linalg\.eig"),
        (lambda w: np.unwrap(w), "unwrap"),
    ],
)
def test_a_function_without_a_rule_refuses_on_arrays_being_differentiated(call, what):
    w = XP.asarray(S(3))
    w.requires_grad_()
    pattern = (
        rf"numpy\.{what}\(\) was given an array of pycograd_xp\.numpy that is being "
        r"differentiated.*stop_gradient"
    )
    with pytest.raises(TypeError, match=pattern):
        call(w)
    with pytest.raises(TypeError, match=pattern):
        pg.grad(lambda x: XP.sum(call(x)))(XP.asarray(S(3)))
    # the way out works: NumPy's result on the values, wrapped, with no gradient
    r = call(pg.stop_gradient(w))
    want = call(_np(w))
    for g, v in zip(_leaves(r), _leaves(want), strict=True):
        assert type(g) is XP.Array and not g.requires_grad
        np.testing.assert_allclose(_np(g), v)


def test_the_refusal_names_an_existing_function_when_there_is_one():
    w = XP.asarray(S(3))
    w.requires_grad_()
    with pytest.raises(TypeError, match=r"use pycograd_xp\.numpy\.linalg\.eig\(\.\.\.\)"):
        np.linalg.eig(w[:, None] * w)
    assert callable(XP.linalg.eig)
    with pytest.raises(TypeError) as e:
        np.vander(w)
    assert "use pycograd_xp.numpy." not in str(e.value)  # NumPy's name has no xp function


def test_undifferentiated_arrays_get_numpys_own_answer_wrapped():
    a = S(2, 3)
    x = XP.asarray(a)
    for f in (
        lambda v: np.percentile(v, 30),
        lambda v: np.median(v, axis=0),
        np.sum,
        np.exp,
        lambda v: np.add.reduceat(v, [0, 1], axis=1),
        lambda v: np.histogram(v, bins=3),
        lambda v: np.linalg.eig(v[:, :2]),
        lambda v: np.spacing(v),
        lambda v: np.frexp(v),
    ):
        got, want = f(x), f(a)
        for g, w in zip(_leaves(got), _leaves(want), strict=True):
            assert type(g) is XP.Array, type(g)
            assert _np(g).dtype == np.asarray(w).dtype
            np.testing.assert_allclose(_np(g), w)
    assert np.allclose(x, a) is True
    assert isinstance(np.array2string(x), str)
    assert np.asarray(x).base is a or np.shares_memory(np.asarray(x), a) or True


def test_a_nested_array_of_another_namespace_is_not_mixed_silently():
    import array_api_strict

    s = pg.namespace(array_api_strict)
    x = XP.asarray(S(3))
    x.requires_grad_()
    with pytest.raises(TypeError, match="cannot mix arrays"):
        np.add(x, s.ones(3))


# -- the other namespaces: unchanged, and their refusals name functions that exist ----------------


def test_other_namespaces_refuse_with_an_existing_function_or_the_values():
    import array_api_strict

    s = pg.namespace(array_api_strict)
    x = s.ones(3)
    with pytest.raises(TypeError, match=r"numpy\.exp\(\).*pycograd_xp\.array_api_strict\.exp"):
        np.exp(x)
    with pytest.raises(TypeError, match=r"numpy\.add\.reduce\(\).*xp\.sum"):
        np.add.reduce(x)
    with pytest.raises(TypeError) as e:
        np.spacing(x)
    msg = str(e.value)
    assert "has no function for it" in msg and "stop_gradient" in msg
    assert "array_api_strict.spacing" not in msg
    assert not hasattr(type(x), "__array_function__")


# -- scipy.special through the lookup hook ---------------------------------------------------------


def test_foreign_ufuncs_dispatch_through_the_registered_table(monkeypatch):
    special = pytest.importorskip("scipy.special")
    w = XP.asarray(U(3))
    w.requires_grad_()
    with pytest.raises(
        TypeError, match=r"scipy\.special\.log1p\(\).*being differentiated.*stop_gradient"
    ):
        special.log1p(w)  # scipy's own ufunc, not NumPy's: no rule registered
    monkeypatch.setitem(protocols.FOREIGN_UFUNCS, "log1p", "log1p")
    check_forward(special.log1p, (U(3),))
    check_grad(special.log1p, (U(3),))
    with pytest.raises(ValueError, match="already mapped"):
        protocols.register_ufuncs({"log1p": "exp"})
    # undifferentiated: scipy's own answer, wrapped
    r = special.erf(XP.asarray([0.5]))
    assert type(r) is XP.Array
    np.testing.assert_allclose(_np(r), special.erf([0.5]))


_SCIPY_UFUNCS = """
import os, sys
import numpy as np, scipy.special as sc, pycograd_xp as pg
from conformance.gradcheck import check_vjp
from pycograd_xp.ops.special import UFUNCS
assert isinstance(sc.erf, np.ufunc), "scipy's array API mode is on"
xp = pg.namespace(np)
x = np.random.default_rng(0).uniform(0.2, 0.9, (2, 3))
# the incomplete functions differentiate in x only: their shape parameters are constants
SHAPES = {"gammainc": (1.5,), "gammaincc": (1.5,), "betainc": (1.5, 2.5)}
SHAPES.update(fdtr=(3.0, 10.0), fdtrc=(3.0, 10.0))
for name in UFUNCS:
    f = getattr(sc, name)
    if name in SHAPES:
        f = lambda v, f=f, c=SHAPES[name]: f(*c, v)  # noqa: E731
    args = (x, x + 1) if name not in SHAPES and f.nin == 2 else (x,)
    w = [xp.asarray(a) for a in args]
    for v in w:
        v.requires_grad_()
    r = f(*w)
    assert r.requires_grad, name
    np.testing.assert_allclose(np.asarray(pg.stop_gradient(r)), f(*args), rtol=1e-12)
    check_vjp(xp, f, *args)
assert type(sc.erf(xp.asarray(x))) is xp.Array  # not differentiated: scipy's own, wrapped
print("ok", len(UFUNCS))
"""


def test_scipy_special_ufuncs_reach_their_rows():
    """scipy.special's ufuncs (scipy without SCIPY_ARRAY_API=1, so a fresh process) on arrays
    being differentiated run the rows of ops/special.py: values and gradients."""
    pytest.importorskip("scipy.special")
    env = {k: v for k, v in os.environ.items() if k != "SCIPY_ARRAY_API"}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    out = subprocess.run(
        [sys.executable, "-c", _SCIPY_UFUNCS], capture_output=True, text=True, env=env, cwd=root
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.startswith("ok")


# -- transforms through the protocols --------------------------------------------------------------


def test_jvp_vmap_and_hessian_through_numpy_calls():
    a = S(3, 4)

    def f(x):
        return np.sum(np.tanh(np.einsum("ij,jk->ik", x, x.T)))

    x = XP.asarray(a)
    _, t = pg.jvp(f, (x,), (XP.ones_like(x),))
    g = pg.grad(f)(x)
    np.testing.assert_allclose(float(t), float(XP.sum(g)), rtol=1e-10)
    rows = pg.vmap(lambda r: np.sum(np.multiply(np.exp(r), np.arange(4.0))))(x)
    np.testing.assert_allclose(_np(rows), np.sum(np.exp(a) * np.arange(4.0), axis=1))
    h = pg.hessian(lambda v: np.sum(np.sin(v) ** 2))(XP.asarray(S(3)))
    assert tuple(h.shape) == (3, 3)


def test_compile_traces_numpy_calls():
    def f(x):
        return np.sum(np.exp(x) * 2.0, axis=0)

    a = S(2, 3)
    cf = pg.compile(f)
    np.testing.assert_allclose(_np(cf(XP.asarray(a))), np.sum(np.exp(a) * 2.0, axis=0))
    np.testing.assert_allclose(_np(cf(XP.asarray(a + 1))), np.sum(np.exp(a + 1) * 2.0, axis=0))


def test_imperative_backward_through_numpy_calls():
    w = XP.asarray(S(3))
    w.requires_grad_()
    loss = np.sum(np.square(w)) + np.linalg.norm(w)
    loss.backward()
    v = _np(w)
    np.testing.assert_allclose(_np(w.grad), 2 * v + v / np.linalg.norm(v), rtol=1e-12)


def test_the_per_op_path_is_untouched():
    """The ordinary xp.* functions are the same objects whatever the protocols do."""
    assert "array_ufunc" not in XP.exp.__code__.co_names
    assert type(XP.exp(XP.ones(2))) is XP.Array


# -- xarray -------------------------------------------------------------------------------------


def test_xarray_default_reductions_differentiate():
    xr = pytest.importorskip("xarray")
    a = U(4, 3)
    a[1, 2] = np.nan

    def f(x):
        da = xr.DataArray(x, dims=("t", "f"))
        return (da.mean() + (da * 2.0).sum("f").mean("t") + da.std("t").sum()).data

    check_grad(f, (a,))
    r = f(XP.asarray(a))
    assert type(r) is XP.Array
    want = np.nanmean(a) + np.nanmean(np.nansum(a * 2, axis=1)) + np.nansum(np.nanstd(a, axis=0))
    np.testing.assert_allclose(_np(r), want, rtol=1e-12)
    g = pg.grad(lambda x: xr.DataArray(x).mean().data)(XP.asarray(a))
    assert _np(g)[1, 2] == 0.0 and np.isclose(_np(g)[0, 0], 1 / 11)


def _xda(x):
    xr = pytest.importorskip("xarray")
    return xr.DataArray(x, dims=("t", "f"), coords={"g": ("t", [0, 1, 0, 1, 2, 2])})


@pytest.mark.parametrize(
    "f, want",
    [
        (lambda d: d.median("t"), lambda a: np.median(a, axis=0)),
        (lambda d: d.median(), lambda a: np.median(a)),
        (lambda d: d.quantile(0.3, dim="t"), lambda a: np.quantile(a, 0.3, axis=0)),
        (lambda d: d.quantile([0.2, 0.9], dim="f"), lambda a: np.quantile(a, [0.2, 0.9], axis=1)),
        (
            lambda d: d.groupby("g").mean(),
            lambda a: np.stack([a[[0, 2]].mean(0), a[[1, 3]].mean(0), a[4:].mean(0)]),
        ),
        (
            lambda d: d.groupby("g").sum(),
            lambda a: np.stack([a[[0, 2]].sum(0), a[[1, 3]].sum(0), a[4:].sum(0)]),
        ),
        (
            lambda d: d.rolling(t=3).construct("w").mean("w", skipna=False).isel(t=slice(2, None)),
            lambda a: np.lib.stride_tricks.sliding_window_view(a, 3, axis=0).mean(-1),
        ),
        (
            lambda d: d.rolling(t=3, center=True).construct("w").mean("w"),
            lambda a: np.stack(
                [
                    np.nanmean(np.pad(a, ((1, 1), (0, 0)), constant_values=np.nan)[i : i + 3], 0)
                    for i in range(6)
                ]
            ),
        ),
    ],
    ids=[
        "median",
        "median-all",
        "quantile",
        "quantiles",
        "groupby-mean",
        "groupby-sum",
        "rolling-construct",
        "rolling-center",
    ],
)
def test_xarray_median_quantile_groupby_rolling_windows_differentiate(f, want):
    """xarray takes NumPy's names from the array's namespace (xp.quantile, xp.pad,
    xp.lib.stride_tricks.sliding_window_view: served from the protocol table) and indexes with
    NumPy integer arrays (groupby: constants of the namespace)."""
    a = U(6, 3)
    r = f(_xda(XP.asarray(a)))
    assert type(r.data) is XP.Array
    np.testing.assert_allclose(_np(r.data), want(a), rtol=1e-12)
    check_grad(lambda x: f(_xda(x)).data, (a,))


def test_xarray_rolling_mean():
    # xarray counts the valid entries with xp.sum of a boolean array: sum takes booleans
    a = U(6, 3)
    r = _xda(XP.asarray(a)).rolling(t=3).mean()
    np.testing.assert_allclose(_np(r.data)[2:], _xda(a).rolling(t=3).mean().values[2:])
    g = pg.grad(lambda v: XP.sum(_xda(v).rolling(t=3).mean().data[2:]))(XP.asarray(a))
    np.testing.assert_allclose(
        _np(g), [[1 / 3] * 3, [2 / 3] * 3] + [[1.0] * 3] * 2 + [[2 / 3] * 3, [1 / 3] * 3]
    )


def test_the_namespace_serves_numpys_names_from_the_table():
    assert XP.pad.__name__ == "pad" and callable(XP.quantile)
    assert XP.lib.stride_tricks.sliding_window_view.__name__ == "sliding_window_view"
    assert "pad" not in dir(XP)  # the module's own names are the standard's
    with pytest.raises(AttributeError, match="has no attribute 'histogram'"):
        XP.histogram  # noqa: B018
    with pytest.raises(AttributeError):
        XP.lib.nothing  # noqa: B018
    assert XP.special.erf.__name__ == "erf" and "gammaln" in dir(XP.special)
    with pytest.raises(AttributeError, match="special has no function 'zeta'"):
        XP.special.zeta  # noqa: B018
    np.testing.assert_allclose(_np(XP.special.xlogy(2, XP.asarray([3.0]))), 2 * np.log([3.0]))
    x = XP.asarray(S(5))
    x.requires_grad_()
    np.testing.assert_allclose(_np(XP.pad(x, 2, mode="wrap")), np.pad(_np(x), 2, mode="wrap"))
    g = pg.grad(lambda v: XP.sum(XP.transpose(XP.pad(v[None], 1)) ** 2))(x)
    np.testing.assert_allclose(_np(g), 2 * _np(x))


def test_numpy_index_arrays_are_constant_indices():
    a = S(4, 3)
    x = XP.asarray(a)
    x.requires_grad_()
    idx = np.array([2, 0, 2])
    np.testing.assert_allclose(_np(x[idx]), a[idx])
    np.testing.assert_allclose(_np(x[:, np.array([True, False, True])]), a[:, [0, 2]])
    g = pg.grad(lambda v: XP.sum(v[(slice(None), np.array([1, 1]))]))(XP.asarray(a))
    np.testing.assert_allclose(_np(g), np.array([[0.0, 2.0, 0.0]] * 4))
    y = XP.asarray(a.copy())
    y[np.array([0, 3])] = 0.0
    assert np.all(_np(y)[[0, 3]] == 0.0)


# -- scipy with and without SCIPY_ARRAY_API: what reaches the rows, what refuses ------------------

_SCIPY_MODES = """
import os, sys
import numpy as np, pytest, scipy.special as sc, scipy.stats as st, pycograd_xp as pg
from scipy._lib._array_api import SCIPY_ARRAY_API
from conformance.gradcheck import check_vjp
from pycograd_xp.ops.special import UFUNCS
assert bool(SCIPY_ARRAY_API) == (os.environ.get("SCIPY_ARRAY_API") == "1")
xp = pg.namespace(np)
rng = np.random.default_rng(0)
x, loc, scale = rng.uniform(0.5, 2, 5), rng.uniform(-0.3, 0.3, 5), rng.uniform(0.5, 1.5, 5)

def leaf(a):
    w = xp.asarray(a)
    w.requires_grad_()
    return w

# scipy.special's functions with rows: values and gradients in both modes (without the
# variable: scipy's ufuncs reach __array_ufunc__; with it: scipy's wrappers find xp.special)
# the incomplete functions differentiate in x only: their shape parameters are constants
shapes = {"gammainc": (1.5,), "gammaincc": (1.5,), "betainc": (1.5, 2.5)}
shapes.update(fdtr=(3.0, 10.0), fdtrc=(3.0, 10.0))
for name in UFUNCS:
    f = getattr(sc, name)
    if name in shapes:
        f = lambda v, f=f, c=shapes[name]: f(*c, v)  # noqa: E731
    two = ("xlogy", "xlog1py", "rel_entr", "betaln", "kl_div", "huber", "boxcox", "boxcox1p")
    args = (x / 3, x / 3 + 1) if name in two else (x / 3,)
    r = f(*[leaf(a) for a in args])
    assert type(r) is xp.Array and r.requires_grad, name
    np.testing.assert_allclose(np.asarray(pg.stop_gradient(r)), f(*args), rtol=1e-12)
    check_vjp(xp, f, *args)

# scipy.stats distributions (rv_continuous and the new Normal/make_distribution classes) call
# np.asarray on their arguments and compute in NumPy: on arrays being differentiated that is
# refused (it would drop the gradient), in both modes; on stop_gradient arrays, scipy's value
dists = {
    "norm.logpdf": lambda x, l, s: st.norm.logpdf(x, l, s),
    "t.logpdf": lambda x, l, s: st.t.logpdf(x, 3.5, l, s),
    "gamma.logpdf": lambda x, l, s: st.gamma.logpdf(x, 2.5, l - 1, s),
    "Normal.logpdf": lambda x, l, s: st.Normal(mu=l, sigma=s).logpdf(x),
}
for name, f in dists.items():
    with pytest.raises(TypeError, match="being differentiated; converting it would drop"):
        f(leaf(x), leaf(loc), leaf(scale))
    v = f(*[pg.stop_gradient(leaf(a)) for a in (x, loc, scale)])
    np.testing.assert_allclose(np.asarray(v), f(x, loc, scale), rtol=1e-12)

# functions scipy writes with the array's namespace (only with the variable set)
generic = {
    "special.logsumexp": lambda a: sc.logsumexp(a * 2.0),
    "special.log_softmax": lambda a: sc.log_softmax(a),
    "stats.zscore": lambda a: st.zscore(a),
    "stats.skew": lambda a: st.skew(a),
}
for name, f in generic.items():
    if SCIPY_ARRAY_API:
        r = f(leaf(x))
        assert type(r) is xp.Array and r.requires_grad, name
        np.testing.assert_allclose(np.asarray(pg.stop_gradient(r)), f(x), rtol=1e-12)
        check_vjp(xp, f, x)
    else:  # the refusal says what the variable would change
        with pytest.raises(TypeError, match="being differentiated.*SCIPY_ARRAY_API=1 is set"):
            f(leaf(x))
# with the variable set, the distributions' refusal does not suggest it
with pytest.raises(TypeError, match="being differentiated") as refused:
    st.norm.logpdf(leaf(x))
assert ("SCIPY_ARRAY_API" in str(refused.value)) == (not SCIPY_ARRAY_API)
print("ok", SCIPY_ARRAY_API)
"""


@pytest.mark.parametrize("mode", ["unset", "1"])
def test_scipy_special_and_stats_in_both_array_api_modes(mode):
    """What SciPy does with our arrays under each SCIPY_ARRAY_API setting (a fresh process
    each: SciPy reads the variable once, and the client tests set it for the whole run)."""
    pytest.importorskip("scipy.stats")
    env = {k: v for k, v in os.environ.items() if k != "SCIPY_ARRAY_API"}
    if mode == "1":
        env["SCIPY_ARRAY_API"] = "1"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    out = subprocess.run(
        [sys.executable, "-c", _SCIPY_MODES], capture_output=True, text=True, env=env, cwd=root
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.startswith("ok")
