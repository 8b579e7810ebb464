"""Mutation semantics: setitem and in-place operators under every transform.

The matrix: each way of writing (setitem with basic, strided, ellipsis, integer-array with and
without duplicates, boolean-mask indices; every in-place operator), into each kind of array (a
function's own argument, an intermediate, every output of every multi-output function, views of
saved buffers), under each transform (``grad``, ``value_and_grad``, ``vjp``, imperative
``backward``, ``grad`` of ``grad``). Every gradient is checked against central differences of
the same function run on the raw backend, whose in-place writes are the ground truth.
"""

from __future__ import annotations

import numpy as np
import pytest

import pycograd_xp as pg

EPS = 1e-6
RTOL, ATOL = 1e-5, 1e-7


def _raw(xp):
    return xp._backend.xp


def _numeric_grad(f, x0: np.ndarray, raw) -> np.ndarray:
    """Central differences of ``f`` (raw backend array -> raw 0-d array) at ``x0``."""
    g = np.zeros_like(x0)
    for i in np.ndindex(x0.shape):
        hi, lo = x0.copy(), x0.copy()
        hi[i] += EPS
        lo[i] -= EPS
        fh = float(f(raw.asarray(hi)))
        fl = float(f(raw.asarray(lo)))
        g[i] = (fh - fl) / (2 * EPS)
    return g


def _np(a) -> np.ndarray:
    return np.asarray(pg.stop_gradient(a))


def _assert_close(got, want) -> None:
    assert got._node is None, "a returned gradient must not carry a tape node"
    np.testing.assert_allclose(_np(got), want, rtol=RTOL, atol=ATOL)


# -- the functions -----------------------------------------------------------------------------

X0 = np.random.default_rng(0).uniform(-1.0, 1.0, (4, 3))
C1 = np.random.default_rng(1).uniform(-1.0, 1.0, (4, 3))
C2 = np.random.default_rng(2).uniform(-1.0, 1.0, (4, 3))


def _consts(ns):
    return ns.asarray(C1), ns.asarray(C2)


def _index(ns, kind):
    """(key, value function of x) for each kind of index into a (4, 3) array."""
    if kind == "int":
        return (1, ...), lambda x: ns.sin(x[2, ...])
    if kind == "slice":
        return (slice(0, 2), ...), lambda x: x[2:4, ...] * 2.0
    if kind == "strided":
        return (slice(None, None, 2), ...), lambda x: ns.cos(x[1::2, ...])
    if kind == "ellipsis":
        return (..., 1), lambda x: x[:, 0] ** 2
    if kind == "int_array":
        return ns.asarray([0, 2]), lambda x: x[1:3, ...] * 3.0
    if kind == "int_array_dup":
        return ns.asarray([0, 0, 2]), lambda x: ns.sin(x[0:3, ...])
    if kind == "mask":
        return None, lambda x: ns.sum(x) * 0.1  # the mask is computed from x itself
    if kind == "scalar":
        return (slice(1, 3), ...), lambda x: 0.25
    raise AssertionError(kind)


INDEX_KINDS = [
    "int",
    "slice",
    "strided",
    "ellipsis",
    "int_array",
    "int_array_dup",
    "mask",
    "scalar",
]
FANCY = {"int_array", "int_array_dup"}  # array-api-strict refuses these writes itself


def setitem_fn(ns, kind, target):
    """A scalar function of x (4, 3) that writes into its argument or into an intermediate,
    after an earlier use that must keep the old value."""
    key, value = _index(ns, kind)
    c1, c2 = _consts(ns)

    def f(x):
        y = x if target == "argument" else x * 1.5 + 0.1
        before = ns.sum(y * y * c1)
        k = (y > 0.2) if kind == "mask" else key
        y[k] = value(x)
        return before + ns.sum(ns.sin(y) * c2)

    return f


INPLACE_OPS = ["iadd", "isub", "imul", "itruediv", "ipow", "imod", "imatmul"]


