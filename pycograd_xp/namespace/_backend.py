"""Resolve what the user passed to ``namespace()`` into a conforming backend namespace.

The only backend-specific knowledge in the package lives here: which modules need the
array-api-compat wrapper (NumPy, CuPy, PyTorch, Dask do not conform on their own), which ones are
lazy (their values are futures: never print or branch on them), and which ones let an array be
written in place.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

# Modules that conform only through array-api-compat's wrapper of the same name.
_COMPAT_WRAPPED = {"numpy", "cupy", "torch", "dask.array"}
# Backends whose arrays are futures: printing or branching on them would compute.
_LAZY = ("cubed", "dask")


@dataclass(frozen=True)
class Backend:
    """A conforming namespace plus the facts the wrapper needs about it."""

    xp: Any  # the conforming namespace all calls go to
    name: str  # short, unique, used for our module's ``__name__`` ("numpy", "cubed", ...)
    array_type: type  # the backend's array class
    lazy: bool  # values are computed on demand (Cubed, Dask)
    mutable: bool  # ``x[idx] = v`` writes the backend array in place
    # NumPy returns scalars (np.float64, ...) from 0-d operations: their type and the fast way
    # back to a 0-d array. None where the backend always returns arrays.
    scalar_type: type | None = None
    scalar_to_array: Any = None


def _short_name(mod_name: str) -> str:
    if mod_name.startswith("array_api_compat."):
        mod_name = mod_name[len("array_api_compat.") :]
    # "marray" anywhere in a namespace name makes array-api-compat treat it as MArray.
    return mod_name.replace(".", "_").replace("marray", "m_array")


def resolve(backend: Any = None) -> Backend:
    """Return the :class:`Backend` for ``backend`` (a module or namespace object; None = NumPy).

    Raises TypeError, naming the object, when it is not an Array API namespace and
    array-api-compat does not wrap it.
    """
    if backend is None:
        import numpy as backend
    if isinstance(backend, str):
        backend = importlib.import_module(backend)
    mod_name = getattr(backend, "__name__", None)
    if not isinstance(mod_name, str):
        raise TypeError(
            f"namespace(): {backend!r} is not an array namespace; pass a module such as "
            "numpy, cupy, cubed or array_api_strict"
        )
    if mod_name == "cubed.array_api":  # the same functions as the top-level cubed module
        backend, mod_name = importlib.import_module("cubed"), "cubed"
    if mod_name in _COMPAT_WRAPPED:
        xp = importlib.import_module(f"array_api_compat.{mod_name}")
    elif mod_name.startswith("pycograd_xp."):
        raise TypeError(
            f"namespace(): {mod_name} is already a pycograd_xp namespace; pass its backend instead"
        )
    elif hasattr(backend, "__array_api_version__") and hasattr(backend, "asarray"):
        xp = backend
    else:
        raise TypeError(
            f"namespace(): module {mod_name!r} does not implement the Python Array API standard "
            "(it has no __array_api_version__) and array-api-compat does not wrap it"
        )
    name = _short_name(xp.__name__)
    probe = xp.asarray(0)
    array_type = type(probe)
    lazy = name.startswith(_LAZY)
    mutable = hasattr(array_type, "__setitem__") and not lazy
    scalar_type = scalar_to_array = None
    if name == "numpy":
        import numpy

        scalar_type, scalar_to_array = numpy.generic, numpy.asarray
    return Backend(xp, name, array_type, lazy, mutable, scalar_type, scalar_to_array)
