"""Splittable keys and samplers."""

from __future__ import annotations

import numpy as np
import pytest

import pycograd_xp
from pycograd_xp import random


def val(a):
    return np.asarray(pycograd_xp.unwrap(a))


def test_reproducible_and_independent(xp):
    k = random.key(42)
    a1, a2 = random.normal(k, (1000,), xp=xp), random.normal(k, (1000,), xp=xp)
    np.testing.assert_array_equal(val(a1), val(a2))
    k1, k2 = random.split(k)
    b1, b2 = val(random.normal(k1, (1000,), xp=xp)), val(random.normal(k2, (1000,), xp=xp))
    assert abs(np.corrcoef(b1, b2)[0, 1]) < 0.1
    assert not np.array_equal(b1, val(a1))
    assert random.fold_in(k, 3) == random.fold_in(k, 3) != random.fold_in(k, 4)
    assert random.fold_in(k, 0) not in random.split(k)


def test_samplers(xp):
    k = random.key(0)
    u = val(random.uniform(k, (2000,), xp=xp, minval=-2.0, maxval=3.0))
    assert u.min() >= -2.0 and u.max() < 3.0 and abs(u.mean() - 0.5) < 0.15
    n = random.normal(k, (4000,), xp=xp, dtype=xp.float32, mean=1.0, std=2.0)
    assert n.dtype == xp.float32 and abs(float(xp.mean(n)) - 1.0) < 0.15
    b = val(random.bernoulli(k, 0.25, (4000,), xp=xp))
    assert b.dtype == bool and abs(b.mean() - 0.25) < 0.03
    r = val(random.randint(k, (1000,), 3, 7, xp=xp))
    assert set(np.unique(r)) == {3, 4, 5, 6}
    p = val(random.permutation(k, 50, xp=xp))
    assert sorted(p.tolist()) == list(range(50))


def test_errors():
    with pytest.raises(ValueError, match="non-negative int"):
        random.key(-1)
    with pytest.raises(TypeError, match="expected a pycograd_xp.random.Key"):
        random.normal(0, (2,))
    with pytest.raises(ValueError, match=r"p must be in \[0, 1\]"):
        random.bernoulli(random.key(0), 1.5)
