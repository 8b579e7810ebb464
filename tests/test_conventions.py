"""Derivatives at the points where a function is not differentiable: each convention pinned
(the values ``docs/guides/conventions.md`` lists beside JAX's and PyTorch's). Where a function
is differentiable, there is no convention to choose: those points are the gradient suites'."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import pycograd_xp as pg
from pycograd_xp import nn, special

xp = pg.namespace(np)
PAGE = Path(__file__).parent.parent / "docs" / "guides" / "conventions.md"


def _grads(f, *args):
    arrays = [xp.asarray(np.asarray(a, dtype=float)) for a in args]
    gs = pg.grad(f, argnums=tuple(range(len(arrays))))(*arrays)
    return [np.asarray(pg.unwrap(g)).tolist() for g in gs]


def _sum(f):
    return lambda *a: xp.sum(f(*a))


KNOTS, VALUES = np.array([0.0, 1.0, 3.0, 4.0]), np.array([0.0, 2.0, 3.0, 7.0])

# (the function's name as the page's table gives it, the call, its arguments, the gradients)
CONVENTIONS = [
    ("abs", _sum(xp.abs), ([0.0],), [[0.0]]),
    ("sign", _sum(xp.sign), ([0.0],), [[0.0]]),
    ("relu", _sum(nn.relu), ([0.0],), [[0.0]]),
    ("leaky_relu", _sum(lambda x: nn.leaky_relu(x, 0.1)), ([0.0],), [[0.1]]),
    ("elu", _sum(lambda x: nn.elu(x, 0.3)), ([0.0],), [[0.3]]),
    ("maximum", _sum(xp.maximum), ([1.0], [1.0]), [[0.5], [0.5]]),
    ("minimum", _sum(xp.minimum), ([1.0], [1.0]), [[0.5], [0.5]]),
    ("max", lambda x: xp.max(x), ([1.0, 3.0, 3.0],), [[0.0, 0.5, 0.5]]),
    ("min", lambda x: xp.min(x), ([1.0, 1.0, 3.0],), [[0.5, 0.5, 0.0]]),
    ("clip", lambda x: xp.sum(xp.clip(x, 0.0, 1.0)), ([0.0, 1.0],), [[1.0, 1.0]]),
    ("std", lambda x: xp.std(x), ([2.0, 2.0, 2.0],), [[0.0, 0.0, 0.0]]),
    ("vector_norm", lambda x: xp.linalg.vector_norm(x), ([0.0, 0.0],), [[0.0, 0.0]]),
    ("hypot", _sum(xp.hypot), ([0.0], [0.0]), [[0.0], [0.0]]),
    ("pow", _sum(xp.pow), ([0.0], [0.0]), [[0.0], [0.0]]),
    ("xlogy", _sum(special.xlogy), ([0.0], [0.0]), [[0.0], [0.0]]),
    ("rel_entr", _sum(special.rel_entr), ([0.0], [1.0]), [[0.0], [0.0]]),
    ("interp", lambda x: xp.sum(np.interp(x, KNOTS, VALUES)), ([1.0, 4.0],), [[0.5, 4.0]]),
]


@pytest.mark.parametrize("name, f, args, want", CONVENTIONS, ids=[c[0] for c in CONVENTIONS])
def test_convention(name, f, args, want):
    with np.errstate(all="ignore"):
        assert _grads(f, *args) == want


def test_atan2_at_the_origin_is_nan():
    """atan2 is not continuous at (0, 0): no value is a derivative there (JAX's and PyTorch's
    NaN)."""
    with np.errstate(all="ignore"):
        assert np.isnan(_grads(_sum(xp.atan2), [0.0], [0.0])).all()


def test_eigh_and_cholesky_gradients_are_symmetric():
    """Both are functions of symmetric matrices: their gradients are the symmetric ones (JAX's,
    whose eigh symmetrizes its input); NumPy's forward reads one triangle."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 3))
    spd = a @ a.T + 3 * np.eye(3)
    w = xp.asarray(rng.standard_normal(3))
    for f, x in (
        (lambda x: xp.sum(xp.linalg.eigh(x).eigenvalues * w), a + a.T),
        (lambda x: xp.sum(xp.linalg.cholesky(x)), spd),
    ):
        g = np.asarray(pg.unwrap(pg.grad(f)(xp.asarray(x))))
        np.testing.assert_allclose(g, g.T, rtol=1e-12, atol=1e-14)


def test_the_page_lists_every_convention():
    page = PAGE.read_text()
    rows = set(re.findall(r"^\| `([\w.]+)", page, flags=re.M))
    missing = [c[0] for c in CONVENTIONS if c[0] not in rows] + [
        n for n in ("atan2", "eigh", "cholesky") if n not in rows
    ]
    assert not missing, f"conventions the page does not list: {missing}"
