"""nn layers: values against NumPy formulas (and PyTorch when installed), gradients against
finite differences, modules as pytrees."""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import pytest

import pycograd_xp as pg
from conformance.gradcheck import check_vjp, to_numpy
from pycograd_xp import nn, random

rng = np.random.default_rng(0)


def A(*shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, shape)


ACTIVATIONS = {
    "relu": (nn.relu, lambda a: np.maximum(a, 0)),
    "leaky_relu": (nn.leaky_relu, lambda a: np.where(a > 0, a, 0.01 * a)),
    "elu": (nn.elu, lambda a: np.where(a > 0, a, np.expm1(np.minimum(a, 0)))),
    "sigmoid": (nn.sigmoid, lambda a: 1 / (1 + np.exp(-a))),
    "silu": (nn.silu, lambda a: a / (1 + np.exp(-a))),
    "softplus": (nn.softplus, lambda a: np.log1p(np.exp(a))),
    "gelu": (
        nn.gelu,
        lambda a: 0.5 * a * (1 + np.tanh(np.sqrt(2 / np.pi) * (a + 0.044715 * a**3))),
    ),
    "gelu exact": (
        lambda x: nn.gelu(x, approximate=False),
        lambda a: a * 0.5 * (1 + np.vectorize(math.erf)(a / np.sqrt(2))),
    ),
}


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activations(xp, name):
    f, ref = ACTIVATIONS[name]
    a = A(3, 4) + 0.05  # away from the kinks at 0
    np.testing.assert_allclose(to_numpy(f(xp.asarray(a))), ref(a), rtol=1e-6, atol=1e-7)
    check_vjp(xp, f, a)


@pytest.mark.parametrize(
    "f, want",
    [
        (nn.relu, 0.0),  # JAX's, PyTorch's
        (lambda x: nn.leaky_relu(x, 0.1), 0.1),  # PyTorch's (JAX's is 1)
        (nn.elu, 1.0),  # differentiable at 0 for alpha 1
        (lambda x: nn.elu(x, 0.3), 0.3),  # the negative branch's, as JAX and PyTorch
        (nn.silu, 0.5),
        (nn.softplus, 0.5),
        (nn.gelu, 0.5),
    ],
)
def test_activation_derivatives_at_zero(xp, f, want):
    """At the kink 0 (and -0): the convention JAX and PyTorch share, not a tie split between
    the branches (ELU once gave alpha / 2 there: a minimum's tie)."""
    x = xp.asarray([0.0, -0.0])
    got = pg.vmap(pg.grad(f))(x)
    np.testing.assert_allclose(to_numpy(got), [want, want], rtol=1e-15)


