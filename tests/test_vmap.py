"""pycograd_xp.vmap: per-example gradients, both orders with grad, nesting, pytrees and axes,
no loop over the batch, and the errors."""

from __future__ import annotations

import numpy as np
import pytest

import pycograd_xp as pg
from pycograd_xp.ops import REGISTRY

xp = pg.namespace(np)
rng = np.random.default_rng(0)


def _mlp(sizes=(6, 5, 4, 3), batch=7):
    params = []
    for i, o in zip(sizes[:-1], sizes[1:], strict=True):
        params.append(
            {
                "w": xp.asarray(rng.standard_normal((i, o)) / np.sqrt(i)),
                "b": xp.asarray(rng.standard_normal(o) * 0.1),
            }
        )
    X = xp.asarray(rng.standard_normal((batch, sizes[0])))
    Y = xp.asarray(np.eye(sizes[-1])[rng.integers(0, sizes[-1], batch)])
    return params, X, Y


def loss(params, x, y):
    h = x
    for layer in params[:-1]:
        h = xp.tanh(h @ layer["w"] + layer["b"])
    logits = h @ params[-1]["w"] + params[-1]["b"]
    z = logits - xp.max(logits)
    return -xp.sum(y * (z - xp.log(xp.sum(xp.exp(z)))))


def _stack_trees(trees):
    return pg.tree_map(lambda *ls: np.stack([pg.unwrap(a) for a in ls]), *trees)


def _assert_trees_close(a, b, **kw):
    la, lb = pg.tree_leaves(a), pg.tree_leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb, strict=True):
        np.testing.assert_allclose(np.asarray(pg.unwrap(x)), np.asarray(pg.unwrap(y)), **kw)


def test_per_example_gradients_of_an_mlp_match_a_loop():
    params, X, Y = _mlp()
    got = pg.vmap(pg.grad(loss), in_axes=(None, 0, 0))(params, X, Y)
    want = _stack_trees([pg.grad(loss)(params, X[i, ...], Y[i, ...]) for i in range(7)])
    assert pg.unwrap(got[0]["w"]).shape == (7, 6, 5)
    _assert_trees_close(got, want, rtol=1e-12, atol=1e-12)


def test_grad_of_a_function_using_vmap():
    params, X, Y = _mlp()

    def total(p):
        return xp.sum(pg.vmap(loss, in_axes=(None, 0, 0))(p, X, Y))

    got = pg.grad(total)(params)
    per = [pg.grad(loss)(params, X[i, ...], Y[i, ...]) for i in range(7)]
    want = pg.tree_map(lambda *ls: sum(pg.unwrap(a) for a in ls), *per)
    _assert_trees_close(got, want, rtol=1e-12, atol=1e-12)


def test_value_and_grad_with_batched_inputs_and_per_example_input_gradients():
    params, X, Y = _mlp()
    vals, gx = pg.vmap(pg.value_and_grad(loss, argnums=1), in_axes=(None, 0, 0))(params, X, Y)
    for i in range(7):
        v, g = pg.value_and_grad(loss, argnums=1)(params, X[i, ...], Y[i, ...])
        np.testing.assert_allclose(pg.unwrap(vals)[i], pg.unwrap(v), rtol=1e-12)
        np.testing.assert_allclose(pg.unwrap(gx)[i], pg.unwrap(g), rtol=1e-12, atol=1e-14)


def test_no_loop_over_the_batch():
    """Each batching rule runs once per call whatever the batch size."""
    params, _, _ = _mlp()
    calls, counts = [], []
    prim = REGISTRY["matmul"]
    rule = prim.batch
    with prim.replaced(batch=lambda *a, **k: calls.append(1) or rule(*a, **k)):
        for batch in (2, 40):
            calls.clear()
            _, X, Y = _mlp(batch=batch)
            pg.vmap(pg.grad(loss), in_axes=(None, 0, 0))(params, X, Y)
            counts.append(len(calls))
    assert counts[0] == counts[1] > 0


def test_nested_vmap_and_mixed_levels():
    A = xp.asarray(rng.standard_normal((3, 4)))
    B = xp.asarray(rng.standard_normal((5, 4)))
    got = pg.vmap(lambda a: pg.vmap(lambda b: xp.sum(a * b) + xp.max(a))(B))(A)
    a, b = pg.unwrap(A), pg.unwrap(B)
    np.testing.assert_allclose(pg.unwrap(got), a @ b.T + a.max(1)[:, None], rtol=1e-12)
    # an inner vmap over arrays the outer one does not batch still gets its own level
    got = pg.vmap(lambda a: pg.vmap(lambda b: b * xp.sum(a))(B))(A)
    np.testing.assert_allclose(pg.unwrap(got), a.sum(1)[:, None, None] * b, rtol=1e-12)


