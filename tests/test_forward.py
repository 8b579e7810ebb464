"""jvp, jacfwd, jacrev, hessian: values against finite differences and against each other,
pytrees, nesting with grad in both orders, and errors (the per-row rules are swept in
conformance/test_jvp.py)."""

from __future__ import annotations

import numpy as np
import pytest

import pycograd_xp as pg


def _np(a):
    return np.asarray(pg.unwrap(a))


def _fd_jacobian(f, x, eps=1e-6):
    """Central-difference Jacobian of ``f`` (NumPy in, NumPy out): shape out + in."""
    cols = []
    for k in range(x.size):
        e = np.zeros(x.size)
        e[k] = eps
        e = e.reshape(x.shape)
        cols.append(((f(x + e) - f(x - e)) / (2 * eps)).reshape(-1))
    out = f(x)
    return np.stack(cols, axis=-1).reshape(out.shape + x.shape)


def _f(xp):
    return lambda x: xp.sin(x) * xp.sum(x**2) + xp.linalg.matrix_transpose(x) @ x[:, :1]


def test_jacobians_match_finite_differences_and_each_other(xp):
    f = _f(xp)
    x0 = np.random.default_rng(0).standard_normal((3, 3))
    x = xp.asarray(x0)
    fd = _fd_jacobian(lambda a: _np(f(xp.asarray(a))), x0)
    jf, jr = _np(pg.jacfwd(f)(x)), _np(pg.jacrev(f)(x))
    assert jf.shape == jr.shape == (3, 3, 3, 3)
    np.testing.assert_allclose(jf, fd, atol=1e-7)
    np.testing.assert_allclose(jr, jf, atol=1e-12)


def test_hessian_forward_over_reverse_matches_reverse_over_reverse(xp):
    def f(x):
        return xp.sum(xp.tanh(x) ** 3) + xp.prod(x)

    x0 = np.array([0.3, -0.7, 1.1])
    x = xp.asarray(x0)
    h = _np(pg.hessian(f)(x))
    fd = _fd_jacobian(lambda a: _np(pg.grad(f)(xp.asarray(a))), x0)
    np.testing.assert_allclose(h, fd, atol=1e-7)
    np.testing.assert_allclose(h, _np(pg.jacrev(pg.jacrev(f))(x)), atol=1e-12)
    np.testing.assert_allclose(h, h.T, atol=1e-12)


def test_jvp_pytrees_and_argnums(xp):
    def f(p, x):
        return {"y": xp.tanh(x @ p["w"] + p["b"]), "n": xp.sum(p["w"] ** 2)}

    rng = np.random.default_rng(1)
    p = {"w": xp.asarray(rng.standard_normal((3, 2))), "b": xp.asarray(rng.standard_normal(2))}
    x = xp.asarray(rng.standard_normal((4, 3)))
    tp = {"w": xp.ones_like(p["w"]), "b": xp.zeros_like(p["b"])}
    out, t = pg.jvp(f, (p, x), (tp, xp.zeros_like(x)))
    assert set(t) == {"y", "n"} and t["y"].shape == (4, 2)
    np.testing.assert_allclose(_np(t["n"]), 2 * np.sum(_np(p["w"])))
    eps = 1e-6
    up = f({"w": p["w"] + eps * tp["w"], "b": p["b"]}, x)["y"]
    dn = f({"w": p["w"] - eps * tp["w"], "b": p["b"]}, x)["y"]
    np.testing.assert_allclose(_np(t["y"]), (_np(up) - _np(dn)) / (2 * eps), atol=1e-7)
    # Jacobians of pytrees: output structure outside, the argnums structure inside
    jac = pg.jacrev(f, argnums=(0, 1))(p, x)
    assert jac["y"][0]["w"].shape == (4, 2, 3, 2) and jac["y"][1].shape == (4, 2, 4, 3)
    jf = pg.jacfwd(f, argnums=(0, 1))(p, x)
    for a, b in (
        (jac["y"][0]["w"], jf["y"][0]["w"]),
        (jac["n"][0]["b"], jf["n"][0]["b"]),
        (jac["y"][1], jf["y"][1]),
    ):
        np.testing.assert_allclose(_np(a), _np(b), atol=1e-12)


