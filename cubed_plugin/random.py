"""Chunked random sampling on Cubed: every block draws from its own key (the parent key folded
with the block's position), so a sample never exists whole in memory and is reproducible for a
given key and chunking (like ``cubed.random``, values depend on the chunking)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def sample(xp: Any, key: Any, shape: tuple[int, ...], chunks: Any, dtype: Any,
           draw: Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]) -> Any:  # fmt: skip
    """A lazy Cubed array of ``shape`` in namespace ``xp`` whose block at offset ``i`` is
    ``draw(generator_for(fold_in(key, i)), block_shape)``."""
    from cubed.core.ops import map_blocks
    from cubed.utils import block_id_to_offset, normalize_chunks

    from pycograd_xp.random import _generator, fold_in

    chunks = normalize_chunks(chunks if chunks is not None else "auto", shape=shape, dtype=dtype)
    numblocks = tuple(map(len, chunks))

    def block(x: Any, numblocks: tuple[int, ...] = (), block_id: Any = None) -> np.ndarray:
        k = fold_in(key, block_id_to_offset(block_id, numblocks))
        return np.asarray(draw(_generator(k), x.shape), dtype=dtype)

    return xp.asarray(map_blocks(block, dtype=dtype, chunks=chunks, numblocks=numblocks))
