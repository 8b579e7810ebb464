"""A user's model module, typed: ``mypy --strict`` passes on it from any directory once the
package is installed as the README says (tests/test_typing_install.py checks it from a
directory outside the repository, where none of the repository's settings apply)."""

from __future__ import annotations

import numpy as np

import pycograd_xp as pg
from pycograd_xp import nn, optim, random
from pycograd_xp.typing import Array, Namespace

xp: Namespace = pg.namespace(np)


def init(key: random.Key, d_in: int, d_out: int) -> dict[str, Array]:
    w: Array = random.normal(key, (d_in, d_out), xp=xp) * (1.0 / d_in) ** 0.5
    b: Array = xp.zeros(d_out)
    return {"w": w, "b": b}


def loss(params: dict[str, Array], x: Array, y: Array) -> Array:
    logits = x @ params["w"] + params["b"]
    out: Array = nn.cross_entropy(logits, y)
    return out


def fit(x: Array, y: Array, classes: int, steps: int) -> float:
    params = init(random.key(0), x.shape[1], classes)  # shape is a tuple of ints
    tx = optim.adam(0.05)
    state = tx.init(params)
    value_and_grad = pg.value_and_grad(loss)
    value: Array = xp.asarray(0.0)
    for _ in range(steps):
        value, grads = value_and_grad(params, x, y)
        updates, state = tx.update(grads, state, params)
        params = optim.apply_updates(params, updates)
    return float(value)
