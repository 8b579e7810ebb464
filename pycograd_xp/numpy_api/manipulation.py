"""NumPy's array manipulation on our arrays: reshaping, transposing, joining, splitting,
flipping, tiling, taking, diagonals and triangles; and creation from an array's shape and dtype
(``zeros_like``, ``full_like``, ``meshgrid``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..namespace._array import Array
from ._convert import Composition, _array, _axis_none_flat, _finish, _shape, _unsupported
from ._dispatch import FUNCTIONS, _function, _implements, _norm_axis

# shapes


def _c_order(what: str, order: Any) -> None:
    if order not in ("C", "K", "A", None):
        raise _unsupported(what, f"order={order!r} (only C order)")


@_implements("reshape")
def _reshape(
    ns: Any,
    a: Any,
    /,
    shape: Any = None,
    order: str = "C",
    *,
    newshape: Any = None,
    copy: Any = None,
) -> Any:
    _c_order("reshape", order)
    if shape is None:
        shape = newshape
    if isinstance(shape, int):
        shape = (shape,)
    return ns.reshape(_array(ns, a), tuple(shape), copy=copy)


@_implements("ravel")
def _ravel(ns: Any, a: Any, order: str = "C") -> Any:
    _c_order("ravel", order)
    return ns.reshape(_array(ns, a), (-1,))


@_implements("transpose", "permute_dims")
def _transpose(ns: Any, a: Any, axes: Any = None) -> Any:
    x = _array(ns, a)
    if axes is None:
        axes = tuple(range(x.ndim))[::-1]
    return ns.permute_dims(x, tuple(axes))


@_implements("matrix_transpose", "linalg.matrix_transpose")
def _matrix_transpose(ns: Any, x: Any, /) -> Any:
    return ns.matrix_transpose(_array(ns, x))


@_implements("swapaxes")
def _swapaxes(ns: Any, a: Any, axis1: int, axis2: int) -> Any:
    x = _array(ns, a)
    perm = list(range(x.ndim))
    i, j = axis1 % max(x.ndim, 1), axis2 % max(x.ndim, 1)
    perm[i], perm[j] = perm[j], perm[i]
    return ns.permute_dims(x, tuple(perm))


@_implements("moveaxis")
def _moveaxis(ns: Any, a: Any, source: Any, destination: Any) -> Any:
    if isinstance(source, list):
        source = tuple(source)
    if isinstance(destination, list):
        destination = tuple(destination)
    return ns.moveaxis(_array(ns, a), source, destination)


@_implements("rollaxis")
def _rollaxis(ns: Any, a: Any, axis: int, start: int = 0) -> Any:
    x = _array(ns, a)
    n = x.ndim
    axis %= n
    if start < 0:
        start += n
    if axis < start:
        start -= 1
    if axis == start:
        return x
    return ns.moveaxis(x, axis, start)


@_implements("expand_dims")
def _expand_dims(ns: Any, a: Any, axis: Any) -> Any:
    x = _array(ns, a)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    nd = x.ndim + len(axes)
    for ax in sorted(ax % nd for ax in axes):
        x = ns.expand_dims(x, axis=ax)
    return x


@_implements("squeeze")
def _squeeze(ns: Any, a: Any, axis: Any = None) -> Any:
    x = _array(ns, a)
    if axis is None:
        axis = tuple(i for i, s in enumerate(x.shape) if s == 1)
        if not axis:
            return x
    elif isinstance(axis, list):
        axis = tuple(axis)
    return ns.squeeze(x, axis=axis)


@_implements("concatenate", "concat")
def _concatenate(
    ns: Any,
    arrays: Any,
    axis: Any = 0,
    out: Any = None,
    *,
    dtype: Any = None,
    casting: Any = "same_kind",
) -> Any:
    xs = [_array(ns, e) for e in arrays]
    if axis is None:
        xs = [ns.reshape(e, (-1,)) for e in xs]
        axis = 0
    if dtype is not None:
        xs = [ns.astype(e, np.dtype(dtype)) for e in xs]
    return _finish(ns, ns.concat(xs, axis=axis), out, "concatenate")


@_implements("stack")
def _stack(
    ns: Any,
    arrays: Any,
    axis: int = 0,
    out: Any = None,
    *,
    dtype: Any = None,
    casting: Any = "same_kind",
) -> Any:
    xs = [_array(ns, e) for e in arrays]
    if dtype is not None:
        xs = [ns.astype(e, np.dtype(dtype)) for e in xs]
    return _finish(ns, ns.stack(xs, axis=axis), out, "stack")


def _atleast(ns: Any, x: Any, nd: int) -> Any:
    x = _array(ns, x)
    if x.ndim >= nd:
        return x
    if nd == 1:
        return ns.reshape(x, (1,))
    if nd == 2:
        return ns.reshape(x, (1, *x.shape) if x.ndim == 1 else (1, 1))
    if x.ndim == 0:
        return ns.reshape(x, (1, 1, 1))
    if x.ndim == 1:
        return ns.reshape(x, (1, x.shape[0], 1))
    return ns.reshape(x, (*x.shape, 1))


def _atleast_nd(nd: int) -> Composition:
    def f(ns: Any, *arys: Any) -> Any:
        res = tuple(_atleast(ns, a, nd) for a in arys)
        return res[0] if len(res) == 1 else res

    return f


FUNCTIONS["atleast_1d"] = _atleast_nd(1)
FUNCTIONS["atleast_2d"] = _atleast_nd(2)
FUNCTIONS["atleast_3d"] = _atleast_nd(3)


@_implements("vstack", "row_stack")
def _vstack(ns: Any, tup: Any, *, dtype: Any = None, casting: Any = "same_kind") -> Any:
    return _concatenate(ns, [_atleast(ns, e, 2) for e in tup], 0, dtype=dtype)


@_implements("hstack")
def _hstack(ns: Any, tup: Any, *, dtype: Any = None, casting: Any = "same_kind") -> Any:
    xs = [_atleast(ns, e, 1) for e in tup]
    return _concatenate(ns, xs, 0 if xs and xs[0].ndim == 1 else 1, dtype=dtype)


@_implements("dstack")
def _dstack(ns: Any, tup: Any) -> Any:
    return _concatenate(ns, [_atleast(ns, e, 3) for e in tup], 2)


@_implements("column_stack")
def _column_stack(ns: Any, tup: Any) -> Any:
    xs = []
    for e in tup:
        x = _array(ns, e)
        xs.append(ns.reshape(x, (x.shape[0], 1)) if x.ndim < 2 else x)
    return ns.concat(xs, axis=1)


@_implements("append")
def _append(ns: Any, arr: Any, values: Any, axis: Any = None) -> Any:
    a, v = _array(ns, arr), _array(ns, values)
    if axis is None:
        return ns.concat([ns.reshape(a, (-1,)), ns.reshape(v, (-1,))], axis=0)
    return ns.concat([a, v], axis=axis)


def _split_points(what: str, n: int, sections: Any, even: bool) -> list[int]:
    if isinstance(sections, int | np.integer):
        k = int(sections)
        if k <= 0:
            raise ValueError(f"numpy.{what}(): number sections must be larger than 0.")
        if even and n % k:
            raise ValueError(f"numpy.{what}(): array split does not result in an equal division")
        size, extra = divmod(n, k)
        points, at = [0], 0
        for i in range(k):
            at += size + (1 if i < extra else 0)
            points.append(at)
        return points
    return [0, *(int(i) for i in sections), n]


def _split_with(what: str, even: bool, default_axis: int = 0) -> Composition:
    def f(ns: Any, ary: Any, indices_or_sections: Any, axis: int = default_axis) -> Any:
        x = _array(ns, ary)
        axis %= x.ndim
        n = x.shape[axis]
        pts = _split_points(what, n, indices_or_sections, even)
        out = []
        for lo, hi in zip(pts[:-1], pts[1:], strict=True):
            lo, hi = max(min(lo, n), 0), max(min(hi, n), 0)
            key = (slice(None),) * axis + (slice(lo, max(lo, hi)),)
            out.append(x[key])
        return out

    return f


FUNCTIONS["split"] = _split_with("split", True)
FUNCTIONS["array_split"] = _split_with("array_split", False)


@_implements("hsplit")
def _hsplit(ns: Any, ary: Any, indices_or_sections: Any) -> Any:
    x = _array(ns, ary)
    return FUNCTIONS["split"](ns, x, indices_or_sections, 1 if x.ndim > 1 else 0)


@_implements("vsplit")
def _vsplit(ns: Any, ary: Any, indices_or_sections: Any) -> Any:
    return FUNCTIONS["split"](ns, ary, indices_or_sections, 0)


@_implements("dsplit")
def _dsplit(ns: Any, ary: Any, indices_or_sections: Any) -> Any:
    return FUNCTIONS["split"](ns, ary, indices_or_sections, 2)


@_implements("unstack")
def _unstack(ns: Any, x: Any, /, *, axis: int = 0) -> Any:
    return ns.unstack(_array(ns, x), axis=axis)


@_implements("flip")
def _flip(ns: Any, m: Any, axis: Any = None) -> Any:
    return ns.flip(_array(ns, m), axis=_norm_axis(axis))


@_implements("fliplr")
def _fliplr(ns: Any, m: Any) -> Any:
    return ns.flip(_array(ns, m), axis=1)


@_implements("flipud")
def _flipud(ns: Any, m: Any) -> Any:
    return ns.flip(_array(ns, m), axis=0)


@_implements("roll")
def _roll(ns: Any, a: Any, shift: Any, axis: Any = None) -> Any:
    if isinstance(shift, list):
        shift = tuple(shift)
    return ns.roll(_array(ns, a), shift, axis=_norm_axis(axis))


@_implements("tile")
def _tile(ns: Any, A: Any, reps: Any) -> Any:
    reps = (int(reps),) if isinstance(reps, int | np.integer) else tuple(int(r) for r in reps)
    return ns.tile(_array(ns, A), reps)


@_implements("repeat")
def _repeat(ns: Any, a: Any, repeats: Any, axis: Any = None) -> Any:
    x = _array(ns, a)
    if not isinstance(repeats, int | np.integer):
        repeats = _array(ns, repeats)
        if repeats.ndim == 0:
            repeats = int(repeats)
    else:
        repeats = int(repeats)
    if axis is None:
        x, axis = ns.reshape(x, (-1,)), 0
    return ns.repeat(x, repeats, axis=axis)


@_implements("broadcast_to")
def _broadcast_to(ns: Any, array: Any, shape: Any, subok: bool = False) -> Any:
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return ns.broadcast_to(_array(ns, array), shape)


@_implements("broadcast_arrays")
def _broadcast_arrays(ns: Any, *args: Any, subok: bool = False) -> Any:
    return tuple(ns.broadcast_arrays(*[_array(ns, a) for a in args]))


@_implements("take")
def _take(
    ns: Any, a: Any, indices: Any, axis: Any = None, out: Any = None, mode: str = "raise"
) -> Any:
    if mode != "raise":
        raise _unsupported("take", f"mode={mode!r}")
    x = _array(ns, a)
    x, axis = _axis_none_flat(ns, x, axis)
    idx = _array(ns, indices)
    r = ns.take(x, ns.reshape(idx, (-1,)), axis=axis)
    if idx.ndim != 1:
        axis %= x.ndim
        r = ns.reshape(r, (*x.shape[:axis], *idx.shape, *x.shape[axis + 1 :]))
    return _finish(ns, r, out, "take")


@_implements("take_along_axis")
def _take_along_axis(ns: Any, arr: Any, indices: Any, axis: Any = -1) -> Any:
    x, idx = _array(ns, arr), _array(ns, indices)
    if axis is None:
        x, axis = ns.reshape(x, (-1,)), 0
    return ns.take_along_axis(x, idx, axis=axis)


def _to_end(ns: Any, x: Any, axis1: int, axis2: int) -> Any:
    """``x`` with ``axis1``, ``axis2`` moved to the end, in that order."""
    return ns.moveaxis(x, (axis1, axis2), (-2, -1))


@_implements("diagonal")
def _diagonal(ns: Any, a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
    x = _to_end(ns, _array(ns, a), axis1, axis2)
    return ns.linalg.diagonal(x, offset=offset)


@_implements("trace")
def _trace(
    ns: Any,
    a: Any,
    offset: int = 0,
    axis1: int = 0,
    axis2: int = 1,
    dtype: Any = None,
    out: Any = None,
) -> Any:
    x = _to_end(ns, _array(ns, a), axis1, axis2)
    r = ns.linalg.trace(x, offset=offset, dtype=dtype)
    return _finish(ns, r, out, "trace")


@_implements("tril")
def _tril(ns: Any, m: Any, k: int = 0) -> Any:
    return ns.tril(_array(ns, m), k=k)


@_implements("triu")
def _triu(ns: Any, m: Any, k: int = 0) -> Any:
    return ns.triu(_array(ns, m), k=k)


# creation from an array's shape and dtype


def _like(fname: str) -> Composition:
    def f(
        ns: Any,
        a: Any,
        dtype: Any = None,
        order: str = "K",
        subok: bool = True,
        shape: Any = None,
        *,
        device: Any = None,
    ) -> Any:
        x = _array(ns, a)
        dt = None if dtype is None else np.dtype(dtype)
        if shape is not None:
            shape = (shape,) if isinstance(shape, int) else tuple(shape)
            return _function(ns, fname[: -len("_like")])(shape, dtype=dt or x.dtype)
        return _function(ns, fname)(x, dtype=dt)

    return f


FUNCTIONS["zeros_like"] = _like("zeros_like")
FUNCTIONS["ones_like"] = _like("ones_like")
FUNCTIONS["empty_like"] = _like("empty_like")


@_implements("full_like")
def _full_like(
    ns: Any,
    a: Any,
    fill_value: Any,
    dtype: Any = None,
    order: str = "K",
    subok: bool = True,
    shape: Any = None,
    *,
    device: Any = None,
) -> Any:
    x = _array(ns, a)
    dt = x.dtype if dtype is None else np.dtype(dtype)
    if isinstance(fill_value, Array) or isinstance(fill_value, np.ndarray | np.generic):
        v = ns.astype(_array(ns, fill_value), dt)
        target = tuple(x.shape) if shape is None else _shape(shape)
        return ns.asarray(ns.broadcast_to(v, target), copy=True)
    if shape is not None:
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        return ns.full(shape, fill_value, dtype=dt)
    return ns.full_like(x, fill_value, dtype=dt)


@_implements("meshgrid")
def _meshgrid(
    ns: Any, *xi: Any, copy: bool = True, sparse: bool = False, indexing: str = "xy"
) -> Any:
    if sparse:
        raise _unsupported("meshgrid", "sparse=True")
    return tuple(ns.meshgrid(*[ns.reshape(_array(ns, x), (-1,)) for x in xi], indexing=indexing))
