"""Where the NumPy frontend (:mod:`pycograd_xp.numpy_api`, the toolkit layer) plugs into the
namespaces over NumPy, and what the namespace layer itself needs of NumPy's types.

The frontend (``__array_ufunc__``/``__array_function__`` and NumPy's names on the module) sits
above the namespace layer: it is a client of the namespace's functions. ``build`` gives a
namespace over NumPy the frontend through :func:`numpy_frontend`, which the frontend fills with
:func:`plug_numpy_frontend` when it is imported (``pycograd_xp/__init__.py`` imports it before
any namespace is built). Ops modules register the ufuncs of other libraries here
(:func:`register_ufuncs`), below the frontend that reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

# NumPy's own arrays and scalars: an operand of these in an operator of ours is a constant
# (namespace._operators.install_operators), as NumPy's operators make ours an operand of a ufunc.
NUMPY_CONSTANTS = (np.ndarray, np.generic)

# Ufuncs of other libraries (scipy.special's), by ``ufunc.__name__`` -> the name of the row that
# computes them (``REGISTRY``): filled by the ops modules that declare those rows.
FOREIGN_UFUNCS: dict[str, str] = {}


def register_ufuncs(table: Mapping[str, str]) -> None:
    """Make the ufuncs named in ``table`` (``ufunc.__name__`` of a library's ufunc that is not
    NumPy's own, e.g. scipy.special's ``"erf"``) dispatch to the rows named there (a row's name
    in ``REGISTRY``, e.g. ``"_erf"``) when they meet our arrays. A name registered twice for
    different rows raises."""
    for name, row in table.items():
        old = FOREIGN_UFUNCS.get(name)
        if old is not None and old != row:
            raise ValueError(f"register_ufuncs: {name!r} is already mapped to row {old!r}")
        FOREIGN_UFUNCS[name] = row


# The frontend: ``install(Array class)`` (the protocols, ``len``) and ``names(module)`` (the
# module ``__getattr__`` giving NumPy's names); set once, by pycograd_xp.numpy_api.
_FRONTEND: list[tuple[Callable[[type], None], Callable[[Any], Callable[[str], Any]]]] = []


def plug_numpy_frontend(
    install: Callable[[type], None], names: Callable[[Any], Callable[[str], Any]]
) -> None:
    """Called by :mod:`pycograd_xp.numpy_api` on import: how a namespace over NumPy gets the
    protocols (``install(cls)``) and NumPy's names (``names(mod)``)."""
    _FRONTEND[:] = [(install, names)]


def numpy_frontend() -> tuple[Callable[[type], None], Callable[[Any], Callable[[str], Any]]]:
    """The frontend's ``(install, names)``, for ``build``."""
    if not _FRONTEND:
        raise RuntimeError(
            "pycograd_xp.namespace: a namespace over NumPy needs the NumPy frontend, which is "
            "not imported; import pycograd_xp (its __init__ imports pycograd_xp.numpy_api) "
            "before building a namespace"
        )
    return _FRONTEND[0]


# -- NumPy index arrays in our arrays' keys ------------------------------------------------------


def index_constants(mod: Any) -> Callable[[Any], Any]:
    """For ``x[key]`` and ``x[key] = v`` on a namespace over NumPy: NumPy integer and boolean
    arrays in ``key`` (xarray's groupby indexes with them) become constant arrays of ``mod``,
    as NumPy arrays do everywhere else in the protocols (an index carries no gradient)."""

    def convert(key: Any) -> Any:
        t = type(key)
        if t is np.ndarray:
            return mod.asarray(key) if key.dtype.kind in "iub" else key
        if t is tuple and any(type(k) is np.ndarray for k in key):
            return tuple(convert(k) for k in key)
        return key

    return convert
