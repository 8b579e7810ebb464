"""NumPy's names on a namespace module over NumPy (``xp.pad``, ``xp.quantile``,
``xp.lib.stride_tricks``, ``xp.special``): the module ``__getattr__`` (PEP 562)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .._primitive import REGISTRY
from ..namespace._array import Array
from ..namespace._frontend import FOREIGN_UFUNCS
from ._convert import _PY_SCALARS, _array, _unsupported
from ._dispatch import FUNCTIONS, _function
from .ufuncs import _float_of

# -- NumPy's names on the namespace module ---------------------------------------------------------


class _Names:
    """``xp.lib.stride_tricks``: the mapped NumPy functions under a dotted prefix."""

    def __init__(self, mod: Any, prefix: str) -> None:
        self._mod, self._prefix = mod, prefix

    def __getattr__(self, name: str) -> Any:
        return _numpy_name_of(self._mod, f"{self._prefix}.{name}")


def _numpy_name_of(mod: Any, name: str) -> Any:
    entry = FUNCTIONS.get(name)
    if entry is not None:
        f = functools.partial(entry, mod)
        functools.update_wrapper(f, entry)
        f.__name__ = name.rsplit(".", 1)[-1]  # type: ignore[attr-defined]
        return f
    if any(k.startswith(name + ".") for k in FUNCTIONS):
        return _Names(mod, name)
    raise AttributeError(f"module {mod.__name__!r} has no attribute {name!r}")


class _Special:
    """``xp.special``: the functions of :data:`FOREIGN_UFUNCS` (scipy.special's names) as the
    rows that compute them. scipy.special with ``SCIPY_ARRAY_API=1`` looks for
    ``xp.special.<name>`` (the anticipated 'special' extension of the standard) before it
    converts to NumPy, so ``scipy.special.erf(x)`` on our arrays runs the ``_erf`` row."""

    def __init__(self, mod: Any) -> None:
        self._mod = mod

    def __getattr__(self, name: str) -> Any:
        row = FOREIGN_UFUNCS.get(name)
        if row is None or row not in REGISTRY:
            raise AttributeError(f"{self._mod.__name__}.special has no function {name!r}")
        mod, fn = self._mod, _function(self._mod, row)

        def f(*args: Any, **kwargs: Any) -> Any:
            if kwargs:
                raise _unsupported(f"special.{name}", ", ".join(f"{k}=" for k in kwargs))
            xs = [a if type(a) in _PY_SCALARS else _float_of(mod, _array(mod, a)) for a in args]
            if not any(isinstance(a, Array) for a in xs):
                xs[0] = _float_of(mod, _array(mod, xs[0]))
            return fn(*xs)

        f.__name__ = f.__qualname__ = name
        return f

    def __dir__(self) -> list[str]:
        return sorted(n for n, r in FOREIGN_UFUNCS.items() if r in REGISTRY)


def numpy_names(mod: Any) -> Callable[[str], Any]:
    """The module ``__getattr__`` (PEP 562) of a namespace over NumPy: code that takes NumPy's
    names from the array's namespace (xarray's ``xp.transpose``, ``xp.pad``, ``xp.quantile``,
    ``xp.lib.stride_tricks.sliding_window_view``) gets the mapped compositions of
    :data:`FUNCTIONS`, with NumPy's signatures; ``xp.special`` is scipy.special's ufuncs that
    have rows (:class:`_Special`). The standard's names are the module's own
    attributes and never reach it; ``dir()`` lists only those."""

    def __getattr__(name: str) -> Any:  # noqa: N807
        if name.startswith("_"):
            raise AttributeError(f"module {mod.__name__!r} has no attribute {name!r}")
        if name == "special":
            return _Special(mod)
        return _numpy_name_of(mod, name)

    return __getattr__
