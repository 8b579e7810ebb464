"""Object storage end to end, against a real S3-compatible server started on a loopback port
(moto's server mode): training data read from ``s3://`` Zarr, Cubed's work_dir there in graph
mode, fit's checkpoints there (atomic; a killed run resumes from them), ``from_xarray`` on a
store there, the command line's ``--data``/``--work-dir``/``--checkpoint-dir`` as URLs, and
each task's measured memory within its projection while it reads over HTTP."""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path

import numpy as np
import pytest

import pycograd_xp as pg
from pycograd_xp import optim

cubed = pytest.importorskip("cubed")
zarr = pytest.importorskip("zarr")
pytest.importorskip("s3fs")
moto_server = pytest.importorskip("moto.server")

from cubed_plugin import make_spec, worker_baseline  # noqa: E402
from cubed_plugin._storage import Checkpoints, open_zarr  # noqa: E402
from cubed_plugin.train import fit, init_params, logreg_loss, synthetic  # noqa: E402

NP = pg.namespace(np)


@pytest.fixture(scope="module")
def s3():
    """A moto S3 server on 127.0.0.1 (no network beyond loopback), dummy credentials in the
    environment (this process's and its children's); yields the endpoint URL."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    endpoint = f"http://127.0.0.1:{port}"
    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint,
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request otherwise
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    # the threads executor's worker baseline, measured once on local disk (fit measures it in
    # the Spec's work_dir otherwise: graph-mode steps on the store, slow on moto)
    worker_baseline("threads")
    try:
        yield endpoint
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture
def bucket(s3, request):
    """A fresh bucket of the server, named after the test (3-63 characters)."""
    import fsspec

    fs = fsspec.filesystem("s3", skip_instance_cache=True)
    name = "t" + format(abs(hash(request.node.name)) % 10**12, "012d")
    fs.mkdir(name)
    return f"s3://{name}"


def _numpy_sgd(loss, params, Xn, yn, lr, steps):
    p = pg.tree_map(NP.asarray, params)
    for _ in range(steps):
        g = pg.grad(loss)(p, NP.asarray(Xn), NP.asarray(yn))
        p = pg.tree_map(lambda a, b: a - lr * b, p, g)
    return pg.tree_map(lambda a: np.asarray(pg.unwrap(a)), p)


def _local_copy(url):
    return np.asarray(zarr.open_array(url, mode="r")[...])


def test_checkpoints_on_the_store_are_written_then_pointed_to(bucket, monkeypatch):
    """A checkpoint on an object store is its payload under a key of its own, then the pointer
    naming it: a writer killed before the pointer leaves the previous checkpoint readable, and
    the next save removes the payload no pointer names."""
    xp = NP
    ck = Checkpoints(f"{bucket}/run")
    assert not ck.exists()
    ck.save({"w": xp.ones(3), "step": 1})
    got = ck.load({"w": xp.zeros(3), "step": 0})
    assert got["step"] == 1 and np.asarray(pg.unwrap(got["w"])).tolist() == [1, 1, 1]
    assert str(ck) == f"{bucket}/run/checkpoint.json"

    fs = ck.fs
    real = fs.pipe_file
    calls = []

    def killed_before_the_pointer(path, value, **kw):
        calls.append(path)
        if path.endswith("checkpoint.json"):
            raise KeyboardInterrupt  # the writer dies between its two writes
        return real(path, value, **kw)

    monkeypatch.setattr(fs, "pipe_file", killed_before_the_pointer)
    with pytest.raises(KeyboardInterrupt):
        ck.save({"w": xp.full(3, 2.0), "step": 2})
    monkeypatch.undo()
    assert len(calls) == 2  # the payload was written, the pointer not
    fresh = Checkpoints(f"{bucket}/run")
    assert fresh.load({"w": xp.zeros(3), "step": 0})["step"] == 1  # the previous, whole
    payloads = fs.glob(f"{bucket[5:]}/run/checkpoint-*.npz")
    assert len(payloads) == 2  # the orphan is there until the next save
    fresh.save({"w": xp.full(3, 3.0), "step": 3})
    fresh.save({"w": xp.full(3, 4.0), "step": 4})
    # the latest and the one before it (a reader may still be reading it); the orphan gone
    assert len(fs.glob(f"{bucket[5:]}/run/checkpoint-*.npz")) == 2
    assert fresh.load({"w": xp.zeros(3), "step": 0})["step"] == 4


def test_fit_reads_its_data_from_the_store(bucket, s3):
    """One-pass mode reads its chunks from ``s3://`` Zarr, opened with explicit storage
    options; the parameters are a NumPy run's."""
    synthetic(f"{bucket}/data", 2000, 6, 500, "logreg")
    options = {"endpoint_url": s3, "key": "testing", "secret": "testing"}
    spec = make_spec("500MB", executor="threads", storage_options=options)
    X = open_zarr(f"{bucket}/data/X.zarr", spec=spec)
    y = open_zarr(f"{bucket}/data/y.zarr", spec=spec)
    params = init_params("logreg", 6)
    result = fit(
        logreg_loss,
        params,
        (X, y),
        optim.sgd(0.5),
        steps=2,
        spec=spec,
        mode="one-pass",
        executor="threads",
        progress=False,
        log=None,
    )
    want = _numpy_sgd(
        logreg_loss,
        params,
        _local_copy(f"{bucket}/data/X.zarr"),
        _local_copy(f"{bucket}/data/y.zarr"),
        0.5,
        2,
    )
    for a, b in zip(pg.tree_leaves(result.params), pg.tree_leaves(want), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-14)


