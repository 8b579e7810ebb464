"""``x[key] = value`` on a backend whose arrays cannot be written (Cubed): the new array made from
the namespace's own functions, which ``x`` is then rebound to.

The standard's ``__setitem__`` keys are basic (integers, slices, ``...``) or one boolean mask.
For a basic key the written region is, along each axis, a set of positions known from the key
and the shape alone, so it is built without data: per axis, a boolean vector of the positions
written, and an index vector placing the value's elements at them (``take``); the new array is
``where(mask, placed value, x)``, the masks combined by broadcasting (never a whole-array mask
made on the host). One integer-array index (NumPy's, beyond the standard) places its values
through a one-hot table of which index entry names each position (:func:`_placed`: the index
is not read as data; the last of duplicates wins, as in NumPy). A boolean mask takes a scalar
value: ``where(mask, value, x)``. Being made of recorded functions, the update is
differentiated like any other composition (the gradient flows to ``x`` outside the region and
to ``value`` inside it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["functional_setitem"]


def _parts(key: Any, ndim: int) -> list:
    parts = list(key) if isinstance(key, tuple) else [key]
    if any(p is None for p in parts):
        raise IndexError(
            "__setitem__: None (a new axis) is not a valid key for writing; index without it"
        )
    if sum(p is Ellipsis for p in parts) > 1:
        raise IndexError("__setitem__: an index can only have a single ellipsis ('...')")
    if Ellipsis in parts:
        i = parts.index(Ellipsis)
        parts[i : i + 1] = [slice(None)] * (ndim - (len(parts) - 1))
    if len(parts) > ndim:
        raise IndexError(
            f"__setitem__: too many indices for an array of {ndim} dimensions: {len(parts)} given"
        )
    return parts + [slice(None)] * (ndim - len(parts))


def functional_setitem(ns: Any, x: Any, key: Any, value: Any) -> Any:
    """The array ``x`` with ``x[key] = value`` applied, made with the functions of the
    namespace ``ns`` (module) that ``x`` belongs to."""
    if getattr(key, "dtype", None) == ns.bool or (
        isinstance(key, tuple) and len(key) == 1 and getattr(key[0], "dtype", None) == ns.bool
    ):
        return _masked(ns, x, key[0] if isinstance(key, tuple) else key, value)
    apart = _apart(ns, key)
    parts = [
        ns.asarray(p) if _is_array(ns, p) and not isinstance(p, type(x)) else p
        for p in _parts(key, x.ndim)
    ]
    arrays = [a for a, p in enumerate(parts) if isinstance(p, type(x))]
    for p in parts:
        if not (
            isinstance(p, slice)
            or (isinstance(p, int) and not isinstance(p, bool))
            or (isinstance(p, type(x)) and ns.isdtype(p.dtype, "integral") and len(arrays) == 1)
        ):
            raise IndexError(
                f"__setitem__: the key {key!r} holds {type(p).__name__}; on immutable arrays a "
                "write takes integers, slices, '...', one integer array or one boolean mask; "
                "build the new array with xp.where(mask, value, x) instead"
            )
    selected: list[np.ndarray | None] = []  # per axis: the positions written (None: all)
    value_shape: list[int] = []
    for axis, (p, n) in enumerate(zip(parts, x.shape, strict=True)):
        if isinstance(p, type(x)):  # positions known from the data: placed below
            value_shape.extend(int(s) for s in p.shape)
            selected.append(None)
            continue
        if isinstance(p, int):
            if not -n <= p < n:
                raise IndexError(
                    f"__setitem__: index {p} is out of bounds for axis {axis} with size {n}"
                )
            selected.append(np.array([p % n]))
            continue
        positions = np.arange(n)[p]
        value_shape.append(len(positions))
        selected.append(None if len(positions) == n and p.step in (None, 1) else positions)
    # The region as NumPy shapes it: the index array's axes where it stands, or first where
    # an integer beside it stands apart (x[0, :, i], x[:, 0, ..., i]); value_shape has them
    # in axis order, where the value's axes are moved below.
    at = sum(isinstance(p, slice) for p in parts[: arrays[0]]) if arrays and apart else 0
    k = parts[arrays[0]].ndim if at else 0
    region = value_shape[at : at + k] + value_shape[:at] + value_shape[at + k :]
    v = _value(ns, x, value)
    try:
        v = ns.broadcast_to(v, tuple(region))
    except ValueError as e:
        raise ValueError(
            f"__setitem__: a value of shape {tuple(v.shape)} cannot be written into a region of "
            f"shape {tuple(region)} (key {key!r})"
        ) from e
    if k:
        v = ns.moveaxis(v, tuple(range(k)), tuple(range(at, at + k)))
    if any(s is not None and len(s) == 0 for s in selected):
        return x  # nothing is written
    # the value with one axis per axis of x (length 1 where the key is an integer; the integer
    # array's axes made one), its elements moved to the positions they are written at
    for axis, p in enumerate(parts):
        if isinstance(p, int):
            v = ns.expand_dims(v, axis=axis)
        elif isinstance(p, type(x)) and p.ndim != 1:
            v = ns.reshape(v, (*v.shape[:axis], -1, *v.shape[axis + p.ndim :]))
    mask = None
    for axis, positions in enumerate(selected):
        if isinstance(parts[axis], type(x)):
            v, m = _placed(ns, v, parts[axis], axis, x.shape[axis], x.ndim)
            mask = m if mask is None else ns.logical_and(mask, m)
            continue
        if positions is None:
            continue
        n = x.shape[axis]
        written = np.zeros(n, dtype=bool)
        written[positions] = True
        if not isinstance(parts[axis], int):
            place = np.zeros(n, dtype=np.int64)
            place[positions] = np.arange(len(positions))
            v = ns.take(v, ns.asarray(place), axis=axis)
        shape = [1] * x.ndim
        shape[axis] = n
        m = ns.asarray(written.reshape(shape))
        mask = m if mask is None else ns.logical_and(mask, m)
    if mask is None:  # the whole array
        return ns.broadcast_to(v, tuple(x.shape))
    return ns.where(mask, v, x)


def _placed(ns: Any, v: Any, index: Any, axis: int, n: int, ndim: int) -> tuple[Any, Any]:
    """(``v`` with its ``axis`` made ``n`` long, element i the value written at position i;
    the positions written, shaped to broadcast along ``axis``) for an integer-array index,
    without reading the index as data (a lazy backend plans it like any other op): the (n, m)
    table of which entry of the index names each position, kept only for the last entry naming
    it (duplicates: the last write wins, as NumPy's), is a one-hot matrix the values are
    multiplied by."""
    flat = ns.reshape(index, (-1,))
    flat = ns.where(flat < 0, flat + n, flat)
    m = flat.shape[0]
    names = ns.reshape(ns.arange(n, dtype=flat.dtype), (n, 1)) == ns.reshape(flat, (1, m))
    counts = ns.cumulative_sum(ns.astype(names, ns.int64), axis=1)
    last = ns.logical_and(names, counts == counts[:, -1:])  # no later entry names the position
    kind = v.dtype
    if kind == ns.bool:
        v = ns.astype(v, ns.int8)
    placed = ns.tensordot(ns.astype(last, v.dtype), v, axes=([1], [axis]))  # (n, ...rest)
    placed = ns.moveaxis(placed, 0, axis)
    if kind == ns.bool:
        placed = ns.astype(placed, ns.bool)
    shape = [1] * ndim
    shape[axis] = n
    return placed, ns.reshape(ns.any(names, axis=1), tuple(shape))


def _masked(ns: Any, x: Any, mask: Any, value: Any) -> Any:
    if tuple(mask.shape) != tuple(x.shape[: mask.ndim]):
        raise IndexError(
            f"__setitem__: a boolean mask of shape {tuple(mask.shape)} does not match the "
            f"array's leading dimensions {tuple(x.shape[: mask.ndim])}"
        )
    if _is_array(ns, value) and value.ndim > 0:
        raise ValueError(
            "__setitem__ with a boolean mask: on immutable arrays the value must be a scalar "
            "(how many elements the mask selects is known only from the data); use "
            "xp.where(mask, values, x) with values of x's shape"
        )
    v = _value(ns, x, value)
    m = ns.reshape(mask, tuple(mask.shape) + (1,) * (x.ndim - mask.ndim))
    return ns.where(m, v, x)


def _apart(ns: Any, key: Any) -> bool:
    """Whether the key's advanced entries (its integer array, and integers beside it) stand
    apart: a slice or an ellipsis (even of no axes) between two of them. NumPy then puts the
    array's axes first in the region, not where the array stands."""
    parts = list(key) if isinstance(key, tuple) else [key]
    if not any(_is_array(ns, p) for p in parts):
        return False
    adv = [
        i
        for i, p in enumerate(parts)
        if _is_array(ns, p) or (isinstance(p, int) and not isinstance(p, bool))
    ]
    return any(not (_is_array(ns, p) or isinstance(p, int)) for p in parts[adv[0] : adv[-1]])


def _is_array(ns: Any, value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype")


def _value(ns: Any, x: Any, value: Any) -> Any:
    """``value`` as an array of ``x``'s namespace and dtype (a Python scalar or another
    library's array converted; one of ours cast when its dtype differs)."""
    if not isinstance(value, type(x)):
        return ns.asarray(value, dtype=x.dtype)
    return value if value.dtype == x.dtype else ns.astype(value, x.dtype)
