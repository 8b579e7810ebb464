"""Run cheap benchmark configurations and keep what they print, with the date and the machine,
as ``docs/benchmarks/<name>.json`` (the docs build renders them: tools/docs_hooks.py).

    python tools/bench_snapshot.py bench_chain bench_mlp ...   [--allow-busy]

It refuses to record on a busy machine (1-minute load average at or above ``QUIET_LOAD``) unless
given ``--allow-busy``, and keeps the load before and after each run with its results.

Each benchmark runs in its own process, as ``python benchmarks/<name>.py [args]``; its contenders
(ours and the peers installed: PyTorch, HIPS autograd, JAX) run interleaved in that process, so
the ratios it prints were measured in one run.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# name -> (arguments, what the configuration is); small sizes only, each under a few minutes
CONFIGS: dict[str, tuple[list[str], str]] = {
    "bench_chain": ([], "the script's own sizes: 50 elementwise ops on shapes (8,) and (100,)"),
    "bench_overhead": ([], "the script's own sizes"),
    "bench_mlp": ([], "the script's own sizes"),
    "bench_vmap": ([], "the script's own sizes"),
    "bench_jvp": ([], "the script's own sizes"),
    "bench_memory": ([], "the script's own sizes"),
    "bench_digits": (["--rounds", "41"], "the epoch of examples/digits.py, 41 rounds"),
    "bench_transformer": (["--no-char", "--gemms"], "one block step and the small CNN step"),
    "bench_remat": ([], "budgeted steps: 20-layer MLP, 8 transformer blocks, the small CNN"),
}


def machine() -> dict[str, str]:
    model = ""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        model = next(
            (ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith("Model name")),
            "",
        )
    except (OSError, subprocess.CalledProcessError):
        pass
    import numpy

    return {
        "cpu": model or platform.processor(),
        "cores": str(os.cpu_count()),
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "platform": platform.platform(),
    }


def commit() -> str:
    out = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    )
    return out.stdout.strip()


# a machine is quiet for a snapshot when its 1-minute load average is below this (nothing else
# running: a load of 1 on 2 cores halves a benchmark's CPU and skews the peers' ratios unevenly)
QUIET_LOAD = 0.5


def load() -> float:
    """The 1-minute load average (0 where the system does not report one)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return 0.0


def settle(limit: float = 180.0) -> float:
    """Wait (up to ``limit`` seconds) for the 1-minute load to fall below ``QUIET_LOAD``: the
    previous benchmark's own processes leave about one in it for a minute after they end. The
    load reached is returned."""
    end = time.monotonic() + limit
    while load() >= QUIET_LOAD and time.monotonic() < end:
        time.sleep(5)
    return load()


def run(name: str) -> dict:
    args, config = CONFIGS[name]
    before = load()
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / f"{name}.py"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return {
        "benchmark": name,
        "command": " ".join(["python", f"benchmarks/{name}.py", *args]),
        "configuration": config,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit(),
        "machine": machine(),
        "seconds": round(time.perf_counter() - t0, 1),
        # the benchmark's own processes add about one to the load it ends with
        "load": {
            "before": round(before, 2),
            "after": round(load(), 2),
            "quiet": before < QUIET_LOAD,
        },
        "output": out.stdout.rstrip(),
    }


def main() -> None:
    busy_ok = "--allow-busy" in sys.argv
    names = [a for a in sys.argv[1:] if a != "--allow-busy"] or list(CONFIGS)
    dest = ROOT / "docs" / "benchmarks"
    dest.mkdir(parents=True, exist_ok=True)
    for name in names:
        if settle() >= QUIET_LOAD and not busy_ok:
            sys.exit(
                f"bench_snapshot: the load average is {load():.2f} after 3 minutes' wait (quiet: "
                f"below {QUIET_LOAD}); stop what else runs, or record anyway with --allow-busy "
                "(the page then says the machine was busy)"
            )
        result = run(name)
        (dest / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n")
        print(f"{name}: {result['seconds']} s")


if __name__ == "__main__":
    main()
