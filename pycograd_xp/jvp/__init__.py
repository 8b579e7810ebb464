"""Forward-mode (JVP) rules, one module per spec category, mirroring ``pycograd_xp.vjp``.

Importing this package attaches a forward-mode path to every differentiable row: a rule
``rule(ns, tangents, out, *args, **kwargs)`` written as Array-API code (the raw backend for a
first-order ``jvp``, the differentiable namespace when the tangent is itself differentiated),
of one of three kinds, declared beside its neighbours:

* hand-written rules for the hot rows (elementwise functions, products);
* :func:`~._helpers.linear` for rows linear in their floating arguments (reshapes, gathers,
  sums, FFTs): the tangent is the row itself applied to the tangents;
* :func:`~._helpers.transposed` for the rest (decompositions, sorts, order statistics,
  scatters): the JVP derived from the row's VJP rule by transposing it, ``J t = (g -> J^T g)^T t``,
  at the price of two VJP-rule evaluations.
"""

import importlib
import importlib.util

from ..namespace._table import CATEGORY_MODULES

for _m in CATEGORY_MODULES:  # transitional: the categories not yet moved to pycograd_xp.ops
    if importlib.util.find_spec(f"{__name__}.{_m}") is not None:
        importlib.import_module(f".{_m}", __name__)
