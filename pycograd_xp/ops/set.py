"""Set functions: ``isin`` and the ``unique_*`` family (data-dependent output shapes: eager
backends only).

Gradients: the unique values are a gather from the input: each value's cotangent goes to the
first occurrence of that value in the input (JAX's choice; where values repeat, the function is
not differentiable, and that is one valid subgradient). Indices, inverse indices, counts and
``isin`` are integers or booleans: no gradient. Forward mode is derived from the VJP rules
(first occurrences).

Batching: isin batches (a batched set: compare against each example's elements); the unique_*
rows have outputs whose length depends on each example's data.

Shapes, as NumPy's ``np.unique``/``np.isin`` compute them. The number of distinct values depends
on the data. When ``x`` has a known ``value`` (a small constant given from outside) the shapes
are exact; otherwise they are the upper bound, every element distinct (``x.size`` values,
indices and counts). ``inverse_indices`` has ``x``'s shape. No output is a view
(``inverse_indices`` is NumPy's reshape of a new array: the same memory).

What the calls allocate beyond their outputs (``memory=``), phase by phase as
``numpy/lib/_arraysetops_impl.py`` runs, the most live at once minus the outputs (with ``u``
distinct values of ``s`` bytes among ``N`` elements):

* ``unique_values`` of integers or complex numbers: a flattened copy and a C++ hash set of the
  distinct values (outside tracemalloc's view: :func:`native`; measured at most 15 bytes per
  distinct value from 65k to 10M elements, bounded by 16); of floats and booleans: the flattened
  copy sorted in place, a mask and the comparison that fills it;
* ``unique_counts``: the sorted copy, the mask, the positions of the first occurrences and their
  concatenation with ``N`` before ``diff`` gives the counts;
* ``unique_inverse``: the copy, its argsort, the sorted values, the mask, ``cumsum(mask) - 1``;
* ``unique_all``: all of those, with a stable argsort (its buffer: :func:`native`);
* ``isin``: NumPy's strategy (a lookup table for integers whose test values span a small range,
  a loop over few test elements, or sorting both arrays together after ``unique``); for
  integers whose test values are not known, the larger of the table and the other.
"""

from __future__ import annotations

import math
from typing import Any

import array_api_compat.numpy as npx
import numpy as np
from array_api_compat.common._aliases import (
    UniqueAllResult,
    UniqueCountsResult,
    UniqueInverseResult,
)

from .._primitive import Array, primitive
from ._rules.jvp import TRANSPOSED
from ._rules.shapes import as_abstract, data_dependent, is_array, native, new
from .indexing import _scatter

# -- kits shared by the rows below ---------------------------------------------------------------

PER_EXAMPLE_LENGTH = (
    "its output's length depends on each example's data (the examples' results would not stack)"
)


def _distinct(x):
    """The number of distinct values: exact for a known constant, else every element."""
    if x.value is not None:
        return int(npx.unique_values(np.asarray(x.value)).shape[0])
    data_dependent("unique_* (the number of distinct values)")
    return x.size


def _sizes(x):
    return x.size, x.dtype.itemsize


def _owned(out):
    return sum(o.nbytes for o in (out if isinstance(out, tuple) else (out,)))


# -- isin ----------------------------------------------------------------------------------------


@primitive()
def isin(bk: Any, x1: Array, x2: Array, /, *, invert: bool = False) -> Any:
    return bk.isin(x1, x2, invert=invert)


isin.nondifferentiable()


@isin.defbatch
def isin_batch(ns, dims, x1, x2, /, *, invert=False):
    if not dims[1]:
        return ns.isin(x1, x2, invert=invert)
    n = x2.shape[0]
    if not dims[0]:
        x1 = ns.broadcast_to(x1, (n, *x1.shape))
    r = x1.ndim - 1
    k = math.prod(x2.shape[1:])  # (not -1: a reshape of no elements cannot infer an axis)
    found = ns.any(x1[..., None] == ns.reshape(x2, (n, *(1,) * r, k)), axis=-1)
    return ns.logical_not(found) if invert else found


def _isin_shape(a, x1, x2, /, *, invert=False):
    x1 = as_abstract(x1)
    shape = x1.shape if is_array(x1) else ()
    return new(shape, "bool")


