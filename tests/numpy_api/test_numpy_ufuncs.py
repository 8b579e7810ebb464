"""NumPy's ufuncs on arrays of ``namespace(numpy)`` (``__array_ufunc__``,
``pycograd_xp/numpy_api/_dispatch.py`` and ``ufuncs.py``): every mapped ufunc's values equal
NumPy's (float64 and float32, dtype included) and its VJP passes the dot-product test; the
methods (``reduce``, ``accumulate``, ``outer``, ``at``) and ``out=``."""

from __future__ import annotations

import numpy as np
import pytest
from _numpy_common import XP, S, U, _np, check_forward, check_grad, rng

import pycograd_xp as pg
from pycograd_xp import numpy_api as protocols

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
