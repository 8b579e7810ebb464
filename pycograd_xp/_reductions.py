"""NumPy's reductions of its own arrays, called the way NumPy's functions call them.

For a base ``ndarray``, ``numpy.sum(x, axis=a, dtype=d, keepdims=k)`` checks its arguments in
Python and then calls ``numpy.add.reduce(x, a, d, None, keepdims=k)`` (``_wrapreduction`` in
``numpy/_core/fromnumeric.py``); ``max``, ``min`` and ``prod`` call ``maximum``, ``minimum`` and
``multiply``'s ``reduce`` the same way; ``mean`` counts the reduced elements as an ``intp``, sums
with ``add.reduce`` and divides by the count (``_mean`` in ``numpy/_core/_methods.py``). On the
small arrays of a small model's step those Python layers are most of each call (measured, 64
float32: ``sum`` 2.1 against 0.8 us, ``mean`` 4.5 against 1.5), and a step makes a dozen such
calls in its rows and rules.

Each function here makes NumPy's inner call itself where ``bk`` is NumPy's namespace (``numpy``,
or array-api-compat's, whose reductions are NumPy's own functions: checked at import) and ``x`` a
base ``ndarray``: the same call, so the same values, dtypes and errors. Anything else (another
backend, an abstract or traced array, a subclass, ``mean`` of float16 or of an empty slice,
which NumPy computes in float32 or warns about) calls ``bk``'s function. The reductions' own
cotangent, ``broadcast_to``, is here too: NumPy's read-only view, made without NumPy's
``nditer``.
"""

from __future__ import annotations

from typing import Any

import array_api_compat.numpy as _compat
import numpy as np

_ndarray, _intp = np.ndarray, np.intp
# (typed Any: NumPy's overloads of reduce and true_divide do not take the positional calls below)
_true_divide: Any = np.true_divide
_add: Any = np.add.reduce
_maximum: Any = np.maximum.reduce
_minimum: Any = np.minimum.reduce
_multiply: Any = np.multiply.reduce


def _namespaces(name: str) -> frozenset[int]:
    """The ids of the namespaces whose ``name`` is NumPy's own function (array-api-compat's
    where it re-exports NumPy's; a version that wraps it keeps its wrapper)."""
    same = getattr(_compat, name, None) is getattr(np, name)
    return frozenset((id(np), id(_compat)) if same else (id(np),))


_SUM, _MAX, _MIN, _PROD, _MEAN = map(_namespaces, ("sum", "max", "min", "prod", "mean"))


def sum(bk: Any, x: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:
    """``bk.sum(x, axis=axis, dtype=dtype, keepdims=keepdims)``."""
    if type(x) is _ndarray and id(bk) in _SUM:
        return _add(x, axis, dtype, None, keepdims=keepdims)
    return bk.sum(x, axis=axis, dtype=dtype, keepdims=keepdims)


def max(bk: Any, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """``bk.max(x, axis=axis, keepdims=keepdims)``."""
    if type(x) is _ndarray and id(bk) in _MAX:
        return _maximum(x, axis, None, None, keepdims=keepdims)
    return bk.max(x, axis=axis, keepdims=keepdims)


def min(bk: Any, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """``bk.min(x, axis=axis, keepdims=keepdims)``."""
    if type(x) is _ndarray and id(bk) in _MIN:
        return _minimum(x, axis, None, None, keepdims=keepdims)
    return bk.min(x, axis=axis, keepdims=keepdims)


def prod(bk: Any, x: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:
    """``bk.prod(x, axis=axis, dtype=dtype, keepdims=keepdims)``."""
    if type(x) is _ndarray and id(bk) in _PROD:
        return _multiply(x, axis, dtype, None, keepdims=keepdims)
    return bk.prod(x, axis=axis, dtype=dtype, keepdims=keepdims)


def mean(bk: Any, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """``bk.mean(x, axis=axis, keepdims=keepdims)`` of a floating-point ``x``."""
    if type(x) is _ndarray and id(bk) in _MEAN and x.dtype.kind in "fc" and x.dtype.itemsize > 2:
        s = _add(x, axis, None, None, keepdims=keepdims)  # (NumPy's errors for a bad axis)
        count = x.size // s.size if s.size else 0  # the elements each result sums
        if count:
            n = _intp(count)
            if type(s) is _ndarray:
                return _true_divide(s, n, out=s, casting="unsafe", subok=False)
            return s.dtype.type(s / n)
        del s  # (no element to average: NumPy's mean and its warning, the sum freed first)
    return bk.mean(x, axis=axis, keepdims=keepdims)


_BROADCAST_TO = _namespaces("broadcast_to")


def broadcast_to(bk: Any, x: Any, shape: tuple[int, ...]) -> Any:
    """``bk.broadcast_to(x, shape)`` (the cotangent of ``sum`` and ``mean``). For a C-contiguous
    base ``ndarray`` of numbers, NumPy's view made directly (its base ``x``, zero strides where
    ``x`` has a 1, read only: 1.1 against 4.3 us, NumPy's goes through an ``nditer``)."""
    if type(x) is _ndarray and id(bk) in _BROADCAST_TO and x.flags.c_contiguous:
        lead = len(shape) - x.ndim
        if lead >= 0 and x.dtype.kind in "biufc" and 0 not in shape:
            if all(n in (1, s) for n, s in zip(x.shape, shape[lead:], strict=True)):
                kept = zip(x.shape, x.strides, strict=True)
                strides = (0,) * lead + tuple(0 if n == 1 else t for n, t in kept)
                v = _ndarray(shape, x.dtype, x, 0, strides)
                v.flags.writeable = False
                return v
    return bk.broadcast_to(x, shape)  # (and NumPy's errors)