def inplace_fn(ns, op, target):
    c1, c2 = _consts(ns)

    def f(x):
        y = x if target == "argument" else x * 1.5 + 0.1
        before = ns.sum(y * y * c1)
        other = ns.cos(x) + 2.0  # positive: pow and mod stay smooth
        if op == "iadd":
            y += other
        elif op == "isub":
            y -= other
        elif op == "imul":
            y *= other
        elif op == "itruediv":
            y /= other
        elif op == "ipow":
            y **= 2.0
            y += 0.5
            y **= other
        elif op == "imod":
            y %= 5.0
        elif op == "imatmul":
            y @= ns.cos(x[1:4, ...])
        return before + ns.sum(ns.sin(y) * c2)

    return f


def _multi_output_cases(ns):
    """Functions that write into each output of the multi-output functions."""
    c1, c2 = _consts(ns)
    sq = lambda x: x[0:3, ...] @ ns.matrix_transpose(x[0:3, ...]) + 3.0 * ns.eye(3)

    def svd(x):  # scikit-learn's svd_flip: signs fixed by writing into U and Vh
        U, S, Vh = ns.linalg.svd(x, full_matrices=False)
        signs = ns.sign(U[0:1, :])
        U *= signs
        Vh *= ns.matrix_transpose(signs)
        S *= 2.0
        return ns.sum(U * c1) + ns.sum(S * S) + ns.sum(Vh * c2[0:3, ...])

    def eigh(x):
        w, V = ns.linalg.eigh(sq(x))
        V *= ns.sign(V[1:2, :])
        V[0, :] = w * 0.5
        w += 1.0
        return ns.sum(w * w) + ns.sum(V * c1[0:3, ...])

    def qr(x):
        Q, R = ns.linalg.qr(x)
        R *= 2.0
        Q[0, :] = R[0, :]
        return ns.sum(Q * c1) + ns.sum(R * c2[0:3, ...])

    def slogdet(x):
        sign, logabs = ns.linalg.slogdet(sq(x))
        logabs *= 3.0
        sign += 1.0
        return logabs * sign

    def eig_vals(x):
        w = ns.linalg.eigvalsh(sq(x))
        w[0] = w[1] * 2.0
        return ns.sum(w * ns.asarray([1.0, 2.0, 3.0]))

    def meshgrid(x):
        a, b = ns.meshgrid(x[0, ...], x[1, ...])
        a *= b
        b[0, :] = a[1, :]
        return ns.sum(a * c1[0:3, ...]) + ns.sum(ns.sin(b))

    def broadcast_arrays(x):
        p, q = ns.broadcast_arrays(x[:, 0:1], x[0:1, :])
        p = p * 1.0  # NumPy's broadcast views are read-only: write into copies
        q = q * 1.0
        p += q
        q[1, :] = p[0, :]
        return ns.sum(p * c1) + ns.sum(q * c2)

    def unstack(x):
        a, b, c, d = ns.unstack(x)
        a *= b
        d[0] = c[1]
        return ns.sum(a * c) + ns.sum(ns.sin(d))

    def unique(x):
        r = ns.unique_all(ns.round(x * 2.0) / 2.0 + 0.0 * x)
        v = r.values * 1.0
        v[0] = v[-1]
        return ns.sum(v * v)

    return {
        "svd": svd,
        "eigh": eigh,
        "qr": qr,
        "slogdet": slogdet,
        "eigvalsh": eig_vals,
        "meshgrid": meshgrid,
        "broadcast_arrays": broadcast_arrays,
        "unstack": unstack,
        "unique_all": unique,
    }


MULTI = [
    "svd",
    "eigh",
    "qr",
    "slogdet",
    "eigvalsh",
    "meshgrid",
    "broadcast_arrays",
    "unstack",
    "unique_all",
]

# -- the transforms ----------------------------------------------------------------------------

TRANSFORMS = ["grad", "value_and_grad", "vjp", "backward", "grad_of_grad"]


