"""Sorting functions: ``sort`` and ``argsort``.

Gradients: ``sort`` routes cotangents back through its permutation; ``argsort`` gives integers,
no gradient. Forward mode for ``sort`` is derived from its VJP rule (the stable permutation).
Batching: both sort along an axis of the example, the axis shifted past the batch.

Shapes, as NumPy (through array_api_compat) runs them. ``sort`` copies its input and sorts the
copy in place; ``descending=True`` returns a reversed view of that copy (array_api_compat flips
the ascending result), so the output is a view whose base is the sorted copy. ``argsort`` makes a
new int64 array; descending, it sorts the flipped input and subtracts the flipped indices from
``n - 1``, a new array.

What the calls allocate beyond their outputs (``memory=``), per sorted line and reused along the
others (measured on 10^6-element arrays and 1000x1000 along either axis):

* a stable sort (the default) takes a buffer outside tracemalloc's view (counted through
  :func:`native`): radix sort for integers of at most 16 bits, one element per element of the
  line (argsort: one index per element); merge/timsort otherwise, half a line of elements
  (argsort: of indices); the unstable sorts work in place;
* a line that is not contiguous (a sort along another axis than the last, a view, the flipped
  input of a descending argsort) is copied into a buffer first, and argsort along another axis
  gathers its indices in a buffer too;
* descending ``argsort`` holds the ascending indices while it subtracts them: their size, or the
  sort's own transients if those are larger.
"""

from __future__ import annotations

from typing import Any

from .._primitive import Array, primitive
from ._rules.batching import fn, shift
from ._rules.jvp import TRANSPOSED
from ._rules.shapes import BUFFER_ELEMENTS, elementwise_out, measured_layouts, native, new, view

# -- kits shared by the rows below ---------------------------------------------------------------


def along_axis(row: Any) -> Any:
    """The batching rule of ``sort``/``argsort``: the axis shifts past the batch."""
    name = row.name

    def rule(ns, dims, x, /, *, axis=-1, **kw):
        return fn(ns, name)(x, axis=shift(axis, x.ndim - 1), **kw)

    return rule


def _line(x, axis):
    return x.shape[axis % x.ndim] if x.ndim else 1


def _last(x, axis):
    return x.ndim == 0 or axis % x.ndim == x.ndim - 1


def _radix(x):
    return x.dtype.kind in "biu" and x.dtype.itemsize <= 2


# -- argsort -------------------------------------------------------------------------------------


@primitive("real numeric", axis_check=True)
def argsort(
    bk: Any, x: Array, /, *, axis: int = -1, descending: bool = False, stable: bool = True
) -> Any:
    return bk.argsort(x, axis=axis, descending=descending, stable=stable)


argsort.nondifferentiable()
argsort.defbatch(along_axis(argsort))


def _argsort_shape(a, x, /, *, axis=-1, descending=False, stable=True):
    return new(x.shape, "int64")


@measured_layouts
def _argsort_memory(out, x, /, *, axis=-1, descending=False, stable=True):
    n, s = _line(x, axis), x.dtype.itemsize
    contiguous = _last(x, axis) and x.contiguous and not descending
    copy = 0 if contiguous else n * s
    indices = 0 if _last(x, axis) else n * 8
    buffer = native(n * 8 if _radix(x) else (n // 2 + 1) * 8) if stable else 0
    during = copy + indices + buffer
    if descending:  # then n - 1 - flip(indices): the ascending indices live beside the output
        # (NumPy's ufunc buffers a reversed operand of more than one dimension)
        buffered = min(out.size, BUFFER_ELEMENTS) * 8 if x.ndim > 1 else 0
        return max(during, out.size * 8 + buffered)
    return during


argsort.defshape(_argsort_shape, memory=_argsort_memory)


# -- sort ----------------------------------------------------------------------------------------


@primitive("real numeric", axis_check=True)
def sort(
    bk: Any, x: Array, /, *, axis: int = -1, descending: bool = False, stable: bool = True
) -> Any:
    return bk.sort(x, axis=axis, descending=descending, stable=stable)


@sort.defvjp(saves=("x",))
def sort_vjp(ns, g, out, x, /, *, axis=-1, descending=False, stable=True):
    # out = take_along_axis(x, p); its adjoint applies the inverse permutation argsort(p).
    # Ties follow the (stable) permutation the forward pass used.
    p = ns.argsort(x, axis=axis, descending=descending, stable=True)
    return (ns.take_along_axis(g, ns.argsort(p, axis=axis), axis=axis),)


sort.defjvp(TRANSPOSED)
sort.defbatch(along_axis(sort))


def _sort_shape(a, x, /, *, axis=-1, descending=False, stable=True):
    copy = elementwise_out(x.shape, x.dtype, x)  # NumPy copies in the input's memory order
    if descending:  # the flipped view of the ascending sort's copy
        return view(copy, x.shape, contiguous=False)
    return copy


@measured_layouts
def _sort_memory(out, x, /, *, axis=-1, descending=False, stable=True):
    n, s = _line(x, axis), x.dtype.itemsize
    copy = n * s if not (_last(x, axis) and x.contiguous) else 0
    if not stable:
        return copy
    return copy + native(n * s if _radix(x) else (n // 2 + 1) * s)


sort.defshape(_sort_shape, memory=_sort_memory)