def test_graph_mode_with_its_work_dir_on_the_store_resumes_from_a_checkpoint_there(bucket):
    """Graph mode with Cubed's work_dir on the store (its intermediate arrays written and read
    there, deleted after each step) and the checkpoints there: a run stopped after one step and
    resumed ends where an uninterrupted run does."""
    import fsspec

    synthetic(f"{bucket}/data", 1000, 4, 500, "logreg")
    spec = make_spec("500MB", work_dir=f"{bucket}/work", executor="threads")
    X = cubed.from_zarr(f"{bucket}/data/X.zarr", spec=spec)
    y = cubed.from_zarr(f"{bucket}/data/y.zarr", spec=spec)
    params = init_params("logreg", 4)
    kw = dict(spec=spec, mode="graph", executor="threads", progress=False, log=None)
    first = fit(
        logreg_loss, params, (X, y), optim.adam(0.05), steps=1, checkpoint_dir=f"{bucket}/ck", **kw
    )
    fs = fsspec.filesystem("s3")
    assert fs.exists(f"{bucket[5:]}/ck/checkpoint.json")
    # the step's intermediate arrays were written on the store, then deleted
    left = [p for p in fs.find(f"{bucket[5:]}/work") if p.endswith("zarr.json")]
    assert all(p.count("/") <= 3 for p in left), left  # Cubed's context group alone
    logged: list[str] = []
    resumed = fit(
        logreg_loss,
        params,
        (X, y),
        optim.adam(0.05),
        steps=2,
        checkpoint_dir=f"{bucket}/ck",
        **{**kw, "log": logged.append},
    )
    assert f"resumed from {bucket}/ck/checkpoint.json at step 1" in logged
    Xn, yn = _local_copy(f"{bucket}/data/X.zarr"), _local_copy(f"{bucket}/data/y.zarr")
    p = pg.tree_map(NP.asarray, params)
    tx = optim.adam(0.05)
    state = tx.init(p)
    for _ in range(2):
        g = pg.grad(logreg_loss)(p, NP.asarray(Xn), NP.asarray(yn))
        updates, state = tx.update(g, state, p)
        p = optim.apply_updates(p, updates)
    assert resumed.step == 2 and first.step == 1
    assert len(resumed.history["loss"]) == 2
    for a, b in zip(pg.tree_leaves(resumed.params), pg.tree_leaves(p), strict=True):
        np.testing.assert_allclose(a, np.asarray(pg.unwrap(b)), rtol=1e-10, atol=1e-14)


FIT_DRIVER = Path(__file__).with_name("cubed_fit_driver.py")


def _measured_over_http(data, work, runs, allowed="400MB"):
    """Run ``cubed_fit_driver.py`` (fit on the processes executor, each task in a fresh forked
    worker measuring its own peak; reserved_mem measured by make_spec, reading the data) and
    return its JSON report."""
    import json
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, str(FIT_DRIVER), data, work, allowed, "measured", "1", *runs],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def _check_within(report, runs):
    for run in runs:
        rows = report[run]["report"]
        measured = [(op, p, m) for op, p, m in rows if m is not None]
        assert measured, run
        for op, projected, peak in measured:
            # each task's own peak, read over HTTP, within its projection and allowed_mem
            assert peak <= projected <= report["allowed_mem"], (run, op, peak, projected)


def test_tasks_reading_over_http_stay_within_their_projections(bucket, tmp_path):
    """One-pass tasks on the processes executor reading 4 MB chunks from the S3 server: each
    task's measured peak (its HTTP client's buffers of the chunk, the client itself in the
    worker's reserved_mem) within its projection."""
    synthetic(f"{bucket}/data", 100_000, 20, 25_000, "logreg")
    report = _measured_over_http(f"{bucket}/data", str(tmp_path / "work"), ["logreg"])
    _check_within(report, ["logreg"])
    assert report["chunk_bytes"] == 4_000_000