def _check(xp, make, transform, argument_target=False):
    """Differentiate ``make(ns)`` (a scalar function) with ``transform`` on ``xp`` and compare
    with central differences of ``make(raw)`` on the raw backend."""
    raw = _raw(xp)
    f = make(xp)
    f_raw = make(raw)
    x = xp.asarray(X0)
    x_before = X0.copy()
    if transform == "grad_of_grad":
        c = xp.asarray(C2)
        h = lambda x: xp.sum(pg.grad(f)(x) * c)
        got = pg.grad(h)(x)
        # the reference: central differences of h, whose inner gradient is itself checked
        # by the first-order cases
        want = _numeric_grad(lambda a: _np_scalar(h(xp.asarray(np.asarray(a)))), X0, np)
        _assert_close(got, want)
        np.testing.assert_array_equal(_np(x), x_before)
        return
    want = _numeric_grad(lambda a: f_raw(raw.asarray(a, copy=True)), X0, raw)
    if transform == "grad":
        got = pg.grad(f)(x)
    elif transform == "value_and_grad":
        value, got = pg.value_and_grad(f)(x)
        assert value._node is None
        np.testing.assert_allclose(float(value), float(f_raw(raw.asarray(X0, copy=True))))
    elif transform == "vjp":
        out, f_vjp = pg.vjp(f, x)
        assert out._node is None
        (got,) = f_vjp(xp.asarray(1.0))
    elif transform == "backward":
        w = xp.asarray(X0)
        w.requires_grad_()
        if argument_target:  # a leaf that requires grad cannot be written (as in PyTorch)
            with pytest.raises(RuntimeError, match="leaf that requires grad"):
                f(w)
            w = xp.asarray(X0)
            w.requires_grad_()
            f(w * 1.0).backward()  # a non-leaf copy can
        else:
            f(w).backward()
        got = w.grad
    else:
        raise AssertionError(transform)
    _assert_close(got, want)
    np.testing.assert_array_equal(_np(x), x_before)  # the caller's array is untouched


def _np_scalar(a) -> float:
    return float(pg.stop_gradient(a))


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("target", ["argument", "intermediate"])
@pytest.mark.parametrize("kind", INDEX_KINDS)
def test_setitem(xp, kind, target, transform):
    if kind in FANCY and xp._backend.name == "array_api_strict":
        pytest.skip("array-api-strict refuses integer-array __setitem__ itself")
    _check(xp, lambda ns: setitem_fn(ns, kind, target), transform, target == "argument")


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("target", ["argument", "intermediate"])
@pytest.mark.parametrize("op", INPLACE_OPS)
def test_inplace_operator(xp, op, target, transform):
    _check(xp, lambda ns: inplace_fn(ns, op, target), transform, target == "argument")


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("which", MULTI)
def test_writes_into_outputs_of_multi_output_functions(xp, which, transform):
    if which == "unique_all" and transform == "grad_of_grad":
        pytest.skip("the second derivative of round() through unique is identically zero")
    _check(xp, lambda ns: _multi_output_cases(ns)[which], transform)


# -- views of saved buffers ----------------------------------------------------------------------


PROTOCOL_WRITES = ["out", "out-view", "add.at", "multiply.at"]


def protocol_write_fn(ns, which, target):
    """NumPy's own functions writing into an array (``out=``, ``ufunc.at``): on a namespace over
    NumPy they reach ours through the protocols; the same code on raw NumPy is the reference."""
    c1, c2 = _consts(ns)

    def f(x):
        y = x if target == "argument" else x * 1.5 + 0.1
        before = ns.sum(y * y * c1)  # the old value, saved by the tape
        if which == "out":
            np.multiply(y, ns.cos(x) + 2.0, out=y)
        elif which == "out-view":
            np.exp(y[1:3], out=y[1:3])  # through a view: the base sees it
        elif which == "add.at":
            np.add.at(y, (np.array([0, 0, 2]),), ns.sin(x[1:4]))  # duplicates accumulate
        else:
            np.multiply.at(y, (np.array([1, 1]), np.array([0, 2])), ns.cos(x[0, :2]) + 2.0)
        return before + ns.sum(y * y * c2)

    return f


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("target", ["argument", "intermediate"])
@pytest.mark.parametrize("which", PROTOCOL_WRITES)
def test_numpy_functions_writing_into_arrays(which, target, transform):
    xp = pg.namespace(np)
    _check(xp, lambda ns: protocol_write_fn(ns, which, target), transform, target == "argument")


