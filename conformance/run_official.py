"""Run the official Array API conformance suite (data-apis/array-api-tests) on our namespaces.

The suite is not on PyPI: point ``ARRAY_API_TESTS_DIR`` at a checkout of it, with the spec stubs
of data-apis/array-api checked out inside it as ``array-api/`` (its ``stubs.py`` looks there).

    ARRAY_API_TESTS_DIR=/tmp/array-api-tests python -m conformance.run_official numpy strict
    ... --max-examples 200 --seeds 0 1 2 3 4

prints passed/failed/skipped and the wall time per backend and seed. The backend ``memory`` is
``namespace(numpy)`` behind the checking namespace (``conformance/memory_checking.py``): every
call the suite makes is projected and measured, and one measured above its projection fails
its test; the line adds the calls checked, the overs, the calls that could not be projected
and the tightness (measured/projected: median and 10th percentile); ``memory-cupy`` is the same
over ``namespace(cupy)``, measured by CuPy's memory pool (a GPU machine: tools/gpu_check.py).
Each backend has ``conformance/xfails/<backend>.txt`` listing only the failures its backend
has itself, each with its reason; a failure not listed there makes the exit status 1. An
entry whose reason starts with ``[some draws]`` fails only on some hypothesis draws, so its
passing is not reported as an XPASS. Runs are reproducible: a fixed hypothesis seed, and
Python's ``random`` re-seeded before every test (see ``_reseed.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
XFAILS = Path(__file__).resolve().parent / "xfails"
BACKENDS = {
    "numpy": "import numpy, pycograd_xp; xp = pycograd_xp.namespace(numpy)",
    "strict": "import array_api_strict, pycograd_xp; xp = pycograd_xp.namespace(array_api_strict)",
    "cubed": "import cubed, pycograd_xp; xp = pycograd_xp.namespace(cubed)",
    "cupy": "import cupy, pycograd_xp; xp = pycograd_xp.namespace(cupy)",
    "memory": "import conformance.memory_checking as m; xp = m.checking_namespace()",
    "memory-cupy": "import cupy, conformance.memory_checking as m; xp = m.checking_namespace(cupy)",
}
DEFAULT_EXAMPLES = {"numpy": 20, "strict": 20, "cubed": 5, "cupy": 5, "memory": 20}
DEFAULT_EXAMPLES["memory-cupy"] = 2
# the checking namespace's values are those of the namespace it checks
XFAILS_OF = {"memory": "numpy", "memory-cupy": "cupy"}
# each call is run three times and projected: hypothesis's deadline does not hold; on CuPy each
# new kernel is compiled at its first call (tools/gpu_check.py runs the suite on a GPU)
EXTRA = {b: ["--hypothesis-disable-deadline"] for b in ("memory", "cupy", "memory-cupy")}
SOME_DRAWS = "[some draws]"


@dataclass
class Result:
    backend: str
    seed: int = 0
    wall: float = 0.0
    passed: int = 0
    failed: list[str] = field(default_factory=list)
    xfailed: int = 0
    skipped: int = 0
    unexpected_pass: list[str] = field(default_factory=list)
    memory: dict | None = None  # the checking namespace's tally (backend "memory")
    messages: dict[str, str] = field(default_factory=dict)  # a failure's id -> its error line
    timed_out: bool = False  # stopped at ``timeout``: the counts are of the tests run by then

    def line(self) -> str:
        text = (
            f"{self.backend:8s} seed {self.seed:<3d} passed {self.passed:5d}  "
            f"failed {len(self.failed):3d}  xfailed {self.xfailed:3d}  "
            f"skipped {self.skipped:3d}  {self.wall:7.1f}s"
        )
        if self.memory is not None:
            m = self.memory
            text += (
                f"\n         calls checked {m['checked']}  over {len(m['over'])}  "
                f"unprojected {len(m['unprojected'])}  tightness median "
                f"{m['median']:.2f}  10th percentile {m['p10']:.2f}"
            )
        return text


def suite_dir() -> Path | None:
    d = os.environ.get("ARRAY_API_TESTS_DIR")
    return Path(d) if d and (Path(d) / "array_api_tests").is_dir() else None


def xfail_entries(backend: str) -> dict[str, str]:
    """Test id -> reason, from ``xfails/<backend>.txt`` (comment lines dropped)."""
    path = XFAILS / f"{backend}.txt"
    if not path.exists():
        return {}
    entries = {}
    for line in path.read_text().splitlines():
        test_id, _, reason = line.partition("  #")
        test_id = test_id.strip()
        if test_id and not test_id.startswith("#"):
            entries[test_id] = reason.strip()
    return entries


def xfail_ids(backend: str) -> list[str]:
    """Test ids from ``xfails/<backend>.txt`` (``# reason`` lines and comments dropped)."""
    return list(xfail_entries(backend))


def run(
    backend: str,
    *,
    max_examples: int | None = None,
    seed: int = 0,
    extra: list[str] | None = None,
    timeout: float | None = None,
) -> Result:
    """Run the suite on ``namespace(<backend>)`` and count the outcomes (``timeout``: seconds
    before the suite is stopped; the result then says ``timed_out`` and counts the tests run by
    then, see :func:`pytest_report`)."""
    start = time.perf_counter()
    where = suite_dir()
    if where is None:
        raise RuntimeError("set ARRAY_API_TESTS_DIR to a checkout of data-apis/array-api-tests")
    examples = max_examples or DEFAULT_EXAMPLES[backend]
    env = dict(os.environ)
    env["ARRAY_API_TESTS_MODULE"] = f"exec('{BACKENDS[backend]}')"
    env["ARRAY_API_TESTS_VERSION"] = "2025.12"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        tally = Path(tmp) / "memory.json"
        env["PYCOGRAD_MEMCHECK_REPORT"] = str(tally)
        xfails = Path(tmp) / "xfails.txt"
        xfails.write_text("\n".join(xfail_ids(XFAILS_OF.get(backend, backend))) + "\n")
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "array_api_tests",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "conformance._reseed",
            "-W",
            "ignore",
            f"--max-examples={examples}",
            f"--hypothesis-seed={seed}",
            f"--xfails-file={xfails}",
            "--json-report",
            f"--json-report-file={report}",
            *EXTRA.get(backend, []),
            *(extra or []),
        ]
        data, timed_out = pytest_report(cmd, where, env, report, timeout)
        memory = _tightness(json.loads(tally.read_text())) if tally.exists() else None
    res = Result(backend, seed=seed, wall=time.perf_counter() - start, memory=memory)
    res.timed_out = timed_out
    entries = xfail_entries(XFAILS_OF.get(backend, backend))
    some_draws = {i for i, why in entries.items() if why.startswith(SOME_DRAWS)}
    for t in data.get("tests", []):
        outcome = t["outcome"]
        if outcome == "passed":
            res.passed += 1
        elif outcome == "skipped":
            res.skipped += 1
        elif outcome == "xfailed":
            res.xfailed += 1
        elif outcome == "xpassed":
            res.passed += 1
            if t["nodeid"] not in some_draws:
                res.unexpected_pass.append(t["nodeid"])
        else:
            res.failed.append(t["nodeid"])
            res.messages[t["nodeid"]] = failure_message(t)
    for c in data.get("collectors", []):
        if c.get("outcome") == "failed":
            res.failed.append(f"collection: {c['nodeid']}")
    return res


