"""What the tests of NumPy's own functions on arrays of ``namespace(numpy)`` share (issue 19;
the package ``pycograd_xp/numpy_api/``): the namespace, the seeded generator and its draws, and
the checks. ``check_forward``: on arrays being differentiated a call equals NumPy's own on the
raw arrays (values and dtypes) and carries a gradient; ``check_grad``: its VJP passes the
dot-product test against central differences of NumPy's own function."""

from __future__ import annotations

import warnings

import numpy as np

import pycograd_xp as pg
from conformance.gradcheck import check_vjp

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
