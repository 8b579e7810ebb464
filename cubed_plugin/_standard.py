"""Functions of the standard that Cubed 0.27 has, completed where it lacks one of their options.

- ``cumulative_sum`` and ``cumulative_prod``: ``include_initial=True`` (Cubed raises
  ``NotImplementedError``; the VJPs of ``take``, ``take_along_axis``, ``prod`` and ``repeat`` use
  it): Cubed's scan, then the identity slice joined in front, chunked like the scan's output.
  ``axis=None`` on a 1-D array (the standard's default; Cubed raises ``TypeError``). Cubed's
  scan fails (an ``AssertionError``) unless the axis has at most 5 blocks or a multiple of 5
  at every level of its merge: the axis is first rechunked to the nearest such number of
  blocks (chunks at most twice as long).
- ``conj`` and ``real`` of a real or integer array are the array, ``imag`` its zeros (the
  standard's take every numeric dtype; Cubed's only complex ones: the VJP of ``vecdot``
  conjugates its real operands).
- ``var`` and ``std`` of a 0-d array (Cubed raises ``IndexError``).
- ``concat(..., axis=None)`` (wrong values), ``diff`` with ``prepend``/``append`` chunked
  otherwise than ``x`` (refused), ``repeat`` with an array of repeats (refused; read as data
  when applied, as an index array).
- ``vecdot`` conjugates its first operand, as the standard's (Cubed 0.27's does not).
- ``searchsorted`` with ``sorter`` (Cubed 0.27 refuses it).
- ``argmax``/``argmin`` with ``axis=None`` (Cubed's flattening leaves chunks its reduction
  refuses); ``repeat`` along a negative axis (a result of the wrong rank).
- ``take`` and ``tensordot`` along negative axes (Cubed 0.27 read them as other axes: wrong
  values).
- ``roll``: ``axis=None`` (Cubed's flattened array had chunks its concat refused) and negative
  axes (its concat compared the wrong axes).

Each is registered against its row with :func:`cubed_plugin._blocks.implements`. Indexing
(``take`` and ``x[key]``) is :mod:`cubed_plugin._indexing`'s; ``reshape``
:mod:`cubed_plugin._reshape`'s.
"""

from __future__ import annotations

import copy
import math
from typing import Any

from ._blocks import implements
from ._indexing import _held, _joined, index, take
from ._reshape import _regularized, reshape


def _cumulative(
    fname: str, scan: Any, identity: int, x: Any, axis: Any, dtype: Any, include_initial: bool
) -> Any:
    import cubed

    if axis is None:
        if x.ndim != 1:
            raise ValueError(
                f"axis must be given for an array of {x.ndim} dimensions, got None ({fname}): "
                f"flatten first (reshape(x, (-1,))) to scan all the elements"
            )
        axis = 0
    if dtype is not None and x.dtype != dtype:  # sums in the wider dtype (Cubed 0.27 casts after)
        x = cubed.astype(x, dtype)
    if x.ndim:
        x = _scannable(x, axis % x.ndim)
    out = scan(x, axis=axis, dtype=dtype)
    if not include_initial:
        return out
    ax = axis % out.ndim
    shape = tuple(1 if a == ax else n for a, n in enumerate(out.shape))
    chunks = tuple(1 if a == ax else c for a, c in enumerate(out.chunksize))
    first = cubed.full(shape, identity, dtype=out.dtype, chunks=chunks, spec=out.spec)
    # one chunk of length 1 in front: Cubed's concat is exact with a one-chunk operand no
    # longer than the others' chunks
    return cubed.concat([first, out], axis=ax)


def _scan_blocks_ok(nb: int) -> bool:
    """Whether Cubed 0.27's scan takes ``nb`` blocks along the axis: it merges the blocks' totals
    five at a time and asserts (``increment.shape[axis] == scanned.numblocks[axis]``) unless
    each level has at most five blocks or a multiple of five."""
    while nb > 5:
        if nb % 5:
            return False
        nb //= 5
    return True