def test_grad_of_jvp_and_jvp_of_jvp(xp):
    def f(x):
        return xp.sum(xp.exp(x) * x)

    x0 = np.array([0.2, -0.4])
    x, v = xp.asarray(x0), xp.asarray([1.0, 2.0])
    # d/dx <grad f(x), v> = H v, with H = diag((x + 2) e^x)
    hv = pg.grad(lambda x: pg.jvp(f, (x,), (v,))[1])(x)
    np.testing.assert_allclose(_np(hv), (x0 + 2) * np.exp(x0) * _np(v), rtol=1e-12)
    # jvp of jvp: the second directional derivative v^T H v
    d2 = pg.jvp(lambda x: pg.jvp(f, (x,), (v,))[1], (x,), (v,))[1]
    np.testing.assert_allclose(float(_np(d2)), np.sum((x0 + 2) * np.exp(x0) * _np(v) ** 2))


def test_jvp_output_independent_of_input_and_has_aux(xp):
    x = xp.asarray([1.0, 2.0])
    out, t, aux = pg.jvp(lambda x: (xp.ones(3), xp.sum(x)), (x,), (x,), has_aux=True)
    np.testing.assert_allclose(_np(t), np.zeros(3))
    np.testing.assert_allclose(_np(aux), 3.0)
    assert out._node is None and t._node is None


def test_jvp_errors(xp):
    x = xp.asarray([1.0, 2.0])
    with pytest.raises(TypeError, match="tuples"):
        pg.jvp(xp.sin, x, x)
    with pytest.raises(ValueError, match="shape"):
        pg.jvp(xp.sin, (x,), (xp.ones(3),))
    with pytest.raises(ValueError, match="structure"):
        pg.jvp(xp.sin, (x,), (x, x))


def test_remat_under_jvp_and_hessian(xp):
    def f(x):
        return xp.sum(xp.sin(x) * x, axis=0)

    x = xp.asarray(np.random.default_rng(2).standard_normal((3, 2)))
    t = xp.ones_like(x)
    np.testing.assert_allclose(
        _np(pg.jvp(pg.remat(f), (x,), (t,))[1]), _np(pg.jvp(f, (x,), (t,))[1]), atol=1e-12
    )
    h1 = pg.hessian(lambda x: xp.sum(pg.remat(f)(x) ** 2))(x)
    np.testing.assert_allclose(_np(h1), _np(pg.hessian(lambda x: xp.sum(f(x) ** 2))(x)), atol=1e-12)


# -- Jacobians as one batched pass (vmap of the pullback / of jvp) --------------------------------


def _no_loops(monkeypatch):
    """Make the per-basis-vector fallbacks fail: the Jacobians must come from one vmap."""
    from pycograd_xp import _forward

    def refuse(*a, **k):
        raise AssertionError("a Jacobian fell back to a Python loop over basis vectors")

    monkeypatch.setattr(_forward, "_rev_loop", refuse)
    monkeypatch.setattr(_forward, "_fwd_loop", refuse)


def _fd_tree(f, args, argnum, leaf, eps=1e-6):
    """Central differences of every output leaf of ``f`` (NumPy arrays in and out) with respect
    to one leaf of one argument: a list of out + in shaped blocks."""
    x0 = pg.tree_leaves(args[argnum])[leaf]

    def at(v):
        leaves, td = pg.tree_flatten(args[argnum])
        leaves = list(leaves)
        leaves[leaf] = v
        call = list(args)
        call[argnum] = pg.tree_unflatten(td, leaves)
        return [np.asarray(o) for o in pg.tree_leaves(f(*call))]

    base = at(x0)
    cols = []
    for k in range(x0.size):
        e = np.zeros(x0.size)
        e[k] = eps
        up, dn = at(x0 + e.reshape(x0.shape)), at(x0 - e.reshape(x0.shape))
        cols.append([((u - d) / (2 * eps)).reshape(-1) for u, d in zip(up, dn, strict=True)])
    return [
        np.stack([c[i] for c in cols], -1).reshape(b.shape + x0.shape) for i, b in enumerate(base)
    ]


