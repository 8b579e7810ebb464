"""The kits the statistical rows share: shape rules of reductions and cumulative reductions,
the buffers they allocate, scans along an axis."""

from __future__ import annotations

import builtins
from typing import Any

import array_api_compat.numpy as npx

from .._rules.shapes import (
    BUFFER_ELEMENTS,
    broadcast_view,
    elementwise_out,
    in_operands_order,
    measured_layouts,
    new,
    probe_dtype,
    reduced,
    size_bytes,
)


def reduced_shape(row: Any) -> Any:
    """The shape rule of a reduction: the reduced shape, in NumPy's dtype for it."""
    ref = getattr(npx, row.name)

    def rule(a, x, /, *, axis=None, keepdims=False, **kw):
        kw = {k: v for k, v in kw.items() if k in ("dtype", "correction")}
        shape = reduced(x.shape, axis, keepdims)
        # NumPy's reduction allocates its result in x's memory order (order K): the sum over
        # the first axis of an array in Fortran order is in Fortran order
        return in_operands_order(shape, probe_dtype(ref, x, axis=axis, **kw), x)

    return rule


def cumulative_shape(row: Any) -> Any:
    """The shape rule of a cumulative reduction (``include_initial`` adds one along ``axis``)."""
    ref = getattr(npx, row.name)

    def rule(a, x, /, *, axis=None, dtype=None, include_initial=False):
        shape = list(x.shape) if x.ndim else [1]
        ax = 0 if axis is None else axis % len(shape)
        shape[ax] += 1 if include_initial else 0
        dt = probe_dtype(ref, x, axis=axis, dtype=dtype)
        if x.ndim == 0:
            return new(shape, dt)
        if include_initial:  # written into a new array of x's layout
            return in_operands_order(shape, dt, x)
        return elementwise_out(shape, dt, x)  # NumPy's cumsum keeps the input's memory order

    return rule


@measured_layouts
def cast_buffer(out, x, /, **kw):
    """A reduction buffers its input a block at a time when it casts it (into another dtype)
    and when it cannot read it in memory order (a reversed, row-strided or broadcast view
    reduced over every axis; measured in docs/calibration.md#reductions). The abstract arrays
    know C order or not: every input not in C order counts a buffer, never less than NumPy
    takes."""
    k = (out.dtype != x.dtype) + (not x.contiguous or broadcast_view(x))
    if not x.size:  # NumPy calls any array of no elements contiguous, a strided view too
        k = builtins.max(k, 1)
    item = builtins.max(out.dtype.itemsize, x.dtype.itemsize)
    return k * _buffer_elements(x) * item


def mean_buffers(out, x, /, **kw):
    """``mean``: :func:`cast_buffer`, and for float32 and complex64 two buffers of the input in
    twice its precision (NumPy's ``_mean`` sums single precision through float64 and complex128
    buffers: 132 kB beyond the result on a (30, 28, 13, 37) float32 array, along any axis,
    where its sum takes 1 kB; measured 0.998 of this bound at most over 400 random shapes,
    axes and layouts, docs/calibration.md#reductions)."""
    return cast_buffer(out, x) + _wide_sums(x)


def _wide_sums(x):
    """The two buffers of twice ``x``'s precision NumPy's ``_mean`` sums float32 and complex64
    through (nothing for other dtypes)."""
    single = x.dtype.kind in "fc" and x.dtype.itemsize == (4 if x.dtype.kind == "f" else 8)
    return 2 * _buffer_elements(x) * 2 * x.dtype.itemsize if single else 0


def _buffer_elements(x):
    """The elements of one buffer of NumPy's iterator reducing ``x``: ``x``'s size up to
    ``BUFFER_ELEMENTS``, and all of them for an ``x`` of no elements (NumPy still allocates
    them: measured 64 kB for a float64 sum of an empty strided view, 133 kB for a float32 mean
    over an empty axis)."""
    return builtins.min(x.size, BUFFER_ELEMENTS) if x.size else BUFFER_ELEMENTS


@measured_layouts
def deviations(out, x, /, **kw):
    """``std``/``var``: the deviations from the mean, a buffer to broadcast the mean, and one
    more to read an input not in C order (measured: docs/calibration.md#reductions); the mean
    (kept dims) and its quotient by the count, two arrays of the result's size (NumPy's
    ``_var``: over a short axis they are most of it; found by the sliding-window check); and
    for float32, the two wide buffers of :func:`_wide_sums` (its sums go the way ``mean``'s
    do: measured up to 13 % over without them; at most 0.996 of this bound over 1,000 random
    shapes, axes and layouts)."""
    k = 1 + (not x.contiguous or broadcast_view(x))
    mean = 2 * out.size * x.dtype.itemsize
    buffers = k * builtins.min(x.size, BUFFER_ELEMENTS) * x.dtype.itemsize
    return size_bytes(x) + mean + buffers + _wide_sums(x)  # (its mean's sum: _mean's)


@measured_layouts
def initial_slice(out, x, /, *, include_initial=False, **kw):
    """``include_initial`` concatenates a zero slice to the result: one output-sized copy; and
    what the accumulation itself takes (:func:`accumulation_buffers`)."""
    return (size_bytes(out) if include_initial else 0) + accumulation_buffers(out, x)


def accumulation_buffers(out, x):
    """NumPy's ``ufunc.accumulate`` (``cumsum``, ``cumprod``) that casts its input (into the
    result's dtype: int8 to the default integer, float32 to a float64 ``dtype=``) casts all of
    it first, not a block at a time as a reduction does: a full copy of the input, counted in
    the larger of the two dtypes (measured: int8 -> int64, float32 <-> float64, on any axis and
    layout; the memory check by hypothesis found it at 1.46x, issue 33). Without a cast, an
    input not in C order is buffered a block at a time (:func:`cast_buffer`)."""
    if out.dtype != x.dtype:
        return x.size * builtins.max(out.dtype.itemsize, x.dtype.itemsize)
    return cast_buffer(out, x)


def _along(ns, x, axis, start=None, stop=None):
    idx = [slice(None)] * x.ndim
    idx[axis] = slice(start, stop)
    return x[tuple(idx)]


def _reverse_cumsum(ns, g, axis):
    return ns.flip(ns.cumulative_sum(ns.flip(g, axis=axis), axis=axis), axis=axis)
