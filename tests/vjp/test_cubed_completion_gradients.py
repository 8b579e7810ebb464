"""Gradients through what cubed_plugin adds to Cubed (fft, sort, linalg) and through strided
slices on Cubed: lazy to build, equal to finite differences and to NumPy-backend gradients for
several chunkings, and second order through basic indexing."""

from __future__ import annotations

import numpy as np
import pytest

import pycograd_xp as pg
from conformance.gradcheck import check_vjp, to_numpy

cubed = pytest.importorskip("cubed")


def spd(rng, shape):
    m = rng.standard_normal(shape)
    return m @ np.swapaxes(m, -1, -2) + shape[-1] * np.eye(shape[-1])


def real_loss(xp, y, seed=0):
    """A real scalar that weighs every element (real and imaginary parts) of ``y``."""
    rng = np.random.default_rng(seed)
    w = xp.asarray(rng.standard_normal(tuple(y.shape)))
    if xp.isdtype(y.dtype, "complex floating"):
        v = xp.asarray(rng.standard_normal(tuple(y.shape)))
        return xp.sum(xp.real(y) * w + xp.imag(y) * v)
    return xp.sum(y * w)


# (label, f(xp) -> function, input maker(rng) -> numpy array)
CPLX = lambda rng: rng.standard_normal((4, 6)) + 1j * rng.standard_normal((4, 6))
REAL = lambda rng: rng.standard_normal((4, 6))
TIES = lambda rng: rng.permutation(24).reshape(4, 6) / 7.0
SPD = lambda rng: spd(rng, (3, 4, 4))


def SINGULAR(rng):  # an input maker, like the others
    """A stack of a rank-3, a rank-2 and a regular 4 x 4 matrix."""
    a = rng.standard_normal((3, 4, 4))
    a[0, 3] = a[0, 0] - 2.0 * a[0, 1]
    a[1, :, 2] = a[1, :, 3] = a[1, :, 0]
    return a


CASES = [
    ("fft", lambda xp: lambda x: xp.fft.fft(x), CPLX),
    ("ifft n axis 0", lambda xp: lambda x: xp.fft.ifft(x, n=6, axis=0, norm="ortho"), CPLX),
    ("fftn s", lambda xp: lambda x: xp.fft.fftn(x, s=(3, 8), axes=(0, 1)), CPLX),
    ("ifftn", lambda xp: lambda x: xp.fft.ifftn(x, norm="forward"), CPLX),
    ("rfft", lambda xp: lambda x: xp.fft.rfft(x), REAL),
    ("irfft", lambda xp: lambda x: xp.fft.irfft(x), CPLX),
    ("rfftn", lambda xp: lambda x: xp.fft.rfftn(x), REAL),
    ("irfftn", lambda xp: lambda x: xp.fft.irfftn(x, s=(4, 7), axes=(0, 1)), CPLX),
    ("hfft", lambda xp: lambda x: xp.fft.hfft(x, axis=0), CPLX),
    ("ihfft", lambda xp: lambda x: xp.fft.ihfft(x), REAL),
    ("fftshift", lambda xp: lambda x: xp.fft.fftshift(x * x), REAL),
    ("ifftshift", lambda xp: lambda x: xp.fft.ifftshift(x, axes=(0,)), CPLX),
    ("sort", lambda xp: lambda x: xp.sort(x), TIES),
    ("sort axis 0 descending", lambda xp: lambda x: xp.sort(x, axis=0, descending=True), TIES),
    ("inv", lambda xp: lambda x: xp.linalg.inv(x), SPD),
    ("det", lambda xp: lambda x: xp.linalg.det(x), SPD),
    ("slogdet", lambda xp: lambda x: xp.linalg.slogdet(x).logabsdet, SPD),
    # symmetric-matrix functions see x through a symmetric expression (their rules symmetrize)
    ("cholesky", lambda xp: lambda x: xp.linalg.cholesky(x @ x.mT + 4.0 * xp.eye(4)), SPD),
    (
        "eigh",
        lambda xp: lambda x: (lambda w, v: w * v[..., 0, :] ** 2)(*xp.linalg.eigh(x + x.mT)),
        SPD,
    ),
    ("eigvalsh", lambda xp: lambda x: xp.linalg.eigvalsh(x + x.mT), SPD),
    ("solve", lambda xp: lambda x: xp.linalg.solve(x, x[..., :2] + 1.0), SPD),
    ("solve vector", lambda xp: lambda x: xp.linalg.solve(x[0], x[1, 0]), SPD),
    ("matrix_power", lambda xp: lambda x: xp.linalg.matrix_power(x, 2), SPD),
    ("pinv", lambda xp: lambda x: xp.linalg.pinv(x[..., :3]), SPD),
    ("cross", lambda xp: lambda x: xp.linalg.cross(x[..., :3], x[..., 1:], axis=-1), SPD),
    ("matrix_norm fro", lambda xp: lambda x: xp.linalg.matrix_norm(x), SPD),
    ("matrix_norm 1", lambda xp: lambda x: xp.linalg.matrix_norm(x, ord=1), SPD),
    ("vector_norm 3", lambda xp: lambda x: xp.linalg.vector_norm(x, axis=(0, 2), ord=3), SPD),
    ("trace", lambda xp: lambda x: xp.linalg.trace(x, offset=1), SPD),
    ("diagonal", lambda xp: lambda x: xp.linalg.diagonal(x, offset=-1), SPD),
    ("strided slice", lambda xp: lambda x: x[::2, 1:6:3] ** 2, REAL),
    ("strided and int", lambda xp: lambda x: x[1, ::4] * x[1:4:2, 0][1], REAL),
    # det's gradient is the cofactor matrix, singular matrices included (lazily: by the SVD)
    ("det of singular matrices", lambda xp: lambda x: xp.linalg.det(x), SINGULAR),
]
IDS = [c[0] for c in CASES]


