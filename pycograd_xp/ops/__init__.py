"""Every function of the standard, one block per op: its row and all of its rules.

One module per category of the standard (its table of contents, as in array-api-strict), plus
``nn`` for the fused rows behind :mod:`pycograd_xp.nn` and ``special`` for scipy.special's
functions behind :mod:`pycograd_xp.special`. A block declares the row (how the backend
is called, which dtypes it accepts) and attaches beside it everything the transforms need: the
VJP with the arguments it saves, the JVP, the batching rule, the shape rule with the bytes the
backend call allocates. The shared kits of rules live in ``ops/_rules``. Importing this package
declares every row and attaches every rule; the rows are frozen after.

``python -m pycograd_xp.ops --matrix`` prints op × rule kind with the file and line of each rule.
"""

import importlib

from .. import _abstract
from .._primitive import REGISTRY, Primitive, freeze

# The spec's categories, in its order, then the rows behind pycograd_xp.nn and .special: importing
# each declares its rows and attaches their rules.
CATEGORIES = tuple(
    importlib.import_module(f"{__name__}.{name}")
    for name in (
        "creation",
        "data_types",
        "elementwise",
        "fft",
        "indexing",
        "linalg",
        "linear_algebra",
        "manipulation",
        "searching",
        "set",
        "sorting",
        "statistical",
        "utility",
        "nn",
        "special",
    )
)

_abstract.populate()
freeze()

__all__ = ["CATEGORIES", "REGISTRY", "Primitive"]
