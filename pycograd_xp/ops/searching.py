"""Searching functions. All return indices or counts, except ``where``, which selects values.

Only ``where`` is differentiable, and linear in its two value arguments. argmax/argmin/
count_nonzero batch as reductions; where broadcasts; searchsorted counts (a batched sorted array
has one search per example: the insertion point is the number of elements before it); nonzero's
output size depends on each example's data, so it does not batch, and its shape rule is exact
for a known constant (``AbstractArray.value``), else its upper bound (every element nonzero).
"""

from __future__ import annotations

from typing import Any

import array_api_compat.numpy as npx
import numpy as np

from .._abstract import AbstractArray
from .._primitive import Array, primitive
from ..namespace._backend import _BY_XP, SELECT_MIN, _zero_bits
from ._rules.batching import align, batch_size, batched, flat_reduction, reduction
from ._rules.jvp import linear
from ._rules.shapes import (
    BUFFER_ELEMENTS,
    broadcast,
    broadcast_view,
    data_dependent,
    elementwise_out,
    in_operands_order,
    is_array,
    measured_layouts,
    new,
    probe_dtype,
    reduced,
    ufunc_buffers,
)

# -- kits shared by the rows below (and by ops/nn/) --------------------------------------------


def select(bk: Any, condition: Any, x1: Any, x2: Any, out: Any = None) -> Any:
    """``bk.where(condition, x1, x2)``; on a raw namespace whose backend has a faster
    ``select`` capability (NumPy), that one: the same values, bit for bit. A branch may be a
    Python number (the standard's ``where`` takes scalars; no zero array to fill). With
    ``out`` (a mutable array of the result's shape and dtype, or a view of one) the result is
    written there and returned: the capability writes it directly, else it is assigned."""
    b = _BY_XP.get(id(bk))
    if b is not None and b.select is not None:
        return b.select(condition, x1, x2) if out is None else b.select(condition, x1, x2, out)
    if out is None:
        return bk.where(condition, x1, x2)
    out[...] = bk.where(condition, x1, x2)
    return out


def where_memory(out, c, x1, x2, /):
    """NumPy's where, or its bitwise blend (``Backend.select``, from ``SELECT_MIN`` elements,
    both branches numbers or arrays of the result's dtype): an int8 copy of the condition
    unless a branch is a Python zero (``_zero_bits``: one ``&``; any other number, 0.5 or 3,
    takes the general blend and its copy: measured 1.31x the former bound for int8 data beside
    3), and the buffers of its passes. A branch array of another dtype takes NumPy's where,
    which casts it through its buffers (the blend cast it whole: measured 1.64x the former
    bound for float32 beside int64)."""
    if out.size < SELECT_MIN or any(is_array(x) and x.dtype != out.dtype for x in (x1, x2)):
        return ufunc_buffers(out, c, x1, x2)
    zero = any(not is_array(v) and _zero_bits(v) for v in (x1, x2))
    mask = 0 if zero else out.size
    return (
        mask
        + 2 * min(out.size, BUFFER_ELEMENTS) * out.dtype.itemsize
        + ufunc_buffers(out, c, x1, x2)
    )


def _arg_shape(a, x, /, *, axis=None, keepdims=False):
    return new(reduced(x.shape, axis, keepdims), "int64")  # (NumPy's argmax: C order)


def _count_shape(a, x, /, *, axis=None, keepdims=False):
    # a sum of x != 0: the reduction's result keeps x's layout (order K)
    return in_operands_order(reduced(x.shape, axis, keepdims), "int64", x)


# -- argmax, argmin ------------------------------------------------------------------------------


@primitive("real numeric", axis_check=True)
def argmax(bk: Any, x: Array, /, *, axis: int | None = None, keepdims: bool = False) -> Any:
    return bk.argmax(x, axis=axis, keepdims=keepdims)


@primitive("real numeric", axis_check=True)
def argmin(bk: Any, x: Array, /, *, axis: int | None = None, keepdims: bool = False) -> Any:
    return bk.argmin(x, axis=axis, keepdims=keepdims)


@measured_layouts
def _arg_memory(out, x, /, *, axis=None, keepdims=False):
    """NumPy's argmax/argmin move the axis last and read a C-ordered copy
    (``PyArray_ArgMax``): a copy of ``x`` unless it is in C order and the axis is the last (or
    None)."""
    last = axis is None or x.ndim == 0 or axis % x.ndim == x.ndim - 1
    in_order = x.contiguous and not broadcast_view(x)
    return 0 if last and in_order else x.size * x.dtype.itemsize


for _row in (argmax, argmin):
    _row.nondifferentiable()
    _row.defbatch(flat_reduction(_row))
    _row.defshape(_arg_shape, memory=_arg_memory)


# -- count_nonzero -------------------------------------------------------------------------------


@primitive(axis_check=True)
def count_nonzero(bk: Any, x: Array, /, *, axis: Any = None, keepdims: bool = False) -> Any:
    return bk.count_nonzero(x, axis=axis, keepdims=keepdims)


