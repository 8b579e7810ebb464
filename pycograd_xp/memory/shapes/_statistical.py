"""Shape rules of the reductions: the reduced shape, and NumPy's dtype for it. A reduction
that casts (``sum(x, dtype=float64)`` of float32) buffers its input; ``std``/``var`` allocate
the deviations from the mean (one input-sized temporary, and a buffer to broadcast the mean);
``cumulative_*`` with ``include_initial`` concatenates a zero slice to the result (one
output-sized temporary, in array-api-compat)."""

from __future__ import annotations

import array_api_compat.numpy as npx

from ...namespace._ops import defshape
from ._helpers import BUFFER_ELEMENTS, elementwise_out, new, probe_dtype, reduced, size_bytes


def _reduction(name, dtype_kw=True):
    ref = getattr(npx, name)

    def rule(a, x, /, *, axis=None, keepdims=False, **kw):
        kw = {k: v for k, v in kw.items() if k in ("dtype", "correction")}
        return new(reduced(x.shape, axis, keepdims), probe_dtype(ref, x, axis=axis, **kw))

    return rule


def _cumulative(name):
    ref = getattr(npx, name)

    def rule(a, x, /, *, axis=None, dtype=None, include_initial=False):
        shape = list(x.shape) if x.ndim else [1]
        ax = 0 if axis is None else axis % len(shape)
        shape[ax] += 1 if include_initial else 0
        dt = probe_dtype(ref, x, axis=axis, dtype=dtype)
        if include_initial or x.ndim == 0:
            return new(shape, dt)
        return elementwise_out(shape, dt, x)  # NumPy's cumsum keeps the input's memory order

    return rule


def _cast_buffer(out, x, /, **kw):
    return 0 if out.dtype == x.dtype else min(x.size, BUFFER_ELEMENTS) * out.dtype.itemsize


def _deviations(out, x, /, **kw):
    return size_bytes(x) + min(x.size, BUFFER_ELEMENTS) * x.dtype.itemsize


def _initial(out, x, /, *, include_initial=False, **kw):
    return (size_bytes(out) if include_initial else 0) + _cast_buffer(out, x)


for _name in ("max", "min", "mean", "prod", "sum"):
    defshape(_name, _reduction(_name), memory=_cast_buffer)
for _name in ("std", "var"):
    defshape(_name, _reduction(_name), memory=_deviations)
for _name in ("cumulative_sum", "cumulative_prod"):
    defshape(_name, _cumulative(_name), memory=_initial)