def _isin_memory(out, x1, x2, /, *, invert=False):
    x1, x2 = as_abstract(x1), as_abstract(x2)
    n1, s1 = _sizes(x1) if is_array(x1) else (1, 8)
    n2, s2 = _sizes(x2) if is_array(x2) else (1, 8)
    s = max(s1, s2)
    copies = sum(x.size * x.dtype.itemsize for x in (x1, x2) if is_array(x) and not x.contiguous)
    # a lookup table (integers whose test values span at most 6 (n1 + n2)): a bool per value
    # in range, three masks, the values in range and their int64 offsets
    table = 6 * (n1 + n2) + n1 * (s1 + 3 + 8) + n2 * s2
    # few test values: one comparison per value, into a bool temporary
    loop = 2 * n1
    # else unique(x1) with its inverse, unique(x2), both concatenated, a stable argsort (and its
    # buffer), the sorted values and three bool vectors
    unique1 = n1 * (3 * s1 + 25)
    together = (
        8 * n1
        + n1 * s1
        + n2 * (s2 + 16)
        + (n1 + n2) * (2 * s + 11)
        + native((n1 + n2) // 2 * 8 + 8)
    )
    other = loop if n2 < 10 * n1**0.145 else max(unique1, together)
    ints = all(x.dtype.kind in "biu" for x in (x1, x2) if is_array(x))
    if ints and is_array(x2) and x2.value is not None and x2.size:
        v = np.asarray(x2.value).astype("int64")
        return copies + (table if int(v.max()) - int(v.min()) <= 6 * (n1 + n2) else other)
    return copies + max(table if ints else 0, other)


isin.defshape(_isin_shape, memory=_isin_memory)


# -- unique_all ----------------------------------------------------------------------------------


@primitive()
def unique_all(bk: Any, x: Array, /) -> Any:
    return bk.unique_all(x)


@unique_all.defvjp(saves=("out",))
def unique_all_vjp(ns, g, out, x, /):
    return (_scatter(ns, x, g[0], out[1]),)


unique_all.defjvp(TRANSPOSED)
unique_all.cannot_batch(PER_EXAMPLE_LENGTH)


def _unique_all_shape(a, x, /):
    u = _distinct(x)
    return UniqueAllResult(
        new((u,), x.dtype), new((u,), "int64"), new(x.shape, "int64"), new((u,), "int64")
    )


def _unique_all_memory(out, x, /):
    n, s = _sizes(x)
    u = out.values.shape[0]
    buffer = native(n * 8 if x.dtype.kind in "biu" and s <= 2 else (n // 2 + 1) * 8)
    argsort = n * (s + 8) + buffer
    mask = n * (2 * s + 10)
    inverse = n * (2 * s + 25) + u * (s + 8)  # ... values, first indices, cumsum(mask) - 1
    counts = n * (2 * s + 25) + u * (s + 24)  # ... the inverse, first positions, concatenated
    return max(argsort, mask, inverse, counts) - _owned(out)


unique_all.defshape(_unique_all_shape, memory=_unique_all_memory)


# -- unique_counts -------------------------------------------------------------------------------


@primitive()
def unique_counts(bk: Any, x: Array, /) -> Any:
    return bk.unique_counts(x)


@unique_counts.defvjp(saves=("x",))
def unique_counts_vjp(ns, g, out, x, /):
    return (_scatter(ns, x, g[0], ns.unique_all(x).indices),)


unique_counts.defjvp(TRANSPOSED)
unique_counts.cannot_batch(PER_EXAMPLE_LENGTH)


def _unique_counts_shape(a, x, /):
    u = _distinct(x)
    return UniqueCountsResult(new((u,), x.dtype), new((u,), "int64"))


def _unique_counts_memory(out, x, /):
    n, s = _sizes(x)
    u = out.values.shape[0]
    mask = n * (s + 2)
    counts = n * (s + 1) + u * s + 16 * u  # values, first positions, concatenated with N
    return max(mask, counts) - _owned(out)


unique_counts.defshape(_unique_counts_shape, memory=_unique_counts_memory)


# -- unique_inverse ------------------------------------------------------------------------------


@primitive()
def unique_inverse(bk: Any, x: Array, /) -> Any:
    return bk.unique_inverse(x)


@unique_inverse.defvjp(saves=("x",))
def unique_inverse_vjp(ns, g, out, x, /):
    return (_scatter(ns, x, g[0], ns.unique_all(x).indices),)


unique_inverse.defjvp(TRANSPOSED)
unique_inverse.cannot_batch(PER_EXAMPLE_LENGTH)


def _unique_inverse_shape(a, x, /):
    return UniqueInverseResult(new((_distinct(x),), x.dtype), new(x.shape, "int64"))


def _unique_inverse_memory(out, x, /):
    n, s = _sizes(x)
    u = out.values.shape[0]
    mask = n * (2 * s + 10)  # copy, argsort, sorted values, mask and its comparison
    inverse = n * (2 * s + 25) + u * s  # ... the values, cumsum(mask) - 1, the inverse
    return max(mask, inverse) - _owned(out)


unique_inverse.defshape(_unique_inverse_shape, memory=_unique_inverse_memory)


# -- unique_values -------------------------------------------------------------------------------


@primitive()
def unique_values(bk: Any, x: Array, /) -> Any:
    return bk.unique_values(x)


@unique_values.defvjp(saves=("x",))
def unique_values_vjp(ns, g, out, x, /):
    return (_scatter(ns, x, g, ns.unique_all(x).indices),)


unique_values.defjvp(TRANSPOSED)
unique_values.cannot_batch(PER_EXAMPLE_LENGTH)


def _unique_values_shape(a, x, /):
    return new((_distinct(x),), x.dtype)


def _unique_values_memory(out, x, /):
    n, s = _sizes(x)
    u = out.shape[0]
    if x.dtype.kind in "iuc":  # the flattened copy and the hash set, then the values
        return n * s + native(16 * u)
    # flattened copy sorted in place, the mask (and the comparison filling it), the values
    return max(n * (s + 2), n * (s + 1) + u * s) - _owned(out)


unique_values.defshape(_unique_values_shape, memory=_unique_values_memory)
