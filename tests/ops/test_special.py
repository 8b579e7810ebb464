"""pycograd_xp.special: values against scipy.special (float64 and float32, sweeps with edge
values) on NumPy, on array-api-strict (the composed functions) and on Cubed (scipy per block,
several chunkings); second derivatives (each derivative that is another special function is
a recorded row); the conventions at 0 and in the tails; errors that name the way out.

Every row's VJP, JVP, batching, shape and memory rules and its compiled replay are checked over
the gradient cases of ``conformance/grad_cases.py`` by the conformance and memory suites.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

import pycograd_xp as pg
from conformance.gradcheck import check_vjp
from pycograd_xp import special
from pycograd_xp.ops import REGISTRY
from pycograd_xp.ops import special as rows

sc = pytest.importorskip("scipy.special")

XN = pg.namespace(np)
rng = np.random.default_rng(19)


def _np(a):
    a = pg.unwrap(a)
    return np.asarray(a.compute() if hasattr(a, "compute") else a)


EDGES = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-300, -1e-300, 1e-30, 5e-324]
# name: (sweep of its domain, whether array-api-strict has it)
UNARY = {
    "erf": (np.linspace(-7, 7, 301), False),
    "erfc": (np.linspace(-7, 30, 301), False),
    "erfinv": (np.concatenate([np.linspace(-1, 1, 301), [1 - 1e-16, -1 + 1e-16, 1.5]]), False),
    "expit": (np.concatenate([np.linspace(-800, 800, 301), np.linspace(-40, 40, 301)]), True),
    "logit": (np.concatenate([np.linspace(0, 1, 301), [0.3, 0.65, 1e-300, 1 - 1e-16]]), True),
    "log_expit": (np.concatenate([np.linspace(-800, 800, 301), np.linspace(-40, 40, 301)]), True),
    "gammaln": (np.concatenate([np.linspace(-10.5, 200, 301), [1e-300, 1e300]]), False),
    "digamma": (np.linspace(-10.5, 200, 301), False),
    "ndtr": (np.linspace(-40, 40, 301), False),
    "log_ndtr": (np.concatenate([np.linspace(-1e5, 40, 301), np.linspace(-40, 8, 301)]), False),
    "ndtri": (np.concatenate([np.linspace(0, 1, 301), [1e-300, 1 - 1e-16]]), False),
    "i0": (np.linspace(-700, 700, 301), False),
    "i0e": (np.linspace(-1e4, 1e4, 301), False),
    "i1": (np.linspace(-700, 700, 301), False),
    "i1e": (np.linspace(-1e4, 1e4, 301), False),
    "entr": (np.concatenate([np.linspace(-2, 50, 301), [1e-300, 1e300]]), True),
}
BINARY = ["xlogy", "xlog1py", "rel_entr", "betaln", "kl_div", "huber", "boxcox", "boxcox1p"]
COMPOSED = sorted(n for n, (_, s) in UNARY.items() if s)
COMPOSED += ["xlogy", "xlog1py", "rel_entr", "kl_div", "huber", "boxcox", "boxcox1p"]


def _sweep(name, dtype):
    return np.concatenate([UNARY[name][0], EDGES]).astype(dtype)


def _xy(dtype):
    x = np.concatenate([rng.standard_normal(200) * 3, [0.0, 0.0, 0.0, -0.0, 2.0, np.nan, 1.0]])
    y = np.concatenate([rng.uniform(-1.5, 5, 200), [0.0, np.nan, -1.0, 0.0, 0.0, 1.0, np.inf]])
    return x.astype(dtype), y.astype(dtype)


def _close(got, want, dtype, ulps=4):
    """Equal NaN and infinity patterns; elsewhere within ``ulps`` ulps of scipy (differences
    among subnormal results, where scipy flushes some to 0, are ignored)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype == dtype and got.shape == want.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    fin = np.isfinite(want)
    np.testing.assert_array_equal(got[~fin & ~np.isnan(want)], want[~fin & ~np.isnan(want)])
    eps, tiny = np.finfo(dtype).eps, np.finfo(dtype).tiny
    np.testing.assert_allclose(got[fin], want[fin], rtol=ulps * eps, atol=tiny)


# -- values --------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_numpy_values_are_scipys(name, dtype):
    x = _sweep(name, dtype)
    with np.errstate(all="ignore"):
        got = _np(getattr(special, name)(XN.asarray(x)))
    np.testing.assert_array_equal(got, getattr(sc, name)(x))  # scipy's own call, to the bit
    assert got.dtype == dtype


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n", [0, 1, 2, 5])
def test_polygamma_values(n, dtype):
    x = np.concatenate([np.linspace(0.1, 50, 101), [-1.5, -2.0, 0.0, np.inf, np.nan]])
    x = x.astype(dtype)
    got = _np(special.polygamma(n, XN.asarray(x)))
    assert got.dtype == dtype  # scipy's own widens float32 to float64
    _close(got, sc.polygamma(n, x).astype(dtype), dtype, ulps=1)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", BINARY)
