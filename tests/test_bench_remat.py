"""benchmarks/bench_remat.py still runs (its --quick models): every budgeted step it fits
measures within its budget, and the unconstrained budget recomputes nothing."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


@pytest.mark.slow  # 35 s: the default run's slowest test (run by .ci/run's slow checks)
def test_budget_benchmark_runs_and_fits():
    done = subprocess.run(
        [sys.executable, os.path.join(ROOT, "benchmarks", "bench_remat.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert out.count("## ") == 3 and "**NO**" not in out
    rows = [line for line in out.splitlines() if line.startswith("| 100%")]
    assert len(rows) == 3 and all("| 0/" in r and "| yes |" in r for r in rows)
    assert any("| yes |" in line for line in out.splitlines() if line.startswith("| 80%"))
