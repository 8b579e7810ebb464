"""The fused transformer rows behind pycograd_xp.nn (``ops/nn/``: activations, layer and RMS
normalisation, cross-entropy, attention; softmax, log_softmax and logsumexp are
``ops/special.py``'s rows): values against the composed definitions they replaced
(``conformance/composed_nn.py``) in float64 and float32 on NumPy and array-api-strict, gradients
against the composed versions, block-by-block evaluation against one block, Cubed against NumPy,
what the tape keeps, and attention over long sequences in less memory than its score matrix.
Finite differences, the dot-product test, JVPs, batching and the shape and memory rules are swept
by the conformance suites (``conformance/grad_cases.py``, ``_transformer_cases``)."""

from __future__ import annotations

import math
import warnings

import array_api_strict
import numpy as np
import pytest

import pycograd_xp as pg
from conformance import composed_nn
from pycograd_xp import memory, nn
from pycograd_xp.ops.nn import attention, pieces

BACKENDS = [np, array_api_strict]
rng = np.random.default_rng(11)
TOL = {np.float64: dict(rtol=1e-12, atol=1e-12), np.float32: dict(rtol=2e-6, atol=2e-6)}


def _np(a):
    return np.asarray(pg.unwrap(a))


def _a(*shape, lo=-2.0, hi=2.0, dtype=np.float64):
    return rng.uniform(lo, hi, shape).astype(dtype)


def _has_erf(backend):
    return backend is np


# name: (fused, composed, arguments as NumPy arrays of a dtype)
def _cases(dtype):
    x, w, b = _a(6, 7, 40, dtype=dtype), _a(40, dtype=dtype), _a(40, dtype=dtype)
    big = _a(40, 30, 300, dtype=dtype)  # over ops.nn.pieces.PIECE_BYTES: block by block
    logits = _a(6, 7, 11, dtype=dtype)
    labels = rng.integers(0, 11, (6, 7))
    probs = rng.dirichlet(np.ones(11), (6, 7)).astype(dtype)
    q, k, v = (
        _a(2, 3, 9, 8, dtype=dtype),
        _a(2, 3, 12, 8, dtype=dtype),
        _a(2, 3, 12, 5, dtype=dtype),
    )
    mask = rng.random((2, 1, 9, 12)) > 0.3
    bias = _a(3, 9, 12, dtype=dtype)  # an additive mask, -inf on part of some rows
    bias[0, 2, 3:] = bias[2, 5, :4] = -np.inf
    return {
        "gelu": (nn.gelu, composed_nn.gelu, (big,)),
        "gelu exact": (
            lambda x: nn.gelu(x, approximate=False),
            lambda x: composed_nn.gelu(x, approximate=False),
            (x,),
        ),
        "silu": (nn.silu, composed_nn.silu, (big,)),
        "softplus": (nn.softplus, composed_nn.softplus, (_a(5, 7, lo=-40, hi=40, dtype=dtype),)),
        "softmax": (nn.softmax, composed_nn.softmax, (logits,)),
        "log_softmax": (
            lambda x: nn.log_softmax(x, axis=1),
            lambda x: composed_nn.log_softmax(x, axis=1),
            (logits,),
        ),
        "logsumexp": (nn.logsumexp, composed_nn.logsumexp, (logits,)),
        "layer_norm": (nn.layer_norm, composed_nn.layer_norm, (x, w, b)),
        "layer_norm blocks": (nn.layer_norm, composed_nn.layer_norm, (big, _a(300, dtype=dtype))),
        "layer_norm axes": (
            lambda x, w: nn.layer_norm(x, w, axis=(0, 2)),
            lambda x, w: composed_nn.layer_norm(x, w, axis=(0, 2)),
            (x, _a(6, 1, 40, dtype=dtype)),
        ),
        "rms_norm": (nn.rms_norm, composed_nn.rms_norm, (big, _a(300, dtype=dtype))),
        "cross_entropy": (
            lambda z: nn.cross_entropy(z, _like(z, labels), reduction="none"),
            lambda z: composed_nn.cross_entropy(z, _like(z, labels), reduction="none"),
            (logits,),
        ),
        "cross_entropy negative indices": (  # -1 is the last class, forward and VJP alike
            lambda z: nn.cross_entropy(z, _like(z, labels - 11 * (labels % 2)), reduction="none"),
            lambda z: composed_nn.cross_entropy(
                z, _like(z, labels - 11 * (labels % 2)), reduction="none"
            ),
            (logits,),
        ),
        "cross_entropy probabilities": (
            nn.cross_entropy,
            composed_nn.cross_entropy,
            (logits, probs),
        ),
        "attention": (
            nn.scaled_dot_product_attention,
            composed_nn.scaled_dot_product_attention,
            (q, k, v),
        ),
        "attention masked causal scaled": (
            lambda q, k, v, m: nn.scaled_dot_product_attention(q, k, v, m, True, 0.3),
            lambda q, k, v, m: composed_nn.scaled_dot_product_attention(q, k, v, m, True, 0.3),
            (q, k, v, mask),
        ),
        "attention additive mask": (
            nn.scaled_dot_product_attention,
            composed_nn.scaled_dot_product_attention,
            (q, k, v, bias),
        ),
        "attention additive mask causal": (
            lambda q, k, v, m: nn.scaled_dot_product_attention(q, k, v, m, True),
            lambda q, k, v, m: composed_nn.scaled_dot_product_attention(q, k, v, m, True),
            (q, k, v, bias),
        ),
        "attention causal self": (
            lambda q: nn.scaled_dot_product_attention(q, q, q, is_causal=True),
            lambda q: composed_nn.scaled_dot_product_attention(q, q, q, is_causal=True),
            (_a(2, 150, 4, dtype=dtype),),  # query blocks of CAUSAL_ROWS
        ),
    }


NAMES = list(_cases(np.float64))


def _like(z, a):
    return z.__array_namespace__().asarray(a)


def _convert(xp, a):
    if isinstance(a, np.ndarray):
        return xp.asarray(a)
    return a


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.__name__)
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=lambda d: d.__name__)
@pytest.mark.parametrize("name", NAMES)
def test_values_are_the_composed_definitions(backend, dtype, name):
    if name == "gelu exact" and not _has_erf(backend):
        pytest.skip("no erf on array-api-strict: nn.gelu composes an approximation there")
    fused, composed, args = _cases(dtype)[name]
    xp = pg.namespace(backend)
    arrays = [_convert(xp, a) for a in args]
    got, want = _np(fused(*arrays)), _np(composed(*arrays))
    assert got.dtype == want.dtype == dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, **TOL[dtype])


def _floats(args):
    return tuple(i for i, a in enumerate(args) if isinstance(a, np.ndarray) and a.dtype.kind == "f")


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.__name__)
@pytest.mark.parametrize("name", NAMES)
def test_gradients_are_the_composed_versions(backend, name):
    if name == "gelu exact" and not _has_erf(backend):
        pytest.skip("no erf on array-api-strict")
    fused, composed, args = _cases(np.float64)[name]
    xp = pg.namespace(backend)
    arrays = [_convert(xp, a) for a in args]
    nums = _floats(args)
    out = _np(fused(*arrays))
    weights = xp.asarray(np.cos(np.arange(out.size)).reshape(out.shape))

    def loss(f):
        def g(*diff):
            full = list(arrays)
            for i, d in zip(nums, diff, strict=True):
                full[i] = d
            return xp.sum(f(*full) * weights)

        return g

    diff = [arrays[i] for i in nums]
    got = pg.grad(loss(fused), argnums=tuple(range(len(nums))))(*diff)
    want = pg.grad(loss(composed), argnums=tuple(range(len(nums))))(*diff)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-10, atol=1e-11)


