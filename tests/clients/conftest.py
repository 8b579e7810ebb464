"""The client-library suite: other libraries' Array API code run on pycograd_xp arrays.

SciPy reads SCIPY_ARRAY_API once, when it is first imported, and scikit-learn's array API
dispatch requires it: set it before anything imports SciPy.
"""

from __future__ import annotations

import os
import sys

os.environ["SCIPY_ARRAY_API"] = "1"
if "scipy" in sys.modules:  # pragma: no cover - only when another plugin imported SciPy first
    import warnings

    warnings.warn(
        "SciPy was imported before tests/clients/conftest.py set SCIPY_ARRAY_API=1; "
        "its array API support may be off",
        stacklevel=1,
    )
