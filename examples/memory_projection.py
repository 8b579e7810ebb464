"""How much memory will this gradient step take? Ask before running it.

Projects the forward pass and the whole value_and_grad step of an MLP from shapes alone, prints
the per-op table's head, checks it against a limit, then runs the real step and measures it on
the same scale (tracemalloc), and draws both: f alone and the step, each beside its measured
peak, into ``--out`` (default: a new temporary file, whose path it prints).

    python examples/memory_projection.py [--out step.png]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import numpy as np

import pycograd_xp as pg
from pycograd_xp import memory, nn

xp = pg.namespace(np)


def loss(params, x, labels):
    h = x
    for W, b in params[:-1]:
        h = nn.gelu(nn.layer_norm(h) @ W + b)
    W, b = params[-1]
    return nn.cross_entropy(h @ W + b, labels)


def main(out: str | None = None) -> str:
    """Project, check, measure and draw; return the path of the picture."""
    sizes = [784, 1024, 1024, 1024, 10]
    batch = 512
    # from specs: nothing is allocated
    specs = [
        (memory.spec((m, n)), memory.spec(n)) for m, n in zip(sizes[:-1], sizes[1:], strict=True)
    ]
    p = memory.project(loss, specs, memory.spec((batch, sizes[0])), xp.zeros(batch, dtype=xp.int64))
    print("\n".join(str(p).splitlines()[:12]), "\n   ...")
    p.check("2GB")  # raises MemoryLimitError, before anything runs, if the step would not fit

    rng = np.random.default_rng(0)
    params = [
        (xp.asarray(rng.standard_normal((m, n)) / m**0.5), xp.zeros(n))
        for m, n in zip(sizes[:-1], sizes[1:], strict=True)
    ]
    x = xp.asarray(rng.standard_normal((batch, sizes[0])))
    labels = xp.asarray(rng.integers(0, 10, batch))
    m = memory.measure(loss, params, x, labels)
    print(
        f"step: projected {p.peak_bytes / 1e6:.1f} MB, measured {m.peak_bytes / 1e6:.1f} MB "
        f"(ratio {m.peak_bytes / p.traced_peak_bytes:.3f}, tracemalloc's scale); forward "
        f"alone: projected {p.forward_peak_bytes / 1e6:.1f} MB, measured "
        f"{m.forward_peak_bytes / 1e6:.1f} MB; resident-set growth of the step "
        f"{(m.resident_peak_bytes or 0) / 1e6:.1f} MB"
    )
    if out is None:
        fd, out = tempfile.mkstemp(prefix="memory_projection_", suffix=".png")
        os.close(fd)  # the picture is written in its place
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    p.plot(out, measured=m, title="MLP 784-1024x3-10, batch 512, float64")
    print(f"wrote {out}")
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out", help="where to write the picture (default: a new temporary file, printed)"
    )
    main(parser.parse_args().out)
