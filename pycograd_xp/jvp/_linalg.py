"""JVP rules of the linalg extension: products bilinear, extractions linear, and the
decompositions derived from their VJP rules (see ``_helpers.transposed``)."""

from __future__ import annotations

from ._helpers import linear, transposed
from ._linear_algebra import bilinear

bilinear("linalg.outer")
bilinear("linalg.cross")
linear("linalg.diagonal", "linalg.trace")
transposed(
    "linalg.cholesky", "linalg.det", "linalg.eig", "linalg.eigh", "linalg.eigvals",
    "linalg.eigvalsh", "linalg.inv", "linalg.matrix_norm", "linalg.matrix_power",
    "linalg.pinv", "linalg.qr", "linalg.slogdet", "linalg.solve", "linalg.svd",
    "linalg.svdvals", "linalg.vector_norm",
)  # fmt: skip
