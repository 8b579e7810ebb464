"""What CuPy does differently from NumPy (found by the first GPU run, tools/gpu_check.py), each
imitated on NumPy so that CI, which has no GPU, checks the namespace's answer to it."""

from __future__ import annotations

import math

import array_api_compat.numpy as npx
import numpy as np
import pytest

import pycograd_xp as pg


class _NoIndex:
    """A 0-d backend array without ``__index__`` (CuPy's ndarray has none)."""

    shape = ()

    def __init__(self, value):
        self.value = value

    def item(self):
        return self.value


def test_an_integer_0d_array_without_index_gives_its_value():
    xp = pg.namespace(np)
    x = xp.asarray(3)
    x._data = _NoIndex(3)
    assert x.__index__() == 3 and [10, 11, 12, 13][x] == 13
    x._data = _NoIndex(2.5)  # a float array is no index, as NumPy's
    with pytest.raises(TypeError):
        x.__index__()


@pytest.mark.parametrize(
    "name, call",
    [
        ("eig", lambda xp, a: xp.linalg.eig(a)),
        ("eigh", lambda xp, a: xp.linalg.eigh(a + a.mT)),
        ("svd", lambda xp, a: xp.linalg.svd(a)),
        ("qr", lambda xp, a: xp.linalg.qr(a)),
        ("slogdet", lambda xp, a: xp.linalg.slogdet(a)),
    ],
)
def test_decompositions_are_named_tuples_whatever_the_backend_returns(monkeypatch, name, call):
    """CuPy's linalg.eig returns a plain tuple; the standard wants a named tuple."""
    plain = getattr(npx.linalg, name)
    monkeypatch.setattr(npx.linalg, name, lambda *a, **k: tuple(plain(*a, **k)))
    xp = pg.namespace(np)
    out = call(xp, xp.asarray([[2.0, 1.0], [0.5, 3.0]]))
    assert type(out).__name__.endswith("Result") and out._fields


def test_qr_refuses_a_mode_outside_the_standard():
    xp = pg.namespace(np)
    with pytest.raises(ValueError, match="mode must be 'reduced' or 'complete'.*got 'r'"):
        xp.linalg.qr(xp.eye(3), mode="r")


@pytest.mark.parametrize("value", [-0.0, complex(-0.0, 1.0), complex(1.0, -0.0)])
def test_a_python_negative_zero_keeps_its_sign(monkeypatch, value):
    """CuPy's asarray of a Python -0.0 gives +0.0 (of a list, -0.0): imitated on NumPy."""
    real = npx.asarray

    def drops_the_sign(obj, /, **kw):
        if isinstance(obj, (float, complex)):
            obj = complex(obj.real + 0.0, obj.imag + 0.0) if isinstance(obj, complex) else obj + 0.0
        return real(obj, **kw)

    monkeypatch.setattr(npx, "asarray", drops_the_sign)
    xp = pg.namespace(np)
    got = complex(pg.unwrap(xp.asarray(value)))
    assert math.copysign(1, got.real) == math.copysign(1, value.real)
    assert math.copysign(1, got.imag) == math.copysign(1, complex(value).imag)
    assert xp.asarray(value).shape == ()
