"""JVP rules of the linear-algebra functions: products are bilinear, so the tangent is the
product with one factor replaced by its tangent, summed (a constant factor costs nothing)."""

from __future__ import annotations

from .._primitive import defjvp
from ..ops._rules.jvp import call, linear_rows, plus


def bilinear(name):
    def rule(ns, t, out, x1, x2, **kwargs):
        return plus(None if t[0] is None else call(ns, name, t[0], x2, **kwargs),
                    None if t[1] is None else call(ns, name, x1, t[1], **kwargs))  # fmt: skip

    defjvp(name, rule)


bilinear("matmul")
bilinear("tensordot")
bilinear("vecdot")
linear_rows("matrix_transpose")