def _gelu_tanh_derivatives(x):
    """GELU (tanh)'s first and second derivatives in float64, from tanh."""
    c, a = math.sqrt(2 / math.pi), 0.044715
    u, du, ddu = c * (x + a * x**3), c * (1 + 3 * a * x**2), 6 * c * a * x
    t = np.tanh(u)
    s = 1 - t * t  # sech^2
    d1 = 0.5 * (1 + t) + 0.5 * x * s * du
    d2 = s * du + 0.5 * x * (-2 * t * s * du * du + s * ddu)
    return d1, d2


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.__name__)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_tanh_derivatives_hold_at_zero_subnormals_and_tails(backend, dtype):
    """GELU (tanh)'s first derivative (its VJP: the sigmoid from x, clipped before its
    exponential) at 0, -0, subnormals, in the tails and in between, by blocks and whole, with
    no floating-point warning; its second derivative (grad of grad) at 0 too."""
    xp = pg.namespace(backend)
    tiny = float(np.finfo(dtype).smallest_subnormal)
    edge = [0.0, -0.0, tiny, -tiny, 1e3 * tiny, -1e3 * tiny, 1e-30, -1e-30, 1e-3, -1e-3]
    edge += [0.5, -0.5, 3.0, -3.0, 9.0, -9.0, 12.0, -12.0, 40.0, -40.0]
    base = np.concatenate([edge, np.linspace(-6, 6, 70000)]).astype(dtype)  # over a block
    x = xp.asarray(base)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = _np(pg.grad(lambda x: xp.sum(nn.gelu(x)))(x)).astype(np.float64)
        got2 = _np(pg.grad(lambda x: xp.sum(pg.grad(lambda y: xp.sum(nn.gelu(y)))(x)))(x[:24]))
    d1, d2 = _gelu_tanh_derivatives(base.astype(np.float64))
    eps = float(np.finfo(dtype).eps)
    # (1 - s) in s (1 + x 2u' (1 - s)) cancels where s is near 1: ~22 eps in float32 at x ~ 4.7
    np.testing.assert_allclose(got, d1, rtol=0, atol=128 * eps)
    np.testing.assert_array_equal(got[:6], 0.5)  # 0, -0 and subnormals: the sigmoid's 1/2
    np.testing.assert_allclose(got2, d2[:24], rtol=64 * eps, atol=64 * eps)
    assert abs(got2[0] - math.sqrt(2 / math.pi)) <= 64 * eps  # GELU''(0) = sqrt(2 / pi)


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.__name__)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_tanh_holds_at_huge_inputs(backend, dtype):
    """GELU (tanh) and its derivative at inputs up to the dtype's largest, by blocks and whole:
    x and 1 above the clip, within 1e-33 and 1e-31 of 0 below it (the true ones are nearer 0),
    never NaN. Clipping -2u alone gave the derivative NaN from |x| = 1.2e13 in float32, -3864
    at x = -1e13 in both dtypes, and GELU -1.8e-5 at x = -1e30."""
    xp = pg.namespace(backend)
    big = float(np.finfo(dtype).max)
    mags = [9.7, 12.0, 1e4, 1e10, 1e13, 1e14, 1e19, 1e20, 1e30, big]
    edge = np.array([m for m in mags for m in (m, -m)], dtype)
    for base in (edge, np.concatenate([edge, np.linspace(-11, 11, 70000, dtype=dtype)])):
        x = xp.asarray(base)
        with warnings.catch_warnings():  # (x^2 overflows in the value above 1.8e19 in float32)
            warnings.simplefilter("ignore", RuntimeWarning)
            value = _np(nn.gelu(x)).astype(np.float64)
            d1 = _np(pg.grad(lambda x: xp.sum(nn.gelu(x)))(x)).astype(np.float64)
            (t,) = pg.jvp(lambda x: nn.gelu(x), (x,), (xp.ones_like(x),))[1:]
        hi, lo = base > 9.6, base < -9.6
        np.testing.assert_array_equal(value[hi], base[hi])
        np.testing.assert_array_equal(d1[hi], 1.0)
        assert np.all(np.abs(value[lo]) <= 1e-33) and np.all(np.abs(d1[lo]) <= 1e-31)
        np.testing.assert_array_equal(_np(t).astype(np.float64), d1)
        mid = ~(hi | lo)
        want, _ = _gelu_tanh_derivatives(base[mid].astype(np.float64))
        np.testing.assert_allclose(d1[mid], want, rtol=0, atol=128 * float(np.finfo(dtype).eps))


def test_gelu_exact_composes_where_the_backend_has_no_erf():
    xp = pg.namespace(array_api_strict)
    a = _a(3, 4)
    got = _np(nn.gelu(xp.asarray(a), approximate=False))
    want = _np(composed_nn.gelu(pg.namespace(np).asarray(a), approximate=False))
    np.testing.assert_allclose(got, want, atol=2e-7)  # Abramowitz & Stegun's erf
    with pytest.raises(NotImplementedError, match="no erf"):
        xp._gelu(xp.asarray(a))


@pytest.mark.parametrize("name", ["gelu", "silu", "layer_norm blocks", "rms_norm", "cross_entropy"])
def test_blocks_give_what_one_block_gives(monkeypatch, name):
    """Block by block (ops.nn.pieces.PIECE_BYTES) and in one piece: the same values and
    gradients."""
    fused, _, args = _cases(np.float64)[name]
    xp = pg.namespace(np)
    arrays = [_convert(xp, a) for a in args]
    nums = _floats(args)

    def step():
        def f(*diff):
            full = list(arrays)
            for i, d in zip(nums, diff, strict=True):
                full[i] = d
            return xp.sum(fused(*full) ** 2)

        return pg.value_and_grad(f, argnums=tuple(range(len(nums))))(*[arrays[i] for i in nums])

    monkeypatch.setattr(pieces, "PIECE_BYTES", 10**12)
    want = step()
    monkeypatch.setattr(pieces, "PIECE_BYTES", 512)
    assert len(pieces.pieces(args[0].shape, 8, 1)) > 1
    got = step()
    np.testing.assert_allclose(_np(got[0]), _np(want[0]), rtol=1e-12)
    for a, b in zip(got[1], want[1], strict=True):
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("row", ["gelu", "silu", "softplus", "layer_norm"])
@pytest.mark.parametrize("layout", ["transposed", "sliced", "reversed"])
def test_blocks_in_any_layout_give_the_same_bits(monkeypatch, row, layout):
    """Block by block, GELU's clip bound and a normalisation's weight and bias are made once a
    call as blocks (``pieces.BlockConst``), in C order and in any other layout. Each gives the
    bits of one block, float32 and float64, values past GELU's clip (x < -10.4) included; an
    elementwise row gives the same bits in every layout (a normalisation's row sums over rows
    in another layout may not: NumPy's order follows the layout and the block)."""
    xp = pg.namespace(np)
    w64, b64 = xp.asarray(_a(37)), xp.asarray(_a(37))
    w32 = xp.astype(w64, xp.float32)
    f = {
        "gelu": nn.gelu,
        "silu": nn.silu,
        "softplus": nn.softplus,
        "layer_norm": lambda x: nn.layer_norm(x, w32 if x.dtype == xp.float32 else w64, b64),
    }[row]
    view = {
        "transposed": lambda a: np.transpose(np.ascontiguousarray(np.transpose(a)), (2, 1, 0)),
        "sliced": lambda a: np.repeat(a, 2, axis=1)[:, ::2],
        "reversed": lambda a: np.ascontiguousarray(a[::-1])[::-1],
    }[layout]
    base, r = _a(3, 41, 37, lo=-14.0, hi=6.0), _a(3, 41, 37)

    def run(a, piece):
        monkeypatch.setattr(pieces, "PIECE_BYTES", piece)
        loss = pg.value_and_grad(lambda t: xp.sum(f(t) * xp.asarray(r.astype(a.dtype))))
        val, g = loss(xp.asarray(a))
        return _np(f(xp.asarray(a))), _np(val), _np(g)

    for dtype in (np.float32, np.float64):
        c = base.astype(dtype)
        v = view(c)
        assert np.array_equal(v, c) and not v.flags.c_contiguous
        assert len(pieces.pieces(c.shape, c.itemsize, 1, limit=4096)) > 1
        got = {name: run(a, 4096) for name, a in (("c", c), ("v", v))}
        for name, a in (("c", c), ("v", v)):
            for x, y in zip(got[name], run(a, 10**12), strict=True):
                if row == "layer_norm" and name == "v":
                    np.testing.assert_allclose(x, y, rtol=1e-5 if dtype == np.float32 else 1e-12)
                else:
                    assert np.array_equal(x, y), (name, dtype)
        if row != "layer_norm":
            for x, y in zip(got["c"], got["v"], strict=True):
                assert np.array_equal(x, y), dtype


