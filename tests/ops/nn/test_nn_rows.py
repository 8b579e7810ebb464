"""The convolution and pooling rows behind pycograd_xp.nn (pycograd_xp.ops.nn): values
against a direct loop and against the composed version they replaced, on namespace(numpy) and
namespace(array_api_strict); max-pool ties; the private surface; Cubed; the memory projection of
a CNN step. Gradients, JVPs, batching and per-row shape/memory rules are swept by the
conformance suites (``conformance/grad_cases.py``, ``_nn_cases``)."""

from __future__ import annotations

import dataclasses
import itertools

import array_api_strict
import numpy as np
import pytest

import pycograd_xp as pg
from conformance import composed_nn
from pycograd_xp import memory, nn

BACKENDS = [np, array_api_strict]
rng = np.random.default_rng(7)


def _np(a):
    return np.asarray(pg.unwrap(a))


def loop_conv2d(x, w, stride, padding, dilation, groups):
    """A direct loop over every output element (float64)."""
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp_ = np.zeros((n, c, h + 2 * ph, wd + 2 * pw))
    xp_[:, :, ph : ph + h, pw : pw + wd] = x
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    y = np.zeros((n, o, oh, ow))
    og = o // groups
    for b, oc, i, j in itertools.product(range(n), range(o), range(oh), range(ow)):
        g = oc // og
        for ci, a, e in itertools.product(range(cg), range(kh), range(kw)):
            y[b, oc, i, j] += (
                w[oc, ci, a, e] * xp_[b, g * cg + ci, i * sh + a * dh, j * sw + e * dw]
            )
    return y


def loop_pool2d(x, kernel, stride, padding, how):
    (kh, kw), (sh, sw), (ph, pw) = kernel, stride, padding
    fill = -np.inf if how == "max" else 0.0
    xp_ = np.full(x.shape[:-2] + (x.shape[-2] + 2 * ph, x.shape[-1] + 2 * pw), fill)
    xp_[..., ph : ph + x.shape[-2], pw : pw + x.shape[-1]] = x
    oh = (xp_.shape[-2] - kh) // sh + 1
    ow = (xp_.shape[-1] - kw) // sw + 1
    y = np.zeros(x.shape[:-2] + (oh, ow))
    for i, j in itertools.product(range(oh), range(ow)):
        win = xp_[..., i * sh : i * sh + kh, j * sw : j * sw + kw]
        y[..., i, j] = win.max(axis=(-2, -1)) if how == "max" else win.mean(axis=(-2, -1))
    return y


CONVS = [  # x shape, w shape, stride, padding, dilation, groups
    ((2, 3, 7, 8), (4, 3, 3, 2), (2, 1), (1, 0), (1, 2), 1),
    ((1, 2, 5, 5), (3, 2, 3, 3), (1, 1), (0, 0), (1, 1), 1),
    ((2, 4, 6, 7), (6, 2, 2, 3), (3, 2), (2, 1), (1, 1), 2),
    ((1, 3, 9, 6), (2, 3, 1, 1), (2, 2), (0, 0), (1, 1), 1),
    ((2, 4, 8, 8), (4, 1, 3, 3), (1, 1), (1, 1), (2, 2), 4),
]


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.__name__)
@pytest.mark.parametrize("xs, ws, s, p, d, g", CONVS)
def test_conv2d_matches_a_loop_and_the_composed_version(backend, xs, ws, s, p, d, g):
    xp = pg.namespace(backend)
    x, w, b = rng.standard_normal(xs), rng.standard_normal(ws), rng.standard_normal(ws[0])
    got = nn.conv2d(
        xp.asarray(x), xp.asarray(w), xp.asarray(b), stride=s, padding=p, dilation=d, groups=g
    )
    want = loop_conv2d(x, w, s, p, d, g) + b[:, None, None]
    np.testing.assert_allclose(_np(got), want, rtol=1e-12, atol=1e-12)
    if g == 1:  # the composed version had no groups
        old = composed_nn.conv2d(
            xp.asarray(x), xp.asarray(w), xp.asarray(b), stride=s, padding=p, dilation=d
        )
        np.testing.assert_allclose(_np(got), _np(old), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.__name__)