def test_two_argument_values(name, dtype):
    x, y = _xy(dtype)
    f, ref = getattr(special, name), getattr(sc, name)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(_np(f(XN.asarray(x), XN.asarray(y))), ref(x, y))
        col, row = x[:6, None], y[None, :7]  # broadcasting, and Python scalars on either side
        np.testing.assert_array_equal(_np(f(XN.asarray(col), XN.asarray(row))), ref(col, row))
        np.testing.assert_array_equal(_np(f(XN.asarray(x), 2.5)), ref(x, dtype(2.5)))
        np.testing.assert_array_equal(_np(f(0.0, XN.asarray(y))), ref(dtype(0), y))
        mixed = _np(f(XN.asarray(x.astype(np.float32)), XN.asarray(y.astype(np.float64))))
    assert mixed.dtype == np.float64


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_softmax_family_values(dtype):
    a = (rng.standard_normal((30, 7)) * rng.choice([1, 10, 300], size=(30, 1))).astype(dtype)
    a[0] = -np.inf
    a[1, 2] = np.inf
    a[2, 3] = np.nan
    a[3] = [0, -40, -50, -60, -70, -80, -90]  # logsumexp near 0: its relative precision kept
    a[4, :2] = np.inf
    a[5] = 3  # ties
    a[6, :3] = -np.inf
    x = XN.asarray(a)
    with np.errstate(all="ignore"):
        for axis in (None, 0, 1, -1, (0, 1)):
            for keepdims in (False, True):
                _close(
                    _np(special.logsumexp(x, axis=axis, keepdims=keepdims)),
                    sc.logsumexp(a, axis=axis, keepdims=keepdims),
                    dtype,
                )
            _close(_np(special.softmax(x, axis=axis)), sc.softmax(a, axis=axis), dtype)
            _close(_np(special.log_softmax(x, axis=axis)), sc.log_softmax(a, axis=axis), dtype)
    assert float(_np(special.logsumexp(XN.asarray([0.0, -40.0])))) == pytest.approx(
        4.248354255291589e-18, rel=1e-15
    )
    for f in (special.logsumexp, special.softmax, special.log_softmax):  # 0-d
        np.testing.assert_array_equal(_np(f(XN.asarray(1.5))), getattr(sc, f.__name__)(1.5))


def test_integers_are_taken_as_float64_as_scipy_does():
    got = special.erf(XN.asarray([0, 1, 2]))
    assert got.dtype == XN.float64
    np.testing.assert_array_equal(_np(got), sc.erf(np.array([0, 1, 2])))
    got = special.xlogy(XN.asarray([0, 1]), XN.asarray([True, True]))
    np.testing.assert_array_equal(_np(got), [0.0, 0.0])
    assert special.softmax(XN.asarray([1, 2])).dtype == XN.float64


def test_raw_numpy_arrays_run_the_rows_impl():
    x = np.linspace(-2, 2, 5)
    np.testing.assert_array_equal(np.asarray(special.erf(x)), sc.erf(x))
    np.testing.assert_allclose(np.asarray(special.logsumexp(x)), sc.logsumexp(x), rtol=1e-15)


# -- array-api-strict: the compositions ----------------------------------------------------------


@pytest.fixture
def sxp():
    return pg.namespace(pytest.importorskip("array_api_strict"))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", COMPOSED)
def test_strict_composes_as_scipy_computes(sxp, name, dtype):
    f, ref = getattr(special, name), getattr(sc, name)
    with np.errstate(all="ignore"):
        if name in UNARY:
            x = _sweep(name, dtype)
            _close(_np(f(sxp.asarray(x))), ref(x), dtype)
        else:
            x, y = _xy(dtype)
            # rel_entr and kl_div are x log(x / y) (- x + y) as scipy's, but NumPy's log and the
            # C library's differ by an ulp near 1, where the result is small: compare within
            # ulps of the terms
            # (boxcox: expm1(lmbda log x) / lmbda, an ulp from each of log and expm1)
            plain = functools.partial(_close, ulps=8 if name.startswith("boxcox") else 4)
            close = plain if name not in ("rel_entr", "kl_div") else _close_to_terms(x, y)
            close(_np(f(sxp.asarray(x), sxp.asarray(y))), ref(x, y), dtype)
            close = plain if name not in ("rel_entr", "kl_div") else _close_to_terms(x, 2.5)
            close(_np(f(sxp.asarray(x), 2.5)), ref(x, dtype(2.5)), dtype)
            _close(_np(f(0.0, sxp.asarray(y))), ref(dtype(0), y), dtype)