@pytest.mark.slow
def test_graph_mode_on_the_store_stays_within_its_projections(bucket):
    """Graph mode with the data and Cubed's work_dir on the S3 server (intermediate arrays
    written and read over HTTP), and one-pass mode beside it, 16 MB chunks, on the processes
    executor: every op's measured task peak within its projection."""
    synthetic(f"{bucket}/data", 400_000, 20, 100_000, "logreg")
    runs = ["logreg", "mlp", "logreg:graph", "mlp:graph"]
    report = _measured_over_http(f"{bucket}/data", f"{bucket}/work", runs, allowed="600MB")
    _check_within(report, runs)


def test_a_chunk_read_from_the_store_is_projected_with_the_http_clients_buffers(bucket, tmp_path):
    """The same one-pass step on the same data, stored on local disk and on the S3 server: the
    task reading over HTTP is projected with ``REMOTE_READ_COPIES`` copies more of the chunk it
    reads (the HTTP client's buffers: docs/calibration.md#remote-read-copies)."""
    import cubed_plugin as cp
    from cubed_plugin._storage import REMOTE_READ_COPIES
    from cubed_plugin.steps import READ_COPIES, one_pass_step

    rows, features, chunk = 40_000, 10, 20_000
    synthetic(f"{bucket}/data", rows, features, chunk, "logreg")
    synthetic(str(tmp_path), rows, features, chunk, "logreg")
    spec = cubed.Spec(allowed_mem="2GB", reserved_mem="100MB")

    def projected(where):
        X = cubed.from_zarr(f"{where}/X.zarr", spec=spec)
        y = cubed.from_zarr(f"{where}/y.zarr", spec=spec)
        total, _, _ = one_pass_step(logreg_loss, init_params("logreg", features), (X, y))
        return cp.plan(total).max_projected_mem

    remote, local = projected(f"{bucket}/data"), projected(str(tmp_path))
    x, y = chunk * features * 8, chunk * 8
    # the task holds reserved_mem, both chunks, and while reading one: Zarr's two buffers of X
    # (READ_COPIES) and the HTTP client's, with those of y's read beside them (a read's buffers
    # outlive it until Zarr's pool threads run; locally Cubed's own projection was the larger)
    buffers = READ_COPIES - 1 + REMOTE_READ_COPIES
    assert remote == 100_000_000 + x + y + buffers * (x + y)
    assert local < remote


def _saved(fs, directory):
    """The checkpoint the pointer in ``directory`` (a path in ``fs``) names, as NumPy's npz."""
    import io
    import json

    pointer = json.loads(fs.cat_file(f"{directory}/checkpoint.json"))
    return np.load(io.BytesIO(fs.cat_file(f"{directory}/{pointer['payload']}")))


def _saved_step(npz):
    import json

    kinds = json.loads(str(npz["__meta__"]))["kinds"]
    return int(npz[f"leaf_{kinds.index('int')}"])  # the step: the checkpoint's one int


