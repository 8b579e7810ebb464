"""Shape rules of the creation functions. Data given from outside (``asarray`` of Python values or
NumPy arrays) becomes an abstract array of its shape and dtype: a constant of the step."""

from __future__ import annotations

import math

import array_api_compat.numpy as npx
import numpy as np

from ..._primitive import defshape
from ...ops._rules.shapes import constant, elementwise_out, is_array, new, view


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


def _arange(a, start, /, stop=None, step=1, *, dtype=None, device=None):
    if stop is None:
        start, stop = 0, start
    n = max(0, math.ceil((stop - start) / step))
    kind = "int64" if all(isinstance(v, int) for v in (start, stop, step)) else "float64"
    return new((n,), dtype if dtype is not None else kind)


def _asarray(a, obj, /, *, dtype=None, device=None, copy=None):
    if is_array(obj):
        if copy or (dtype is not None and np.dtype(dtype) != obj.dtype):  # in obj's order
            return elementwise_out(obj.shape, obj.dtype if dtype is None else dtype, obj)
        return obj
    c = constant(npx.asarray(obj, dtype=dtype))  # Python values or an array from outside
    return c


def _fill(a, shape, *, dtype=None, device=None):
    return new(_shape(shape), _default(dtype))


def _full(a, shape, fill_value, *, dtype=None, device=None):
    return new(_shape(shape), _default(dtype, fill_value))


def _like(a, x, /, *, dtype=None, device=None):
    # NumPy's *_like keep the input's memory order (order "K"): transposed in, transposed out
    return elementwise_out(x.shape, x.dtype if dtype is None else dtype, x)


def _full_like(a, x, /, fill_value, *, dtype=None, device=None):
    return elementwise_out(x.shape, x.dtype if dtype is None else dtype, x)


def _eye(a, n_rows, n_cols=None, /, *, k=0, dtype=None, device=None):
    return new((n_rows, n_rows if n_cols is None else n_cols), _default(dtype))


def _linspace(a, start, stop, /, num, *, dtype=None, device=None, endpoint=True):
    cplx = isinstance(start, complex) or isinstance(stop, complex)
    return new((num,), dtype if dtype is not None else ("complex128" if cplx else "float64"))


def _meshgrid(a, *arrays, indexing="xy"):
    sizes = [x.size for x in arrays]
    if indexing == "xy" and len(sizes) >= 2:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    dtype = np.result_type(*(x.dtype for x in arrays)) if arrays else np.dtype("float64")
    return tuple(new(sizes, dtype) for _ in arrays)


def _triangle(a, x, /, *, k=0):
    return new(x.shape, x.dtype)


def _from_dlpack(a, x, /, *, device=None, copy=None):
    return new(x.shape, x.dtype) if copy else view(x, x.shape)


defshape("arange", _arange)
defshape("asarray", _asarray)
defshape("empty", _fill)
defshape("zeros", _fill)
defshape("ones", _fill)
defshape("full", _full)
defshape("empty_like", _like)
defshape("zeros_like", _like)
defshape("ones_like", _like)
defshape("full_like", _full_like)
defshape("eye", _eye)
defshape("linspace", _linspace)
defshape("meshgrid", _meshgrid)
def _triangle_mask(out, x, /, *, k=0):
    return x.shape[-2] * x.shape[-1]  # NumPy builds a boolean mask of one matrix, then where()


defshape("tril", _triangle, memory=_triangle_mask)
defshape("triu", _triangle, memory=_triangle_mask)
defshape("from_dlpack", _from_dlpack)
