"""The transforms beyond grad on Cubed, lazily: jvp, linearize, jacrev, jacfwd, hessian, vmap,
vmap(grad) and grad(vmap) build Cubed graphs without computing (``cubed.raise_if_computes``),
run in one ``cubed.compute`` under a small Spec, and equal NumPy's results; what Cubed cannot
do fails with an error naming the function and the way out."""

from __future__ import annotations

import numpy as np
import pytest

import pycograd_xp as pg

cubed = pytest.importorskip("cubed")

nxp = pg.namespace(np)
rng = np.random.default_rng(0)
X0, W0, X1 = rng.standard_normal(5), rng.standard_normal((5, 3)), rng.standard_normal((6, 5))


@pytest.fixture
def spec(tmp_path):
    return cubed.Spec(work_dir=str(tmp_path), allowed_mem="50MB", reserved_mem="0")


def _on(cxp, spec, a, chunks):
    return cxp.asarray(cubed.from_array(a, chunks=chunks, spec=spec))


def _computed(tree):
    """Every leaf of ``tree`` (Cubed arrays of ours) in one ``cubed.compute``, as NumPy."""
    leaves, td = pg.tree_flatten(tree)
    values = cubed.compute(*(pg.unwrap(a) for a in leaves))
    return pg.tree_unflatten(td, [np.asarray(v) for v in values])


def _close(got, want, **kw):
    g, w = pg.tree_leaves(got), pg.tree_leaves(want)
    assert len(g) == len(w)
    for a, b in zip(g, w, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(pg.unwrap(b)), **kw)


def _fns(xp, w):
    def f(x):  # R^5 -> R^3
        return xp.tanh(x @ w) * xp.sum(x**2)

    def loss(x):  # R^5 -> R
        return xp.sum(f(x) ** 2) + xp.max(xp.sin(x))

    return f, loss


def test_forward_mode_jacobians_and_hessian_on_cubed(cxp, spec):
    x, w = _on(cxp, spec, X0, (3,)), _on(cxp, spec, W0, (3, 3))
    f, loss = _fns(cxp, w)
    nf, nloss = _fns(nxp, nxp.asarray(W0))
    xn, t = nxp.asarray(X0), np.linspace(-1.0, 1.0, 5)
    with cubed.raise_if_computes():  # every transform only builds the graph
        tangent = pg.jvp(f, (x,), (_on(cxp, spec, t, (3,)),))[1]
        out, f_jvp = pg.linearize(f, x)
        lin = f_jvp(_on(cxp, spec, t, (3,)))
        jr, jf = pg.jacrev(f)(x), pg.jacfwd(f)(x)
        h = pg.hessian(loss)(x)
    got = _computed({"t": tangent, "out": out, "lin": lin, "jr": jr, "jf": jf, "h": h})
    want_t = pg.jvp(nf, (xn,), (nxp.asarray(t),))[1]
    _close([got["t"], got["lin"], got["out"]], [want_t, want_t, nf(xn)], rtol=1e-12)
    _close([got["jr"], got["jf"]], [pg.jacrev(nf)(xn)] * 2, rtol=1e-12, atol=1e-14)
    _close(got["h"], pg.hessian(nloss)(xn), rtol=1e-10, atol=1e-12)


def test_vmap_and_per_example_gradients_on_cubed(cxp, spec):
    X, w = _on(cxp, spec, X1, (3, 5)), _on(cxp, spec, W0, (5, 3))
    _, loss = _fns(cxp, w)
    _, nloss = _fns(nxp, nxp.asarray(W0))
    idx = _on(cxp, spec, np.array([0, 4, 1, 2, 3, -1]), (3,))

    def write(x, i):  # a key batched per example: one where, no mutation (Cubed is immutable)
        y = x * 1.0
        y[i] = 0.0
        return xp_sum(y)

    xp_sum = cxp.sum
    with cubed.raise_if_computes():
        values = pg.vmap(loss)(X)
        grads = pg.vmap(pg.grad(loss))(X)
        total = pg.grad(lambda X: cxp.sum(pg.vmap(loss)(X)))(X)
        written = pg.vmap(write)(X, idx)
        jac = pg.vmap(pg.jacrev(loss))(X)
    got = _computed([values, grads, total, written, jac])
    per = [pg.grad(nloss)(nxp.asarray(X1[i])) for i in range(6)]
    _close(got[0], np.array([float(pg.unwrap(nloss(nxp.asarray(r)))) for r in X1]), rtol=1e-12)
    _close(got[1], np.stack([pg.unwrap(g) for g in per]), rtol=1e-12)
    _close(got[2], np.stack([pg.unwrap(g) for g in per]), rtol=1e-12)
    _close(got[4], np.stack([pg.unwrap(g) for g in per]), rtol=1e-12)
    want = X1.copy()
    want[np.arange(6), [0, 4, 1, 2, 3, -1]] = 0.0
    _close(got[3], want.sum(axis=1), rtol=1e-12)


