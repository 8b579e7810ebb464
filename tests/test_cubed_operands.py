"""Operands chunked differently, constants beside a user's Spec, and the factorizations on any
chunking: namespace(cubed) gives NumPy's numbers (issue 39's examples, and their neighbours)."""

from __future__ import annotations

import numpy as np
import pytest

import pycograd_xp as pg

cubed = pytest.importorskip("cubed")


def chunked(xc, a, chunks, spec=None):
    return xc.asarray(cubed.from_array(a, chunks=chunks, spec=spec))


def values(*arrays):
    return cubed.compute(*(pg.unwrap(a) for a in arrays))


def test_stack_of_differently_chunked_operands_is_numpys(cxp):
    """Cubed 0.27's stack takes the first array's chunks for every input (values off by 2.2 on
    issue 39's example, an IndexError on the next op)."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 2)), rng.standard_normal((3, 2))
    s = cxp.stack([chunked(cxp, a, (3, 2)), chunked(cxp, b, (1, 2))])
    got, after = values(s, cxp.sum(s * s, axis=1))
    np.testing.assert_array_equal(got, np.stack([a, b]))
    np.testing.assert_allclose(after, np.sum(np.stack([a, b]) ** 2, axis=1))


CHUNKS = [(1, 1), (2, 3), (5, 4), (3, 1), (4, 2)]


@pytest.mark.parametrize("axis", [0, 1])
def test_stack_and_concat_on_every_pair_of_chunkings(cxp, axis):
    rng = np.random.default_rng(1)
    a, b, c = (rng.standard_normal((5, 4)) for _ in range(3))
    outs, wants = [], []
    # each chunking next to each other one, first and second
    for i, ca in enumerate(CHUNKS):
        cb, cc = CHUNKS[(i + 1) % len(CHUNKS)], CHUNKS[(i + 3) % len(CHUNKS)]
        x, y, z = chunked(cxp, a, ca), chunked(cxp, b, cb), chunked(cxp, c, cc)
        outs += [cxp.stack([x, y, z], axis=axis), cxp.concat([x, y, z], axis=axis)]
        wants += [np.stack([a, b, c], axis=axis), np.concat([a, b, c], axis=axis)]
    for got, want in zip(values(*outs), wants, strict=True):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "shape, chunks, dtype",
    [((6, 2), (1, 2), np.float64), ((4, 4), (4, 1), np.float32), ((6, 2), (5, 2), np.float64)]
    + [((6, 3), c, np.float64) for c in [(1, 1), (2, 2), (4, 3), (6, 1)]]
    + [((3, 5), (1, 2), np.float64), ((2, 4, 3), (1, 1, 2), np.float64)],
    ids=str,
)
def test_factorizations_on_any_chunking_are_numpys(cxp, shape, chunks, dtype):
    """Cubed's tall-and-skinny QR needs one column chunk and row blocks of at least n rows; on
    other chunkings it gave twice NumPy's singular values, others, or failed."""
    a = np.random.default_rng(2).standard_normal(shape).astype(dtype)
    x = chunked(cxp, a, chunks)
    q, r = cxp.linalg.qr(x)
    u, s, vh = cxp.linalg.svd(x, full_matrices=False)
    got = values(cxp.linalg.svdvals(x), q, r, u, s, vh)
    want = [np.linalg.svdvals(a), *np.linalg.qr(a), *np.linalg.svd(a, full_matrices=False)]
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


def test_a_tall_matrix_larger_than_a_task_goes_through_the_tall_and_skinny_qr(cxp, tmp_path):
    """Too large for one NumPy call per task: Cubed's TSQR, rechunked to row blocks of at least
    n rows and one column chunk; the singular values and R's magnitudes are NumPy's."""
    spec = cubed.Spec(work_dir=str(tmp_path), allowed_mem="40kB")
    a = np.random.default_rng(3).standard_normal((120, 5))
    x = chunked(cxp, a, (9, 3), spec)  # two column chunks; 120 = 13 * 9 + 3: a last block of 3
    q, r = cxp.linalg.qr(x)
    s, rq = values(cxp.linalg.svdvals(x), q @ r)
    np.testing.assert_allclose(s, np.linalg.svdvals(a), rtol=1e-12)
    np.testing.assert_allclose(rq, a, atol=1e-12)


def test_a_tall_and_skinny_chunking_that_cannot_fit_is_refused_before_computing(cxp, tmp_path):
    spec = cubed.Spec(work_dir=str(tmp_path), allowed_mem="100kB")
    x = chunked(cxp, np.ones((4000, 200)), (100, 100), spec)
    with cubed.raise_if_computes(), pytest.raises(NotImplementedError, match="allowed_mem"):
        cxp.linalg.svdvals(x)


@pytest.mark.parametrize(
    "make",
    [
        lambda xc, x: x @ xc.eye(3),
        lambda xc, x: x + xc.asarray(np.arange(3.0)),
        lambda xc, x: xc.stack([x[0], xc.zeros(3)]),
        lambda xc, x: xc.where(x > 0, x, xc.arange(3.0)),
        lambda xc, x: xc.concat([xc.ones((1, 3)), x]),
    ],
    ids=["eye", "asarray", "zeros", "arange", "ones"],
)
def test_constants_take_the_spec_of_the_arrays_they_meet(cxp, tmp_path, make):
    spec = cubed.Spec(work_dir=str(tmp_path), allowed_mem="100MB")
    a = np.random.default_rng(4).standard_normal((3, 3))
    x = chunked(cxp, a, (2, 2), spec)
    out = make(cxp, x)
    assert pg.unwrap(out).spec == spec
    want = make(pg.namespace(np), pg.namespace(np).asarray(a))
    np.testing.assert_array_equal(values(out)[0], pg.unwrap(want))


def test_two_specs_of_a_users_still_refuse(cxp, tmp_path):
    s1 = cubed.Spec(work_dir=str(tmp_path / "1"), allowed_mem="100MB")
    s2 = cubed.Spec(work_dir=str(tmp_path / "2"), allowed_mem="100MB")
    x, y = chunked(cxp, np.ones(3), 2, s1), chunked(cxp, np.ones(3), 2, s2)
    with pytest.raises(ValueError, match="same spec"):
        values(cxp.stack([x, y]))
