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
    in error messages ("axis 1", "the two matrix axes").

    The phases: an empty input or output made at once (:func:`_empty_result`); the batch
    axes' layout (:class:`_Layout`); their chunks halved until a task fits ``allowed_mem``
    (:func:`_fitted_chunks`); the inputs rechunked to them; one task per block
    (:func:`_blockwise`)."""
    import cubed

    if any(math.prod(x.shape) == 0 for x in inputs) or any(math.prod(o.shape) == 0 for o in outs):
        return _empty_result(func, inputs, outs)
    layout = _Layout.of(inputs, cores, outs, temps)
    chunk = _fitted_chunks(fname, what, layout)
    arrays = []
    for i, x in enumerate(inputs):
        target = layout.in_block(i, chunk)
        arrays.append(x if x.chunksize == target else cubed.rechunk(x, target))
    return _blockwise(func, layout, chunk, arrays)


def _empty_result(func: Callable[..., Any], inputs: Sequence[Any], outs: Sequence[Out]) -> Any:
    """Nothing to compute or nothing to read: the (empty, or from empty inputs) result made now,
    as Cubed makes constants."""
    import cubed

    spec = inputs[0].spec
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


@dataclass
class _Layout:
    """The batch axes of :func:`core_apply`'s inputs and outputs: ``batches[i]``, the batch axes
    of input ``i``; ``bshape``, their broadcast shape; ``dims[i]``, which broadcast dimension
    each batch axis of input ``i`` is (right-aligned). A ``chunk`` gives the block size along
    each broadcast dimension."""

    inputs: Sequence[Any]
    cores: Sequence[tuple[int, ...]]
    outs: Sequence[Out]
    temps: Callable[[list[tuple[Shape, Any]], list[tuple[Shape, Any]]], int] | None
    batches: list[list[int]]
    bshape: Shape
    dims: list[list[int]]

    @classmethod
    def of(
        cls,
        inputs: Sequence[Any],
        cores: Sequence[tuple[int, ...]],
        outs: Sequence[Out],
        temps: Any,
    ) -> _Layout:
        batches = [
            [a for a in range(x.ndim) if a not in core]
            for x, core in zip(inputs, cores, strict=True)
        ]
        bshapes = [tuple(x.shape[a] for a in b) for x, b in zip(inputs, batches, strict=True)]
        bshape = tuple(np.broadcast_shapes(*bshapes))
        nb = len(bshape)
        dims = [[nb - len(b) + j for j in range(len(b))] for b in batches]
        return cls(inputs, cores, outs, temps, batches, bshape, dims)

    @property
    def nb(self) -> int:
        return len(self.bshape)

    def first_chunk(self) -> list[int]:
        """The block sizes of the inputs as they are chunked (the first input that spans a
        broadcast dimension gives its chunk there)."""
        chunk = []
        for d in range(self.nb):
            c = self.bshape[d] or 1
            for x, b, ds in zip(self.inputs, self.batches, self.dims, strict=True):
                if d in ds:
                    a = b[ds.index(d)]
                    if x.shape[a] == self.bshape[d] and self.bshape[d] > 1:
                        c = x.chunksize[a]
                        break
            chunk.append(max(1, c))
        return chunk

    def in_block(self, i: int, chunk: list[int]) -> Shape:
        x, b, ds = self.inputs[i], self.batches[i], self.dims[i]
        return tuple(
            x.shape[a]
            if a not in b
            else (
                min(chunk[ds[b.index(a)]], x.shape[a])
                if x.shape[a] == self.bshape[ds[b.index(a)]]
                else x.shape[a]
            )
            for a in range(x.ndim)
        )

    def out_block(self, o: Out, chunk: list[int]) -> Shape:
        bax = [a for a in range(len(o.shape)) if a not in o.core]
        return tuple(
            o.shape[a] if a in o.core else min(chunk[bax.index(a)], o.shape[a])
            for a in range(len(o.shape))
        )

    def extra(self, chunk: list[int]) -> tuple[list[tuple[Shape, Any]], int, int]:
        """``(input blocks, extra bytes, largest output block)``: the blocks of one task as
        (shape, dtype), what ``func`` allocates besides its largest output (``temps``, the
        other outputs)."""
        ins = [(self.in_block(i, chunk), x.dtype) for i, x in enumerate(self.inputs)]
        os_ = [(self.out_block(o, chunk), o.dtype) for o in self.outs]
        out_sizes = [_nbytes(s, d) for s, d in os_]
        extra = (self.temps(ins, os_) if self.temps else 0) + sum(out_sizes) - max(out_sizes)
        return ins, extra, max(out_sizes)


def _fitted_chunks(fname: str, what: str, layout: _Layout) -> list[int]:
    """The inputs' chunks along the broadcast dimensions, the largest halved until a task's
    projected memory and the rechunk's (the largest rechunked input block times its buffer
    count) fit ``allowed_mem``; NotImplementedError naming what would fit when none does."""
    from ._cubed_seam import projected_mem, rechunk_task_mem

    inputs = layout.inputs
    spec = inputs[0].spec
    chunk = layout.first_chunk()
    allowed, reserved = _limits(spec)
    while allowed:
        ins, extra, largest = layout.extra(chunk)
        mem = projected_mem(spec, [_nbytes(s, d) for s, d in ins], extra, largest)
        rech = rechunk_task_mem(
            spec,
            max(
                (_nbytes(s, d) for (s, d), x in zip(ins, inputs, strict=True) if x.chunksize != s),
                default=0,
            ),
        )
        if mem <= allowed and rech <= allowed:
            break
        big = max(range(layout.nb), key=lambda d: chunk[d], default=None)
        if big is None or chunk[big] == 1:
            raise NotImplementedError(
                _too_big(fname, what, inputs, layout.cores, mem, rech, allowed, reserved)
            )
        chunk[big] = (chunk[big] + 1) // 2
    return chunk


def _blockwise(
    func: Callable[..., Any], layout: _Layout, chunk: list[int], arrays: list[Any]
) -> Any:
    """One task per block of ``chunk``: Cubed's ``general_blockwise`` over the rechunked
    ``arrays``, each task reading the block of every input its output block broadcasts from."""
    import cubed

    from ._cubed_seam import ChunkKey, FunctionArgs, general_blockwise

    outs, nb, batches, dims, bshape = (
        layout.outs,
        layout.nb,
        layout.batches,
        layout.dims,
        layout.bshape,
    )
    out_chunks = [
        tuple(_regular(n, c) for n, c in zip(o.shape, layout.out_block(o, chunk), strict=True))
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

    _, extra, _ = layout.extra(chunk)
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
