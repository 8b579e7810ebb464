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


def interleaved(
    contenders: dict[str, Callable[[], object]], repeats: int, number: int
) -> dict[str, float]:
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


def interleaved_rounds(
    contenders: dict[str, Callable[[], object]], repeats: int, number: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Each contender's seconds per call in every round, measured round-robin as
    :func:`interleaved`: (wall, cpu), each ``{name: [seconds per call, one per round]}``, on two
    clocks: ``wall`` (perf_counter) and ``cpu`` (this process's CPU time: for contenders pinned
    to one thread, what a shared machine's other load cannot inflate by preempting them)."""
    for f in contenders.values():
        f()
    wall: dict[str, list[float]] = {k: [] for k in contenders}
    cpu: dict[str, list[float]] = {k: [] for k in contenders}
    for _ in range(repeats):
        for name, f in contenders.items():
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(number):
                f()
            cpu[name].append((time.process_time() - c0) / number)
            wall[name].append((time.perf_counter() - t0) / number)
    return wall, cpu


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """(first quartile, median, third quartile) of ``values``."""
    v = sorted(values)
    q = statistics.quantiles(v, n=4) if len(v) > 1 else v * 3
    return q[0], statistics.median(v), q[2]


def interleaved_clocks(
    contenders: dict[str, Callable[[], object]], repeats: int, number: int, base: str
) -> dict[str, dict[str, float]]:
    """Each contender's median seconds per call on both clocks of :func:`interleaved_rounds`,
    and the spread of the CPU-time ratio to ``base`` over the rounds (``q1``, ``q3``: its
    quartiles, each round's ratio of calls made back to back)."""
    wall, cpu = interleaved_rounds(contenders, repeats, number)
    out = {}
    for name in contenders:
        q1, _, q3 = quartiles([c / b for c, b in zip(cpu[name], cpu[base], strict=True)])
        out[name] = {
            "wall": statistics.median(wall[name]),
            "cpu": statistics.median(cpu[name]),
            "q1": q1,
            "q3": q3,
        }
    return out


def table(
    title: str, medians: dict[str, float], baseline: str, unit: str = "ms", scale: float = 1e3
) -> str:
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


def step_peak(fn: Callable[[], object], rss_over_warmup: bool = False) -> tuple[int, int]:
    """(tracemalloc peak, resident-set growth) of one call of ``fn`` after a warm-up call (a
    trace, a library's start-up), in bytes beyond what was live before it. With
    ``rss_over_warmup`` the growth is measured over both calls (under fixed large malloc
    thresholds the allocator keeps what the warm-up freed, so only then does it show)."""
    import tracemalloc

    from pycograd_xp.memory._measure import _reset_resident_peak, _resident_growth

    rss = _reset_resident_peak() if rss_over_warmup else None
    fn()
    if not rss_over_warmup:
        rss = _reset_resident_peak()
    out = fn()
    grown = _resident_growth(rss)
    del out
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        out = fn()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    del out
    return peak, grown


MALLOC_SETTINGS = {
    "default": {},  # glibc's own thresholds
    # every block of 16 KiB or more mapped on its own and unmapped when freed: the resident
    # set's growth is then the live peak, whoever allocates (NumPy's, PyTorch's buffers alike)
    "live": {"MALLOC_MMAP_THRESHOLD_": "16384", "MALLOC_TRIM_THRESHOLD_": "0"},
    # the large fixed thresholds the timings run with (set above)
    "fixed": {"MALLOC_MMAP_THRESHOLD_": str(2**30), "MALLOC_TRIM_THRESHOLD_": str(2**30)},
}


def in_fresh_process(script: str, args: list[str], malloc: str) -> object:
    """Run ``python script *args`` in a new process under the ``malloc`` setting of
    :data:`MALLOC_SETTINGS` and return the JSON its last line prints."""
    import json
    import subprocess

    env = dict(os.environ, PYCOGRAD_BENCH_KEEP_MALLOC="1")
    env.pop("MALLOC_MMAP_THRESHOLD_", None)
    env.pop("MALLOC_TRIM_THRESHOLD_", None)
    env.update(MALLOC_SETTINGS[malloc])
    out = subprocess.run(
        [sys.executable, script, *args], env=env, capture_output=True, text=True, check=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def resident_step_peak(fn: Callable[[], object], repeats: int = 3, settle_s: float = 0.1) -> int:
    """Median resident-set growth of one call of ``fn`` over ``repeats`` calls after a warm-up
    call, in bytes beyond what was resident before each. Before each call the collector runs and
    the process rests ``settle_s`` seconds: a runtime that frees a step's buffers on its own
    threads after the step returns (XLA's CPU client) would otherwise still hold the previous
    step's pages when the peak is reset, and hand them to the next step unseen."""
    import gc

    from pycograd_xp.memory._measure import _reset_resident_peak, _resident_growth

    fn()
    grown = []
    for _ in range(repeats):
        gc.collect()
        time.sleep(settle_s)
        rss = _reset_resident_peak()
        out = fn()
        grown.append(_resident_growth(rss))
        del out
    return int(statistics.median(grown))
