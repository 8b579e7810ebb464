"""Shape rules of ``sort`` and ``argsort``, as NumPy (through array_api_compat) runs them.

``sort`` copies its input and sorts the copy in place; ``descending=True`` returns a reversed view
of that copy (array_api_compat flips the ascending result), so the output is a view whose base is
the sorted copy. ``argsort`` makes a new int64 array; descending, it sorts the flipped input and
subtracts the flipped indices from ``n - 1``, a new array.

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

from ..._primitive import defshape
from ...ops._rules.shapes import BUFFER_ELEMENTS, elementwise_out, native, new, view


def _line(x, axis):
    return x.shape[axis % x.ndim] if x.ndim else 1


def _last(x, axis):
    return x.ndim == 0 or axis % x.ndim == x.ndim - 1


def _radix(x):
    return x.dtype.kind in "biu" and x.dtype.itemsize <= 2


def _sort(a, x, /, *, axis=-1, descending=False, stable=True):
    copy = elementwise_out(x.shape, x.dtype, x)  # NumPy copies in the input's memory order
    if descending:  # the flipped view of the ascending sort's copy
        return view(copy, x.shape, contiguous=False)
    return copy


def _sort_memory(out, x, /, *, axis=-1, descending=False, stable=True):
    n, s = _line(x, axis), x.dtype.itemsize
    copy = n * s if not (_last(x, axis) and x.contiguous) else 0
    if not stable:
        return copy
    return copy + native(n * s if _radix(x) else (n // 2 + 1) * s)


def _argsort(a, x, /, *, axis=-1, descending=False, stable=True):
    return new(x.shape, "int64")


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


defshape("sort", _sort, memory=_sort_memory)
defshape("argsort", _argsort, memory=_argsort_memory)
