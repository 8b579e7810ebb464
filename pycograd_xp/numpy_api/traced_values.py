"""NumPy's calls that need no gradient and have no rule, projected while ``memory.project``
traces them (issue 33).

On arrays that hold values and carry no gradient, NumPy computes any call itself (the
frontend's first path). Traced by ``memory.project`` they hold no values, so a call with no row
would refuse although nothing is differentiated. The calls here are projected instead from
their arguments' shapes and dtypes: an abstract result of NumPy's shape and dtype, and, unknown
meaning worst case, a transient full copy of the operand (NumPy's buffers for an operand it
reads out of order or casts are at most that).

Only where no argument is being differentiated, batched (vmap) or recorded (``compile``, whose
replay must compute the values): there, the caller refuses as for any call without a rule,
naming the function and the way out.

``ufunc.accumulate`` of every binary ufunc (``np.maximum.accumulate(x)``,
``np.logical_or.accumulate(m, axis=1)``): the ufuncs with a differentiable cumulative function
(``add``, ``multiply``) go to it instead, gradient included.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._abstract import AbstractArray
from .._state import STACK
from ..namespace._array import Array


def _projectable(arrays: list[Array]) -> bool:
    """Every array is abstract and projected (a tracker adds up its bytes), none carries a
    gradient or a batch, and no trace records the calls."""
    if STACK.tracker is None or STACK.recorder is not None or STACK.closed is not None:
        return False
    return all(a._node is None and a._backend.abstract and not a._backend.level for a in arrays)


def accumulate(ns: Any, ufunc: Any, inputs: tuple, kwargs: dict, arrays: list[Array]) -> Any:
    """``ufunc.accumulate(x, axis=0, dtype=None)`` projected (NotImplemented where it cannot be:
    the caller refuses)."""
    if len(inputs) != 1 or not isinstance(inputs[0], Array) or not _projectable(arrays):
        return NotImplemented
    if set(kwargs) - {"axis", "dtype"} or ufunc.nin != 2:
        return NotImplemented
    x = inputs[0]
    data = x._data
    axis = kwargs.get("axis", 0)
    what = f"numpy.{ufunc.__name__}.accumulate"
    if data.ndim == 0:
        raise TypeError(f"{what}(): cannot accumulate on a scalar (a 0-d array)")
    if not isinstance(axis, int | np.integer) or not -data.ndim <= axis < data.ndim:
        raise np.exceptions.AxisError(
            f"{what}(): axis {axis!r} is out of bounds for an array of dimension {data.ndim}"
        )
    # NumPy's own dtype resolution, on one element
    dtype = ufunc.accumulate(np.zeros(1, dtype=data.dtype), dtype=kwargs.get("dtype")).dtype
    out = AbstractArray(data.shape, dtype)  # live from here: the tracker counts it
    STACK.tracker.call(what, [out], data.size * max(dtype.itemsize, data.dtype.itemsize))
    return ns._make(out)