def test_conv1d_is_conv2d_on_a_row(backend):
    xp = pg.namespace(backend)
    x, w = rng.standard_normal((2, 4, 11)), rng.standard_normal((6, 2, 3))
    got = nn.conv1d(xp.asarray(x), xp.asarray(w), stride=2, padding=1, dilation=2, groups=2)
    want = loop_conv2d(x[:, :, None, :], w[:, :, None, :], (1, 2), (0, 1), (1, 2), 2)[:, :, 0]
    np.testing.assert_allclose(_np(got), want, rtol=1e-12, atol=1e-12)


POOLS = [
    ((2, 3, 6, 6), 2, None, 0),
    ((1, 2, 7, 5), 3, 2, 1),
    ((2, 1, 5, 6), (2, 3), 1, 0),
    ((3, 1, 2, 5, 5), 2, (1, 2), (1, 0)),
]


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.__name__)
@pytest.mark.parametrize("how", ["max", "avg"])
@pytest.mark.parametrize("xs, k, s, p", POOLS)
def test_pools_match_a_loop_and_the_composed_version(backend, how, xs, k, s, p):
    xp = pg.namespace(backend)
    x = rng.standard_normal(xs)
    pair = lambda v: v if isinstance(v, tuple) else (v, v)
    f = getattr(nn, f"{how}_pool2d")
    got = _np(f(xp.asarray(x), k, s, p))
    want = loop_pool2d(x, pair(k), pair(k if s is None else s), pair(p), how)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    if len(xs) == 4:
        old = _np(getattr(composed_nn, f"{how}_pool2d")(xp.asarray(x), k, s, p))
        np.testing.assert_allclose(got, old, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.__name__)
def test_max_pool_ties_send_the_gradient_to_the_first_maximum(backend):
    xp = pg.namespace(backend)
    x = xp.asarray(np.array([[[[1.0, 3.0, 2.0, 2.0], [3.0, 0.0, 2.0, 2.0]]]]))
    g = pg.grad(lambda x: xp.sum(nn.max_pool2d(x, 2)))(x)
    want = np.array([[[[0.0, 1.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]]]])  # as PyTorch: row-major
    np.testing.assert_array_equal(_np(g), want)


def test_rows_stay_off_the_standard_surface():
    xp = pg.namespace(np)
    public = {n for n in dir(xp) if not n.startswith("_")}
    assert not public & {"conv1d", "conv2d", "max_pool2d", "avg_pool2d", "nn"}
    assert callable(xp._conv2d) and callable(xp._max_pool2d)


def test_shape_errors_name_the_function():
    xp = pg.namespace(np)
    x = xp.ones((1, 3, 4, 4))
    with pytest.raises(ValueError, match=r"conv2d\(\): input \(1, 3, 4, 4\) and weight"):
        nn.conv2d(x, xp.ones((2, 2, 3, 3)))
    with pytest.raises(ValueError, match=r"conv2d\(\): the window \(5, 5\).*larger"):
        nn.conv2d(x, xp.ones((2, 3, 5, 5)))
    with pytest.raises(ValueError, match=r"max_pool2d\(\): the window"):
        nn.max_pool2d(x, 5)
    with pytest.raises(ValueError, match=r"conv2d\(\): the window \(0, 3\) has an axis of size 0"):
        nn.conv2d(x, xp.ones((2, 3, 0, 3)))
    with pytest.raises(ValueError, match=r"conv1d\(\): the window \(0,\) has an axis of size 0"):
        nn.conv1d(xp.ones((1, 3, 4)), xp.ones((2, 3, 0)))


def test_raw_numpy_arrays_run_the_rows_impl():
    x, w = rng.standard_normal((1, 2, 5, 5)), rng.standard_normal((3, 2, 3, 3))
    np.testing.assert_allclose(
        np.asarray(nn.conv2d(x, w, padding=1)),
        loop_conv2d(x, w, (1, 1), (1, 1), (1, 1), 1),
        rtol=1e-12,
    )


