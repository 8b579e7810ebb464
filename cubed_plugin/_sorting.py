"""``sort``, ``argsort`` and ``take_along_axis`` over Cubed: one NumPy call per block holding
the axis whole (:func:`cubed_plugin._blocks.core_apply`), lazily. An axis in several chunks is
rechunked to one when a block then fits a task's memory; otherwise NotImplementedError names the
chunking and ``allowed_mem`` that would work.

Memory: NumPy's stable sort allocates nothing besides its output; a descending argsort flips a
copy of the input and its int64 result (measured with tracemalloc and the process high-water
mark, NumPy 2.4). Blocks declare one input-sized plus one int64 array per block as temporaries.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import array_api_compat.numpy as anp
import numpy as np

from ._blocks import Out, core_apply, implements, norm_axis


def _temps(ins: list, outs: list) -> int:
    shape, dtype = ins[0]
    return math.prod(shape) * (np.dtype(dtype).itemsize + 8)


@implements("sort")
def sort(x: Any, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Any:
    axis = norm_axis(axis, x.ndim, "sort")
    f = functools.partial(anp.sort, axis=axis, descending=descending, stable=stable)
    return core_apply(
        "sort",
        f,
        [x],
        [(axis,)],
        [Out(tuple(x.shape), (axis,), x.dtype)],
        temps=_temps,
        what=f"the sorted axis {axis}",
    )


@implements("argsort")
def argsort(x: Any, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Any:
    axis = norm_axis(axis, x.ndim, "argsort")
    f = functools.partial(anp.argsort, axis=axis, descending=descending, stable=stable)
    return core_apply(
        "argsort",
        f,
        [x],
        [(axis,)],
        [Out(tuple(x.shape), (axis,), np.int64)],
        temps=_temps,
        what=f"the sorted axis {axis}",
    )


@implements("take_along_axis")
def take_along_axis(x: Any, indices: Any, /, *, axis: int = -1) -> Any:
    if x.ndim != indices.ndim:
        raise ValueError(
            f"x and indices must have the same number of dimensions, got {x.ndim} and "
            f"{indices.ndim} (take_along_axis)"
        )
    axis = norm_axis(axis, x.ndim, "take_along_axis")
    others = [a for a in range(x.ndim) if a != axis]
    batch = np.broadcast_shapes(
        tuple(x.shape[a] for a in others), tuple(indices.shape[a] for a in others)
    )
    shape = list(batch)
    shape.insert(axis, indices.shape[axis])
    f = functools.partial(_take_block, axis=axis)
    return core_apply(
        "take_along_axis",
        f,
        [x, indices],
        [(axis,), (axis,)],
        [Out(tuple(shape), (axis,), x.dtype)],
        temps=lambda ins, outs: 8 * math.prod(outs[0][0]),
        what=f"axis {axis}",
    )


def _take_block(x: np.ndarray, indices: np.ndarray, axis: int) -> np.ndarray:
    return np.take_along_axis(x, indices, axis=axis)
