"""One NumPy call per block, over blocks that hold whole "core" axes.

The functions Cubed lacks (FFTs, sorts, small-matrix linear algebra) each need some axes whole
(the transformed axes, the sorted axis, the two matrix axes: the *core* axes) and are independent
along the others (the *batch* axes). :func:`core_apply` runs a NumPy function once per block of
such a layout, lazily, with Cubed's ``general_blockwise``:

- core axes become one chunk: inputs chunked along them are rechunked (a Cubed ``rechunk``, one
  extra pass through intermediate storage) when a block holding them whole fits in one task's
  memory;
- batch axes keep the inputs' chunking, halved where needed until one task's projected memory
  (Cubed's model: ``reserved_mem`` + input chunks + declared temporaries + output chunks, with the
  storage buffer copies) fits ``allowed_mem``;
- where no chunking fits (a core block alone is too large), :class:`NotImplementedError` says
  which axes must be whole and how much memory that needs.

The temporaries each function declares (``extra_projected_mem``) were measured with tracemalloc
and the process high-water mark on NumPy 2.4 (see each caller), and are upper bounds.

Each function Cubed's namespace gains is registered against its row with :func:`implements`
(``pycograd_xp._primitive.IMPLEMENTATIONS``, label ``"cubed"``), where
:func:`cubed_plugin.namespace.augmented` finds it and ``python -m pycograd_xp.ops --matrix`` shows
it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from pycograd_xp.namespace import REGISTRY

Shape = tuple[int, ...]
F = TypeVar("F", bound=Callable[..., Any])

# The label of Cubed's implementations in the table: Cubed's short name as a backend.
BACKEND = "cubed"


def implements(row: str) -> Callable[[F], F]:
    """Register the decorated function as Cubed's implementation of the backend call of the row
    named ``row`` (its key in the table: ``"linalg.inv"``, ``"sort"``). A row has at most one;
    a second raises."""
    return REGISTRY[row].implement(BACKEND)


@dataclass(frozen=True)
class Out:
    """One output of :func:`core_apply`: its full shape, its core axes (the others are the batch
    axes, in order, and must match the inputs' broadcast batch shape) and its dtype."""

    shape: Shape
    core: tuple[int, ...]
    dtype: Any


def norm_axis(axis: int, ndim: int, fname: str) -> int:
    if not -ndim <= axis < max(ndim, 1):
        raise ValueError(f"axis {axis} is out of range for {ndim} dimensions ({fname})")
    return axis % max(ndim, 1)


def _nbytes(shape: Shape, dtype: Any) -> int:
    return math.prod(shape) * np.dtype(dtype).itemsize


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


def _regular(size: int, chunk: int) -> tuple[int, ...]:
    """Regular chunks of ``chunk`` over ``size`` (Cubed's layout)."""
    if size == 0:
        return (0,)
    chunk = max(1, min(chunk, size))
    full, rest = divmod(size, chunk)
    return (chunk,) * full + ((rest,) if rest else ())


def _limits(spec: Any) -> tuple[int, int]:
    """(allowed_mem, reserved_mem) of ``spec``; allowed_mem 0 means no limit."""
    allowed = int(getattr(spec, "allowed_mem", 0) or 0)
    reserved = int(getattr(spec, "reserved_mem", 0) or 0)
    return allowed, reserved


def core_apply(
    fname: str,
    func: Callable[..., Any],
    inputs: Sequence[Any],
    cores: Sequence[tuple[int, ...]],
    outs: Sequence[Out],
    temps: Callable[[list[tuple[Shape, Any]], list[tuple[Shape, Any]]], int] | None = None,
    what: str = "",
) -> Any:
    """Apply ``func`` (NumPy blocks in, NumPy block(s) out) to blocks holding the core axes
    whole. ``cores[i]`` are the core axes of ``inputs[i]`` (non-negative); batch axes
    broadcast against each other right-aligned, as the standard broadcasts. ``temps(ins,
    outs)`` bounds the bytes ``func`` allocates besides its outputs, given the (shape, dtype) of
    one block of each input and output. Several outputs need their core axes trailing; they come
    back as a tuple of lazy arrays computed by one task per block. ``what`` names the core axes
    in error messages ("axis 1", "the two matrix axes")."""
    import cubed

    from ._cubed_seam import (
        ChunkKey,
        FunctionArgs,
        general_blockwise,
        projected_mem,
        rechunk_task_mem,
    )

    spec = inputs[0].spec
    if any(math.prod(x.shape) == 0 for x in inputs) or any(math.prod(o.shape) == 0 for o in outs):
        # nothing to compute or nothing to read: make the (empty, or from empty inputs) result
        # now, as Cubed does for constants
        if any(math.prod(x.shape) == 0 for x in inputs):
            r = func(*(np.empty(x.shape, dtype=x.dtype) for x in inputs))
            rs = r if len(outs) > 1 else (r,)
        else:
            rs = [np.empty(o.shape, dtype=o.dtype) for o in outs]
        arrs = tuple(
            cubed.asarray(np.asarray(a, dtype=o.dtype).reshape(o.shape), spec=spec)
            for a, o in zip(rs, outs, strict=True)
        )
        return arrs if len(outs) > 1 else arrs[0]
    batches = []  # per input: its batch axes
    for x, core in zip(inputs, cores, strict=True):
        batches.append([a for a in range(x.ndim) if a not in core])
    bshapes = [tuple(x.shape[a] for a in b) for x, b in zip(inputs, batches, strict=True)]
    bshape = tuple(np.broadcast_shapes(*bshapes))
    nb = len(bshape)
    # which batch dimension each input batch axis is (right-aligned), and whether it broadcasts
    dims = [[nb - len(b) + j for j in range(len(b))] for b in batches]

    chunk = []
    for d in range(nb):
        c = bshape[d] or 1
        for x, b, ds in zip(inputs, batches, dims, strict=True):
            if d in ds:
                a = b[ds.index(d)]
                if x.shape[a] == bshape[d] and bshape[d] > 1:
                    c = x.chunksize[a]
                    break
        chunk.append(max(1, c))

    def in_block(i: int, chunk: list[int]) -> Shape:
        x, b, ds = inputs[i], batches[i], dims[i]
        return tuple(
            x.shape[a]
            if a not in b
            else (
                min(chunk[ds[b.index(a)]], x.shape[a])
                if x.shape[a] == bshape[ds[b.index(a)]]
                else x.shape[a]
            )
            for a in range(x.ndim)
        )

    def out_block(o: Out, chunk: list[int]) -> Shape:
        bax = [a for a in range(len(o.shape)) if a not in o.core]
        return tuple(
            o.shape[a] if a in o.core else min(chunk[bax.index(a)], o.shape[a])
            for a in range(len(o.shape))
        )

    def needs_rechunk(i: int, chunk: list[int]) -> bool:
        return inputs[i].chunksize != in_block(i, chunk)

    allowed, reserved = _limits(spec)

    def projected(chunk: list[int]) -> tuple[int, int]:
        """(projected task memory, the largest rechunked input block times the rechunk's
        buffer count): both must fit allowed_mem."""
        ins = [(in_block(i, chunk), x.dtype) for i, x in enumerate(inputs)]
        os_ = [(out_block(o, chunk), o.dtype) for o in outs]
        out_sizes = [_nbytes(s, d) for s, d in os_]
        extra = (temps(ins, os_) if temps else 0) + sum(out_sizes) - max(out_sizes)
        mem = projected_mem(spec, [_nbytes(s, d) for s, d in ins], extra, max(out_sizes))
        rech = max(
            (_nbytes(s, d) for i, (s, d) in enumerate(ins) if needs_rechunk(i, chunk)), default=0
        )
        return mem, rechunk_task_mem(spec, rech)

    if allowed:
        while True:
            mem, rech = projected(chunk)
            if mem <= allowed and rech <= allowed:
                break
            big = max(range(nb), key=lambda d: chunk[d], default=None)
            if big is None or chunk[big] == 1:
                raise NotImplementedError(
                    _too_big(fname, what, inputs, cores, mem, rech, allowed, reserved)
                )
            chunk[big] = (chunk[big] + 1) // 2

    arrays = []
    for i, x in enumerate(inputs):
        target = in_block(i, chunk)
        if x.chunksize != target:
            x = cubed.rechunk(x, target)
        arrays.append(x)

    out_chunks = [
        tuple(_regular(n, c) for n, c in zip(o.shape, out_block(o, chunk), strict=True))
        for o in outs
    ]
    multi = len(outs) > 1
    pads = [0] * len(outs)
    if multi:  # Cubed's multi-output blockwise needs equal numblocks: pad with size-1 core axes
        width = max(len(o.shape) for o in outs)
        for k, o in enumerate(outs):
            assert o.core == tuple(range(len(o.shape) - len(o.core), len(o.shape)))
            pads[k] = width - len(o.shape)
            out_chunks[k] = out_chunks[k][:nb] + ((1,),) * pads[k] + out_chunks[k][nb:]
    shapes = [tuple(sum(c) for c in ch) for ch in out_chunks]

    # the batch axes of output 0 (core axes trail in every output when there are several)
    out0_batch = (
        list(range(nb))
        if multi
        else [a for a in range(len(outs[0].shape)) if a not in outs[0].core]
    )
    assert len(out0_batch) == nb
    names = [x.name for x in arrays]

    def back_key(out_key: Any) -> Any:
        coords = out_key.coords
        bcoords = [coords[a] for a in out0_batch]
        keys = []
        for i, x in enumerate(arrays):
            b, ds = batches[i], dims[i]
            c = tuple(
                0 if a not in b or x.shape[a] != bshape[ds[b.index(a)]] else bcoords[ds[b.index(a)]]
                for a in range(x.ndim)
            )
            keys.append(ChunkKey(names[i], c))
        return FunctionArgs(*keys, output_name=out_key.name)

    ins = [(in_block(i, chunk), x.dtype) for i, x in enumerate(inputs)]
    os_ = [(out_block(o, chunk), o.dtype) for o in outs]
    out_sizes = [_nbytes(s, d) for s, d in os_]
    extra = (temps(ins, os_) if temps else 0) + sum(out_sizes) - max(out_sizes)
    block_func = functools.partial(
        _run, func, tuple(pads), nb, multi, tuple(np.dtype(o.dtype) for o in outs)
    )
    res = general_blockwise(
        block_func,
        back_key,
        *arrays,
        shapes=shapes,
        dtypes=[o.dtype for o in outs],
        chunkss=out_chunks,
        target_stores=[None] * len(outs) if multi else None,
        extra_projected_mem=extra,
    )
    if not multi:
        return res
    return tuple(
        cubed.squeeze(r, axis=tuple(range(nb, nb + p))) if p else r
        for r, p in zip(res, pads, strict=True)
    )


def _run(
    func: Callable[..., Any],
    pads: tuple[int, ...],
    nb: int,
    multi: bool,
    dtypes: tuple[Any, ...],
    *blocks: Any,
) -> Any:
    r = func(*blocks)
    if not multi:
        return np.asarray(r, dtype=dtypes[0])
    out = []
    for a, p, dt in zip(r, pads, dtypes, strict=True):
        a = np.asarray(a, dtype=dt)
        out.append(np.expand_dims(a, tuple(range(nb, nb + p))) if p else a)
    return tuple(out)


def _too_big(
    fname: str,
    what: str,
    inputs: Sequence[Any],
    cores: Sequence[tuple[int, ...]],
    mem: int,
    rech: int,
    allowed: int,
    reserved: int,
) -> str:
    need = max(mem, rech)
    x, core = inputs[0], cores[0]
    whole = ", ".join(f"{a}: {x.shape[a]}" for a in core)
    ones = ", ".join(f"{a}: 1" for a in range(x.ndim) if a not in core)
    chunks = "{" + whole + (", " + ones if ones else "") + "}"
    return (
        f"Cubed computes {fname} one block at a time, each block holding {what} whole, "
        f"but even a block with one element along every other axis needs about {_mb(need)} "
        f"of task memory (inputs, outputs and the NumPy call's temporaries), more than the "
        f"Spec's allowed_mem ({_mb(allowed)}, of which reserved_mem {_mb(reserved)}). It works "
        f"with the input chunked as {chunks} (cubed.rechunk(x, {chunks})) and a Spec whose "
        f"allowed_mem is at least {_mb(need)}, e.g. cubed.Spec(allowed_mem="
        f"{math.ceil(need / 1e6) + 1}e6) when creating the arrays"
    )
