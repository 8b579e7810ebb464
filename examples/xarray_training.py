"""Training from an xarray Dataset on Cubed, within a memory budget, and predictions back to Zarr.

A synthetic climate-like Dataset (time x lat x lon: temperature ``tas``, specific humidity
``hus``, surface pressure ``ps``, precipitation ``pr``) is written to Zarr and opened lazily with
Cubed chunks (``cubed-xarray``). ``cubed_plugin.from_xarray`` stacks the three predictors as
the columns of a design matrix without loading anything, and ``cubed_plugin.fit`` trains a
linear regression of precipitation on them with ``optim.lbfgs`` (full batch, one pass over the
data per evaluation), every task checked against ``allowed_mem`` before it runs:

- ``--model gridpoint`` (the default): one regression per grid point (rows are time steps;
  the parameters are a weight per grid point and predictor, and a bias per grid point);
- ``--model pooled``: one regression for all grid points (rows are time x lat x lon).

The trained parameters are checked against NumPy's least squares on the same data loaded in
memory, and the predictions are written back to Zarr as an xarray Dataset in the source's
coordinates (then read back and checked against NumPy's)::

    python examples/xarray_training.py                      # seconds
    python examples/xarray_training.py --time 20000 --lat 32 --lon 64 --allowed-mem 500MB
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

PREDICTORS = ("tas", "hus", "ps")


def make_dataset(path: str, time_steps: int, lat: int, lon: int, chunk: int, seed: int = 0) -> Any:
    """Write the synthetic Dataset to Zarr, ``chunk`` time steps per chunk (whole in lat and
    lon), one chunk at a time: precipitation is a linear function of the predictors whose
    coefficients vary smoothly over the globe, plus noise. Returns the true coefficients."""
    import xarray as xr

    rng = np.random.default_rng(seed)
    lats = np.linspace(-80.0, 80.0, lat)
    lons = np.linspace(0.0, 360.0, lon, endpoint=False)
    la, lo = np.meshgrid(np.deg2rad(lats), np.deg2rad(lons), indexing="ij")
    w_true = np.stack(
        [1.0 + 0.5 * np.cos(la), 2.0 * np.cos(la) * np.sin(lo), -0.5 + 0.3 * np.sin(2 * la)],
        axis=-1,
    )
    b_true = 3.0 + np.cos(la) ** 2
    season = np.cos(2 * np.pi * np.arange(time_steps) / 365.0)
    for start in range(0, time_steps, chunk):  # appended along time, one stored chunk at a time
        n = min(chunk, time_steps - start)
        s = season[start : start + n, None, None]
        # standardized anomalies: temperature with a seasonal cycle, humidity following it
        tas = 0.8 * s + 0.6 * rng.standard_normal((n, lat, lon))
        hus = 0.5 * tas + 0.8 * rng.standard_normal((n, lat, lon))
        ps = rng.standard_normal((n, lat, lon))
        x = np.stack([tas, hus, ps], axis=-1)
        noise = 0.1 * rng.standard_normal((n, lat, lon))
        pr = np.einsum("tyxf,yxf->tyx", x, w_true) + b_true + noise
        dims = ("time", "lat", "lon")
        part = xr.Dataset(
            {
                v: (dims, a.astype("f4"))
                for v, a in zip((*PREDICTORS, "pr"), (*x.transpose(3, 0, 1, 2), pr), strict=True)
            },
            coords={
                "time": np.arange(start, start + n, dtype="int64"),
                "lat": ("lat", lats, {"units": "degrees_north"}),
                "lon": ("lon", lons, {"units": "degrees_east"}),
            },
        )
        if start == 0:
            encoding = {v: {"chunks": (chunk, lat, lon)} for v in part.data_vars}
            # Zarr format 3 has no consolidated metadata (Zarr warns when xarray writes it)
            part.to_zarr(path, mode="w", encoding=encoding, consolidated=False)
        else:
            part.to_zarr(path, append_dim="time", consolidated=False)
    return w_true, b_true


def gridpoint_model(p: Any, X: Any) -> Any:
    """Per grid point: ``X`` (rows, lat, lon, predictors) -> (rows, lat, lon)."""
    xp = X.__array_namespace__()
    return xp.sum(X * p["w"], axis=-1) + p["b"]


def pooled_model(p: Any, X: Any) -> Any:
    """One regression: ``X`` (rows, predictors) -> (rows,)."""
    return X @ p["w"] + p["b"]


def _loss(model: Any) -> Any:
    from cubed_plugin import row_loss

    @row_loss
    def squared_error(p: Any, X: Any, y: Any) -> Any:
        xp = X.__array_namespace__()
        r = model(p, X) - y
        return xp.sum(r * r, axis=tuple(range(1, r.ndim))) if r.ndim > 1 else r * r

    return squared_error


def least_squares(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """NumPy's closed form, on the data in memory: one least-squares fit per grid point when
    ``X`` is (rows, ..., predictors), else one. Returns (w, b)."""
    X = X.astype(np.float64)
    y = y.astype(np.float64)
    A = np.concatenate([X, np.ones((*X.shape[:-1], 1))], axis=-1)
    if A.ndim == 2:
        coef = np.linalg.lstsq(A, y, rcond=None)[0]
        return coef[:-1], coef[-1]
    A = np.moveaxis(A, 0, -2)  # (..., rows, predictors + 1)
    t = np.moveaxis(y, 0, -1)[..., None]
    coef = np.linalg.solve(A.swapaxes(-1, -2) @ A, A.swapaxes(-1, -2) @ t)[..., 0]
    return coef[..., :-1], coef[..., -1]


def main(
    time_steps: int = 240,
    lat: int = 8,
    lon: int = 16,
    chunk: int = 48,
    model: str = "gridpoint",
    allowed_mem: str = "300MB",
    reserved_mem: str | None = None,
    executor: str = "threads",
    passes: int = 60,
    workdir: str | None = None,
    log: Any = print,
) -> dict:
    """Build the Dataset in ``workdir`` (a temporary directory when None), train, write the
    predictions; returns the parameters, NumPy's least squares and the checks' figures."""
    import xarray as xr

    import cubed_plugin
    from pycograd_xp import optim

    log = log or (lambda line: None)
    t0 = time.perf_counter()
    root = Path(workdir or tempfile.mkdtemp(prefix="xarray-training-"))
    source = str(root / "climate.zarr")
    make_dataset(source, time_steps, lat, lon, chunk)
    spec = cubed_plugin.make_spec(allowed_mem, reserved_mem, str(root / "work"), executor=executor)
    ds = xr.open_zarr(
        source, chunked_array_type="cubed", from_array_kwargs={"spec": spec}, consolidated=False
    )
    sample_dims = ("time",) if model == "gridpoint" else ("time", "lat", "lon")
    data = cubed_plugin.from_xarray(
        ds,
        PREDICTORS,
        "pr",
        sample_dims=sample_dims,
        store=str(root / "design"),
        executor=executor,
    )
    log(f"from_xarray: {data.summary()}; allowed_mem {allowed_mem}")
    X, y = data.arrays
    kept = tuple(X.shape[1:-1])
    f = X.shape[-1]
    params = {"w": np.zeros((*kept, f), np.float64), "b": np.zeros(kept, np.float64)}
    forward = gridpoint_model if model == "gridpoint" else pooled_model
    t1 = time.perf_counter()
    result = cubed_plugin.fit(
        _loss(forward),
        params,
        data.arrays,
        optim.lbfgs(gtol=1e-6),
        epochs=passes,
        spec=spec,
        executor=executor,
        progress=False,
        log=None,
    )
    train_s = time.perf_counter() - t1
    state = result.opt_state
    log(
        f"fit ({model}, L-BFGS on {executor}): loss {state.value:.6g} after {state.evals} "
        f"passes over {math.prod(X.shape):,} values ({train_s:.2f} s; "
        f"{state.reason or 'pass budget spent'})"
    )

    # NumPy's least squares on the same data, loaded (the example's data is small)
    Xn = np.asarray(X.compute())
    yn = np.asarray(y.compute())
    w_ls, b_ls = least_squares(Xn, yn)
    err = max(
        float(np.max(np.abs(result.params["w"] - w_ls))),
        float(np.max(np.abs(result.params["b"] - b_ls))),
    )
    log(f"largest difference from NumPy's least squares: {err:.2e}")

    out = str(root / "predictions.zarr")
    pred = data.predict(forward, result.params)
    data.write(out, executor=executor, consolidated=False, pr_predicted=pred, pr_residual=y - pred)
    back = xr.open_zarr(out, consolidated=False)
    want = np.asarray(pg_model_numpy(forward, result.params, Xn))
    got = back["pr_predicted"].transpose(*sample_dims, ...).values.reshape(want.shape)
    pred_err = float(np.max(np.abs(got - want)))
    log(
        f"predictions written to {out}: {dict(back.sizes)}, variables "
        f"{', '.join(map(str, back.data_vars))} (largest difference from NumPy's "
        f"{pred_err:.2e}); {time.perf_counter() - t0:.2f} s in all"
    )
    return {
        "params": result.params,
        "least_squares": {"w": w_ls, "b": b_ls},
        "max_param_error": err,
        "max_prediction_error": pred_err,
        "loss": state.value,
        "passes": state.evals,
        "train_seconds": train_s,
        "max_projected_mem": int(result.memory.max_projected()),
        "allowed_mem": int(spec.allowed_mem),
        "predictions": out,
        "dataset": back,
    }


def pg_model_numpy(model: Any, params: dict, X: np.ndarray) -> np.ndarray:
    """``model`` on NumPy arrays (the check of the predictions written)."""
    import pycograd_xp as pg

    xp = pg.namespace(np)
    p = {k: xp.asarray(v) for k, v in params.items()}
    return np.asarray(pg.unwrap(model(p, xp.asarray(X))))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(
        description=" ".join(__doc__.split("\n\n")[0].split()),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("--time", type=int, default=240, help="time steps")
    ap.add_argument("--lat", type=int, default=8, help="latitudes")
    ap.add_argument("--lon", type=int, default=16, help="longitudes")
    ap.add_argument("--chunk", type=int, default=48, help="time steps per stored chunk")
    ap.add_argument(
        "--model",
        choices=("gridpoint", "pooled"),
        default="gridpoint",
        help="a linear model per grid point, or one shared by every point",
    )
    ap.add_argument("--allowed-mem", default="300MB", help="each task's budget (Spec)")
    ap.add_argument(
        "--reserved-mem", default=None, help="a worker's own memory (measured when not given)"
    )
    ap.add_argument(
        "--executor",
        default="threads",
        help="Cubed's executor: threads, single-threaded, processes, dask, ...",
    )
    ap.add_argument("--passes", type=int, default=60, help="passes over the data at most")
    ap.add_argument(
        "--workdir", default=None, help="where the data is written (a temporary directory)"
    )
    a = ap.parse_args()
    for name in ("time", "lat", "lon", "chunk", "passes"):
        if getattr(a, name) < 1:
            ap.error(f"--{name} must be at least 1, got {getattr(a, name)}")
    main(
        a.time,
        a.lat,
        a.lon,
        a.chunk,
        a.model,
        a.allowed_mem,
        a.reserved_mem,
        a.executor,
        a.passes,
        a.workdir,
    )
