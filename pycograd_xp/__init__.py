"""pycograd_xp: reverse-mode autodiff for any Python Array API backend.

``xp = pycograd_xp.namespace(backend)`` returns a complete Array API namespace (standard 2025.12,
with ``linalg`` and ``fft``) over ``backend`` (NumPy by default) whose arrays carry tape nodes.
``from pycograd_xp import numpy as xp`` is the same as ``namespace(numpy)``; likewise for every
installed backend module name.

Differentiate with JAX's functional names (``grad``, ``value_and_grad``, ``vjp``) or PyTorch's
imperative ones (``x.requires_grad_()``, ``loss.backward()``, ``x.grad``).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ._api import enable_grad, grad, no_grad, stop_gradient, unwrap, value_and_grad, vjp
from ._remat import remat
from .namespace import Array, AxisError, namespace
from .tree import tree_flatten, tree_leaves, tree_map, tree_unflatten

__all__ = [
    "Array", "AxisError", "enable_grad", "grad", "namespace", "no_grad", "remat", "stop_gradient",
    "tree_flatten", "tree_leaves", "tree_map", "tree_unflatten", "unwrap", "value_and_grad", "vjp",
]  # fmt: skip
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
    try:
        return namespace(backend)
    except TypeError:  # e.g. a submodule of ours shadowing a stdlib name is being imported
        raise AttributeError(
            f"module 'pycograd_xp' has no attribute {name!r} ({name!r} is not an array namespace)"
        ) from None
