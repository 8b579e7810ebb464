"""Creation functions. They make new arrays from Python values or shapes.

``asarray`` of a tracked array is the identity (it keeps the tape), and ``meshgrid``, ``tril``,
``triu`` are linear in their array arguments (their JVP is the row on the tangents); the others
make constants, with no derivative.

Batching: ``*_like`` keep the batch axis; ``full`` with a batched fill value broadcasts it;
tril/triu work on the last two axes; linspace with batched ends scales one shared grid (its
length is a Python int). arange's length would depend on each example's values: it cannot
batch, nor can the rows that take only Python values (a shape).

Shapes: data given from outside (``asarray`` of Python values or NumPy arrays) becomes an
abstract array of its shape and dtype: a constant of the step.
"""

from __future__ import annotations

import math
from typing import Any

import array_api_compat.numpy as npx
import numpy as np

from .._abstract import AbstractArray
from .._primitive import Array, primitive
from ..namespace._array import detach
from ._rules.batching import SHAPE_ONLY, batch_size, batched, constant_like, to_rank
from ._rules.jvp import linear
from ._rules.shapes import (
    BUFFER_ELEMENTS,
    broadcast_view,
    constant,
    elementwise_out,
    is_array,
    measured_layouts,
    new,
    view,
)

# -- kits shared by the rows below ---------------------------------------------------------------


def on_batched(row: Any) -> Any:
    """The batching rule of a row that works on the batched array as it is (``*_like`` keep the
    batch axis; tril/triu work on the last two axes)."""
    name = row.name
    return lambda ns, dims, x, /, **kw: getattr(ns, name)(x, **kw)


def _shape(shape):
    return (shape,) if isinstance(shape, int) else tuple(shape)


def _default(dtype, fill=0.0):
    if dtype is not None:
        return dtype
    if isinstance(fill, bool):
        return "bool"
    if isinstance(fill, int):
        return "int64"
    if isinstance(fill, complex):
        return "complex128"
    return "float64"


def _fill_shape(a, shape, *, dtype=None, device=None):
    return new(_shape(shape), _default(dtype))


def _like_shape(a, x, /, *, dtype=None, device=None):
    # NumPy's *_like keep the input's memory order (order "K"): transposed in, transposed out
    return elementwise_out(x.shape, x.dtype if dtype is None else dtype, x)


# -- arange --------------------------------------------------------------------------------------


@primitive()
def arange(
    bk: Any,
    start: Array,
    /,
    stop: Array = None,
    step: Array = 1,
    *,
    dtype: Any = None,
    device: Any = None,
) -> Any:
    return bk.arange(start, stop, step, dtype=dtype, device=device)


arange.nondifferentiable()
arange.cannot_batch(
    "its length would depend on each example's values; build the grid outside "
    "vmap (or use start + step * xp.arange(n))"
)


@arange.defshape
def arange_shape(a, start, /, stop=None, step=1, *, dtype=None, device=None):
    if stop is None:
        start, stop = 0, start
    n = max(0, math.ceil((stop - start) / step))
    kind = "int64" if all(isinstance(v, int) for v in (start, stop, step)) else "float64"
    return new((n,), dtype if dtype is not None else kind)


# -- asarray -------------------------------------------------------------------------------------


@primitive()
def asarray(
    bk: Any, obj: Array, /, *, dtype: Any = None, device: Any = None, copy: bool | None = None
) -> Any:
    if copy is not False and _negative_zero(obj):
        # CuPy's asarray of a Python -0.0 gives +0.0 (a list of one keeps the sign)
        return bk.reshape(bk.asarray([obj], dtype=dtype, device=device), ())
    return bk.asarray(obj, dtype=dtype, device=device, copy=copy)


def _negative_zero(obj: Any) -> bool:
    """Whether ``obj`` is a Python float (or complex) with a zero of negative sign."""
    if type(obj) is float:
        return obj == 0.0 and math.copysign(1.0, obj) < 0
    if type(obj) is complex:
        return _negative_zero(obj.real) or _negative_zero(obj.imag)
    return False


asarray.defvjp(lambda ns, g, out, obj, /, **kw: (g,))
asarray.defjvp(linear(asarray))


def _first_batch(obj, d):
    for o, di in zip(obj, d, strict=True):
        if di is True:
            return o.shape[0]
        if isinstance(di, list):
            n = _first_batch(o, di)
            if n is not None:
                return n
    return None


def _stacked(ns, obj, d, n):
    out = []
    for o, di in zip(obj, d, strict=True):
        if isinstance(di, list):
            out.append(ns.stack(_stacked(ns, o, di, n), axis=1))
        else:
            out.append(batched(ns, ns.asarray(o) if not hasattr(o, "shape") else o, di, n))
    return out


