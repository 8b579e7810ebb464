"""Gradients on Cubed: lazy (nothing computes while building forward and backward), chunking
kept by cotangent broadcasts, loss and gradients in one compute, equal to NumPy's."""

from __future__ import annotations

import numpy as np
import pytest

import pycograd_xp as pg
from conformance.gradcheck import check_vjp, to_numpy

cubed = pytest.importorskip("cubed")

# A representative subset of the gradient-conformance cases, run on namespace(cubed).
SUBSET = [
    ("sin", lambda xp: xp.sin, [(2, 3)]),
    ("exp*log", lambda xp: lambda x: xp.exp(x) * xp.log(x), [(3,)]),
    ("add broadcast", lambda xp: xp.add, [(2, 3), (3,)]),
    ("multiply broadcast", lambda xp: xp.multiply, [(1, 3), (2, 1)]),
    ("divide", lambda xp: xp.divide, [(2, 3), (2, 3)]),
    ("sum axis 0", lambda xp: lambda x: xp.sum(x, axis=0), [(2, 3)]),
    ("mean keepdims", lambda xp: lambda x: xp.mean(x, axis=-1, keepdims=True), [(2, 3)]),
    ("max", lambda xp: lambda x: xp.max(x, axis=1), [(2, 3)]),
    ("var", lambda xp: lambda x: xp.var(x, axis=0, correction=1), [(3, 2)]),
    ("matmul", lambda xp: xp.matmul, [(2, 3), (3, 4)]),
    ("tanh matmul", lambda xp: lambda a, b: xp.tanh(a @ b), [(4, 3), (3, 2)]),
    (
        "reshape/transpose",
        lambda xp: lambda x: xp.permute_dims(xp.reshape(x, (3, 2)), (1, 0)),
        [(2, 3)],
    ),
    ("where", lambda xp: lambda x: xp.where(x > 1.0, x * x, 0.0), [(2, 3)]),
    ("broadcast_to", lambda xp: lambda x: xp.broadcast_to(x, (4, 3)), [(3,)]),
]


@pytest.mark.parametrize("label, f, shapes", SUBSET, ids=[s[0] for s in SUBSET])
def test_subset_matches_finite_differences(cxp, label, f, shapes):
    rng = np.random.default_rng(0)
    args = [rng.uniform(0.5, 2.0, s) for s in shapes]
    check_vjp(cxp, f(cxp), *args)


def mlp_loss(xp, params, x, y):
    w1, b1, w2 = params
    h = xp.tanh(x @ w1 + b1)
    return xp.mean((xp.sum(h * w2, axis=1) - y) ** 2)


def test_training_gradients_lazy_chunked_and_equal_to_numpy(cxp):
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((200, 5)), rng.standard_normal(200)
    params = [rng.standard_normal((5, 8)), rng.standard_normal(8), rng.standard_normal(8)]
    x = cxp.asarray(cubed.from_array(X, chunks=(50, 5)))
    y = cxp.asarray(cubed.from_array(Y, chunks=(50,)))
    with cubed.raise_if_computes():
        value, grads = pg.value_and_grad(lambda p: mlp_loss(cxp, p, x, y))(
            [cxp.asarray(p) for p in params]
        )
        # the cotangent of b1 is broadcast over the batch: it must keep the (50,)-row chunks,
        # not become 200 single-row tasks
        plan = cubed.plan(pg.unwrap(value), *(pg.unwrap(g) for g in grads))  # noqa: F841
    results = cubed.compute(pg.unwrap(value), *(pg.unwrap(g) for g in grads))
    nxp = pg.namespace(np)
    v_np, g_np = pg.value_and_grad(lambda p: mlp_loss(nxp, p, nxp.asarray(X), nxp.asarray(Y)))(
        [nxp.asarray(p) for p in params]
    )
    np.testing.assert_allclose(results[0], to_numpy(v_np))
    for got, want in zip(results[1:], g_np, strict=True):
        np.testing.assert_allclose(got, to_numpy(want), rtol=1e-10)


