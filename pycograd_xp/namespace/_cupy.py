"""CuPy's capabilities for the backend adapter: its own peak-memory instrument (the memory
pool's hooks), no defined order for duplicate writes, cupyx.scipy.special's functions, and the
rows whose kernels miss the standard's special values (ops/elementwise/_special_values.py)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

from ._backend import Backend, register_adapter


def device_peak(run: Callable[[], Any]) -> int:
    """The most bytes CuPy's memory pool hands out at once while ``run()`` runs (beyond what was
    already in use), the stream synchronized at the end."""
    import cupy

    class _Peak(cupy.cuda.MemoryHook):
        name = "pycograd_xp_peak"

        def __init__(self) -> None:
            self.live = self.peak = 0

        def malloc_postprocess(self, **kw: Any) -> None:
            self.live += kw["mem_size"]
            self.peak = max(self.peak, self.live)

        def free_postprocess(self, **kw: Any) -> None:
            self.live -= kw["mem_size"]

    hook = _Peak()
    with hook:
        run()
        cupy.cuda.get_current_stream().synchronize()
    return hook.peak


# The rows whose CuPy kernels miss special values the standard names (CuPy 14.2, the first GPU
# run: remainder by an infinity, complex log at an infinite part beside a NaN, ...).
CORRECTS = frozenset({"remainder", "log", "log1p", "tanh", "acosh"})


def _adapt_cupy(b: Backend) -> Backend:
    import cupy

    return dataclasses.replace(
        b,
        ordered_writes=False,
        device=True,
        corrects=CORRECTS,
        device_peak=device_peak,
        windows=getattr(cupy.lib.stride_tricks, "sliding_window_view", None),
        owns_buffer=_owns_buffer,
        takes_out=lambda f: isinstance(f, cupy.ufunc),
        special=cupy_special,
    )


@functools.cache
def cupy_special(name: str) -> Callable[..., Any] | None:
    """cupyx.scipy.special's function ``name`` (CuPy arrays in and out), or None."""
    try:
        import cupyx.scipy.special as sc
    except ImportError:
        return None
    f = getattr(sc, name, None)
    return functools.partial(_polygamma, f) if name == "polygamma" and f is not None else f


def _polygamma(f: Callable[..., Any], n: Any, x: Any) -> Any:
    """cupyx's polygamma with its order as an array: it tests ``n == 0`` with cupy.where, which
    a Python int's comparison (a Python bool) fails ("'bool' object has no attribute 'astype'")."""
    import cupy

    return f(cupy.asarray(n), x)


def _owns_buffer(d: Any) -> bool:  # compile may write a dead temporary's buffer in place
    return d.base is None


register_adapter("cupy", _adapt_cupy)
