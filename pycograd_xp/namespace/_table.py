"""The complete primitive table: importing this module declares every row of every category."""

import importlib
import importlib.util

from .._primitive import REGISTRY

# The spec's categories, one module each here and one each in pycograd_xp.vjp (their rules);
# "_nn" holds the fused convolution and pooling rows behind pycograd_xp.nn (private names).
CATEGORY_MODULES = ("_creation", "_data_types", "_elementwise", "_fft", "_indexing", "_linalg",
                    "_linear_algebra", "_manipulation", "_searching", "_set", "_sorting",
                    "_statistical", "_utility", "_nn")  # fmt: skip
for _m in CATEGORY_MODULES:  # transitional: the categories not yet moved to pycograd_xp.ops
    if importlib.util.find_spec(f"{__package__}.{_m}") is not None:
        importlib.import_module(f".{_m}", __package__)

__all__ = ["CATEGORY_MODULES", "REGISTRY"]