def test_cubed_values_match_numpy():
    cubed = pytest.importorskip("cubed")
    xc = pg.namespace(cubed)
    x, w = rng.standard_normal((2, 4, 6, 6)), rng.standard_normal((4, 2, 3, 3))
    y = nn.max_pool2d(nn.conv2d(xc.asarray(x), xc.asarray(w), padding=1, groups=2), 2)
    want = loop_pool2d(loop_conv2d(x, w, (1, 1), (1, 1), (1, 1), 2), (2, 2), (2, 2), (0, 0), "max")
    np.testing.assert_allclose(np.asarray(pg.unwrap(y).compute()), want, rtol=1e-12)


@pytest.mark.parametrize("chunks", [(1, 3), (2, 2), (3, 5), (1, 1)])
def test_a_cubed_max_pool_over_whole_rows_takes_any_chunking(chunks):
    """A max-pool whose columns' windows tile reduces whole rows first, by strided slices of
    the padded input; Cubed 0.27 refuses a strided slice that also shortens an axis longer than
    one chunk of its result ("Chunks (2, 5) must be a multiple of array's chunks (1, 3)"), so
    they go in two there, as the other windows' do. Found by the nn cases' random chunkings."""
    pytest.importorskip("cubed")
    from conformance.cubed_oracle import compare

    x = rng.standard_normal((3, 5))
    compare(
        lambda xp: lambda x: nn.max_pool2d(x, (2, 3), None, (1, 0)), [x], "random", chunks=[chunks]
    )


@pytest.mark.slow
def test_cubed_gradients_match_numpy():
    cubed = pytest.importorskip("cubed")
    xc, xn = pg.namespace(cubed), pg.namespace(np)
    x, w = rng.standard_normal((2, 4, 7, 6)), rng.standard_normal((4, 2, 3, 3))

    def loss(ns, x, w):
        h = nn.conv2d(x, w, stride=2, padding=1, groups=2)
        return ns.sum(nn.max_pool2d(h, 2) ** 2) + ns.sum(nn.avg_pool2d(x, 3, 2, 1))

    gc = pg.grad(lambda x, w: loss(xc, x, w), argnums=(0, 1))(xc.asarray(x), xc.asarray(w))
    gn = pg.grad(lambda x, w: loss(xn, x, w), argnums=(0, 1))(xn.asarray(x), xn.asarray(w))
    for a, b in zip(gc, gn, strict=True):
        np.testing.assert_allclose(np.asarray(pg.unwrap(a).compute()), _np(b), rtol=1e-10)