def test_hessian_free_per_example_second_order():
    x = xp.asarray(rng.standard_normal((4, 3)))

    def f(v):
        return xp.sum(xp.sin(v) * v)

    got = pg.vmap(pg.grad(pg.grad(lambda v: f(v) * 1.0)))  # grad of a non-scalar raises
    with pytest.raises(TypeError):
        got(x)
    gg = pg.vmap(pg.grad(lambda v: xp.sum(pg.grad(f)(v))))(x)
    v = pg.unwrap(x)
    np.testing.assert_allclose(pg.unwrap(gg), 2 * np.cos(v) - v * np.sin(v), rtol=1e-12)


def test_in_axes_and_out_axes_pytrees():
    X = xp.asarray(rng.standard_normal((3, 4)))
    Z = xp.asarray(rng.standard_normal((4, 3)))
    c = xp.asarray(2.0)

    def f(d, k):
        return {"s": d["x"] * d["z"] * k, "t": (d["x"] + 1, k)}

    out = pg.vmap(f, in_axes=({"x": 0, "z": 1}, None), out_axes={"s": 1, "t": (0, None)})(
        {"x": X, "z": Z}, c
    )
    x, z = pg.unwrap(X), pg.unwrap(Z)
    np.testing.assert_allclose(pg.unwrap(out["s"]), (x * z.T * 2).T)
    np.testing.assert_allclose(pg.unwrap(out["t"][0]), x + 1)
    assert pg.unwrap(out["t"][1]).shape == ()


def test_unbatched_outputs_are_broadcast_and_jvp_inside_vmap():
    X = xp.asarray(rng.standard_normal((3, 2)))
    w = xp.asarray(rng.standard_normal(2))
    out = pg.vmap(lambda x: (x, w))(X)
    assert pg.unwrap(out[1]).shape == (3, 2)
    t = pg.vmap(lambda x: pg.jvp(lambda v: xp.sin(v) * w, (x,), (xp.ones_like(x),))[1])(X)
    np.testing.assert_allclose(pg.unwrap(t), np.cos(pg.unwrap(X)) * pg.unwrap(w), rtol=1e-12)


def test_errors_name_the_problem():
    X = xp.asarray(rng.standard_normal((3, 2)))
    with pytest.raises(ValueError, match="different sizes"):
        pg.vmap(lambda a, b: a + b)(X, xp.ones((4, 2)))
    with pytest.raises(ValueError, match="no argument is batched"):
        pg.vmap(lambda a: a, in_axes=None)(X)
    with pytest.raises(ValueError, match="out_axes=None"):
        pg.vmap(lambda a: a, out_axes=None)(X)
    with pytest.raises(TypeError, match="Python scalar"):
        pg.vmap(lambda a: a if float(xp.sum(a)) > 0 else -a)(X)
    with pytest.raises(NotImplementedError, match=r"vmap: unique_values\(\) cannot be batched"):
        pg.vmap(xp.unique_values)(X)
    with pytest.raises(ValueError, match="in_axes has 2 entries"):
        pg.vmap(lambda a: a, in_axes=(0, 0))(X)


def test_array_api_strict_per_example_gradients():
    strict = pytest.importorskip("array_api_strict")
    ns = pg.namespace(strict)
    W = ns.asarray(rng.standard_normal((3, 2)))
    X = ns.asarray(rng.standard_normal((5, 3)))

    def f(w, x):
        return ns.sum(ns.tanh(x @ w) ** 2)

    got = pg.vmap(pg.grad(f), in_axes=(None, 0))(W, X)
    for i in range(5):
        want = pg.grad(f)(W, X[i, ...])
        np.testing.assert_allclose(
            np.asarray(pg.unwrap(got[i, ...])), np.asarray(pg.unwrap(want)), rtol=1e-12
        )