@asarray.defbatch
def asarray_batch(ns, dims, obj, /, *, dtype=None, device=None, copy=None):
    if dims[0] is True:
        return ns.asarray(obj, dtype=dtype, copy=copy)
    # a (nested) list holding batched arrays: stack the examples' values
    n = _first_batch(obj, dims[0])
    return ns.asarray(ns.stack(_stacked(ns, obj, dims[0], n), axis=1), dtype=dtype)


def _sequence_spec(obj: Any) -> tuple[tuple[int, ...], Any] | None:
    """The shape and dtype NumPy makes of a (nested) list or tuple that holds abstract arrays
    (no values to convert), from its structure; None for one that holds none."""
    if not _holds_abstract(obj):
        return None

    def spec(e: Any) -> tuple[tuple[int, ...], list[Any]]:
        if type(e) is list or type(e) is tuple:
            if not e:
                return (0,), []
            parts = [spec(v) for v in e]
            shapes = {p[0] for p in parts}
            if len(shapes) != 1:
                raise ValueError(
                    f"asarray(): the sequence's elements have different shapes {sorted(shapes)}"
                )
            return (len(e), *parts[0][0]), [d for p in parts for d in p[1]]
        if hasattr(e, "shape") and hasattr(e, "dtype"):
            return tuple(e.shape), [e.dtype]
        return (), [np.asarray(e).dtype]  # a Python number: bool, int64, float64, complex128

    shape, dtypes = spec(obj)
    return shape, np.result_type(*dtypes) if dtypes else np.dtype("float64")


def _holds_abstract(obj: Any) -> bool:
    return (type(obj) is list or type(obj) is tuple) and any(
        isinstance(e, AbstractArray) or _holds_abstract(e) for e in obj
    )


def _holds_arrays(obj: Any) -> bool:
    """Whether a (nested) list or tuple holds arrays (NumPy scalars are numbers here)."""
    return (type(obj) is list or type(obj) is tuple) and any(
        (
            not isinstance(e, np.generic)
            and (hasattr(e, "__array__") or hasattr(e, "__array_namespace__"))
        )
        or _holds_arrays(e)
        for e in obj
    )


def _asarray_shape(a, obj, /, *, dtype=None, device=None, copy=None):
    if is_array(obj):
        if copy or (dtype is not None and np.dtype(dtype) != obj.dtype):  # in obj's order
            return elementwise_out(obj.shape, obj.dtype if dtype is None else dtype, obj)
        return obj
    found = _sequence_spec(obj)
    if found is not None:  # a list of traced arrays: a new array of their values
        return new(found[0], found[1] if dtype is None else dtype)
    return constant(npx.asarray(obj, dtype=dtype))  # Python values or an array from outside


@measured_layouts
def _asarray_memory(out, obj, /, *, dtype=None, device=None, copy=None):
    # NumPy's conversion of a nested sequence holds 32 bytes for each sequence below the top
    # (measured: 3.2 MB for 100,000 lists of 10 floats, 3.52 MB for 10,000 x 10 x 10); one
    # that holds arrays (0-d arrays, ours unwrapped into a copy of the list) holds about 40
    # bytes for each array in it besides (measured: 4.0 MB for 100,000 0-d arrays, 5.4 MB for
    # 10,000 lists of 10): 64 bytes for each sequence and each leaf charged then
    if type(obj) is not list and type(obj) is not tuple:
        return 0
    leaves, sequences = _count(obj)
    if _holds_arrays(obj) or _holds_abstract(obj):
        return 64 * (sequences + leaves)
    return 32 * sequences


def _count(obj: Any) -> tuple[int, int]:
    """The leaves and the sequences below the top of a (nested) list or tuple."""
    leaves = sequences = 0
    stack = list(obj)
    while stack:
        e = stack.pop()
        if type(e) is list or type(e) is tuple:
            sequences += 1
            stack.extend(e)
        else:
            leaves += 1
    return leaves, sequences


asarray.defshape(_asarray_shape, memory=_asarray_memory)


# -- empty, ones, zeros --------------------------------------------------------------------------


@primitive()
def empty(bk: Any, shape: Any, *, dtype: Any = None, device: Any = None) -> Any:
    return bk.empty(shape, dtype=dtype, device=device)


@primitive()
def ones(bk: Any, shape: Any, *, dtype: Any = None, device: Any = None) -> Any:
    return bk.ones(shape, dtype=dtype, device=device)


@primitive()
def zeros(bk: Any, shape: Any, *, dtype: Any = None, device: Any = None) -> Any:
    return bk.zeros(shape, dtype=dtype, device=device)


for _row in (empty, ones, zeros):
    _row.nondifferentiable()
    _row.cannot_batch(SHAPE_ONLY)
    _row.defshape(_fill_shape)


# -- empty_like, ones_like, zeros_like -----------------------------------------------------------