@pytest.mark.parametrize("budget", [2**10, 3000, 2**15])
@pytest.mark.parametrize("masked", ["none", "boolean", "additive"])
def test_attention_blocks_of_queries_and_keys_give_the_same(monkeypatch, budget, masked):
    """Small budgets split the queries, then the keys too (an online softmax): the values and
    gradients of one block (an additive mask's too). A row masked whole averages every value,
    as the composed one; under an additive mask it gives 0, and key blocks that are -inf
    whole before a row's first finite score change nothing."""
    xp = pg.namespace(np)
    q, k, v = _a(2, 33, 3, 4), _a(2, 40, 3, 4), _a(2, 40, 3, 6)
    mask = None
    if masked == "boolean":
        mask = rng.random((2, 3, 33, 40)) > 0.4
        mask[1, 2, 5] = False
    elif masked == "additive":
        mask = _a(3, 33, 40)
        mask[1, 5] = -np.inf
        mask[2, 20:, :30] = -np.inf

    def step(q, k, v, m):
        out = xp._attention(q, k, v, m, is_causal=masked != "additive")[0]
        return xp.sum(out * xp.sin(out))

    args = [xp.asarray(a) for a in (q, k, v)] + [None if mask is None else xp.asarray(mask)]
    vg = pg.value_and_grad(step, argnums=(0, 1, 2, 3) if masked == "additive" else (0, 1, 2))
    want = vg(*args)
    monkeypatch.setattr(attention, "ATTENTION_BLOCK_BYTES", budget)
    got = vg(*args)
    np.testing.assert_allclose(_np(got[0]), _np(want[0]), rtol=1e-12)
    for a, b in zip(got[1], want[1], strict=True):
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-10, atol=1e-12)
    if masked == "additive":
        out = _np(xp._attention(*args[:3], args[3])[0])
        assert np.all(out[:, 5, 1] == 0) and np.isfinite(out).all()


def _attention_reference(q, k, v, w, scale):
    """Attention's output and the gradients of ``sum(out * w)`` for q, k, v (L, d), in float64,
    the softmax shifted by its exact row maximum (the scores below are exact in any dtype)."""
    s = scale * (q @ k.T)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    dp = w @ v.T
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    return p @ v, (scale * ds @ k, scale * ds.T @ q, p.T @ w), ds


@pytest.mark.parametrize("path", ["one key block", "keys in blocks", "whole arrays"])
@pytest.mark.parametrize("dtype, big", [(np.float32, 1e7), (np.float32, 1e3), (np.float64, 1e16)])
def test_attention_gradients_beside_a_large_maximum(monkeypatch, path, dtype, big):
    """The VJP recomputes the probabilities as exp(s - lse), and the stored log-sum-exp keeps
    log(sum) beside the row's maximum only to the maximum's precision: scores tied at 1e7 in
    float32 (1e16 in float64) each got probability 1, the gradients 1.1x to 3x off (JAX's
    softmax and the forward are right). Each row is divided by its sum: blockwise with one
    block of keys, with the keys in blocks (their sums first), and over whole arrays (the
    VJP recorded for a higher order, here under ``jvp``)."""
    L, d = 6, 2
    q, k = np.zeros((L, d)), np.zeros((L, d))
    q[:, 0] = 1.0
    k[:, 0] = big
    k[2, 0], k[4, 0] = big / 2, big - 1  # below the maximum: far, and by one
    v, w = _a(L, d), _a(L, d)
    want_out, want, ds = _attention_reference(q, k, v, w, 1.0)
    xp = pg.namespace(np)
    args = [xp.asarray(a.astype(dtype)) for a in (q, k, v)]
    W = xp.asarray(w.astype(dtype))

    def f(q, k, v):
        return xp.sum(nn.scaled_dot_product_attention(q, k, v, scale=1.0) * W)

    if path == "keys in blocks":  # a row of keys over the budget: a key a block
        monkeypatch.setattr(attention, "ATTENTION_BLOCK_BYTES", 4 * np.dtype(dtype).itemsize)
        assert attention.attention_plan((), L, L, 1, np.dtype(dtype).itemsize, False)[2] < L
    if path == "whole arrays":
        got = pg.jvp(pg.grad(f, argnums=(0, 1, 2)), args, [xp.zeros_like(a) for a in args])[0]
    else:
        got = pg.grad(f, argnums=(0, 1, 2))(*args)
    rtol = 1e-5 if dtype == np.float32 else 1e-13
    out = _np(nn.scaled_dot_product_attention(*args, scale=1.0))
    np.testing.assert_allclose(out, want_out, rtol=rtol, atol=rtol)
    for name, a, b in zip("qkv", got, want, strict=True):
        # q's gradient sums ds (rows summing to 0) against keys of about ``big``: its rounding
        # is big's times ds's
        atol = rtol * (big * np.abs(ds).max() if name == "q" else 1.0)
        np.testing.assert_allclose(_np(a), b, rtol=rtol, atol=atol, err_msg=name)


