"""A mini-batch of whole row chunks, as a Cubed array whose chunks are the picked chunks.

``cubed.concat`` of the picked chunks declares, for every task, one block of each piece it
concatenates (Cubed cannot know that a task reads only one): a batch of k chunks was projected
at ``reserved + 2k + 2`` chunks per task and was refused where the full batch trained.

Here a batch of stored data has no task of its own: a read-only Zarr array whose chunk ``b`` is
the stored chunk ``picks[b]`` (the same bytes, under another key; :class:`RowChunksStore`), that
Cubed reads as it reads the whole data. Every task of a step on it is the whole data's task on
another chunk, with the same projection. Data that is not stored (computed lazily by Cubed)
gets one copy op that reads one chunk per task (Cubed's ``map_selection``): ``reserved + 4``
chunks per task however many chunks are picked.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import zarr
from zarr.buffer import default_buffer_prototype
from zarr.storage import WrapperStore


class RowChunksStore(WrapperStore):
    """``store`` read-only with chunks under other keys: ``keys`` maps a chunk key of the view
    to the stored chunk it shows, and ``metadata`` holds the view's own metadata documents (its
    shape). Everything else is read from ``store`` as it is."""

    def __init__(self, store: Any, keys: dict[str, str], metadata: dict[str, bytes]) -> None:
        super().__init__(store)
        self._keys, self._metadata = keys, metadata

    def _with_store(self, store: Any) -> RowChunksStore:
        return type(self)(store, self._keys, self._metadata)

    @property
    def read_only(self) -> bool:
        return True

    async def get(self, key: str, prototype: Any, byte_range: Any = None) -> Any:
        if key in self._metadata:
            return prototype.buffer.from_bytes(self._metadata[key])
        return await self._store.get(self._keys.get(key, key), prototype, byte_range)

    async def get_partial_values(self, prototype: Any, key_ranges: Any) -> Any:
        return await self._store.get_partial_values(
            prototype, [(self._keys.get(k, k), r) for k, r in key_ranges]
        )

    async def exists(self, key: str) -> bool:
        return key in self._metadata or await self._store.exists(self._keys.get(key, key))


def _stored(x: Any) -> Any:
    """The Zarr array holding ``x``'s data when ``x`` is stored data read as it is stored
    (``cubed.from_zarr``; unsharded, Cubed's chunks the Zarr chunks), else None."""
    from ._cubed_seam import zarr_array_of

    z = zarr_array_of(x)
    if not isinstance(z, zarr.Array) or z.shards is not None:
        return None
    return z if tuple(z.chunks) == tuple(x.chunksize) else None


def _view(z: zarr.Array, picks: list[int]) -> zarr.Array:
    size = z.chunks[0]
    rows = sum(min(size, z.shape[0] - i * size) for i in picks)
    meta = z.metadata
    view = dataclasses.replace(meta, shape=(rows, *z.shape[1:]))
    prefix = f"{z.path}/" if z.path else ""
    others = [range(-(-n // c)) for n, c in zip(z.shape[1:], z.chunks[1:], strict=True)]
    keys = {
        prefix + meta.encode_chunk_key((b, *rest)): prefix + meta.encode_chunk_key((i, *rest))
        for b, i in enumerate(picks)
        for rest in itertools.product(*others)
    }
    docs = view.to_buffer_dict(default_buffer_prototype())
    store = RowChunksStore(z.store, keys, {prefix + k: v.to_bytes() for k, v in docs.items()})
    return zarr.open_array(store, path=z.path, mode="r")


def take_row_chunks(x: Any, picks: Sequence[int]) -> Any:
    """The row chunks ``picks`` (increasing chunk numbers) of the Cubed array ``x``, in that
    order, as one Cubed array chunked as ``x`` along every axis: a mini-batch of whole chunks
    whose every task reads one chunk, as a task on the whole of ``x`` does.

    When ``x`` is stored data (``cubed.from_zarr``), the result is stored data too and adds no
    task: its chunk ``b`` is read from the stored chunk ``picks[b]``. Otherwise one op copies
    each picked chunk (one chunk read per task)."""
    import cubed

    from ._cubed_seam import map_selection

    n = len(x.chunks[0])
    picks = [int(i) for i in picks]
    if (
        not picks
        or picks[0] < 0
        or picks[-1] >= n
        or any(b <= a for a, b in itertools.pairwise(picks))
    ):
        raise ValueError(
            f"take_row_chunks: picks must be increasing chunk numbers from 0 to "
            f"{n - 1} (x has {n} row chunks), got {picks}; sort them"
        )
    z = _stored(x)
    if z is not None:
        return cubed.from_array(_view(z, picks), spec=x.spec)
    starts = np.cumsum((0, *x.chunks[0]))
    others = [np.cumsum((0, *c)) for c in x.chunks[1:]]

    def selection(key: Any) -> tuple[slice, ...]:
        b, *rest = key.coords
        i = picks[b]
        return (
            slice(int(starts[i]), int(starts[i + 1])),
            *(slice(int(s[j]), int(s[j + 1])) for s, j in zip(others, rest, strict=True)),
        )

    chunks = (tuple(x.chunks[0][i] for i in picks), *x.chunks[1:])
    return map_selection(
        None, selection, x, (sum(chunks[0]), *x.shape[1:]), x.dtype, chunks, max_num_input_blocks=1
    )
