"""The xarray front door (``cubed_plugin.from_xarray``): a Dataset opened from Zarr with Cubed
chunks (``cubed-xarray``) becomes ``fit``'s data without being read, with the layout ``fit``
takes (rows chunked, each row chunk whole along the other axes), every task within the budget;
predictions go back to Zarr as a Dataset in the source's coordinates; and
``examples/xarray_training.py`` trains to NumPy's least squares. Skipped without cubed-xarray."""

from __future__ import annotations

import importlib.util
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

cubed = pytest.importorskip("cubed")
xr = pytest.importorskip("xarray")
pytest.importorskip("cubed_xarray")

import cubed_plugin  # noqa: E402
from pycograd_xp.memory import MemoryLimitError  # noqa: E402

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
VARS = ("tas", "hus", "ps", "pr")


def _example():
    spec = importlib.util.spec_from_file_location(
        "xarray_training", EXAMPLES / "xarray_training.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _dataset(tmp_path, shape=(12, 3, 4), chunks=(4, 3, 4), allowed="100MB"):
    """A small Dataset in Zarr (float32 predictors, a float64 target), opened with Cubed chunks;
    returns it and the values in memory."""
    rng = np.random.default_rng(1)
    values = {v: rng.standard_normal(shape).astype("f4" if v != "pr" else "f8") for v in VARS}
    ds = xr.Dataset(
        {v: (("time", "lat", "lon"), a) for v, a in values.items()},
        coords={
            "time": np.arange(shape[0]),
            "lat": np.linspace(-45, 45, shape[1]),
            "lon": np.linspace(0, 270, shape[2]),
        },
    )
    path = str(tmp_path / "ds.zarr")
    enc = {v: {"chunks": chunks} for v in VARS}
    ds.to_zarr(path, mode="w", encoding=enc, consolidated=False)
    spec = cubed.Spec(work_dir=str(tmp_path / "work"), allowed_mem=allowed, reserved_mem="10MB")
    opened = xr.open_zarr(
        path, chunked_array_type="cubed", from_array_kwargs={"spec": spec}, consolidated=False
    )
    return opened, values


def test_a_pooled_design_matrix_is_built_lazily_with_whole_feature_rows(tmp_path):
    ds, v = _dataset(tmp_path)
    with cubed.raise_if_computes():
        data = cubed_plugin.from_xarray(ds, ["tas", "hus", "ps"], "pr")
    X, y = data.arrays
    assert X.shape == (144, 3) and y.shape == (144,)
    assert X.chunks == ((48, 48, 48), (3,)) and y.chunks == ((48, 48, 48),)
    assert X.dtype == np.float32 and y.dtype == np.float64
    want = np.stack([v["tas"], v["hus"], v["ps"]], axis=-1).reshape(144, 3)
    np.testing.assert_array_equal(X.compute(), want)
    np.testing.assert_array_equal(y.compute(), v["pr"].reshape(-1))
    assert 0 < data.max_projected_mem <= int(ds["pr"].data.spec.allowed_mem)


def test_per_gridpoint_rows_keep_the_grid_and_a_split_grid_is_rechunked(tmp_path):
    """Sample dims ("time",): a row is a time step with the whole grid; stored chunks that
    split the grid (lat in 2) are rechunked whole there, time chunks kept near their bytes."""
    ds, v = _dataset(tmp_path, chunks=(6, 2, 4))
    with cubed.raise_if_computes():
        data = cubed_plugin.from_xarray(ds, ["ps", "tas"], "pr", sample_dims=("time",))
    X, y = data.arrays
    assert X.shape == (12, 3, 4, 2) and y.shape == (12, 3, 4)
    assert all(len(c) == 1 for c in X.chunks[1:]) and all(len(c) == 1 for c in y.chunks[1:])
    assert X.chunks[0] == y.chunks[0] == (4, 4, 4)  # 6 x 2 x 4 stored: 4 whole-grid steps
    np.testing.assert_array_equal(X.compute(), np.stack([v["ps"], v["tas"]], axis=-1))
    # rows= sets the row chunk: whole time steps of 12 grid points each
    pooled = cubed_plugin.from_xarray(ds, ["ps"], "pr", rows=24)
    assert pooled.X.chunks[0] == (24,) * 6
    with pytest.raises(ValueError, match="multiple of the 12 rows"):
        cubed_plugin.from_xarray(ds, ["ps"], "pr", rows=30)


def test_dims_in_another_order_are_transposed_to_the_targets(tmp_path):
    ds, v = _dataset(tmp_path)
    ds["tas"] = ds["tas"].transpose("lon", "time", "lat")
    data = cubed_plugin.from_xarray(ds, ["tas"], "pr", sample_dims=("time", "lat"))
    assert data.X.shape == (36, 4, 1) and data.kept_dims == ("lon",)
    np.testing.assert_array_equal(data.X.compute()[..., 0], v["tas"].reshape(36, 4))


def test_bad_inputs_are_refused_naming_the_way_out(tmp_path):
    ds, _ = _dataset(tmp_path)
    with pytest.raises(TypeError, match="chunked_array_type='cubed'"):
        cubed_plugin.from_xarray(ds.compute(), ["tas"], "pr")
    with pytest.raises(KeyError, match="no data variable 'rain'"):
        cubed_plugin.from_xarray(ds, ["tas"], "rain")
    with pytest.raises(ValueError, match="sample_dims"):
        cubed_plugin.from_xarray(ds, ["tas"], "pr", sample_dims=("depth",))
    with pytest.raises(ValueError, match="also among the features"):
        cubed_plugin.from_xarray(ds, ["tas", "pr"], "pr")
    mean = ds.assign(clim=ds["tas"].mean("time"))
    with pytest.raises(ValueError, match="broadcast_like"):
        cubed_plugin.from_xarray(mean, ["clim"], "pr")


def test_a_plan_over_the_budget_is_refused_before_running(tmp_path):
    ds, _ = _dataset(tmp_path, shape=(64, 16, 16), chunks=(64, 16, 16), allowed="11MB")
    with cubed.raise_if_computes(), pytest.raises(MemoryLimitError, match="from_xarray"):
        cubed_plugin.from_xarray(ds, ["tas", "hus", "ps"], "pr")


def test_fit_on_the_dataset_and_predictions_back_in_its_coordinates(tmp_path):
    """fit on a Dataset's arrays (one-pass, stored with store=) ends where fit on the same
    values as plain Zarr arrays does, and the predictions come back in the source's dims,
    coordinates and values."""
    from cubed_plugin.train import fit, logreg_loss
    from pycograd_xp import optim

    ds, v = _dataset(tmp_path)
    ds["pr"] = (ds["pr"] > 0).astype("f8")
    data = cubed_plugin.from_xarray(
        ds, ["tas", "hus", "ps"], "pr", store=str(tmp_path / "design"), executor="threads"
    )
    assert isinstance(data.X, cubed.Array) and (tmp_path / "design" / "X.zarr").exists()
    params = {"w": np.zeros(3), "b": np.zeros(())}
    kw = dict(steps=3, progress=False, log=None, executor="single-threaded")
    got = fit(logreg_loss, params, data.arrays, optim.sgd(0.5), **kw).params
    Xn = np.stack([v["tas"], v["hus"], v["ps"]], axis=-1).reshape(-1, 3)
    yn = (v["pr"] > 0).astype("f8").reshape(-1)
    spec = data.X.spec
    X2 = cubed.from_array(Xn, chunks=(48, 3), spec=spec)
    y2 = cubed.from_array(yn, chunks=(48,), spec=spec)
    want = fit(logreg_loss, params, (X2, y2), optim.sgd(0.5), **kw).params
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])
    lazy = cubed_plugin.from_xarray(ds, ["tas", "hus", "ps"], "pr")  # stacked in every step
    again = fit(logreg_loss, params, lazy.arrays, optim.sgd(0.5), **kw).params
    for k in want:
        np.testing.assert_array_equal(again[k], want[k])

    model = _example().pooled_model
    pred = data.predict(model, got)
    out = data.write(str(tmp_path / "pred.zarr"), executor="single-threaded", pr_hat=pred)
    assert out["pr_hat"].dims == ("time", "lat", "lon")
    back = xr.open_zarr(str(tmp_path / "pred.zarr"))
    np.testing.assert_array_equal(back["lat"].values, ds["lat"].values)
    np.testing.assert_allclose(
        back["pr_hat"].values.reshape(-1), Xn @ got["w"] + got["b"], rtol=1e-12
    )
    # without consolidated metadata (which Zarr format 3 does not specify): no warning either way
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        data.write(
            str(tmp_path / "plain.zarr"), executor="single-threaded", consolidated=False, r=pred
        )
        plain = xr.open_zarr(str(tmp_path / "plain.zarr"), consolidated=False)
    root = json.loads((tmp_path / "plain.zarr" / "zarr.json").read_text())
    assert root.get("consolidated_metadata") is None
    consolidated = json.loads((tmp_path / "pred.zarr" / "zarr.json").read_text())
    assert consolidated.get("consolidated_metadata") is not None  # xarray's default
    np.testing.assert_array_equal(plain["r"].values, back["pr_hat"].values)


@pytest.mark.parametrize("model", ["gridpoint", "pooled"])
def test_the_example_trains_to_numpys_least_squares_within_its_budget(tmp_path, model):
    out = _example().main(
        time_steps=96, lat=4, lon=8, chunk=24, model=model, workdir=str(tmp_path), log=None
    )
    assert out["max_param_error"] < 1e-4, out["max_param_error"]
    assert out["max_prediction_error"] < 1e-5
    assert out["max_projected_mem"] <= out["allowed_mem"]
    back = out["dataset"]
    assert dict(back.sizes) == {"time": 96, "lat": 4, "lon": 8}
    assert set(back.data_vars) == {"pr_predicted", "pr_residual"}
