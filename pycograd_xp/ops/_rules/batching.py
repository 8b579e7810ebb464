"""What batching rules share: ranks, alignment, axis shifts."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ...namespace._array import Array, make

# Why rows that take only Python values (a shape: empty, eye, fftfreq, ...) cannot batch.
SHAPE_ONLY = "it takes only Python values (a shape), never a batched array"


def batch_size(dims: Any, args: Any) -> int:
    """The batch size: axis 0 of the first batched argument (list arguments searched too)."""
    for d, a in zip(dims, args, strict=False):
        if d is True:
            return a.shape[0]
        if isinstance(d, list):
            for di, ai in zip(d, a, strict=True):
                if di:
                    return ai.shape[0]
    raise AssertionError("a batching rule was called with no batched argument")


def _rows(x: Any) -> tuple[int, int]:
    """A batched ``x``'s shape as one row an example: ``(batch, example size)``, each named
    (a reshape's -1 cannot be solved where a size is 0)."""
    return (x.shape[0], math.prod(x.shape[1:]))


def rank(x: Any, batched: bool) -> int:
    """Rank of one example of ``x`` (a Python scalar is rank 0)."""
    return getattr(x, "ndim", 0) - (1 if batched else 0)


def to_rank(ns: Any, x: Any, r: int) -> Any:
    """Batched ``x`` with ones inserted after the batch axis to make examples of rank ``r``."""
    have = x.ndim - 1
    if have >= r:
        return x
    return ns.reshape(x, (x.shape[0], *(1,) * (r - have), *x.shape[1:]))


def align(ns: Any, dims: Any, *xs: Any) -> list:
    """Elementwise operands aligned for broadcasting: batched ones padded to the common rank."""
    r = max(rank(x, d) for x, d in zip(xs, dims, strict=True))
    return [to_rank(ns, x, r) if d else x for x, d in zip(xs, dims, strict=True)]


def batched(ns: Any, x: Any, d: bool, n: int) -> Any:
    """``x`` with a batch axis of ``n`` (broadcast when it has none)."""
    if d:
        return x
    if not hasattr(x, "shape"):
        x = ns.asarray(x)
    return ns.broadcast_to(x, (n, *x.shape))


def norm_axis(a: int, nd: int) -> int:
    return a + nd if a < 0 else a


def shift(axis: Any, nd: int) -> Any:
    """An axis (int or tuple) of an example of rank ``nd``, as an axis of the batched array."""
    if isinstance(axis, tuple | list):
        return tuple(norm_axis(a, nd) + 1 for a in axis)
    return norm_axis(axis, nd) + 1


def all_axes(nd: int) -> tuple[int, ...]:
    """Every axis of an example of rank ``nd``, in the batched array."""
    return tuple(range(1, nd + 1))


def fn(ns: Any, name: str) -> Any:
    """The function ``name`` (dotted for extensions) of ``ns``."""
    scope, _, short = name.rpartition(".")
    return getattr(getattr(ns, scope) if scope else ns, short)


def pair_along_axis(name: str) -> Any:
    """The batching rule of a binary function ``name`` of ``axis`` (vecdot, linalg.cross): the
    operands aligned (a batched one padded to the common rank), and a non-negative axis, which
    counts within an example, counted from the end instead."""

    def rule(ns: Any, dims: Any, x1: Any, x2: Any, /, *, axis: int = -1) -> Any:
        r = max(rank(x, d) for x, d in zip((x1, x2), dims, strict=True))
        x1, x2 = align(ns, dims, x1, x2)
        return fn(ns, name)(x1, x2, axis=axis - r if axis >= 0 else axis)

    return rule


def constant_like(like: Array, make_data: Callable[[Any, dict], Any]) -> Array:
    """``make_data(bk, kwargs)``: a new constant of the backend's own namespace ``bk`` made to
    belong with array ``like`` (``kwargs``: its Spec on Cubed), as an array of the lowest vmap
    level (higher levels take it in unbatched). Transforms and batching rules make their
    constants (identities, positions, grids) here."""
    while like._backend.level:  # inside vmap: down to the backend's own array
        like = like._data.data
    kw = like._backend.like_kwargs
    return make(type(like), make_data(like._backend.xp, kw(like._data) if kw else {}))


def reduction(row: Any) -> Any:
    """The batching rule of a reduction: its axes shifted past the batch axis (axis=None:
    every axis of an example)."""
    name = row.name

    def rule(ns: Any, dims: Any, x: Any, /, *, axis: Any = None, **kw: Any) -> Any:
        nd = x.ndim - 1
        return fn(ns, name)(x, axis=all_axes(nd) if axis is None else shift(axis, nd), **kw)

    return rule


def flat_reduction(row: Any, *, flattens: bool = True) -> Any:
    """The batching rule of a row whose axis=None means "the flattened array" (argmax,
    cumulative_sum). ``flattens=False``: the row flattens no example of more than one axis
    (the scans refuse it), so neither does its batching."""
    name = row.name

    def rule(ns: Any, dims: Any, x: Any, /, *, axis: Any = None, **kw: Any) -> Any:
        nd = x.ndim - 1
        if axis is not None:
            return fn(ns, name)(x, axis=shift(axis, nd), **kw)
        if nd > 1 and not flattens:  # as one example's call refuses
            raise ValueError(
                f"{name}(): axis must be given for an array of {nd} dimensions, got None; "
                "flatten first (reshape(x, (-1,))) to scan all the elements"
            )
        r = fn(ns, name)(ns.reshape(x, _rows(x)), axis=1, **kw)
        if kw.get("keepdims"):
            r = ns.reshape(r, (x.shape[0], *(1,) * nd))
        return r

    return rule
