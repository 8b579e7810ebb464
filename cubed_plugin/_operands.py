"""One Spec and compatible chunks for the operands of every Cubed call the rows make.

Cubed 0.27 trusts one operand's metadata for another in two places, and then refuses or, worse,
returns wrong numbers without an error:

- **Spec.** Every array of one computation must have an equal ``Spec``; a constant made without
  one (``eye(3)``, ``asarray(numpy_array)``, ``arange``, ``zeros``) has Cubed's default Spec,
  and meeting an array made with a user's Spec raises "Arrays must have same spec". Here a
  constant takes the Spec of the arrays it meets: where the operands of one call have two
  Specs and one of them is Cubed's default, the operands with the default are given the other
  (in place, so that a residual a VJP rule saved has it too when the rule later combines it
  with Cubed's operators; the data and the plan are unchanged). Two different Specs of a
  user's still raise Cubed's error.
- **Chunks.** (And ``concat`` along a negative axis compares the wrong axes: the axis is made
  non-negative first.) ``stack`` takes the first array's chunks for every input (values off, or
  ``IndexError`` later); ``concat`` reads the wrong blocks when operands' chunks along the axis
  differ. Before those (:data:`SAME_CHUNKS`), every operand is rechunked to one regular chunking:
  along each axis the smallest chunk size among the operands (what Cubed's own ``unify_chunks``
  picks for elementwise functions, which are already correct, as are ``matmul``, ``tensordot``,
  ``vecdot``, ``where``, ``take`` and what cubed_plugin adds: ``tests/test_cubed_operands.py``
  checks them on mixed chunkings).

:func:`aligned` wraps a backend function with both; :func:`cubed_plugin.namespace.augmented`
wraps every backend attribute a row calls (the rows' ``needs``), so the rows' forward calls and
their first-order VJP rules (which get this namespace) all pass through it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

# the backend functions whose Cubed implementation reads every operand with the chunks of the
# first (stack) or of its neighbour (concat): their operands get one chunking first
SAME_CHUNKS = frozenset({"stack", "concat"})


def aligned(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (the backend attribute ``name``), called with its Cubed operands on one Spec and,
    for :data:`SAME_CHUNKS`, on one chunking."""
    import cubed

    array = cubed.Array
    same_chunks = name.rpartition(".")[2] in SAME_CHUNKS
    concat = name == "concat"

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        found = _operands(array, args, kwargs)
        if found and any(a.size == 0 for a in found):
            # on one Spec first, as below (in place: the operands a VJP saved meet on it too)
            found = _one_spec(found)
            empty = _empty_result(name, found, args, kwargs)
            if empty is not None:
                return empty
            if concat:  # Cubed 0.27 cannot rechunk an empty operand: the others, joined
                args, found = _without_empty(args, kwargs.get("axis", 0), found)
        axis = kwargs.get("axis", 0)
        if concat and isinstance(axis, int) and axis < 0 and found:
            # Cubed 0.27's concat checks the other axes' lengths wrongly for a negative axis
            kwargs = {**kwargs, "axis": axis % max(found[0].ndim, 1)}
        if len(found) < 2:
            return fn(*args, **kwargs)
        new = _one_spec(found)
        if same_chunks:
            new = _one_chunking(new, kwargs.get("axis", 0) if concat else None)
        if new is found:
            return fn(*args, **kwargs)
        swap = {id(a): b for a, b in zip(found, new, strict=True)}
        return fn(*_swapped(args, swap), **{k: _swapped1(v, swap) for k, v in kwargs.items()})

    return call


def _without_empty(args: tuple, axis: Any, found: list) -> tuple[tuple, list]:
    """``concat``'s arguments without its operands of no elements, where those are of the
    others' rank and, off ``axis``, lengths (else unchanged: Cubed's own call says what is
    wrong); the others cast to the dtype all of them promote to."""
    import cubed

    arrays = list(args[0])
    kept = [a for a in arrays if a.size]
    if not kept or not isinstance(axis, int):
        return args, found
    nd = kept[0].ndim
    ax = axis % max(nd, 1)
    off = [tuple(n for i, n in enumerate(a.shape) if i != ax) for a in arrays]
    same = all(a.ndim == nd for a in arrays) and len(set(off)) == 1
    if not same:
        return args, found
    dtype = cubed.result_type(*arrays)  # an empty operand's dtype still promotes the result's
    kept = [a if a.dtype == dtype else cubed.astype(a, dtype) for a in kept]
    return (kept, *args[1:]), kept


# The most elements the operands with elements of a call with an empty one may hold for
# :func:`_empty_result` to ask NumPy (beyond it, Cubed's own call: NumPy would allocate them).
STAND_IN_LIMIT = 1 << 20


