"""tools/gpu_check.py, the GPU run (issue 35): its dry run (NumPy in place of CuPy, the CPU for
CUDA) takes every part's code path here, and its arguments are checked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "gpu_check.py"


def _run(tmp_path, *args):
    out = tmp_path / "summary.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--dry-run", "--out", str(out), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    return done, (json.loads(out.read_text()) if out.exists() else None)


def test_dry_run_takes_every_part(tmp_path, monkeypatch):
    monkeypatch.delenv("ARRAY_API_TESTS_DIR", raising=False)
    done, summary = _run(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    parts = summary["parts"]
    assert summary["dry_run"] and list(parts) == [
        "environment",
        "official",
        "gradients",
        "memcheck",
        "memory",
        "linalg",
        "steps",
    ]
    for part in ("official", "memcheck"):  # no checkout of the suite given
        assert parts[part]["status"] == "skipped" and "array-api-tests" in parts[part]["why"]
    grads = parts["gradients"]
    assert grads["status"] == "ok", grads
    # the CuPy cases skip cleanly here (no CuPy, or no device); their NumPy twins pass
    assert grads["cupy"]["skipped"] > 0 and grads["cupy"]["failed"] == 0
    assert grads["numpy_twins"]["passed"] > 0 and grads["numpy_twins"]["failed"] == 0
    assert all(v["bounded"] for k, v in parts["memory"].items() if isinstance(v, dict))
    assert {"mlp compiled", "transformer compiled"} <= set(parts["memory"])
    linalg = parts["linalg"]
    assert linalg["status"] == "ok" and linalg["over"] == [] and linalg["calls"] >= 50
    assert {"mlp", "cnn", "transformer"} <= set(parts["steps"])
    assert all(
        row["pycograd_xp ms"] > 0 and row["compiled ms"] > 0
        for row in parts["steps"].values()
        if isinstance(row, dict)
    )


def test_a_suite_path_without_the_suite_fails_that_part_saying_why(tmp_path):
    done, summary = _run(tmp_path, "--parts", "official", "--suite", str(tmp_path))
    assert done.returncode == 1
    part = summary["parts"]["official"]
    assert part["status"] == "failed" and "array_api_tests is missing" in part["why"]


def test_bad_arguments_are_refused(tmp_path):
    done, _ = _run(tmp_path, "--parts", "official,warp")
    assert done.returncode == 2 and "unknown part 'warp'" in done.stderr
    done, _ = _run(tmp_path, "--examples", "0")
    assert done.returncode == 2 and "--examples must be >= 1" in done.stderr


def test_the_shell_wrapper_parses():
    assert subprocess.run(["bash", "-n", str(ROOT / "tools" / "gpu_check.sh")]).returncode == 0


@pytest.mark.slow  # pytest started three times; on a loaded machine each start takes seconds
def test_a_pytest_run_past_its_timeout_reports_the_tests_run_by_then(tmp_path):
    """The GPU run's budget stops a slow part: what ran before is still counted, with errors."""
    import time

    from conformance import run_official

    (tmp_path / "test_slow.py").write_text(
        "import time\n"
        "def test_fast():\n    pass\n"
        "def test_wrong():\n    assert 1 == 2, 'one is not two'\n"
        "def test_slow():\n    time.sleep(600)\n"
    )
    report = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_slow.py"]
    cmd += ["--json-report", f"--json-report-file={report}"]
    # the timeout falls well after the two quick tests: three times what starting pytest and
    # collecting the file takes here and now (a loaded machine starts it slowly)
    t0 = time.perf_counter()
    subprocess.run([*cmd[:-2], "--collect-only"], cwd=tmp_path, capture_output=True, check=True)
    timeout = 3 * (time.perf_counter() - t0) + 2
    data, timed_out = run_official.pytest_report(cmd, tmp_path, None, report, timeout=timeout)
    outcomes = {t["nodeid"].split("::")[1]: t for t in data["tests"]}
    assert timed_out and outcomes["test_fast"]["outcome"] == "passed"
    assert "one is not two" in run_official.failure_message(outcomes["test_wrong"])