@pytest.mark.parametrize(
    "n, side, c1, c2, classes, pad1, tight",
    [
        (8, 12, 4, 8, 3, 1, False),  # small: the projection's fixed overhead dominates
        # relu, its gradient and the max-pool masks above SELECT_MIN (NumPy's bitwise where), and
        # the input gradient of the second convolution as col2im: bounded tightly
        (16, 28, 16, 32, 10, 0, True),
    ],
)
def test_a_cnn_step_is_projected_and_the_projection_bounds_it(
    n, side, c1, c2, classes, pad1, tight
):
    xp = pg.namespace(np)
    x = xp.asarray(rng.standard_normal((n, 1, side, side)).astype(np.float32))
    flat = c2 * (((side + 2 * pad1 - 2) // 2 - 2) // 2) ** 2
    p = {
        "w1": xp.asarray(rng.standard_normal((c1, 1, 3, 3)).astype(np.float32)),
        "w2": xp.asarray(rng.standard_normal((c2, c1, 3, 3)).astype(np.float32)),
        "w3": xp.asarray(rng.standard_normal((flat, classes)).astype(np.float32)),
    }
    y = xp.asarray(np.arange(n) % classes)

    def f(p):
        h = nn.max_pool2d(nn.relu(nn.conv2d(x, p["w1"], padding=pad1)), 2)
        h = nn.max_pool2d(nn.relu(nn.conv2d(h, p["w2"])), 2)
        return nn.cross_entropy(xp.reshape(h, (n, -1)) @ p["w3"], y)

    proj, meas = memory.project(f, p), memory.measure(f, p)
    assert any(r.op == "_conv2d" for r in proj.rows)
    assert meas.peak_bytes <= proj.peak_bytes, (meas, proj)
    if tight:
        assert meas.peak_bytes <= proj.traced_peak_bytes, (meas, proj)
        assert meas.peak_bytes / proj.traced_peak_bytes >= 0.8


@pytest.mark.parametrize(
    "dtype", [np.float32, np.float64, np.float16, np.int16, np.int64, np.complex64, np.bool_]
)
def test_numpy_select_is_where_bit_for_bit(dtype):
    from pycograd_xp.namespace._backend import _numpy_select

    r = np.random.default_rng(3)
    x = (r.standard_normal((70, 80)) * 5).astype(dtype)
    v = (r.standard_normal(80) * 5).astype(dtype)
    if np.issubdtype(dtype, np.floating):
        x[0, :4] = [-0.0, np.nan, np.inf, -np.inf]
    c = r.random((70, 80)) > 0.5
    for a, b in (
        (x, v),
        (v, x),
        (x, 0),
        (0, x),
        (x, 0.0),
        (-0.0, x),
        (x, np.float64(1.5)),
        (x.T.copy().T, v),
        (x[:, ::2], v[::2]),
    ):
        cc = c[:, : np.shape(a if np.ndim(a) == 2 else b)[1]]
        got, want = _numpy_select(cc, a, b), np.where(cc, a, b)
        assert got.dtype == want.dtype and got.shape == want.shape and got.base is None
        assert got.strides == want.strides
        assert np.array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.__name__)
@pytest.mark.parametrize(
    "xs, ws, s, p, d, g", CONVS + [((5, 3, 6, 7), (8, 3, 3, 3), (1, 1), (1, 1), (1, 1), 1)]
)
def test_conv_blocks_over_the_batch_give_the_same_values_and_gradients(
    monkeypatch, backend, xs, ws, s, p, d, g
):
    """The forward, col2im and weight gradient loop over blocks of the batch (their columns
    within BLOCK_BYTES); blocks of one or two examples give what one block gives."""
    from pycograd_xp.ops.nn import windows as rows

    xp = pg.namespace(backend)
    x, w = xp.asarray(rng.standard_normal(xs)), xp.asarray(rng.standard_normal(ws))
    pool = (lambda h: nn.max_pool2d(h, 2)) if min(xs[2:]) >= 6 else (lambda h: h)

    def f(x, w):
        return xp.sum(
            pool(nn.relu(nn.conv2d(x, w, stride=s, padding=p, dilation=d, groups=g))) ** 2
        )

    step = pg.value_and_grad(f, argnums=(0, 1))
    want = step(x, w)
    monkeypatch.setattr(rows, "BLOCK_BYTES", 1)
    assert len(rows.blocks_of(xs[0], 8)) == xs[0]
    got = step(x, w)
    np.testing.assert_allclose(_np(got[0]), _np(want[0]), rtol=1e-12)
    for a, b in zip(got[1], want[1], strict=True):
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-12, atol=1e-12)
    if backend is np:  # the projection follows the blocks
        assert (
            memory.measure(f, x, w, argnums=(0, 1)).peak_bytes
            <= memory.project(f, x, w, argnums=(0, 1)).peak_bytes
        )


@pytest.mark.parametrize("backend", BACKENDS)
def test_relu_row_is_where_bit_for_bit_with_gradient_0_at_0(backend):
    # where(x > 0, x, 0) as before the row: 0 at NaN, +0 at -0; gradient 0 at 0 (PyTorch's
    # threshold_backward too; PyTorch passes g at NaN, we keep 0)
    xp = pg.namespace(backend)
    v = np.array([0.0, -0.0, 1.5, -1.5, np.nan, np.inf, -np.inf, 1e-45], np.float32)
    v = np.concatenate([v, rng.standard_normal(5000).astype(np.float32)])  # the NumPy blend too
    x = xp.asarray(v)
    want = np.where(v > 0, v, np.float32(0))
    np.testing.assert_array_equal(_np(nn.relu(x)).view(np.int32), want.view(np.int32))
    g = pg.grad(lambda x: xp.sum(nn.relu(x)))(x)
    np.testing.assert_array_equal(_np(g), (v > 0).astype(np.float32))


def test_relu_keeps_no_mask_on_the_tape():
    xp = pg.namespace(np)
    w = xp.asarray(rng.standard_normal((64, 64)).astype(np.float32))
    x = xp.asarray(rng.standard_normal((64, 64)).astype(np.float32))
    proj = memory.project(lambda w: xp.sum(nn.relu(x @ w)), w)
    assert any(r.op == "_relu" for r in proj.rows)
    assert not any(r.op == "greater" and r.phase == "forward" for r in proj.rows)