def _close_to_terms(x, y):
    def close(got, want, dtype):
        fin = np.isfinite(want)
        _close(np.where(fin, 0, got).astype(dtype), np.where(fin, 0, want).astype(dtype), dtype)
        with np.errstate(all="ignore"):
            terms = np.abs(x) * (1 + np.abs(np.log(np.abs(x / y)))) + np.abs(y)
            terms = np.where(np.isfinite(terms), terms, 0.0)  # x == 0: exact
        bound = 4 * np.finfo(dtype).eps * np.broadcast_to(terms, np.shape(want))[fin]
        assert (np.abs(got[fin] - want[fin]) <= bound).all()

    return close


def test_strict_softmax_family(sxp):
    a = rng.standard_normal((4, 5)) * 50
    for axis in (None, 0, 1):
        _close(_np(special.softmax(sxp.asarray(a), axis=axis)), sc.softmax(a, axis=axis), a.dtype)
        _close(_np(special.logsumexp(sxp.asarray(a), axis=axis)), sc.logsumexp(a, axis), a.dtype)


@pytest.mark.parametrize(
    "name",
    sorted(set(UNARY) - set(COMPOSED))
    + ["polygamma", "betaln", "gammainc", "gammaincc", "betainc"],
    ids=lambda n: n,
)
def test_strict_refuses_what_is_no_composition_naming_the_way_out(sxp, name):
    x = sxp.asarray([0.5, 1.5])
    f = {
        "polygamma": lambda x: special.polygamma(1, x),
        "betaln": lambda x: special.betaln(x, x),
        "gammainc": lambda x: special.gammainc(x, x),
        "gammaincc": lambda x: special.gammaincc(x, x),
        "betainc": lambda x: special.betainc(x, x, x),
        "fdtrc": lambda x: special.fdtrc(x, x, x),
    }.get(name, getattr(special, name))
    with pytest.raises(
        NotImplementedError,
        match=rf"special\.{name}\(\): the array_api_strict backend has no {name}; it is no "
        r"composition of standard functions; compute it on a backend that has it: NumPy",
    ):
        f(x)


def test_numpy_without_scipy_composes_or_asks_for_scipy(monkeypatch):
    """Without scipy (its lookup answers None) NumPy composes what it can, and asks for scipy
    for the rest."""
    monkeypatch.setattr(rows, "_backend_fn", lambda bk, name: None)
    x = np.linspace(-30, 30, 61)
    _close(_np(special.expit(XN.asarray(x))), sc.expit(x), np.float64)
    _close(_np(special.xlog1py(XN.asarray(x), 0.5)), sc.xlog1py(x, 0.5), np.float64)
    g = pg.grad(lambda x: XN.sum(special.log_expit(x)))(XN.asarray(x))
    np.testing.assert_allclose(_np(g), sc.expit(-x), rtol=1e-15)
    with pytest.raises(NotImplementedError, match=r"special\.gammaln\(\): .*install it"):
        special.gammaln(XN.asarray(x))


# -- derivatives ---------------------------------------------------------------------------------

# name: (points, the second derivative scipy gives there)
SECOND = {
    "erf": (np.linspace(-2, 2, 7), lambda x: -4 * x / np.sqrt(np.pi) * np.exp(-x * x)),
    "erfinv": (
        np.linspace(-0.8, 0.8, 7),
        lambda x: np.pi / 2 * sc.erfinv(x) * np.exp(2 * sc.erfinv(x) ** 2),
    ),
    "expit": (np.linspace(-5, 5, 7), lambda x: sc.expit(x) * sc.expit(-x) * (1 - 2 * sc.expit(x))),
    "log_expit": (np.linspace(-5, 5, 7), lambda x: -sc.expit(x) * sc.expit(-x)),
    "logit": (np.linspace(0.1, 0.9, 7), lambda x: (2 * x - 1) / (x * (1 - x)) ** 2),
    "gammaln": (np.linspace(0.5, 6, 7), lambda x: sc.polygamma(1, x)),
    "entr": (np.linspace(0.3, 3, 7), lambda x: -1 / x),
    "digamma": (np.linspace(0.5, 6, 7), lambda x: sc.polygamma(2, x)),
    "ndtr": (np.linspace(-3, 3, 7), lambda x: -x * np.exp(-x * x / 2) / np.sqrt(2 * np.pi)),
    "ndtri": (
        np.linspace(0.1, 0.9, 7),
        lambda x: 2 * np.pi * sc.ndtri(x) * np.exp(sc.ndtri(x) ** 2),
    ),
    "i0": (
        np.linspace(-3, 3, 7),
        lambda x: sc.i0(x) - np.where(x == 0, 0.5, sc.i1(x) / np.where(x == 0, 1, x)),
    ),
    "i1": (
        np.array([-2.0, -0.5, 0.7, 3.0]),
        lambda x: sc.i1(x) - (sc.i0(x) - sc.i1(x) / x) / x + sc.i1(x) / x**2,
    ),
}


