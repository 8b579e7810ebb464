"""What cubed_plugin adds to Cubed 0.27 (fft, sort/argsort/take_along_axis, linalg): values
equal to NumPy's for several chunkings (the non-core axes in several chunks too), nothing
computed while building, and errors that name the chunking and memory that would work."""

from __future__ import annotations

import numpy as np
import pytest

import pycograd_xp

cubed = pytest.importorskip("cubed")


def lazy(cxp, a, chunks, spec=None):
    return cxp.asarray(cubed.from_array(a, chunks=chunks, spec=spec))


def check_all(cases):
    """Compute every case in one plan; compare values, shapes and dtypes with NumPy."""
    got = cubed.compute(*(pycograd_xp.unwrap(c[1]) for c in cases))
    for (label, _, want), g in zip(cases, got, strict=True):
        want = np.asarray(want)
        assert g.shape == want.shape, (label, g.shape, want.shape)
        assert g.dtype == want.dtype, (label, g.dtype, want.dtype)
        np.testing.assert_allclose(g, want, rtol=1e-10, atol=1e-12, err_msg=label)


def test_augmented_namespace_is_cubed_completed(cxp):
    xp = cxp._backend.xp
    assert xp is pycograd_xp.namespace(cubed)._backend.xp  # created once
    assert xp.__name__ == "cubed" and cxp.__name__ == "pycograd_xp.cubed"
    assert xp.__array_api_version__ == cubed.__array_api_version__
    assert xp.__array_namespace_info__ is cubed.__array_namespace_info__
    # forwarded: Cubed's own function, behind the step that gives its operands one Spec
    # (cubed_plugin._operands)
    assert xp.sum.__wrapped__ is cubed.sum and xp.linalg.matmul is cubed.linalg.matmul
    assert callable(xp.sort) and callable(xp.fft.rfftn) and callable(xp.linalg.inv)
    assert not hasattr(xp, "unique_values") and not hasattr(cubed, "sort")  # cubed untouched
    assert {"sort", "fft", "linalg"} <= set(dir(xp))


FFT_SHAPE = (6, 10)


@pytest.mark.parametrize("chunks", [(6, 10), (2, 3), (4, 10), (6, 4)], ids=str)
def test_fft_values_match_numpy(cxp, chunks):
    rng = np.random.default_rng(0)
    r = rng.standard_normal(FFT_SHAPE)
    c = r + 1j * rng.standard_normal(FFT_SHAPE)
    x, xr = lazy(cxp, c, chunks), lazy(cxp, r, chunks)
    f = cxp.fft
    with cubed.raise_if_computes():
        cases = [
            ("fft", f.fft(x), np.fft.fft(c)),
            (
                "fft axis 0 n ortho",
                f.fft(x, axis=0, n=8, norm="ortho"),
                np.fft.fft(c, axis=0, n=8, norm="ortho"),
            ),
            (
                "ifft forward n<len",
                f.ifft(x, n=7, norm="forward"),
                np.fft.ifft(c, n=7, norm="forward"),
            ),
            ("fftn", f.fftn(x), np.fft.fftn(c)),
            ("fftn s", f.fftn(x, s=(3, 12)), np.fft.fftn(c, s=(3, 12), axes=(0, 1))),
            ("ifftn axes", f.ifftn(x, axes=(0,)), np.fft.ifftn(c, axes=(0,))),
            ("rfft", f.rfft(xr), np.fft.rfft(r)),
            ("rfft axis 0 n", f.rfft(xr, axis=0, n=5), np.fft.rfft(r, axis=0, n=5)),
            ("irfft n", f.irfft(x, n=9), np.fft.irfft(c, n=9)),
            ("irfft axis 0", f.irfft(x, axis=0), np.fft.irfft(c, axis=0)),
            ("rfftn", f.rfftn(xr), np.fft.rfftn(r)),
            ("rfftn s", f.rfftn(xr, s=(4, 7)), np.fft.rfftn(r, s=(4, 7), axes=(0, 1))),
            ("irfftn", f.irfftn(x), np.fft.irfftn(c)),
            (
                "irfftn s ortho",
                f.irfftn(x, s=(5, 9), norm="ortho"),
                np.fft.irfftn(c, s=(5, 9), axes=(0, 1), norm="ortho"),
            ),
            ("hfft axis 0", f.hfft(x, axis=0), np.fft.hfft(c, axis=0)),
            ("ihfft", f.ihfft(xr), np.fft.ihfft(r)),
            ("fftshift", f.fftshift(x), np.fft.fftshift(c)),
            ("ifftshift axes", f.ifftshift(x, axes=(1,)), np.fft.ifftshift(c, axes=(1,))),
            ("fftfreq", f.fftfreq(7, d=0.5), np.fft.fftfreq(7, d=0.5)),
            ("rfftfreq", f.rfftfreq(8), np.fft.rfftfreq(8)),
        ]
    check_all(cases)