def test_batched_jacobians_of_pytrees_and_argnums_match_finite_differences(xp, monkeypatch):
    _no_loops(monkeypatch)
    rng = np.random.default_rng(3)
    p0 = {"w": rng.standard_normal((3, 2)), "b": rng.standard_normal(2)}
    x0 = rng.standard_normal((4, 3))

    def f(p, x):
        h = xp.tanh(x @ p["w"] + p["b"])
        return {"h": h, "s": (xp.sum(h**2), xp.max(x, axis=0))}

    def f_np(p, x):
        out = f(pg.tree_map(xp.asarray, p), xp.asarray(x))
        return pg.tree_map(_np, out)

    p, x = pg.tree_map(xp.asarray, p0), xp.asarray(x0)
    for jac in (pg.jacrev, pg.jacfwd):
        j = jac(f, argnums=(0, 1))(p, x)
        got = [_np(a) for a in pg.tree_leaves(j)]  # output leaves outside, argnums inside
        want_by_in = [_fd_tree(f_np, (p0, x0), 0, i) for i in range(2)] + [
            _fd_tree(f_np, (p0, x0), 1, 0)
        ]
        # per output leaf: (b, w) of argument 0 (dict keys sorted), then x
        want = [w for o in range(3) for w in (want_by_in[0][o], want_by_in[1][o], want_by_in[2][o])]
        assert [g.shape for g in got] == [w.shape for w in want]
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, atol=1e-6)
    jr, jf = pg.jacrev(f, argnums=1)(p, x), pg.jacfwd(f, argnums=1)(p, x)
    for a, b in zip(pg.tree_leaves(jr), pg.tree_leaves(jf), strict=True):
        np.testing.assert_allclose(_np(a), _np(b), atol=1e-12)


def test_batched_hessian_of_pytrees_and_has_aux(xp, monkeypatch):
    _no_loops(monkeypatch)
    rng = np.random.default_rng(4)
    a0, b0 = rng.standard_normal((2, 3)), rng.standard_normal(3)

    def f(p):
        z = p["a"] @ p["b"]
        return xp.log(xp.sum(xp.exp(z))) + xp.sum(p["b"] ** 3) / 3, z

    p = {"a": xp.asarray(a0), "b": xp.asarray(b0)}
    h, aux = pg.hessian(f, has_aux=True)(p)
    np.testing.assert_allclose(_np(aux), a0 @ b0)

    def grad_at(k_in, k_out):  # NumPy in and out: one block of the gradient, one input moved
        def g(v):
            q = {**p, k_in: xp.asarray(v)}
            return _np(pg.grad(lambda q: f(q)[0])(q)[k_out])

        return g

    for k_in, v0 in (("a", a0), ("b", b0)):
        for k_out in ("a", "b"):
            np.testing.assert_allclose(
                _np(h[k_out][k_in]), _fd_jacobian(grad_at(k_in, k_out), v0), atol=1e-7
            )
    rr = pg.jacrev(pg.jacrev(lambda q: f(q)[0]))(p)  # reverse over reverse, also batched
    for a, b in zip(pg.tree_leaves(h), pg.tree_leaves(rr), strict=True):
        np.testing.assert_allclose(_np(a), _np(b), atol=1e-12)
    ff = pg.jacfwd(pg.jacfwd(lambda q: f(q)[0]))(p)  # forward over forward
    for a, b in zip(pg.tree_leaves(h), pg.tree_leaves(ff), strict=True):
        np.testing.assert_allclose(_np(a), _np(b), atol=1e-12)


def test_jacobians_compose_with_vmap_and_jvp(xp, monkeypatch):
    _no_loops(monkeypatch)
    rng = np.random.default_rng(5)
    X = xp.asarray(rng.standard_normal((4, 3)))
    w = xp.asarray(rng.standard_normal((3, 3)))

    def f(x):
        return xp.sin(x @ w) * xp.sum(x**2)

    for jac in (pg.jacrev, pg.jacfwd, pg.hessian):
        g = (lambda x, jac=jac: jac(lambda v: xp.sum(f(v)))(x)) if jac is pg.hessian else jac(f)
        per = pg.vmap(g)(X)  # per-example Jacobians / Hessians
        loop = np.stack([_np(g(X[i, ...])) for i in range(4)])
        np.testing.assert_allclose(_np(per), loop, atol=1e-12)
    # jvp of vmap and vmap of jvp agree with the batched Jacobian
    T = xp.asarray(rng.standard_normal((4, 3)))
    j = _np(pg.vmap(pg.jacfwd(f))(X))
    t1 = _np(pg.jvp(pg.vmap(f), (X,), (T,))[1])
    t2 = _np(pg.vmap(lambda x, t: pg.jvp(f, (x,), (t,))[1])(X, T))
    np.testing.assert_allclose(t1, np.einsum("bij,bj->bi", j, _np(T)), atol=1e-12)
    np.testing.assert_allclose(t2, t1, atol=1e-12)