def _second(f, x):
    return pg.grad(lambda x: XN.sum(pg.grad(lambda y: XN.sum(f(y)))(x)))(x)


@pytest.mark.parametrize("name", sorted(SECOND))
def test_second_derivatives_are_scipys(name):
    x, want = SECOND[name]
    got = _np(_second(getattr(special, name), XN.asarray(x)))
    np.testing.assert_allclose(got, want(x), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", ["i0e", "i1e", "log_ndtr", "polygamma", "xlogy", "xlog1py"])
def test_second_derivatives_match_finite_differences(name):
    f = {
        "polygamma": lambda x: special.polygamma(2, x + 3.0),
        "xlogy": lambda x: special.xlogy(x, x * x + 1.0),
        "xlog1py": lambda x: special.xlog1py(x, x * x),
    }.get(name, getattr(special, name))
    x = np.array([-2.5, -0.7, 0.3, 1.9])
    first = lambda v: _np(pg.grad(lambda y: XN.sum(f(y)))(XN.asarray(v)))
    h = 1e-5
    fd = (first(x + h) - first(x - h)) / (2 * h)
    np.testing.assert_allclose(_np(_second(f, XN.asarray(x))), fd, rtol=1e-6, atol=1e-8)


def test_hessians_forward_over_reverse():
    """jacfwd over jacrev: the JVP rules call the rows too (gammaln's Hessian is polygamma(1))."""
    x = np.array([0.7, 1.5, 3.0])
    h = _np(pg.hessian(lambda x: XN.sum(special.gammaln(x)))(XN.asarray(x)))
    np.testing.assert_allclose(h, np.diag(sc.polygamma(1, x)), rtol=1e-12)
    h = _np(pg.hessian(lambda x: special.logsumexp(x))(XN.asarray(x)))
    p = sc.softmax(x)
    np.testing.assert_allclose(h, np.diag(p) - np.outer(p, p), rtol=1e-12, atol=1e-15)
    h = _np(pg.hessian(lambda x: XN.sum(special.i1(x)))(XN.asarray(np.array([0.0, 1.0]))))
    assert h[0, 0] == 0.0 and np.isfinite(h).all()


def test_derivatives_at_zero_and_in_the_tails():
    grad = lambda f, v: _np(pg.grad(lambda x: XN.sum(f(x)))(XN.asarray(v)))
    assert grad(special.i1, [0.0])[0] == 0.5 and grad(special.i1e, [0.0])[0] == 0.5
    x = np.array([-40.0, -1e3])  # log_ndtr' = pdf / ndtr, both underflowing: ~ -x
    np.testing.assert_allclose(grad(special.log_ndtr, x), -x, rtol=1e-3)
    assert grad(special.expit, [40.0])[0] == pytest.approx(math.exp(-40), rel=1e-12)
    assert grad(special.log_expit, [-800.0])[0] == 1.0
    g = _np(pg.grad(lambda a: special.logsumexp(a))(XN.asarray([-np.inf, 0.0, 1.0])))
    np.testing.assert_allclose(g, [0.0, *sc.softmax([0.0, 1.0])], rtol=1e-15)


def test_xlogy_derivatives_at_x_zero():
    """At x == 0 with y > 0, x log y is smooth: d/dx = log y (JAX's, finite differences'); only
    at x == 0 with y <= 0, where it is not differentiable, both partials are 0 (PyTorch's)."""
    x = XN.asarray([0.0, 0.0, 2.0, 0.0])
    y = XN.asarray([0.0, 3.0, 3.0, np.nan])
    out = special.xlogy(x, y)
    np.testing.assert_array_equal(_np(out), [0.0, 0.0, 2 * np.log(3.0), np.nan])
    gx, gy = pg.grad(lambda x, y: XN.sum(special.xlogy(x, y)[:3]), argnums=(0, 1))(x, y)
    np.testing.assert_array_equal(_np(gx), [0.0, np.log(3.0), np.log(3.0), 0.0])
    # finite differences at (0, 3) in x, for xlogy and xlog1py
    for f, ref in ((special.xlogy, np.log(3.0)), (special.xlog1py, np.log1p(3.0))):
        fd = (_np(f(XN.asarray(1e-6), XN.asarray(3.0))) - _np(f(XN.asarray(-1e-6), 3.0))) / 2e-6
        g = _np(pg.grad(lambda x, f=f: f(x, XN.asarray(3.0)))(XN.asarray(0.0)))
        np.testing.assert_allclose([g, fd], [ref, ref], rtol=1e-9)
        g = _np(pg.grad(lambda x, f=f: f(x, 3.0))(XN.asarray(0.0)))  # a Python float y
        np.testing.assert_allclose(g, ref, rtol=1e-15)
    np.testing.assert_array_equal(_np(gy), [0.0, 0.0, 2 / 3, 0.0])
    gy2 = _np(pg.grad(lambda y: XN.sum(pg.grad(lambda y: XN.sum(special.xlogy(x, y)[:3]))(y)))(y))
    np.testing.assert_array_equal(gy2, [0.0, 0.0, -2 / 9, 0.0])  # no NaN from 0 / 0
    # a Python 0 for x: 0 whatever y (even at log1p's pole); y log1p(-1): -inf but at y == 0
    v = XN.asarray([-1.0, 0.0, 3.0])
    g = _np(pg.grad(lambda v: XN.sum(special.xlog1py(0.0, v) + special.xlog1py(v, -1.0)))(v))
    np.testing.assert_array_equal(g, [-np.inf, 0.0, -np.inf])


def test_entr_and_rel_entr_derivatives_outside_the_positive_domain():
    """entr' = -(log x + 1): +inf at 0 (the one-sided derivative, as JAX's), 0 below 0 where
    entr is -inf. rel_entr's partials are 0 wherever x > 0, y > 0 fails (at x == 0, as xlogy's
    and JAX's), with no NaN from log 0 or 0 / 0, in second derivatives too."""
    x = XN.asarray([0.0, -1.0, 0.5, 2.0])
    np.testing.assert_array_equal(_np(special.entr(x)), sc.entr(_np(x)))
    g = _np(pg.grad(lambda x: XN.sum(special.entr(x)))(x))
    np.testing.assert_array_equal(g, [np.inf, 0.0, -(np.log(0.5) + 1), -(np.log(2.0) + 1)])
    h = _np(pg.grad(lambda x: XN.sum(pg.grad(lambda x: XN.sum(special.entr(x)))(x)))(x[2:]))
    np.testing.assert_allclose(h, [-2.0, -0.5], rtol=1e-15)  # entr'' = -1 / x
    px = XN.asarray([0.0, 0.0, -1.0, 1.0, 2.0, 1.5])
    py = XN.asarray([2.0, 0.0, 1.0, -1.0, 0.5, 3.0])
    np.testing.assert_array_equal(_np(special.rel_entr(px, py)), sc.rel_entr(_np(px), _np(py)))
    gx, gy = pg.grad(lambda x, y: XN.sum(special.rel_entr(x, y)[:5]), argnums=(0, 1))(px, py)
    np.testing.assert_array_equal(_np(gx), [0.0, 0.0, 0.0, 0.0, np.log(4.0) + 1, 0.0])
    np.testing.assert_array_equal(_np(gy), [0.0, 0.0, 0.0, 0.0, -4.0, 0.0])
    hy = pg.grad(lambda y: XN.sum(pg.grad(lambda y: XN.sum(special.rel_entr(px, y)))(y)))(py)
    np.testing.assert_allclose(_np(hy), [0.0, 0.0, 0.0, 0.0, 8.0, 1.5 / 9], rtol=1e-15)


def test_kl_div_and_huber_derivatives_at_their_edges():
    x = XN.asarray([0.0, 0.0, 2.0, 1.0, -1.0])
    y = XN.asarray([2.0, 0.0, 0.5, -1.0, 1.0])
    np.testing.assert_array_equal(_np(special.kl_div(x, y)), sc.kl_div(_np(x), _np(y)))
    gx, gy = pg.grad(lambda x, y: XN.sum(special.kl_div(x, y)[:3]), argnums=(0, 1))(x, y)
    np.testing.assert_array_equal(_np(gx), [-1.0, -1.0, np.log(4.0), 0.0, 0.0])  # as JAX's
    np.testing.assert_array_equal(_np(gy), [1.0, 1.0, 1 - 4.0, 0.0, 0.0])
    d = XN.asarray([1.0, 1.0, 1.0, -1.0, 0.0])
    r = XN.asarray([-2.0, 0.5, 1.0, 0.5, 0.7])
    np.testing.assert_array_equal(_np(special.huber(d, r)), sc.huber(_np(d), _np(r)))
    gd, gr = pg.grad(lambda d, r: XN.sum(special.huber(d, r)[:3]), argnums=(0, 1))(d, r)
    np.testing.assert_array_equal(_np(gd), [1.0, 0.0, 0.0, 0.0, 0.0])  # |r| - delta beyond
    np.testing.assert_array_equal(_np(gr), [-1.0, 0.5, 1.0, 0.0, 0.0])  # delta sign(r) beyond
    g = _np(pg.grad(lambda d: XN.sum(special.huber(d, r[3:])))(d[3:]))
    np.testing.assert_array_equal(g, [0.0, 0.7])  # delta < 0: inf, no gradient; 0: |r|


def test_betaln_derivatives_are_digamma_differences():
    a, b = XN.asarray([0.5, 3.0, 40.0]), XN.asarray([2.0, 0.25, 7.5])
    ga, gb = pg.grad(lambda a, b: XN.sum(special.betaln(a, b)), argnums=(0, 1))(a, b)
    an, bn = _np(a), _np(b)
    np.testing.assert_allclose(_np(ga), sc.digamma(an) - sc.digamma(an + bn), rtol=1e-14)
    np.testing.assert_allclose(_np(gb), sc.digamma(bn) - sc.digamma(an + bn), rtol=1e-14)
    # a Python-scalar operand takes no cotangent, and the other gets its partial
    g = _np(pg.grad(lambda b: XN.sum(special.betaln(2.0, b)))(b))
    np.testing.assert_allclose(g, sc.digamma(bn) - sc.digamma(2.0 + bn), rtol=1e-14)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_incomplete_functions_values_are_scipys(dtype):
    x = np.concatenate([np.linspace(-1, 6, 71), [0.0, 1.0, np.inf, np.nan, 1e-300]]).astype(dtype)
    u = np.concatenate([np.linspace(-0.5, 1.5, 41), [0.0, 1.0, np.nan]]).astype(dtype)
    with np.errstate(all="ignore"):
        for name, args in (
            ("gammainc", (2.5, x)),
            ("gammaincc", (0.7, x)),
            ("betainc", (2.5, 0.5, u)),
            ("fdtr", (3.0, 10.0, x)),
            ("fdtrc", (2.0, 7.5, x)),
        ):
            got = _np(getattr(special, name)(*args[:-1], XN.asarray(args[-1])))
            assert got.dtype == dtype, name
            np.testing.assert_array_equal(
                got, getattr(sc, name)(*(dtype(a) for a in args[:-1]), args[-1])
            )
        a, b = XN.asarray(np.array([[0.5], [3.0]], dtype)), XN.asarray(np.array([2.0, 4.0], dtype))
        got = _np(special.betainc(a, b, XN.asarray(u[:5])[:, None, None]))
        np.testing.assert_array_equal(got, sc.betainc(_np(a), _np(b), u[:5][:, None, None]))


def test_incomplete_functions_differentiate_in_x_only():
    """The derivative in x is the integrand (0 outside the support); a gradient with respect
    to a shape parameter, in reverse or forward mode, says it is not implemented."""
    x = XN.asarray([-1.0, 0.0, 0.4, 2.0, 7.0])
    g = _np(pg.grad(lambda x: XN.sum(special.gammainc(2.5, x)))(x))
    xn = np.maximum(_np(x), 0.0)
    want = np.where(xn > 0, xn**1.5 * np.exp(-xn) / sc.gamma(2.5), 0.0)
    np.testing.assert_allclose(g, want, rtol=1e-13, atol=0)
    g = _np(pg.grad(lambda x: XN.sum(special.gammaincc(2.5, x)))(x))
    np.testing.assert_allclose(g, -want, rtol=1e-13, atol=0)
    u = XN.asarray([-0.5, 0.0, 0.3, 0.9, 1.0, 1.2])
    g = _np(pg.grad(lambda u: XN.sum(special.betainc(2.0, 3.0, u)))(u))
    un = _np(u)
    want = np.where((un > 0) & (un < 1), 12 * un * (1 - un) ** 2, 0.0)  # 1 / B(2, 3) = 12
    np.testing.assert_allclose(g, want, rtol=1e-13, atol=0)
    h = _np(
        pg.grad(lambda u: XN.sum(pg.grad(lambda u: XN.sum(special.betainc(2.0, 3.0, u)))(u)))(u)
    )
    np.testing.assert_allclose(h[2:4], 12 * (1 - un[2:4]) * (1 - 3 * un[2:4]), rtol=1e-12)
    g = _np(pg.grad(lambda x: XN.sum(special.betainc(2.0, 3.0, x)))(XN.asarray([np.nan, 0.5])))
    assert np.isnan(g[0]) and g[1] == pytest.approx(12 * 0.5 * 0.25)  # NaN in, NaN out
    a = XN.asarray([1.5, 2.0])
    with pytest.raises(
        NotImplementedError,
        match=r"special\.gammainc\(\): the gradient with "
        r"respect to a is not implemented.*only with respect to x",
    ):
        pg.grad(lambda a: XN.sum(special.gammainc(a, 1.0)))(a)
    with pytest.raises(
        NotImplementedError,
        match=r"betainc\(\): the gradient with respect to "
        r"a and b",
    ):
        pg.jvp(lambda b: special.betainc(2.0, b, 0.5), (a,), (XN.ones(2),))
    xn = np.maximum(_np(x), 0.0)  # fdtr' is the F density: (1 + x / 2)^-3 for dfn 2, dfd 4
    g = _np(pg.grad(lambda x: XN.sum(special.fdtr(2.0, 4.0, x)))(x))
    np.testing.assert_allclose(g, np.where(xn > 0, (1 + xn / 2) ** -3, 0.0), rtol=1e-13, atol=0)
    # a shape parameter that is an array no gradient asks for is a constant: no error
    g = pg.grad(lambda x: XN.sum(special.betainc(a, a, x)))(XN.asarray([0.3, 0.6]))
    assert np.isfinite(_np(g)).all()


def test_per_example_gradients_batch():
    """vmap of grad: the VJP rules (rows of other special functions among them) batched."""
    x = rng.uniform(0.5, 3.0, (4, 3))

    def loss(w, x):
        return XN.sum(special.gammaln(x * w)) + special.logsumexp(x * w)

    w = XN.asarray(np.array([1.0, 0.5, 2.0]))
    got = _np(pg.vmap(pg.grad(loss), in_axes=(None, 0))(w, XN.asarray(x)))
    want = np.stack([_np(pg.grad(loss)(w, XN.asarray(r))) for r in x])
    np.testing.assert_allclose(got, want, rtol=1e-13)


# -- errors and the surface ----------------------------------------------------------------------


def test_errors_name_the_function_and_the_way_out():
    x = XN.asarray([0.5, 1.5])
    with pytest.raises(ValueError, match=r"polygamma\(\): n must be a non-negative int, got -1"):
        special.polygamma(-1, x)
    with pytest.raises(TypeError, match=r"polygamma\(\): n must be a non-negative int, got float"):
        special.polygamma(1.5, x)
    with pytest.raises(TypeError, match=r"an array of orders is not supported"):
        special.polygamma(np.array([1, 2]), x)
    with pytest.raises(TypeError, match=r"special\.erf\(\): got an array of dtype complex128"):
        special.erf(XN.asarray([1j]))
    with pytest.raises(TypeError, match=r"special\.erf\(\): expected an array .*scipy\.special"):
        special.erf(0.5)
    with pytest.raises(pg.AxisError, match=r"_softmax\(\): axis 2 is out of range"):
        special.softmax(x, axis=2)


def test_rows_stay_off_the_standard_surface_and_the_ufunc_table_names_them():
    public = {n for n in dir(XN) if not n.startswith("_")}
    assert not public & {"erf", "expit", "gammaln", "softmax", "logsumexp", "special"}
    assert callable(XN._erf) and callable(XN._logsumexp)
    from scipy._lib._array_api import SCIPY_ARRAY_API

    # With SCIPY_ARRAY_API=1 (the client tests set it before SciPy is first imported, so the
    # whole default run has it) scipy.special wraps its ufuncs in Python functions
    for ufunc, row in rows.UFUNCS.items():
        assert row in REGISTRY
        assert SCIPY_ARRAY_API or isinstance(getattr(sc, ufunc), np.ufunc), ufunc
    assert {getattr(sc, n).__name__ for n in rows.UFUNCS} <= rows.UFUNCS.keys()  # psi, ...
    assert set(special.__all__) >= {n for n in rows.UFUNCS if n != "psi"}


# -- Cubed: scipy per block ----------------------------------------------------------------------


@pytest.mark.parametrize("chunks", [(6, 10), (2, 3), (4, 7)], ids=str)
def test_cubed_values_match_numpy_for_any_chunking(cxp, chunks):
    cubed = pytest.importorskip("cubed")
    a = rng.uniform(0.05, 0.95, (6, 10))
    b = rng.uniform(-3, 3, (6, 10))
    lazy = lambda v, c=chunks: cxp.asarray(cubed.from_array(v, chunks=c))
    x, y = lazy(a), lazy(b)
    with cubed.raise_if_computes():
        got = {
            name: getattr(special, name)(x if name in ("logit", "ndtri") else y) for name in UNARY
        }
        got["polygamma 2"] = special.polygamma(2, x)
        got["xlogy"] = special.xlogy(y, lazy(a, (3, 5)))  # operands chunked differently
        got["xlog1py row"] = special.xlog1py(y, lazy(a[:1], (1, 4)))  # broadcast
        got["xlogy scalar"] = special.xlogy(2.0, x)
        got["softmax 1"] = special.softmax(y, axis=1)
        got["log_softmax 0"] = special.log_softmax(y, axis=0)
        got["logsumexp"] = special.logsumexp(y, axis=(0, 1), keepdims=True)
    want = {name: getattr(sc, name)(a if name in ("logit", "ndtri") else b) for name in UNARY}
    want["polygamma 2"] = sc.polygamma(2, a)
    want["xlogy"] = sc.xlogy(b, a)
    want["xlog1py row"] = sc.xlog1py(b, a[:1])
    want["xlogy scalar"] = sc.xlogy(2.0, a)
    want["softmax 1"] = sc.softmax(b, axis=1)
    want["log_softmax 0"] = sc.log_softmax(b, axis=0)
    want["logsumexp"] = sc.logsumexp(b, axis=(0, 1), keepdims=True)
    with np.errstate(all="ignore"):
        for name, g in got.items():
            g = _np(g)
            assert g.shape == want[name].shape and g.dtype == want[name].dtype, name
            if name.split()[0] in UNARY or name.startswith(("xlog", "polygamma")):
                np.testing.assert_array_equal(g, want[name], err_msg=name)  # the same scipy calls
            else:
                np.testing.assert_allclose(g, want[name], rtol=1e-14, atol=1e-15, err_msg=name)


def test_cubed_float32_and_zero_dimensional(cxp):
    a = np.linspace(-2, 2, 7).astype(np.float32)
    got = _np(special.erf(cxp.asarray(a)))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, sc.erf(a))
    np.testing.assert_array_equal(_np(special.i1e(cxp.asarray(1.5))), sc.i1e(1.5))