def test_fft_single_precision_and_freq_dtype(cxp):
    a = np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)
    x = lazy(cxp, a, (2, 3))
    with cubed.raise_if_computes():
        cases = [
            ("rfft float32", cxp.fft.rfft(x), np.fft.rfft(a).astype(np.complex64)),
            (
                "fftn float32",
                cxp.fft.fftn(cxp.astype(x, cxp.complex64)),
                np.fft.fftn(a).astype(np.complex64),
            ),
            (
                "fftfreq float32",
                cxp.fft.fftfreq(5, dtype=cxp.float32),
                np.fft.fftfreq(5).astype(np.float32),
            ),
        ]
    got = cubed.compute(*(pycograd_xp.unwrap(c[1]) for c in cases))
    for (label, _, want), g in zip(cases, got, strict=True):
        assert g.dtype == want.dtype, label
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-5, err_msg=label)


@pytest.mark.parametrize("chunks", [(5, 8), (2, 3), (5, 3)], ids=str)
def test_sort_argsort_take_along_axis_match_numpy(cxp, chunks):
    rng = np.random.default_rng(2)
    a = rng.integers(0, 4, (5, 8)).astype(np.float64)  # many ties: stability shows
    x = lazy(cxp, a, chunks)
    with cubed.raise_if_computes():
        p = cxp.argsort(x, axis=0)
        cases = [
            ("sort", cxp.sort(x), np.sort(a, kind="stable")),
            (
                "sort axis 0 descending",
                cxp.sort(x, axis=0, descending=True),
                -np.sort(-a, axis=0, kind="stable"),
            ),
            ("argsort", cxp.argsort(x), np.argsort(a, kind="stable")),
            (
                "argsort descending stable",
                cxp.argsort(x, descending=True),
                np.flip(7 - np.argsort(np.flip(a, -1), axis=-1, kind="stable"), -1),
            ),
            ("take_along_axis", cxp.take_along_axis(x, p, axis=0), np.sort(a, axis=0)),
            (
                "take_along_axis broadcast",
                cxp.take_along_axis(x, p[:1], axis=0),
                np.take_along_axis(a, np.argsort(a, axis=0, kind="stable")[:1], axis=0),
            ),
        ]
    check_all(cases)


def spd(rng, shape):
    m = rng.standard_normal(shape)
    return m @ np.swapaxes(m, -1, -2) + shape[-1] * np.eye(shape[-1])