def _empty_result(name: str, found: list, args: tuple, kwargs: dict) -> Any:
    """The result of the backend function ``name`` where an operand holds no element and so
    does the result: Cubed's zeros of the shape and dtype NumPy's function gives on stand-ins
    of the operands (zeros for the empty ones; for the others their values where Cubed holds
    them, else two fillings, whose results must agree: values can decide a shape, as
    ``repeat``'s counts do). Cubed 0.27 fails on
    many such calls (``flip``, ``reshape``, ``roll``, ``take``, ``diff``, the scans: a division by
    a chunk count of 0, "Chunks and shape must be of the same length"). None where NumPy has no
    such function, refuses the call, or gives a result with elements (then Cubed's own call
    goes ahead). Where every operand is empty, a result with elements (a reduction of nothing)
    is NumPy's too: it depends on no value."""
    import array_api_compat.numpy as npx
    import cubed
    import numpy as np

    f: Any = npx
    for part in name.split("."):
        f = getattr(f, part, None)
    if not callable(f):
        return None
    from ._cubed_seam import held_values

    # an operand with elements may decide the result's shape (repeat's counts): its values where
    # Cubed holds them, else two fillings, which must agree
    held = {id(a): held_values(a) for a in found if a.size}
    if sum(a.size for a in found if held.get(id(a)) is None) > STAND_IN_LIMIT:
        return None  # (NumPy's answer could allocate what the chunked array holds)
    fills = (0, 1) if any(v is None for v in held.values()) else (0,)
    results = []
    for fill in fills:
        stand = {  # (a filling is a broadcast view: no memory)
            id(a): np.asarray(held[id(a)])
            if held.get(id(a)) is not None
            else np.broadcast_to(np.asarray(fill, dtype=a.dtype), tuple(a.shape))
            for a in found
        }
        kw = {k: _swapped1(v, stand) for k, v in kwargs.items() if k not in ("chunks", "spec")}
        try:
            with np.errstate(all="ignore"):
                r = f(*_swapped(args, stand), **kw)
        except Exception:  # Cubed's own call says what is wrong
            return None
        parts = list(r) if isinstance(r, tuple) else [r]
        if not parts or any(not isinstance(p, np.ndarray) for p in parts):
            return None
        results.append(parts)
    if len(results) > 1 and not all(
        a.shape == b.shape and np.array_equal(a, b, equal_nan=True)
        for a, b in zip(*results, strict=True)
    ):
        return None  # the result depends on the values: Cubed's own call
    # a result with elements from operands of none (a norm or a sum of nothing) is NumPy's
    if any(p.size for p in parts) and any(a.size for a in found):
        return None
    spec = common_spec(found) or found[0].spec  # (a constant beside a user's Spec: the user's)
    out = [
        cubed.asarray(p, spec=spec) if p.size else cubed.zeros(p.shape, dtype=p.dtype, spec=spec)
        for p in parts
    ]
    if not isinstance(r, tuple):
        return out[0]
    return type(r)(*out) if hasattr(r, "_fields") else tuple(out)  # (a named tuple: eigh's)


def _operands(array: type, args: tuple, kwargs: dict) -> list:
    out = []
    for v in (*args, *kwargs.values()):
        if isinstance(v, array):
            out.append(v)
        elif isinstance(v, list | tuple):
            out.extend(a for a in v if isinstance(a, array))
    return out


def _swapped1(v: Any, swap: dict) -> Any:
    if isinstance(v, list | tuple) and not hasattr(v, "_fields"):
        return type(v)(swap.get(id(a), a) for a in v)
    return swap.get(id(v), v)


def _swapped(args: tuple, swap: dict) -> tuple:
    return tuple(_swapped1(v, swap) for v in args)


def common_spec(arrays: list) -> Any:
    """The Spec ``arrays`` meet on: theirs where they share one, else the one Spec among them
    that is not Cubed's default (an array made without a Spec beside a user's); None where
    two Specs of a user's meet (Cubed says so when they do)."""
    first = arrays[0].spec
    if all(a.spec == first for a in arrays):
        return first
    from ._cubed_seam import default_spec

    default = default_spec()
    others: list[Any] = []
    for a in arrays:
        if a.spec != default and all(a.spec != s for s in others):
            others.append(a.spec)
    return others[0] if len(others) == 1 else None


def _one_spec(arrays: list) -> list:
    """``arrays`` with those on Cubed's default Spec re-labelled with the one other Spec among
    them (unchanged when they share one, or when two Specs of a user's meet: Cubed says so)."""
    spec = common_spec(arrays)
    if spec is None or all(a.spec == spec for a in arrays):
        return arrays
    from ._cubed_seam import with_spec

    return [with_spec(a, spec) if a.spec != spec else a for a in arrays]


def _regular(size: int, chunk: int) -> tuple[int, ...]:
    if size == 0:
        return (0,)
    full, rest = divmod(size, chunk)
    return (chunk,) * full + ((rest,) if rest else ())


def _one_chunking(arrays: list, along: int | None = None) -> list:
    """``arrays`` (of one rank) rechunked where needed so that each has, along every axis, regular
    chunks of the smallest chunk size any of them has there; along the axis ``along`` that
    ``concat`` joins them, regular chunks of the smallest size among the operands with several
    chunks there, an operand of one chunk no longer than that size being left as it is (Cubed's
    concat is exact then; a short operand does not make the others' chunks small)."""
    import cubed

    ndim = arrays[0].ndim
    if any(a.ndim != ndim for a in arrays) or ndim == 0:
        return arrays  # Cubed's own error names the ranks
    if along is not None:
        along %= ndim
    sizes = []
    for ax in range(ndim):
        cs = [max(a.chunks[ax]) for a in arrays if a.shape[ax] > 0]
        if ax == along:
            several = [max(a.chunks[ax]) for a in arrays if len(a.chunks[ax]) > 1]
            cs = several or [max(cs, default=1)]
        sizes.append(max(1, min(cs)) if cs else 1)
    out, changed = [], False
    for a in arrays:
        want = tuple(_regular(a.shape[ax], sizes[ax]) for ax in range(ndim))
        have = tuple(a.chunks)
        if along is not None and len(have[along]) == 1 and a.shape[along] <= sizes[along]:
            want = want[:along] + (have[along],) + want[along + 1 :]
        if have != want:
            target = tuple(max(c, 1) for c in (max(w) for w in want))
            a = cubed.rechunk(a, target)
            changed = True
        out.append(a)
    return out if changed else arrays