CUBED_GRADS = [
    ("erf", lambda x: special.erf(x)),
    ("gammaln", lambda x: special.gammaln(x * x + 0.5)),
    ("polygamma", lambda x: special.polygamma(1, x * x + 0.5)),
    ("xlogy", lambda x: special.xlogy(x, x[:1] * x[:1] + 1.0)),
    ("entr", lambda x: special.entr(x * x + 0.5)),
    ("huber", lambda x: special.huber(1.0, 3 * x)),
    ("gammaincc", lambda x: special.gammaincc(1.5, x * x + 0.1)),
    ("betainc", lambda x: special.betainc(1.5, 2.5, 1.0 / (1.0 + x * x))),
    ("rel_entr", lambda x: special.rel_entr(x * x + 0.5, x[:1] * x[:1] + 1.0)),
    ("betaln", lambda x: special.betaln(x * x + 0.5, x[:1] * x[:1] + 1.0)),
    ("log_ndtr", lambda x: special.log_ndtr(x)),
    ("i1", lambda x: special.i1(x)),
    ("softmax", lambda x: special.softmax(x, axis=0)),
    ("logsumexp", lambda x: special.logsumexp(x, axis=1)),
]


@pytest.mark.parametrize("label, f", CUBED_GRADS, ids=[c[0] for c in CUBED_GRADS])
def test_cubed_gradients_match_finite_differences(cxp, label, f):
    check_vjp(cxp, f, rng.standard_normal((3, 4)))


