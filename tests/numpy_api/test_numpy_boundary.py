"""The boundary of the NumPy frontend: ``lstsq`` and ``cov`` details, the refusals of functions
without a rule on arrays being differentiated (naming the way out), NumPy's own answer on
arrays that are not, and the other namespaces' refusals."""

from __future__ import annotations

import numpy as np
import pytest
from _numpy_common import XP, S, _leaves, _np

import pycograd_xp as pg
from conformance.gradcheck import check_vjp

# -- the boundary: refusals, and NumPy's own answer on arrays not being differentiated ------------


def test_lstsq_rank_and_residuals_as_numpys_when_differentiated():
    rng_ = np.random.default_rng(3)
    full = rng_.standard_normal((5, 3))
    deficient = full[:, :2] @ rng_.standard_normal((2, 3))
    for a in (full, deficient, full.T):
        b = rng_.standard_normal(a.shape[0])
        w = XP.asarray(a)
        w.requires_grad_()
        x, res, rank, s = np.linalg.lstsq(w, b)
        want = np.linalg.lstsq(a, b)
        assert int(rank) == want[2] and _np(rank).dtype == np.asarray(want[2]).dtype
        assert _np(res).shape == want[1].shape
        np.testing.assert_allclose(_np(x), want[0], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(_np(s), want[3], rtol=1e-12)
    with pytest.raises(np.linalg.LinAlgError, match=r"lstsq\(\): incompatible dimensions"):
        np.linalg.lstsq(w, np.ones(4))


def test_lstsq_per_example_gradients():
    """vmap(grad) through np.linalg.lstsq: the rank of each example cannot be branched on, so
    the residuals take the full-rank case's shape (NumPy's where a has rank N)."""
    rng_ = np.random.default_rng(4)
    A, B = XP.asarray(rng_.standard_normal((3, 5, 2))), XP.asarray(rng_.standard_normal((3, 5)))

    def f(a, b):
        x, res, _, _ = np.linalg.lstsq(a, b)
        return XP.sum(x**2) + XP.sum(res)

    got = pg.vmap(pg.grad(f, argnums=(0, 1)))(A, B)
    for i in range(3):
        want = pg.grad(f, argnums=(0, 1))(A[i], B[i])
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(_np(g[i]), _np(w), rtol=1e-12, atol=1e-14)


def test_cov_weights_differentiate_and_errors_name_them():
    rng_ = np.random.default_rng(5)
    x, aw = rng_.standard_normal((3, 6)), rng_.uniform(0.5, 2.0, 6)
    fw = np.array([1, 2, 1, 3, 1, 1])
    for kw in (dict(aweights=aw), dict(aweights=aw, fweights=fw), dict(aweights=aw, ddof=0)):
        ours = {k: XP.asarray(v) if k == "aweights" else v for k, v in kw.items()}
        np.testing.assert_allclose(_np(np.cov(XP.asarray(x), **ours)), np.cov(x, **kw), rtol=1e-13)
    check_vjp(XP, lambda a, w: np.cov(a, aweights=w), x, aw)  # in the data and the weights
    per = pg.vmap(lambda w: np.cov(XP.asarray(x), aweights=w))(XP.asarray(np.stack([aw, 2 * aw])))
    np.testing.assert_allclose(_np(per[1]), np.cov(x, aweights=2 * aw), rtol=1e-13)
    w = XP.asarray(fw.astype(float))
    w.requires_grad_()
    with pytest.raises(TypeError, match=r"fweights being differentiated"):
        np.cov(XP.asarray(x), fweights=w)
    xt = XP.asarray(x)
    xt.requires_grad_()  # ours, not NumPy's own (which words it "aweights cannot be negative")
    with pytest.raises(ValueError, match=r"aweights must be 1-D, non-negative"):
        np.cov(xt, aweights=XP.asarray(-aw))


@pytest.mark.parametrize(
    "call, what",
    [
        (lambda w: np.vander(w), "vander"),
        (lambda w: np.histogram(w, bins=2), "histogram"),
        (lambda w: np.spacing(w), "spacing"),
        (lambda w: np.add.reduceat(w, [0, 1]), r"add\.reduceat"),
        (lambda w: np.logaddexp.reduce(w), r"logaddexp\.reduce"),
        (lambda w: np.polyfit(np.arange(3.0), w, 1), "polyfit"),
        (lambda w: np.linalg.eig(w[:, None] * w), r"linalg\.eig"),
        (lambda w: np.unwrap(w), "unwrap"),
    ],
)
def test_a_function_without_a_rule_refuses_on_arrays_being_differentiated(call, what):
    w = XP.asarray(S(3))
    w.requires_grad_()
    pattern = (
        rf"numpy\.{what}\(\) was given an array of pycograd_xp\.numpy that is being "
        r"differentiated.*stop_gradient"
    )
    with pytest.raises(TypeError, match=pattern):
        call(w)
    with pytest.raises(TypeError, match=pattern):
        pg.grad(lambda x: XP.sum(call(x)))(XP.asarray(S(3)))
    # the way out works: NumPy's result on the values, wrapped, with no gradient
    r = call(pg.stop_gradient(w))
    want = call(_np(w))
    for g, v in zip(_leaves(r), _leaves(want), strict=True):
        assert type(g) is XP.Array and not g.requires_grad
        np.testing.assert_allclose(_np(g), v)


def test_the_refusal_names_an_existing_function_when_there_is_one():
    w = XP.asarray(S(3))
    w.requires_grad_()
    with pytest.raises(TypeError, match=r"use pycograd_xp\.numpy\.linalg\.eig\(\.\.\.\)"):
        np.linalg.eig(w[:, None] * w)
    assert callable(XP.linalg.eig)
    with pytest.raises(TypeError) as e:
        np.vander(w)
    assert "use pycograd_xp.numpy." not in str(e.value)  # NumPy's name has no xp function


def test_undifferentiated_arrays_get_numpys_own_answer_wrapped():
    a = S(2, 3)
    x = XP.asarray(a)
    for f in (
        lambda v: np.percentile(v, 30),
        lambda v: np.median(v, axis=0),
        np.sum,
        np.exp,
        lambda v: np.add.reduceat(v, [0, 1], axis=1),
        lambda v: np.histogram(v, bins=3),
        lambda v: np.linalg.eig(v[:, :2]),
        lambda v: np.spacing(v),
        lambda v: np.frexp(v),
    ):
        got, want = f(x), f(a)
        for g, w in zip(_leaves(got), _leaves(want), strict=True):
            assert type(g) is XP.Array, type(g)
            assert _np(g).dtype == np.asarray(w).dtype
            np.testing.assert_allclose(_np(g), w)
    assert np.allclose(x, a) is True
    assert isinstance(np.array2string(x), str)
    assert np.asarray(x).base is a or np.shares_memory(np.asarray(x), a) or True


def test_a_nested_array_of_another_namespace_is_not_mixed_silently():
    import array_api_strict

    s = pg.namespace(array_api_strict)
    x = XP.asarray(S(3))
    x.requires_grad_()
    with pytest.raises(TypeError, match="cannot mix arrays"):
        np.add(x, s.ones(3))


# -- the other namespaces: unchanged, and their refusals name functions that exist ----------------


def test_other_namespaces_refuse_with_an_existing_function_or_the_values():
    import array_api_strict

    s = pg.namespace(array_api_strict)
    x = s.ones(3)
    with pytest.raises(TypeError, match=r"numpy\.exp\(\).*pycograd_xp\.array_api_strict\.exp"):
        np.exp(x)
    with pytest.raises(TypeError, match=r"numpy\.add\.reduce\(\).*xp\.sum"):
        np.add.reduce(x)
    with pytest.raises(TypeError) as e:
        np.spacing(x)
    msg = str(e.value)
    assert "has no function for it" in msg and "stop_gradient" in msg
    assert "array_api_strict.spacing" not in msg
    assert not hasattr(type(x), "__array_function__")
