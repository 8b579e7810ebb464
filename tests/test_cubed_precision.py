"""Data stored in reduced precision (float16 features, uint8 images) trains with float32 or
float64 parameters: each task casts its chunk (or row slice) to the parameters' dtype after the
read (``cubed_plugin._casting``), so float16 storage trains exactly as float32 storage of the
same values, on every path of ``fit`` (the planned one-pass step, one-pass as a Cubed graph,
graph mode, mini-batches, L-BFGS); uint8 features are cast when the row loss declares them
(``row_loss(..., cast=(0,))``), integer labels stay integers; the projection counts the cast
copy (task peaks measured on the processes executor within their projections)."""

from __future__ import annotations

import numpy as np
import pytest

import pycograd_xp as pg
from pycograd_xp import optim

cubed = pytest.importorskip("cubed")
zarr = pytest.importorskip("zarr")

from cubed_plugin import fit, row_loss  # noqa: E402
from cubed_plugin._casting import casts, stored_spec  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::cubed_plugin.ReservedMemWarning")

N, F, CHUNK = 4_000, 16, 1_000


def _logistic(p, X, y):
    xp = X.__array_namespace__()
    z = X @ p["w"] + p["b"]
    return xp.logaddexp(0.0, z) - y * z


LOGISTIC = row_loss(_logistic)
# pixels 0..255 scaled in the loss, computed in the parameters' dtype
IMAGES = row_loss(lambda p, X, y: _logistic(p, X / 255.0, y), cast=(0,))


def _write(path, name, a, chunk=CHUNK):
    z = zarr.open_array(
        str(path / f"{name}.zarr"),
        mode="w",
        shape=a.shape,
        dtype=a.dtype,
        chunks=(chunk, *a.shape[1:]),
    )
    z[...] = a


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    path = tmp_path_factory.mktemp("precision")
    rng = np.random.default_rng(0)
    X16 = rng.standard_normal((N, F)).astype(np.float16)
    U8 = rng.integers(0, 256, (N, F), dtype=np.uint8)
    w = rng.standard_normal(F)
    y = (rng.random(N) < 1 / (1 + np.exp(-(X16.astype(np.float64) @ w)))).astype(np.float32)
    for name, a in (
        ("X16", X16),
        ("X32", X16.astype(np.float32)),
        ("U8", U8),
        ("U8f", U8.astype(np.float32)),
        ("y", y),
        ("y16", y.astype(np.float16)),
    ):
        _write(path, name, a)
    return path


def _spec(tmp_path):
    return cubed.Spec(work_dir=str(tmp_path / "work"), allowed_mem="200MB", reserved_mem="0")


def _open(path, spec, *names):
    return tuple(cubed.from_zarr(str(path / f"{n}.zarr"), spec=spec) for n in names)


def _params(dtype=np.float32):
    return {"w": np.zeros(F, dtype=dtype), "b": np.zeros((), dtype=dtype)}


def _fit(loss, data, optimizer=None, **kw):
    kw.setdefault("steps", 3)
    return fit(
        loss,
        kw.pop("params", _params()),
        data,
        optimizer or optim.adam(0.1),
        executor=kw.pop("executor", "single-threaded"),
        progress=False,
        log=kw.pop("log", None),
        **kw,
    )


def _same(a, b):
    for x, y in zip(pg.tree_leaves(a.params), pg.tree_leaves(b.params), strict=True):
        np.testing.assert_array_equal(x, y)
        assert x.dtype == y.dtype
    assert a.history["loss"] == b.history["loss"]


