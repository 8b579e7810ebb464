"""xarray on arrays of ``namespace(numpy)``: its reductions, median, quantile, groupby, rolling
windows differentiate; the namespace serves NumPy's names from the frontend's tables; NumPy index
arrays are constant indices."""

from __future__ import annotations

import numpy as np
import pytest
from _numpy_common import XP, S, U, _np, check_grad

import pycograd_xp as pg

# -- xarray -------------------------------------------------------------------------------------


def test_xarray_default_reductions_differentiate():
    xr = pytest.importorskip("xarray")
    a = U(4, 3)
    a[1, 2] = np.nan

    def f(x):
        da = xr.DataArray(x, dims=("t", "f"))
        return (da.mean() + (da * 2.0).sum("f").mean("t") + da.std("t").sum()).data

    check_grad(f, (a,))
    r = f(XP.asarray(a))
    assert type(r) is XP.Array
    want = np.nanmean(a) + np.nanmean(np.nansum(a * 2, axis=1)) + np.nansum(np.nanstd(a, axis=0))
    np.testing.assert_allclose(_np(r), want, rtol=1e-12)
    g = pg.grad(lambda x: xr.DataArray(x).mean().data)(XP.asarray(a))
    assert _np(g)[1, 2] == 0.0 and np.isclose(_np(g)[0, 0], 1 / 11)


def _xda(x):
    xr = pytest.importorskip("xarray")
    return xr.DataArray(x, dims=("t", "f"), coords={"g": ("t", [0, 1, 0, 1, 2, 2])})


@pytest.mark.parametrize(
    "f, want",
    [
        (lambda d: d.median("t"), lambda a: np.median(a, axis=0)),
        (lambda d: d.median(), lambda a: np.median(a)),
        (lambda d: d.quantile(0.3, dim="t"), lambda a: np.quantile(a, 0.3, axis=0)),
        (lambda d: d.quantile([0.2, 0.9], dim="f"), lambda a: np.quantile(a, [0.2, 0.9], axis=1)),
        (
            lambda d: d.groupby("g").mean(),
            lambda a: np.stack([a[[0, 2]].mean(0), a[[1, 3]].mean(0), a[4:].mean(0)]),
        ),
        (
            lambda d: d.groupby("g").sum(),
            lambda a: np.stack([a[[0, 2]].sum(0), a[[1, 3]].sum(0), a[4:].sum(0)]),
        ),
        (
            lambda d: d.rolling(t=3).construct("w").mean("w", skipna=False).isel(t=slice(2, None)),
            lambda a: np.lib.stride_tricks.sliding_window_view(a, 3, axis=0).mean(-1),
        ),
        (
            lambda d: d.rolling(t=3, center=True).construct("w").mean("w"),
            lambda a: np.stack(
                [
                    np.nanmean(np.pad(a, ((1, 1), (0, 0)), constant_values=np.nan)[i : i + 3], 0)
                    for i in range(6)
                ]
            ),
        ),
    ],
    ids=[
        "median",
        "median-all",
        "quantile",
        "quantiles",
        "groupby-mean",
        "groupby-sum",
        "rolling-construct",
        "rolling-center",
    ],
)
def test_xarray_median_quantile_groupby_rolling_windows_differentiate(f, want):
    """xarray takes NumPy's names from the array's namespace (xp.quantile, xp.pad,
    xp.lib.stride_tricks.sliding_window_view: served from the protocol table) and indexes with
    NumPy integer arrays (groupby: constants of the namespace)."""
    a = U(6, 3)
    r = f(_xda(XP.asarray(a)))
    assert type(r.data) is XP.Array
    np.testing.assert_allclose(_np(r.data), want(a), rtol=1e-12)
    check_grad(lambda x: f(_xda(x)).data, (a,))


def test_xarray_rolling_mean():
    # xarray counts the valid entries with xp.sum of a boolean array: sum takes booleans
    a = U(6, 3)
    r = _xda(XP.asarray(a)).rolling(t=3).mean()
    np.testing.assert_allclose(_np(r.data)[2:], _xda(a).rolling(t=3).mean().values[2:])
    g = pg.grad(lambda v: XP.sum(_xda(v).rolling(t=3).mean().data[2:]))(XP.asarray(a))
    np.testing.assert_allclose(
        _np(g), [[1 / 3] * 3, [2 / 3] * 3] + [[1.0] * 3] * 2 + [[2 / 3] * 3, [1 / 3] * 3]
    )


def test_the_namespace_serves_numpys_names_from_the_table():
    assert XP.pad.__name__ == "pad" and callable(XP.quantile)
    assert XP.lib.stride_tricks.sliding_window_view.__name__ == "sliding_window_view"
    assert "pad" not in dir(XP)  # the module's own names are the standard's
    with pytest.raises(AttributeError, match="has no attribute 'histogram'"):
        XP.histogram  # noqa: B018
    with pytest.raises(AttributeError):
        XP.lib.nothing  # noqa: B018
    assert XP.special.erf.__name__ == "erf" and "gammaln" in dir(XP.special)
    with pytest.raises(AttributeError, match="special has no function 'zeta'"):
        XP.special.zeta  # noqa: B018
    np.testing.assert_allclose(_np(XP.special.xlogy(2, XP.asarray([3.0]))), 2 * np.log([3.0]))
    x = XP.asarray(S(5))
    x.requires_grad_()
    np.testing.assert_allclose(_np(XP.pad(x, 2, mode="wrap")), np.pad(_np(x), 2, mode="wrap"))
    g = pg.grad(lambda v: XP.sum(XP.transpose(XP.pad(v[None], 1)) ** 2))(x)
    np.testing.assert_allclose(_np(g), 2 * _np(x))


def test_numpy_index_arrays_are_constant_indices():
    a = S(4, 3)
    x = XP.asarray(a)
    x.requires_grad_()
    idx = np.array([2, 0, 2])
    np.testing.assert_allclose(_np(x[idx]), a[idx])
    np.testing.assert_allclose(_np(x[:, np.array([True, False, True])]), a[:, [0, 2]])
    g = pg.grad(lambda v: XP.sum(v[(slice(None), np.array([1, 1]))]))(XP.asarray(a))
    np.testing.assert_allclose(_np(g), np.array([[0.0, 2.0, 0.0]] * 4))
    y = XP.asarray(a.copy())
    y[np.array([0, 3])] = 0.0
    assert np.all(_np(y)[[0, 3]] == 0.0)