def test_vmap_composes_with_custom_rules(xp):
    @pg.custom_vjp
    def clipped(x):
        return x * 1.0

    clipped.defvjp(lambda x: (clipped(x), None), lambda res, g: (xp.clip(g, -1.0, 1.0),))

    @pg.custom_jvp
    def lse(x):
        return xp.log(xp.sum(xp.exp(x)))

    @lse.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        y = lse(x)
        return y, xp.sum(xp.exp(x - y) * t)

    X = xp.asarray(np.arange(6.0).reshape(3, 2))
    rows = [X[i, ...] for i in range(3)]
    for f in (lambda x: xp.sum(clipped(x) * 5.0), lse):
        got = pg.vmap(pg.grad(f))(X)
        want = xp.stack([pg.grad(f)(r) for r in rows])
        np.testing.assert_allclose(np.asarray(pg.unwrap(got)), np.asarray(pg.unwrap(want)))
    np.testing.assert_allclose(
        np.asarray(pg.unwrap(pg.vmap(lse)(X))), [float(pg.unwrap(lse(r))) for r in rows]
    )


# -- batched keys, ends and repeats ----------------------------------------------------------------


def _loop(f, *args):
    """``f`` per example (axis 0 of every argument; integer scalars as Python ints, which every
    backend takes as a key), stacked: what vmap must equal."""

    def example(a, i):
        e = a[i, ...]
        return int(e) if e.ndim == 0 and "int" in str(e.dtype) else e

    return np.stack(
        [np.asarray(pg.unwrap(f(*(example(a, i) for a in args)))) for i in range(args[0].shape[0])]
    )


def test_setitem_with_batched_keys_matches_a_loop_with_gradients(xp):
    X = xp.asarray(rng.standard_normal((3, 2, 4)))
    V = xp.asarray(rng.standard_normal((3, 2)))
    idx = xp.asarray([1, -1, 0])  # each example writes its own column (negative: from the end)
    row = xp.asarray([0, 1, 1])

    def col(x, i, v):
        y = x * 1.0
        y[:, i] = v
        return xp.sum(y**2 * xp.reshape(xp.arange(8.0), (2, 4)))

    def elem(x, r, i):
        y = x * 1.0
        y[r, i] = 5.0
        return y

    def masked(x):
        y = x * 1.0
        y[x > 0.0] = 0.5  # a mask per example, one scalar value
        return y

    np.testing.assert_allclose(pg.unwrap(pg.vmap(col)(X, idx, V)), _loop(col, X, idx, V))
    got = pg.vmap(pg.grad(col, argnums=(0, 2)), in_axes=(0, 0, 0))(X, idx, V)
    for k in range(2):
        want = _loop(lambda x, i, v, k=k: pg.grad(col, argnums=(0, 2))(x, i, v)[k], X, idx, V)
        np.testing.assert_allclose(pg.unwrap(got[k]), want, rtol=1e-12)
    np.testing.assert_allclose(pg.unwrap(pg.vmap(elem)(X, row, idx)), _loop(elem, X, row, idx))
    np.testing.assert_allclose(pg.unwrap(pg.vmap(masked)(X)), _loop(masked, X))
    # the value shared by every example, the array batched by the key alone
    W = xp.asarray(rng.standard_normal((2, 4)))
    shared = pg.vmap(lambda i: elem(W, 1, i), in_axes=0)(idx)
    np.testing.assert_allclose(pg.unwrap(shared), _loop(lambda i: elem(W, 1, i), idx))


def test_linspace_with_batched_ends():
    a, b = xp.asarray([0.0, 1.0, -2.0]), xp.asarray([1.0, 3.0, 2.0])
    for kw in ({}, {"endpoint": False}, {"dtype": xp.float32}):
        got = pg.vmap(lambda s, e, kw=kw: xp.linspace(s, e, 5, **kw))(a, b)
        want = np.stack(
            [
                np.linspace(
                    s, e, 5, **{k: (np.float32 if k == "dtype" else v) for k, v in kw.items()}
                )
                for s, e in zip([0.0, 1.0, -2.0], [1.0, 3.0, 2.0], strict=True)
            ]
        )
        assert pg.unwrap(got).dtype == want.dtype
        np.testing.assert_allclose(pg.unwrap(got), want, rtol=1e-6 if kw else 1e-15)
    got = pg.vmap(lambda s: xp.linspace(s, 4.0, 3), in_axes=0)(a)  # one end batched
    np.testing.assert_allclose(pg.unwrap(got)[:, -1], 4.0)


