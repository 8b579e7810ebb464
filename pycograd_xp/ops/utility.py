"""Utility functions: ``all``/``any`` and ``diff``.

``all``/``any`` return booleans (no gradient) and batch like the statistical reductions.
``diff`` is linear in ``x``, ``prepend`` and ``append``; it batches by shifting its axis and
batching ``prepend``/``append``. NumPy's ``diff`` concatenates ``prepend``/``append`` first,
and each of its ``n`` differences is a new array.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._primitive import Array, primitive
from ._rules.batching import batched, reduction, shift
from ._rules.jvp import linear
from ._rules.shapes import (
    BUFFER_ELEMENTS,
    in_operands_order,
    is_array,
    measured_layouts,
    reduced,
)
from ._rules.vjp import is_scalar

# -- all, any ------------------------------------------------------------------------------------


@primitive(axis_check=True)
def all(bk: Any, x: Array, /, *, axis: Any = None, keepdims: bool = False) -> Any:
    return bk.all(x, axis=axis, keepdims=keepdims)


@primitive(axis_check=True)
def any(bk: Any, x: Array, /, *, axis: Any = None, keepdims: bool = False) -> Any:
    return bk.any(x, axis=axis, keepdims=keepdims)


def _truth_shape(a, x, /, *, axis=None, keepdims=False):
    return in_operands_order(reduced(x.shape, axis, keepdims), "bool", x)  # (as reductions')


for _row in (all, any):
    _row.nondifferentiable()
    _row.defbatch(reduction(_row))
    _row.defshape(_truth_shape)


# -- diff ----------------------------------------------------------------------------------------


@primitive(axis_check=True)
def diff(
    bk: Any, x: Array, /, *, axis: int = -1, n: int = 1, prepend: Array = None, append: Array = None
) -> Any:
    # array-api-compat's NumPy diff rejects an explicit None for prepend/append
    ends = {k: v for k, v in (("prepend", prepend), ("append", append)) if v is not None}
    return bk.diff(x, axis=axis, n=n, **ends)


@diff.defvjp(diff_kwargs=("prepend", "append"))
def diff_vjp(ns, g, out, x, /, *, axis=-1, n=1, prepend=None, append=None):
    # diff is linear: out = D^n (prepend ++ x ++ append). The adjoint of one first difference
    # y_i = z_{i+1} - z_i is  z_j = y_{j-1} - y_j (zero outside), applied n times.
    axis = axis % x.ndim
    if n == 0:  # x itself, the ends left out (NumPy's, JAX's, array-api-strict's)
        return g, None, None

    def pad(a, before):
        shape = list(a.shape)
        shape[axis] = 1
        z = ns.zeros(tuple(shape), dtype=a.dtype)
        return ns.concat([z, a] if before else [a, z], axis=axis)

    for _ in range(n):
        g = pad(g, True) - pad(g, False)
    sizes = []
    for part in (prepend, x, append):
        if part is None:
            sizes.append(0)
        elif is_scalar(part):
            sizes.append(1)
        else:
            sizes.append(part.shape[axis] if part.ndim == x.ndim else 1)
    cuts = [0, sizes[0], sizes[0] + sizes[1], sum(sizes)]
    pieces = []
    for i in range(3):
        idx = [slice(None)] * g.ndim
        idx[axis] = slice(cuts[i], cuts[i + 1])
        pieces.append(g[tuple(idx)])
    return pieces[1], pieces[0] if sizes[0] else None, pieces[2] if sizes[2] else None


diff.defjvp(linear(diff))


@diff.defbatch
def diff_batch(ns, dims, x, /, *, axis=-1, n=1, prepend=None, append=None):
    b = x.shape[0] if dims[0] else None
    parts = {}
    for k, v in (("prepend", prepend), ("append", append)):
        if v is None:
            continue
        vb = getattr(v, "batched", False)
        data = getattr(v, "data", v)
        if b is None and vb:
            b = data.shape[0]
        parts[k] = (data, vb)
    assert b is not None  # a batching rule has a batched operand
    nd = (x.ndim - 1) if dims[0] else x.ndim
    x = batched(ns, x, dims[0], b)
    kw = {k: batched(ns, d, vb, b) for k, (d, vb) in parts.items()}
    return ns.diff(x, axis=shift(axis, nd), n=n, **kw)


def _diff_shape(a, x, /, *, axis=-1, n=1, prepend=None, append=None, **_):
    if n == 0:  # x itself, the ends left out
        return in_operands_order(x.shape, x.dtype, x)
    shape = list(x.shape)
    ax = axis % x.ndim
    for end in (prepend, append):
        if is_array(end):
            shape[ax] += end.shape[ax] if end.ndim else 1
    shape[ax] = max(shape[ax] - n, 0)
    # NumPy concatenates the ends first: the result takes their promoted dtype
    ends = [e for e in (prepend, append) if is_array(e)]
    # subtract(a[1:], a[:-1]) of views of x (or of the ends joined to it): x's layout
    return in_operands_order(shape, np.result_type(x.dtype, *(e.dtype for e in ends)), x, *ends)


@measured_layouts
def _diff_memory(out, x, /, *, axis=-1, n=1, prepend=None, append=None, **_):
    # NumPy concatenates prepend/append first, and each of the n differences is a new array,
    # ``subtract(a[1:], a[:-1])`` along the axis: two shifted views the ufunc may buffer (along
    # the last axis they are not in C order; measured 96 kB on 142 x 213 float64), counted both
    item = out.dtype.itemsize
    parts = [e for e in (x, prepend, append) if is_array(e)]
    joined = sum(e.size for e in parts) * item if len(parts) > 1 else 0
    buffers = 2 * min(out.size, BUFFER_ELEMENTS) * item if out.size else 0
    return joined + (n - 1) * max(joined, x.size * item) + buffers


diff.defshape(_diff_shape, memory=_diff_memory)
