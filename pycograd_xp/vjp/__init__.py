"""Derivative rules, one module per spec category, mirroring ``pycograd_xp.namespace``.

Importing this package attaches a VJP rule (or a non-differentiable declaration) to every row of
the primitive table. A rule is Array-API code: ``rule(ns, g, out, *args, **kwargs)`` gets the
raw backend namespace for a first-order backward and the differentiable namespace itself when a
higher-order gradient is asked for.
"""

from ..namespace import _table  # noqa: F401  (the rows the rules attach to)
from . import (  # noqa: F401
    _creation,
    _data_types,
    _elementwise,
    _fft,
    _indexing,
    _linalg,
    _linear_algebra,
    _manipulation,
    _searching,
    _set,
    _sorting,
    _statistical,
    _utility,
)