# -- relu's VJP writes into a cotangent only the backward pass holds ------------------------------


@pytest.fixture
def owned_flags():
    """The ``owned`` flag the tape hands relu's rule, per call (the wrapper adds a frame after
    the tape's check, so it changes nothing)."""
    from pycograd_xp.ops import REGISTRY

    prim, seen = REGISTRY["_relu"], []
    rule = prim.vjp

    def spy(ns, g, out, x, /, **kw):
        seen.append(kw.get("owned"))
        return rule(ns, g, out, x, **kw)

    with prim.replaced(vjp=spy):
        yield seen


def test_a_fresh_cotangent_is_owned_and_written_in_place(owned_flags):
    """``relu(x) * c``: the product's VJP makes relu's cotangent, which nothing else holds.
    If a change to the tape's references (or to CPython's counts) switched ownership off, this
    fails instead of the memory silently growing."""
    seen = owned_flags
    xp = pg.namespace(np)
    x = xp.asarray(rng.standard_normal((8, 3, 5, 5)))
    c = xp.asarray(rng.standard_normal((8, 3, 5, 5)))
    g = pg.grad(lambda x: xp.sum(nn.relu(x) * c))(x)
    assert seen == [True]
    np.testing.assert_array_equal(_np(g), np.where(_np(x) > 0, _np(c), 0.0))


def test_a_shared_or_caller_held_cotangent_is_never_written(owned_flags):
    """Two relus handed the same cotangent by a sum: the first runs while the other still
    holds it (not owned), the second once nothing else does (owned); a cotangent the caller
    passes to a vjp function is never owned, so never written. The gradients are select's."""
    seen = owned_flags
    xp = pg.namespace(np)
    x = xp.asarray(rng.standard_normal((6, 4)))
    y = xp.asarray(rng.standard_normal((6, 4)))
    c = xp.asarray(rng.standard_normal((6, 4)))
    gx, gy = pg.grad(lambda x, y: xp.sum((nn.relu(x) + nn.relu(y)) * c), argnums=(0, 1))(x, y)
    assert seen == [False, True]
    np.testing.assert_array_equal(_np(gx), np.where(_np(x) > 0, _np(c), 0.0))
    np.testing.assert_array_equal(_np(gy), np.where(_np(y) > 0, _np(c), 0.0))
    seen.clear()
    _, vjp_fn = pg.vjp(nn.relu, x)
    ct = rng.standard_normal((6, 4))
    kept = ct.copy()
    (gx,) = vjp_fn(xp.asarray(ct))
    np.testing.assert_array_equal(ct, kept)
    np.testing.assert_array_equal(_np(gx), np.where(_np(x) > 0, kept, 0.0))
    assert seen == [False]


def test_relu_in_place_is_select_bit_for_bit_over_blocks(monkeypatch):
    """The owned path, over several blocks of the batch: NaN and -0 in the cotangent go
    through where relu passes it, 0 elsewhere, as the whole-array select."""
    from pycograd_xp.ops.nn import windows as rows
    from pycograd_xp.ops.nn import windows as rules

    monkeypatch.setattr(rules, "MASK_BLOCK_BYTES", 64)  # blocks of one or two examples
    xp = pg.namespace(np)
    x = rng.standard_normal((7, 3, 4))
    x[0, 0, :2] = (0.0, -0.0)
    c = rng.standard_normal((7, 3, 4))
    c[1, 1, :3] = (np.nan, -0.0, np.inf)
    assert len(rows.blocks_of(7, 3 * 4 * 8, 64)) == 7
    g = pg.grad(lambda x: xp.sum(nn.relu(x) * xp.asarray(c)))(xp.asarray(x))
    want = np.where(x > 0, c, 0.0)
    np.testing.assert_array_equal(_np(g).view(np.int64), want.view(np.int64))


