"""Array-agnostic code, differentiated: the same loss and gradient on NumPy, array-api-strict
and Cubed (the last two when installed).

    python examples/quickstart.py

The model is plain Array API code (it finds its namespace from its inputs, the way scipy and
scikit-learn do); pycograd_xp makes it differentiable on every backend.
"""

from __future__ import annotations

import importlib

import array_api_compat
import numpy as np

import pycograd_xp as pg


def loss(params, x, y):
    """Logistic regression with standardized features, in Array API code only."""
    xp = array_api_compat.array_namespace(x)
    w, b = params
    z = (x - xp.mean(x, axis=0)) / xp.std(x, axis=0, correction=1)
    logits = z @ w + b
    return xp.mean(xp.logaddexp(0.0, logits) - y * logits)


def main() -> None:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((256, 3)) * [1.0, 10.0, 0.1]
    Y = (X @ [1.0, -0.2, 5.0] > 0).astype(np.float64)

    xp = pg.namespace(np)
    x, y = xp.asarray(X), xp.asarray(Y)
    params = (xp.zeros(3), xp.asarray(0.0))
    step = pg.value_and_grad(loss)
    for i in range(201):
        value, (gw, gb) = step(params, x, y)
        params = (params[0] - 1.0 * gw, params[1] - 1.0 * gb)
        if i % 50 == 0:
            print(f"numpy  step {i:3d}  loss {float(value):.4f}")

    start = (xp.asarray([0.1, -0.2, 0.3]), xp.asarray(0.05))
    _, (g_ref, _) = step(start, x, y)
    for name in ("array_api_strict", "cubed"):
        try:
            backend = importlib.import_module(name)
        except ImportError:
            print(f"{name}: not installed, skipped")
            continue
        bx = pg.namespace(backend)
        p = (bx.asarray(np.array([0.1, -0.2, 0.3])), bx.asarray(0.05))
        _, (g, _) = step(p, bx.asarray(X), bx.asarray(Y))
        diff = np.max(np.abs(np.asarray(pg.unwrap(g)) - np.asarray(pg.unwrap(g_ref))))
        print(f"{bx.__name__}: same gradient as NumPy (max difference {diff:.1e})")


if __name__ == "__main__":
    import argparse

    argparse.ArgumentParser(  # no options: --help shows what it does
        description=" ".join(__doc__.split("\n\n")[0].split())
    ).parse_args()
    main()