def test_rows_that_cannot_batch_name_themselves():
    from pycograd_xp._vmap import UnbatchableError

    X = xp.asarray(rng.standard_normal((3, 4)))
    R = xp.asarray(np.array([[1, 2], [0, 1], [2, 2]]))

    def set_vector(x):
        y = x * 1.0
        y[x > 0.0] = xp.ones(2)  # how many elements each mask selects depends on the data
        return y

    def set_array_key(x, r):
        y = x * 1.0
        y[r] = 1.0
        return y

    cases = [
        (r"nonzero\(\)", lambda: pg.vmap(lambda x: xp.nonzero(x > 0)[0])(X)),
        (r"unique_counts\(\)", lambda: pg.vmap(lambda x: xp.unique_counts(x)[1])(X)),
        (r"arange\(\)", lambda: pg.vmap(lambda n: xp.arange(n))(xp.asarray([1, 2, 3]))),
        (r"repeat\(\)", lambda: pg.vmap(lambda x, r: xp.repeat(x[:2], r))(X, R)),
        (r"__getitem__ with a batched boolean mask", lambda: pg.vmap(lambda x: x[x > 0])(X)),
        (r"__setitem__ with a batched boolean mask", lambda: pg.vmap(set_vector)(X)),
        (r"__setitem__ with a batched index", lambda: pg.vmap(set_array_key)(X, R)),
    ]
    for pattern, run in cases:
        with pytest.raises(UnbatchableError, match=r"vmap: " + pattern):
            run()


def test_rules_that_read_values_batch():
    """A rule that checks values (slogdet's singular matrix, cross_entropy's class indices)
    skips the check inside vmap, whose values cannot become one Python bool: per-example
    gradients as a loop over the examples gives them."""
    from pycograd_xp import nn

    a = rng.standard_normal((4, 3, 3)) + 3 * np.eye(3)
    f = pg.grad(lambda m: xp.linalg.slogdet(m)[1])
    got = np.asarray(pg.unwrap(pg.vmap(f)(xp.asarray(a))))
    for i in range(4):
        np.testing.assert_allclose(got[i], np.asarray(pg.unwrap(f(xp.asarray(a[i])))))
    z, y = rng.standard_normal((4, 5)), rng.integers(-5, 5, 4)
    g = pg.grad(lambda z, y: nn.cross_entropy(z[None, :], y[None]))
    got = np.asarray(pg.unwrap(pg.vmap(g)(xp.asarray(z), xp.asarray(y))))
    for i in range(4):
        np.testing.assert_allclose(
            got[i], np.asarray(pg.unwrap(g(xp.asarray(z[i]), xp.asarray(y[i]))))
        )


# Keys whose advanced entries (index arrays, masks, and ints beside them) are apart: NumPy puts
# the axes they make first, so with the batch axis in front of the key the batch axis moves
# behind them (vmap of y[0, :, idx] = v raised for B != 2 and wrote the wrong elements for 2).
_I2, _M23 = np.array([1, 2]), np.array([[False, True, True], [True, False, False]])
_SPLIT_KEYS = {
    "int : array": (0, slice(None), _I2),
    "array : int": (_I2 % 2, slice(None), 1),
    "array : array": (np.array([1, 0]), slice(None), _I2),
    "2-d array : int": (np.array([[0], [1]]), slice(None), 1),
    "int None : array": (1, None, slice(None), _I2),
    "array ... array": (np.array([0, 1]), Ellipsis, _I2),
    "2-d mask : int": (_M23, slice(None), 0),
    "int : mask": (1, slice(None), np.array([True, False, True])),
    "array : int :": (_I2 % 2, slice(None), 2, slice(None)),
}


