"""pycograd_xp: reverse-mode autodiff for any Python Array API backend.

``xp = pycograd_xp.namespace(backend)`` returns a complete Array API namespace (standard 2025.12,
with ``linalg`` and ``fft``) over ``backend`` (NumPy by default). ``from pycograd_xp import numpy
as xp`` is the same as ``namespace(numpy)``; likewise for every installed backend module name.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from .namespace import Array, AxisError, namespace

__all__ = ["Array", "AxisError", "namespace"]
__version__ = "0.1.0"


def __getattr__(name: str) -> ModuleType:
    # ``from pycograd_xp import numpy as xp``: a namespace per installed backend module.
    if name.startswith("_"):
        raise AttributeError(name)
    try:
        backend = importlib.import_module(name)
    except ImportError:
        raise AttributeError(
            f"module 'pycograd_xp' has no attribute {name!r} (no backend module {name!r} is "
            "installed)"
        ) from None
    return namespace(backend)
