"""The complete primitive table: importing this module declares every row of every category."""

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
from ._ops import REGISTRY

__all__ = ["REGISTRY"]
