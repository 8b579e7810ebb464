"""Indexing functions (``__getitem__``/``__setitem__`` live on the Array class)."""

from __future__ import annotations

import inspect
from typing import Any

from .._primitive import Primitive, _register, primitive


@primitive()
def take(bk: Any, x: Any, indices: Any, /, *, axis: int | None = None) -> Any:
    return bk.take(x, indices, axis=axis)


@primitive()
def take_along_axis(bk: Any, x: Any, indices: Any, /, *, axis: int = -1) -> Any:
    return bk.take_along_axis(x, indices, axis=axis)


def method(name: str, *params: str) -> Primitive:
    """A row for an Array method of the standard (``__getitem__``, ``__setitem__``)."""
    P = inspect.Parameter
    sig = inspect.Signature([P(p, P.POSITIONAL_ONLY) for p in params])
    return _register(Primitive(name, "method", None, None, (), signature=sig))


GETITEM = method("__getitem__", "x", "key")
SETITEM = method("__setitem__", "x", "key", "value")
