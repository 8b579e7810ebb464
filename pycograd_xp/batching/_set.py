"""isin batches (a batched set: compare against each example's elements); the unique_* rows
have outputs whose length depends on each example's data."""

from __future__ import annotations

from .._primitive import defbatch, unbatchable


def _isin(ns, dims, x1, x2, /, *, invert=False):
    if not dims[1]:
        return ns.isin(x1, x2, invert=invert)
    n = x2.shape[0]
    if not dims[0]:
        x1 = ns.broadcast_to(x1, (n, *x1.shape))
    r = x1.ndim - 1
    found = ns.any(x1[..., None] == ns.reshape(x2, (n, *(1,) * r, -1)), axis=-1)
    return ns.logical_not(found) if invert else found


defbatch("isin", _isin)
unbatchable("its output's length depends on each example's data (the examples' results would "
            "not stack)", "unique_all", "unique_counts", "unique_inverse",
            "unique_values")  # fmt: skip
