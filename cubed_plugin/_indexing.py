"""Indexing on Cubed: ``x[key]`` (the Backend's ``getitem``), ``take`` and the scatter-add of
gathers' gradients (``index_add``), completed where Cubed 0.27 lacks or gets wrong a kind of
key.

- Several integer-array indices, an integer beside one, or an index array of two or more
  axes: one flat index (:func:`_advanced`; Cubed takes one 1-d integer array).
- A negative slice step (Cubed raises) reads the array flipped; a strided slice that also
  shortens an axis of one chunk goes in two passes (:func:`_sliced`).
- An index array as long as its axis (Cubed returns the array unchanged): two halves, joined.
- A key that selects no element, or any key of an array of none (Cubed's chunking errors):
  NumPy's empty result, its shape read off stand-ins of no memory.
- Index arrays (and ``repeat``'s counts, :mod:`cubed_plugin._standard`) made from NumPy arrays
  are read where Cubed holds them (:func:`_held`): Cubed computes a Cubed index array to plan
  a gather by it, a plan run of its own, which ``memory.project`` (planning only) refuses.
- A boolean mask (a shape that depends on the data) is refused with the way out.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from ._blocks import _nbytes, implements
from ._operands import _one_spec
from ._reshape import reshape


def _apart(parts: list) -> bool:
    """Whether an ellipsis stands between two advanced entries of the key ``parts`` (index
    arrays, and integers beside them): NumPy then puts their axes first, even where the
    ellipsis stands for no axis (``x[:, 0, ..., i]`` of a 3-d ``x``)."""
    adv = [j for j, k in enumerate(parts) if _is_index_array(k) or _is_int(k)]
    dots = [j for j, k in enumerate(parts) if k is Ellipsis]
    return bool(adv) and any(adv[0] < j < adv[-1] for j in dots)


def _advanced(x: Any, parts: list, apart: bool = False) -> Any:
    """``x[parts]`` where several integer arrays (or an integer array and integers) index
    ``x``, as NumPy indexes: the index arrays (the integers as 0-d ones) broadcast together
    and pick one element each across the axes they index; Cubed 0.27 takes one integer array
    at most. The axes sliced are sliced first; the indexed axes are moved to the front and
    flattened, and the elements taken with one flat integer index (a row-major offset); the
    broadcast shape takes the place of the indexed axes when they are adjacent in the key, else
    the front, as in NumPy (``apart``: an ellipsis of no axes stood between them)."""
    import cubed

    if any(k is None for k in parts):
        raise NotImplementedError(
            "__getitem__: a new axis (None) beside several integer-array indices is not "
            "supported on Cubed; index first, then add the axis with xp.expand_dims"
        )
    parts = parts + [slice(None)] * (x.ndim - len(parts))
    # the slices first (each keeps its axis): the rest is integers and arrays over whole axes
    if any(isinstance(k, slice) and k != slice(None) for k in parts):
        x = index(x, tuple(k if isinstance(k, slice) else slice(None) for k in parts))
    adv = [j for j, k in enumerate(parts) if not isinstance(k, slice)]
    rest = [j for j in range(x.ndim) if j not in adv]
    sizes = [int(x.shape[j]) for j in adv]
    # the flat index in NumPy where every index is held in memory (nothing for Cubed to compute)
    m = np if not any(isinstance(parts[j], cubed.Array) for j in adv) else cubed
    indices = []
    for j, n in zip(adv, sizes, strict=True):
        k = parts[j]
        if isinstance(k, int):
            if not -n <= k < n:
                raise IndexError(f"index {k} is out of bounds for axis {j} with size {n}")
            k = (
                np.asarray(k % n, dtype=np.int64)
                if m is np
                else cubed.asarray(k % n, dtype=cubed.int64, spec=x.spec)
            )
        else:
            if m is cubed and not isinstance(k, cubed.Array):
                k = cubed.asarray(k, spec=x.spec)
            k = m.astype(k, m.int64)
            if m is np:  # held values: NumPy's error (a flat index would pick another element)
                bad = k[(k < -n) | (k >= n)]
                if bad.size:
                    raise IndexError(
                        f"index {int(bad[0])} is out of bounds for axis {j} with size {n}"
                    )
            k = m.where(k < 0, k + n, k)
            if m is not np:  # computed values: one out of range points past every element,
                # so that the gather refuses it when it runs, never picking another element
                k = m.where((k < 0) | (k >= n), math.prod(sizes), k)
        indices.append(k)
    shape = m.broadcast_shapes(*(k.shape for k in indices)) if indices else ()
    flat, stride = None, 1
    for k, n in zip(reversed(indices), reversed(sizes), strict=True):
        term = k * stride if stride != 1 else k
        flat = term if flat is None else flat + term
        stride *= n
    assert flat is not None
    moved = cubed.permute_dims(x, tuple(adv + rest)) if adv != list(range(len(adv))) else x
    stacked = reshape(moved, (stride, *(int(x.shape[j]) for j in rest)))
    flat = (
        np.broadcast_to(flat, shape).reshape(-1)
        if m is np
        else reshape(cubed.broadcast_to(flat, shape), (-1,))
    )
    out = take(stacked, flat, axis=0) if flat.shape[0] else stacked[:0]
    out = reshape(out, (*shape, *(int(x.shape[j]) for j in rest)))
    first = adv[0]
    adjacent = not apart and adv == list(range(adv[0], adv[0] + len(adv)))
    if adjacent and first > 0 and len(shape):  # the broadcast axes where the indexed axes were
        b = len(shape)
        order = list(range(b, b + first)) + list(range(b)) + list(range(b + first, out.ndim))
        out = cubed.permute_dims(out, tuple(order))
    return out


def _joined(parts: list, axis: int) -> Any:
    import cubed

    from ._operands import _one_chunking

    return cubed.concat(_one_chunking(parts, axis), axis=axis)


def _is_int(k: Any) -> bool:
    """An integer index (Python's or NumPy's; not a bool)."""
    return isinstance(k, numbers.Integral) and not isinstance(k, bool | np.bool_)


def _is_scalar_index(k: Any) -> bool:
    """A 0-d integer array used as an index (an integer index NumPy reads from the array;
    taken lazily here, as a 0-d index array)."""
    return hasattr(k, "shape") and hasattr(k, "dtype") and k.ndim == 0 and k.dtype.kind in "iu"


def _is_index_array(k: Any) -> bool:
    return hasattr(k, "shape") and hasattr(k, "dtype") and k.ndim >= 1


def _held(k: Any) -> Any:
    """An integer index array's values, as NumPy's, where Cubed holds them in memory (a
    constant made from a NumPy array); ``k`` itself otherwise. Cubed 0.27 computes a Cubed
    index array to plan the gather, which runs a plan of its own, and which
    ``memory.project`` (planning only) refuses; the values it would compute are at hand."""
    import cubed

    from ._cubed_seam import held_values

    if isinstance(k, cubed.Array) and k.dtype != cubed.bool:
        v = held_values(k)
        if v is not None:
            return np.asarray(v)
    return k


@implements("take")
def take(x: Any, indices: Any, /, *, axis: int | None = None) -> Any:
    """Cubed's ``take``, except where the indices are as long as the axis: Cubed 0.27 takes an
    index that keeps the shape for no index at all (it returns ``x`` unchanged, whatever the
    indices), so those are taken in two halves, joined; and along a negative axis, which Cubed
    0.27 reads as axis 0 (wrong values, or an ``IndexError``), made non-negative first."""
    import cubed

    from ._blocks import norm_axis

    if axis is None and x.ndim == 1:
        axis = 0
    indices = _held(indices)
    if axis is not None:
        # Cubed 0.27 indexes (slice(None),) * axis: a negative axis took along axis 0
        axis = norm_axis(axis, x.ndim, "take")
    if axis is not None and (math.prod(x.shape) == 0 or math.prod(indices.shape) == 0):
        # Cubed 0.27 fails on no element ("Chunks do not add up to shape"; a take from an
        # empty axis raises, as NumPy's)
        idx = indices if isinstance(indices, np.ndarray) else np.zeros(indices.shape, np.intp)
        return _nothing(x, lambda stand: np.take(stand, idx, axis=axis))
    if axis is not None and indices.ndim == 1:
        n = indices.shape[0]
        if n > 1 and n == x.shape[axis]:
            h = n // 2
            halves = [
                cubed.take(x, indices[:h], axis=axis),
                cubed.take(x, indices[h:], axis=axis),
            ]
            return _joined(halves, axis)
    return cubed.take(x, indices, axis=axis)


def index(x: Any, key: Any) -> Any:
    """``x[key]`` for a Cubed array, with what Cubed 0.27's indexing lacks or gets wrong: a
    negative slice step (Cubed raises) reads ``x`` flipped along that axis with the positive
    step; an integer-array index as long as its axis (Cubed returns ``x`` unchanged) is read in
    two halves, joined; several integer-array indices (Cubed takes one) are one flat index
    (:func:`_advanced`); a boolean mask (a shape that depends on the data) is refused with the
    way out. The Backend's ``getitem`` capability on Cubed."""
    import cubed

    parts = [_held(k) for k in (key if isinstance(key, tuple) else (key,))]
    parts = [int(k) if isinstance(k, np.ndarray) and k.ndim == 0 else k for k in parts]
    arrays_in = [j for j, k in enumerate(parts) if isinstance(k, cubed.Array)]
    if arrays_in:  # index arrays made without a Spec take x's (as every other call's operands)
        x, *found = _one_spec([x, *(parts[j] for j in arrays_in)])
        for j, k in zip(arrays_in, found, strict=True):
            parts[j] = k
    used = sum(1 for k in parts if k is not None and k is not Ellipsis)
    given = list(parts)  # (an ellipsis of no axes still parts advanced entries: see _apart)
    if Ellipsis in [k for k in parts if not _is_index_array(k)]:
        i = next(j for j, k in enumerate(parts) if k is Ellipsis and not _is_index_array(k))
        parts[i : i + 1] = [slice(None)] * (x.ndim - used)
    if any(_is_index_array(k) and k.dtype == cubed.bool for k in parts):
        raise NotImplementedError(
            "__getitem__ with a boolean mask: the result's shape depends on the data, which a "
            "lazy Cubed plan cannot have; use xp.where(mask, x, fill) to keep the shape, or "
            "compute the array first (cubed_plugin.compute, or np.asarray) and index it eagerly"
        )
    arrays_at = [j for j, k in enumerate(parts) if _is_index_array(k)]
    ints_at = [j for j, k in enumerate(parts) if _is_int(k)]
    scalars_at = [j for j, k in enumerate(parts) if _is_scalar_index(k)]  # 0-d integer arrays
    if _selects_nothing(x, parts):
        # Cubed 0.27 fails where x or the result holds no element ("Chunks and shape must be of
        # the same length": x[0, 3:] of 3 x 3, x[3:-4:3, idx] of 2 rows; "Chunks do not add up
        # to shape"); Cubed's index arrays stand in as zeros of their shapes (an index into an
        # empty axis raises, as NumPy's does)
        key = tuple(
            np.zeros(tuple(k.shape), dtype=np.intp) if isinstance(k, cubed.Array) else k
            for k in given
        )
        return _nothing(x, lambda stand: stand[key])
    # Cubed 0.27 takes one 1-d integer array, beside slices only ("Chunks and shape must be of
    # the same length" for an index array of two axes)
    if (
        len(arrays_at) > 1
        or (arrays_at and ints_at)
        or scalars_at
        or any(parts[j].ndim > 1 for j in arrays_at)
    ):
        return _advanced(x, [int(k) if _is_int(k) else k for k in parts], _apart(given))
    ax, out_ax, arrays = 0, 0, []
    for j, k in enumerate(parts):
        if k is None:
            out_ax += 1
            continue
        if isinstance(k, slice) and k.step is not None and k.step < 0 and ax < x.ndim:
            n = x.shape[ax]
            start, _, step = k.indices(n)
            m = len(range(*k.indices(n)))
            x = cubed.flip(x, axis=ax)
            first = n - 1 - start
            parts[j] = slice(first, first + (m - 1) * -step + 1, -step) if m else slice(0, 0)
        if _is_index_array(k):
            arrays.append((j, out_ax, ax))
        if isinstance(k, slice) or _is_index_array(k):
            out_ax += 1
        ax += 1
    if arrays and any(isinstance(k, slice) and k != slice(None) for k in parts):
        # Cubed 0.27 fails an integer array beside a sliced axis ("Chunks ... must be a
        # multiple of array's chunks"): the slices (and new axes) first, then the array
        x = _sliced(x, [slice(None) if _is_index_array(k) else k for k in parts])
        parts = [k if _is_index_array(k) else slice(None) for k in parts]
    if len(arrays) == 1:
        j, pos, ax = arrays[0]
        k = parts[j]
        if k.ndim == 1 and k.shape[0] > 1 and k.shape[0] == x.shape[ax]:
            h = k.shape[0] // 2
            lo, hi = list(parts), list(parts)
            lo[j], hi[j] = k[:h], k[h:]
            return _joined([x[tuple(lo)], x[tuple(hi)]], pos)
    if arrays:
        return x[tuple(parts)]
    return _sliced(x, parts)