def test_select_writes_into_out_bit_for_bit():
    """The select capability's ``out``: a strided view, and ``where(c, out, 0)`` in place."""
    from pycograd_xp.namespace._backend import _numpy_select

    a = rng.standard_normal((64, 80)).astype(np.float32)
    a[0, :3] = (np.nan, -0.0, np.inf)
    cond = rng.random((64, 80)) > 0.5
    dst = np.full((64, 160), 7.0, np.float32)
    _numpy_select(cond, a, 0, out=dst[:, ::2])
    np.testing.assert_array_equal(
        dst[:, ::2].view(np.int32), np.where(cond, a, np.float32(0)).view(np.int32)
    )
    assert (dst[:, 1::2] == 7.0).all()
    b = a.copy()
    assert _numpy_select(cond, b, 0, out=b) is b
    np.testing.assert_array_equal(b.view(np.int32), np.where(cond, a, np.float32(0)).view(np.int32))
    small = np.zeros(3)
    _numpy_select(np.array([True, False, True]), np.arange(3.0), 5.0, out=small)
    np.testing.assert_array_equal(small, [0.0, 5.0, 2.0])


def test_max_pool_backward_over_blocks_of_the_batch_is_one_blocks(monkeypatch):
    """Max-pool's in-place cotangent, block by block of the batch (blocks of one example):
    the same bits as one block, ties (relu's zeros) and NaN windows included, tiled and
    overlapping windows."""
    from pycograd_xp.ops.nn import windows as rules

    xp = pg.namespace(np)
    x = np.maximum(rng.standard_normal((5, 3, 8, 8)), 0.0)  # many tied zero windows
    x[0, 0, 0, 0] = np.nan
    c = rng.standard_normal((5, 3, 4, 4))
    c3 = rng.standard_normal((5, 3, 3, 3))

    def grads():
        return [
            _np(pg.grad(lambda x: xp.sum(nn.max_pool2d(x, 2) * xp.asarray(c)))(xp.asarray(x))),
            _np(
                pg.grad(lambda x: xp.sum(nn.max_pool2d(x, 3, stride=2) * xp.asarray(c3)))(
                    xp.asarray(x)
                )
            ),
        ]

    want = grads()
    monkeypatch.setattr(rules, "MASK_BLOCK_BYTES", 1)
    for a, b in zip(grads(), want, strict=True):
        np.testing.assert_array_equal(a.view(np.int64), b.view(np.int64))


# -- the convolution's NumPy paths: flat grid, bias in the product, narrow columns ----------------

PATHS = {
    "flat": {"FLAT_BELOW": 10**6, "BIAS_ROW_BELOW": 0},
    "bias row": {"FLAT_BELOW": 0, "BIAS_ROW_BELOW": 10**6},
    "narrow": {"FLAT_BELOW": 0, "BIAS_ROW_BELOW": 0},
}


@pytest.mark.parametrize(
    "xs, ws, p, d, dtype",
    [
        ((3, 2, 7, 6), (4, 2, 3, 3), 0, 1, np.float64),
        ((2, 3, 8, 9), (5, 3, 2, 3), 1, (2, 1), np.float64),  # padding, dilation, uneven kernel
        ((2, 1, 9, 9), (3, 1, 3, 3), 2, 2, np.float64),
        ((5, 16, 13, 13), (32, 16, 3, 3), 0, 1, np.float32),  # the CNN's second layer
    ],
)
def test_the_convolution_paths_give_the_same_values_gradients_and_bounds(
    monkeypatch, xs, ws, p, d, dtype
):
    """The flat-grid columns (short rows, stride 1), the bias in the product (few channels)
    and the narrow columns: the same values and gradients (x, w and b), blocks of one example
    included, and each one's measured peak within its projection."""
    from pycograd_xp.ops.nn import windows as rows

    xp = pg.namespace(np)
    args = [xp.asarray(rng.standard_normal(s).astype(dtype)) for s in (xs, ws, ws[:1])]

    def f(x, w, b):
        return xp.sum(nn.relu(nn.conv2d(x, w, b, padding=p, dilation=d)) ** 2)

    step = pg.value_and_grad(f, argnums=(0, 1, 2))
    got = {}
    for path, limits in PATHS.items():
        for name, v in limits.items():
            monkeypatch.setattr(rows, name, v)
        pads = ((p, p), (p, p))
        out = rows.out_sizes(
            "conv2d", xs[2:], ws[2:], (1, 1), pads, (d, d) if isinstance(d, int) else tuple(d)
        )
        assert rows.flat_rows(ws[2:], (1, 1), pads, out, 1) == (path == "flat")
        assert rows.bias_row(xs[1], 1, args[2]) == (path == "bias row")
        for block in (None, 1):
            if block is not None:
                monkeypatch.setattr(rows, "BLOCK_BYTES", block)
            got[path, block] = step(*args)
        monkeypatch.undo()
        assert (
            memory.measure(f, *args, argnums=(0, 1, 2)).peak_bytes
            <= memory.project(f, *args, argnums=(0, 1, 2)).peak_bytes
        )
    eps = 1e-12 if dtype == np.float64 else 1e-5  # sums in another order: relative to the size
    want = got["narrow", None]
    for (_path, _block), (value, grads) in got.items():
        for a, b in zip((value, *grads), (want[0], *want[1]), strict=True):
            np.testing.assert_allclose(_np(a), _np(b), rtol=eps, atol=eps * np.abs(_np(b)).max())