@primitive()
def empty_like(bk: Any, x: Array, /, *, dtype: Any = None, device: Any = None) -> Any:
    return bk.empty_like(x, dtype=dtype, device=device)


@primitive()
def ones_like(bk: Any, x: Array, /, *, dtype: Any = None, device: Any = None) -> Any:
    return bk.ones_like(x, dtype=dtype, device=device)


@primitive()
def zeros_like(bk: Any, x: Array, /, *, dtype: Any = None, device: Any = None) -> Any:
    return bk.zeros_like(x, dtype=dtype, device=device)


for _row in (empty_like, ones_like, zeros_like):
    _row.nondifferentiable()
    _row.defbatch(on_batched(_row))
    _row.defshape(_like_shape)


# -- eye -----------------------------------------------------------------------------------------


@primitive()
def eye(
    bk: Any,
    n_rows: int,
    n_cols: int | None = None,
    /,
    *,
    k: int = 0,
    dtype: Any = None,
    device: Any = None,
) -> Any:
    return bk.eye(n_rows, n_cols, k=k, dtype=dtype, device=device)


eye.nondifferentiable()
eye.cannot_batch(SHAPE_ONLY)


@eye.defshape
def eye_shape(a, n_rows, n_cols=None, /, *, k=0, dtype=None, device=None):
    return new((n_rows, n_rows if n_cols is None else n_cols), _default(dtype))


# -- from_dlpack ---------------------------------------------------------------------------------


@primitive()
def from_dlpack(bk: Any, x: Array, /, *, device: Any = None, copy: bool | None = None) -> Any:
    return bk.from_dlpack(x, device=device, copy=copy)


from_dlpack.nondifferentiable()
from_dlpack.cannot_batch("a batched value has no single DLPack buffer; use xp.asarray")


@from_dlpack.defshape
def from_dlpack_shape(a, x, /, *, device=None, copy=None):
    return new(x.shape, x.dtype) if copy else view(x, x.shape)


# -- full ----------------------------------------------------------------------------------------


@primitive()
def full(bk: Any, shape: Any, fill_value: Array, *, dtype: Any = None, device: Any = None) -> Any:
    return bk.full(shape, fill_value, dtype=dtype, device=device)


full.nondifferentiable()


@full.defbatch
def full_batch(ns, dims, shape, fill_value, *, dtype=None, device=None):
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    n = fill_value.shape[0]
    v = to_rank(ns, fill_value, len(shape))
    out = ns.broadcast_to(v, (n, *shape))
    return ns.astype(out, dtype, copy=True) if dtype is not None else ns.asarray(out, copy=True)


@full.defshape
def full_shape(a, shape, fill_value, *, dtype=None, device=None):
    return new(_shape(shape), _default(dtype, fill_value))


# -- full_like -----------------------------------------------------------------------------------


@primitive()
def full_like(
    bk: Any, x: Array, /, fill_value: Array, *, dtype: Any = None, device: Any = None
) -> Any:
    return bk.full_like(x, fill_value, dtype=dtype, device=device)


full_like.nondifferentiable()


@full_like.defbatch
def full_like_batch(ns, dims, x, /, fill_value, *, dtype=None, device=None):
    if not dims[1]:
        return ns.full_like(x, fill_value, dtype=dtype)
    n = fill_value.shape[0]
    shape = tuple(x.shape[1:]) if dims[0] else tuple(x.shape)
    out = ns.broadcast_to(to_rank(ns, fill_value, len(shape)), (n, *shape))
    return ns.astype(out, dtype if dtype is not None else x.dtype, copy=True)


@full_like.defshape
def full_like_shape(a, x, /, fill_value, *, dtype=None, device=None):
    return elementwise_out(x.shape, x.dtype if dtype is None else dtype, x)


# -- linspace ------------------------------------------------------------------------------------


@primitive()
def linspace(
    bk: Any,
    start: Array,
    stop: Array,
    /,
    num: int,
    *,
    dtype: Any = None,
    device: Any = None,
    endpoint: bool = True,
) -> Any:
    return bk.linspace(start, stop, num, dtype=dtype, device=device, endpoint=endpoint)


linspace.nondifferentiable()


@linspace.defbatch
def linspace_batch(ns, dims, start, stop, /, num, *, dtype=None, device=None, endpoint=True):
    # num is a Python int, so each example's grid has the same length: start + (stop - start)
    # times one shared unit grid (linspace has no gradient: the ends are detached)
    n = batch_size(dims, (start, stop))
    like = start if dims[0] else stop
    t = constant_like(
        like, lambda bk, kw: bk.linspace(0.0, 1.0, num, dtype=dtype, endpoint=endpoint, **kw)
    )
    ends = []
    for v, d in zip((start, stop), dims[:2], strict=True):
        v = detach(batched(ns, v, d, n))
        if not ns.isdtype(v.dtype, ("real floating", "complex floating")) or dtype is not None:
            v = ns.astype(v, t.dtype)
        ends.append(v[:, None])
    a, b = ends
    out = a + (b - a) * t
    if endpoint and num > 1:  # the last point is stop exactly, as in NumPy
        last = constant_like(like, lambda bk, kw: bk.arange(num, **kw)) == num - 1
        out = ns.where(last, b, out)
    return out


