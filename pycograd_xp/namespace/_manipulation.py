"""Manipulation functions: they move, copy and reshape data without arithmetic."""

from __future__ import annotations

from typing import Any

from .._primitive import primitive


@primitive()
def broadcast_arrays(bk: Any, *arrays: Any) -> tuple[Any, ...]:
    return tuple(bk.broadcast_arrays(*arrays))


@primitive()
def broadcast_shapes(bk: Any, *shapes: Any) -> tuple[int, ...]:
    return tuple(bk.broadcast_shapes(*shapes))


@primitive()
def broadcast_to(bk: Any, x: Any, /, shape: Any) -> Any:
    return bk.broadcast_to(x, shape)


@primitive()
def concat(bk: Any, arrays: Any, /, *, axis: int | None = 0) -> Any:
    return bk.concat(arrays, axis=axis)


@primitive()
def expand_dims(bk: Any, x: Any, /, axis: Any) -> Any:
    return bk.expand_dims(x, axis=axis)


@primitive(axis_check=True)
def flip(bk: Any, x: Any, /, *, axis: Any = None) -> Any:
    return bk.flip(x, axis=axis)


@primitive()
def moveaxis(bk: Any, x: Any, source: Any, destination: Any, /) -> Any:
    return bk.moveaxis(x, source, destination)


@primitive()
def permute_dims(bk: Any, x: Any, /, axes: Any) -> Any:
    return bk.permute_dims(x, axes)


@primitive()
def repeat(bk: Any, x: Any, repeats: Any, /, *, axis: int | None = None) -> Any:
    return bk.repeat(x, repeats, axis=axis)


@primitive()
def reshape(bk: Any, x: Any, /, shape: Any, *, copy: bool | None = None) -> Any:
    return bk.reshape(x, shape, copy=copy)


@primitive(axis_check=True)
def roll(bk: Any, x: Any, /, shift: Any, *, axis: Any = None) -> Any:
    return bk.roll(x, shift, axis=axis)


@primitive()
def squeeze(bk: Any, x: Any, /, axis: Any) -> Any:
    return bk.squeeze(x, axis=axis)


@primitive()
def stack(bk: Any, arrays: Any, /, *, axis: int = 0) -> Any:
    return bk.stack(arrays, axis=axis)


@primitive()
def tile(bk: Any, x: Any, repetitions: Any, /) -> Any:
    return bk.tile(x, repetitions)


@primitive(axis_check=True)
def unstack(bk: Any, x: Any, /, *, axis: int = 0) -> tuple[Any, ...]:
    return tuple(bk.unstack(x, axis=axis))