@pytest.mark.parametrize(
    "how",
    ["planned", "graph of tasks", "graph mode", "mini-batch", "sliced", "lbfgs", "2 chunks a task"],
)
def test_float16_storage_trains_as_float32_storage_of_the_same_values(stored, tmp_path, how):
    """Once was: ``spec: dtype('<f2') is not one of the standard's data types``."""
    spec = _spec(tmp_path)
    kw: dict = {}
    if how == "graph mode":
        kw["mode"] = "graph"
    if how == "mini-batch":
        kw["batch_rows"] = 2 * CHUNK
    if how == "2 chunks a task":
        kw["chunks_per_task"] = 2
    if how == "lbfgs":
        kw.update(optimizer=optim.lbfgs(), steps=None, epochs=6)
    runs = []
    for names in (("X16", "y16"), ("X32", "y")):
        data = _open(stored, spec, *names)
        if how == "graph of tasks":  # data Cubed computes: one-pass as a graph, not planned
            data = tuple(cubed.map_blocks(lambda b: b, x, dtype=x.dtype) for x in data)
        if how == "sliced":  # a chunk too large for a task: computed in row slices of it
            kw["spec"] = cubed.Spec(
                work_dir=str(tmp_path / "w2"), allowed_mem="1.06MB", reserved_mem="0"
            )
        runs.append(_fit(LOGISTIC, data, **kw))
    _same(*runs)
    assert runs[0].history["loss"][-1] < runs[0].history["loss"][0] or how == "lbfgs"


def test_float16_log_says_the_data_is_cast(stored, tmp_path):
    lines: list[str] = []
    _fit(LOGISTIC, _open(stored, _spec(tmp_path), "X16", "y"), log=lines.append, steps=1)
    assert any(
        "data argument 0 (float16) cast to float32 in each task" in line for line in lines
    ), lines