def _masked_attention_reference(q, k, v, w, mask, kind, causal, low):
    """:func:`_attention_reference` over (B, H, L, d) with a mask as ``_attention`` takes it:
    boolean (masked scores ``low``; a row masked whole averages every value) or additive, and
    the causal triangle (-inf above it); the additive mask's gradient too. Float64."""
    s = q @ np.swapaxes(k, -1, -2)
    lq, lk = s.shape[-2:]
    allowed = np.ones(s.shape, bool)
    if kind == "additive":
        s = s + mask
    elif kind == "boolean":
        allowed = allowed & mask
    if causal:
        tri = np.tril(np.ones((lq, lk), bool))
        if kind == "additive":
            s = np.where(tri, s, -np.inf)
        else:
            allowed = allowed & tri
    s = np.where(allowed, s, low) if kind != "additive" else s
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    tot = e.sum(axis=-1, keepdims=True)
    p = e / np.where(tot == 0, 1.0, tot)
    dp = w @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    if kind != "additive":
        ds = np.where(allowed, ds, 0.0)
    grads = [ds @ k, np.swapaxes(ds, -1, -2) @ q, np.swapaxes(p, -1, -2) @ w]
    if kind == "additive":
        grads.append(ds.sum(axis=0))
    return p @ v, grads, ds


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("seed", range(8))
def test_attention_at_large_tied_scores_with_masks(monkeypatch, seed, dtype):
    """Random attention at scores of 1e6 (float32) or 1e15 (float64), with ties and gaps of a
    few units, under no mask, a boolean one (rows masked whole among them) or an additive one
    (-inf included), causal or not, on each path of the VJP (one block of keys, keys in
    blocks, whole arrays): values and gradients (the additive mask's too) against the float64
    softmax shifted by its exact row maximum. The scores are exact in both dtypes."""
    rng = np.random.default_rng(seed)
    big = 1e6 if dtype == np.float32 else 1e15
    b, h, lq, lk, d = 2, 2, int(rng.integers(1, 7)), int(rng.integers(1, 7)), 2
    kind = ["none", "boolean", "additive"][seed % 3]
    causal = bool(rng.integers(2))
    path = ["one key block", "keys in blocks", "whole arrays"][int(rng.integers(3))]
    q = np.zeros((b, h, lq, d))
    q[..., 0] = 1.0
    k = np.zeros((b, h, lk, d))
    k[..., 0] = big - rng.integers(0, 3, (b, h, lk))  # ties and near ties at the maximum
    k[..., 1] = rng.integers(-2, 3, (b, h, lk))  # (q's second entry is 0: no score from it)
    v, w = rng.standard_normal((b, h, lk, d)), rng.standard_normal((b, h, lq, d))
    mask = None
    if kind == "boolean":
        mask = rng.random((h, lq, lk)) < 0.6
        mask[0, 0] = False  # a row masked whole
    elif kind == "additive":
        mask = rng.integers(-2, 1, (h, lq, lk)).astype(float)
        mask[rng.random((h, lq, lk)) < 0.2] = -np.inf
    low = float(np.finfo(dtype).min)
    want_out, want, ds = _masked_attention_reference(q, k, v, w, mask, kind, causal, low)
    xp = pg.namespace(np)
    heads = lambda a: np.ascontiguousarray(np.swapaxes(a, 1, 2))  # (B, H, L, d) -> (B, L, H, d)
    args = [xp.asarray(heads(a).astype(dtype)) for a in (q, k, v)]
    if mask is not None:
        args.append(xp.asarray(mask if kind == "boolean" else mask.astype(dtype)))
    W = xp.asarray(heads(w).astype(dtype))

    def f(q, k, v, m=None):
        return xp.sum(xp._attention(q, k, v, m, is_causal=causal, scale=1.0)[0] * W)

    nums = tuple(range(4 if kind == "additive" else 3))
    if path == "keys in blocks":  # a row of keys over the budget
        monkeypatch.setattr(attention, "ATTENTION_BLOCK_BYTES", h * np.dtype(dtype).itemsize)
    if path == "whole arrays":
        zeros = [xp.zeros_like(a) for a in args[: len(nums)]]
        got = pg.jvp(
            lambda *a: pg.grad(f, argnums=nums)(*a, *args[len(nums) :]), args[: len(nums)], zeros
        )[0]
    else:
        got = pg.grad(f, argnums=nums)(*args)
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    out = _np(
        xp._attention(
            *args[:3], args[3] if mask is not None else None, is_causal=causal, scale=1.0
        )[0]
    )
    np.testing.assert_allclose(out, heads(want_out), rtol=rtol, atol=rtol)
    # q's gradient sums ds against keys of about ``big``: ds's rounding times big. A row whose
    # probability is 1 has ds = g.v - g.o = 0 exactly, computed as two products rounded apart
    # (FlashAttention's, PyTorch's): eps |g| |v| each
    noise = np.finfo(dtype).eps * np.abs(w).max() * np.abs(v).max()
    names = ["q", "k", "v", "mask"]
    for name, a, ref in zip(names, got, want, strict=False):
        ref = ref if name == "mask" else heads(ref)
        atol = 8 * big * lk * (rtol * np.abs(ds).max() + noise) if name == "q" else rtol
        np.testing.assert_allclose(_np(a), ref, rtol=rtol, atol=atol, err_msg=f"{name} {path}")


@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("mask_kind", ["additive", "boolean"])
def test_attention_against_pytorch(is_causal, mask_kind):
    """Values and gradients (the additive mask's too) beside PyTorch's
    scaled_dot_product_attention, (B, H, L, d) layout, float32; rows masked whole give 0 under
    an additive mask, as PyTorch's. A boolean mask is PyTorch's with no row masked whole (ours
    then averages every value)."""
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    xp = pg.namespace(np)
    q, k, v = (_a(2, 3, 7, 4, dtype=np.float32) for _ in range(3))
    if mask_kind == "additive":
        mask = _a(3, 7, 7, dtype=np.float32)
        mask[1, 4] = -np.inf  # a row masked whole
        mask[2, 3, 1:] = -np.inf
    else:
        mask = rng.random((3, 7, 7)) > 0.4
        mask[..., 0] = True  # every row keeps the first key (the causal triangle has it)
    w = np.cos(np.arange(2 * 3 * 7 * 4)).reshape(2, 3, 7, 4).astype(np.float32)
    nums = (0, 1, 2, 3) if mask_kind == "additive" else (0, 1, 2)

    def loss(q, k, v, m):
        out = nn.scaled_dot_product_attention(q, k, v, m, is_causal=is_causal)
        return xp.sum(out * xp.asarray(w))

    args = [xp.asarray(a) for a in (q, k, v, mask)]
    value, grads = pg.value_and_grad(loss, argnums=nums)(*args)
    ts = [torch.tensor(a, requires_grad=i in nums) for i, a in enumerate((q, k, v, mask))]
    tm = ts[3]
    if is_causal:  # PyTorch takes a mask or is_causal, not both: the triangle into the mask
        tri = torch.ones(7, 7, dtype=torch.bool).tril()
        tm = tm.masked_fill(~tri, -np.inf) if mask_kind == "additive" else tm & tri
    tout = tf.scaled_dot_product_attention(*ts[:3], attn_mask=tm)
    tloss = (tout * torch.tensor(w)).sum()
    tloss.backward()
    np.testing.assert_allclose(float(_np(value)), float(tloss.detach()), rtol=1e-5)
    for i, g in zip(nums, grads, strict=True):
        np.testing.assert_allclose(_np(g), ts[i].grad.numpy(), rtol=1e-4, atol=1e-5)


