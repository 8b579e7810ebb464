"""benchmarks/bench_digits.py still runs: the digits epoch, uncompiled and compiled, with its
call counts (PyTorch joins where installed; the CI environment has none)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def test_digits_benchmark_runs_and_counts(tmp_path):
    out = tmp_path / "digits.json"
    done = subprocess.run(
        [
            sys.executable,
            os.path.join(ROOT, "benchmarks", "bench_digits.py"),
            "--rounds",
            "2",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert {"pycograd_xp", "pycograd_xp compiled"} <= set(result)
    for row in result.values():
        assert row["ms"] > 0 and row["q1"] <= row["ratio"] <= row["q3"]
        assert row["calls"] > 0 and row["bytecodes"] > row["calls"]
    # the compiled replay runs less Python than the eager step
    assert result["pycograd_xp compiled"]["bytecodes"] < result["pycograd_xp"]["bytecodes"]