def test_empty_inputs_and_outputs(xp):
    x = xp.asarray(np.zeros((0, 2)))
    for jac in (pg.jacrev, pg.jacfwd):
        assert jac(lambda v: xp.sum(v) * xp.ones(3))(x).shape == (3, 0, 2)
        assert jac(lambda v: v * 2.0)(x).shape == (0, 2, 0, 2)


def test_unbatchable_derivative_falls_back_to_a_loop(xp, monkeypatch):
    """A custom rule calling nonzero (a data-dependent shape) cannot run on a batch of basis
    vectors: jacrev/jacfwd fall back to one pass per basis vector, with the same values."""
    from pycograd_xp import _forward

    @pg.custom_vjp
    def keep_large(x):
        return x * 1.0

    def large(v):  # entries of magnitude >= 0.5, found by their indices (nonzero)
        idx = xp.nonzero(xp.abs(v) >= 0.5)[0]
        return xp.where(xp.isin(xp.arange(v.shape[0]), idx), v, 0.0)

    def bwd(res, g):  # only cotangent entries of magnitude >= 0.5 pass
        return (large(g),)

    keep_large.defvjp(lambda x: (keep_large(x), None), bwd)

    @pg.custom_jvp
    def keep_jvp(x):
        return x * 1.0

    @keep_jvp.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        return keep_jvp(x), large(t)

    w = xp.asarray([0.25, 2.0, -0.75])
    x = xp.asarray([1.0, 2.0, 3.0])
    calls = []
    for name in ("_rev_loop", "_fwd_loop"):
        real = getattr(_forward, name)
        monkeypatch.setattr(_forward, name, lambda *a, _r=real, _n=name: calls.append(_n) or _r(*a))
    jr = _np(pg.jacrev(lambda v: keep_large(v) * w)(x))  # cotangents w e_k reach the rule
    np.testing.assert_allclose(jr, np.diag([0.0, 2.0, -0.75]))  # 0.25 is dropped
    jf = _np(pg.jacfwd(lambda v: keep_jvp(v * w))(x))  # tangents w e_k reach the rule
    np.testing.assert_allclose(jf, np.diag([0.0, 2.0, -0.75]))
    assert calls == ["_rev_loop", "_fwd_loop"]
    _, pull = pg.vjp(lambda v: keep_large(v) * w, x)
    with pytest.raises(NotImplementedError, match=r"vmap: nonzero\(\) cannot be batched"):
        pg.vmap(pull)(xp.asarray(np.eye(3)))


# -- linearize -------------------------------------------------------------------------------------


def test_linearize_matches_jvp_and_jacobian(xp):
    rng = np.random.default_rng(6)
    p = {"w": xp.asarray(rng.standard_normal((3, 2))), "b": xp.asarray(rng.standard_normal(2))}
    x = xp.asarray(rng.standard_normal((4, 3)))

    def f(p, x):
        return {"y": xp.tanh(x @ p["w"] + p["b"]), "n": xp.sum(p["w"] ** 2)}

    out, f_jvp = pg.linearize(f, p, x)
    np.testing.assert_allclose(_np(out["y"]), _np(f(p, x)["y"]))
    for seed in (0, 1):  # several tangents, one fixed linearization point
        r = np.random.default_rng(seed)
        tp = pg.tree_map(lambda a, r=r: xp.asarray(r.standard_normal(a.shape)), p)
        tx = xp.asarray(r.standard_normal((4, 3)))
        want = pg.jvp(f, (p, x), (tp, tx))[1]
        got = f_jvp(tp, tx)
        for a, b in zip(pg.tree_leaves(got), pg.tree_leaves(want), strict=True):
            np.testing.assert_allclose(_np(a), _np(b), atol=1e-14)
    # a batch of tangents in one pass: the Jacobian's columns
    g = lambda x: xp.sin(x) * xp.sum(x**2)
    x0 = xp.asarray([0.3, -0.2, 0.9])
    _, g_jvp = pg.linearize(g, x0)
    cols = pg.vmap(g_jvp)(xp.asarray(np.eye(3)))
    np.testing.assert_allclose(_np(cols).T, _np(pg.jacrev(g)(x0)), atol=1e-12)
    # grad through f_jvp (linear in the tangent): the transposed map, J^T c
    c = xp.asarray([1.0, -2.0, 0.5])
    gt = pg.grad(lambda t: xp.sum(g_jvp(t) * c))(xp.zeros(3))
    np.testing.assert_allclose(_np(gt), _np(pg.vjp(g, x0)[1](c)[0]), atol=1e-12)


