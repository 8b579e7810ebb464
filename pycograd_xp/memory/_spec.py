"""``spec``: the shape, dtype and chunks of an array that is not there (what ``project`` and
the optimizers' ``init`` take instead of data)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._abstract import DTYPE_NAMES


class Spec:
    """An abstract argument: a shape and a dtype (and, for chunked backends, chunks).

    A leaf of pytrees (not a dataclass, which pytrees would open). Made by :func:`spec`.

    Parameters
    ----------
    shape : tuple of int
        The shape.
    dtype : dtype or str, default "float64"
        Stored as a NumPy dtype (any dtype :func:`spec` takes).
    chunks : optional
        The chunks, for a chunked backend (Cubed).
    """

    __slots__ = ("shape", "dtype", "chunks")

    def __init__(self, shape: tuple[int, ...], dtype: Any = "float64", chunks: Any = None):
        self.shape, self.dtype, self.chunks = shape, _np_dtype(dtype, "Spec"), chunks

    def __repr__(self) -> str:
        tail = f", chunks={self.chunks}" if self.chunks is not None else ""
        return f"spec({self.shape}, {self.dtype.name}{tail})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Spec) and (self.shape, self.dtype, self.chunks) == (
            other.shape,
            other.dtype,
            other.chunks,
        )

    __hash__ = None  # type: ignore[assignment]

    @property
    def nbytes(self) -> int:
        """The bytes an array of this shape and dtype owns."""
        return math.prod(self.shape) * self.dtype.itemsize


def spec(shape: Sequence[int] | int, dtype: Any = "float64", chunks: Any = None) -> Spec:
    """An abstract argument of ``shape`` and ``dtype`` for
    :func:`~pycograd_xp.memory.project`: nothing is allocated.

    Parameters
    ----------
    shape : int or sequence of int
        The shape (an int: one dimension).
    dtype : dtype, default "float64"
        Any dtype a user may hold: the namespace's own (``xp.float32``), NumPy's scalar types and
        dtypes (``np.float32``, ``np.dtype("float32")``), a name (``"float32"``), Python's
        ``float``, ``int``, ``complex`` and ``bool`` (float64, int64, complex128, bool), and the
        dtype objects of array-api-strict and Cubed; one of the standard's data types.
    chunks : optional
        The chunks, for a chunked backend (Cubed).

    Returns
    -------
    Spec
        The abstract argument.

    Raises
    ------
    ValueError
        If a dimension is negative.
    TypeError
        If ``dtype`` is not one of the standard's data types.
    """
    shape = (shape,) if isinstance(shape, int) else tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"spec: shape {shape} has a negative dimension")
    return Spec(shape, _np_dtype(dtype, "spec"), chunks)


def _dtype_name(dtype: Any) -> str:
    """The NumPy name of a dtype object of any backend (see :func:`spec`); remembered per
    dtype object (a budgeted step asks for each argument's on every call), keyed with its type
    too: array-api-strict's dtypes warn when compared with NumPy's equal-hashing ones."""
    key = (type(dtype), dtype)
    try:
        return _NAMES[key]
    except (KeyError, TypeError):  # (TypeError: a dtype object that does not hash)
        pass
    try:
        name = np.dtype(dtype).name  # NumPy's dtypes and scalar types, names, Python's types
    except (TypeError, ValueError):
        name = str(dtype).rsplit(".", 1)[-1]  # array_api_strict.float32, torch.float32
    try:
        if len(_NAMES) < 256:
            _NAMES[key] = name
    except TypeError:
        pass
    return name


_NAMES: dict[Any, str] = {}


def _np_dtype(dtype: Any, where: str) -> np.dtype:
    name = _dtype_name(dtype)
    if name not in DTYPE_NAMES:
        raise TypeError(
            f"{where}: {dtype!r} is not one of the standard's data types "
            f"({', '.join(DTYPE_NAMES)}); pass one as your namespace's dtype "
            "(xp.float32), a NumPy dtype or its name"
        )
    return np.dtype(name)