@pytest.mark.parametrize("dtype, big", [(np.float64, 1e16), (np.float32, 3e7), (np.float32, 1e6)])
def test_softmax_gradients_beside_a_large_maximum(xp, dtype, big):
    """logsumexp's gradient (nn's, special's) and cross-entropy's are the softmax, which
    ``exp(z - logsumexp(z))`` misses beside a large maximum (logsumexp = max + log 2 rounds to
    the max: [1, 1, 0] where [0.5, 0.5, 0] is right; PyTorch's logsumexp has that error, JAX's
    does not): in the VJP and in the JVP."""
    from pycograd_xp import special

    z = np.array([[big, big, 0.0], [1.0, 2.0, 3.0]], dtype=dtype)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    tol = dict(rtol=1e-6 if dtype == np.float32 else 1e-14, atol=1e-7)
    Z = xp.asarray(z)
    for lse in (nn.logsumexp, lambda a: special.logsumexp(a, axis=-1)):
        g = pg.grad(lambda a, lse=lse: xp.sum(lse(a)))(Z)
        np.testing.assert_allclose(to_numpy(g), p, **tol)
        t = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], dtype=dtype)
        _, tangent = pg.jvp(lse, (Z,), (xp.asarray(t),))
        np.testing.assert_allclose(to_numpy(tangent), (p * t).sum(axis=1), **tol)
    labels = np.array([0, 2])
    g = pg.grad(lambda a: nn.cross_entropy(a, xp.asarray(labels), reduction="sum"))(Z)
    np.testing.assert_allclose(to_numpy(g), p - np.eye(3, dtype=dtype)[labels], **tol)
    soft = np.array([[0.5, 0.25, 0.25], [0.0, 0.0, 1.0]], dtype=dtype)
    g = pg.grad(lambda a: nn.cross_entropy(a, xp.asarray(soft), reduction="sum"))(Z)
    np.testing.assert_allclose(to_numpy(g), p - soft, **tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_sigmoid_keeps_its_tails(xp, dtype):
    """sigmoid, silu's value and derivative, and softplus' derivative (the sigmoid) to a few
    ulp of relative error in the negative tail, where ``(tanh(x/2) + 1) / 2`` had 2e-4 at -10
    in float32 and gave 0 for 2e-9 below -17.5 (float64: 0 below -37), as scipy's expit,
    PyTorch's and JAX's do not; and no overflow at any x. The positive tail's derivative is
    ``s (1 - s)`` (PyTorch's, JAX's): within an ulp of 1 absolutely."""
    eps = float(np.finfo(dtype).eps)
    low = -80.0 if dtype == np.float32 else -700.0  # values still normal numbers
    x = np.array([low, -40.0, -20.0, -17.5, -10.0, -5.0, -1.0, 0.0, 1.0, 5.0, 20.0])
    x = x[x >= low]
    s = 1 / (1 + np.exp(-x))  # float64, exact to an ulp or two at these points
    X = xp.asarray(x.astype(dtype))

    def rel(got, want):
        return np.max(np.abs(to_numpy(got) - want) / np.abs(want))

    assert rel(nn.sigmoid(X), s) < 4 * eps
    assert rel(to_numpy(nn.silu(X))[x != 0], (x * s)[x != 0]) < 4 * eps
    neg = x <= 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing overflows
        d_sig = to_numpy(pg.vmap(pg.grad(nn.sigmoid))(X))
        d_silu = to_numpy(pg.vmap(pg.grad(nn.silu))(X))
        d_softplus = to_numpy(pg.vmap(pg.grad(nn.softplus))(X))
        nn.sigmoid(xp.asarray(np.array([-1e4, -200.0, 1e4], dtype=dtype)))
    assert rel(d_sig[neg], (s * (1 - s))[neg]) < 8 * eps
    assert np.max(np.abs(d_sig - s * (1 - s))) < eps
    assert rel(d_silu[neg], (s * (1 + x * (1 - s)))[neg]) < 8 * eps
    assert rel(d_softplus, s) < 4 * eps


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_silu_holds_at_huge_inputs(xp, dtype):
    """SiLU and its derivative (block by block and whole, and the JVP) from 1e4 to the dtype's
    largest: x and 1 above, within 1e-30 of 0 below. ``x sigmoid(x)`` with the sigmoid held
    at its clip grew with x there: -2.7 at float32's largest, value and derivative."""
    mags = [1e4, 1e10, 1e20, 1e30, float(np.finfo(dtype).max)]
    edge = np.array([m for m in mags for m in (m, -m)], dtype)
    for base in (edge, np.concatenate([edge, np.linspace(-5, 5, 70000, dtype=dtype)])):
        x = xp.asarray(base)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # nothing overflows
            value = to_numpy(nn.silu(x))
            d1 = to_numpy(pg.grad(lambda x: xp.sum(nn.silu(x)))(x))
            _, t = pg.jvp(nn.silu, (x,), (xp.ones_like(x),))
        hi, lo = base >= 1e4, base <= -1e4
        np.testing.assert_array_equal(value[hi], base[hi])
        np.testing.assert_array_equal(d1[hi], 1.0)
        assert np.all(np.abs(value[lo]) <= 1e-30) and np.all(np.abs(d1[lo]) <= 1e-30)
        np.testing.assert_array_equal(to_numpy(t), d1)


def test_softmax_family_is_stable(xp):
    a = np.array([[1000.0, 1000.0, -1000.0], [0.5, -0.5, 2.0]])
    sm = to_numpy(nn.softmax(xp.asarray(a)))
    np.testing.assert_allclose(sm[0], [0.5, 0.5, 0.0])
    np.testing.assert_allclose(sm.sum(axis=1), [1.0, 1.0])
    lse = to_numpy(nn.logsumexp(xp.asarray(a), axis=1))
    np.testing.assert_allclose(lse[1], np.log(np.exp(a[1]).sum()))
    np.testing.assert_allclose(lse[0], 1000 + np.log(2))
    for f in (nn.softmax, nn.log_softmax, lambda x: nn.logsumexp(x, axis=0)):
        check_vjp(xp, f, A(3, 4))


def test_losses(xp):
    logits, labels = A(5, 4), np.array([0, 3, 1, 1, 2])
    onehot = np.eye(4)[labels]
    logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    want = -logp[np.arange(5), labels]
    got = nn.cross_entropy(xp.asarray(logits), xp.asarray(labels), reduction="none")
    np.testing.assert_allclose(to_numpy(got), want)
    np.testing.assert_allclose(
        float(nn.cross_entropy(xp.asarray(logits), xp.asarray(onehot))), want.mean()
    )
    assert float(nn.cross_entropy(xp.asarray(logits), xp.asarray(labels), "sum")) == pytest.approx(
        want.sum()
    )
    check_vjp(xp, lambda x: nn.cross_entropy(x, xp.asarray(labels)), logits)
    check_vjp(xp, lambda x, y: nn.cross_entropy(x, y), logits, onehot)
    y = (A(6) > 0).astype(float)
    z = A(6, lo=-30, hi=30)
    bce = to_numpy(nn.binary_cross_entropy_with_logits(xp.asarray(z), xp.asarray(y), "none"))
    np.testing.assert_allclose(bce, np.logaddexp(0, z) - z * y)
    check_vjp(xp, nn.binary_cross_entropy_with_logits, A(6), y)
    check_vjp(xp, nn.mse, A(2, 3), A(2, 3))
    with pytest.raises(ValueError, match="reduction must be"):
        nn.mse(xp.ones(2), xp.ones(2), reduction="avg")


def _smoothed_reference(z, labels, eps, ignore):
    """PyTorch's definition written out: the target (1 - eps) one-hot + eps / C, ignored rows
    dropped, 'mean' over the others."""
    c, m = z.shape[-1], z.max(-1, keepdims=True)
    logp = z - m - np.log(np.exp(z - m).sum(-1, keepdims=True))
    keep = labels != ignore
    target = (1 - eps) * np.eye(c)[np.where(keep, labels, 0)] + eps / c
    per = np.where(keep, -(target * logp).sum(-1), 0.0)
    return per, per.sum() / keep.sum()


def test_cross_entropy_ignore_index_and_label_smoothing(xp):
    """PyTorch's ``ignore_index`` and ``label_smoothing``: values against the written-out
    definition for every reduction, gradients against finite differences, and no loss or
    gradient from an ignored row."""
    z = A(4, 3, 6)
    labels = rng.integers(0, 6, (4, 3))
    labels[0, 1] = labels[2, 2] = -100
    for eps in (0.0, 0.1, 1.0):
        per, mean = _smoothed_reference(z, labels, eps, -100)

        def f(x, reduction="mean", eps=eps):
            return nn.cross_entropy(
                x, xp.asarray(labels), reduction, ignore_index=-100, label_smoothing=eps
            )

        np.testing.assert_allclose(to_numpy(f(xp.asarray(z), "none")), per, rtol=1e-13)
        np.testing.assert_allclose(float(f(xp.asarray(z))), mean, rtol=1e-13)
        np.testing.assert_allclose(float(f(xp.asarray(z), "sum")), per.sum(), rtol=1e-13)
        check_vjp(xp, f, z)
        g = to_numpy(pg.grad(f)(xp.asarray(z)))
        assert np.all(g[0, 1] == 0) and np.all(g[2, 2] == 0)
    # smoothing of probabilities: the target (1 - eps) p + eps / C, gradients in both
    p = rng.random((5, 6))
    p /= p.sum(-1, keepdims=True)
    z2 = A(5, 6)
    logp = z2 - np.log(np.exp(z2).sum(-1, keepdims=True))
    want = -(((1 - 0.3) * p + 0.3 / 6) * logp).sum(-1).mean()
    got = nn.cross_entropy(xp.asarray(z2), xp.asarray(p), label_smoothing=0.3)
    np.testing.assert_allclose(float(got), want, rtol=1e-13)
    check_vjp(xp, lambda a, b: nn.cross_entropy(a, b, label_smoothing=0.3), z2, p)
    # every row ignored: 'mean' is 0 / 0, as PyTorch's
    with np.errstate(invalid="ignore"):
        everything = nn.cross_entropy(
            xp.asarray(z2), xp.asarray(np.full(5, 7)), ignore_index=7, reduction="mean"
        )
    assert math.isnan(float(everything))


def test_cross_entropy_refuses_class_indices_out_of_range(xp):
    """An index outside -C .. C - 1 is an IndexError naming it: one below -C used to wrap to a
    class in the loss while its gradient matched no class. -100 (PyTorch's padding) names
    ``ignore_index``; -C .. -1 still count from the last class."""
    z = xp.asarray(A(3, 5))
    for bad in (5, 7, -6, -100):
        y = xp.asarray(np.array([0, bad, 1]))
        with pytest.raises(IndexError, match=rf"cross_entropy\(\): class index {bad} is out of"):
            nn.cross_entropy(z, y)
        with pytest.raises(IndexError, match="ignore_index=-100" if bad == -100 else "valid: 0"):
            pg.grad(lambda x, y=y: nn.cross_entropy(x, y))(z)
    unsigned = xp.asarray(np.array([0, 5, 1], np.uint8))
    with pytest.raises(IndexError, match="class index 5 is out of range for 5 classes"):
        nn.cross_entropy(z, unsigned)
    ends = nn.cross_entropy(z, xp.asarray(np.array([-5, -1, 4])), reduction="none")
    same = nn.cross_entropy(z, xp.asarray(np.array([0, 4, 4])), reduction="none")
    np.testing.assert_array_equal(to_numpy(ends), to_numpy(same))
    labels = xp.asarray(np.array([0, 1, 2]))
    with pytest.raises(ValueError, match=r"label_smoothing must be in \[0, 1\], got 1.5"):
        nn.cross_entropy(z, labels, label_smoothing=1.5)
    with pytest.raises(ValueError, match="ignore_index applies to integer class indices"):
        nn.cross_entropy(z, xp.asarray(np.full((3, 5), 0.2)), ignore_index=0)
    for wrong in ("pad", True, 1.0):
        with pytest.raises(TypeError, match="ignore_index must be an int"):
            nn.cross_entropy(z, labels, ignore_index=wrong)
    with pytest.raises(ValueError, match="reduction must be 'mean', 'sum' or 'none'"):
        nn.cross_entropy(z, labels, "avg", ignore_index=0)


def test_cross_entropy_batches_under_vmap(xp):
    """Per-example gradients and JVPs with integer labels (the per-example tutorial's loss):
    the range check of class indices reads no batched value as a Python bool."""
    w, x = A(3, 5), A(4, 3)
    y = rng.integers(-5, 5, 4)

    def loss(w, x, y):
        return nn.cross_entropy((x @ w)[None, :], y[None], label_smoothing=0.1)

    per = pg.vmap(pg.grad(loss), in_axes=(None, 0, 0))(xp.asarray(w), xp.asarray(x), xp.asarray(y))
    for i in range(4):
        one = pg.grad(loss)(xp.asarray(w), xp.asarray(x[i]), xp.asarray(y[i]))
        np.testing.assert_allclose(to_numpy(per)[i], to_numpy(one), rtol=1e-12)
    t = A(3, 5)
    tangents = pg.vmap(
        lambda x, y: pg.jvp(lambda w: loss(w, x, y), (xp.asarray(w),), (xp.asarray(t),))[1]
    )(xp.asarray(x), xp.asarray(y))
    np.testing.assert_allclose(
        to_numpy(tangents), np.sum(to_numpy(per) * t, axis=(1, 2)), rtol=1e-10
    )


def test_binary_cross_entropy_takes_bool_targets(xp):
    """Bool targets (``y > 0``, a mask) are the float targets' loss and gradient, in the
    logits' dtype (the standard multiplies no bool: it was a TypeError)."""
    z, y = A(6), A(6) > 0
    for dtype in (np.float64, np.float32):
        logits = xp.asarray(z.astype(dtype))
        got = nn.binary_cross_entropy_with_logits(logits, xp.asarray(y), "none")
        want = nn.binary_cross_entropy_with_logits(logits, xp.asarray(y.astype(dtype)), "none")
        assert got.dtype == logits.dtype
        np.testing.assert_array_equal(to_numpy(got), to_numpy(want))
    check_vjp(xp, lambda x: nn.binary_cross_entropy_with_logits(x, xp.asarray(y)), z)


def test_a_target_that_would_broadcast_into_a_matrix_is_refused(xp):
    """Predictions (n,) against targets (n, 1) broadcast to (n, n): the mean of that is a
    wrong loss (2.5 for perfect predictions of 0..3), not an error; the losses refuse it and
    say how to fix it. A target that broadcasts to the predictions' shape (a number, (1,),
    the same shape) is taken."""
    pred, column = xp.asarray(np.arange(4.0)), xp.asarray(np.arange(4.0)[:, None])
    for loss, who in (
        (nn.mse, "mse: the target's shape"),
        (nn.binary_cross_entropy_with_logits, "binary_cross_entropy_with_logits: the targets'"),
    ):
        with pytest.raises(
            ValueError,
            match=rf"{who}.* \(4, 1\) does not broadcast to .* "
            r"\(4,\) \(together they broadcast to \(4, 4\)\); reshape it to",
        ):
            loss(pred, column)
        with pytest.raises(ValueError, match=r"\(3,\) does not broadcast to .* \(4,\)$"):
            loss(pred, xp.asarray([1.0, 2.0, 3.0]))
        for target in (1.0, xp.asarray([1.0]), xp.asarray(np.ones(4))):
            loss(pred, target)
    assert float(nn.mse(pred, xp.asarray(np.arange(4.0)))) == 0.0


def test_normalization(xp):
    a, w, b = A(4, 6), A(6), A(6)
    y = to_numpy(nn.layer_norm(xp.asarray(a), xp.asarray(w), xp.asarray(b)))
    want = (a - a.mean(-1, keepdims=True)) / np.sqrt(a.var(-1, keepdims=True) + 1e-5) * w + b
    np.testing.assert_allclose(y, want, rtol=1e-10)
    check_vjp(xp, nn.layer_norm, a, w, b)
    check_vjp(xp, nn.rms_norm, a, w)
    x = A(8, 3, 2)
    state = {"mean": xp.zeros(3), "var": xp.ones(3)}
    out, new = nn.batch_norm(xp.asarray(x), state, training=True, momentum=0.5)
    mu = x.mean(axis=(0, 2))
    np.testing.assert_allclose(to_numpy(new["mean"]), 0.5 * mu)
    np.testing.assert_allclose(to_numpy(new["var"]), 0.5 + 0.5 * x.var(axis=(0, 2), ddof=1))
    np.testing.assert_allclose(to_numpy(out).mean(axis=(0, 2)), 0, atol=1e-12)
    evald, same = nn.batch_norm(xp.asarray(x), new, training=False)
    assert same is new
    check_vjp(xp, lambda x, w, b: nn.batch_norm(x, state, w, b, training=True)[0], x, A(3), A(3))


def test_dropout_and_embedding(xp):
    x = xp.ones((200, 50))
    y = to_numpy(nn.dropout(random.key(1), x, 0.3))
    assert set(np.unique(y)) == {0.0, 1 / 0.7} and abs((y == 0).mean() - 0.3) < 0.02
    np.testing.assert_array_equal(to_numpy(nn.dropout(random.key(1), x, 0.3)), y)
    assert nn.dropout(random.key(1), x, 0.3, training=False) is x
    table = A(10, 4)
    ids = np.array([[1, 1], [9, 0]])
    e = nn.embedding(xp.asarray(ids), xp.asarray(table))
    assert e.shape == (2, 2, 4)
    np.testing.assert_array_equal(to_numpy(e), table[ids])
    g = pg.grad(lambda t: xp.sum(nn.embedding(xp.asarray(ids), t)))(xp.asarray(table))
    assert to_numpy(g)[1].tolist() == [2.0] * 4  # id 1 used twice: gradients accumulate
    with pytest.raises(TypeError, match=r"float64 ids of shape \(10, 4\).*may be swapped"):
        nn.embedding(xp.asarray(table), xp.asarray(ids))  # PyTorch's order is (ids, table) too
    with pytest.raises(TypeError, match=r"a table of shape \(40,\)"):
        nn.embedding(xp.asarray(ids), xp.reshape(xp.asarray(table), (-1,)))


def test_attention(xp):
    q, k, v = A(2, 3, 4), A(2, 5, 4), A(2, 5, 4)
    s = q @ np.swapaxes(k, -1, -2) / 2.0
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    out = nn.scaled_dot_product_attention(xp.asarray(q), xp.asarray(k), xp.asarray(v))
    np.testing.assert_allclose(to_numpy(out), p @ v, rtol=1e-10)
    mask = np.tril(np.ones((3, 5), bool))
    check_vjp(
        xp, lambda q, k, v: nn.scaled_dot_product_attention(q, k, v, xp.asarray(mask)), q, k, v
    )
    check_vjp(xp, lambda q: nn.scaled_dot_product_attention(q, q, q, causal=True), A(2, 4, 4))
    params = {n: A(8, 8) / 3 for n in ("wq", "wk", "wv", "wo")}
    x = A(2, 3, 8)
    check_vjp(
        xp,
        lambda x, wq: nn.multi_head_attention(
            x, {**{k: xp.asarray(v) for k, v in params.items()}, "wq": wq}, num_heads=2, causal=True
        ),
        x,
        params["wq"],
    )


CONVS = [
    dict(stride=1, padding=0, dilation=1),
    dict(stride=2, padding=1, dilation=1),
    dict(stride=1, padding=2, dilation=2),
]


@pytest.mark.parametrize("kw", CONVS, ids=str)
def test_convolution_and_pooling_gradients(xp, kw):
    x, w, b = A(2, 3, 7, 6), A(4, 3, 3, 2), A(4)
    y = nn.conv2d(xp.asarray(x), xp.asarray(w), xp.asarray(b), **kw)
    check_vjp(xp, lambda x, w, b: nn.conv2d(x, w, b, **kw), x, w, b)
    check_vjp(xp, lambda x, w: nn.conv1d(x, w, **kw), A(2, 3, 9), A(4, 3, 3))
    assert y.ndim == 4
    check_vjp(
        xp,
        lambda x: nn.max_pool2d(
            x, 2, stride=kw["stride"], padding=kw["padding"] if kw["padding"] < 2 else 1
        ),
        x,
    )
    check_vjp(xp, lambda x: nn.avg_pool2d(x, 3, stride=1, padding=1), x)


@pytest.mark.parametrize("kw", CONVS, ids=str)
def test_convolution_and_pooling_match_torch(kw):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    xp = pg.namespace(np)
    x, w, b = A(2, 3, 7, 6), A(4, 3, 3, 2), A(4)
    tx, tw, tb = (torch.tensor(a) for a in (x, w, b))
    np.testing.assert_allclose(
        to_numpy(nn.conv2d(xp.asarray(x), xp.asarray(w), xp.asarray(b), **kw)),
        F.conv2d(tx, tw, tb, **kw).numpy(),
        rtol=1e-10,
        atol=1e-12,
    )
    x1, w1 = A(2, 3, 9), A(4, 3, 3)
    np.testing.assert_allclose(
        to_numpy(nn.conv1d(xp.asarray(x1), xp.asarray(w1), **kw)),
        F.conv1d(torch.tensor(x1), torch.tensor(w1), **kw).numpy(),
        rtol=1e-10,
        atol=1e-12,
    )
    np.testing.assert_allclose(
        to_numpy(nn.max_pool2d(xp.asarray(x), 2, stride=kw["stride"])),
        F.max_pool2d(tx, 2, stride=kw["stride"]).numpy(),
    )
    np.testing.assert_allclose(
        to_numpy(nn.avg_pool2d(xp.asarray(x), 3, 1, 1)),
        F.avg_pool2d(tx, 3, 1, 1).numpy(),
        rtol=1e-12,
    )


PADDINGS = [
    # (conv2d's padding, conv1d's, the zeros each adds per side, for a 3 x 2 kernel and a 3-tap
    # one at dilation 2)
    ("same", "same", ((2, 2), (0, 1)), ((2, 2),)),
    ("valid", "valid", ((0, 0), (0, 0)), ((0, 0),)),
    (((1, 0), (0, 2)), (1, 3), ((1, 0), (0, 2)), ((1, 3),)),
]


@pytest.mark.parametrize("p2, p1, sides2, sides1", PADDINGS, ids=str)
def test_convolution_padding_by_name_and_per_side(xp, p2, p1, sides2, sides1):
    """PyTorch's "same" and "valid" and a (before, after) pair per axis (they raised a
    TypeError from inside the row): each is the convolution of the input with those zeros
    added by hand, "same" keeps the input's size, and the gradients pass central differences."""
    x, w, x1, w1 = A(2, 3, 7, 6), A(4, 3, 3, 2), A(2, 3, 9), A(4, 3, 3)
    kw2, kw1 = dict(dilation=(2, 1)), dict(dilation=2)
    got = to_numpy(nn.conv2d(xp.asarray(x), xp.asarray(w), padding=p2, **kw2))
    padded = np.pad(x, ((0, 0), (0, 0), *sides2))
    np.testing.assert_allclose(
        got, to_numpy(nn.conv2d(xp.asarray(padded), xp.asarray(w), **kw2)), rtol=1e-12
    )
    got1 = to_numpy(nn.conv1d(xp.asarray(x1), xp.asarray(w1), padding=p1, **kw1))
    padded1 = np.pad(x1, ((0, 0), (0, 0), *sides1))
    np.testing.assert_allclose(
        got1, to_numpy(nn.conv1d(xp.asarray(padded1), xp.asarray(w1), **kw1)), rtol=1e-12
    )
    if p2 == "same":
        assert got.shape[2:] == x.shape[2:] and got1.shape[2:] == x1.shape[2:]
    check_vjp(xp, lambda x, w: nn.conv2d(x, w, padding=p2, **kw2), x, w)
    check_vjp(xp, lambda x, w: nn.conv1d(x, w, padding=p1, **kw1), x1, w1)


def test_same_padding_matches_torch():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    xp = pg.namespace(np)
    x, w = A(2, 4, 7, 6), A(6, 2, 4, 3)  # an even kernel: the odd zero goes after
    np.testing.assert_allclose(
        to_numpy(
            nn.conv2d(xp.asarray(x), xp.asarray(w), padding="same", dilation=(1, 2), groups=2)
        ),
        F.conv2d(
            torch.tensor(x), torch.tensor(w), padding="same", dilation=(1, 2), groups=2
        ).numpy(),
        rtol=1e-10,
        atol=1e-12,
    )


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(padding="same", stride=2), r"conv2d: padding='same' needs stride 1"),
        (dict(padding="full"), r"conv2d: padding must be 'same', 'valid' or numbers; got 'full'"),
        (dict(padding=-1), r"conv2d: padding must be a non-negative int or 2 of them; got -1"),
        (dict(padding=(1,)), r"padding must be a non-negative int or 2 of them; got \(1,\)"),
        (dict(stride=0), r"conv2d: stride must be a positive int or 2 of them; got 0"),
        (dict(dilation=(1, 0)), r"conv2d: dilation must be a positive int or 2 of them"),
        (dict(stride=(2,)), r"conv2d: stride must be a positive int or 2 of them; got \(2,\)"),
    ],
    ids=str,
)
def test_convolution_arguments_out_of_range_are_named(kw, message):
    xp = pg.namespace(np)
    with pytest.raises(ValueError, match=message):
        nn.conv2d(xp.ones((1, 2, 5, 5)), xp.ones((3, 2, 2, 2)), **kw)


