"""Derivative rules, one module per spec category, mirroring ``pycograd_xp.namespace``.

Importing this package attaches a VJP rule (or a non-differentiable declaration) to every row of
the primitive table. A rule is Array-API code: ``rule(ns, g, out, *args, **kwargs)`` gets the
raw backend namespace for a first-order backward and the differentiable namespace itself when a
higher-order gradient is asked for.
"""

import importlib
import importlib.util

from ..namespace._table import CATEGORY_MODULES

for _m in CATEGORY_MODULES:  # transitional: the categories not yet moved to pycograd_xp.ops
    if importlib.util.find_spec(f"{__name__}.{_m}") is not None:
        importlib.import_module(f".{_m}", __name__)