def test_an_infinite_input_reaches_only_the_weight_gradients_whose_windows_read_it(monkeypatch):
    """A product over more positions than the windows (the flat grid's wrapped columns,
    col2im's zero tail) multiplies zeros with inputs: ``0 * inf`` would make a weight
    gradient NaN where no window of its offset reads the infinity. On every path the weight
    gradient is non-finite exactly where a direct sum over the windows is."""
    from pycograd_xp.ops.nn import windows as rows

    xp = pg.namespace(np)
    x = rng.standard_normal((2, 2, 6, 6))
    x[0, 1, 2, 5], x[1, 0, 3, 0], x[1, 1, 5, 2] = np.inf, -np.inf, np.inf  # borders
    w = xp.asarray(rng.standard_normal((3, 2, 3, 3)))
    # g = 1: the weight gradient at (o, c, i, j) sums x[:, c] over offset (i, j)'s windows
    want = np.stack(
        [x[:, :, i : i + 4, j : j + 4].sum(axis=(0, 2, 3)) for i in range(3) for j in range(3)],
        axis=-1,
    ).reshape(2, 3, 3)
    for path in PATHS.values():
        for name, v in path.items():
            monkeypatch.setattr(rows, name, v)
        got = _np(pg.grad(lambda w: xp.sum(nn.conv2d(xp.asarray(x), w)))(w))
        np.testing.assert_array_equal(
            np.isfinite(got), np.isfinite(want[None]) & np.ones((3, 1, 1, 1), bool)
        )
    assert not rows.flat_rows((3, 3), (1, 1), ((0, -1), (0, 0)), (4, 4), 1)  # no crops


@pytest.mark.parametrize(
    "xs, ws, p, d, g",
    [
        ((3, 4, 9, 8), (6, 4, 3, 3), 1, 1, 1),
        ((2, 4, 8, 9), (6, 2, 2, 3), (2, 1), (1, 2), 2),
        ((5, 3, 6, 7), (8, 3, 3, 3), 1, 1, 1),
    ],
)
def test_col2im_into_a_buffer_is_the_product_over_the_whole_image(monkeypatch, xs, ws, p, d, g):
    """With ``matmul_into`` (NumPy) col2im's product covers only the output rows, written into
    a buffer whose tail is zero; without it, the product over ``g`` padded to the whole image.
    The same input gradient, and the projection bounds both."""
    import dataclasses

    from pycograd_xp.namespace import _backend

    xp = pg.namespace(np)
    x, w = xp.asarray(rng.standard_normal(xs)), xp.asarray(rng.standard_normal(ws))

    def f(x, w):
        return xp.sum(nn.conv2d(x, w, padding=p, dilation=d, groups=g) ** 2)

    runs = []
    for into in (True, False):
        if not into:
            raw = xp._backend
            monkeypatch.setitem(
                _backend._BY_XP, id(raw.xp), dataclasses.replace(raw, matmul_into=None)
            )
        runs.append(_np(pg.grad(f)(x, w)))
        assert memory.measure(f, x, w).peak_bytes <= memory.project(f, x, w).peak_bytes
    np.testing.assert_allclose(runs[0], runs[1], rtol=1e-12, atol=1e-12)


