"""The namespace factory: identity, names, inspection, extensions."""

from __future__ import annotations

import inspect
import sys

import array_api_compat
import array_api_strict
import numpy as np
import pytest

import pycograd_xp
from pycograd_xp.namespace import REGISTRY


def test_same_object_for_same_backend():
    import array_api_compat.numpy as cnp

    xp = pycograd_xp.namespace(np)
    assert pycograd_xp.namespace() is xp
    assert pycograd_xp.namespace(None) is xp
    assert pycograd_xp.namespace(cnp) is xp
    assert pycograd_xp.namespace("numpy") is xp
    from pycograd_xp import numpy as xp2

    assert xp2 is xp


def test_names_are_unique_and_safe():
    import cubed

    names = {pycograd_xp.namespace(b).__name__ for b in (np, array_api_strict, cubed)}
    assert names == {"pycograd_xp.numpy", "pycograd_xp.array_api_strict", "pycograd_xp.cubed"}
    for name in names:
        assert "marray" not in name
        assert sys.modules[name] is pycograd_xp.namespace(name.split(".", 1)[1])


def test_cubed_array_api_alias():
    import cubed
    import cubed.array_api

    assert pycograd_xp.namespace(cubed.array_api) is pycograd_xp.namespace(cubed)


def test_version_and_info(xp):
    assert xp.__array_api_version__ == "2025.12"
    info = xp.__array_namespace_info__()
    backend = xp._backend.xp.__array_namespace_info__()
    assert info.capabilities() == backend.capabilities()
    assert info.default_dtypes() == backend.default_dtypes()
    assert info.dtypes() == backend.dtypes()
    assert isinstance(info.devices(), tuple)
    assert info.default_device() == backend.default_device()


def test_cubed_info_claims_no_more_than_cubed(cxp):
    caps = cxp.__array_namespace_info__().capabilities()
    assert caps["boolean indexing"] is False
    assert caps["data-dependent shapes"] is False


def test_every_registered_row_is_public(xp):
    for name, prim in REGISTRY.items():
        if prim.kind == "method":  # __getitem__/__setitem__ live on the Array class
            assert hasattr(xp.Array, name)
            continue
        scope, _, short = name.rpartition(".")
        owner = getattr(xp, scope) if scope else xp
        assert callable(getattr(owner, short)), name
    for alias in ("matmul", "matrix_transpose", "tensordot", "vecdot"):
        assert getattr(xp.linalg, alias) is getattr(xp, alias)


def test_signatures_follow_the_standard(xp):
    sig = inspect.signature(xp.sum)
    kinds = {p.name: p.kind for p in sig.parameters.values()}
    assert kinds == {
        "x": inspect.Parameter.POSITIONAL_ONLY,
        "axis": inspect.Parameter.KEYWORD_ONLY,
        "dtype": inspect.Parameter.KEYWORD_ONLY,
        "keepdims": inspect.Parameter.KEYWORD_ONLY,
    }
    assert list(inspect.signature(xp.add).parameters) == ["x1", "x2"]
    x = xp.asarray([1.0, 2.0])
    with pytest.raises(TypeError):
        xp.sum(x=x)  # positional-only
    with pytest.raises(TypeError):
        xp.sum(x, 0)  # keyword-only axis


def test_extensions_of_strict_are_kept():
    # array_api_strict serves linalg/fft through module __getattr__ (not in dir()).
    assert "linalg" not in dir(array_api_strict)
    xs = pycograd_xp.namespace(array_api_strict)
    a = xs.asarray([[2.0, 0.0], [0.0, 4.0]])
    assert float(xs.linalg.det(a)) == pytest.approx(8.0)
    assert xs.fft.rfft(xs.asarray([1.0, 1.0])).shape == (2,)


def test_array_api_compat_sees_our_namespace(xp):
    x = xp.asarray([1.0])
    assert array_api_compat.array_namespace(x) is xp
    assert array_api_compat.array_namespace(x, xp.asarray([2.0])) is xp
    assert x.__array_namespace__() is xp
    assert x.__array_namespace__(api_version="2024.12") is xp


def test_missing_backend_function_raises_not_implemented(cxp):
    # cubed_plugin completes sort, fft and most of linalg; data-dependent shapes stay missing
    x = cxp.asarray([3.0, 1.0])
    with pytest.raises(NotImplementedError, match=r"unique_values\(\).*cubed backend.*unique"):
        cxp.unique_values(x)
    with pytest.raises(NotImplementedError, match=r"unique_counts.*cubed"):
        cxp.unique_counts(x)
    with pytest.raises(NotImplementedError, match=r"nonzero.*cubed"):
        cxp.nonzero(x)


def test_unsupported_backend_object():
    with pytest.raises(TypeError, match="not an array namespace"):
        pycograd_xp.namespace(42)
    import json

    with pytest.raises(TypeError, match="'json' does not implement the Python Array API"):
        pycograd_xp.namespace(json)
    with pytest.raises(TypeError, match="already a pycograd_xp namespace"):
        pycograd_xp.namespace(pycograd_xp.namespace(np))
    with pytest.raises(AttributeError, match="has no attribute 'nonexistent_backend_xyz'"):
        pycograd_xp.nonexistent_backend_xyz  # noqa: B018
