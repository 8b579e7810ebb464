"""The Array API surface: ``namespace(backend)`` and the Array class.

One module per category of the standard declares its rows (``_elementwise``, ``_statistical``,
...); ``_build`` turns the rows into a namespace module for one backend.

For a backend's adapter: :class:`Backend` (what the backend can do), and, for an adapter that
names the work its backend plans by the part of the program that built it (``Backend.
labeller``), :func:`watch_parts` (keep the parts from now on) and :func:`parts_running` (the
parts running now, outermost first; see ``pycograd_xp/_parts.py``).
"""

from __future__ import annotations

import threading
from types import ModuleType
from typing import Any

from .._parts import current as parts_running
from .._parts import watch as watch_parts
from .._primitive import REGISTRY, Primitive, implementations
from ..tree import tree_map
from . import _cupy  # noqa: F401  (registers CuPy's adapter; imports CuPy only when used)
from ._array import Array
from ._backend import Backend, capabilities, numpy_special, resolve
from ._build import build
from ._signature import AxisError

__all__ = [
    "Array",
    "AxisError",
    "Backend",
    "Primitive",
    "REGISTRY",
    "implementations",
    "namespace",
    "numpy_special",
    "of",
    "unwrap",
    "parts_running",
    "watch_parts",
]

_CACHE: dict[str, ModuleType] = {}
_LOCK = threading.Lock()


def namespace(backend: Any = None) -> ModuleType:
    """Return the differentiable Array API namespace over ``backend``.

    Parameters
    ----------
    backend : module, str or None, default None
        A conforming namespace module: ``numpy`` (the default, also when None), ``cupy``,
        ``cubed`` (or ``cubed.array_api``), ``array_api_strict``, an ``array_api_compat``
        wrapper, or any object implementing the standard (or its import name as a string).

    Returns
    -------
    module
        A real module named ``pycograd_xp.<backend>`` (standard 2025.12, with ``linalg`` and
        ``fft``), the same object on every call, whose arrays carry tape nodes.
        ``from pycograd_xp import numpy as xp`` gives the same module.

    Raises
    ------
    TypeError
        When ``backend`` is not an Array API namespace.

    Examples
    --------
    >>> import numpy, pycograd_xp as pg
    >>> xp = pg.namespace(numpy)
    >>> xp.__name__, xp is pg.namespace("numpy")
    ('pycograd_xp.numpy', True)
    >>> xp.exp(xp.asarray([0.0, 1.0]))
    pycograd_xp.numpy.Array([1.        , 2.71828183], dtype=float64)
    """
    if isinstance(backend, ModuleType) and backend.__name__ in _CACHE:
        return _CACHE[backend.__name__]
    b = resolve(backend)
    with _LOCK:
        mod = _CACHE.get(b.name)
        if mod is None:
            mod = _CACHE[b.name] = build(b)
        elif mod._backend.xp is not b.xp:
            raise TypeError(
                f"namespace(): a different backend named {b.name!r} already has a namespace"
            )
        if isinstance(backend, ModuleType):
            _CACHE.setdefault(backend.__name__, mod)
    return mod


def of(ns: Any) -> ModuleType:
    """Our namespace for ``ns``: ``ns`` itself if it is one of ours, else the one that wraps
    the backend namespace ``ns`` (what a first-order VJP rule receives)."""
    if getattr(ns, "_backend", None) is not None:
        return ns
    return _CACHE[capabilities(ns).name]


def unwrap(x: Any) -> Any:
    """The backend arrays behind ``x``, detached.

    The public way to hand our arrays to the backend's own functions (``cubed.compute``,
    ``numpy.savez``, ...).

    Parameters
    ----------
    x : Array or pytree of Array
        An array of a pycograd_xp namespace, or a pytree of them. Anything that is not one of
        our arrays passes unchanged.

    Returns
    -------
    backend array or pytree
        The same structure, each of our arrays replaced by the backend array it holds (for
        ``namespace(numpy)``, a ``numpy.ndarray``).
    """
    return tree_map(lambda a: a._data if isinstance(a, Array) else a, x)
