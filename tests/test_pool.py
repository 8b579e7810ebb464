"""``cubed_plugin._pool.RetryingPool``: a task whose worker is killed mid-task is run again on a
fresh pool (CPython's pool breaks for good), the tasks in flight with it too; a task that keeps
failing fails after its retries; a retries=0 pool fails at once."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import pytest

from cubed_plugin._pool import RetryingPool


def _pool(retries):
    ctx = multiprocessing.get_context("fork")
    return RetryingPool(lambda: ProcessPoolExecutor(2, mp_context=ctx), retries)


def _die_once(mark: str, value: int) -> int:
    """SIGKILL this worker the first time any task runs it (``mark`` is created then)."""
    try:
        os.close(os.open(mark, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return value * 2
    os.kill(os.getpid(), signal.SIGKILL)
    return -1


def _slow(value: int) -> int:
    time.sleep(0.3)
    return value * 2


def _fails(n: int) -> int:
    raise OSError(f"failed {n}")


def test_a_killed_worker_and_the_tasks_in_flight_with_it_are_run_again(tmp_path):
    pool = _pool(2)
    try:
        slow = [pool.submit(_slow, i) for i in range(3)]
        killed = pool.submit(_die_once, str(tmp_path / "killed"), 21)
        assert killed.result(timeout=60) == 42
        assert [f.result(timeout=60) for f in slow] == [0, 2, 4]
        assert pool.restarts == 1
    finally:
        pool.shutdown(wait=True)


def test_a_task_that_keeps_failing_fails_after_its_retries(tmp_path):
    pool = _pool(1)
    try:
        with pytest.raises(OSError, match="failed 3"):
            pool.submit(_fails, 3).result(timeout=60)
    finally:
        pool.shutdown(wait=True)


def test_without_retries_a_killed_worker_fails_its_task(tmp_path):
    pool = _pool(0)
    try:
        with pytest.raises(BrokenProcessPool):
            pool.submit(_die_once, str(tmp_path / "killed"), 1).result(timeout=60)
    finally:
        pool.shutdown(wait=True)
    with pytest.raises(ValueError, match="retries must be >= 0"):
        _pool(-1)
