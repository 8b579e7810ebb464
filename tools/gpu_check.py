"""The GPU run (issue 35, point 4): on a machine with CUDA, in under eight minutes, the checks a
CPU machine cannot make, with a summary written to a file.

    python tools/gpu_check.py [--suite DIR] [--out PATH] [--examples N] [--budget SECONDS]
    python tools/gpu_check.py --dry-run [--suite DIR] [--out PATH]

``tools/gpu_check.sh`` makes the environment first (a venv with the project, CuPy and PyTorch)
and runs this. The parts, each within its share of the budget (a part past it is stopped and
reported so; the rest still run):

  environment   Python, NumPy, CuPy and its device, PyTorch and its device
  official      the official Array API suite (data-apis/array-api-tests: not on PyPI; its
                checkout in --suite or ARRAY_API_TESTS_DIR, with the spec stubs inside it as
                array-api/) on namespace(cupy) at --examples examples a test, through
                conformance/run_official.py; CuPy's own failures (conformance/xfails/
                cupy.txt) count as expected, every other one is listed in the summary with its
                error (they are findings, not a failed run)
  gradients     the gradient-conformance cases (conformance/test_gradients.py: the dot-product
                test against central finite differences, float64) on namespace(cupy), through
                PYCOGRAD_CONFORMANCE_BACKENDS=cupy, and tests/namespace/test_cupy.py
  memcheck      the official suite (its special cases left out) through the memory-checking
                namespace on CuPy (conformance/memory_checking.py; run_official's backend
                memory-cupy): every call projected and measured by CuPy's pool, the functions
                measured above their projections listed (findings, as the suite's failures)
  memory        memory.project of the three steps below, eager and compiled, against
                memory.measure, which reads CuPy's memory pool (its hooks) on the device
  linalg        the same for the linalg functions that factor or invert a matrix, at sizes
                the official suite never draws (512 and 2048 a side, a stack of 16 of 256):
                forward, and the gradients training takes; those above their projections
                listed (findings: cuSOLVER's workspaces grow with the matrix)
  steps         the MLP (784-512-512-10, batch 256), small CNN (issue 35's) and transformer
                block (pre-LN attention and MLP) steps, value_and_grad, pycograd_xp on CuPy
                (eager, and compiled with pycograd_xp.compile) against PyTorch on CUDA:
                interleaved rounds, each timed between device synchronisations, medians and
                the ratios; the two losses compared

``--dry-run`` runs every part on the CPU with NumPy in place of CuPy and PyTorch's CPU device (or
without PyTorch where it is missing), on smaller shapes and fewer rounds: the imports, paths,
arguments and code paths of the GPU run, in seconds. There the gradient part also checks that
the CuPy cases skip cleanly (CuPy absent, or no CUDA device) while their NumPy twins pass, and
the official part runs one test of the suite on namespace(numpy) where a checkout is given
(skipped, and said so, where none is).

Exit status: 0 when every part ran (the official suite's failures included: they are listed),
1 when a part failed, errored or ran out of time, or (not a dry run) was skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BUDGET_S = 470.0  # all parts together: under eight minutes
SHARES = {
    "environment": 0.02,
    "official": 0.31,
    "gradients": 0.21,
    "memcheck": 0.16,
    "memory": 0.06,
    "linalg": 0.09,
    "steps": 0.15,
}


class CannotRunError(Exception):
    """A part that cannot run here (said why in the summary)."""


class Run:
    """What the parts share: dry or not, the backend module, PyTorch and its device, the clock."""

    def __init__(self, dry: bool, suite: str | None, examples: int, budget: float) -> None:
        self.dry, self.suite, self.examples = dry, suite, examples
        self.start, self.budget = time.monotonic(), budget

    def left(self) -> float:
        return self.budget - (time.monotonic() - self.start)

    def share(self, part: str) -> float:
        """Seconds part ``part`` may take: its share of the budget, at most what is left."""
        return max(1.0, min(self.budget * SHARES[part], self.left()))

    def xp_module(self) -> Any:
        """CuPy with a CUDA device (NumPy in a dry run)."""
        if self.dry:
            import numpy

            return numpy
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            raise RuntimeError("CuPy sees no CUDA device")
        return cupy

    def torch(self) -> tuple[Any, Any] | None:
        """(torch, device): CUDA (the CPU in a dry run; None there without PyTorch)."""
        try:
            import torch  # type: ignore[import-not-found]
        except ImportError:
            if self.dry:
                return None
            raise
        if self.dry:
            return torch, torch.device("cpu")
        if not torch.cuda.is_available():
            raise RuntimeError("PyTorch sees no CUDA device")
        return torch, torch.device("cuda")

    def sync(self) -> None:
        """Wait for the device (CuPy's stream and PyTorch's); nothing on the CPU."""
        if self.dry:
            return
        import cupy
        import torch

        cupy.cuda.get_current_stream().synchronize()
        torch.cuda.synchronize()


# -- environment -----------------------------------------------------------------------------------
def environment(run: Run) -> dict[str, Any]:
    import numpy

    out: dict[str, Any] = {"python": platform.python_version(), "numpy": numpy.__version__}
    xp = run.xp_module()
    if xp is not numpy:
        props = xp.cuda.runtime.getDeviceProperties(0)
        out["cupy"] = xp.__version__
        out["device"] = (
            props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        )
        out["cuda_runtime"] = xp.cuda.runtime.runtimeGetVersion()
    t = run.torch()
    if t is not None:
        torch, device = t
        out["torch"] = torch.__version__
        out["torch_device"] = (
            torch.cuda.get_device_name(0) if device.type == "cuda" else str(device)
        )
    return out


# -- the official suite ----------------------------------------------------------------------------
def _suite(run: Run) -> None:
    """Point ARRAY_API_TESTS_DIR at the checkout of the official suite, refusing a wrong one."""
    suite = run.suite or os.environ.get("ARRAY_API_TESTS_DIR")
    if not suite:
        raise CannotRunError(
            "no checkout of array-api-tests: give --suite DIR or ARRAY_API_TESTS_DIR"
        )
    where = Path(suite)
    for need in ("array_api_tests", "array-api"):
        if not (where / need).is_dir():
            raise FileNotFoundError(
                f"{where / need} is missing: --suite must be a checkout of data-apis/"
                "array-api-tests with the spec stubs of data-apis/array-api inside it as array-api/"
            )
    os.environ["ARRAY_API_TESTS_DIR"] = str(where)


def official(run: Run) -> dict[str, Any]:
    from conformance import run_official

    _suite(run)
    if run.dry:  # one test on namespace(numpy): the runner, the paths, the report
        backend, examples, chunks = "numpy", 1, {"abs": "test_abs"}
    else:  # in three runs, each with its share of the time: one past it loses only its own
        backend, examples, chunks = "cupy", run.examples, dict(OFFICIAL_CHUNKS)
    out: dict[str, Any] = {"backend": backend, "examples": examples, "timed_out": []}
    counts = dict.fromkeys(("passed", "failed", "xfailed", "skipped"), 0)
    failures: dict[str, str] = {}
    end = time.monotonic() + run.share("official")
    for i, (name, select) in enumerate(chunks.items()):
        timeout = max(1.0, (end - time.monotonic()) / (len(chunks) - i))
        try:
            res = run_official.run(
                backend, max_examples=examples, extra=["-k", select], timeout=timeout
            )
        except subprocess.TimeoutExpired:  # stopped before any report
            out["timed_out"].append(name)
            continue
        if res.timed_out:  # stopped, its tests so far counted
            out["timed_out"].append(name)
        for k in ("passed", "xfailed", "skipped"):
            counts[k] += getattr(res, k)
        counts["failed"] += len(res.failed)
        failures |= {i: res.messages.get(i, "") for i in res.failed}
    return {**out, **counts, "failures": failures}


def memcheck(run: Run) -> dict[str, Any]:
    """The official suite (its special cases left out) through the memory-checking namespace
    on CuPy: every call projected and measured by CuPy's pool; the functions measured above
    their projections, each with its calls and one example (they are findings)."""
    from conformance import run_official

    _suite(run)
    backend, select = ("memory", "test_abs") if run.dry else ("memory-cupy", MEMCHECK_TESTS)
    res = run_official.run(
        backend,
        max_examples=1 if run.dry else None,
        extra=["-k", select],
        timeout=run.share("memcheck"),
    )
    tally = res.memory or {}
    over: dict[str, dict[str, Any]] = {}
    for what in tally.get("over", []):
        row = over.setdefault(what.split("(")[0], {"calls": 0, "example": what[:600]})
        row["calls"] += 1
    return {
        "backend": backend,
        "timed_out": res.timed_out,
        "calls checked": tally.get("checked", 0),
        "tightness median": tally.get("median"),
        "over": over,
        "failed tests": len(res.failed),
    }


MEMCHECK_TESTS = "not test_special_cases"


# the official suite in three runs: its two largest files, and the rest
OFFICIAL_CHUNKS = {
    "elementwise": "test_operators_and_elementwise_functions",
    "special cases": "test_special_cases",
    "the rest": "not test_operators_and_elementwise_functions and not test_special_cases",
}


# -- gradient conformance --------------------------------------------------------------------------
def _pytest(args: list[str], env: dict[str, str], timeout: float) -> dict[str, Any]:
    """Run pytest quietly on ``args``: the outcomes by test id and the failures' errors (from
    its JSON report; one run past ``timeout`` is stopped and reports the tests run by then)."""
    from conformance import run_official

    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore"]
        cmd += ["--json-report", f"--json-report-file={report}", *args]
        data, timed_out = run_official.pytest_report(cmd, ROOT, env, report, timeout)
    failed = [t for t in data.get("tests", []) if t["outcome"] == "failed"]
    return {
        "timed_out": timed_out,
        "outcomes": {t["nodeid"]: t["outcome"] for t in data.get("tests", [])},
        "messages": {t["nodeid"]: run_official.failure_message(t) for t in failed},
        "collect_errors": [
            c["nodeid"] for c in data.get("collectors", []) if c["outcome"] == "failed"
        ],
    }


def gradients(run: Run) -> dict[str, Any]:
    from conformance.grad_cases import EXTRA_BACKENDS

    env = dict(os.environ, **{EXTRA_BACKENDS: "cupy"})
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    files = ["conformance/test_gradients.py", "tests/namespace/test_cupy.py"]
    # the dry run: the CuPy cases beside the NumPy cases of a few rows (they must pass, the
    # CuPy ones skip where CuPy or a device is missing)
    select = "cupy" if not run.dry else "cupy or (numpy and (matmul or tanh or _conv2d))"
    got = _pytest([*files, "-k", select], env, run.share("gradients"))
    out = got["outcomes"]
    cupy_ids = [i for i in out if "cupy" in i]
    counts = {k: sum(1 for i in cupy_ids if out[i] == k) for k in ("passed", "failed", "skipped")}
    result: dict[str, Any] = {
        "cupy": counts,
        "failures": {i: got["messages"].get(i, "") for i in cupy_ids if out[i] == "failed"},
        "collect_errors": got["collect_errors"],
        "timed_out": got["timed_out"],
    }
    if run.dry:
        twins = [i for i in out if "cupy" not in i]
        result["numpy_twins"] = {
            k: sum(1 for i in twins if out[i] == k) for k in ("passed", "failed", "skipped")
        }
        bad = [i for i in twins if out[i] != "passed"]
        if bad or not twins:
            raise AssertionError(f"NumPy cases that did not pass: {bad[:10] or 'none ran'}")
        if counts["failed"] or not counts["skipped"] and not counts["passed"]:
            raise AssertionError(f"CuPy cases did not skip cleanly: {counts}")
    if got["collect_errors"]:
        raise AssertionError(f"collection errors: {got['collect_errors']}")
    return result


# -- the workloads ---------------------------------------------------------------------------------
def _shapes(dry: bool) -> dict[str, dict[str, int]]:
    if dry:
        return {
            "mlp": dict(batch=32, width=64),
            "cnn": dict(batch=8),
            "transformer": dict(batch=2, seq=32, d=64, heads=4),
        }
    return {
        "mlp": dict(batch=256, width=512),
        "cnn": dict(batch=64),
        "transformer": dict(batch=8, seq=256, d=256, heads=4),
    }


def workloads(run: Run) -> dict[str, tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]]:
    """name -> (pycograd_xp loss, its arguments on the device, the host values (NumPy) for
    PyTorch's twin). float32."""
    import numpy as np

    import pycograd_xp as pg
    from pycograd_xp import nn

    backend = run.xp_module()
    xp = pg.namespace(backend)
    rng = np.random.default_rng(0)
    shapes = _shapes(run.dry)

    def host(*shape: int, scale: float = 1.0) -> Any:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def dev(tree: Any) -> Any:
        return pg.tree_map(lambda a: xp.asarray(backend.asarray(a)), tree)

    out: dict[str, tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = {}
    s = shapes["mlp"]
    sizes = [784, s["width"], s["width"], 10]
    pairs = zip(sizes[:-1], sizes[1:], strict=True)
    mlp_host = (
        [(host(m, n, scale=m**-0.5), host(n, scale=0.1)) for m, n in pairs],
        host(s["batch"], 784),
        rng.integers(0, 10, s["batch"]),
    )

    def mlp(params: Any, x: Any, labels: Any) -> Any:
        h = x
        for w, b in params[:-1]:
            h = nn.relu(h @ w + b)
        w, b = params[-1]
        return nn.cross_entropy(h @ w + b, labels)

    out["mlp"] = (mlp, dev(mlp_host), {"host": mlp_host})
    n = shapes["cnn"]["batch"]
    cnn_host = (
        {
            "c1": host(8, 1, 3, 3, scale=0.3),
            "b1": host(8, scale=0.1),
            "c2": host(16, 8, 3, 3, scale=0.1),
            "b2": host(16, scale=0.1),
            "w": host(16 * 5 * 5, 10, scale=0.05),
        },
        host(n, 1, 28, 28),
        rng.integers(0, 10, n),
    )

    def cnn(p: Any, x: Any, labels: Any) -> Any:
        h = nn.max_pool2d(nn.relu(nn.conv2d(x, p["c1"], p["b1"])), 2)
        h = nn.max_pool2d(nn.relu(nn.conv2d(h, p["c2"], p["b2"])), 2)
        return nn.cross_entropy(xp.reshape(h, (h.shape[0], -1)) @ p["w"], labels)

    out["cnn"] = (cnn, dev(cnn_host), {"host": cnn_host})
    t = shapes["transformer"]
    d, heads = t["d"], t["heads"]
    tf_host = (
        {
            **{k: host(d, d, scale=d**-0.5) for k in ("wq", "wk", "wv", "wo")},
            "w1": host(d, 4 * d, scale=d**-0.5),
            "w2": host(4 * d, d, scale=(4 * d) ** -0.5),
            "g1": np.ones(d, np.float32),
            "g2": np.ones(d, np.float32),
        },
        host(t["batch"], t["seq"], d),
    )

    def transformer(p: Any, x: Any) -> Any:
        h = x + nn.multi_head_attention(nn.layer_norm(x, p["g1"]), p, heads, causal=True)
        h = h + nn.gelu(nn.layer_norm(h, p["g2"]) @ p["w1"]) @ p["w2"]
        return xp.mean(h * h)

    out["transformer"] = (transformer, dev(tf_host), {"host": tf_host, "heads": heads})
    return out


def torch_losses(torch: Any) -> dict[str, Callable[..., Any]]:
    """PyTorch's twins of :func:`workloads`' losses (torch.nn.functional)."""
    import math

    tf = torch.nn.functional

    def mlp(params: Any, x: Any, labels: Any) -> Any:
        h = x
        for w, b in params[:-1]:
            h = tf.relu(h @ w + b)
        w, b = params[-1]
        return tf.cross_entropy(h @ w + b, labels)

    def cnn(p: Any, x: Any, labels: Any) -> Any:
        h = tf.max_pool2d(tf.relu(tf.conv2d(x, p["c1"], p["b1"])), 2)
        h = tf.max_pool2d(tf.relu(tf.conv2d(h, p["c2"], p["b2"])), 2)
        return tf.cross_entropy(h.reshape(h.shape[0], -1) @ p["w"], labels)

    def transformer(p: Any, x: Any, heads: int) -> Any:
        b, length, d = x.shape

        def attention(z: Any) -> Any:
            def split(w: Any) -> Any:
                return (z @ w).reshape(b, length, heads, d // heads).permute(0, 2, 1, 3)

            q, k, v = split(p["wq"]), split(p["wk"]), split(p["wv"])
            scores = q @ k.transpose(-1, -2) / math.sqrt(d // heads)
            mask = torch.ones(length, length, dtype=torch.bool, device=x.device).triu(1)
            a = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1) @ v
            return a.permute(0, 2, 1, 3).reshape(b, length, d) @ p["wo"]

        h = x + attention(tf.layer_norm(x, (d,), p["g1"]))
        h = h + tf.gelu(tf.layer_norm(h, (d,), p["g2"]) @ p["w1"], approximate="tanh") @ p["w2"]
        return torch.mean(h * h)

    return {"mlp": mlp, "cnn": cnn, "transformer": transformer}


# -- memory ----------------------------------------------------------------------------------------
def memory(run: Run) -> dict[str, Any]:
    import pycograd_xp as pg
    from pycograd_xp import memory as mem

    out = {}
    cases = []
    for name, (loss, args, _) in workloads(run).items():
        cases.append((name, loss, args))  # the value_and_grad step, projected eagerly
        cases.append((f"{name} compiled", pg.compile(pg.value_and_grad(loss)), args))
    for name, f, args in cases:
        p, m = mem.project(f, *args), mem.measure(f, *args)
        # on the device the pool's peak (it rounds to 512 bytes: 1 % allowed, as
        # tests/namespace/test_cupy.py); on the CPU tracemalloc's, against the traced part
        projected = p.traced_peak_bytes if run.dry else p.peak_bytes
        bound = projected if run.dry else projected * 1.01
        out[name] = {
            "measured": m.peak_bytes,
            "projected": projected,
            "measured/projected": round(m.peak_bytes / projected, 3),
            "bounded": m.peak_bytes <= bound,
        }
    unbounded = [k for k, v in out.items() if not v["bounded"]]
    if unbounded:
        raise AssertionError(f"measured above the projection: {unbounded}: {out}")
    return out


# -- linear algebra at larger sizes ---------------------------------------------------------------
def _linalg_calls(xp: Any) -> dict[str, Callable[[Any], Any]]:
    """Each function of the linalg extension that factors or inverts a matrix, on a stack of
    symmetric positive definite matrices (every one of them applies)."""
    la = xp.linalg
    return {
        "cholesky": la.cholesky,
        "det": la.det,
        "eigh": lambda a: la.eigh(a).eigenvectors,
        "eigvalsh": la.eigvalsh,
        "eig": lambda a: la.eig(a).eigenvectors,
        "eigvals": la.eigvals,
        "inv": la.inv,
        "matrix_rank": la.matrix_rank,
        "pinv": la.pinv,
        "qr": lambda a: la.qr(a).R,
        "slogdet": lambda a: la.slogdet(a).logabsdet,
        "solve": lambda a: la.solve(a, a[..., :1]),
        "svd": lambda a: la.svd(a).U,
        "svdvals": la.svdvals,
    }


def linalg(run: Run) -> dict[str, Any]:
    """memory.project against memory.measure for the linalg functions above at sizes the
    official suite never draws (cuSOLVER's workspaces grow with the matrix; the suite's
    matrices are a few elements a side): forward calls, and the gradients of the ones
    training differentiates. Measured above their projections: listed (findings)."""
    import numpy as np

    import pycograd_xp as pg
    from pycograd_xp import memory as mem

    backend = run.xp_module()
    xp = pg.namespace(backend)
    shapes = [(24, 24), (3, 8, 8)] if run.dry else [(512, 512), (2048, 2048), (16, 256, 256)]
    slow = {"eig", "eigvals"}  # a general eigensolver: the smallest shape only
    rng = np.random.default_rng(0)
    rows: dict[str, Any] = {}
    over = []
    for dtype in ("float32", "float64"):
        for shape in shapes:
            n = shape[-1]
            a = rng.standard_normal(shape)
            spd = (a @ np.swapaxes(a, -1, -2) / n + np.eye(n)).astype(dtype)
            x = xp.asarray(backend.asarray(spd))
            for name, f in _linalg_calls(xp).items():
                if name in slow and shape != shapes[0]:
                    continue
                if run.left() < 10:
                    raise TimeoutError(f"out of time at {name} {shape} {dtype}")
                key = f"{name} {dtype} {'x'.join(map(str, shape))}"
                cases = [("", f, ())]
                if name in ("cholesky", "eigh", "inv", "solve", "slogdet", "svdvals"):
                    cases.append((" grad", lambda a, f=f: xp.sum(f(a)), 0))
                for suffix, g, argnums in cases:
                    p = mem.project(g, x, argnums=argnums)
                    m = mem.measure(g, x, argnums=argnums)
                    projected = p.traced_peak_bytes if run.dry else p.peak_bytes
                    ratio = round(m.peak_bytes / projected, 3)
                    rows[key + suffix] = ratio
                    if m.peak_bytes > (projected if run.dry else projected * 1.01):
                        over.append(
                            {
                                "call": key + suffix,
                                "measured": m.peak_bytes,
                                "projected": projected,
                                "ratio": ratio,
                            }
                        )
    return {
        "calls": len(rows),
        "over": over,
        "largest ratio": max(rows.values(), default=None),
        "measured/projected": rows,
    }


# -- steps against PyTorch -------------------------------------------------------------------------
def _torch_step(t: tuple[Any, Any], name: str, extra: dict[str, Any]) -> Callable[[], Any]:
    """PyTorch's step of workload ``name`` on its device: the loss and the parameters'
    gradients (nothing kept in ``.grad``)."""
    import numpy as np

    import pycograd_xp as pg

    torch, device = t
    host = extra["host"]
    params = pg.tree_map(
        lambda a: torch.as_tensor(np.asarray(a), device=device).requires_grad_(True), host[0]
    )
    rest = tuple(torch.as_tensor(np.asarray(a), device=device) for a in host[1:])
    f = torch_losses(torch)[name]
    kw = {"heads": extra["heads"]} if name == "transformer" else {}
    leaves = pg.tree_leaves(params)

    def step() -> Any:
        value = f(params, *rest, **kw)
        return value.detach(), torch.autograd.grad(value, leaves)

    return step


def _call(f: Callable[..., Any], args: tuple[Any, ...]) -> Callable[[], Any]:
    return lambda: f(*args)


def steps(run: Run) -> dict[str, Any]:
    import pycograd_xp as pg

    loads = workloads(run)
    t = run.torch()
    rounds, number = (2, 1) if run.dry else (15, 5)
    out: dict[str, Any] = {}
    for name, (loss, args, extra) in loads.items():
        ours = pg.value_and_grad(loss)
        contenders: dict[str, Callable[[], Any]] = {
            "pycograd_xp": _call(ours, args),
            "compiled": _call(pg.compile(ours), args),
        }
        torch_loss = None
        if t is not None:
            contenders["PyTorch"] = _torch_step(t, name, extra)
            torch_loss = float(contenders["PyTorch"]()[0])
        ours_loss = float(ours(*args)[0])
        times: dict[str, list[float]] = {k: [] for k in contenders}
        for f in contenders.values():  # warm-up: kernels compiled, pools filled
            f()
        run.sync()
        for _ in range(rounds):
            if run.left() < 5:
                raise TimeoutError(f"out of time in the {name} step")
            for k, f in contenders.items():
                run.sync()
                t0 = time.perf_counter()
                for _ in range(number):
                    f()
                run.sync()
                times[k].append((time.perf_counter() - t0) / number)
        med = {k: statistics.median(v) for k, v in times.items()}
        row: dict[str, Any] = {f"{k} ms": round(v * 1e3, 3) for k, v in med.items()}
        if torch_loss is not None:
            row["ratio"] = round(med["pycograd_xp"] / med["PyTorch"], 3)
            row["compiled ratio"] = round(med["compiled"] / med["PyTorch"], 3)
            row["loss"] = ours_loss
            row["torch loss"] = torch_loss
            row["losses agree"] = abs(ours_loss - torch_loss) <= 1e-3 * max(1.0, abs(torch_loss))
        out[name] = row
    return out


PARTS: dict[str, Callable[[Run], dict[str, Any]]] = {
    "environment": environment,
    "official": official,
    "gradients": gradients,
    "memcheck": memcheck,
    "memory": memory,
    "linalg": linalg,
    "steps": steps,
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    ap.add_argument("--dry-run", action="store_true", help="NumPy for CuPy, the CPU for CUDA")
    ap.add_argument("--suite", help="checkout of array-api-tests (default: ARRAY_API_TESTS_DIR)")
    ap.add_argument("--out", default="gpu_check_summary.json", help="the summary (JSON)")
    ap.add_argument("--examples", type=int, default=3, help="official suite: examples a test")
    ap.add_argument("--budget", type=float, default=BUDGET_S, help="seconds for all parts")
    ap.add_argument("--parts", default=",".join(PARTS), help="comma-separated subset")
    a = ap.parse_args(argv)
    if a.examples < 1 or a.budget <= 0:
        ap.error(f"--examples must be >= 1 and --budget > 0 (got {a.examples}, {a.budget})")
    chosen = a.parts.split(",")
    for p in chosen:
        if p not in PARTS:
            ap.error(f"unknown part {p!r}: choose from {', '.join(PARTS)}")
    run = Run(a.dry_run, a.suite, a.examples, a.budget)
    summary: dict[str, Any] = {"dry_run": a.dry_run, "parts": {}}
    status = 0
    for name in chosen:
        t0 = time.monotonic()
        try:
            if run.left() < 2:
                raise TimeoutError("the budget is spent")
            result = {"status": "ok", **PARTS[name](run)}
            if result.get("timed_out"):  # True, or the official suite's runs that ran out
                result["status"] = "timed out"
        except CannotRunError as e:
            result = {"status": "skipped", "why": str(e)}
        except subprocess.TimeoutExpired as e:
            result = {"status": "timed out", "why": str(e)}
        except Exception as e:  # the part's error in the summary; the other parts still run
            result = {"status": "failed", "why": f"{type(e).__name__}: {e}"}
            result["traceback"] = traceback.format_exc()[-3000:]
        result["seconds"] = round(time.monotonic() - t0, 1)
        summary["parts"][name] = result
        bad = result["status"] not in ("ok", "skipped") or (
            result["status"] == "skipped" and not a.dry_run
        )
        status |= bad
        print(f"{name:12s} {result['status']:10s} {result['seconds']:7.1f}s", flush=True)
    summary["seconds"] = round(time.monotonic() - run.start, 1)
    Path(a.out).write_text(json.dumps(summary, indent=1, default=str))
    print(f"summary: {a.out} ({summary['seconds']} s)")
    return status


if __name__ == "__main__":
    sys.exit(main())