def test_attention_additive_mask_promotes():
    """A float64 mask beside float32 q, k, v computes in float64, as adding it would; a
    float32 one stays float32."""
    xp = pg.namespace(np)
    q, k, v = (_a(2, 5, 4, dtype=np.float32) for _ in range(3))
    mask = _a(5, 5)
    got = nn.scaled_dot_product_attention(*(xp.asarray(a) for a in (q, k, v, mask)))
    assert got.dtype == xp.float64
    want = composed_nn.scaled_dot_product_attention(
        *(xp.asarray(a.astype(np.float64)) for a in (q, k, v)), xp.asarray(mask)
    )
    np.testing.assert_allclose(_np(got), _np(want), rtol=1e-12, atol=1e-12)
    m32 = xp.asarray(mask.astype(np.float32))
    assert nn.scaled_dot_product_attention(*(xp.asarray(a) for a in (q, k, v)), m32).dtype == (
        xp.float32
    )
    p = memory.project(
        lambda q: xp.sum(nn.scaled_dot_product_attention(q, q, q, xp.asarray(mask))),
        xp.asarray(q),
    )
    assert p.peak_bytes > 0


def test_multi_head_attention_keeps_the_heads_beside_the_features():
    xp = pg.namespace(np)
    params = {n: xp.asarray(_a(16, 16) / 4) for n in ("wq", "wk", "wv", "wo")}
    x = xp.asarray(_a(2, 7, 16))
    got = nn.multi_head_attention(x, params, num_heads=4, causal=True)
    want = composed_nn.multi_head_attention(x, params, num_heads=4, causal=True)
    np.testing.assert_allclose(_np(got), _np(want), rtol=1e-12, atol=1e-12)
    mask = xp.asarray(rng.random((2, 4, 7, 7)) > 0.3)
    got = nn.multi_head_attention(x, params, num_heads=4, mask=mask)
    want = composed_nn.multi_head_attention(x, params, num_heads=4, mask=mask)
    np.testing.assert_allclose(_np(got), _np(want), rtol=1e-12, atol=1e-12)


def test_raw_numpy_arrays_run_the_rows():
    a, w = _a(4, 6), _a(6)
    want = (a - a.mean(-1, keepdims=True)) / np.sqrt(a.var(-1, keepdims=True) + 1e-5) * w
    np.testing.assert_allclose(np.asarray(nn.layer_norm(a, w)), want, rtol=1e-12)
    q = _a(3, 5, 4)
    out = np.asarray(nn.scaled_dot_product_attention(q, q, q, is_causal=True))
    assert out.shape == (3, 5, 4)
    np.testing.assert_allclose(out[:, 0], q[:, 0])  # the first query sees only the first key


