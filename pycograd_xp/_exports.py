"""What ``dir()`` of a public submodule lists (a module of the lowest layer: every public module,
the tree utilities included, uses it)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def module_dir(bound: Mapping[str, Any]) -> Callable[[], list[str]]:
    """A public submodule's ``__dir__``, given its globals: its ``__all__`` and its dunders,
    without the names it imports for its own use (``np``, ``math``, ``Any``), which completion
    would offer."""
    return lambda: sorted({*bound["__all__"], *(n for n in bound if n[:2] == n[-2:] == "__")})