def pytest_report(
    cmd: list[str], cwd: Path, env: dict[str, str], report: Path, timeout: float | None
) -> tuple[dict, bool]:
    """Run ``cmd`` (pytest with ``--json-report-file=report``); its report and whether it ran
    past ``timeout`` seconds. One that does is interrupted as Ctrl-C would (pytest then writes
    the report of the tests run so far) and killed 30 s later if it has not stopped; it raises
    ``subprocess.TimeoutExpired`` only when no report came."""
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if not report.exists():
        if timed_out:
            raise subprocess.TimeoutExpired(cmd, timeout or 0.0)
        raise RuntimeError(f"pytest wrote no report (exit status {proc.returncode}): {cmd}")
    return json.loads(report.read_text()), timed_out


def failure_message(test: dict) -> str:
    """A failed test's error in one line (its crash message, else its report's last line), from
    a pytest-json-report entry."""
    for stage in ("setup", "call", "teardown"):
        part = test.get(stage) or {}
        if part.get("outcome") == "failed":
            crash = (part.get("crash") or {}).get("message")
            if crash:
                return " ".join(crash.split())[:400]
            lines = str(part.get("longrepr", "")).strip().splitlines()
            return lines[-1][:400] if lines else ""
    return ""


def _tightness(tally: dict) -> dict:
    """The checking namespace's tally summed up: calls checked, the overs and the unprojected
    calls (their descriptions), and measured/projected at the median and 10th percentile."""
    ratios = sorted(measured / projected for _, measured, projected, _ in tally["checked"])

    def at(q: float) -> float:
        return ratios[min(len(ratios) - 1, int(q * len(ratios)))] if ratios else float("nan")

    return {
        "checked": len(ratios),
        "over": tally["over"],
        "unprojected": tally["unprojected"],
        "median": at(0.5),
        "p10": at(0.1),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(  # CuPy only when asked for (a GPU machine: tools/gpu_check.py)
        "backends",
        nargs="*",
        default=[b for b in BACKENDS if "cupy" not in b],
        choices=list(BACKENDS),
    )
    p.add_argument("--max-examples", type=int, default=None)
    p.add_argument(
        "--seed",
        "--seeds",
        dest="seeds",
        type=int,
        nargs="+",
        default=[0],
        help="hypothesis seed(s): one run per backend and seed",
    )
    args = p.parse_args(argv)
    if suite_dir() is None:
        print("skipped: ARRAY_API_TESTS_DIR does not point at a checkout of array-api-tests")
        return 0
    status = 0
    for backend in args.backends:
        for seed in args.seeds:
            res = run(backend, max_examples=args.max_examples, seed=seed)
            print(res.line(), flush=True)
            if res.timed_out:
                print("    (stopped at its timeout: the counts are of the tests run by then)")
            for nodeid in res.failed:
                print(f"    FAILED {nodeid}: {res.messages.get(nodeid, '')}")
            for nodeid in res.unexpected_pass:
                print(f"    XPASS (remove from xfails/{backend}.txt) {nodeid}")
            for what in (res.memory or {}).get("over", []):
                print(f"    OVER {what}")
            for what in (res.memory or {}).get("unprojected", []):
                print(f"    UNPROJECTED {what}")
            status |= bool(res.failed)
    return status


if __name__ == "__main__":
    sys.exit(main())