def test_linearize_has_aux_fixed_primals_and_errors(xp):
    x = xp.asarray([1.0, 2.0])
    out, f_jvp, aux = pg.linearize(lambda v: (xp.exp(v), xp.sum(v)), x, has_aux=True)
    np.testing.assert_allclose(_np(aux), 3.0)
    x[0] = 5.0  # the linearization point is the value passed (x now holds a copy)
    np.testing.assert_allclose(_np(f_jvp(xp.ones(2))), np.exp([1.0, 2.0]))
    y = xp.asarray([0.5, 1.0])
    _, y_jvp = pg.linearize(xp.exp, y)
    buffer = pg.unwrap(y)
    with pg.no_grad():
        y[1] = 3.0  # a mutable backend writes in place here: detected, never silently used
    assert pg.unwrap(y) is buffer
    with pytest.raises(RuntimeError, match="modified in place after linearize"):
        y_jvp(xp.ones(2))
    with pytest.raises(TypeError, match="one tangent per primal"):
        f_jvp(xp.ones(2), xp.ones(2))
    with pytest.raises(ValueError, match="shape"):
        f_jvp(xp.ones(3))
    with pytest.raises(TypeError, match="primal leaf 0"):
        pg.linearize(xp.sin, [1.0])


def test_jacobians_carry_no_tape_but_nest():
    """jacrev's batched backward is a differentiable one: its result must not keep that tape
    at top level (as grad's does not), yet stay differentiable inside an outer transform."""
    xp = pg.namespace(np)
    rng = np.random.default_rng(0)
    x = xp.asarray(rng.standard_normal((4, 3)))
    w = xp.asarray(rng.standard_normal(3))

    def f(w):
        return xp.tanh(x @ w)

    for jac in (pg.jacrev(f)(w), pg.jacfwd(f)(w)):
        assert jac._node is None
    outer = pg.grad(lambda w: xp.sum(pg.jacrev(f)(w) ** 2))(w)
    fd = np.zeros(3)
    for i in range(3):
        e = np.zeros(3)
        e[i] = 1e-6
        hi = float(xp.sum(pg.jacrev(f)(w + xp.asarray(e)) ** 2))
        lo = float(xp.sum(pg.jacrev(f)(w - xp.asarray(e)) ** 2))
        fd[i] = (hi - lo) / 2e-6
    np.testing.assert_allclose(np.asarray(pg.unwrap(outer)), fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize(
    "transform",
    [
        lambda f, x, t: pg.jvp(f, [x], [t]),
        lambda f, x, t: pg.jvp(pg.grad(f), [x], [t]),
        lambda f, x, t: pg.jvp(lambda z: pg.jvp(f, [z], [t])[1], [x], [t]),
        lambda f, x, t: pg.linearize(f, x)[1](t),
        lambda f, x, t: pg.hessian(f)(x),
    ],
    ids=["jvp", "jvp of grad", "jvp of jvp", "linearize", "hessian"],
)
def test_forward_mode_leaves_no_reference_cycle(transform):
    """Nothing a jvp made outlives it waiting for the cyclic collector: its frame cached the
    stack it ran in, the frame among it (a cycle holding the jvp's table of tangents: 36 kB a
    call over 200 nodes, until a collection), so a measured peak depended on when one ran."""
    import gc

    xp = pg.namespace(np)
    x = xp.asarray(np.linspace(0.1, 1.0, 6))
    t = xp.ones_like(x)

    def f(z):
        return xp.sum(xp.sin(z) * z)

    transform(f, x, t)
    gc.collect()
    gc.disable()
    try:
        transform(f, x, t)
        assert gc.collect() == 0
    finally:
        gc.enable()
