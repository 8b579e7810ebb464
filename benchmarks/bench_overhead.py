"""Per-call overhead of ``namespace(numpy)`` over the raw backend, on small arrays.

    python benchmarks/bench_overhead.py

Each case runs on array-api-compat's NumPy namespace (what we call underneath) and on ours,
interleaved in one process; it prints the medians, the overhead (ours - raw) and the ratio.
"""

from __future__ import annotations

import statistics
import timeit

import _common  # noqa: F401  (pins threads)
import array_api_compat.numpy as raw_xp
import numpy as np

import pycograd_xp

xp = pycograd_xp.namespace(np)


def cases(ns, a, b, m):
    return {
        "sin(x)": lambda: ns.sin(a),
        "add(x, y)": lambda: ns.add(a, b),
        "x * y": lambda: a * b,
        "x + 1.0": lambda: a + 1.0,
        "sum(x)": lambda: ns.sum(a),
        "sum(m, axis=0)": lambda: ns.sum(m, axis=0),
        "matmul(m, m)": lambda: ns.matmul(m, m),
        "reshape(m, (-1,))": lambda: ns.reshape(m, (-1,)),
        "x[1:3]": lambda: a[1:3],
        "where(x > 0, x, y)": lambda: ns.where(a > 0, a, b),
    }


def main(n: int = 20000, repeats: int = 15) -> None:
    data = np.linspace(-1, 1, 8), np.linspace(1, 2, 8), np.ones((4, 4))
    raw = cases(raw_xp, *data)
    ours = cases(xp, *(xp.asarray(d) for d in data))
    print(f"{'case':22s} {'raw µs':>8s} {'ours µs':>8s} {'overhead µs':>12s} {'ratio':>6s}")
    overheads = []
    for name in raw:
        t_raw, t_ours = [], []
        for _ in range(repeats):  # interleaved, so drift hits both alike
            t_raw.append(timeit.timeit(raw[name], number=n) / n * 1e6)
            t_ours.append(timeit.timeit(ours[name], number=n) / n * 1e6)
        r, o = statistics.median(t_raw), statistics.median(t_ours)
        overheads.append(o - r)
        print(f"{name:22s} {r:8.3f} {o:8.3f} {o - r:12.3f} {o / r:6.2f}")
    print(f"median overhead per call: {statistics.median(overheads):.3f} µs")


if __name__ == "__main__":
    main()
