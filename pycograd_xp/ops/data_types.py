"""Data type functions. Only ``astype`` makes an array; the others answer questions about dtypes
(they unwrap any of our arrays they are given and return plain Python values).

``astype`` passes cotangents through (the engine casts them back to the input's dtype and takes
the real part for a real input), is linear, keeps the batch axis, and makes an array (or returns
its input when no copy is needed). The others have no derivative, give the same result for
every example of a batch, and their shape rules run NumPy's own answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import array_api_compat.numpy as npx
import numpy as np

from .._primitive import Array, primitive
from ._rules.batching import fn
from ._rules.jvp import linear
from ._rules.shapes import elementwise_out, is_array

# -- kits shared by the rows below ---------------------------------------------------------------


@dataclass(frozen=True)
class finfo_object:  # the standard's name
    """``finfo`` with Python floats, as the standard asks (NumPy returns NumPy scalars)."""

    bits: int
    eps: float
    max: float
    min: float
    smallest_normal: float
    dtype: Any


@dataclass(frozen=True)
class iinfo_object:  # the standard's name
    bits: int
    max: int
    min: int
    dtype: Any


def _same(row):
    """The batching rule of ``row`` run as is on the batched arguments (``astype`` keeps the
    batch axis; the others read dtypes only)."""
    name = row.name
    return lambda ns, dims, *args, **kw: fn(ns, name)(*args, **kw)


def _dtype_of(v):
    return v.dtype if is_array(v) else v


# -- astype --------------------------------------------------------------------------------------


@primitive()
def astype(bk: Any, x: Array, dtype: Any, /, *, copy: bool = True, device: Any = None) -> Any:
    return bk.astype(x, dtype, copy=copy, device=device)


astype.defvjp(lambda ns, g, out, x, dtype, /, **kw: (g, None))
astype.defjvp(linear(astype))
astype.defbatch(_same(astype))


@astype.defshape
def astype_shape(a, x, dtype, /, *, copy=True, device=None):
    if not copy and np.dtype(dtype) == x.dtype:
        return x
    return elementwise_out(x.shape, dtype, x)  # in the input's memory order, as NumPy's


# -- can_cast ------------------------------------------------------------------------------------


@primitive()
def can_cast(bk: Any, from_: Array, to: Any, /) -> bool:
    return bool(bk.can_cast(from_, to))


can_cast.nondifferentiable()
can_cast.defbatch(_same(can_cast))
can_cast.defshape(lambda a, from_, to, /: npx.can_cast(_dtype_of(from_), to))


# -- finfo ---------------------------------------------------------------------------------------


@primitive()
def finfo(bk: Any, type: Array, /) -> finfo_object:
    fi = bk.finfo(type)
    return finfo_object(
        int(fi.bits),
        float(fi.eps),
        float(fi.max),
        float(fi.min),
        float(fi.smallest_normal),
        fi.dtype,
    )


finfo.nondifferentiable()
finfo.defbatch(_same(finfo))
finfo.defshape(lambda a, type, /: npx.finfo(_dtype_of(type)))


# -- iinfo ---------------------------------------------------------------------------------------


@primitive()
def iinfo(bk: Any, type: Array, /) -> iinfo_object:
    ii = bk.iinfo(type)
    return iinfo_object(int(ii.bits), int(ii.max), int(ii.min), ii.dtype)


iinfo.nondifferentiable()
iinfo.defbatch(_same(iinfo))
iinfo.defshape(lambda a, type, /: npx.iinfo(_dtype_of(type)))


# -- isdtype -------------------------------------------------------------------------------------


@primitive()
def isdtype(bk: Any, dtype: Any, kind: Any) -> bool:
    return bool(bk.isdtype(dtype, kind))


isdtype.nondifferentiable()
isdtype.defbatch(_same(isdtype))
isdtype.defshape(lambda a, dtype, kind: npx.isdtype(np.dtype(dtype), kind))


# -- result_type ---------------------------------------------------------------------------------


@primitive()
def result_type(bk: Any, *arrays_and_dtypes: Array) -> Any:
    return bk.result_type(*arrays_and_dtypes)


result_type.nondifferentiable()
result_type.defbatch(_same(result_type))
result_type.defshape(
    lambda a, *xs: npx.result_type(
        *(np.ones((1,) * v.ndim, v.dtype) if is_array(v) else v for v in xs)
    )
)
