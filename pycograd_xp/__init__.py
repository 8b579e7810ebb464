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
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from types import ModuleType

from . import (
    ops,  # noqa: F401  (the rows and their rules, first: namespaces are built from them)
    special,  # noqa: F401  (pycograd_xp.special: scipy.special's functions as rows)
)
from ._api import enable_grad, grad, no_grad, stop_gradient, unwrap, value_and_grad, vjp
from ._compile import TracingError
from ._compile import compile as compile  # noqa: A004  (public, not in __all__: see below)
from ._custom import custom_jvp, custom_vjp
from ._forward import hessian, jacfwd, jacrev, jvp, linearize
from ._remat import remat
from ._vmap import vmap
from .namespace import Array, AxisError, namespace
from .tree import tree_flatten, tree_leaves, tree_map, tree_unflatten

__all__ = [
    "Array",
    "AxisError",
    "TracingError",
    "custom_jvp",
    "custom_vjp",
    "enable_grad",
    "grad",
    "hessian",
    "jacfwd",
    "jacrev",
    "jvp",
    "linearize",
    "namespace",
    "no_grad",
    "remat",
    "stop_gradient",
    "tree_flatten",
    "tree_leaves",
    "tree_map",
    "tree_unflatten",
    "unwrap",
    "value_and_grad",
    "vjp",
    "vmap",
]
# ``compile`` is public (``pycograd_xp.compile``) but left out of ``__all__``: a star import
# must not shadow Python's builtin of the same name.
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


class _NamespaceImporter(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``import pycograd_xp.numpy`` (and ``.linalg``/``.fft`` under it) in any process: the
    namespace made for that backend. Last on ``sys.meta_path``, so real submodules come first.
    Pickled functions that refer to a namespace (cloudpickle, as Cubed's and Dask's workers
    use) find it again this way."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        parts = fullname.split(".")
        if parts[0] != __name__ or len(parts) not in (2, 3) or parts[1].startswith("_"):
            return None
        if len(parts) == 3 and parts[2] not in ("linalg", "fft"):
            return None
        try:
            importlib.util.find_spec(parts[1])
        except (ImportError, ValueError):
            return None
        if importlib.util.find_spec(parts[1]) is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        parts = spec.name.split(".")
        mod = namespace(importlib.import_module(parts[1]))
        return getattr(mod, parts[2]) if len(parts) == 3 else mod

    def exec_module(self, module: ModuleType) -> None:
        pass


sys.meta_path.append(_NamespaceImporter())
