"""Cubed-specific integration for pycograd_xp (memory checks, callbacks, chunked training).

The core package never imports Cubed; everything that needs it lives here. For now this holds
the helpers the tests and the conformance harness use to make the Cubed namespace.
"""

from __future__ import annotations

from types import ModuleType


def namespace() -> ModuleType:
    """``pycograd_xp.namespace(cubed)``; raises ImportError with the install hint if absent."""
    try:
        import cubed
    except ImportError as e:  # pragma: no cover - exercised only without the extra
        raise ImportError("cubed_plugin needs Cubed: pip install 'pycograd-xp[cubed]'") from e
    import pycograd_xp

    return pycograd_xp.namespace(cubed)