def test_matmul_into_refuses_an_out_of_another_shape():
    from pycograd_xp._abstract import AbstractArray
    from pycograd_xp.memory._project import abstract_namespace

    into = abstract_namespace()._backend.matmul_into
    a, b = AbstractArray((2, 3, 4), "float32"), AbstractArray((4, 5), "float32")
    assert into(a, b, AbstractArray((2, 3, 5), "float32")).shape == (2, 3, 5)
    with pytest.raises(ValueError, match=r"matmul_into: the product of \(2, 3, 4\) and \(4, 5\)"):
        into(a, b, AbstractArray((2, 3, 6), "float32"))
    with pytest.raises(ValueError, match="matmul_into: operands"):
        into(a, AbstractArray((3, 5), "float32"), AbstractArray((2, 3, 5), "float32"))
    with pytest.raises(ValueError, match="float64"):
        into(a, b, AbstractArray((2, 3, 5), "float64"))


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.__name__)
def test_a_stack_times_a_matrix_is_one_product_where_its_rows_are_one_matrix(backend):
    """A linear layer's ``x @ w`` (x a stack, w a matrix) and its input cotangent: one 2-D
    product over all the rows where they are one strided matrix (a view), the backend's own
    matmul per matrix where only a copy could flatten them; the same values either way, and
    the gradients of the composition. Where the backend writes a product into an array
    (``matmul_into``), the folded product goes into a 2-D view of the result, which then owns
    its memory (a VJP may write into it) as a per-matrix product's does."""
    from pycograd_xp.namespace import _backend
    from pycograd_xp.ops import linear_algebra

    xp = pg.namespace(backend)
    raw = xp._backend.xp
    calls = []
    caps = _backend.capabilities(raw)

    class Spy:
        def __getattr__(self, name):
            return getattr(raw, name)

        def matmul(self, a, b):
            calls.append((tuple(a.shape), tuple(b.shape)))
            return raw.matmul(a, b)

    def into(a, b, out):
        calls.append((tuple(a.shape), tuple(b.shape)))
        return caps.matmul_into(a, b, out)

    base = rng.standard_normal((3, 4, 6))
    w = raw.asarray(rng.standard_normal((6, 5)))
    cases = {  # the stack, and whether its rows are one matrix
        "contiguous": (raw.asarray(base), True),
        "examples cut": (raw.asarray(base)[1:, ...], True),
        "columns cut": (raw.asarray(base)[..., :4], True),  # rows 6 apart: a BLAS matrix
        "rows cut": (raw.asarray(base)[:, 1:3, ...], False),
        "axes swapped": (raw.permute_dims(raw.asarray(base), (1, 0, 2)), False),
        "empty": (raw.zeros((0, 4, 6), dtype=raw.float64), None),  # either (strict: no view)
    }
    spy = Spy()
    # the spy has the backend's capabilities, its matmul_into spied on too
    spied = dataclasses.replace(caps, matmul_into=into if caps.matmul_into else None)
    _backend._BY_XP[id(spy)] = spied
    try:
        for name, (x, folds) in cases.items():
            wk = w[: x.shape[-1], ...]
            calls.clear()
            got = linear_algebra.stack_product(spy, x, wk)
            want = np.matmul(np.asarray(x), np.asarray(wk))
            np.testing.assert_array_equal(np.asarray(got), want, err_msg=name)
            rows = int(np.prod(x.shape[:-1]))
            expected = (rows, x.shape[-1]) if folds else tuple(x.shape)
            assert folds is None or calls == [(expected, tuple(wk.shape))], name
            if folds and caps.matmul_into is not None and caps.owns_buffer is not None:
                assert caps.owns_buffer(got), name  # no view of a 2-D product
    finally:
        del _backend._BY_XP[id(spy)]

    x = xp.asarray(base)
    wp = xp.asarray(np.asarray(w))
    gx, gw = pg.grad(lambda x, w: xp.sum((x @ w) ** 3), argnums=(0, 1))(x, wp)
    y = base @ np.asarray(w)
    np.testing.assert_allclose(_np(gx), (3 * y**2) @ np.asarray(w).T, rtol=1e-13)
    np.testing.assert_allclose(
        _np(gw), base.reshape(-1, 6).T @ (3 * y**2).reshape(-1, 5), rtol=1e-13
    )