def test_errors_name_the_function():
    xp = pg.namespace(np)
    x = xp.ones((2, 3, 4))
    with pytest.raises(ValueError, match=r"cross_entropy\(\): class indices of shape \(4,\)"):
        nn.cross_entropy(x, xp.asarray(np.zeros(4, np.int64)))
    with pytest.raises(ValueError, match=r"PyTorch's are axis 1\): xp.moveaxis\(logits, 1, -1\) "):
        nn.cross_entropy(xp.ones((2, 5, 4, 3)), xp.asarray(np.zeros((2, 4, 3), np.int64)))
    with pytest.raises(
        ValueError,
        match=r"cross_entropy\(\): labels that are not integers are class probabilities: they "
        r"need the logits' axes, shape \(2, 3, 4\) \(or 1 along any of them\); "
        r"got shape \(2, 4\)$",  # the public name: no "called with" appended
    ):
        nn.cross_entropy(x, xp.ones((2, 4)))
    with pytest.raises(ValueError, match=r"probabilities of shape \(2, 2, 4\) do not broadcast"):
        nn.cross_entropy(x, xp.ones((2, 2, 4)))
    with pytest.raises(ValueError, match=r"layer_norm\(\): weight/bias"):
        nn.layer_norm(x, xp.ones(5))
    with pytest.raises(ValueError, match=r"scaled_dot_product_attention\(\).*do not match"):
        xp._attention(x[..., None, :], xp.ones((2, 3, 1, 5)), xp.ones((2, 3, 1, 4)))
    with pytest.raises(TypeError, match=r"boolean .* or real floating .*int64"):
        nn.scaled_dot_product_attention(x, x, x, xp.ones((3, 3), dtype=xp.int64))


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.__name__)
def test_the_tape_keeps_only_the_declared_residuals(backend):
    """gelu, silu, softplus keep x; layer_norm x, its weight and the statistics beside its
    output (which the next product saves anyway); cross-entropy the logits, the labels and the
    normaliser; attention q, k, v, its output and the log-sum-exp: never a score matrix."""
    spec = memory.spec
    b, length, d, heads = 2, 64, 32, 4

    def block(x, w1):
        xp = x.__array_namespace__()
        h = nn.layer_norm(x)
        q = xp.reshape(h, (b, length, heads, d // heads))
        a = xp.reshape(xp._attention(q, q, q, is_causal=True)[0], (b, length, d))
        return xp.mean(nn.gelu(a @ w1))

    p = memory.project(block, spec((b, length, d), "float32"), spec((d, 4 * d), "float32"))
    f32 = 4
    act = b * length * d * f32
    stats = b * length * f32
    # x and w1 are arguments; h (the layer norm's output, saved by it and as q, k, v),
    # its statistics, the attention's output (saved by it and by the product) and its
    # log-sum-exp, and the product (gelu's input)
    expected = act + 2 * stats + act + heads * stats + 4 * act
    assert p.residual_bytes <= expected + 4096, (p.residual_bytes, expected)
    assert p.residual_bytes < heads * b * length * length * f32 + expected  # no score matrix


@pytest.mark.parametrize("is_causal", [True, False])
def test_long_attention_trains_in_less_memory_than_its_score_matrix(is_causal):
    """L = 2048, batch 1, 4 heads of 64: the step's peak (tracemalloc, beyond its arguments)
    stays under one L x L float32 array (16 MiB; per head the scores would be four times
    that), the projection bounds it tightly, and the gradient is the composed version's."""
    xp = pg.namespace(np)
    length, heads, d = 2048, 4, 64
    q, k, v = (xp.asarray(_a(1, length, heads, d, dtype=np.float32)) for _ in range(3))
    w = xp.asarray(_a(1, length, heads, d, dtype=np.float32))

    def loss(q, k, v):
        return xp.sum(xp._attention(q, k, v, is_causal=is_causal)[0] * w)

    nums = (0, 1, 2)
    m = memory.measure(loss, q, k, v, argnums=nums)
    p = memory.project(loss, q, k, v, argnums=nums)
    square = length * length * 4
    assert m.peak_bytes - m.argument_bytes < square, m
    assert m.peak_bytes <= p.traced_peak_bytes <= p.peak_bytes, (m, p)
    assert m.peak_bytes / p.traced_peak_bytes >= 0.8, (m, p)

    def composed(q, k, v):
        qh, kh, vh = (xp.permute_dims(a, (0, 2, 1, 3)) for a in (q, k, v))
        out = composed_nn.scaled_dot_product_attention(qh, kh, vh, is_causal=is_causal)
        return xp.sum(xp.permute_dims(out, (0, 2, 1, 3)) * w)

    got = pg.grad(loss, argnums=nums)(q, k, v)
    want = pg.grad(composed, argnums=nums)(q, k, v)
    for a, b in zip(got, want, strict=True):
        a, b = _np(a), _np(b)
        assert np.abs(a - b).max() <= 1e-4 * np.abs(b).max()


def test_a_transformer_block_step_is_projected_tightly():
    xp = pg.namespace(np)
    d, heads, length, batch = 64, 4, 96, 3
    p = {
        n: xp.asarray(_a(*s, dtype=np.float32) / 8)
        for n, s in (("wq", (d, d)), ("wk", (d, d)), ("wv", (d, d)), ("wo", (d, d)))
    }
    p["w1"], p["w2"] = (
        xp.asarray(_a(d, 4 * d, dtype=np.float32) / 8),
        xp.asarray(_a(4 * d, d, dtype=np.float32) / 16),
    )
    p["g1"], p["g2"] = xp.ones(d, dtype=xp.float32), xp.ones(d, dtype=xp.float32)
    x = xp.asarray(_a(batch, length, d, dtype=np.float32))
    labels = xp.asarray(rng.integers(0, d, (batch, length)))

    def loss(p, x):
        h = x + nn.multi_head_attention(nn.layer_norm(x, p["g1"]), p, heads, causal=True)
        h = h + nn.gelu(nn.layer_norm(h, p["g2"]) @ p["w1"]) @ p["w2"]
        return nn.cross_entropy(h, labels)

    proj, meas = memory.project(loss, p, x), memory.measure(loss, p, x)
    assert meas.peak_bytes <= proj.traced_peak_bytes <= proj.peak_bytes, (meas, proj)
    assert meas.peak_bytes / proj.traced_peak_bytes >= 0.8, (meas, proj)


def test_cross_entropy_counts_negative_indices_from_the_last_class():
    """-1 is the last class in the loss, its gradient (central differences) and its JVP
    alike: the forward's gather took -1 as the last class while the VJP's mask matched none."""
    xp = pg.namespace(np)
    z, t = _a(5, 4), _a(5, 4)
    y = np.array([0, -1, 3, -4, 2])

    def f(z):
        return nn.cross_entropy(z, xp.asarray(y), reduction="sum")

    want = nn.cross_entropy(xp.asarray(z), xp.asarray(np.where(y < 0, y + 4, y)), reduction="sum")
    assert float(f(xp.asarray(z))) == pytest.approx(float(want), rel=1e-14)
    g = _np(pg.grad(f)(xp.asarray(z)))
    eps, fd = 1e-6, np.zeros_like(z)
    for i in np.ndindex(z.shape):
        up, down = z.copy(), z.copy()
        up[i] += eps
        down[i] -= eps
        fd[i] = (float(f(xp.asarray(up))) - float(f(xp.asarray(down)))) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)
    _, tangent = pg.jvp(f, (xp.asarray(z),), (xp.asarray(t),))
    assert float(tangent) == pytest.approx(float(np.sum(g * t)), rel=1e-10)
    # labels of a dtype narrower than the classes' count (int8, 200 classes)
    wide, small = _a(3, 200), np.array([0, -1, 100], np.int8)
    got = nn.cross_entropy(xp.asarray(wide), xp.asarray(small), reduction="none")
    want = nn.cross_entropy(xp.asarray(wide), xp.asarray(np.array([0, 199, 100])), reduction="none")
    np.testing.assert_array_equal(_np(got), _np(want))


def test_cubed_values_and_gradients_match_numpy():
    cubed = pytest.importorskip("cubed")
    xc, xn = pg.namespace(cubed), pg.namespace(np)
    # negative class indices too: Cubed's masked sum and NumPy's gather count them alike
    x, w, labels = _a(2, 5, 8), _a(8), rng.integers(-8, 8, (2, 5))
    mask = rng.random((2, 2, 5, 5)) > 0.3

    def loss(ns, x, w):
        h = nn.layer_norm(x, w) + nn.rms_norm(x) + nn.silu(x) + nn.softplus(x)
        q = ns.reshape(nn.gelu(h), (2, 5, 2, 4))
        a = ns._attention(q, q, q, ns.asarray(mask), is_causal=True)[0]
        z = ns.reshape(a, (2, 5, 8)) + nn.gelu(x, approximate=False)
        return nn.cross_entropy(z, ns.asarray(labels)) + ns.sum(nn.log_softmax(z))

    vc = pg.value_and_grad(lambda x, w: loss(xc, x, w), argnums=(0, 1))(
        xc.asarray(x), xc.asarray(w)
    )
    vn = pg.value_and_grad(lambda x, w: loss(xn, x, w), argnums=(0, 1))(
        xn.asarray(x), xn.asarray(w)
    )
    np.testing.assert_allclose(np.asarray(pg.unwrap(vc[0]).compute()), _np(vn[0]), rtol=1e-10)
    for a, b in zip(vc[1], vn[1], strict=True):
        np.testing.assert_allclose(np.asarray(pg.unwrap(a).compute()), _np(b), rtol=1e-9)


# -- a multi-output row's cotangent is owned per output (the tape's ``owned``) -------------------


@pytest.mark.parametrize("name", ["_layer_norm", "_rms_norm"])
def test_a_normalisations_fresh_cotangent_is_owned_and_written_in_place(monkeypatch, name):
    """The product's VJP makes the normalisation's output cotangent, which nothing else holds:
    the tape hands the row one flag per output (its statistics' filled zeros are fresh too),
    and the VJP writes the input's cotangent into the output's, block by block. A caller's
    cotangent (a vjp function's) and a view (a reshape's VJP) are never owned, never written;
    the same bits every way (in one block: the weight's sums in another order). If a change to
    the tape's references switched ownership off, this fails instead of the memory growing."""
    from pycograd_xp.ops import REGISTRY

    monkeypatch.setattr(pieces, "PIECE_BYTES", 512)  # blocks of a few rows
    f = nn.layer_norm if name == "_layer_norm" else nn.rms_norm
    outs = 3 if name == "_layer_norm" else 2
    xp = pg.namespace(np)
    x, w = xp.asarray(_a(5, 4, 16)), xp.asarray(_a(16))
    c = _a(5, 4, 16)
    assert len(pieces.pieces(x.shape, 8, 1)) > 1
    prim, seen = REGISTRY[name], []
    rule = prim.vjp

    def spy(ns, g, out, *args, **kw):
        seen.append(kw.get("owned"))
        return rule(ns, g, out, *args, **kw)

    with prim.replaced(vjp=spy):
        got = pg.grad(lambda x, w: xp.sum(f(x, w) * xp.asarray(c)), argnums=(0, 1))(x, w)
        assert seen == [(True,) * outs]
        seen.clear()
        _, vjp_fn = pg.vjp(f, x, w)
        ct = c.copy()
        by_caller = vjp_fn(xp.asarray(ct))
        np.testing.assert_array_equal(ct, c)
        assert seen[0][0] is False
        seen.clear()
        flat = xp.asarray(c.reshape(-1))
        by_view = pg.grad(lambda x, w: xp.sum(xp.reshape(f(x, w), (-1,)) * flat), argnums=(0, 1))(
            x, w
        )
        assert seen[0][0] is False
    monkeypatch.setattr(pieces, "PIECE_BYTES", 10**12)  # one block: written into it too
    with prim.replaced(vjp=spy):
        whole = pg.grad(lambda x, w: xp.sum(f(x, w) * xp.asarray(c)), argnums=(0, 1))(x, w)
    assert seen[-1] == (True,) * outs
    for other in (by_caller, by_view):
        for a, b in zip(got, other, strict=True):
            np.testing.assert_array_equal(_np(a).view(np.int64), _np(b).view(np.int64))
    for a, b in zip(got, whole, strict=True):  # (the weight's sums in another order)
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-12, atol=1e-14)