def test_view_written_while_recording_keeps_the_saved_value(xp):
    """A write into a view of a buffer the tape saved, while recording, is copy-on-write: the
    tape keeps the old value, and the base sees the write (NumPy's aliasing)."""
    w = xp.asarray([1.0, 2.0, 3.0])
    w.requires_grad_()
    y = xp.asarray([3.0, 4.0, 5.0])
    z = xp.sum(w * y)  # saves y
    view = y[0:2]
    view[0] = 100.0
    np.testing.assert_array_equal(_np(y), [100.0, 4.0, 5.0])
    view += 1.0
    np.testing.assert_array_equal(_np(y), [101.0, 5.0, 5.0])
    z.backward()
    np.testing.assert_array_equal(_np(w.grad), [3.0, 4.0, 5.0])


def _view_cases(ns):
    """Functions that write through basic-index views (scikit-learn's _add_to_diagonal writes
    ``covariances[k, :, :][i, i] += reg``), and read views after writing into their base."""

    def through_view(x):
        c = x * 1.0
        v = c[0, ...]
        v[0] = v[1] * 3.0
        return ns.sum(ns.sin(c) * ns.asarray(C1))

    def diagonal(x):
        c = ns.reshape(ns.concat([x, x[0:2, ...]], axis=0), (2, 3, 3))  # a stack of matrices
        for k in range(2):
            m = c[k, :, :]
            for i in range(3):
                m[i, i] += 0.5 * x[0, i]
        return ns.sum(c * c)

    def base_then_view(x):
        c = x * 2.0
        v = c[1:3, ...]
        c[1, 0] = ns.sum(x)  # the view sees it
        return ns.sum(v * ns.asarray(C2[1:3, ...]))

    def nested(x):
        c = x + 1.0
        row = c[2, ...]
        cell = row[1:2]
        cell *= x[3, 1:2]
        row[0] = cell[0]
        return ns.sum(c * ns.asarray(C1)) + ns.sum(row)

    def untracked_base(x):
        base = ns.asarray(C2, copy=True)
        v = base[0, ...]
        v[...] = x[1, ...] * 2.0  # the (untracked) base gets a tracked value through its view
        return ns.sum(base * base)

    def integer_element(x):
        c = ns.sin(x)
        e = c[1, 2]  # an integer per axis: NumPy gives a scalar (a copy), not a view
        e *= x[0, 0]  # so the write stays in e, tracked or not
        return ns.sum(c * ns.asarray(C1)) + e

    def view_of_a_passing_view(x):
        c = x * 1.0
        v = c[1:, ...][::2, ...]  # a view of a view nothing else holds: it still reaches c
        v[0, 1] = ns.sum(x[0, ...])
        v *= 2.0
        return ns.sum(ns.sin(c) * ns.asarray(C1))

    def moved_view(x):
        c = x + 1.0
        m = ns.squeeze(ns.moveaxis(ns.expand_dims(c, axis=0), 0, 2), axis=2)  # views of views
        m[1:3, 1] = m[1:3, 1] * x[2, 0]
        p = ns.permute_dims(c, (1, 0))
        p[2, ...] -= x[:, 0]
        return ns.sum(c * ns.asarray(C2))

    def transposed_views(x):
        c = ns.sin(x)
        t = c.mT
        t[0, 1] = x[0, 0] * 3.0
        f = ns.flip(ns.expand_dims(c, axis=0), axis=1)
        f[0, 0, 0] += ns.sum(x)
        return ns.sum(c * ns.asarray(C1))

    return {
        "through_view": through_view,
        "view_of_a_passing_view": view_of_a_passing_view,
        "moved_view": moved_view,
        "transposed_views": transposed_views,
        "integer_element": integer_element,
        "diagonal": diagonal,
        "base_then_view": base_then_view,
        "nested": nested,
        "untracked_base": untracked_base,
    }


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize(
    "which",
    [
        "through_view",
        "view_of_a_passing_view",
        "moved_view",
        "transposed_views",
        "integer_element",
        "diagonal",
        "base_then_view",
        "nested",
        "untracked_base",
    ],
)
def test_writes_through_views_keep_numpy_aliasing(xp, which, transform):
    _check(xp, lambda ns: _view_cases(ns)[which], transform)


def test_in_place_operator_on_a_plain_view_writes_the_base(xp):
    y = xp.zeros(4)
    v = y[0:2]
    v += 1.0
    np.testing.assert_array_equal(_np(y), [1.0, 1.0, 0.0, 0.0])


