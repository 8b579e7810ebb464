"""Index keys: what ``x[key]`` selects (its shape, whether a view, where the index axes go),
and the memory NumPy's advanced indexing takes beyond its result
(docs/calibration.md#advanced-indexing). The shape and memory rules of ``__getitem__`` and
``__setitem__`` (:mod:`pycograd_xp.ops.indexing`) read these."""

from __future__ import annotations

import math

import numpy as np

from .shapes import (
    BUFFER_ELEMENTS,
    as_abstract,
    broadcast,
    broadcast_view,
    data_dependent,
    is_array,
)


def expand_key(key, ndim):
    parts = [as_abstract(p) for p in (key if isinstance(key, tuple) else (key,))]
    used = sum(
        p.ndim if is_array(p) and p.dtype.kind == "b" else 1
        for p in parts
        if p is not None and p is not Ellipsis
    )
    ellipsis = [i for i, p in enumerate(parts) if p is Ellipsis]  # (arrays compare elementwise)
    if ellipsis:
        i = ellipsis[0]
        parts[i : i + 1] = [slice(None)] * (ndim - used)
    else:
        parts += [slice(None)] * (ndim - used)
    return parts


def _ellipsis_between(key):
    """Whether an ellipsis stands between two advanced entries of ``key`` (index arrays, and
    ints beside them): NumPy then puts their axes first even where the ellipsis stands for no
    axis (``x[:, 0, ..., i]`` of a 3-d ``x``), which :func:`expand_key` no longer shows."""
    parts = key if isinstance(key, tuple) else (key,)
    kinds = [as_abstract(p) for p in parts]
    if not any(is_array(p) for p in kinds):
        return False
    adv = [i for i, p in enumerate(kinds) if is_array(p) or (p is not None and type(p) is int)]
    dots = [i for i, p in enumerate(parts) if p is Ellipsis]  # (arrays compare elementwise)
    return bool(adv) and any(adv[0] < i < adv[-1] for i in dots)


def selection(shape, key, exact=True):
    """(result shape, whether it is a view) of ``x[key]`` for ``x`` of ``shape``. ``exact``:
    the caller needs the exact shape (not for a write of one value through a mask)."""
    out, _, _ = placed_selection(shape, key, exact)
    return out


def placed_selection(shape, key, exact=True):
    """:func:`selection`'s answer, and where the broadcast index axes go in the result: their
    count and the position of the first (None for a view)."""
    parts = expand_key(key, len(shape))
    apart = _ellipsis_between(key)
    out, adv_shapes, adv_pos, int_pos, axis = [], [], [], [], 0
    for p in parts:
        if p is None:
            out.append(1)
        elif isinstance(p, slice):
            out.append(len(range(*p.indices(shape[axis]))))
            axis += 1
        elif is_array(p) and p.dtype.kind == "b":
            if p.value is not None:  # a known mask: exactly its True elements
                n = int(np.count_nonzero(p.value))
            else:  # at most every element is selected
                if exact:
                    data_dependent("indexing with a boolean mask computed from data (x[mask])")
                n = 1
                for s in shape[axis : axis + p.ndim]:
                    n *= s
            adv_shapes.append((n,))
            adv_pos.append(len(out))
            axis += p.ndim
        elif is_array(p):
            adv_shapes.append(p.shape)
            adv_pos.append(len(out))
            axis += 1
        else:  # an int
            if not -shape[axis] <= p < shape[axis]:
                raise IndexError(
                    f"index {p} is out of bounds for axis {axis} with size {shape[axis]}"
                )
            int_pos.append(len(out))
            axis += 1
    if not adv_shapes:
        return (tuple(out), True), 0, None
    b = broadcast(*adv_shapes)
    # advanced indices side by side stay in place; separated ones go first (NumPy's rule, where
    # an int beside index arrays is one more, of no axes: x[:, 0, :, i] puts i's axes first)
    placed = set(adv_pos + int_pos)
    first = adv_pos[0] if len(placed) == 1 and not apart else 0
    return (tuple(out[:first]) + b + tuple(out[first:]), False), len(b), first


def one_block(shape, key):
    """Whether the basic index ``key`` selects one contiguous block of an array of ``shape`` in
    C order: single elements (integers, slices of one), then at most one slice of step 1, then
    whole axes (new axes anywhere): a batch block ``g[a:b]``, a row ``x[i]``."""
    axis, wide = 0, False  # wide: an axis of more than one element taken; the rest must be whole
    for p in expand_key(key, len(shape)):
        if p is None:
            continue
        n = shape[axis]
        axis += 1
        if isinstance(p, slice):
            start, stop, step = p.indices(n)
            length = len(range(start, stop, step))
            whole = length == n and (step == 1 or n <= 1)
        else:  # an integer
            length, whole = 1, n == 1
        if wide and not whole:
            return False
        if length > 1 and not wide:
            if step != 1:
                return False
            wide = True
    return True


def fancy_buffers(x, key, itemsize=8, operands=1):
    """The transients of NumPy's advanced indexing ``x[key]`` beyond its result
    (``mapping.c``'s index preparation and its iterator over the index arrays), measured
    (docs/calibration.md#advanced-indexing):

    * nothing beyond the result where the key's index arrays are all intp, in C order and of
      one shape (``x[i]``, ``x[i, j]``), or the key is one mask over every axis of ``x``
      (NumPy's boolean fast path);
    * else one iterator buffer of ``BUFFER_ELEMENTS`` entries (or the index's size, when
      smaller) per index array, plus ``operands`` more (the result; ``__setitem__``'s values
      too), each of ``itemsize`` bytes (8, intp; a write's buffers hold the values too). Index
      arrays that broadcast against each other (``x[i[:, None], j]``, ``np.ix_``-style keys),
      ints among them (0-d index arrays), other integer dtypes (cast as they are read) or other
      layouts go this way; measured 0.78 of this bound at most over 1,231 random keys of 1 to
      5 arrays;
    * and a mask beside other entries, or over fewer axes than ``x`` has, becomes one intp
      array per mask axis first (``nonzero``): its selected count each, at most the mask's
      size (and the iterator's buffers as above where other entries broadcast against them)."""
    parts = expand_key(key, x.ndim)
    arrays = [p for p in parts if is_array(p)]  # (expand_key made them abstract)
    if not arrays:
        return 0
    masks = [p for p in arrays if p.dtype.kind == "b"]
    ints = [p for p in parts if type(p) is int]
    others = [p for p in parts if not (p is None or (type(p) is slice and p == slice(None)))]
    if len(masks) == 1 and masks[0].ndim == x.ndim and len(others) == 1:
        return 0  # the boolean fast path: no index arrays made
    total, k = 0, len(ints)
    shapes: list[tuple[int, ...]] = [() for _ in ints]
    for p in arrays:
        if p.dtype.kind == "b":
            n = int(np.count_nonzero(p.value)) if p.value is not None else p.size
            total += p.ndim * n * 8  # nonzero's arrays
            k += p.ndim
            shapes.append((n,))
        else:
            k += 1
            shapes.append(tuple(p.shape))
    same = len(set(shapes)) == 1
    plain = all(
        p.dtype.kind == "b" or (p.dtype == np.intp and p.contiguous and not broadcast_view(p))
        for p in arrays
    )
    if not ints and same and plain:  # (nonzero's arrays are intp, in C order, of one shape)
        return total
    n = math.prod(broadcast(*shapes))
    return total + (k + operands) * min(n, BUFFER_ELEMENTS) * max(8, itemsize)
