"""Shape rules (abstract evaluation), one module per spec category, mirroring
``pycograd_xp.namespace``: importing this package attaches ``Primitive.shape`` (and, where the
backend call allocates more than its outputs, ``Primitive.memory``) to every row."""

import importlib

from ...namespace._table import CATEGORY_MODULES

for _m in CATEGORY_MODULES:
    importlib.import_module(f".{_m}", __name__)