count_nonzero.nondifferentiable()
count_nonzero.defbatch(reduction(count_nonzero))


@measured_layouts
def _count_nonzero_memory(out, x, /, *, axis=None, keepdims=False):
    """NumPy counts along axes as ``x.astype(bool).sum(axis, dtype=intp)``: the boolean copy
    (none of a boolean x) and the sum's cast buffer, one more for an input not in C order."""
    copy = 0 if x.dtype == np.bool_ else x.size
    k = 1 + (not x.contiguous or broadcast_view(x))
    return copy + k * min(x.size, BUFFER_ELEMENTS) * 8


count_nonzero.defshape(_count_shape, memory=_count_nonzero_memory)


# -- nonzero -------------------------------------------------------------------------------------


@primitive()
def nonzero(bk: Any, x: Array, /) -> tuple[Any, ...]:
    return tuple(bk.nonzero(x))


nonzero.nondifferentiable()
nonzero.cannot_batch(
    "its output's length depends on each example's data (the examples' results "
    "would not stack); use xp.where with a mask instead"
)


@nonzero.defshape
def nonzero_shape(a, x, /):
    if x.value is not None:  # a known constant: exactly its nonzero elements
        n = int(np.count_nonzero(x.value))
    else:
        data_dependent("nonzero")
        n = x.size if x.ndim else 1
    # NumPy's are the columns of one (n, ndim) array: strided views where x has two axes or more
    one = x.ndim <= 1 or n <= 1
    return tuple(AbstractArray((n,), "int64", contiguous=one) for _ in range(max(x.ndim, 1)))


# -- searchsorted --------------------------------------------------------------------------------


@primitive("real numeric")
def searchsorted(
    bk: Any, x1: Array, x2: Array, /, *, side: str = "left", sorter: Array = None
) -> Any:
    return bk.searchsorted(x1, x2, side=side, sorter=sorter)


searchsorted.nondifferentiable()


@searchsorted.defbatch
def searchsorted_batch(ns, dims, x1, x2, /, *, side="left", sorter=None):
    s_b = getattr(sorter, "batched", False)
    sorter = getattr(sorter, "data", sorter)
    if not dims[0] and not s_b:  # one sorted array for every example: one search
        return ns.searchsorted(x1, x2, side=side, sorter=sorter)
    n = batch_size(dims, (x1, x2)) if (dims[0] or dims[1]) else sorter.shape[0]
    x1 = batched(ns, x1, dims[0], n)
    if sorter is not None:
        x1 = ns.take_along_axis(x1, batched(ns, sorter, s_b, n), axis=1)
    x2 = batched(ns, x2, dims[1], n)
    r = x2.ndim - 1
    a = ns.reshape(x1, (n, *(1,) * r, x1.shape[1]))
    v = x2[..., None]
    before = a < v if side == "left" else a <= v
    return ns.astype(ns.sum(ns.astype(before, ns.int64), axis=-1), ns.int64)


def _searchsorted_memory(out, x1, x2, /, *, side="left", sorter=None):
    """NumPy's search takes the sorted array and the values as C-ordered arrays of their common
    dtype and the sorter as a C-ordered intp array (PyArray_SearchSorted): a full copy of each
    that is not one already (values in Fortran order measured at 1.07x a projection without
    it; found by the memory check by hypothesis, issue 33)."""
    common = np.result_type(x1.dtype, x2.dtype) if is_array(x2) else x1.dtype
    total = 0
    for a, dtype in ((x1, common), (x2, common), (sorter, np.dtype(np.intp))):
        if is_array(a) and (not a.contiguous or broadcast_view(a) or a.dtype != dtype):
            total += a.size * dtype.itemsize
    return total


def searchsorted_shape(a, x1, x2, /, *, side="left", sorter=None):
    return new(x2.shape if is_array(x2) else (), "int64")  # x2 may be a Python scalar


searchsorted.defshape(searchsorted_shape, memory=_searchsorted_memory)


# -- where ---------------------------------------------------------------------------------------


@primitive()
def where(bk: Any, condition: Array, x1: Array, x2: Array, /) -> Any:
    return select(bk, condition, x1, x2)


@where.defvjp(saves=("condition",), takes_needs=True)
def where_vjp(ns, g, out, condition, x1, x2, /, *, needs=(1, 2)):
    return (
        None,
        select(ns, condition, g, 0) if 1 in needs else None,
        select(ns, condition, 0, g) if 2 in needs else None,
    )


where.defjvp(linear(where))


@where.defbatch
def where_batch(ns, dims, condition, x1, x2):
    return ns.where(*align(ns, dims, condition, x1, x2))


def _where_shape(a, condition, x1, x2, /):
    shape = broadcast(*(v.shape for v in (condition, x1, x2) if is_array(v)))
    return elementwise_out(shape, probe_dtype(npx.where, condition, x1, x2), condition, x1, x2)


where.defshape(_where_shape, memory=where_memory)
