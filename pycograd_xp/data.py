"""Mini-batches over arrays: NumPy arrays, arrays of any pycograd_xp namespace, or anything
sliceable along its first axis with a ``shape`` (Zarr arrays read chunk by chunk), shuffled
with an explicit key, prepared ahead in a background thread.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from . import random
from ._exports import module_dir as _module_dir
from ._state import STACK
from .namespace._array import Array, make

__all__ = ["Batches"]


# dir() lists the public names only (what completion offers)
__dir__ = _module_dir(globals())


def _host(a: Any) -> Any:
    """A source we can slice on the host. Our arrays become their backend arrays when those
    are lazy (a Cubed array is then read one batch at a time), else their NumPy values; a
    pandas DataFrame or Series its NumPy values (``frame[rows]`` picks columns, and a Series'
    integer index picks by label: shuffled batches failed or took other rows)."""
    if isinstance(a, Array):
        return a._data if a._backend.lazy else np.asarray(a._data)
    if type(a).__module__.split(".")[0] == "pandas" and hasattr(a, "to_numpy"):
        return a.to_numpy()
    return a


def _take_rows(src: Any, rows: np.ndarray | slice) -> np.ndarray:
    if isinstance(rows, slice):
        return np.asarray(src[rows])
    if hasattr(src, "oindex"):  # Zarr: orthogonal selection wants sorted indices
        order = np.argsort(rows)
        picked = np.asarray(src.oindex[rows[order]])
        out = np.empty_like(picked)
        out[order] = picked
        return out
    return np.asarray(src[rows])


class Batches:
    """Iterate over ``arrays`` (equal first dimensions) in batches of ``batch_size`` rows.

    Each item is a tuple of arrays, one per source, in namespace ``xp`` (with ``drop_last=False``,
    plus a ``mask``).

    Parameters
    ----------
    arrays : sequence
        The sources: NumPy arrays, arrays of any pycograd_xp namespace, pandas DataFrames and
        Series (their values, by position), or anything sliceable along its first axis with a
        ``shape`` (Zarr arrays, read chunk by chunk).
    batch_size : int
        Rows per batch.
    key : pycograd_xp.random.Key, optional
        Shuffle with this random key (a new order each epoch: the key is folded with the epoch
        number); None keeps the order.
    drop_last : bool, default True
        True drops the uneven last batch (so ``batch_size`` may not exceed the rows); False pads
        every batch to ``batch_size`` and appends a float ``mask`` (1 for real rows, 0 for
        padding) to each tuple, so ``sum(loss * mask) / sum(mask)`` averages correctly with
        static shapes.
    xp : namespace, optional
        The namespace batches are made in (None: pycograd_xp over NumPy).
    prefetch : int, default 2
        Batches prepared ahead in a background thread (0: none).

    Examples
    --------
    >>> import numpy as np
    >>> from pycograd_xp.data import Batches
    >>> X, y = np.zeros((10, 3)), np.zeros(10)
    >>> [xb.shape for xb, yb in Batches([X, y], 4)]
    [(4, 3), (4, 3)]
    """

    def __init__(
        self,
        arrays: Sequence[Any],
        batch_size: int,
        *,
        key: random.Key | None = None,
        drop_last: bool = True,
        xp: Any = None,
        prefetch: int = 2,
    ) -> None:
        self.sources = [_host(a) for a in arrays]
        if not self.sources:
            raise ValueError("Batches: no arrays; give the sources, e.g. Batches([X, y], 128)")
        lengths = {int(s.shape[0]) for s in self.sources}
        if len(lengths) != 1:
            raise ValueError(f"Batches: arrays have different lengths {sorted(lengths)}")
        if batch_size < 1:
            raise ValueError(f"Batches: batch_size must be positive, got {batch_size}")
        self.n = lengths.pop()
        if drop_last and batch_size > self.n:
            raise ValueError(
                f"Batches: batch_size {batch_size} is more than the {self.n} rows, and "
                "drop_last=True drops the one, partial batch: there would be no batch at all; "
                f"lower batch_size to at most {self.n}, or pass drop_last=False"
            )
        self.batch_size, self.key, self.drop_last, self.prefetch = (
            batch_size,
            key,
            drop_last,
            prefetch,
        )
        if xp is None:
            import pycograd_xp

            xp = pycograd_xp.namespace(np)
        self.xp = xp
        self.epoch = 0
        # the Array class of a namespace of ours over NumPy (None: any other namespace)
        cls = getattr(xp, "Array", None)
        backend = getattr(cls, "_backend", None)
        self._ours = (
            cls
            if backend is not None
            and backend.array_type is np.ndarray
            and not (backend.lazy or backend.abstract or backend.level)
            else None
        )

    def __len__(self) -> int:
        full, rest = divmod(self.n, self.batch_size)
        return full + (1 if rest and not self.drop_last else 0)

    def _batches(self, epoch: int) -> Iterator[tuple[Any, ...]]:
        order = None
        if self.key is not None:
            order = np.asarray(random.permutation(random.fold_in(self.key, epoch), self.n)._data)
        for b in range(len(self)):
            start, stop = b * self.batch_size, min((b + 1) * self.batch_size, self.n)
            rows = slice(start, stop) if order is None else order[start:stop]
            parts = [_take_rows(s, rows) for s in self.sources]
            if not self.drop_last:
                real = stop - start
                pad = self.batch_size - real
                if pad:
                    parts = [
                        np.concatenate([p, np.zeros((pad, *p.shape[1:]), p.dtype)]) for p in parts
                    ]
                parts.append(np.concatenate([np.ones(real), np.zeros(pad)]))
            yield self._wrap(parts)

    def _wrap(self, parts: list[np.ndarray]) -> tuple[Any, ...]:
        """The batch's host arrays as arrays of ``xp``: NumPy's wrapped as they are where
        ``xp`` is a namespace of ours over NumPy and no transform takes creation calls (what
        ``xp.asarray`` would do, without its call); else ``xp.asarray`` of each."""
        cls = self._ours
        if cls is not None and STACK.redirect is None:
            return tuple(
                [make(cls, p) if type(p) is np.ndarray else cls._ns.asarray(p) for p in parts]
            )
        return tuple([self.xp.asarray(p) for p in parts])

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        epoch, self.epoch = self.epoch, self.epoch + 1
        if not self.prefetch:
            yield from self._batches(epoch)
            return
        q: queue.Queue = queue.Queue(maxsize=self.prefetch)
        done = object()
        stop = threading.Event()

        def produce() -> None:
            try:
                for batch in self._batches(epoch):
                    while not stop.is_set():
                        try:
                            q.put(batch, timeout=0.1)
                            break
                        except queue.Full:
                            continue
                    if stop.is_set():
                        return
                q.put(done)
            except BaseException as e:  # hand the error to the consumer
                q.put(e)

        worker = threading.Thread(target=produce, daemon=True)
        worker.start()
        try:
            while (item := q.get()) is not done:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()