@pytest.mark.parametrize(
    "kw",
    [
        dict(b="positive"),
        dict(b="positive", axis=1),
        dict(b="signed", axis=0, return_sign=True),
        dict(b="signed", axis=(0, 1), keepdims=True, return_sign=True),
        dict(axis=1, return_sign=True),
        dict(b=2.0, axis=1),
        dict(b="row", axis=1, return_sign=True),
    ],
)
def test_logsumexp_with_weights_and_sign_as_scipys(kw):
    """scipy's signature in full: weights b (differentiable, either sign) and return_sign."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal((3, 4))
    b = {
        "positive": rng.uniform(0.1, 2.0, (3, 4)),
        "signed": rng.uniform(-1.0, 2.0, (3, 4)),
        "row": rng.uniform(-1.0, 2.0, 4),
    }.get(kw.get("b"), kw.get("b"))
    kw = {**kw, "b": b} if "b" in kw else kw
    want = sc.logsumexp(a, **kw)
    ours = {k: (XN.asarray(v) if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
    got = special.logsumexp(XN.asarray(a), **ours)
    for g, w in zip(
        got if isinstance(got, tuple) else (got,),
        want if isinstance(want, tuple) else (want,),
        strict=True,
    ):
        np.testing.assert_allclose(_np(g), w, rtol=1e-14, atol=1e-15)
    if isinstance(b, np.ndarray):  # differentiable in a and b
        check_vjp(
            XN,
            lambda a, b: special.logsumexp(a, **{**ours, "b": b, "return_sign": True})[0],
            a,
            b,
        )
    # a negative sum without return_sign: NaN, as scipy's
    assert np.isnan(_np(special.logsumexp(XN.asarray([0.0, 0.0]), b=XN.asarray([1.0, -2.0]))))
