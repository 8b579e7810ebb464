"""The linear layer's row ``_linear``: ``x @ w + b`` as one node (PyTorch's ``addmm``), the
product and its bias (:func:`pycograd_xp.nn.linear`, where the three arrays share a real
floating dtype and ``b`` has one value per output).

The values are the composition's bit for bit: the same product (``stack_product``, a stack of
rows against one weight as one GEMM), the bias added into the fresh product in place where the
backend writes in place (a new sum elsewhere: Cubed, array-api-strict), and in the VJP the
product's cotangents (``matmul_vjp``) and the bias's the cotangent summed over its leading
axes, as the engine sums a broadcast operand's. One node instead of two: on a small model each
node costs more in Python than its arithmetic (measured on digits' two layers: ~10-18 us of
its ~480 us ``value_and_grad``; with cross-entropy's mean in its row, the epoch 0.94 of the
composition's).

JVP: ``tx @ w + x @ tw + tb`` (bilinear in ``x, w``, affine in ``b``). Batching: a batched
input with a shared weight and bias is the row itself (its leading axes); a per-example weight
or bias is matmul's batching rule and a broadcast add. Memory: matmul's (casts, CuPy's copies),
the add's iterator buffers, and the product beside a new sum (the worst case, whatever the
backend: an eager run projects the backend calls of the row itself, not this rule).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import _reductions as fast
from ..._primitive import Array, primitive
from .._rules.jvp import call, plus
from .._rules.shapes import new, ufunc_buffers
from ..linear_algebra import _matmul_memory, matmul_batch, matmul_vjp, stack_product
from .pieces import FP, in_place


def _check(x: Any, w: Any, b: Any) -> None:
    if w.ndim != 2 or x.ndim == 0 or x.shape[-1] != w.shape[0] or b.shape != w.shape[1:]:
        raise ValueError(
            f"_linear(): input {tuple(x.shape)}, weight {tuple(w.shape)} and bias "
            f"{tuple(b.shape)} do not make a linear layer: expected x (..., in), w (in, out) "
            "and b (out,); nn.linear takes any other shapes as x @ w + b"
        )


@primitive(FP, needs=("matmul",))
def _linear(bk: Any, x: Array, w: Array, b: Array, /) -> Any:
    """``x @ w + b``: the product (one GEMM over a stack's rows), the bias added into it in
    place where the backend writes in place; else a new sum."""
    _check(x, w, b)
    y = stack_product(bk, x, w)
    if y.dtype == b.dtype and in_place(bk):  # the sum keeps the fresh product's dtype
        y += b
        return y
    return y + b


@_linear.defvjp(saves=("x", "w"), takes_needs=True)
def _linear_vjp(ns, g, out, x, w, b, /, *, needs=(0, 1, 2)):
    gx, gw = matmul_vjp(ns, g, out, x, w, needs=needs)
    gb = None
    if 2 in needs:  # the bias's cotangent: g summed over its leading axes, as the engine's
        gb = g if g.ndim == 1 else fast.sum(ns, g, tuple(range(g.ndim - 1)))
    return gx, gw, gb


def _linear_jvp(ns, t, out, x, w, b, /):
    tx, tw, tb = t
    if tx is None and tw is None:  # the bias's tangent alone, over the leading axes
        return tb + ns.zeros_like(out)
    return plus(
        None if tx is None else call(ns, "matmul", tx, w),
        None if tw is None else call(ns, "matmul", x, tw),
        tb,
    )


_linear.defjvp(_linear_jvp)


@_linear.defbatch
def _linear_batch(ns, dims, x, w, b, /):
    bx, bw, bb = dims
    if not (bw or bb):  # a batched input: the batch is one more leading axis
        return ns._linear(x, w, b)
    y = matmul_batch(ns, (bx, bw), x, w)  # (B, ..., out)
    if bb:  # (B, out) over y's axes between the batch and the outputs
        b = ns.reshape(b, (b.shape[0],) + (1,) * (y.ndim - 2) + (b.shape[-1],))
    return y + b


def _linear_shape(a, x, w, b, /):
    _check(x, w, b)
    return new((*x.shape[:-1], w.shape[1]), np.result_type(x.dtype, w.dtype, b.dtype))


def _linear_memory(out, x, w, b, /):
    """matmul's transients for the product, the add's iterator buffers (the bias broadcast
    over the product), and the product itself beside a new sum: the worst case on every
    backend (NumPy adds into the product; Cubed and array-api-strict make a new sum)."""
    prod = new(out.shape, np.result_type(x.dtype, w.dtype))
    return _matmul_memory(prod, x, w) + ufunc_buffers(out, prod, b) + prod.nbytes


_linear.defshape(_linear_shape, memory=_linear_memory)
