"""What the layers share: the namespace of their inputs, reductions, argument checks, and the
fused rows of the table reached from any namespace."""

from __future__ import annotations

import math
from typing import Any

import array_api_compat
import numpy as np

from ..namespace._array import Array


def _ns(*xs: Any) -> Any:
    first = xs[0] if xs else None
    if isinstance(first, Array) and (len(xs) == 1 or all(type(x) is type(first) for x in xs[1:])):
        return first._ns  # ours, of one namespace: its namespace (array_namespace's answer)
    return array_api_compat.array_namespace(*xs)


def _real_floating(xp: Any, x: Any) -> bool:
    """``xp.isdtype(x.dtype, "real floating")``; for an array of ours, from its namespace's set
    of those dtypes (no call: an activation asks on every forward)."""
    kinds = getattr(xp, "_real_floating", None) if isinstance(x, Array) else None
    if kinds is not None:
        return x._data.dtype in kinds
    return bool(xp.isdtype(x.dtype, "real floating"))


def _reduce(loss: Any, reduction: str, where: str) -> Any:
    xp = _ns(loss)
    if reduction == "mean":
        return xp.mean(loss)
    if reduction == "sum":
        return xp.sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f"{where}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _check_target(where: str, pred: Any, target: Any, target_is: str, pred_is: str) -> None:
    """Refuse a target that does not broadcast to the predictions' shape: predictions (n,)
    against a target (n, 1) broadcast to (n, n), whose mean is not the loss of each prediction
    (PyTorch warns or raises there too). ``target_is``, ``pred_is``: how the message names
    them ("the target's shape", "the predictions' shape")."""
    shape = tuple(getattr(pred, "shape", ()))
    given = getattr(target, "shape", None)
    if given is None or None in shape or None in tuple(given):  # a number; unknown sizes
        return
    given = tuple(given)
    try:
        both: tuple | None = tuple(np.broadcast_shapes(shape, given))
    except ValueError:
        both = None
    if both != shape:
        together = f" (together they broadcast to {both})" if both is not None else ""
        hint = f"; reshape it to {shape}" if math.prod(given) == math.prod(shape) else ""
        raise ValueError(
            f"{where}: {target_is} {given} does not broadcast to {pred_is} {shape}{together}{hint}"
        )


def _pair(v: Any, n: int) -> tuple[int, ...]:
    return tuple(v) if isinstance(v, tuple | list) else (v,) * n


def _row(xp: Any, name: str) -> Any:
    """Row ``name`` of ``xp``: ours have it (recorded); a raw namespace runs the row's impl."""
    f = getattr(xp, name, None)
    if f is not None:
        return f
    from .._primitive import REGISTRY

    impl = REGISTRY[name].impl
    assert impl is not None  # the fused nn rows all have one
    return lambda *args, **kwargs: impl(xp, *args, **kwargs)


def _ints(v: Any, n: int, what: str, fname: str, least: int = 0) -> tuple[int, ...]:
    """``v`` as ``n`` ints of at least ``least`` (one int: all alike), or a ValueError naming
    ``fname``."""
    t = tuple(v) if isinstance(v, tuple | list) else (v,) * n
    if len(t) != n or not all(isinstance(i, int | np.integer) and i >= least for i in t):
        kind = "a positive int" if least else "a non-negative int"
        raise ValueError(f"{fname}: {what} must be {kind} or {n} of them; got {v!r}")
    return tuple(int(i) for i in t)