@pytest.mark.parametrize("batch", [1, 2, 3])
@pytest.mark.parametrize("name", list(_SPLIT_KEYS))
def test_keys_with_advanced_entries_apart_batch_as_a_loop(name, batch):
    key = tuple(xp.asarray(p) if isinstance(p, np.ndarray) else p for p in _SPLIT_KEYS[name])
    rng = np.random.default_rng(batch)
    xb = xp.asarray(rng.standard_normal((batch, 2, 3, 3, 4)))
    vb = xp.asarray(rng.standard_normal((batch, *np.asarray(xb[0])[_SPLIT_KEYS[name]].shape)))

    def get(x):
        return x[key]

    def put(x, v):
        y = x * 1.0
        y[key] = v
        return y

    def put_scalar(x):
        y = x * 1.0
        y[key] = 2.5
        return y

    def loss(v, x):
        return xp.sum(xp.sin(put(x, v)) * xp.cos(x)) + xp.sum(get(x) ** 3)

    checks = {
        "get": (pg.vmap(get), (xb,), get),
        "put": (pg.vmap(put), (xb, vb), put),
        "put a scalar": (pg.vmap(put_scalar), (xb,), put_scalar),
        "put one value for all": (
            pg.vmap(lambda x: put(x, vb[0])),
            (xb,),
            lambda x: put(x, vb[0]),
        ),
        "per-example gradients": (
            pg.vmap(pg.grad(loss, argnums=(0, 1))),
            (vb, xb),
            pg.grad(loss, argnums=(0, 1)),
        ),
    }
    for what, (batched, args, one) in checks.items():
        got = pg.tree_leaves(batched(*args))
        loop = [pg.tree_leaves(one(*(a[i] for a in args))) for i in range(batch)]
        for j, g in enumerate(got):
            want = np.stack([np.asarray(r[j]) for r in loop])
            assert np.asarray(g).shape == want.shape, what
            np.testing.assert_allclose(np.asarray(g), want, rtol=1e-10, atol=1e-12, err_msg=what)


def test_writes_through_views_and_into_arguments_as_a_loop():
    """``z = y[:]; z -= v`` changes ``y`` per example under NumPy, so under vmap too (vmap gave
    sin(x) where the loop gives sin(x) - v); an in-place operator on an argument writes into it
    as ``x[key] = v`` already did, and as each example's call writes its row."""

    def through_view(x, v):
        y = xp.sin(x)
        z = y[:]
        z -= v
        w = y[::-1][1:]
        w *= 2.0
        return y

    def into_argument(x, v):
        x -= v
        x[0] += 1.0
        return x * 1.0

    rng = np.random.default_rng(0)
    xs, vs = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    for f in (through_view, into_argument):
        loop_in = xs.copy()
        loop = np.stack(
            [np.asarray(f(xp.asarray(loop_in)[i], xp.asarray(vs[i]))) for i in range(3)]
        )
        vm_in = xp.asarray(xs.copy())
        np.testing.assert_allclose(np.asarray(pg.vmap(f)(vm_in, xp.asarray(vs))), loop)
        np.testing.assert_allclose(np.asarray(vm_in), loop_in)
    # an unbatched argument a batched write would make batched is rebound, not written
    shared = xp.asarray(xs[0].copy())
    out = pg.vmap(into_argument, in_axes=(None, 0))(shared, xp.asarray(vs))
    np.testing.assert_allclose(np.asarray(out), xs[0] - vs + np.array([1.0, 0, 0, 0]))
    np.testing.assert_array_equal(np.asarray(shared), xs[0])


def test_what_one_example_refuses_vmap_refuses():
    """A mask of the wrong shape, a scan of a 2-D example without an axis and a take from a
    2-D example without an axis raise for one example: under vmap they returned arrays of
    other shapes (a take flattened as NumPy's, which its gradient did not follow)."""
    x = xp.asarray(np.arange(1.0, 7.0).reshape(2, 3))
    xb, vb = xp.stack([x, 10 * x]), xp.stack([x[0], 10 * x[0]])
    cases = [
        (lambda v: v[xp.asarray([True, False])], vb, IndexError, "boolean"),
        (lambda x: x[xp.asarray(np.ones((3, 2), bool))], xb, IndexError, "boolean"),
        (lambda x: xp.cumulative_sum(x), xb, ValueError, "axis must be"),
        (lambda x: xp.cumulative_prod(x), xb, ValueError, "axis must be"),
        (lambda x: xp.take(x, xp.asarray([0])), xb, ValueError, r"take\(\): axis must be given"),
    ]
    for f, batch, error, match in cases:
        with pytest.raises(error, match=match):
            f(batch[0])
        with pytest.raises(error, match=match):
            pg.vmap(f)(batch)
    with pytest.raises(ValueError, match=r"take\(\): axis must be given"):
        pg.grad(lambda x: xp.sum(xp.take(x, xp.asarray([1]))))(x)
    with pytest.raises(ValueError, match=r"take\(\): axis must be given"):
        pg.vmap(lambda i: xp.take(x, i))(xp.asarray([[0], [1]]))


def test_a_matrix_times_a_batch_with_an_empty_contracted_axis():
    """(k, 0) @ (B, 0, m) per example: one product over (n, B*m) reshaped with -1, which a
    contracted axis of 0 leaves unsolved (NumPy's reshape error)."""
    a = xp.asarray(np.ones((3, 2, 0)))
    b = xp.asarray(np.ones((0, 2)))
    got = pg.vmap(lambda v: b.T @ v.T)(a)
    np.testing.assert_array_equal(np.asarray(got), np.zeros((3, 2, 2)))


