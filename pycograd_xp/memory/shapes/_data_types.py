"""Shape rules of the data type functions: ``astype`` makes an array (or returns its input when
no copy is needed); the others answer questions about dtypes and run NumPy's own answer."""

from __future__ import annotations

import array_api_compat.numpy as npx
import numpy as np

from ..._primitive import defshape
from ...ops._rules.shapes import elementwise_out, is_array


def _dtype_of(v):
    return v.dtype if is_array(v) else v


def _astype(a, x, dtype, /, *, copy=True, device=None):
    if not copy and np.dtype(dtype) == x.dtype:
        return x
    return elementwise_out(x.shape, dtype, x)  # in the input's memory order, as NumPy's


defshape("astype", _astype)
defshape("can_cast", lambda a, from_, to, /: npx.can_cast(_dtype_of(from_), to))
defshape("finfo", lambda a, type, /: npx.finfo(_dtype_of(type)))
defshape("iinfo", lambda a, type, /: npx.iinfo(_dtype_of(type)))
defshape("isdtype", lambda a, dtype, kind: npx.isdtype(np.dtype(dtype), kind))
defshape("result_type", lambda a, *xs: npx.result_type(*(
    np.ones((1,) * v.ndim, v.dtype) if is_array(v) else v for v in xs)))  # fmt: skip