# Every row whose rule may write into its output's cotangent (``takes_owned``), with the shapes
# of its arguments to sweep: inputs of one axis and more, parameters broadcast over leading axes
# and parameters with as many elements as the output (whose cotangent then sums nothing: it is
# the output's cotangent itself, which the input's must then not overwrite).
_OWNED_ROWS = {
    "_layer_norm": (
        lambda x, w=None, b=None: nn.layer_norm(x, w, b),
        [
            [(5,), (5,), (5,)],
            [(1, 5), (1, 5), (1, 5)],
            [(3, 5), (3, 5), (3, 5)],
            [(2, 3, 5), (3, 5), (3, 5)],
            [(2, 3, 5), (2, 3, 5), (2, 3, 5)],
            [(2, 3, 5), (1, 1, 5), (1, 1, 5)],
            [(6, 5), (5,), (5,)],
            [(6, 5), (5,)],
            [(4,), None, (4,)],
            [(3, 4), None, (3, 4)],
            [(3, 4)],
        ],
    ),
    "_rms_norm": (
        lambda x, w=None: nn.rms_norm(x, w),
        [[(5,), (5,)], [(3, 5), (3, 5)], [(6, 5), (5,)], [(2, 3, 5), (1, 3, 5)], [(3, 4)]],
    ),
    "_relu": (nn.relu, [[(5,)], [(6, 5)]]),
    "_gelu_tanh": (nn.gelu, [[(5,)], [(6, 5)]]),
    "_gelu": (lambda x: nn.gelu(x, approximate=False), [[(5,)], [(6, 5)]]),
    "_sigmoid": (nn.sigmoid, [[(5,)], [(6, 5)]]),
    "_silu": (nn.silu, [[(5,)], [(6, 5)]]),
    "_softplus": (nn.softplus, [[(5,)], [(6, 5)]]),
    "tanh": (nn.tanh, [[(5,)], [(6, 5)]]),
}


def test_every_row_that_writes_into_its_cotangent_is_swept():
    from pycograd_xp.ops import REGISTRY

    owned = {name for name, prim in REGISTRY.items() if prim.takes_owned}
    assert owned == set(_OWNED_ROWS), "add the new row to _OWNED_ROWS"


@pytest.mark.parametrize("piece_bytes", [256, 10**12], ids=["blocks", "whole"])
@pytest.mark.parametrize(
    "name, shapes",
    [(name, shapes) for name, (_, cases) in _OWNED_ROWS.items() for shapes in cases],
    ids=lambda v: v if isinstance(v, str) else "-".join(map(str, v)).replace(" ", ""),
)
def test_a_cotangent_written_in_place_gives_the_gradients_of_one_kept(
    monkeypatch, name, shapes, piece_bytes
):
    """Each gradient with the output's cotangent owned (the tape's own: the rule may write the
    input's cotangent into it) is, bit for bit, the gradient with a cotangent the caller keeps
    (a vjp function's: never written), which stays as it was; and it matches the derivative
    of the row's composed form to rounding. Found by a JAX oracle: layer norm's bias cotangent,
    for a bias with as many elements as the output, was the output's cotangent itself and came
    back overwritten by the input's."""
    monkeypatch.setattr(pieces, "PIECE_BYTES", piece_bytes)
    f = _OWNED_ROWS[name][0]
    xp = pg.namespace(np)
    args = [None if s is None else xp.asarray(_a(*s)) for s in shapes]
    live = [i for i, a in enumerate(args) if a is not None]
    c = _a(*shapes[0])

    def call(*a):
        full = list(args)
        for i, v in zip(live, a, strict=True):
            full[i] = v
        return f(*full)

    got = pg.grad(lambda *a: xp.sum(call(*a) * xp.asarray(c)), argnums=tuple(range(len(live))))(
        *[args[i] for i in live]
    )
    _, vjp_fn = pg.vjp(call, *[args[i] for i in live])
    kept = c.copy()
    by_caller = vjp_fn(xp.asarray(kept))
    np.testing.assert_array_equal(kept, c)
    for a, b in zip(got, by_caller, strict=True):
        np.testing.assert_array_equal(_np(a), _np(b))
    # against central differences of the row, one argument at a time
    for k, i in enumerate(live):
        base = _np(args[i])
        num = np.zeros_like(base)
        for j in np.ndindex(base.shape):
            hi, lo = base.copy(), base.copy()
            hi[j] += 1e-6
            lo[j] -= 1e-6
            vals = []
            for v in (hi, lo):
                full = [_np(a) if a is not None else None for a in args]
                full[i] = v
                y = f(*[None if a is None else xp.asarray(a) for a in full])
                vals.append(float(np.sum(_np(y) * c)))
            num[j] = (vals[0] - vals[1]) / 2e-6
        np.testing.assert_allclose(_np(got[k]), num, rtol=1e-6, atol=1e-7)


