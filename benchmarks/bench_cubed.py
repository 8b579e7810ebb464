"""Gradient steps on Cubed, side by side in one run: time per step of logistic regression and of
least squares on 400,000 x 100 float64 rows in Zarr (16 MB chunks, threads executor).

Contenders, interleaved: graph mode (namespace(cubed), loss and gradient in one plan; as
written, and with the per-row elementwise tail after ``X @ w`` wrapped in ``pycograd_xp.remat``,
which on Cubed recomputes it in the backward instead of writing it to storage), one-pass
mode (one eager task per chunk), a hand-written Cubed gradient of the same model
(``X.T @ (X @ w - y)`` style), and one read pass over the data (``sum(X)`` on the same chunks:
the floor a one-pass method can reach). Tasks, projected task memory and the ratios to the
hand-written gradient and to the read pass are reported; then each contender runs once more on
the processes executor, each task measured on its own (``cubed_plugin.train.measuring_processes``),
for its largest measured task peak and whether every op's measured peak is within its
projection.

    python benchmarks/bench_cubed.py [--rows 400000] [--repeats 3] [--no-measure]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import _common  # noqa: F401  (thread pinning, glibc thresholds)
import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=400_000)
    ap.add_argument("--features", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--no-measure", action="store_true", help="skip the measured run on the processes executor"
    )
    a = ap.parse_args()
    import cubed
    from cubed.runtime.create import create_executor

    import pycograd_xp as pg
    from cubed_plugin.steps import graph_fusion, graph_step, one_pass_step, row_loss
    from cubed_plugin.train import MemoryRecorder, measuring_processes, synthetic

    work = tempfile.mkdtemp(prefix="bench-cubed-")
    chunk = 16_000_000 // (8 * a.features)  # 16 MB chunks of X
    synthetic(work, a.rows, a.features, chunk, "logreg")
    spec = cubed.Spec(work_dir=f"{work}/w", allowed_mem="2GB", reserved_mem="100MB")
    X = cubed.from_zarr(f"{work}/X.zarr", spec=spec)
    y = cubed.from_zarr(f"{work}/y.zarr", spec=spec)
    ex = create_executor("threads")
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal(a.features) * 0.01

    def logreg_tail(z, y):
        xp = z.__array_namespace__()
        return xp.log(1.0 + xp.exp(-xp.abs(z))) + xp.maximum(z, 0.0) - y * z

    def lsq_tail(z, y):
        r = z - y
        return r * r

    # graph mode as written, and with the elementwise tail rematerialized (pycograd_xp.remat,
    # JAX's checkpoint): on Cubed a value two ops read is written to storage (Cubed fuses no
    # op into two consumers), so recomputing the cheap tail in the backward beats saving it
    logreg, lsq = (row_loss(lambda p, X, y, t=t: t(X @ p["w"], y)) for t in (logreg_tail, lsq_tail))
    logreg_remat, lsq_remat = (
        row_loss(lambda p, X, y, t=t: pg.remat(t)(X @ p["w"], y)) for t in (logreg_tail, lsq_tail)
    )

    def hand(model: str):
        w = cubed.asarray(w0, spec=spec)
        z = X @ w
        if model == "lsq":
            r = z - y
            return cubed.mean(r * r), (X.T @ r) * (2.0 / a.rows)
        s = 1.0 / (1.0 + cubed.exp(-z))
        loss = cubed.mean(cubed.log(1.0 + cubed.exp(-cubed.abs(z))) + cubed.maximum(z, 0.0) - y * z)
        return loss, (X.T @ (s - y)) / a.rows

    def timed(build, optimize_function=None):
        def run(measure=False):
            arrays = build()
            plan = cubed.plan(*arrays, optimize_function=optimize_function)
            if measure:  # (largest measured task peak, every op within its projection)
                rec = MemoryRecorder()
                cubed.compute(
                    *arrays,
                    executor=processes,
                    callbacks=[rec],
                    optimize_function=optimize_function,
                )
                ops = [(p, m) for _, p, m in rec.report() if m is not None]
                return max(m for _, m in ops), all(m <= p for p, m in ops)
            t0 = time.perf_counter()
            cubed.compute(*arrays, executor=ex, optimize_function=optimize_function)
            return time.perf_counter() - t0, plan.num_tasks, plan.max_projected_mem

        return run

    processes = None if a.no_measure else measuring_processes()

    params = {"w": w0}

    def graph(loss):
        def build():
            v, g = graph_step(loss, params, (X, y), spec)
            return [pg.unwrap(v), pg.unwrap(g["w"])]

        return build

    for model, loss, loss_remat in (("logreg", logreg, logreg_remat), ("lsq", lsq, lsq_remat)):
        contenders = {
            "graph mode": timed(graph(loss), graph_fusion()),
            "graph, remat(tail)": timed(graph(loss_remat), graph_fusion()),
            "graph, Cubed's fusion": timed(graph(loss)),
            "one-pass mode": timed(lambda loss=loss: [one_pass_step(loss, params, (X, y))[0]]),
            "hand-written Cubed": timed(lambda model=model: list(hand(model))),
            "one read pass (sum X)": timed(lambda: [cubed.sum(X)]),
        }
        results = {k: [] for k in contenders}
        info = {}
        for f in contenders.values():
            f()  # warm up
        for _ in range(a.repeats):
            for name, f in contenders.items():
                t, tasks, mem = f()
                results[name].append(t)
                info[name] = (tasks, mem)
        med = {k: statistics.median(v) for k, v in results.items()}
        hand_t, read_t = med["hand-written Cubed"], med["one read pass (sum X)"]
        print(
            f"{model}: {a.rows} x {a.features} float64 ({a.rows * a.features * 8 / 1e6:.0f} MB)"
            f", chunks of {chunk} rows, threads executor, median of {a.repeats}"
        )
        measured = {name: f(measure=True) for name, f in contenders.items()} if processes else {}
        print(
            f"  {'contender':24s} {'s/step':>8s} {'/hand':>7s} {'/read':>7s} {'tasks':>6s} "
            f"{'projected MB':>13s} {'measured MB':>12s} {'within':>7s}"
        )
        for name, t in med.items():
            tasks, mem = info[name]
            peak, ok = measured.get(name, (None, None))
            peak_s = "-" if peak is None else f"{peak / 1e6:.1f}"
            print(
                f"  {name:24s} {t:8.3f} {t / hand_t:7.2f} {t / read_t:7.2f} {tasks:6d} "
                f"{mem / 1e6:13.1f} {peak_s:>12s} {'-' if ok is None else str(ok):>7s}"
            )


if __name__ == "__main__":
    main()
