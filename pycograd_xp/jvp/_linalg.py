"""JVP rules of the linalg extension: products bilinear, extractions linear, and the
decompositions derived from their VJP rules (see ``_helpers.transposed``)."""

from __future__ import annotations

from .._primitive import REGISTRY
from ..ops._rules.jvp import linear_rows, transposed_rows
from ..ops.linear_algebra import bilinear

for _n in ("linalg.outer", "linalg.cross"):  # transitional, until linalg moves to ops/linalg.py
    REGISTRY[_n].defjvp(bilinear(REGISTRY[_n]))
linear_rows("linalg.diagonal", "linalg.trace")
transposed_rows(
    "linalg.cholesky", "linalg.det", "linalg.eig", "linalg.eigh", "linalg.eigvals",
    "linalg.eigvalsh", "linalg.inv", "linalg.matrix_norm", "linalg.matrix_power",
    "linalg.pinv", "linalg.qr", "linalg.slogdet", "linalg.solve", "linalg.svd",
    "linalg.svdvals", "linalg.vector_norm",
)  # fmt: skip