@pytest.mark.parametrize("chunks", [(5, 4, 4), (2, 4, 4), (2, 2, 3)], ids=str)
def test_linalg_values_match_numpy(cxp, chunks):
    rng = np.random.default_rng(3)
    a, b, v = spd(rng, (5, 4, 4)), rng.standard_normal((5, 4, 2)), rng.standard_normal(4)
    x, bb = lazy(cxp, a, chunks), lazy(cxp, b, (2, 4, 1))
    la, inf = cxp.linalg, np.inf
    with cubed.raise_if_computes():
        w, vecs = la.eigh(x)
        sign, logdet = la.slogdet(x)
        cases = [
            ("inv", la.inv(x), np.linalg.inv(a)),
            ("det", la.det(x), np.linalg.det(a)),
            ("slogdet sign", sign, np.linalg.slogdet(a).sign),
            ("slogdet log", logdet, np.linalg.slogdet(a).logabsdet),
            ("eigh values", w, np.linalg.eigh(a).eigenvalues),
            (
                "eigh vectors reconstruct",
                (vecs * w[..., None, :]) @ cxp.linalg.matrix_transpose(vecs),
                a,
            ),
            ("eigvalsh", la.eigvalsh(x), np.linalg.eigvalsh(a)),
            ("cholesky", la.cholesky(x), np.linalg.cholesky(a)),
            ("cholesky upper", la.cholesky(x, upper=True), np.linalg.cholesky(a, upper=True)),
            ("solve", la.solve(x, bb), np.linalg.solve(a, b)),
            ("solve vector", la.solve(x, cxp.asarray(v)), np.linalg.solve(a, v)),
            ("solve broadcast", la.solve(x[:1], bb), np.linalg.solve(a[:1], b)),
            ("matrix_norm fro", la.matrix_norm(x), np.linalg.matrix_norm(a)),
            (
                "matrix_norm 1 keepdims",
                la.matrix_norm(x, ord=1, keepdims=True),
                np.linalg.matrix_norm(a, ord=1, keepdims=True),
            ),
            ("matrix_norm -inf", la.matrix_norm(x, ord=-inf), np.linalg.matrix_norm(a, ord=-inf)),
            ("matrix_norm 2", la.matrix_norm(x, ord=2), np.linalg.matrix_norm(a, ord=2)),
            (
                "matrix_norm nuc keepdims",
                la.matrix_norm(x, ord="nuc", keepdims=True),
                np.linalg.matrix_norm(a, ord="nuc", keepdims=True),
            ),
            (
                "vector_norm axes",
                la.vector_norm(x, axis=(0, 2)),
                np.linalg.vector_norm(a, axis=(0, 2)),
            ),
            (
                "vector_norm 3 keepdims",
                la.vector_norm(x, ord=3, keepdims=True),
                np.linalg.vector_norm(a, ord=3, keepdims=True),
            ),
            (
                "vector_norm 0",
                la.vector_norm(x, ord=0, axis=1),
                np.linalg.vector_norm(a, ord=0, axis=1),
            ),
            (
                "vector_norm inf",
                la.vector_norm(x, ord=inf, axis=-1),
                np.linalg.vector_norm(a, ord=inf, axis=-1),
            ),
            ("diagonal", la.diagonal(x), np.linalg.diagonal(a)),
            ("diagonal 1", la.diagonal(x, offset=1), np.linalg.diagonal(a, offset=1)),
            ("diagonal -2", la.diagonal(x, offset=-2), np.linalg.diagonal(a, offset=-2)),
            ("trace -1", la.trace(x, offset=-1), np.linalg.trace(a, offset=-1)),
            ("svdvals stack", la.svdvals(x), np.linalg.svdvals(a)),
        ]
    check_all(cases)


def test_more_linalg_values_match_numpy(cxp):
    rng = np.random.default_rng(6)
    a, r = rng.standard_normal((5, 4, 4)), rng.standard_normal((5, 4, 3))
    v = rng.standard_normal((5, 3))
    x, xr = lazy(cxp, a, (2, 2, 3)), lazy(cxp, r, (2, 4, 1))
    la, tol = cxp.linalg, np.array([0.1, 0.2, 0.3, 0.4, 0.9])
    with cubed.raise_if_computes():
        cases = [
            ("eigvals", la.eigvals(x), np.linalg.eigvals(a).astype(np.complex128)),
            ("eig values", la.eig(x).eigenvalues, np.linalg.eig(a)[0].astype(np.complex128)),
            ("matrix_power 3", la.matrix_power(x, 3), np.linalg.matrix_power(a, 3)),
            ("matrix_power -2", la.matrix_power(x, -2), np.linalg.matrix_power(a, -2)),
            ("pinv", la.pinv(xr), np.linalg.pinv(r)),
            ("pinv rtol array", la.pinv(xr, rtol=cxp.asarray(tol)), np.linalg.pinv(r, rtol=tol)),
            ("matrix_rank rtol", la.matrix_rank(xr, rtol=0.5), np.linalg.matrix_rank(r, rtol=0.5)),
            (
                "cross broadcast",
                la.cross(lazy(cxp, v, (2, 2)), cxp.asarray(v[0])),
                np.cross(v, v[0]),
            ),
            (
                "cross axis 0",
                la.cross(lazy(cxp, v.T, (2, 2)), cxp.asarray(v.T[::-1]), axis=0),
                np.cross(v.T, v.T[::-1], axis=0),
            ),
        ]
    check_all(cases)