def _nothing(x: Any, select: Any) -> Any:
    """Cubed's zeros of the shape ``select(stand)`` has, ``stand`` a stand-in of ``x`` of no
    memory (a broadcast view), for a selection of no element: each element of a selection is
    one of ``x``'s, so NumPy's answer allocates nothing."""
    import cubed

    stand = np.broadcast_to(np.empty((), dtype=bool), tuple(int(d) for d in x.shape))
    return cubed.zeros(select(stand).shape, dtype=x.dtype, spec=x.spec)


def _selects_nothing(x: Any, parts: list) -> bool:
    """Whether the key ``parts`` (no Ellipsis left) selects no element of ``x``: ``x`` has
    none, an index array has none, or a slice takes none of its axis."""
    if math.prod(x.shape) == 0:
        return True
    ax = 0
    for k in parts:
        if k is None:
            continue
        if hasattr(k, "shape") and math.prod(k.shape) == 0:
            return True
        if isinstance(k, slice) and ax < x.ndim and not len(range(*k.indices(x.shape[ax]))):
            return True
        ax += 1
    return False


def _sliced(x: Any, parts: list) -> Any:
    """``x[tuple(parts)]`` (slices of positive step, ints, None), a slice of step over 1 in two
    passes: its span first (the step dropped), then the step. Cubed 0.27 refuses a strided
    slice that also shortens an axis whose chunk is longer than the result ("Chunks (10,) must
    be a multiple of array's chunks (4,)": y[0:8:2] of one chunk of 10): it clamps the
    result's chunks to its length and merges by the unclamped ones. After the span, a chunk is
    at most the span: no clamp."""
    strided = [k for k in parts if isinstance(k, slice) and k.step not in (None, 1)]
    if not strided:
        return x[tuple(parts)]
    spans: list[Any] = []
    steps: list[slice] = []
    ax = 0
    for k in parts:
        if k is None:
            spans.append(None)
            steps.append(slice(None))
            continue
        if isinstance(k, slice):
            start, _, step = k.indices(x.shape[ax])
            m = len(range(*k.indices(x.shape[ax])))
            if step > 1 and m:
                spans.append(slice(start, start + (m - 1) * step + 1))
                steps.append(slice(None, None, step))
            else:
                spans.append(k)
                steps.append(slice(None))
        else:  # an int: the axis goes
            spans.append(k)
        ax += 1
    return x[tuple(spans)][tuple(steps)]


def index_add(size: int, flat_index: Any, values: Any) -> Any:
    """A length-``size`` vector with ``values`` summed at ``flat_index`` (duplicates add up):
    one task holding the indices, the values and the result whole (NumPy's ``add.at``), lazily;
    refused naming the memory it needs when that does not fit ``allowed_mem``. The Backend's
    ``index_add`` capability on Cubed (the gradients of gathers)."""
    import functools

    import numpy as np

    from ._blocks import Out, core_apply

    flat_index, values = _one_spec([flat_index, values])
    return core_apply(
        "index_add (the gradient of a gather)",
        functools.partial(_add_at, size),
        [flat_index, values],
        [(0,), (0,)],
        [Out((size,), (0,), values.dtype)],
        what="the indices, the values and the result",
        temps=lambda ins, outs: _nbytes(ins[0][0], np.intp),
    )


def _add_at(size: int, idx: Any, values: Any) -> Any:
    import numpy as np

    out = np.zeros(size, dtype=values.dtype)
    np.add.at(out, idx, values)
    return out
