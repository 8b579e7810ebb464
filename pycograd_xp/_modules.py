"""What ``pycograd_xp.<name>`` is, beyond the names the package binds when imported.

- Our submodules (``pg.optim``, ``pg.nn``, ...), imported on first use (PEP 562), so that
  ``import pycograd_xp`` stays as cheap as it is.
- A differentiable namespace per installed array backend (``from pycograd_xp import numpy as
  xp``, ``pg.cubed``; ``import pycograd_xp.numpy`` too, which is how pickled functions that
  refer to a namespace find it again in a worker process). A name is a backend only when it is
  known to be one without importing anything: a backend of the table below (what
  array-api-compat recognises, and Cubed), one an adapter is installed for (the
  ``pycograd_xp.adapters`` entry-point group) or registered for at run time, or a module
  already imported that implements the standard. Only then is the module looked up
  (``importlib.util.find_spec``) and imported.
- ``__version__``: the installed distribution's, read from its metadata on first use.
- Any other name raises AttributeError, with the closest public names as a suggestion, having
  imported nothing (``pg.this`` does not print the Zen of Python).
"""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from types import ModuleType
from typing import Any

PACKAGE = __name__.rpartition(".")[0]

# Public submodules, imported when first read as attributes.
SUBMODULES = (
    "checkpoint",
    "data",
    "memory",
    "nn",
    "optim",
    "random",
    "special",
    "train",
    "tree",
    "typing",
)

# Backends by the short name of their namespace (``pycograd_xp.<short name>``, see
# namespace._backend._short_name) -> the module to import: those array-api-compat recognises
# (its ``is_*_namespace`` helpers) and Cubed.
BACKENDS = {
    "array_api_strict": "array_api_strict",
    "cubed": "cubed",
    "cupy": "cupy",
    "dask_array": "dask.array",
    "dpnp": "dpnp",
    "jax_numpy": "jax.numpy",
    "mparray": "mparray",
    "ndonnx": "ndonnx",
    "numpy": "numpy",
    "sparse": "sparse",
    "torch": "torch",
}


def version() -> str:
    """The installed distribution's version (``pyproject.toml`` is the one place it is
    written); "0+unknown" when the package runs from a source tree that was never installed."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("pycograd-xp")
    except PackageNotFoundError:
        return "0+unknown"


@functools.cache
def _installed_adapters() -> frozenset[str]:
    from importlib.metadata import entry_points

    return frozenset(ep.name for ep in entry_points(group="pycograd_xp.adapters"))


def _adapter_names() -> set[str]:
    from .namespace._backend import _ADAPTERS

    return set(_installed_adapters()) | set(_ADAPTERS)


def _is_array_namespace(mod: Any) -> bool:
    return hasattr(mod, "__array_api_version__") and hasattr(mod, "asarray")


def backend_module(name: str) -> str | None:
    """The module to import for the namespace ``pycograd_xp.<name>``, or None when ``name`` is
    not known to be an array backend. Imports nothing."""
    if name.startswith("_") or not name.isidentifier():
        return None
    if name in BACKENDS:
        return BACKENDS[name]
    if _is_array_namespace(sys.modules.get(name)) or name in _adapter_names():
        return name
    return None


def _installed(module: str) -> bool:
    """Whether ``module`` can be imported; for a dotted name this imports its parents."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing or broken
        return False


def public_names(bound: Mapping[str, Any]) -> list[str]:
    """Every public attribute of the package, for ``dir()`` and suggestions: what it binds at
    import (``bound``, its globals, less private names and the modules of others it uses),
    the submodules, and the namespaces of the known backends whose top-level package is
    installed (looked up, not imported)."""
    names = {
        n
        for n, v in bound.items()
        if (not n.startswith("_") or (n.startswith("__") and n.endswith("__")))
        and n != "annotations"  # ``from __future__ import annotations``
        and not (isinstance(v, ModuleType) and not v.__name__.startswith(PACKAGE + "."))
    }
    backends = set(BACKENDS) | _adapter_names()
    names |= {b for b in backends if _installed(BACKENDS.get(b, b).partition(".")[0])}
    return sorted(names | set(SUBMODULES) | {"__version__"})


def module_getattr(
    namespace: Callable[[Any], ModuleType], bound: MutableMapping[str, Any]
) -> Callable[[str], Any]:
    """The package's ``__getattr__`` (PEP 562), given ``namespace`` and its globals
    (``bound``: ``__version__`` is stored there once read)."""

    def getattr_(name: str) -> Any:
        if name == "__version__":
            v = bound["__version__"] = version()
            return v
        if name.startswith("_"):  # probed often (``__wrapped__``, ...): fail fast
            raise AttributeError(f"module {PACKAGE!r} has no attribute {name!r}", name=name)
        if name in SUBMODULES:
            return importlib.import_module(f"{PACKAGE}.{name}")
        module = backend_module(name)
        if module is not None:
            if not _installed(module):
                raise AttributeError(
                    f"module {PACKAGE!r} has no attribute {name!r}: it names the namespace over "
                    f"the array backend {module!r}, which is not installed"
                )
            return namespace(importlib.import_module(module))
        raise AttributeError(_no_attribute(name, bound), name=name, obj=sys.modules[PACKAGE])

    return getattr_


def _no_attribute(name: str, bound: Mapping[str, Any]) -> str:
    import difflib

    msg = f"module {PACKAGE!r} has no attribute {name!r}"
    close = difflib.get_close_matches(name, public_names(bound), n=3)
    if close:
        msg += "; did you mean " + " or ".join(repr(c) for c in close) + "?"
    if name.isidentifier() and not name.startswith("_") and _installed(name):
        msg += (
            f" (a module {name!r} is installed, but it is not known to be an array backend: "
            f"pass it to {PACKAGE}.namespace() if it implements the Array API standard)"
        )
    return msg


class NamespaceImporter(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``import pycograd_xp.numpy`` (and ``.linalg``/``.fft`` under it) in any process: the
    namespace made for that backend, for the names :func:`backend_module` knows. Last on
    ``sys.meta_path``, so real submodules come first. Pickled functions that refer to a
    namespace (cloudpickle, as Cubed's and Dask's workers use) find it again this way."""

    def __init__(self, namespace: Callable[[Any], ModuleType]) -> None:
        self.namespace = namespace

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        parts = fullname.split(".")
        if parts[0] != PACKAGE or len(parts) not in (2, 3):
            return None
        if len(parts) == 3 and parts[2] not in ("linalg", "fft"):
            return None
        module = backend_module(parts[1])
        if module is None or not _installed(module):
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        parts = spec.name.split(".")
        mod = self.namespace(importlib.import_module(backend_module(parts[1]) or parts[1]))
        return getattr(mod, parts[2]) if len(parts) == 3 else mod

    def exec_module(self, module: ModuleType) -> None:
        pass
