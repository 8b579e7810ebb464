"""Over Cubed the namespace stays lazy: building expressions never computes."""

from __future__ import annotations

import numpy as np
import pytest

import pycograd_xp

cubed = pytest.importorskip("cubed")


def test_building_expressions_computes_nothing(cxp):
    data = np.arange(12.0).reshape(3, 4)
    with cubed.raise_if_computes():
        x = cxp.asarray(data)
        y = cxp.sin(x) * 2.0 + x[:, 1:3] @ cxp.ones((2, 4))
        z = cxp.sum(cxp.exp(-y), axis=0, keepdims=True) / cxp.max(x)
        w = cxp.where(x > 3.0, x, 0.0)
        s = cxp.mean(cxp.concat([w, x], axis=0)) + cxp.std(x, correction=1)
        x2 = x
        x2 += 1.0
        assert "<lazy>" in repr(z) + repr(s)
    assert type(pycograd_xp.unwrap(z)).__module__.startswith("cubed")


def test_explicit_conversions_compute_and_match_numpy(cxp):
    import pycograd_xp

    nxp = pycograd_xp.namespace(np)
    for xp_ in (cxp, nxp):
        x = xp_.asarray(np.arange(12.0).reshape(3, 4))
        out = xp_.sum(xp_.sin(x) * x, axis=1)
        vals = [float(v) for v in xp_.unstack(out)]
        if xp_ is cxp:
            got = vals
        else:
            want = vals
    np.testing.assert_allclose(got, want)
    assert float(cxp.sum(cxp.ones((5,)))) == 5.0
    np.testing.assert_array_equal(np.asarray(cxp.ones((2,))), [1.0, 1.0])
