"""Gradients on Cubed through the options Cubed 0.27 lacks or gets wrong (issue 39):
``include_initial`` (the VJPs of take, take_along_axis, prod), ``conj`` of real arrays (vecdot),
negative slice steps, ``axis=None`` scans of 1-D arrays, ``roll`` without an axis or along
negative axes, reshapes across chunks, integer indices as long as their axis (Cubed returned the
array unchanged), constants beside a user's Spec: values and gradients equal NumPy's, for chunks
of 1 and chunks that do not divide."""

from __future__ import annotations

import numpy as np
import pytest

import pycograd_xp as pg

cubed = pytest.importorskip("cubed")

CASES = {
    "take": lambda xp, a, b: xp.sum(xp.take(a, xp.asarray([2, 0, 0]), axis=0) ** 2),
    "take a permutation": lambda xp, a, b: xp.sum(xp.take(a, xp.asarray([3, 1, 0, 2]), axis=0) * b),
    "take_along_axis": lambda xp, a, b: xp.sum(
        xp.take_along_axis(a, xp.argsort(b, axis=1), axis=1) ** 2 * b
    ),
    "integer-array index": lambda xp, a, b: xp.sum(a[:, xp.asarray([2, 2, 0])] ** 2),
    "prod": lambda xp, a, b: xp.sum(xp.prod(a, axis=0)),
    "vecdot": lambda xp, a, b: xp.sum(xp.vecdot(a, b)),
    "linalg.vecdot": lambda xp, a, b: xp.sum(xp.linalg.vecdot(a, b, axis=0)),
    "cumulative_sum 1-D axis None": lambda xp, a, b: xp.sum(xp.cumulative_sum(a[0]) ** 2),
    "cumulative_prod include_initial": lambda xp, a, b: xp.sum(
        xp.cumulative_prod(a, axis=1, include_initial=True) * 2.0
    ),
    "negative steps": lambda xp, a, b: xp.sum(a[::-1, ::2] * b[::-1, ::2] + a[-1:0:-2, 2]),
    "reshape across chunks": lambda xp, a, b: xp.sum(
        xp.reshape(a, (3, 4)) * xp.reshape(b, (3, 4)) ** 2
    ),
    "roll axis None": lambda xp, a, b: xp.sum(xp.roll(a, 5) * b) + xp.sum(xp.roll(a[1:], -2) ** 2),
    "roll negative axes": lambda xp, a, b: xp.sum(
        xp.roll(a, 7, axis=-1) * b + xp.roll(a, (1, -2), axis=(-2, 1)) ** 2
    ),
    "constants": lambda xp, a, b: xp.sum((a[:3] + xp.eye(3)) ** 2 * xp.asarray(np.arange(3.0))),
}


@pytest.mark.parametrize("chunks", [(1, 1), (3, 2)], ids=str)
@pytest.mark.parametrize("name", list(CASES))
def test_values_and_gradients_are_numpys(cxp, tmp_path, name, chunks):
    f = CASES[name]
    rng = np.random.default_rng(0)
    a_np, b_np = rng.uniform(0.5, 1.5, (4, 3)), rng.standard_normal((4, 3))
    spec = cubed.Spec(work_dir=str(tmp_path), allowed_mem="100MB")
    a = cxp.asarray(cubed.from_array(a_np, chunks=chunks, spec=spec))
    b = cxp.asarray(cubed.from_array(b_np, chunks=(2, 3), spec=spec))
    v, g = pg.value_and_grad(lambda a: f(cxp, a, b))(a)
    got = cubed.compute(pg.unwrap(v), pg.unwrap(g))
    nxp = pg.namespace(np)
    wv, wg = pg.value_and_grad(lambda a: f(nxp, a, nxp.asarray(b_np)))(nxp.asarray(a_np))
    np.testing.assert_allclose(got[0], pg.unwrap(wv), rtol=1e-12)
    np.testing.assert_allclose(got[1], pg.unwrap(wg), rtol=1e-12, atol=1e-14)


def test_a_reshape_too_large_for_one_chunk_is_refused_before_computing(cxp, tmp_path):
    spec = cubed.Spec(work_dir=str(tmp_path), allowed_mem="100kB")
    x = cxp.asarray(cubed.from_array(np.ones((300, 70)), chunks=(7, 9), spec=spec))
    with cubed.raise_if_computes(), pytest.raises(NotImplementedError, match="allowed_mem"):
        cxp.reshape(x, (70, 300))


def test_cumulative_sum_of_several_axes_without_an_axis_names_the_way_out(cxp):
    x = cxp.asarray(cubed.from_array(np.ones((3, 4)), chunks=2))
    with pytest.raises(ValueError, match="axis must be given"):
        cxp.cumulative_sum(x)
