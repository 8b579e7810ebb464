"""Shape rules of ``matmul``, ``matrix_transpose``, ``tensordot`` and ``vecdot``.

What the calls allocate beside their outputs (measured with tracemalloc over float32 and
float64 operands in C order, transposed and strided):

* ``matmul`` is a gufunc, which cannot cast or buffer its core axes piecewise: an operand whose
  dtype is not the result's is copied whole, cast (float32 data times float64 weights: a
  float64 copy of the data). Transposed and strided operands need no copy (BLAS takes the
  former, NumPy's own loop the latter).
* ``tensordot`` transposes and reshapes both operands into matrices, then calls ``dot``: the
  reshape copies an operand of more than two dimensions whose contracted axes are not already
  where the product wants them (last for the first operand, first for the second) or whose
  layout is not C order; ``dot`` then copies an operand of another dtype (cast) and a matrix
  BLAS cannot take (strided, or broadcast with zero strides as a reduction's cotangent is).
  The abstract arrays know only C order or not, so a transposed matrix counts as copied too.
* ``vecdot`` is a gufunc: only the iterator's buffers for broadcast operands.
"""

from __future__ import annotations

import math

import array_api_compat.numpy as npx

from ..._primitive import defshape
from ...ops._rules.shapes import BUFFER_ELEMENTS, broadcast, new, probe_dtype, size_bytes, view
from ...ops._rules.vjp import tensordot_axes


def _matmul(a, x1, x2, /):
    s1, s2 = x1.shape, x2.shape
    if len(s1) == 1 and len(s2) == 1:
        if s1 != s2:
            raise ValueError(f"matmul: shapes {s1} and {s2} are not aligned")
        shape = ()
    else:
        m1 = (1,) + s1 if len(s1) == 1 else s1
        m2 = s2 + (1,) if len(s2) == 1 else s2
        if m1[-1] != m2[-2]:
            raise ValueError(f"matmul: mismatch in the core dimension ({s1} @ {s2})")
        shape = broadcast(m1[:-2], m2[:-2]) + (m1[-2], m2[-1])
        if len(s1) == 1:
            shape = shape[:-2] + shape[-1:]
        if len(s2) == 1:
            shape = shape[:-1]
    return new(shape, probe_dtype(npx.matmul, x1, x2))


def _cast_copies(out, *xs):
    """The bytes of whole copies, in the result's dtype, of the operands of another dtype."""
    return sum(x.size * out.dtype.itemsize for x in xs if x.dtype != out.dtype)


def _matmul_memory(out, x1, x2, /):
    return _cast_copies(out, x1, x2)


def _matrix_transpose(a, x, /):
    return view(x, x.shape[:-2] + (x.shape[-1], x.shape[-2]), contiguous=False)


def _tensordot(a, x1, x2, /, *, axes=2):
    a1, a2 = tensordot_axes(axes, x1.ndim, x2.ndim)
    shape = tuple(s for i, s in enumerate(x1.shape) if i not in a1) + tuple(
        s for i, s in enumerate(x2.shape) if i not in a2)  # fmt: skip
    return new(shape, probe_dtype(npx.tensordot, x1, x2, axes=axes))


def _tensordot_memory(out, x1, x2, /, *, axes=2):
    a1, a2 = tensordot_axes(axes, x1.ndim, x2.ndim)
    moved = (x1.ndim > 2 and a1 != list(range(x1.ndim - len(a1), x1.ndim)),
             x2.ndim > 2 and a2 != list(range(len(a2))))  # fmt: skip
    total = 0
    for x, m in zip((x1, x2), moved, strict=True):
        reshaped = m or (not x.contiguous and x.ndim > 2)  # a C-ordered copy of the operand
        total += size_bytes(x) if reshaped else 0
        if x.dtype != out.dtype:  # dot casts the matrix: a copy in the result's dtype
            total += x.size * out.dtype.itemsize
        elif not reshaped and not x.contiguous:  # dot copies a matrix BLAS cannot take
            total += size_bytes(x)
    return total


def _vecdot(a, x1, x2, /, *, axis=-1):
    shape = list(broadcast(x1.shape, x2.shape))
    del shape[axis % len(shape)]
    return new(shape, probe_dtype(npx.vecdot, x1, x2, axis=axis))


def _vecdot_memory(out, x1, x2, /, *, axis=-1):
    full = broadcast(x1.shape, x2.shape)
    k = sum(1 for x in (x1, x2) if x.shape != full)
    return k * min(math.prod(full), BUFFER_ELEMENTS) * out.dtype.itemsize


defshape("matmul", _matmul, memory=_matmul_memory)
defshape("matrix_transpose", _matrix_transpose)
defshape("tensordot", _tensordot, memory=_tensordot_memory)
defshape("vecdot", _vecdot, memory=_vecdot_memory)