def _writes_through_views(ns):
    """Functions writing values that differ per example into arrays that are the same for every
    example (made inside the function), through views of them or into their base with views
    alive: NumPy's aliasing must hold per example, as in the loop."""

    def view_then_base(x, v):
        y = ns.zeros(4)
        z = y[:2]
        z[0] = v
        return y + x

    def base_then_view(x, v):
        y = ns.zeros(4)
        z = y[:2]
        y[0] = v
        return ns.concat([z + x[:2], x[2:]])

    def in_place_through_view(x, v):
        y = ns.zeros(4)
        z = y[1:]
        z -= v
        return y * x

    def mask_through_view(x, v):
        y = ns.ones(4)
        z = y[1:]
        z[ns.asarray(np.array([True, False, True]))] = v
        return y + x

    def rows_of_a_buffer(x, v):
        out = ns.zeros((2, 4))
        out[0][:] = x
        out[1][1:3] = v
        return ns.reshape(out, (8,))[:4] + ns.sum(out)

    def transposed(x, v):
        y = ns.zeros((2, 2))
        z = ns.permute_dims(y, (1, 0))
        z[1, 0] = v
        return ns.concat([y[0], y.mT[1]]) * x

    def view_of_a_view(x, v):
        y = ns.zeros(4)
        z = y[1:][::2]
        z[0] = v
        return y - x

    def mask_into_a_flipped_batch(x, v):
        y = ns.sin(x)
        z = y[::-1]
        z[ns.asarray(np.array([True, False, False, True]))] = v
        return y

    return [
        view_then_base,
        base_then_view,
        in_place_through_view,
        mask_through_view,
        rows_of_a_buffer,
        transposed,
        view_of_a_view,
        mask_into_a_flipped_batch,
    ]


@pytest.mark.parametrize("style", ["outer namespace", "the argument's namespace"])
@pytest.mark.parametrize("k", range(8))
def test_per_example_writes_through_views_batch_as_a_loop(style, k):
    """The writes landed in a copy only (the base, or a view of it, kept the shared value):
    silently other values than the loop's, found by the differential fuzzer against JAX."""
    rng = np.random.default_rng(k)
    X, V = rng.standard_normal((3, 4)), rng.standard_normal(3)

    def f(x, v):
        ns = xp if style == "outer namespace" else x.__array_namespace__()
        return _writes_through_views(ns)[k](x, v)

    def loss(x, v):
        y = f(x, v)
        return y.__array_namespace__().sum(y**2)

    got = np.asarray(pg.vmap(f)(xp.asarray(X), xp.asarray(V)))
    want = np.stack([np.asarray(f(xp.asarray(X[i]), xp.asarray(V[i]))) for i in range(3)])
    np.testing.assert_allclose(got, want, rtol=1e-14)
    g = pg.grad(loss, argnums=(0, 1))
    got_g = pg.vmap(g)(xp.asarray(X), xp.asarray(V))
    for j in range(2):
        want_g = np.stack([np.asarray(g(xp.asarray(X[i]), xp.asarray(V[i]))[j]) for i in range(3)])
        np.testing.assert_allclose(np.asarray(got_g[j]), want_g, rtol=1e-13)


def test_in_place_updates_of_shared_values_stay_shared():
    """An in-place operator whose result is the same for every example (an unbatched array
    times a number: sigmoid's VJP does ``g * t``) keeps the array unbatched; it was marked a
    batch without a batch axis (an IndexError in the next batched op), a regression of this
    session's vmap writes found by the Cubed fuzzer's NumPy oracle."""
    X = np.random.default_rng(0).standard_normal((2, 4, 3))
    c = xp.asarray(0.3)

    def f(x0, x1):
        y = xp.ones(3)
        y *= 2.0
        return xp.sum(pg.nn.sigmoid(x1)[()][()] * y) + xp.sum(x0[3, 0] * y)

    g = pg.grad(f, argnums=(0, 1))
    got = pg.vmap(g, in_axes=(0, None))(xp.asarray(X), c)
    for j in range(2):
        want = np.stack([np.asarray(g(xp.asarray(X[i]), c)[j]) for i in range(2)])
        np.testing.assert_allclose(np.asarray(got[j]), want, rtol=1e-14)