@pytest.mark.parametrize("label, f, make", CASES, ids=IDS)
def test_vjp_matches_finite_differences_on_cubed(cxp, label, f, make):
    check_vjp(cxp, f(cxp), make(np.random.default_rng(0)))


# chunkings of the (4, 6) and (3, 4, 4) inputs: core axes split (rechunked inside), batch split
CHUNKINGS = {(4, 6): [(2, 3), (4, 2)], (3, 4, 4): [(1, 4, 4), (2, 2, 3)]}


def test_gradients_on_chunked_inputs_lazy_and_equal_to_numpy(cxp):
    nxp = pg.namespace(np)
    rng = np.random.default_rng(1)
    inputs = [make(rng) for _, _, make in CASES]
    with cubed.raise_if_computes():  # forward and backward build a plan, nothing runs
        grads = []
        for i, ((_, f, _), a) in enumerate(zip(CASES, inputs, strict=True)):
            x = cxp.asarray(cubed.from_array(a, chunks=CHUNKINGS[a.shape][i % 2]))
            grads.append(pg.grad(lambda x, f=f: real_loss(cxp, f(cxp)(x)))(x))
    # one plan per case: Cubed's planning of all of them at once is slower than the compute
    for (label, f, _), a, g in zip(CASES, inputs, grads, strict=True):
        want = to_numpy(pg.grad(lambda x, f=f: real_loss(nxp, f(nxp)(x)))(nxp.asarray(a)))
        np.testing.assert_allclose(
            pg.unwrap(g).compute(), want, rtol=1e-9, atol=1e-12, err_msg=label
        )


def test_strided_slice_cotangent_keeps_sensible_chunks(cxp):
    a = np.arange(1.0, 101.0)
    x = cxp.asarray(cubed.from_array(a, chunks=10))
    with cubed.raise_if_computes():
        g = pg.grad(lambda x: cxp.sum(x[1:90:3] ** 2))(x)
        one = pg.grad(lambda x: x[57] * 2.0)(x)
    assert max(pg.unwrap(g).chunks[0]) >= 10 and len(pg.unwrap(g).chunks[0]) <= 10
    # the zeros take x's chunks, not one-element ones
    assert pg.unwrap(one).chunks == pg.unwrap(x).chunks
    want = np.zeros(100)
    want[1:90:3] = 2 * a[1:90:3]
    got, got_one = cubed.compute(pg.unwrap(g), pg.unwrap(one))
    np.testing.assert_allclose(got, want)
    assert got_one[57] == 2.0 and got_one.sum() == 2.0


@pytest.mark.parametrize("chunks", [20, 7, 2])
def test_second_order_through_basic_indexing(cxp, chunks):
    a = np.linspace(0.5, 2.0, 20)
    nxp = pg.namespace(np)

    def hess_diag(xp, x):
        inner = lambda y: xp.sum(y[0:2] ** 3) + xp.sum(y[3:17:4] ** 3)
        return pg.grad(lambda x: xp.sum(pg.grad(inner)(x) * x))(x)

    x = cxp.asarray(cubed.from_array(a, chunks=chunks))
    with cubed.raise_if_computes():
        h = hess_diag(cxp, x)
    want = to_numpy(hess_diag(nxp, nxp.asarray(a)))  # 9 x^2 at the picked elements
    expected = np.zeros(20)
    expected[0:2] = 9 * a[0:2] ** 2
    expected[3:17:4] = 9 * a[3:17:4] ** 2
    np.testing.assert_allclose(want, expected)
    np.testing.assert_allclose(pg.unwrap(h).compute(), want)


def test_pad_back_any_step_any_chunking(cxp):
    """The immutable-backend backward of ``x[key]`` on raw Cubed, for steps of either sign and
    several chunkings of the cotangent and of ``x`` (negative steps: Cubed's own indexing
    refuses them, other immutable backends may not)."""
    from pycograd_xp.ops.indexing import _pad_back

    bk = cxp._backend.xp
    cases = []
    for n in (1, 13):
        a = np.arange(1.0, n + 1.0)
        keys = [
            slice(None, None, 2),
            slice(1, 7, 3),
            slice(n - 1, None, 4),
            slice(3, 9),
            slice(5, 2, 2),
            slice(None, None, -1),
            slice(8, 1, -3),
        ]
        for i, k in enumerate(keys):
            sel = a[k] * 10
            gc = (1, 3, max(sel.size, 1))[i % 3]
            xc = None if i % 2 else ((3, 3, 3, 3, 1),) if n == 13 else ((1,),)
            cases.append((cubed.from_array(sel, chunks=gc), (n,), (k,), xc))
    b = np.arange(1.0, 73.0).reshape(8, 9)
    for key, gch in [
        ((slice(None, None, 2), slice(1, None, 3)), (1, 1)),
        ((slice(1, 7, 2), 3), (2,)),
        ((2, slice(None, None, -4)), (2,)),
    ]:
        cases.append((cubed.from_array(b[key], chunks=gch), b.shape, key, ((4, 4), (3, 3, 3))))
    for g, shape, key, xc in cases:
        want = np.zeros(shape)
        want[key] = np.asarray(g.compute())
        got = _pad_back(bk, g, shape, key, xc).compute()
        np.testing.assert_array_equal(got, want, err_msg=str(key))
