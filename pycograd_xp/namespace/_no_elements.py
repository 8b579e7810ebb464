"""A row's call on a chunked backend (Cubed) where an operand holds no element.

Cubed 0.27 fails on many calls with an array of no elements ("Invalid chunk_limits", "Chunks
and shape must be of the same length": its rechunking and its block plans divide by a chunk
count of 0), where NumPy answers. Such a call's result is read off NumPy, without computing
anything of the plan: the same row is run on NumPy stand-ins of the operands (zeros of each
empty operand's shape, and two different fillings of each operand with elements). Where every
output holds no element, or the two runs agree (the result does not depend on the values of
the operands with elements: a product over an empty axis, a reduction of nothing), that value
is the result, made a constant of the backend beside the operands. Otherwise the result
depends on values only the plan has, and the backend's own error stands.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

# at most this many elements in the operands with elements: a larger one is not copied into a
# stand-in (the backend's error stands)
LIMIT = 1 << 16


def no_elements(
    name: str, array_type: type, like_kwargs: Any, bk: Any, args: tuple, kwargs: dict
) -> Any:
    """The result of row ``name`` on ``args`` and ``kwargs`` (backend arrays of
    ``array_type`` among them) read off NumPy, or None where no operand is empty, an operand
    with elements is larger than :data:`LIMIT`, NumPy refuses the call, or the result depends
    on the operands' values."""
    found: list[Any] = []
    _walk((args, kwargs), array_type, found)
    if not any(math.prod(a.shape) == 0 for a in found):
        return None
    if sum(math.prod(a.shape) for a in found) > LIMIT:
        return None
    from ..namespace import namespace

    ns = namespace(np)
    row = getattr(ns, name, None)
    if row is None:
        return None
    runs = []
    try:
        for seed in (0, 1):
            rng = np.random.default_rng(seed)
            stand = {id(a): ns.asarray(_stand_in(a, rng, seed)) for a in found}
            with np.errstate(all="ignore"):
                runs.append(row(*_swapped(args, stand), **_swapped(kwargs, stand)))
        first, second = (_datas(r) for r in runs)
    except Exception:  # NumPy refuses it too, a filling is not valid data, or a trace (compile,
        return None  # memory.project) holds the calls: the backend's own error stands
    if len(first) != len(second) or not all(
        a.shape == b.shape and np.array_equal(a, b, equal_nan=True)
        for a, b in zip(first, second, strict=True)
    ):
        return None
    kw = like_kwargs(found[0]) if like_kwargs is not None else {}

    def made(v: Any) -> Any:
        if v.size == 0:
            return bk.zeros(v.shape, dtype=v.dtype, **kw)
        return bk.asarray(v, **kw)

    return _rebuilt(runs[0], made)


def _walk(v: Any, array_type: type, out: list) -> None:
    if isinstance(v, array_type):
        out.append(v)
    elif isinstance(v, list | tuple):
        for e in v:
            _walk(e, array_type, out)
    elif isinstance(v, dict):
        for e in v.values():
            _walk(e, array_type, out)


def _swapped(v: Any, stand: dict) -> Any:
    if id(v) in stand:
        return stand[id(v)]
    if isinstance(v, list | tuple) and not hasattr(v, "_fields"):
        return type(v)(_swapped(e, stand) for e in v)
    if isinstance(v, dict):
        return {k: _swapped(e, stand) for k, e in v.items()}
    return v


def _stand_in(a: Any, rng: np.random.Generator, seed: int) -> np.ndarray:
    dtype = np.dtype(a.dtype)
    shape = tuple(int(n) for n in a.shape)
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return np.full(shape, seed, dtype=dtype)  # integers and booleans: 0, then 1 (True)


def _datas(r: Any) -> list[np.ndarray]:
    if isinstance(r, list | tuple):
        return [d for e in r for d in _datas(e)]
    return [np.asarray(getattr(r, "_data", r))]


def _rebuilt(r: Any, made: Any) -> Any:
    if isinstance(r, list | tuple):
        parts = [_rebuilt(e, made) for e in r]
        return type(r)(*parts) if hasattr(r, "_fields") else type(r)(parts)
    return made(np.asarray(getattr(r, "_data", r)))
