"""Chunked random sampling on Cubed: every block is drawn by itself, lazily, so a sample never
exists whole in memory. ``pycograd_xp.random`` hands in ``draw_block``, which draws the block at
a given offset from its own key; values are reproducible for a given key and chunking (like
``cubed.random``, they depend on the chunking)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def sample(
    xp: Any,
    shape: tuple[int, ...],
    chunks: Any,
    dtype: Any,
    draw_block: Callable[[int, tuple[int, ...]], np.ndarray],
) -> Any:
    """A lazy Cubed array of ``shape`` (``xp`` is the Cubed namespace) whose block at linear
    offset ``i`` is ``draw_block(i, block_shape)``."""
    from cubed import map_blocks

    from ._cubed_seam import block_id_to_offset, normalize_chunks

    chunks = normalize_chunks(chunks if chunks is not None else "auto", shape=shape, dtype=dtype)
    numblocks = tuple(map(len, chunks))

    def block(x: Any, numblocks: tuple[int, ...] = (), block_id: Any = None) -> np.ndarray:
        return draw_block(block_id_to_offset(block_id, numblocks), x.shape)

    return map_blocks(block, dtype=dtype, chunks=chunks, numblocks=numblocks)
