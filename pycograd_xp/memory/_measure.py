"""``measure``: the real step on the same scale as ``project`` (tracemalloc on NumPy, the
backend's allocator where it has one), and the process's resident growth."""

from __future__ import annotations

import gc
import resource
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .. import _api
from ..namespace._array import Array
from ..tree import tree_flatten
from ._project import _compiled, _forward_pass, _name, _which


@dataclass(frozen=True)
class Measurement:
    """Measured peaks of ``f`` and of its ``value_and_grad`` step, on the scale of
    :class:`~pycograd_xp.memory.Projection` (bytes live at the most, the arguments included).

    The peaks are tracemalloc's (every allocation NumPy and Python make: compare them with
    ``Projection.traced_*``). Beside them, the growth of the process's resident set (Linux: its
    peak is reset through ``/proc/self/clear_refs``), what users see: it also holds what C
    libraries allocate by themselves and what the allocator keeps, and moves with page faults.

    Parameters
    ----------
    forward_peak_bytes : int
        ``f`` alone.
    peak_bytes : int
        The whole step (as is: the call).
    argument_bytes : int
        The arguments.
    resident_forward_peak_bytes : int or None
        ``f`` alone, by resident-set growth (None: not on Linux).
    resident_peak_bytes : int or None
        The step, likewise.
    minor_page_faults : int
        During the step (allocator churn shows here, not in tracemalloc).
    """

    forward_peak_bytes: int
    peak_bytes: int
    argument_bytes: int
    resident_forward_peak_bytes: int | None  # by resident-set growth (None: not on Linux)
    resident_peak_bytes: int | None
    minor_page_faults: int  # during the step (allocator churn shows here, not in tracemalloc)


def _nbytes(tree: Any) -> int:
    return sum(int(leaf._data.nbytes) for leaf in tree_flatten(tree)[0] if isinstance(leaf, Array))


def _status(field: str) -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _reset_resident_peak() -> int | None:
    """Reset the resident-set peak (VmHWM) to the current size; return that size."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        return None
    return _status("VmRSS")


def _resident_growth(start: int | None) -> int:
    peak = _status("VmHWM") if start is not None else None
    return 0 if peak is None or start is None else max(0, peak - start)


def _import_special(leaves: list[Any]) -> None:
    """Import the arguments' backends' special functions before anything is traced: NumPy's
    come from scipy.special, imported on a special function's first call (3.5 MB of Python
    objects that tracemalloc would count as the function's, once per process)."""
    for b in {id(x._backend): x._backend for x in leaves if isinstance(x, Array)}.values():
        if b.special is not None:
            b.special("erf")


def _build_vmap_levels(leaves: list[Any]) -> None:
    """Build vmap's namespaces over the arguments' (two levels: vmap of vmap) before anything
    is traced: a first ``vmap`` builds one (2.4 MB of Python objects, once per process) that
    tracemalloc would count as the function's."""
    from .._vmap import batched_namespace

    for ns in {id(x._ns): x._ns for x in leaves if isinstance(x, Array)}.values():
        if ns._backend.lift is None and not ns._backend.abstract:
            batched_namespace(batched_namespace(ns))


def _empty_free_lists() -> None:
    """Empty Python's free lists: the tuples, lists, dicts and floats a run would otherwise take
    back from earlier ones without an allocation tracemalloc sees (measured: a jvp of a
    gradient over 200 pieces took 117 kB more on its first run after a collection, or after an
    import, than on the next). A full collection empties them; with every object frozen first
    it examines none (microseconds, where a collection of a test process's objects takes a
    tenth of a second), and the objects go back to the oldest generation after. A process that
    froze objects of its own (``gc.freeze`` before forking) gets the full collection."""
    if gc.get_freeze_count():
        gc.collect()
        return
    gc.freeze()
    try:
        gc.collect()
    finally:
        gc.unfreeze()


def _measured(run: Callable[[], Any]) -> tuple[int, int | None, int]:
    """Run ``run()`` under tracemalloc (already started): its traced peak above what was live
    before, its resident-set growth (None: not on Linux) and the minor page faults.

    Python's free lists are emptied first (:func:`_empty_free_lists`), so that the run is
    measured from the state that costs it the most, the same on every call."""
    _empty_free_lists()
    base = tracemalloc.get_traced_memory()[0]
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    tracemalloc.reset_peak()
    rss = _reset_resident_peak()
    result = run()
    growth = _resident_growth(rss) if rss is not None else None
    traced = tracemalloc.get_traced_memory()[1] - base
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    del result
    return traced, growth, faults


def measure(
    f: Callable[..., Any], *args: Any, argnums: int | Sequence[int] | None = None, **kwargs: Any
) -> Measurement:
    """Run ``f`` and its ``value_and_grad`` step on the real arrays ``args`` and measure their peak
    bytes, arguments included.

    Measured with tracemalloc, and resident-set growth where the platform tells it; on a device
    backend, its own allocator (CuPy's memory pool). Each run starts with Python's free lists
    emptied (a run that takes its tuples and dicts back from an earlier one's allocates less
    than one after an import or a collection: the most is measured, the same each time).
    Taken as it is, ``f`` runs once and its forward peak is its peak; a compiled function is
    traced before it is measured, so the figures are the replay's. tracemalloc and the resident
    set are the whole process's: another thread that allocates meanwhile (a Dask LocalCluster's
    event loop, which ``cubed_plugin.fit(executor="dask")`` keeps for the process) adds its
    bytes to the figures. The backends' special functions (scipy.special, for NumPy) are
    imported before it measures, so that a first call's import is not counted as the
    function's memory.

    Parameters
    ----------
    f : callable
        The function, as for :func:`~pycograd_xp.memory.project`.
    *args : Array or pytree of Array
        The real arguments.
    argnums : int, sequence of int, or None, default None
        As in :func:`~pycograd_xp.memory.project`, the same default (``()``: ``f`` as it is).
    **kwargs : Any
        Keyword arguments of ``f``.

    Returns
    -------
    Measurement
        The measured peaks.
    """
    where = f"memory.measure({_name(f)})"
    nums = _which(f, argnums)
    argument_bytes = _nbytes(args) + _nbytes(kwargs)
    if nums == ():
        if _compiled(f):
            f.source(*args, **kwargs)  # type: ignore[attr-defined]  # traces, does not run
        runs = [lambda: f(*args, **kwargs)]
    else:
        runs = [
            lambda: _forward_pass(f, where)(*args, **kwargs),
            lambda: _api.value_and_grad(f, nums)(*args, **kwargs),
        ]
    device = next(
        (
            leaf._backend.device_peak
            for leaf in tree_flatten((args, kwargs))[0]
            if isinstance(leaf, Array) and leaf._backend.device_peak
        ),
        None,
    )
    if device is not None:  # a device backend measures with its own allocator (CuPy's pool)
        peaks = [device(run) + argument_bytes for run in runs]
        return Measurement(peaks[0], peaks[-1], argument_bytes, None, None, 0)
    leaves = tree_flatten((args, kwargs))[0]
    _import_special(leaves)
    _build_vmap_levels(leaves)
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    try:
        measured = [_measured(run) for run in runs]
    finally:
        if not was_tracing:
            tracemalloc.stop()
    (forward, forward_rss, _), (step, step_rss, faults) = measured[0], measured[-1]
    return Measurement(
        forward + argument_bytes,
        step + argument_bytes,
        argument_bytes,
        forward_rss + argument_bytes if forward_rss is not None else None,
        step_rss + argument_bytes if step_rss is not None else None,
        faults,
    )