@pytest.mark.parametrize("how", ["inplace_op", "setitem", "setitem_view", "inplace_view"])
def test_saved_buffer_changed_under_no_grad_is_refused(xp, how):
    """PyTorch's version counters: backward refuses a residual written after it was saved."""
    w = xp.asarray([1.0, 2.0, 3.0])
    w.requires_grad_()
    y = xp.asarray([3.0, 4.0, 5.0])
    z = xp.sum(w * y)
    with pg.no_grad():
        if how == "inplace_op":
            y += 100.0
        elif how == "setitem":
            y[0] = 100.0
        elif how == "setitem_view":
            y[1:][0] = 100.0
        else:
            v = y[1:]
            v *= 2.0
    if xp._backend.name == "array_api_strict" and how == "inplace_view":
        # strict's in-place operator on a slice writes the view's own buffer: a NumPy view
        pass
    with pytest.raises(RuntimeError, match="multiply.*modified in place"):
        z.backward()
    assert w.grad is None  # nothing was accumulated


def test_optimizer_step_after_backward_is_fine(xp):
    w = xp.asarray([1.0, 2.0])
    w.requires_grad_()
    for _ in range(3):
        loss = xp.sum(w * w)
        loss.backward()
        with pg.no_grad():
            w -= 0.1 * w.grad
        w.grad = None
    np.testing.assert_allclose(_np(w), np.array([1.0, 2.0]) * 0.8**3)


def test_retained_graph_refuses_after_an_optimizer_step(xp):
    w = xp.asarray([1.0, 2.0])
    w.requires_grad_()
    x = xp.asarray([3.0, 4.0])
    x.requires_grad_()
    loss = xp.sum(w * x)
    loss.backward(retain_graph=True)
    with pg.no_grad():
        w -= 0.1  # w was saved (for x's gradient)
    with pytest.raises(RuntimeError, match="modified in place"):
        loss.backward()


# -- the reproductions of issue 7, each failing before its fix -------------------------------------


def test_write_into_own_argument_differentiates_the_value_passed(xp):
    x = xp.ones(2)
    g = pg.grad(lambda x: (x.__imul__(2.0), xp.sum(x))[1])(x)
    np.testing.assert_array_equal(_np(g), [2.0, 2.0])
    x = xp.ones((2, 3))
    f = lambda x: (x.__setitem__((slice(None), 0), 0.5 * x[:, 1]), xp.sum(x**2))[1]
    g = pg.grad(f)(x)
    assert g._node is None
    np.testing.assert_array_equal(_np(g), [[0.0, 2.5, 2.0]] * 2)
    np.testing.assert_array_equal(_np(x), np.ones((2, 3)))
    g = pg.grad(lambda x: (x.__iadd__(1.0), xp.sum(x))[1])(xp.ones(2))
    assert g._node is None


def test_write_into_own_argument_under_linearize_and_remat(xp):
    """A function that writes into its argument: linearize's map (at each call) and remat's
    recompute start from the value passed, as grad and jvp do, and the caller's array is
    untouched. They took the value f left (the tangent 2, not 4) and remat wrote the caller's
    array in place."""

    def f(x):
        x[0] -= 1.0
        return x * x

    x, t = xp.asarray([3.0, 5.0]), xp.asarray([1.0, 0.0])
    _, lin = pg.linearize(f, x)
    for _ in range(2):
        np.testing.assert_array_equal(_np(lin(t)), [4.0, 0.0])
    for seg in (f, pg.remat(f)):
        loss = lambda x, seg=seg: xp.sum(seg(x))
        np.testing.assert_array_equal(_np(pg.grad(loss)(x)), [4.0, 10.0])
        np.testing.assert_array_equal(_np(pg.jacrev(seg)(x)), [[4.0, 0.0], [0.0, 10.0]])
    np.testing.assert_array_equal(_np(x), [3.0, 5.0])

    def g(x):  # through a view, an in-place operator, and the argument returned
        v = x[1:]
        v *= 2.0
        return x

    y = xp.asarray([1.0, 2.0, 3.0])
    gr = pg.grad(lambda y: xp.sum(pg.remat(g)(y) * xp.asarray([1.0, 10.0, 100.0])))(y)
    np.testing.assert_array_equal(_np(gr), [1.0, 20.0, 200.0])
    np.testing.assert_array_equal(_np(y), [1.0, 2.0, 3.0])