def test_cotangent_broadcast_keeps_primal_chunks(cxp):
    x = cxp.asarray(cubed.from_array(np.ones((400, 10)), chunks=(100, 10)))
    with cubed.raise_if_computes():
        g = pg.grad(lambda b: xp_sum(cxp, x + b))(cxp.zeros((10,)))
    assert float(cxp.max(g)) == 800.0
    # the summed cotangent came from an array chunked like x: 4 row blocks, not 400
    assert cubed.plan(pg.unwrap(g)).num_tasks < 50


def xp_sum(xp, a):
    return xp.sum(a * a)


def test_custom_spec_constants_follow_the_primals(tmp_path, cxp):
    # every array of one Cubed computation must share one Spec: the backward pass creates its
    # constants from the primals (ones_like, zeros_like, broadcasts), never with the default
    spec = cubed.Spec(work_dir=str(tmp_path), allowed_mem="500MB")
    rng = np.random.default_rng(1)
    x = cxp.asarray(cubed.from_array(rng.standard_normal((60, 4)), chunks=(20, 4), spec=spec))
    w = cxp.asarray(cubed.from_array(rng.standard_normal(4), spec=spec))

    def loss(w):
        h = cxp.tanh(x @ w)
        return cxp.mean(cxp.where(h > 0, h * h, 0.0)) + cxp.max(h) + cxp.sum(cxp.std(x * w, axis=0))

    with cubed.raise_if_computes():
        value, g = pg.value_and_grad(loss)(w)
    assert pg.unwrap(g).spec == spec
    v, gv = cubed.compute(pg.unwrap(value), pg.unwrap(g))
    assert np.isfinite(v) and np.all(np.isfinite(gv))


@pytest.mark.parametrize(
    "key",
    [(slice(1, 3),), (0, slice(None)), (Ellipsis, -1), (slice(None), None, slice(2, None))],
    ids=str,
)
def test_basic_indexing_backward_on_cubed(cxp, key):
    a = np.random.default_rng(2).uniform(0.5, 2.0, (4, 5))
    check_vjp(cxp, lambda x: x[key] * 2.0, a)


@pytest.mark.parametrize("which", ["rfft", "fft_n", "irfft", "eigh", "trace", "diagonal"])
def test_constants_in_rules_take_the_custom_spec(cxp, which):
    """Rules that make constants (eye, zeros, weights) make them with the primal's Spec, and
    the zero cotangents of unused outputs too: Cubed refuses to mix Specs."""
    cubed = pytest.importorskip("cubed")
    spec = cubed.Spec(allowed_mem="200MB", reserved_mem="10MB")
    xn = np.random.default_rng(0).standard_normal((4, 4))
    fs = {
        "rfft": lambda x, m: m.sum(m.abs(m.fft.rfft(x))),
        "fft_n": lambda x, m: m.sum(m.real(m.fft.fft(m.astype(x, m.complex128), n=2))),
        "irfft": lambda x, m: m.sum(m.fft.irfft(m.astype(x, m.complex128))),
        "eigh": lambda x, m: m.sum(m.linalg.eigh(x @ x.mT)[0] ** 2),
        "trace": lambda x, m: m.sum(m.linalg.trace(x) ** 2),
        "diagonal": lambda x, m: m.sum(m.linalg.diagonal(x) ** 2),
    }
    f = fs[which]
    x = cxp.asarray(cubed.asarray(xn, spec=spec))
    g = pg.grad(lambda x: f(x, cxp))(x)
    xp = pg.namespace(np)
    want = pg.grad(lambda x: f(x, xp))(xp.asarray(xn))
    np.testing.assert_allclose(pg.unwrap(g).compute(), np.asarray(pg.unwrap(want)), atol=1e-12)


def test_solve_with_a_vector_right_side_and_a_stack_of_matrices():
    xp = pg.namespace(np)
    rng = np.random.default_rng(0)
    a = xp.asarray(rng.standard_normal((3, 4, 4)) + 4 * np.eye(4))
    b = xp.asarray(rng.standard_normal(4))
    check_vjp(xp, xp.linalg.solve, np.asarray(pg.unwrap(a)), np.asarray(pg.unwrap(b)))
