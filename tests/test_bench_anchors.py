"""benchmarks/bench_memory_anchors.py still runs: its pycograd_xp path (the peers skipped) on the
deep MLP, measured, and on the 1e9-parameter MLP given as specs, projected only."""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def test_anchors_benchmark_runs_pycograd_only(tmp_path):
    out = tmp_path / "rows.json"
    done = subprocess.run(
        [
            sys.executable,
            os.path.join(ROOT, "benchmarks", "bench_memory_anchors.py"),
            "--libraries",
            "pycograd_xp",
            "--workloads",
            "deep_mlp,mlp_1e9",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "meas/proj" in done.stdout
    rows = json.loads(out.read_text())
    assert {r["library"] for r in rows} == {"pycograd_xp"}
    deep = [r for r in rows if r["workload"] == "deep MLP"]
    assert sorted(r["measured_by"] for r in deep) == ["RSS growth", "tracemalloc"]
    for r in deep:
        assert r["measured"] > r["argument_bytes"] > 0 and r["seconds"] > 0
    traced = next(r for r in deep if r["measured_by"] == "tracemalloc")
    assert traced["measured"] <= traced["projected"], traced  # the projection bounds the step
    (big,) = [r for r in rows if r["workload"].startswith("MLP 1e9")]
    assert "measured" not in big
    assert big["argument_bytes"] >= 4 * 10**9  # 1e9 float32 parameters
    assert big["projected"] > big["argument_bytes"]  # the gradients come on top