def test_float16_gradient_matches_finite_differences(stored, tmp_path):
    """One SGD step of learning rate 1 on float16 data with float64 parameters: the loss and
    the step (minus the gradient) against the objective on the data's values in float64 and
    its central differences (the dot-product test)."""
    X = np.asarray(zarr.open_array(str(stored / "X16.zarr"))[:]).astype(np.float64)
    y = np.asarray(zarr.open_array(str(stored / "y.zarr"))[:]).astype(np.float64)
    rng = np.random.default_rng(3)
    theta = rng.standard_normal(F + 1) * 0.2

    def objective(t):
        z = X @ t[:F] + t[F]
        return np.mean(np.logaddexp(0, z) - y * z)

    params = {"w": theta[:F].copy(), "b": np.array(theta[F])}
    result = _fit(
        LOGISTIC, _open(stored, _spec(tmp_path), "X16", "y"), optim.sgd(1.0), params=params, steps=1
    )
    got = theta - np.concatenate([result.params["w"], [result.params["b"]]])
    assert result.history["loss"][0] == pytest.approx(objective(theta), rel=1e-12)
    eps = 1e-6
    for _ in range(3):
        v = rng.standard_normal(F + 1)
        fd = (objective(theta + eps * v) - objective(theta - eps * v)) / (2 * eps)
        assert got @ v == pytest.approx(fd, rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("mode", ["one-pass", "graph"])
def test_uint8_images_declared_cast_train_as_their_float32_values(stored, tmp_path, mode):
    spec = _spec(tmp_path)
    a = _fit(IMAGES, _open(stored, spec, "U8", "y"), mode=mode)
    b = _fit(IMAGES, _open(stored, spec, "U8f", "y"), mode=mode)
    _same(a, b)


def test_integer_labels_stay_integers_unless_declared():
    params = _params()
    assert casts(LOGISTIC, params, ["float16", "int64"]) == (np.dtype("float32"), None)
    assert casts(IMAGES, params, ["uint8", "int64"]) == (np.dtype("float32"), None)
    assert casts(IMAGES, _params(np.float64), ["float32", "bool"]) == (np.dtype("float64"), None)
    assert casts(LOGISTIC, params, ["float32", "uint8"]) == (None, None)
    assert stored_spec((4, 2), "float16").dtype == np.dtype("float16")


def test_a_cast_position_out_of_range_is_refused(stored, tmp_path):
    loss = row_loss(_logistic, cast=(2,))
    with pytest.raises(ValueError, match=r"row_loss: cast=\(2,\) names data argument 2.* 2 data"):
        _fit(loss, _open(stored, _spec(tmp_path), "U8", "y"), steps=1)
    with pytest.raises(TypeError, match=r"row_loss: cast must be the positions"):
        row_loss(_logistic, cast=("X",))


def test_float16_parameters_are_refused_saying_the_way_out(stored, tmp_path):
    with pytest.raises(TypeError, match=r"fit: parameter 0 .* has dtype float16; the tasks "):
        _fit(LOGISTIC, _open(stored, _spec(tmp_path), "X16", "y"), params=_params(np.float16))


def test_a_direct_call_casts_the_declared_arguments(stored):
    xp = pg.namespace(np)
    U8 = np.asarray(zarr.open_array(str(stored / "U8.zarr"))[:100])
    y = np.asarray(zarr.open_array(str(stored / "y.zarr"))[:100])
    p = pg.tree_map(xp.asarray, {"w": np.full(F, 0.01, np.float32), "b": np.zeros((), np.float32)})
    got = IMAGES(p, xp.asarray(U8), xp.asarray(y))
    want = LOGISTIC(p, xp.asarray(U8.astype(np.float32) / 255.0), xp.asarray(y))
    assert got.dtype == xp.float32
    assert float(pg.unwrap(got)) == pytest.approx(float(pg.unwrap(want)), rel=1e-6)


def _measured_run(tmp_path, loss, X, y):
    """``fit`` on measuring processes; every op's measured task peak within its projection
    and allowed_mem (a run over them raises TaskMemoryError first)."""
    from cubed_plugin.train import make_spec, measuring_processes

    path = tmp_path / "data"
    path.mkdir()
    chunk = X.shape[0] // 2
    _write(path, "X", X, chunk)
    _write(path, "y", y, chunk)
    spec = make_spec("400MB", work_dir=str(tmp_path / "work"), executor="processes")
    data = _open(path, spec, "X", "y")
    width = X.shape[1]
    params = {"w": np.zeros(width, np.float32), "b": np.zeros((), np.float32)}
    ex = measuring_processes()
    try:
        result = _fit(loss, data, steps=2, spec=spec, executor=ex, params=params)
    finally:
        ex.close()
    report = result.memory.report()
    assert report
    for op, projected, measured in report:
        assert measured is not None, op
        assert measured <= projected <= int(spec.allowed_mem), (op, measured, projected)
    return report


@pytest.mark.parametrize("kind", ["float16", "uint8"])
def test_task_peaks_within_projections_with_the_cast_copy(tmp_path, kind):
    """Chunks of 40,000 x 256 (20 MB as float16, 10 MB as uint8; their float32 copies 41 MB):
    measured per task on the processes executor, each within its projection, which counts the
    copy."""
    rng = np.random.default_rng(1)
    rows, width = 80_000, 256
    if kind == "float16":
        X = rng.standard_normal((rows, width)).astype(np.float16)
        loss = LOGISTIC
    else:
        X = rng.integers(0, 256, (rows, width), dtype=np.uint8)
        loss = IMAGES
    y = (rng.random(rows) < 0.5).astype(np.float32)
    _measured_run(tmp_path, loss, X, y)


def _packed_dataset(tmp_path, spec):
    """Features stored as CF-packed int16 (scale_factor, add_offset, _FillValue), a float
    target; opened with Cubed chunks (xarray decodes them lazily, to float64)."""
    xr = pytest.importorskip("xarray")
    pytest.importorskip("cubed_xarray")
    rng = np.random.default_rng(2)
    shape = (40, 3, 4)
    names = ("tas", "hus", "ps")
    values = {v: rng.standard_normal(shape).astype("f4") for v in names}
    values["pr"] = (rng.random(shape) < 0.5).astype("f4")
    ds = xr.Dataset({v: (("time", "lat", "lon"), a) for v, a in values.items()})
    packed = {"dtype": "int16", "scale_factor": 0.001, "add_offset": 0.5, "_FillValue": -32768}
    enc = {v: {"chunks": (10, 3, 4), **packed} for v in names}
    enc["pr"] = {"chunks": (10, 3, 4)}
    path = str(tmp_path / "packed.zarr")
    ds.to_zarr(path, mode="w", encoding=enc, consolidated=False)
    opened = xr.open_zarr(
        path, chunked_array_type="cubed", from_array_kwargs={"spec": spec}, consolidated=False
    )
    decoded = xr.open_zarr(path, consolidated=False).load()  # xarray's own decoding, eagerly
    assert str(xr.open_zarr(path, consolidated=False, mask_and_scale=False)["tas"].dtype) == (
        "int16"
    )
    X = np.stack([decoded[v].values for v in names], axis=-1).reshape(-1, 3)
    return opened, X, decoded["pr"].values.reshape(-1)


@pytest.mark.parametrize("stored_design", [False, True])
def test_cf_packed_integers_through_xarray_in_the_compute_dtype(tmp_path, stored_design):
    """int16 features packed with scale_factor/add_offset: xarray decodes them to float64;
    from_xarray(dtype="float32") decodes and casts each chunk in the stacking tasks, so X (and
    store='s copy) is float32, the decoded values cast, and fit computes in float32 (no
    promotion to float64) to the parameters of float32 arrays of the same values."""
    import cubed_plugin

    spec = _spec(tmp_path)
    ds, Xd, yd = _packed_dataset(tmp_path, spec)
    assert ds["tas"].dtype == np.float64
    store = str(tmp_path / "design") if stored_design else None
    data = cubed_plugin.from_xarray(
        ds, ["tas", "hus", "ps"], "pr", dtype="float32", store=store, executor="threads"
    )
    assert data.X.dtype == np.float32 and data.y.dtype == np.float32
    np.testing.assert_array_equal(cubed_plugin.compute(data.X), Xd.astype(np.float32))
    if stored_design:
        assert zarr.open_array(str(tmp_path / "design" / "X.zarr")).dtype == np.float32
    lines: list[str] = []
    params = {"w": np.zeros(3, np.float32), "b": np.zeros((), np.float32)}
    got = _fit(LOGISTIC, data.arrays, params=params, log=lines.append)
    assert not any("float64" in line for line in lines), lines
    same = (
        cubed.from_array(Xd.astype(np.float32), chunks=data.X.chunksize, spec=spec),
        cubed.from_array(yd.astype(np.float32), chunks=data.y.chunksize, spec=spec),
    )
    _same(got, _fit(LOGISTIC, same, params=params))
    unpacked = cubed_plugin.from_xarray(ds, ["tas", "hus", "ps"], "pr")
    assert unpacked.X.dtype == np.float64  # the decoded dtype, as before
    with pytest.raises(TypeError, match=r"from_xarray: dtype must be a floating dtype"):
        cubed_plugin.from_xarray(ds, ["tas", "hus", "ps"], "pr", dtype="int16")


def test_validation_and_predict_on_float16_data(stored, tmp_path):
    """fit(validation=...) and predict on float16 storage: each task casts its chunk as the
    training tasks do, the figures and the predictions those of float32 storage of the same
    values; uint8 validation data declared cast by the loss is cast too."""
    from cubed_plugin import predict

    spec = _spec(tmp_path)
    runs = []
    for names in (("X16", "y16"), ("X32", "y")):
        data = _open(stored, spec, *names)
        runs.append(_fit(LOGISTIC, data, validation=data))
        model = lambda p, X: X @ p["w"] + p["b"]
        runs.append(np.asarray(predict(model, runs[-1].params, data[0]).compute()))
    _same(runs[0], runs[2])
    assert runs[0].history["val_loss"] == runs[2].history["val_loss"]
    assert runs[1].dtype == np.float32
    np.testing.assert_array_equal(runs[1], runs[3])
    images = [
        _fit(IMAGES, d, validation=d) for d in (_open(stored, spec, n, "y") for n in ("U8", "U8f"))
    ]
    _same(*images)
    assert images[0].history["val_loss"] == images[1].history["val_loss"]