def test_a_list_cotangent_the_caller_passes_is_never_written():
    """The tape's backward given a multi-output node's cotangents as a list the caller keeps:
    its parts are never owned (the tape copies the list), so never written."""
    from pycograd_xp import _tape

    xp = pg.namespace(np)
    x = xp.asarray(_a(3, 8))
    x.requires_grad_()
    y = xp._layer_norm(x)
    parts = [_a(3, 8), np.zeros((3, 1)), np.zeros((3, 1))]
    kept = [p.copy() for p in parts]
    _tape.backward([(y[0]._node.node, parts)])
    for p, k in zip(parts, kept, strict=True):
        np.testing.assert_array_equal(p, k)
    assert x.grad is not None


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int64, np.uint8])
def test_cross_entropy_vjp_counts_negative_indices_from_the_end_without_reading_them(dtype):
    """The VJP reads no label (the forward refused those out of range): -C..-1 count from the
    last class by a remainder, int8 labels of 200 classes widened first; the gradient is the
    one-hot one, -C and C - 1 included."""
    xp = pg.namespace(np)
    classes = 200 if dtype in (np.int8, np.uint8) else 11
    z = _a(2, 6, classes)
    hi = 127 if dtype is np.int8 else classes - 1
    lo = 0 if dtype is np.uint8 else -min(classes, 128)
    y = np.array([[lo, -1 if lo else 0, 0, 5, hi, lo // 2], [hi, 3, lo, 1, 0, 2]], dtype=dtype)
    g = pg.grad(lambda z: nn.cross_entropy(z, xp.asarray(y), reduction="sum"))(xp.asarray(z))
    p = np.exp(z - z.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    onehot = np.eye(classes)[y.astype(np.int64) % classes]
    np.testing.assert_allclose(_np(g), p - onehot, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(64, 10), (1, 1), (7, 3), (300, 5), (9, 2)])
def test_cross_entropy_gathers_on_numpy_as_the_standard_does_bit_for_bit(dtype, shape):
    """On a NumPy matrix the row picks its rows' labels by integer-array indexing, and its VJP
    subtracts the cotangent at them in place (``dz[i, y[i]] -= g[i]``): the same values, bit
    for bit, as the standard's ``take_along_axis`` and mask (array-api-strict runs those), for
    negative labels, a strided logits view, float32 and float64, one row or one class."""
    n, c = shape
    r = np.random.default_rng(5)
    z = (r.standard_normal((n, 2 * c)) * 4).astype(dtype)[:, ::2]  # (a strided view)
    y = r.integers(-c, c, n)
    w = r.random(n).astype(dtype)  # per-row weights: a cotangent other than a constant
    outs = []
    for m in (np, array_api_strict):
        xp = pg.namespace(m)
        zz, yy, ww = xp.asarray(z), xp.asarray(y), xp.asarray(w)

        def f(zz, yy=yy, ww=ww, xp=xp):
            return xp.sum(nn.cross_entropy(zz, yy, reduction="none") * ww)

        value, g = pg.value_and_grad(f)(zz)
        outs.append((np.asarray(pg.unwrap(value)), np.asarray(pg.unwrap(g))))
    (v_np, g_np), (v_strict, g_strict) = outs
    assert g_np.dtype == dtype
    assert v_np.tobytes() == v_strict.tobytes()
    assert g_np.tobytes() == g_strict.tobytes()


# -- linear: one row, the composition's values bit for bit ----------------------------------------


def _rows_of(f, *args):
    """The row of each array ``f`` makes while differentiated, by its tape node."""
    made = []

    def spy(x, w, b):
        y = f(x, w, b)
        made.append(y._node.prim.name)
        return y._ns.sum(y)

    pg.grad(spy, argnums=(0, 1, 2))(*args)
    return made


@pytest.mark.parametrize("backend", BACKENDS, ids=["numpy", "array_api_strict"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "xs, ws",
    [((5, 3), (3, 4)), ((3,), (3, 2)), ((2, 4, 3), (3, 5)), ((0, 3), (3, 2)), ((6, 1), (1, 1))],
)
def test_linear_is_one_row_with_the_compositions_values_bit_for_bit(backend, dtype, xs, ws):
    """``nn.linear(x, w, b)`` of one namespace and dtype is the ``_linear`` row (one node:
    the product and the bias added into it), whose value and gradients to all three are those
    of ``x @ w + b`` bit for bit: float32 and float64, one example, a stack, no example, a
    transposed view of ``x``; on NumPy also an ``x`` that is a NumPy array (a constant)."""
    r = np.random.default_rng(3)
    xp = pg.namespace(backend)
    X = r.standard_normal(xs[::-1]).astype(dtype).T  # (a transposed view)
    W, B = r.standard_normal(ws).astype(dtype), r.standard_normal(ws[1]).astype(dtype)
    C = r.standard_normal((*xs[:-1], ws[1])).astype(dtype)  # a cotangent other than ones
    x, w, b, c = (xp.asarray(a) for a in (X, W, B, C))

    def fused(x, w, b):
        return xp.sum(nn.linear(x, w, b) * c)

    def composed(x, w, b):
        return xp.sum((x @ w + b) * c)

    assert _rows_of(nn.linear, x, w, b) == ["_linear"]
    want = pg.value_and_grad(composed, argnums=(0, 1, 2))(x, w, b)
    got = pg.value_and_grad(fused, argnums=(0, 1, 2))(x, w, b)
    for a, e in zip([got[0], *got[1]], [want[0], *want[1]], strict=True):
        assert _np(a).dtype == dtype and _np(a).tobytes() == _np(e).tobytes()
    if backend is np:  # a NumPy array beside the namespace's: a constant, as in x @ w
        got = pg.value_and_grad(lambda w, b: fused(X, w, b), argnums=(0, 1))(w, b)
        assert _np(got[0]).tobytes() == _np(want[0]).tobytes()
        for a, e in zip(got[1], want[1][1:], strict=True):
            assert _np(a).tobytes() == _np(e).tobytes()


def test_linear_takes_anything_else_as_the_composition():
    """Another bias shape (one value broadcast, a bias per example), mixed dtypes and no bias
    are ``x @ w + b`` itself, as before the row; a direct call of the row with shapes that are
    no linear layer is refused with the shapes and the way out, and leaves no node behind."""
    xp = pg.namespace(np)
    x, w = xp.asarray(_a(4, 3)), xp.asarray(_a(3, 2))
    for b in (xp.asarray(_a(1)), xp.asarray(_a(4, 2)), xp.asarray(_a(2).astype(np.float32))):
        got = nn.linear(x, w, b)
        np.testing.assert_array_equal(_np(got), _np(x @ w + b))
        assert _rows_of(nn.linear, x, w, b) == ["add"]
    np.testing.assert_array_equal(_np(nn.linear(x, w)), _np(x @ w))
    with pytest.raises(
        ValueError, match=r"_linear\(\): input \(4, 3\), weight \(3, 2\) and bias \(1,\)"
    ):
        xp._linear(x, w, xp.asarray(_a(1)))
    with pytest.raises(ValueError, match="expected x"):
        memory.project(lambda x: xp._linear(x, w, xp.asarray(_a(4, 2))), x)


def test_linear_batches_per_example_weights_and_biases():
    """Under vmap the row batches an input alone as more leading axes, and a weight or bias
    per example through matmul's batching: each as the loop over examples."""
    xp = pg.namespace(np)
    X, W, B = _a(5, 4, 3), _a(5, 3, 2), _a(5, 2)
    for axes in [(0, None, None), (None, 0, None), (None, None, 0), (0, 0, 0), (None, 0, 0)]:
        args = [a if ax is not None else a[0] for a, ax in zip((X, W, B), axes, strict=True)]
        got = pg.vmap(nn.linear, in_axes=axes)(*(xp.asarray(a) for a in args))
        for i in range(5):
            one = [a[i] if ax is not None else a for a, ax in zip(args, axes, strict=True)]
            np.testing.assert_allclose(_np(got)[i], one[0] @ one[1] + one[2], rtol=1e-13)


# -- cross-entropy's mean in its row --------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS, ids=["numpy", "array_api_strict"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(64, 10), (5, 1), (3,), (2, 3, 4), (120, 300)])
def test_cross_entropy_takes_its_mean_in_its_row_bit_for_bit(backend, dtype, shape):
    """``nn.cross_entropy``'s default mean is taken in the row (``mean=True``: its tape has no
    mean node, and its VJP scales the logits' cotangent by one number, the mean's ``g / n``,
    not a broadcast): the value, the gradients and the JVP are those of the losses' mean
    (``reduction='none'`` then ``mean``) bit for bit, for class indices and probabilities,
    float32 and float64, one row, stacked rows and blocks (a (120, 300) float64 block walk)."""
    r = np.random.default_rng(8)
    xp = pg.namespace(backend)
    z = xp.asarray((r.standard_normal(shape) * 3).astype(dtype))
    ids = xp.asarray(r.integers(0, shape[-1], shape[:-1]))
    probs = xp.asarray(r.dirichlet(np.ones(shape[-1]), shape[:-1]).astype(dtype))
    tz = xp.asarray(r.standard_normal(shape).astype(dtype))
    for labels in (ids, probs):

        def fused(z, labels=labels):
            loss = nn.cross_entropy(z, labels)
            assert loss._node.node.prim.name == "_cross_entropy"  # (a select of its outputs)
            return loss

        def composed(z, labels=labels):
            return xp.mean(nn.cross_entropy(z, labels, reduction="none"))

        for how in (pg.value_and_grad, lambda f: lambda z: pg.jvp(f, (z,), (tz,))):
            got, want = how(fused)(z), how(composed)(z)
            for a, e in zip(got, want, strict=True):
                assert _np(a).dtype == dtype and _np(a).tobytes() == _np(e).tobytes()
