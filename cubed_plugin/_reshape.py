"""``reshape`` on Cubed: Cubed 0.27's (Dask's algorithm) merges or splits existing axes evenly
only, and needs regular chunks; any other reshape first rechunks the array to regular chunks,
and where that is not enough to one chunk when that fits a task's memory (``allowed_mem``),
else raises :class:`NotImplementedError` naming the reshape, the chunking and the way out,
before anything computes. Registered against its row with
:func:`cubed_plugin._blocks.implements`."""

from __future__ import annotations

import math
from typing import Any

from ._blocks import _limits, _mb, _nbytes, implements


def _target_shape(x: Any, shape: tuple[int, ...]) -> tuple[int, ...]:
    shape = tuple(int(s) for s in shape)
    if shape.count(-1) == 1:
        known = math.prod(s for s in shape if s != -1)
        if known and x.size % known == 0:
            shape = tuple(x.size // known if s == -1 else s for s in shape)
    return shape


def _regularized(x: Any) -> Any:
    """``x`` on regular chunks (Cubed's reshape can leave ``(2, 1, 2, 1)``, which its rechunk,
    concat and reshape then refuse)."""
    import cubed

    if all(all(c == cs[0] for c in cs[:-1]) and cs[-1] <= cs[0] for cs in x.chunks if cs):
        return x
    return cubed.rechunk(x, x.chunksize)


@implements("reshape")
def reshape(x: Any, /, shape: tuple[int, ...], *, copy: bool | None = None) -> Any:
    return _regularized(_reshape(x, shape, copy))


def _reshape(x: Any, shape: tuple[int, ...], copy: bool | None) -> Any:
    import cubed

    from ._cubed_seam import projected_mem, rechunk_task_mem

    target = _target_shape(x, tuple(shape))
    if math.prod(target) != x.size or tuple(target) == tuple(x.shape) or x.npartitions == 1:
        return cubed.reshape(x, shape, copy=copy)  # Cubed's own answer (or error)
    regular = all(
        all(c == cs[0] for c in cs[:-1]) and cs[-1] <= cs[0] for cs in x.chunks if len(cs) > 1
    )
    try:
        return cubed.reshape(x if regular else cubed.rechunk(x, x.chunksize), target, copy=copy)
    except (NotImplementedError, ValueError):
        pass  # not an even merge or split of the existing chunks (the shape was checked above)
    nbytes = _nbytes(tuple(x.shape), x.dtype)
    allowed, reserved = _limits(x.spec)
    need = max(projected_mem(x.spec, [nbytes], 0, nbytes), rechunk_task_mem(x.spec, nbytes))
    if allowed and need > allowed:
        raise NotImplementedError(
            f"reshape of an array of shape {tuple(x.shape)} chunked {tuple(x.chunks)} to "
            f"{tuple(target)}: Cubed's reshape only merges or splits existing axes evenly, "
            f"which this chunking does not allow, and the whole array in one chunk needs about "
            f"{_mb(need)} of task memory, more than the Spec's allowed_mem ({_mb(allowed)}, of "
            f"which reserved_mem {_mb(reserved)}). Rechunk x so that the axes merged or split "
            f"are whole in each chunk (cubed.rechunk), reshape in steps that merge or split "
            f"whole axes, or use a Spec whose allowed_mem is at least {_mb(need)}"
        )
    return cubed.reshape(cubed.rechunk(x, tuple(x.shape)), target, copy=copy)


# -- indexing --------------------------------------------------------------------------------