@linspace.defshape
def linspace_shape(a, start, stop, /, num, *, dtype=None, device=None, endpoint=True):
    cplx = isinstance(start, complex) or isinstance(stop, complex)
    return new((num,), dtype if dtype is not None else ("complex128" if cplx else "float64"))


# -- meshgrid ------------------------------------------------------------------------------------


@primitive()
def meshgrid(bk: Any, *arrays: Array, indexing: str = "xy") -> Any:
    return tuple(bk.meshgrid(*arrays, indexing=indexing))


def _meshgrid_ct(ns, g, i, n, indexing):
    # Output i varies along one axis (axis i; with "xy" the first two are swapped) and repeats
    # input i along the others: its cotangent sums over them.
    axis = i
    if indexing == "xy" and n >= 2 and i < 2:
        axis = 1 - i
    others = tuple(a for a in range(g.ndim) if a != axis)
    return ns.sum(g, axis=others) if others else g


meshgrid.defvjp(
    lambda ns, g, out, *arrays, indexing="xy": tuple(
        _meshgrid_ct(ns, gi, i, len(arrays), indexing) for i, gi in enumerate(g)
    )
)
meshgrid.defjvp(linear(meshgrid))


@meshgrid.defbatch
def meshgrid_batch(ns, dims, *arrays, indexing="xy"):
    n = next(a.shape[0] for a, d in zip(arrays, dims, strict=True) if d)
    lens = [a.shape[-1] for a in arrays]
    k = len(arrays)
    pos = list(range(k))
    if indexing == "xy" and k >= 2:
        pos[0], pos[1] = 1, 0
    shape = [0] * k
    for i, p in enumerate(pos):
        shape[p] = lens[i]
    out = []
    for a, d, p in zip(arrays, dims, pos, strict=True):
        a = batched(ns, a, d, n)
        view = [1] * k
        view[p] = a.shape[1]
        out.append(ns.broadcast_to(ns.reshape(a, (n, *view)), (n, *shape)))
    return out


@meshgrid.defshape
def meshgrid_shape(a, *arrays, indexing="xy"):
    sizes = [x.size for x in arrays]
    if indexing == "xy" and len(sizes) >= 2:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    dtype = np.result_type(*(x.dtype for x in arrays)) if arrays else np.dtype("float64")
    return tuple(new(sizes, dtype) for _ in arrays)


# -- tril, triu ----------------------------------------------------------------------------------


@primitive()
def tril(bk: Any, x: Array, /, *, k: int = 0) -> Any:
    return bk.tril(x, k=k)


@primitive()
def triu(bk: Any, x: Array, /, *, k: int = 0) -> Any:
    return bk.triu(x, k=k)


tril.defvjp(lambda ns, g, out, x, /, *, k=0: (ns.tril(g, k=k),))
triu.defvjp(lambda ns, g, out, x, /, *, k=0: (ns.triu(g, k=k),))


def _triangle(a, x, /, *, k=0):
    return new(x.shape, x.dtype)


@measured_layouts
def _triangle_mask(out, x, /, *, k=0):
    # NumPy builds a boolean mask of one matrix, then where(mask, x, zeros(1)): its iterator
    # buffers ``x`` when it is not in C order (measured: 35 kB over the mask on a transposed
    # 142 x 213 float64), and the mask broadcast over a stack
    k = (not x.contiguous or broadcast_view(x)) + (x.ndim > 2)
    rows, cols = x.shape[-2], x.shape[-1]
    # the mask is np.tri's greater_equal.outer of two aranges (the smallest integer dtypes that
    # hold them, cast to a common one through the ufunc's buffers): the aranges, and two
    # buffers of at most BUFFER_ELEMENTS 4-byte integers (measured: 34.8 kB beside a 128 x 96
    # mask, 41.6 kB beside a 2000 x 2000 one; found over on bool and int8 matrices, whose
    # results leave the call slack too little, by the memory check by hypothesis, issue 33)
    tri = (rows + cols) * 8 + 2 * min(rows * cols, BUFFER_ELEMENTS) * 4
    return rows * cols + tri + k * min(out.size, BUFFER_ELEMENTS) * x.dtype.itemsize


for _row in (tril, triu):
    _row.defjvp(linear(_row))
    _row.defbatch(on_batched(_row))
    _row.defshape(_triangle, memory=_triangle_mask)
