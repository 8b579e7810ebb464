"""A process pool whose tasks survive a worker's death: :class:`RetryingPool`.

CPython's ``ProcessPoolExecutor`` breaks for good when one of its workers dies (killed, out of
memory): every running and queued task fails with ``BrokenProcessPool``, and so did every
compute on Cubed's processes executor (which retries nothing). :class:`RetryingPool` takes the
pool's place for ``cubed_plugin``'s processes executor (``measuring_processes``): a task that
fails, for a dead worker or any other error, is submitted again, up to ``retries`` times, and a
broken pool is replaced by a fresh one (the tasks that were in flight on it are retried there).
Cubed's tasks write whole chunks to storage under fixed keys, so running one again is safe; the
threads, Dask, Ray and Lithops executors retry the same way.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

__all__ = ["RetryingPool", "Tracked"]


class RetryingPool:
    """``submit``/``shutdown`` as a ``ProcessPoolExecutor`` made by ``make_pool``: each task is
    tried ``retries + 1`` times at most; after a worker's death the broken pool is retired and
    a new one made (``restarts`` counts them)."""

    def __init__(self, make_pool: Callable[[], ProcessPoolExecutor], retries: int = 2) -> None:
        if retries < 0:
            raise ValueError(f"RetryingPool: retries must be >= 0, got {retries}")
        self._make = make_pool
        self._pool = make_pool()
        self._retired: list[ProcessPoolExecutor] = []
        self._lock = threading.Lock()
        self.retries = retries
        self.restarts = 0

    def _fresh(self, broken: ProcessPoolExecutor) -> ProcessPoolExecutor:
        """The pool to use after ``broken`` broke: a new one, made once per breakage."""
        with self._lock:
            if self._pool is broken:
                self._retired.append(broken)
                self._pool = self._make()
                self.restarts += 1
            return self._pool

    def _try(self, outer: Future, fn: Callable[..., Any], args: tuple, kwargs: dict, left: int):
        pool = self._pool
        try:
            inner = pool.submit(fn, *args, **kwargs)
        except BrokenProcessPool:
            pool = self._fresh(pool)
            inner = pool.submit(fn, *args, **kwargs)

        def done(f: Future) -> None:
            if outer.done():  # cancelled by the caller meanwhile
                return
            if f.cancelled():
                outer.cancel()
                return
            error = f.exception()
            if error is None:
                outer.set_result(f.result())
            elif left > 0:
                if isinstance(error, BrokenProcessPool):
                    self._fresh(pool)
                try:
                    self._try(outer, fn, args, kwargs, left - 1)
                except RuntimeError as e:  # the pool was shut down meanwhile
                    outer.set_exception(e)
            else:
                outer.set_exception(error)

        inner.add_done_callback(done)
        # the caller cancelling the task cancels it in the pool too (when it has not started)
        outer.add_done_callback(lambda f: inner.cancel() if f.cancelled() else None)
        outer.in_pool = inner  # type: ignore[attr-defined]  # the try in the pool now (settle)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        outer: Future = Future()
        self._try(outer, fn, args, kwargs, self.retries)
        return outer

    def tracked(self) -> Tracked:
        """A view of this pool whose ``submit`` keeps the futures it made, for one compute."""
        return Tracked(self)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            pools = [*self._retired, self._pool]
        for pool in pools:
            pool.shutdown(wait=wait, cancel_futures=cancel_futures)


class Tracked:
    """``submit`` of a :class:`RetryingPool`, keeping the futures made (one compute's tasks on a
    pool kept across computes): :meth:`settle` cancels those not started and waits for those
    running, so that none of them runs after the compute has returned or raised."""

    def __init__(self, pool: RetryingPool) -> None:
        self.pool = pool
        self.futures: list[Future] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        future = self.pool.submit(fn, *args, **kwargs)
        self.futures.append(future)
        return future

    def settle(self) -> None:
        from concurrent.futures import wait

        for future in self.futures:
            future.cancel()  # and the pool's, when not started
        wait([f.in_pool for f in self.futures])  # type: ignore[attr-defined]