def _scannable(x: Any, axis: int) -> Any:
    """``x`` rechunked along ``axis`` to the smallest chunk at least as large as its own whose
    number of blocks Cubed's scan takes (at most twice as large: 1 to 5 times a power of 5
    blocks are taken)."""
    import cubed

    n, c = x.shape[axis], max(x.chunks[axis])
    if n == 0 or _scan_blocks_ok(len(x.chunks[axis])):
        return x
    while not _scan_blocks_ok(-(-n // c)):
        c += 1
    return cubed.rechunk(x, tuple(c if a == axis else s for a, s in enumerate(x.chunksize)))


@implements("cumulative_sum")
def cumulative_sum(
    x: Any, /, *, axis: int | None = None, dtype: Any = None, include_initial: bool = False
) -> Any:
    import cubed

    return _cumulative("cumulative_sum", cubed.cumulative_sum, 0, x, axis, dtype, include_initial)


@implements("cumulative_prod")
def cumulative_prod(
    x: Any, /, *, axis: int | None = None, dtype: Any = None, include_initial: bool = False
) -> Any:
    import cubed

    return _cumulative("cumulative_prod", cubed.cumulative_prod, 1, x, axis, dtype, include_initial)


@implements("conj")
def conj(x: Any, /) -> Any:
    import cubed

    if cubed.isdtype(x.dtype, "complex floating"):
        return cubed.conj(x)
    if not cubed.isdtype(x.dtype, "numeric"):
        raise TypeError(f"conj takes a numeric array, got dtype {x.dtype}")
    return x


def _moment(fn: Any, x: Any, axis: Any, correction: Any, keepdims: bool) -> Any:
    import cubed

    if x.ndim == 0:  # Cubed 0.27's combine step indexes an axis a 0-d array lacks
        return _moment(fn, cubed.reshape(x, (1,)), 0, correction, False)
    axes = range(x.ndim) if axis is None else axis if isinstance(axis, tuple | list) else (axis,)
    if len(axes) == 0:  # each element its own sample (Cubed 0.27's combine indexes axes[0])
        d = x - x  # NaN where x is infinite or NaN, as NumPy's deviation from the mean
        v = d * d / (1.0 - correction) if correction < 1 else d * d / 0.0
        return cubed.sqrt(v) if fn is cubed.std else v
    n = math.prod(x.shape[a] for a in axes)
    if n - correction > 0:
        return fn(x, axis=axis, correction=correction, keepdims=keepdims)
    # no degree of freedom left: NumPy's sum of squares over max(n - correction, 0), inf (NaN
    # where the squares sum to 0, or n is 0); Cubed 0.27 divides by the negative count
    v = cubed.var(x, axis=axis, correction=0, keepdims=keepdims) * n / 0.0
    return cubed.sqrt(v) if fn is cubed.std else v


@implements("var")
def var(x: Any, /, *, axis: Any = None, correction: float = 0.0, keepdims: bool = False) -> Any:
    import cubed

    return _moment(cubed.var, x, axis, correction, keepdims)


@implements("std")
def std(x: Any, /, *, axis: Any = None, correction: float = 0.0, keepdims: bool = False) -> Any:
    import cubed

    return _moment(cubed.std, x, axis, correction, keepdims)


@implements("vecdot")
def vecdot(x1: Any, x2: Any, /, *, axis: int = -1) -> Any:
    """The standard's ``vecdot``, which conjugates ``x1``: Cubed 0.27's does not (complex results
    were wrong)."""
    import cubed

    return cubed.vecdot(conj(x1), x2, axis=axis)


@implements("real")
def real(x: Any, /) -> Any:
    import cubed

    if cubed.isdtype(x.dtype, "complex floating"):
        return cubed.real(x)
    if not cubed.isdtype(x.dtype, "numeric"):
        raise TypeError(f"real takes a numeric array, got dtype {x.dtype}")
    return x


@implements("imag")
def imag(x: Any, /) -> Any:
    import cubed

    if cubed.isdtype(x.dtype, "complex floating"):
        return cubed.imag(x)
    if not cubed.isdtype(x.dtype, "numeric"):
        raise TypeError(f"imag takes a numeric array, got dtype {x.dtype}")
    return cubed.zeros_like(x)


@implements("broadcast_to")
def broadcast_to(x: Any, /, shape: tuple[int, ...], *, chunks: Any = None) -> Any:
    """Cubed's ``broadcast_to``; with ``chunks=``, ``x`` is first rechunked along its axes that
    are kept (not of length 1) to those chunks (Cubed refuses other chunks there: "cannot
    broadcast chunks"), and irregular ``chunks`` become regular ones of their largest size."""
    import cubed

    from ._cubed_seam import normalize_chunks

    shape = tuple(shape)
    if chunks is None or len(shape) < x.ndim:
        return cubed.broadcast_to(x, shape, chunks=chunks)
    sizes = tuple(max(c) if c else 1 for c in normalize_chunks(chunks, shape, dtype=x.dtype))
    new = len(shape) - x.ndim
    kept = tuple(
        sizes[new + i] if n == shape[new + i] and n > 1 else max(x.chunks[i], default=1)
        for i, n in enumerate(x.shape)
    )
    if x.ndim and tuple(max(c, default=1) for c in x.chunks) != kept:
        x = cubed.rechunk(x, kept)
    elif x.ndim and any(len(set(c[:-1])) > 1 or c[-1] > c[0] for c in x.chunks):
        x = cubed.rechunk(x, kept)  # irregular: regular chunks of the same size
    return cubed.broadcast_to(x, shape, chunks=sizes)


def _arg_reduction(fn: Any, x: Any, axis: Any, keepdims: bool) -> Any:
    """``fn`` (Cubed's argmax or argmin) with ``axis=None`` over the array flattened by
    :func:`reshape` (Cubed 0.27 flattens with its own reshape, whose irregular chunks its
    reduction then refuses: "Array must have regular chunks")."""
    if axis is not None or x.ndim <= 1:
        return fn(x, axis=axis, keepdims=keepdims)
    out = fn(reshape(x, (-1,)), axis=0)
    return reshape(out, (1,) * x.ndim) if keepdims else out


@implements("argmax")
def argmax(x: Any, /, *, axis: int | None = None, keepdims: bool = False) -> Any:
    import cubed

    return _arg_reduction(cubed.argmax, x, axis, keepdims)


@implements("argmin")
def argmin(x: Any, /, *, axis: int | None = None, keepdims: bool = False) -> Any:
    import cubed

    return _arg_reduction(cubed.argmin, x, axis, keepdims)


@implements("tensordot")
def tensordot(x1: Any, x2: Any, /, *, axes: Any = 2) -> Any:
    """Cubed's ``tensordot`` with the contracted axes made non-negative: Cubed 0.27 sums the
    product over the axes as given, and a negative one named the wrong axis (wrong values)."""
    import cubed

    from ._blocks import norm_axis

    if isinstance(axes, int):
        return cubed.tensordot(x1, x2, axes=axes)
    a1, a2 = axes
    a1 = (a1,) if isinstance(a1, int) else tuple(a1)
    a2 = (a2,) if isinstance(a2, int) else tuple(a2)
    a1 = tuple(norm_axis(a, x1.ndim, "tensordot") for a in a1)
    a2 = tuple(norm_axis(a, x2.ndim, "tensordot") for a in a2)
    return cubed.tensordot(x1, x2, axes=(a1, a2))


@implements("roll")
def roll(x: Any, /, shift: Any, *, axis: Any = None) -> Any:
    """Cubed's ``roll`` on regular chunks and non-negative axes: Cubed 0.27 rolls ``axis=None``
    on a flattened array whose chunks its own concat then refuses ("Array must have regular
    chunks"), and joins the two parts with a concat that compares the wrong axes for a negative
    axis. Here ``axis=None`` flattens and restores the shape with :func:`reshape`, the axes are
    made non-negative, and irregular chunks regular."""
    import cubed

    from ._blocks import norm_axis

    if axis is None:
        if not isinstance(shift, int):
            raise TypeError(f"roll without an axis takes one int shift, got {shift!r}")
        flat = reshape(x, (-1,))
        return reshape(cubed.roll(flat, shift, axis=0), tuple(x.shape))
    axes = tuple(
        norm_axis(a, x.ndim, "roll") for a in (axis if isinstance(axis, tuple) else (axis,))
    )
    return cubed.roll(_regularized(x), shift, axis=axes if isinstance(axis, tuple) else axes[0])


@implements("concat")
def concat(arrays: Any, /, *, axis: int | None = 0, chunks: Any = None) -> Any:
    """Cubed's ``concat`` (``chunks=``, Cubed's, chunks the result); ``axis=None`` joins the
    flattened arrays (Cubed 0.27 gave wrong values)."""
    import cubed

    if axis is None:
        return _joined([reshape(a, (-1,)) for a in arrays], 0)
    return cubed.concat(list(arrays), axis=axis, chunks=chunks)


@implements("diff")
def diff(x: Any, /, *, axis: int = -1, n: int = 1, prepend: Any = None, append: Any = None) -> Any:
    """Cubed's ``diff``, with ``prepend``/``append`` joined to ``x`` on one chunking first (Cubed
    0.27 refuses operands of other chunk sizes along the axis)."""
    import cubed

    if n == 0:  # x itself, prepend and append unread (NumPy's diff returns first)
        return x
    if prepend is not None or append is not None:
        ax = axis % x.ndim
        parts = [a for a in (prepend, x, append) if a is not None]
        # Cubed 0.27 cannot rechunk a part of no length along the axis: the others, joined
        # (where the parts' other axes disagree, Cubed's concat says so)
        kept = [a for a in parts if a.shape[ax] != 0] or parts[:1]
        x = _joined(kept, ax) if len(kept) > 1 else kept[0]
    # n past the axis' length: an empty result, as n equal to it (Cubed 0.27 fails on it)
    return cubed.diff(x, axis=axis, n=min(n, x.shape[axis % x.ndim]))


@implements("repeat")
def repeat(x: Any, repeats: Any, /, *, axis: int | None = None) -> Any:
    """Cubed's ``repeat``; an array of ``repeats`` (Cubed 0.27 takes a Python int only) is read
    as data when the repeat is applied, as Cubed reads an index array, and the elements are
    taken by index."""
    import cubed
    import numpy as np

    from ._blocks import norm_axis

    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    # Cubed 0.27 builds the result's shape from x.shape[:axis]: a negative axis gave a wrong rank
    axis = norm_axis(axis, x.ndim, "repeat")
    if not hasattr(repeats, "shape"):
        if repeats == 0:  # Cubed 0.27 divides by it: the result is empty along the axis
            return index(x, (slice(None),) * axis + (slice(0, 0),))
        return cubed.repeat(x, repeats, axis=axis)
    counts = _held(repeats)  # a constant's values without computing (a projection plans only)
    counts = np.asarray(counts.compute() if hasattr(counts, "compute") else counts)
    n = x.shape[axis]
    idx = np.repeat(np.arange(n), np.broadcast_to(counts, (n,)))
    return take(x, idx, axis=axis)


@implements("tile")
def tile(x: Any, repetitions: Any, /) -> Any:
    """Cubed's ``tile``, with a repetition of 0 (Cubed 0.27 skips every repetition under 2, so
    ``tile(x, (0, 1))`` gave ``x`` back where the result is empty along that axis)."""
    import cubed

    reps = tuple(int(r) for r in repetitions)
    if any(r < 0 for r in reps):
        raise ValueError(f"tile: repetitions must not be negative, got {reps}")
    if 0 in reps:
        d = max(x.ndim, len(reps))
        xs = (1,) * (d - x.ndim) + tuple(int(n) for n in x.shape)
        rs = (1,) * (d - len(reps)) + reps
        return cubed.zeros(
            tuple(a * b for a, b in zip(xs, rs, strict=True)), dtype=x.dtype, spec=x.spec
        )
    return cubed.tile(x, reps)


@implements("clip")
def clip(x: Any, /, min: Any = None, max: Any = None) -> Any:
    """Cubed's ``clip``, with a lower bound alone: Cubed 0.27 then calls NumPy's ``clip``
    without ``a_max``, which NumPy 2 refuses when the plan runs. The missing upper bound is
    the dtype's top (infinity for floating dtypes), which clips nothing."""
    import cubed

    if min is not None and max is None and not cubed.isdtype(x.dtype, "bool"):
        max = float("inf") if cubed.isdtype(x.dtype, "real floating") else cubed.iinfo(x.dtype).max
    return cubed.clip(x, min=min, max=max)


@implements("isin")
def isin(x1: Any, x2: Any, /, *, invert: bool = False) -> Any:
    """Cubed's ``isin``, with a Python scalar as either argument (the standard allows one; Cubed
    0.27 reads its ``ndim``): the scalar becomes a 0-d array of its own kind's default dtype
    (comparing values, not a cast of 3.5 to the integers' 3), on the other's Spec."""
    import cubed

    spec = getattr(x2, "spec", None) or getattr(x1, "spec", None)
    if not hasattr(x1, "ndim"):
        x1 = cubed.asarray(x1, spec=spec)
    if not hasattr(x2, "ndim"):
        x2 = cubed.asarray(x2, spec=spec)
    if x2.ndim == 0:  # Cubed 0.27 compares against no elements: one element, then
        x2 = cubed.reshape(x2, (1,))
    return cubed.isin(x1, x2, invert=invert)


@implements("from_dlpack")
def from_dlpack(x: Any, /, *, device: Any = None, copy: bool | None = None) -> Any:
    """A Cubed array of the values of an object with ``__dlpack__`` (Cubed 0.27 has no
    ``from_dlpack``): read through NumPy's, on the host (Cubed's device), as one array in
    memory that Cubed's default Spec chunks."""
    import cubed
    import numpy as np

    if device is not None and device != "cpu":
        raise ValueError(f"from_dlpack: Cubed arrays live on the CPU, not on {device!r}")
    if isinstance(x, cubed.Array):  # already a Cubed array (immutable: no copy needed)
        return x
    values = np.from_dlpack(x, copy=copy) if copy is not None else np.from_dlpack(x)
    return cubed.asarray(values)


@implements("linspace")
def linspace(
    start: Any,
    stop: Any,
    /,
    num: int,
    *,
    dtype: Any = None,
    device: Any = None,
    endpoint: bool = True,
) -> Any:
    """Cubed's ``linspace``, except ``num=0``: Cubed 0.27 gives a 0-d array, the standard an
    empty vector."""
    import cubed

    if num == 0:
        return cubed.empty((0,), dtype=dtype or cubed.float64, device=device)
    return cubed.linspace(start, stop, num, dtype=dtype, device=device, endpoint=endpoint)


@implements("searchsorted")
def searchsorted(x1: Any, x2: Any, /, *, side: str = "left", sorter: Any = None) -> Any:
    """Cubed's ``searchsorted``, with ``sorter`` (Cubed 0.27 refuses it): ``x1`` taken in the
    sorter's order first, which is what the sorter means."""
    import cubed

    from ._cubed_seam import default_spec, with_spec

    if sorter is not None:
        x1 = take(x1, sorter, axis=0)
    # Cubed 0.27 adds each block's offset from an array it makes without a Spec: on any other
    # Spec than its default it raises "Arrays must have same spec". The plan is built on the
    # default Spec, and its result given the operands' (Specs are labels on the same plan).
    # The relabelled operands are second handles on the same nodes (shallow copies): the
    # caller's arrays keep their Spec throughout, for another thread planning with them too.
    spec, default = x1.spec, default_spec()
    if spec == default:
        return cubed.searchsorted(x1, x2, side=side)
    out = cubed.searchsorted(
        with_spec(copy.copy(x1), default), with_spec(copy.copy(x2), default), side=side
    )
    return with_spec(out, spec)
