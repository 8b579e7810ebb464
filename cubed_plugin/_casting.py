"""Data stored in a narrower dtype than the tasks compute in, cast per chunk inside each task.

Reading is what bounds an epoch of one-pass mode, so data stored in half the bytes (float16
features, uint8 images) trains faster. The tasks compute in the parameters' floating dtype (the
*compute dtype*): a data argument is cast to it, one chunk (or one row slice) at a time, inside
the task that reads it, when

- its dtype is a floating dtype the Array API standard does not have (float16: NumPy computes in
  it, but neither pycograd_xp nor the projections do, and it is never what a user trains in), or
- the row loss declares it cast (``row_loss(..., cast=(0,))``: integer-coded features such as
  uint8 images; integer labels and token ids are left alone unless declared).

A task then holds the stored chunk (counted by Cubed, and by ``steps.READ_COPIES`` for the read)
and its cast copy in the compute dtype, counted in the task's projection: the step is projected
on data specs of the compute dtype (``pycograd_xp.memory`` counts its inputs). Graph mode casts
the same arguments lazily (``astype`` in the plan, fused into the tasks that read them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import pycograd_xp as pg
from pycograd_xp.memory import Spec

__all__ = ["StoredSpec", "casts", "compute_dtype", "stored_spec"]

# the floating dtypes the standard has (and pycograd_xp computes in)
_STANDARD_FLOATS = ("float32", "float64")


def compute_dtype(params: Any) -> np.dtype:
    """The dtype the tasks compute in: NumPy's promotion of the parameters' floating dtypes
    (float64 when none is floating)."""
    dtypes = [
        np.dtype(str(getattr(leaf, "dtype", "float64"))) for leaf in pg.tree_flatten(params)[0]
    ]
    floats = [d for d in dtypes if d.kind == "f"]
    return np.result_type(*floats) if floats else np.dtype(np.float64)


def _declared(loss: Any, n: int) -> tuple[int, ...]:
    declared = tuple(getattr(loss, "cast", ()) or ())
    for i in declared:
        if not -n <= i < n:
            raise ValueError(
                f"row_loss: cast={declared} names data argument {i}, but the loss is given "
                f"{n} data argument{'s' * (n != 1)}; give the positions of the data arguments "
                "(0 for the first after the parameters)"
            )
    return tuple(i % n for i in declared)


def casts(loss: Any, params: Any, dtypes: Sequence[Any]) -> tuple[np.dtype | None, ...]:
    """For each data argument of dtype ``dtypes[i]``: the compute dtype it is cast to in each
    task, or None (computed as stored)."""
    target = compute_dtype(params)
    declared = _declared(loss, len(dtypes))
    out: list[np.dtype | None] = []
    for i, d in enumerate(dtypes):
        dt = np.dtype(str(d))
        narrow = dt.kind == "f" and dt.name not in _STANDARD_FLOATS
        out.append(target if (narrow or i in declared) and dt != target else None)
    return tuple(out)


def held_while_cast(data: Sequence[Any], targets: Sequence[np.dtype | None]) -> int:
    """The bytes a task that casts holds beyond what its projection counted before casts: one
    stored chunk of each cast argument. A task's projection counts Cubed's two copies of each
    input chunk plus the step's projection, whose input is the chunk itself, three in all, as
    reading a stored chunk takes (``steps.READ_COPIES``: compressed bytes, decoded buffer,
    chunk; the freed buffers stay in the worker's heap). With a cast, the step's input is the
    copy in the compute dtype, so the chunk it is made from is held besides (measured: float16
    chunks of 20 MB held 95 MB over the worker's start, projected 84 MB without this)."""
    total = 0
    for x, dt in zip(data, targets, strict=True):
        if dt is not None:
            rows = max(x.chunks[0]) if x.chunks and x.chunks[0] else 1
            total += int(
                rows * int(np.prod(x.shape[1:], dtype=np.int64)) * np.dtype(x.dtype).itemsize
            )
    return total


def cast_chunk(chunk: Any, dtype: np.dtype | None) -> Any:
    """``chunk`` (a NumPy array) in ``dtype`` (a copy), or itself for None."""
    return chunk if dtype is None else np.asarray(chunk).astype(dtype)


class StoredSpec(Spec):
    """A data :class:`~pycograd_xp.memory.Spec` of a storage dtype the tasks cast from (float16):
    plans stand in for it with a stored array of that dtype; it is never an input of
    ``pycograd_xp.memory.project`` itself (only its cast is)."""

    __slots__ = ()

    def __init__(self, shape: tuple[int, ...], dtype: Any, chunks: Any = None) -> None:
        self.shape, self.dtype, self.chunks = tuple(shape), np.dtype(str(dtype)), chunks

    def __repr__(self) -> str:
        return "stored_" + super().__repr__()


def stored_spec(shape: Sequence[int], dtype: Any, chunks: Any = None) -> Spec:
    """A spec of data stored as ``dtype``: ``pycograd_xp.memory.spec`` for the standard's
    dtypes, a :class:`StoredSpec` for float16."""
    dt = np.dtype(str(dtype))
    if dt.kind == "f" and dt.name not in _STANDARD_FLOATS:
        return StoredSpec(tuple(shape), dt, chunks)
    return Spec(tuple(int(s) for s in shape), dt, chunks)


def cast_lazily(x: Any, dtype: np.dtype | None) -> Any:
    """A Cubed array ``x`` cast to ``dtype`` in the plan (None: ``x``)."""
    if dtype is None:
        return x
    import cubed

    return cubed.astype(x, dtype)
