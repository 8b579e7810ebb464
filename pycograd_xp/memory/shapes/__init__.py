"""Shape rules (abstract evaluation), one module per spec category, mirroring
``pycograd_xp.namespace``: importing this package attaches ``Primitive.shape`` (and, where the
backend call allocates more than its outputs, ``Primitive.memory``) to every row."""

import importlib
import importlib.util

from ...namespace._table import CATEGORY_MODULES

for _m in CATEGORY_MODULES:  # transitional: the categories not yet moved to pycograd_xp.ops
    if importlib.util.find_spec(f"{__name__}.{_m}") is not None:
        importlib.import_module(f".{_m}", __name__)