def test_an_element_taken_by_integers_is_a_copy_under_compile_and_vmap(xp):
    """z = y[1] (an integer per axis) is NumPy's scalar, a copy: a write into z leaves y alone
    in compile's trace and under vmap too, as eagerly (compile(grad) gave v the gradient
    -3.76 for 0, and vmap wrote into y)."""

    def f(x, v):
        y = xp.sin(x)
        z = y[1]
        z[()] -= v
        return y

    x, v = np.array([0.1, 0.5, 1.7]), np.array(-1.4)
    loss = lambda x, v: xp.sum(f(x, v) ** 2)
    X, V = xp.asarray(x), xp.asarray(v)
    np.testing.assert_array_equal(_np(pg.compile(f)(X, V)), np.sin(x))
    assert float(pg.compile(pg.grad(loss, argnums=1))(X, V)) == 0.0
    batched = pg.vmap(f)(xp.asarray(np.stack([x, 2 * x])), xp.asarray(np.stack([v, v])))
    np.testing.assert_array_equal(_np(batched), np.sin(np.stack([x, 2 * x])))


def test_per_example_gradients_through_a_write_into_a_view(xp):
    """vmap(grad) of a function writing through a view of an intermediate (z = y[:];
    z -= v; the base y sees it): each example's gradient is grad's alone."""

    def f(x, v):
        y = xp.sin(x)
        z = y[:]
        z -= v
        return xp.sum(y * y)

    xs, vs = np.array([[0.1], [0.2], [0.3]]), np.array([[1.0], [2.0], [3.0]])
    g = pg.vmap(pg.grad(f, argnums=1))(xp.asarray(xs), xp.asarray(vs))
    per = pg.grad(f, argnums=1)
    loop = [_np(per(xp.asarray(a), xp.asarray(b))) for a, b in zip(xs, vs, strict=True)]
    np.testing.assert_allclose(_np(g), np.stack(loop), rtol=1e-15)
    np.testing.assert_allclose(_np(g), -2 * (np.sin(xs) - vs), rtol=1e-15)


def test_outputs_of_multi_output_functions_are_intermediates(xp):
    X = xp.asarray(X0)

    def f(X):
        U, S, Vt = xp.linalg.svd(X, full_matrices=False)
        S *= 2.0
        return xp.sum(S)

    g = pg.grad(f)(X)
    assert g._node is None
    U, _, Vt = np.linalg.svd(X0, full_matrices=False)
    np.testing.assert_allclose(_np(g), 2.0 * U @ Vt, rtol=1e-10)

    def h(X):
        w, V = xp.linalg.eigh(X[0:3, ...] @ xp.matrix_transpose(X[0:3, ...]))
        V[0, :] = 0.0
        return xp.sum(w) + xp.sum(V * V)

    assert pg.grad(h)(X)._node is None
    # the output of a multi-output function has no .grad and can stop requiring nothing
    S = xp.linalg.svd(pg.stop_gradient(X) * 1.0)[1]
    assert S._node is None