def test_initializers(xp):
    k = random.key(0)
    w = to_numpy(nn.glorot_uniform(k, (300, 200), xp=xp))
    limit = np.sqrt(6 / 500)
    assert w.min() >= -limit and w.max() <= limit and abs(w.std() - limit / np.sqrt(3)) < 0.005
    assert abs(to_numpy(nn.he_normal(k, (400, 300), xp=xp)).std() - np.sqrt(2 / 400)) < 0.005
    conv = to_numpy(nn.glorot_normal(k, (16, 8, 3, 3), xp=xp))
    assert abs(conv.std() - np.sqrt(2 / (8 * 9 + 16 * 9))) < 0.01
    assert to_numpy(nn.he_uniform(k, (50, 5), xp=xp)).max() <= np.sqrt(6 / 50)
    assert nn.normal(k, (3,), 0.5, xp=xp).shape == (3,)
    assert nn.uniform(k, (3,), xp=xp, dtype=xp.float32).dtype == xp.float32


@dataclasses.dataclass
class MLP(nn.Module):
    layers: list
    activation: str = nn.static("tanh")

    def __call__(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = getattr(nn, self.activation)(x)
        return x


def test_module_is_a_pytree(xp):
    k1, k2 = random.split(random.key(0))
    model = MLP([nn.Linear.init(k1, 3, 5, xp=xp), nn.Linear.init(k2, 5, 2, xp=xp)], "silu")
    assert list(model.named_parameters()) == [
        "layers.0.w",
        "layers.0.b",
        "layers.1.w",
        "layers.1.b",
    ]
    assert model.num_parameters() == 3 * 5 + 5 + 5 * 2 + 2
    x = xp.asarray(A(4, 3))
    g = pg.grad(lambda m: xp.sum(m(x) ** 2))(model)
    assert isinstance(g, MLP) and g.activation == "silu" and g.layers[0].w.shape == (3, 5)
    leaves, td = pg.tree_flatten(model)
    assert len(leaves) == 4 and pg.tree_unflatten(td, leaves).activation == "silu"


def test_class_indices_given_as_floats_are_refused_not_read_as_probabilities(xp):
    """Labels read from a file or a DataFrame often come as floats: as class probabilities of
    shape (n,) against logits (n, C) they broadcast along the classes where n == C, a wrong loss
    (4.13 for 0.99) without an error. Real labels need the logits' axes; those of the rows'
    shape are named as class indices given as floats."""
    logits = xp.asarray(A(3, 3))
    as_floats = xp.asarray(np.array([0.0, 2.0, 1.0]))
    with pytest.raises(
        ValueError,
        match=r"got shape \(3,\); these look like class indices: give "
        r"them as integers, xp.astype\(labels, xp.int64\)",
    ):
        nn.cross_entropy(logits, as_floats)
    as_ints = nn.cross_entropy(logits, xp.astype(as_floats, xp.int64))
    onehot = xp.asarray(np.eye(3)[[0, 2, 1]])
    assert float(nn.cross_entropy(logits, onehot)) == pytest.approx(float(as_ints))
    # probabilities with the logits' axes, broadcasting along those of size 1, still do
    uniform = xp.asarray(np.full((1, 3), 1 / 3))
    assert float(nn.cross_entropy(logits, uniform)) == pytest.approx(
        float(nn.cross_entropy(logits, xp.asarray(np.full((3, 3), 1 / 3))))
    )


def test_norm_weights_of_the_normalized_axes_shape_go_on_those_axes(xp):
    """A weight and bias of the normalized axes' shape (as documented) are placed on those
    axes, not broadcast from the right: (3, 5) for axes (1, 3) of a (2, 3, 4, 5) input, (3,)
    for rms_norm's axis 1; gradients against finite differences."""
    x, w, b = A(2, 3, 4, 5), A(3, 5), A(3, 5)
    m, v = x.mean(axis=(1, 3), keepdims=True), x.var(axis=(1, 3), keepdims=True)
    want = (x - m) / np.sqrt(v + 1e-5) * w[:, None] + b[:, None]
    got = nn.layer_norm(xp.asarray(x), xp.asarray(w), xp.asarray(b), axis=(1, 3))
    np.testing.assert_allclose(to_numpy(got), want, rtol=1e-10)
    check_vjp(xp, lambda x, w, b: nn.layer_norm(x, w, b, axis=(1, 3)), x, w, b)
    w1 = A(3)
    want = x / np.sqrt((x**2).mean(axis=1, keepdims=True) + 1e-6) * w1[:, None, None]
    got = nn.rms_norm(xp.asarray(x), xp.asarray(w1), axis=1)
    np.testing.assert_allclose(to_numpy(got), want, rtol=1e-10)
    check_vjp(xp, lambda x, w: nn.rms_norm(x, w, axis=1), x, w1)


def test_rows_over_an_empty_batch_give_zero_gradients(xp):
    """No example (a batch of 0 rows), or no output channel: every fused row runs, and each
    parameter's gradient is zeros of its shape (the convolutions' weight once had no block to
    sum); logsumexp over an empty axis is -inf (scipy's)."""
    from pycograd_xp import special

    def a(*s):
        return xp.asarray(A(*s)) if 0 not in s else xp.zeros(s, dtype=xp.float64)

    rows = [
        (lambda x, w, b: nn.conv2d(x, w, b, padding=1), (a(0, 2, 5, 5), a(3, 2, 3, 3), a(3))),
        (lambda x, w: nn.conv2d(x, w, groups=2, stride=2), (a(0, 4, 5, 5), a(4, 2, 3, 3))),
        (lambda x, w: nn.conv1d(x, w), (a(0, 2, 7), a(3, 2, 3))),
        (lambda x: nn.max_pool2d(x, 2), (a(0, 2, 4, 4),)),
        (lambda x, w, b: nn.layer_norm(x, w, b), (a(0, 5), a(5), a(5))),
        (lambda x, w: nn.rms_norm(x, w), (a(0, 5), a(5))),
        (lambda q: nn.scaled_dot_product_attention(q, q, q, is_causal=True), (a(0, 2, 3, 4),)),
        (lambda x, w, b: nn.linear(x, w, b), (a(0, 3), a(3, 2), a(2))),
        (lambda x: nn.logsumexp(x, axis=0), (a(0, 3),)),
        # no output channel (a reshape with -1 could not solve for the other axis)
        (lambda x, w, b: nn.conv2d(x, w, b), (a(2, 3, 5, 5), a(0, 3, 3, 3), a(0))),
        (lambda x, w: nn.conv1d(x, w, stride=2), (a(2, 3, 7), a(0, 3, 3))),
    ]
    for f, args in rows:
        gs = pg.grad(lambda *t, f=f: xp.sum(f(*t)), argnums=tuple(range(len(args))))(*args)
        for g, arg in zip(gs, args, strict=True):
            assert tuple(g.shape) == tuple(arg.shape) and not np.any(to_numpy(g))
    z = xp.zeros((0, 3), dtype=xp.float64)
    for lse in (nn.logsumexp, special.logsumexp):
        assert to_numpy(lse(z, axis=0)).tolist() == [-np.inf] * 3


def test_attention_with_no_head_or_no_feature(xp):
    """No head (H = 0): the block plan divided by it (ZeroDivisionError); no feature (d = 0):
    1 / sqrt(d) divided by zero. Now an empty result, and a clear error naming scale= (with
    which every score is 0 and each output row is the mean of v)."""
    q0 = xp.zeros((1, 80, 0, 3), dtype=xp.float64)
    out = xp._attention(q0, q0, xp.zeros((1, 80, 0, 2), dtype=xp.float64), is_causal=True)[0]
    assert tuple(out.shape) == (1, 80, 0, 2)
    g = pg.grad(lambda q: xp.sum(xp._attention(q, q, q, is_causal=True)[0]))(q0)
    assert tuple(g.shape) == (1, 80, 0, 3)
    qd, kd, v = xp.ones((2, 3, 1, 0)), xp.ones((2, 5, 1, 0)), xp.asarray(A(2, 5, 1, 4))
    with pytest.raises(ValueError, match=r"no features \(d = 0\).*scale="):
        xp._attention(qd, kd, v)
    got = xp._attention(qd, kd, v, scale=1.0)[0]
    want = np.broadcast_to(to_numpy(v).mean(axis=1, keepdims=True), (2, 3, 1, 4))
    np.testing.assert_allclose(to_numpy(got), want, rtol=1e-12)
