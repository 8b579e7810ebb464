"""linalg rows work on the last one or two axes of stacks: the batch is one more stacking axis.
Two-operand rows align the stacks like matmul does; solve with a vector right-hand side turns it
into a one-column matrix first (a batch of vectors would read as a matrix)."""

from __future__ import annotations

from .._primitive import defbatch
from ..ops._rules.batching import align, fn, shift, to_rank


def _stacked(name):
    return lambda ns, dims, x, /, *args, **kw: fn(ns, name)(x, *args, **kw)


def _with_rtol(name):
    def rule(ns, dims, x, /, *, rtol=None):
        if getattr(rtol, "batched", False):
            rtol = to_rank(ns, rtol.data, x.ndim - 3) if x.ndim > 3 else rtol.data
        elif rtol is not None and hasattr(rtol, "data"):
            rtol = rtol.data
        return fn(ns, name)(x, rtol=rtol)

    return rule


def _solve(ns, dims, x1, x2, /):
    b1, b2 = dims
    r2 = x2.ndim - b2
    if r2 == 1:
        col = x2[..., None]
        if b1 and not b2:
            col = ns.broadcast_to(col, (x1.shape[0], *col.shape))
        return ns.linalg.solve(x1, col)[..., 0]
    r1 = x1.ndim - b1
    r = max(r1, r2)
    x1 = to_rank(ns, x1, r) if b1 else x1
    x2 = to_rank(ns, x2, r) if b2 else x2
    if b1 and not b2:
        x2 = ns.broadcast_to(x2, (x1.shape[0], *x2.shape))
    return ns.linalg.solve(x1, x2)


def _outer(ns, dims, x1, x2, /):
    a = x1[..., None]
    b = x2[:, None, :] if dims[1] else x2[None, :]
    return ns.multiply(a, b)


def _cross(ns, dims, x1, x2, /, *, axis=-1):
    x1, x2 = align(ns, dims, x1, x2)
    if axis >= 0:
        axis = axis - max(x1.ndim, x2.ndim)
    return ns.linalg.cross(x1, x2, axis=axis)


def _vector_norm(ns, dims, x, /, *, axis=None, keepdims=False, ord=2):
    nd = x.ndim - 1
    axis = tuple(range(1, nd + 1)) if axis is None else shift(axis, nd)
    return ns.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord)


for _n in ("cholesky", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh", "inv",
           "matrix_norm", "matrix_power", "qr", "slogdet", "svd", "svdvals", "trace"):  # fmt: skip
    defbatch(f"linalg.{_n}", _stacked(f"linalg.{_n}"))
for _n in ("matrix_rank", "pinv"):
    defbatch(f"linalg.{_n}", _with_rtol(f"linalg.{_n}"))
defbatch("linalg.solve", _solve)
defbatch("linalg.outer", _outer)
defbatch("linalg.cross", _cross)
defbatch("linalg.vector_norm", _vector_norm)
