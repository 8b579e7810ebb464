"""pycograd_xp: reverse-mode autodiff for any Python Array API backend.

``xp = pycograd_xp.namespace(backend)`` returns a complete Array API namespace (standard 2025.12,
with ``linalg`` and ``fft``) over ``backend`` (NumPy by default) whose arrays carry tape nodes.
``from pycograd_xp import numpy as xp`` is the same as ``namespace(numpy)``; likewise for every
installed backend module name.

Differentiate with JAX's functional names (``grad``, ``value_and_grad``, ``vjp``) or PyTorch's
imperative ones (``x.requires_grad_()``, ``loss.backward()``, ``x.grad``).
"""

from __future__ import annotations

import sys

from . import (
    _modules,
    numpy_api,  # noqa: F401  (NumPy's protocols for namespaces over NumPy, before any is built)
    ops,  # noqa: F401  (the rows and their rules, first: namespaces are built from them)
    special,  # noqa: F401  (pycograd_xp.special: scipy.special's functions as rows)
)
from ._api import enable_grad, grad, no_grad, stop_gradient, value_and_grad
from ._compile import TracingError
from ._compile import compile as compile  # public, not in __all__: see below
from ._custom import custom_jvp, custom_vjp
from ._forward import hessian, jacfwd, jacrev, jvp, linearize
from ._nans import debug_nans
from ._remat import remat
from ._vjp import vjp
from ._vmap import vmap
from .namespace import Array, AxisError, namespace, unwrap
from .tree import tree_flatten, tree_leaves, tree_map, tree_unflatten

__all__ = [
    "Array",
    "AxisError",
    "TracingError",
    "custom_jvp",
    "custom_vjp",
    "debug_nans",
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

# ``pg.optim``, ``pg.nn``, ...: imported on first use; ``pg.numpy``, ``pg.cubed``, ...: the
# namespace over each installed array backend; ``__version__``: the installed package's (read
# on first use: pyproject.toml is the one place it is written); anything else: AttributeError
# (``_modules``).
__getattr__ = _modules.module_getattr(namespace, globals())


def __dir__() -> list[str]:
    return _modules.public_names(globals())


sys.meta_path.append(_modules.NamespaceImporter(namespace))
