"""Shape rules of the elementwise functions: the broadcast shape of the array arguments and the
dtype NumPy's own function gives (probed on one-element arrays). ``real``/``imag`` of complex
input are views, as in NumPy; ``real`` of a real array is that array. Their transients are the
iterator's buffers for broadcast, cast or differently laid-out operands. A result is laid out
in its operands' memory order, as NumPy's (order "K"): transposed in, transposed out."""

from __future__ import annotations

import array_api_compat.numpy as npx

from ..._primitive import REGISTRY, defshape
from ...ops._rules.shapes import (
    broadcast,
    elementwise_out,
    is_array,
    probe_dtype,
    ufunc_buffers,
    view,
)


def _elementwise(name):
    ref = getattr(npx, name)

    def rule(a, *xs):
        shape = broadcast(*(x.shape for x in xs if is_array(x)))
        return elementwise_out(shape, probe_dtype(ref, *xs), *xs)

    return rule


def _real(a, x, /):
    if x.dtype.kind != "c":
        return x
    return view(x, x.shape, dtype=x.dtype.type(0).real.dtype, contiguous=False)


def _imag(a, x, /):
    return view(x, x.shape, dtype=x.dtype.type(0).imag.dtype, contiguous=False)


def _clip(a, x, /, min=None, max=None):
    shape = broadcast(*(v.shape for v in (x, min, max) if is_array(v)))
    return elementwise_out(shape, x.dtype, x, min, max)


def _buffers(out, *xs, **kw):
    return ufunc_buffers(out, *xs, *kw.values())


for _prim in list(REGISTRY.values()):
    if _prim.kind in ("unary", "binary") and _prim.name not in ("real", "imag"):
        defshape(_prim.name, _elementwise(_prim.name), memory=_buffers)
defshape("real", _real)
defshape("imag", _imag)
defshape("clip", _clip, memory=_buffers)
