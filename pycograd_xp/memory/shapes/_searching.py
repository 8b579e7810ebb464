"""Shape rules of the searching functions. ``nonzero`` has a data-dependent size: exact for a known
constant (``AbstractArray.value``), else its upper bound (every element nonzero)."""

from __future__ import annotations

import array_api_compat.numpy as npx
import numpy as np

from ..._primitive import defshape
from ...namespace._backend import SELECT_MIN
from ...ops._rules.shapes import (
    BUFFER_ELEMENTS,
    broadcast,
    data_dependent,
    elementwise_out,
    is_array,
    new,
    probe_dtype,
    reduced,
    ufunc_buffers,
)


def _arg(a, x, /, *, axis=None, keepdims=False):
    return new(reduced(x.shape, axis, keepdims), "int64")


def _nonzero(a, x, /):
    if x.value is not None:  # a known constant: exactly its nonzero elements
        n = int(np.count_nonzero(x.value))
    else:
        data_dependent("nonzero")
        n = x.size if x.ndim else 1
    return tuple(new((n,), "int64") for _ in range(max(x.ndim, 1)))


def _searchsorted(a, x1, x2, /, *, side="left", sorter=None):
    return new(x2.shape, "int64")


def _where(a, condition, x1, x2, /):
    shape = broadcast(*(v.shape for v in (condition, x1, x2) if is_array(v)))
    return elementwise_out(shape, probe_dtype(npx.where, condition, x1, x2), condition, x1, x2)


defshape("argmax", _arg)
defshape("argmin", _arg)
defshape("count_nonzero", _arg)
defshape("nonzero", _nonzero)
defshape("searchsorted", _searchsorted)
def _where_memory(out, c, x1, x2, /):
    """NumPy's where, or its bitwise blend (``Backend.select``, from ``SELECT_MIN`` elements):
    an int8 copy of the condition unless a branch is a Python number, and the buffers of its
    casting passes."""
    if out.size < SELECT_MIN:
        return ufunc_buffers(out, c, x1, x2)
    mask = 0 if not is_array(x1) or not is_array(x2) else out.size
    return mask + 2 * min(out.size, BUFFER_ELEMENTS) * out.dtype.itemsize + \
        ufunc_buffers(out, c, x1, x2)


defshape("where", _where, memory=_where_memory)
