"""The gradient-conformance suite once more, through ``pycograd_xp.compile``: for every case, a
compiled step (the function's value and its pullback of a fixed cotangent) gives what the same
step gives uncompiled, to the last bit or one ulp, on namespace(numpy) and
namespace(array_api_strict), on its first call (the trace) and on a second call with new values
(the replay). A case whose output shape depends on data must refuse to trace, naming why."""

from __future__ import annotations

import numpy as np
import pytest

import pycograd_xp
from conformance.grad_cases import params
from conformance.gradcheck import to_numpy
from pycograd_xp.tree import tree_flatten, tree_unflatten

PARAMS = params()

# Rows whose outputs' shapes depend on values: compile refuses them with a TracingError.
DATA_DEPENDENT = ("nonzero", "unique", "mask", "bool")


def _step(f):
    def step(primals, cts):
        out, pullback = pycograd_xp.vjp(f, *primals)
        return out, pullback(cts)

    return step


def _close(a, b):
    a, b = to_numpy(a), to_numpy(b)
    assert a.shape == b.shape and a.dtype == b.dtype
    if a.dtype.kind in "fc":
        np.testing.assert_array_max_ulp(np.real(a), np.real(b), maxulp=1)
        np.testing.assert_array_max_ulp(np.imag(a), np.imag(b), maxulp=1)
    else:
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("backend, name, case", PARAMS)
def test_compiled_step_matches_uncompiled(backend, name, case):
    xp = pycograd_xp.namespace(pytest.importorskip(backend))
    f = case.f(xp)
    rng = np.random.default_rng(7)
    step = _step(f)
    compiled = pycograd_xp.compile(step)
    with np.errstate(all="ignore"):
        primals = [xp.asarray(a) for a in case.args]
        out, _ = pycograd_xp.vjp(f, *primals)
        leaves, td = tree_flatten(out)
        cts = tree_unflatten(
            td,
            [
                xp.asarray(rng.standard_normal(tuple(o.shape)).astype(to_numpy(o).dtype))
                for o in leaves
            ],
        )
        try:
            got = compiled(primals, cts)
        except pycograd_xp.TracingError as e:
            assert "depends on array values" in str(e)
            return
        want = step(primals, cts)
        for a, b in zip(tree_flatten(got)[0], tree_flatten(want)[0], strict=True):
            _close(a, b)
        # the replay, on new values of the same shapes
        primals2 = [
            xp.asarray(a + 0.25 * rng.standard_normal(a.shape).astype(a.dtype))
            if a.dtype.kind in "fc"
            else xp.asarray(a)
            for a in case.args
        ]
        got = compiled(primals2, cts)
        want = step(primals2, cts)
        for a, b in zip(tree_flatten(got)[0], tree_flatten(want)[0], strict=True):
            _close(a, b)
    assert len(compiled.traces) == 1
