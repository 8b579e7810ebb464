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

from ..tree import tree_flatten, tree_leaves, tree_unflatten

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
    leaves, td = tree_flatten((args, kwargs))
    found: list[Any] = [a for a in leaves if isinstance(a, array_type)]
    if not any(math.prod(a.shape) == 0 for a in found):
        return None
    if sum(math.prod(a.shape) for a in found) > LIMIT:
        return None
    from ..namespace import namespace

    ns = namespace(np)
    row = getattr(ns, name, None)
    if row is None:
        return None
    trees: list[Any] = []
    try:
        for seed in (0, 1):
            rng = np.random.default_rng(seed)
            stand = [
                ns.asarray(_stand_in(a, rng, seed)) if isinstance(a, array_type) else a
                for a in leaves
            ]
            a, kw = tree_unflatten(td, stand)
            with np.errstate(all="ignore"):
                trees.append(row(*a, **kw))
    except Exception:  # NumPy refuses it too, a filling is not valid data, or a trace (compile,
        return None  # memory.project) holds the calls: the backend's own error stands
    first, second = ([_value(v) for v in tree_leaves(t)] for t in trees)
    if len(first) != len(second) or not all(
        a.shape == b.shape and np.array_equal(a, b, equal_nan=True)
        for a, b in zip(first, second, strict=True)
    ):
        return None
    like = like_kwargs(*found) if like_kwargs is not None else {}
    out, out_td = tree_flatten(trees[0])
    return tree_unflatten(
        out_td,
        [
            bk.asarray(v, **like) if v.size else bk.zeros(v.shape, dtype=v.dtype, **like)
            for v in map(_value, out)
        ],
    )


def _value(v: Any) -> np.ndarray:
    """The NumPy data of a leaf of the NumPy namespace's result."""
    return np.asarray(getattr(v, "_data", v))


def _stand_in(a: Any, rng: np.random.Generator, seed: int) -> np.ndarray:
    dtype = np.dtype(a.dtype)
    shape = tuple(int(n) for n in a.shape)
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return np.full(shape, seed, dtype=dtype)  # integers and booleans: 0, then 1 (True)


# -- rules over arrays of no elements ------------------------------------------------------------
# A derivative rule on a chunked backend calls the backend's own operators (``g * x2``, ``a @ b``),
# which Cubed 0.27 fails on chunked operands with an empty axis (its rechunk: "Invalid chunk_limits
# (4, 0)"). Where no tangent can flow, the rule's answer is known without it; forward mode asks
# these after a rule raised (no cost on the path where it does not; the tape's VJPs do likewise,
# _tape._parents_empty).


def no_flow_forward(out: Any, tangents: Any) -> bool:
    """Whether no tangent reaches ``out`` (a JVP's output): it holds no element, or every
    tangent given does."""
    outs = out if isinstance(out, tuple) else (out,)
    if all(math.prod(getattr(o, "shape", ())) == 0 for o in outs):
        return True
    given = [t for ts in tangents if ts is not None for t in (ts if isinstance(ts, list) else [ts])]
    return all(t is None or math.prod(t.shape) == 0 for t in given)


def zero_tangents(ops: Any, out: Any, like_kwargs: Any) -> Any:
    """Zero tangents of ``out``'s shapes and dtypes (None for an output that is not floating)."""

    def zero(o: Any) -> Any:
        if not ops.isdtype(o.dtype, ("real floating", "complex floating")):
            return None
        return ops.zeros(tuple(o.shape), dtype=o.dtype, **(like_kwargs(o) if like_kwargs else {}))

    return tuple(zero(o) for o in out) if isinstance(out, tuple) else zero(out)
