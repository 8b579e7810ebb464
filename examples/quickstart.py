"""Array-agnostic code on pycograd_xp: the same function on NumPy, array-api-strict and Cubed.

python examples/quickstart.py
"""

from __future__ import annotations

import importlib

import array_api_compat

import pycograd_xp


def standardize(x):
    """Plain Array API code: it finds its namespace from its input, like scipy does."""
    xp = array_api_compat.array_namespace(x)
    mu = xp.mean(x, axis=0, keepdims=True)
    sd = xp.std(x, axis=0, keepdims=True, correction=1)
    return (x - mu) / sd


def main() -> None:
    for name in ("numpy", "array_api_strict", "cubed"):
        try:
            backend = importlib.import_module(name)
        except ImportError:
            print(f"{name:17s} not installed, skipped")
            continue
        xp = pycograd_xp.namespace(backend)
        x = xp.reshape(xp.arange(12, dtype=xp.float64), (4, 3)) ** 2
        z = standardize(x)
        print(f"{xp.__name__:30s} column sums of squares: "
              f"{[round(float(v), 6) for v in xp.unstack(xp.sum(z * z, axis=0))]}")  # fmt: skip


if __name__ == "__main__":
    main()
