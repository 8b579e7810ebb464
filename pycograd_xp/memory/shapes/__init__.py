"""Shape rules (abstract evaluation), one module per spec category, mirroring
``pycograd_xp.namespace``: importing this package attaches ``Primitive.shape`` (and, where the
backend call allocates more than its outputs, ``Primitive.memory``) to every row."""

import importlib

from ...namespace._table import CATEGORY_MODULES

for _m in CATEGORY_MODULES:
    try:
        importlib.import_module(f".{_m}", __name__)
    except ModuleNotFoundError as e:  # a category whose rules are not written yet
        if e.name != f"{__name__}.{_m}":
            raise