@pytest.mark.parametrize("chunks", [(7, 9), (3, 4), (2, 9), (7, 2)], ids=str)
def test_diagonal_reads_only_crossed_blocks_any_chunking(cxp, chunks):
    a = np.arange(63.0).reshape(7, 9)
    x = lazy(cxp, a, chunks)
    with cubed.raise_if_computes():
        cases = [
            (f"offset {k}", cxp.linalg.diagonal(x, offset=k), np.diagonal(a, offset=k))
            for k in (-6, -2, 0, 1, 5, 8)
        ]
        cases.append(
            (
                "trace int",
                cxp.linalg.trace(cxp.astype(x, cxp.int64), offset=2),
                np.trace(a.astype(np.int64), offset=2),
            )
        )
    check_all(cases)


def test_multi_chunk_core_axes_are_rechunked_and_batch_chunks_kept(cxp):
    a = np.random.default_rng(4).standard_normal((40, 30)) + 0j
    x = lazy(cxp, a, (10, 7))  # the transformed axis 1 in 5 chunks
    y = cxp.fft.fft(x)
    assert pycograd_xp.unwrap(y).chunks == ((10,) * 4, (30,))  # axis 1 whole; axis 0's chunks kept
    np.testing.assert_allclose(pycograd_xp.unwrap(y).compute(), np.fft.fft(a))


def test_batch_chunks_shrink_to_fit_allowed_mem(tmp_path, cxp):
    spec = cubed.Spec(work_dir=str(tmp_path), allowed_mem="2MB", reserved_mem=0)
    a = np.random.default_rng(5).standard_normal((64, 512)) + 0j  # 512 kB
    x = lazy(cxp, a, (64, 64), spec=spec)
    y = cxp.fft.fft(x)  # a (64, 512) complex block with temporaries would need ~ 8 MB
    assert pycograd_xp.unwrap(y).chunksize[1] == 512 and pycograd_xp.unwrap(y).chunksize[0] < 64
    assert cubed.plan(pycograd_xp.unwrap(y)).max_projected_mem <= 2_000_000
    np.testing.assert_allclose(pycograd_xp.unwrap(y).compute(), np.fft.fft(a))


@pytest.mark.parametrize(
    "call, fix",
    [
        (lambda xp, x: xp.fft.fft(x), r"transformed axis 1 whole.*\{1: 200000, 0: 1\}"),
        (lambda xp, x: xp.sort(xp.real(x)), r"sorted axis 1 whole.*\{1: 200000, 0: 1\}"),
        (
            lambda xp, x: xp.linalg.matrix_norm(xp.reshape(x, (2, 400, 500)), ord=2),
            r"two matrix axes whole.*\{1: 400, 2: 500, 0: 1\}",
        ),
    ],
    ids=["fft", "sort", "matrix_norm"],
)
def test_too_large_core_axes_name_the_chunking_and_memory(tmp_path, cxp, call, fix):
    spec = cubed.Spec(work_dir=str(tmp_path), allowed_mem="1MB", reserved_mem=0)
    x = cxp.asarray(cubed.ones((2, 200_000), chunks=(1, 10_000), dtype=cubed.complex128, spec=spec))
    with cubed.raise_if_computes():
        with pytest.raises(NotImplementedError, match=fix) as err:
            call(cxp, x)
    assert "allowed_mem" in str(err.value) and "cubed.rechunk(x" in str(err.value)


def test_zero_size_inputs(cxp):
    e = cxp.asarray(cubed.from_array(np.zeros((0, 3, 3))))
    assert cxp.linalg.inv(e).shape == (0, 3, 3)
    assert cxp.sort(cxp.asarray(cubed.from_array(np.zeros((4, 0)))), axis=0).shape == (4, 0)
    np.testing.assert_array_equal(
        pycograd_xp.unwrap(
            cxp.linalg.det(cxp.asarray(cubed.from_array(np.zeros((2, 0, 0)))))
        ).compute(),
        [1.0, 1.0],
    )