@pytest.mark.slow  # 9-21 s: run by .ci/run's slow checks
def test_the_command_line_killed_resumes_from_its_checkpoint_on_the_store(bucket, s3):
    """``python -m cubed_plugin.train`` with ``--data``, ``--work-dir`` and ``--checkpoint-dir``
    on the store (the endpoint given as ``--storage-option``), killed (SIGKILL) once it has
    checkpointed step 2, run again: it resumes from the checkpoint on the store and ends with
    an uninterrupted run's checkpoint, to the bit (but the steps' wall times)."""
    import json
    import signal
    import subprocess
    import sys
    import time

    import fsspec

    synthetic(f"{bucket}/data", 20_000, 10, 2_000, "mlp")
    steps = 12
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        "AWS_ENDPOINT_URL": "http://127.0.0.1:1",  # unreachable: the option must carry it
    }

    def command(ckpt):
        return [
            sys.executable,
            "-m",
            "cubed_plugin.train",
            *("--data", f"{bucket}/data", "--model", "mlp", "--steps", str(steps)),
            *("--batch-rows", "4000", "--work-dir", f"{bucket}/work"),
            *("--checkpoint-dir", f"{bucket}/{ckpt}", "--executor", "threads"),
            *("--allowed-mem", "600MB", "--storage-option", f"endpoint_url={s3}", "--quiet"),
        ]

    subprocess.run(command("whole"), check=True, capture_output=True, timeout=300, env=env)
    proc = subprocess.Popen(
        command("killed"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env=env,
    )
    fs = fsspec.filesystem("s3", skip_instance_cache=True)
    where = f"{bucket[5:]}/killed"
    deadline = time.time() + 300
    while time.time() < deadline:
        fs.invalidate_cache()
        if fs.exists(f"{where}/checkpoint.json") and _saved_step(_saved(fs, where)) >= 2:
            break
        time.sleep(0.05)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    fs.invalidate_cache()
    step_at_kill = _saved_step(_saved(fs, where))
    assert 2 <= step_at_kill < steps
    out = subprocess.run(
        command("killed"), check=True, capture_output=True, text=True, timeout=300, env=env
    ).stdout
    assert f"resumed from {bucket}/killed/checkpoint.json at step {step_at_kill}" in out
    fs.invalidate_cache()
    a, b = _saved(fs, f"{bucket[5:]}/whole"), _saved(fs, where)
    paths = json.loads(str(a["__meta__"]))["paths"]
    assert paths == json.loads(str(b["__meta__"]))["paths"]
    for i, name in enumerate(paths):
        x, y = a[f"leaf_{i}"], b[f"leaf_{i}"]
        if name == "['history']['seconds']":
            assert x.shape == y.shape == (steps,)
        else:
            np.testing.assert_array_equal(x, y, err_msg=name)
    # no payload left behind but the latest and the one before it
    assert len(fs.glob(f"{where}/checkpoint-*.npz")) <= 2


def test_from_xarray_on_a_store_there(bucket):
    """A Dataset in Zarr on the store, opened with Cubed chunks, stacked by ``from_xarray``
    into a design matrix written back to the store (``store=`` a URL), trained on, and the
    predictions written to the store in the Dataset's coordinates: as NumPy computes them."""
    xr = pytest.importorskip("xarray")
    pytest.importorskip("cubed_xarray")
    import cubed_plugin

    rng = np.random.default_rng(3)
    shape = (8, 3, 4)
    values = {v: rng.standard_normal(shape) for v in ("tas", "hus", "pr")}
    values["pr"] = (values["pr"] > 0).astype("f8")
    ds = xr.Dataset(
        {v: (("time", "lat", "lon"), a) for v, a in values.items()},
        coords={"time": np.arange(8), "lat": np.arange(3.0), "lon": np.arange(4.0)},
    )
    enc = {v: {"chunks": (4, 3, 4)} for v in values}
    ds.to_zarr(f"{bucket}/ds.zarr", mode="w", encoding=enc, consolidated=False)
    spec = make_spec("500MB", work_dir=f"{bucket}/work", executor="threads")
    opened = xr.open_zarr(
        f"{bucket}/ds.zarr",
        chunked_array_type="cubed",
        from_array_kwargs={"spec": spec},
        consolidated=False,
    )
    data = cubed_plugin.from_xarray(
        opened, ["tas", "hus"], "pr", store=f"{bucket}/design", executor="threads"
    )
    assert Checkpoints(f"{bucket}/design").fs.exists(f"{bucket[5:]}/design/X.zarr/zarr.json")
    params = {"w": np.zeros(2), "b": np.zeros(())}
    got = fit(
        logreg_loss,
        params,
        data.arrays,
        optim.sgd(0.5),
        steps=2,
        executor="threads",
        progress=False,
        log=None,
    ).params
    Xn = np.stack([values["tas"], values["hus"]], axis=-1).reshape(-1, 2)
    yn = values["pr"].reshape(-1)
    want = _numpy_sgd(logreg_loss, params, Xn, yn, 0.5, 2)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-12)

    def linear(p, X):
        return X @ p["w"] + p["b"]

    data.write(f"{bucket}/pred.zarr", executor="threads", pr_hat=data.predict(linear, got))
    back = xr.open_zarr(f"{bucket}/pred.zarr")
    assert back["pr_hat"].dims == ("time", "lat", "lon")
    np.testing.assert_allclose(
        back["pr_hat"].values.reshape(-1), Xn @ got["w"] + got["b"], rtol=1e-12
    )


def test_checkpoint_save_and_load_take_a_url(bucket):
    """``pycograd_xp.checkpoint`` on an ``s3://`` URL: the file written in one put, read back
    in the shape of ``like``; a mismatched tree refused as for a local file."""
    from pycograd_xp import checkpoint

    url = f"{bucket}/single/ckpt.npz"
    checkpoint.save(url, {"w": NP.ones(3), "step": 5})
    got = checkpoint.load(url, {"w": NP.zeros(3), "step": 0})
    assert got["step"] == 5 and np.asarray(pg.unwrap(got["w"])).tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match=r"shape \(3,\) .* in the file, but \(4,\)"):
        checkpoint.load(url, {"w": NP.zeros(4), "step": 0})
