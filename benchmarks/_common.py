"""Shared benchmark plumbing: thread pinning, interleaved timing, a ratio table."""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable

# glibc hands large freed blocks back to the OS and page-faults them in again on the next step,
# which moves eager-step ratios by up to 50% between runs. Keep them for every contender alike:
# the thresholds are read at process start, so re-execute once with them set.
if "MALLOC_MMAP_THRESHOLD_" not in os.environ and "PYCOGRAD_BENCH_KEEP_MALLOC" not in os.environ:
    os.environ["MALLOC_MMAP_THRESHOLD_"] = os.environ["MALLOC_TRIM_THRESHOLD_"] = str(2**30)
    os.execv(sys.executable, [sys.executable, *sys.argv])

# One BLAS thread for every contender, set before any of them is imported.
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("JAX_ENABLE_X64", "1")


def interleaved(contenders: dict[str, Callable[[], object]], repeats: int, number: int
                ) -> dict[str, float]:  # fmt: skip
    """Median seconds per call of each contender, measured round-robin so that drift and noise
    on a shared machine hit all of them alike."""
    for f in contenders.values():  # warm up (JIT compilation, caches)
        f()
    times: dict[str, list[float]] = {k: [] for k in contenders}
    for _ in range(repeats):
        for name, f in contenders.items():
            t0 = time.perf_counter()
            for _ in range(number):
                f()
            times[name].append((time.perf_counter() - t0) / number)
    return {k: statistics.median(v) for k, v in times.items()}


def table(title: str, medians: dict[str, float], baseline: str, unit: str = "ms",
          scale: float = 1e3) -> str:  # fmt: skip
    lines = [title, f"  {'contender':28s} {unit:>10s} {'ratio':>8s}"]
    base = medians[baseline]
    for name, t in medians.items():
        lines.append(f"  {name:28s} {t * scale:10.3f} {t / base:8.2f}")
    return "\n".join(lines)


def optional(name: str):
    try:
        return __import__(name)
    except ImportError:
        print(f"  ({name} not installed: skipped; pip install -e '.[bench]')")
        return None