def test_what_cubed_cannot_do_fails_clearly_and_writes_are_functional(cxp, spec):
    X = _on(cxp, spec, X1, (3, 5))

    def write(x):
        y = x * 1.0
        y[0] = 1.0  # Cubed's arrays are immutable: a new array, y rebound to it
        return y

    want = X1 * 1.0
    want[:, 0] = 1.0
    np.testing.assert_array_equal(np.asarray(pg.vmap(write)(X)), want)
    with pytest.raises(
        NotImplementedError,
        match=r"nonzero\(\): the cubed backend does not "
        r"implement nonzero",
    ):
        pg.vmap(lambda x: cxp.nonzero(x > 0)[0])(X)
    with pytest.raises(NotImplementedError, match=r"__getitem__ with a batched boolean mask"):
        pg.vmap(lambda x: x[x > 0])(X)


# Keys Cubed's own indexing gets wrong or refuses (an index array as long as its axis taken for
# no index at all, negative steps, two index arrays): forward mode must go through the plugin's
# indexing as the value does, over chunkings that split the indexed axis and that do not.
_X34, _T34 = np.arange(12.0).reshape(3, 4) ** 2, np.arange(12.0).reshape(3, 4) + 10
_KEYS = {
    "array as long as its axis": lambda xp: (xp.asarray(np.array([2, 0, 0])),),
    "array as long as the last axis": lambda xp: (slice(None), xp.asarray(np.array([3, 3, 0, 1]))),
    "shorter array": lambda xp: (xp.asarray(np.array([1, 1])),),
    "negative steps": lambda xp: (slice(None, None, -1), slice(3, 0, -2)),
    "two arrays": lambda xp: (xp.asarray(np.array([2, 0, 1])), xp.asarray(np.array([3, 3, 0]))),
    "int beside an array": lambda xp: (1, xp.asarray(np.array([3, 0, 1, 2]))),
}


@pytest.mark.parametrize("chunks", [(1, 1), (2, 3), (3, 4)])
@pytest.mark.parametrize("name", list(_KEYS))
def test_forward_mode_through_every_kind_of_index(cxp, spec, name, chunks):
    def f(xp):
        def g(x):
            y = x[_KEYS[name](xp)] * 2.0
            z = x * 1.0
            z[0, 1:3] = x[1, :2] ** 2  # a write too: its tangent is indexed the same way
            return y, z

        return g

    xn, tn = nxp.asarray(_X34), nxp.asarray(_T34)
    want_out, want_t = pg.jvp(f(nxp), (xn,), (tn,))
    # no raise_if_computes: Cubed computes an index array to plan the gather it makes
    x, t = _on(cxp, spec, _X34, chunks), _on(cxp, spec, _T34, chunks)
    out, tangent = pg.jvp(f(cxp), (x,), (t,))
    lin = pg.linearize(f(cxp), x)[1](t)
    got = _computed({"out": out, "t": tangent, "lin": lin})
    _close([got["out"], got["t"], got["lin"]], [want_out, want_t, want_t], rtol=1e-12)


def test_per_example_gradients_through_gathers_on_a_users_spec(cxp, spec):
    """vmap(grad) through take and take_along_axis scatter with searchsorted, whose Cubed 0.27
    version adds block offsets made on Cubed's default Spec ("Arrays must have same spec" on a
    user's); searchsorted itself on that Spec too."""
    a = np.arange(12.0).reshape(3, 4) - 5.0
    x = _on(cxp, spec, a, (1, 3))

    def f(xp):
        def loss(v):
            picked = xp.take(v, xp.asarray(np.array([2, 0, 2])), axis=0)
            ranked = xp.take_along_axis(v, xp.argsort(v), axis=0)
            return xp.sum(picked**2) + xp.sum(ranked * xp.arange(4.0))

        return loss

    got = pg.vmap(pg.grad(f(cxp)))(x)
    _close(got, pg.vmap(pg.grad(f(nxp)))(nxp.asarray(a)), rtol=1e-12)
    s1, s2 = np.array([1.0, 2, 2, 5, 7, 9, 11]), np.array([[0.0, 2, 3], [7, 12, 9]])
    for side in ("left", "right"):
        got = cxp.searchsorted(_on(cxp, spec, s1, 3), _on(cxp, spec, s2, 2), side=side)
        np.testing.assert_array_equal(np.asarray(got), np.searchsorted(s1, s2, side=side))