def test_duplicate_setitem_indices_follow_last_write_wins():
    xp = pg.namespace(np)

    def f(v):
        y = xp.zeros(3)
        y[xp.asarray([0, 0, 1])] = v
        return y

    out, pull = pg.vjp(f, xp.asarray([10.0, 20.0, 30.0]))
    np.testing.assert_array_equal(_np(out), [20.0, 30.0, 0.0])  # NumPy: the last write wins
    (gv,) = pull(xp.asarray([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(_np(gv), [0.0, 1.0, 2.0])


def test_unordered_duplicate_writes_are_refused(monkeypatch):
    import dataclasses

    from pycograd_xp.namespace import _backend

    xp = pg.namespace(np)
    unordered = dataclasses.replace(xp._backend, ordered_writes=False)
    monkeypatch.setattr(xp, "_backend", unordered)
    monkeypatch.setitem(_backend._BY_XP, id(unordered.xp), unordered)

    def f(v):
        y = xp.zeros(3)
        y[xp.asarray([0, 0, 1])] = v
        return xp.sum(y)

    with pytest.raises(NotImplementedError, match="repeats an index.*unspecified"):
        pg.grad(f)(xp.asarray([1.0, 2.0, 3.0]))


def test_saved_value_changed_under_no_grad_is_detected(xp):
    w = xp.asarray([1.0, 2.0])
    w.requires_grad_()
    y = xp.asarray([3.0, 4.0])
    z = xp.sum(w * y)
    with pg.no_grad():
        y += 100.0
    with pytest.raises(RuntimeError, match="backward through multiply: 'x2'.*modified in place"):
        z.backward()


def test_returned_gradients_carry_no_node(xp):
    X = xp.asarray(X0)
    for f in (
        lambda x: xp.sum(xp.linalg.svd(x, full_matrices=False)[1] * 2.0),
        lambda x: (x.__imul__(3.0), xp.sum(x * x))[1],
    ):
        v, g = pg.value_and_grad(f)(X)
        assert v._node is None and g._node is None
        np.asarray(g)  # the loud boundary does not trip: nothing is being differentiated


def test_nan_cotangent_on_a_structural_zero_does_not_leak(xp):
    """atan2(0, 0) has a NaN local derivative; on cholesky's zero upper triangle it must not
    reach the gradient (JAX gives a finite gradient there, as do finite differences)."""
    A0 = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])

    for upper in (False, True):

        def g(ns, upper=upper):
            def g(A):
                L = ns.linalg.cholesky(A, upper=upper)
                return ns.sum(ns.atan2(L, L + 1.0))

            return g

        got = pg.grad(g(xp))(xp.asarray(A0))
        assert np.all(np.isfinite(_np(got)))
        want = _numeric_grad(g(_raw(xp)), A0, _raw(xp))
        want = (want + want.T) / 2  # cholesky reads one triangle: the symmetric gradient
        np.testing.assert_allclose(_np(got), want, rtol=1e-5, atol=1e-7)

    def q(ns):
        def q(A):
            R = ns.linalg.qr(A)[1]
            return ns.sum(ns.atan2(R, R * R))

        return q

    assert np.all(np.isfinite(_np(pg.grad(q(xp))(xp.asarray(A0)))))


def test_second_order_through_basic_indexing_on_cubed(cxp):
    cubed = pytest.importorskip("cubed")
    for chunks in [(1,), (2,), (3,), (4,)]:
        x = cxp.asarray(cubed.asarray(np.arange(4.0), chunks=chunks))
        for sl in [slice(0, 2), slice(1, 3), slice(2, 4), slice(1, 4)]:
            f = lambda x, sl=sl: cxp.sum(x[sl] ** 3)
            g = pg.grad(lambda x, f=f: cxp.sum(pg.grad(f)(x)))(x)
            want = np.zeros(4)
            want[sl] = 6 * np.arange(4.0)[sl]
            np.testing.assert_allclose(pg.unwrap(g).compute(), want)


def test_numpy_integer_scalars_index_like_python_ints():
    """scikit-learn's GaussianMixture indexes with np.int64 (NumPy and array-api-strict accept
    it)."""
    xp = pg.namespace(np)
    y = xp.asarray([0.0, 1.0, 2.0])
    assert float(y[np.int64(1)]) == 1.0
    y[np.int64(2)] = 5.0
    np.testing.assert_array_equal(_np(y), [0.0, 1.0, 5.0])


@pytest.mark.parametrize(
    "which", ["through_view", "view_of_a_passing_view", "moved_view", "transposed_views", "nested"]
)
def test_compiled_gradients_write_through_views_as_eager_ones(which):
    """compile traces the views (basic indexing and the view rows) as eager recording notes
    them: a write through one reaches its base in the replay too (the transposed and moved
    views' writes were lost in compile(grad) alone)."""
    xp = pg.namespace(np)
    f = _view_cases(xp)[which]
    x = xp.asarray(X0)
    want = pg.grad(f)(x)
    got = pg.compile(pg.grad(f))(x)
    np.testing.assert_allclose(_np(got), _np(want), rtol=1e-14, atol=1e-15)
