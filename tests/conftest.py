"""Shared fixtures: the namespaces under test, one per installed backend."""

from __future__ import annotations

import pytest

import pycograd_xp

EAGER_BACKENDS = ["numpy", "array_api_strict"]


def backend_module(name: str):
    return pytest.importorskip(name)


@pytest.fixture(params=EAGER_BACKENDS)
def xp(request):
    """A pycograd_xp namespace over each eager backend."""
    return pycograd_xp.namespace(backend_module(request.param))


@pytest.fixture
def cxp():
    """The namespace over Cubed (skips without the cubed extra)."""
    cubed = backend_module("cubed")
    return pycograd_xp.namespace(cubed)
