"""Batching rules for ``pycograd_xp.vmap``, one module per spec category, mirroring
``pycograd_xp.vjp``.

Importing this package attaches a batching rule (or an ``unbatchable`` declaration with its
reason) to every row of the primitive table. A rule is Array-API code:
``rule(ns, dims, *args, **kwargs)`` gets the inner namespace ``ns`` (ours: its tape records
what the rule does), one flag per positional argument saying whether it is batched (a list of
flags for a list argument), and the arguments, batched ones with the batch on axis 0. It returns
the result with the batch on axis 0; the engine calls it only when some argument is batched.
Most rules shift ``axis`` arguments past the batch axis; elementwise rules align ranks and
broadcast; matmul, linalg and fft work on trailing axes, so the batch rides along as one more
leading axis.
"""

import importlib
import importlib.util

from ..namespace._table import CATEGORY_MODULES

for _m in CATEGORY_MODULES:  # transitional: the categories not yet moved to pycograd_xp.ops
    if importlib.util.find_spec(f"{__name__}.{_m}") is not None:
        importlib.import_module(f".{_m}", __name__)
