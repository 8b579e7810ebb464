"""Three kinds of mistakes a type checker must catch in a user's module (each line marked with
what mypy reports): tests/test_typing_install.py expects exactly these errors."""

from __future__ import annotations

import numpy as np

import pycograd_xp as pg
from pycograd_xp.typing import Array, Namespace

xp: Namespace = pg.namespace(np)


def loss(w: Array, x: Array) -> Array:
    out: Array = xp.sum((x @ w) ** 2)
    return out


w: Array = xp.ones(3)
x: Array = xp.ones((2, 3))
g = pg.grad(loss)(w)  # MISTAKE call-arg: a missing argument to a differentiated function
n: str = x.shape[0]  # MISTAKE assignment: a dimension is an int
w.requires_grad_("yes")  # MISTAKE arg-type: the tape's methods are typed
