"""matmul, tensordot and vecdot batch as one product, never one per example: a batched vector or
matrix against an unbatched matrix folds the batch into the rows of a single matrix product;
two batched operands use matmul's own stacking."""

from __future__ import annotations

from .._primitive import defbatch
from ..ops._rules.batching import align, to_rank
from ..ops._rules.vjp import tensordot_axes


def _matmul(ns, dims, x1, x2, /):
    b1, b2 = dims
    r1, r2 = x1.ndim - b1, x2.ndim - b2
    if b1 and not b2:
        if r1 == 1:
            if r2 <= 2:  # (B, n) @ (n,) or (n, m): one product
                return ns.matmul(x1, x2)
            y = ns.matmul(to_rank(ns, x1[:, None, :], r2), x2)  # (B, ..., 1, m)
            return y[..., 0, :]
        if r2 == 2 and r1 == 2:  # (B, k, n) @ (n, m) as (B*k, n) @ (n, m)
            n, k = x1.shape[0], x1.shape[1]
            return ns.reshape(ns.matmul(ns.reshape(x1, (n * k, x1.shape[2])), x2),
                              (n, k, x2.shape[1]))  # fmt: skip
        return ns.matmul(to_rank(ns, x1, max(r1, r2)), x2)
    if b2 and not b1:
        if r2 == 1:
            if r1 == 1:
                return ns.matmul(x2, x1)
            if r1 == 2:  # (k, n) @ v for each v: (B, n) @ (n, k)
                return ns.matmul(x2, ns.matrix_transpose(x1))
            return ns.moveaxis(ns.matmul(x1, ns.matrix_transpose(x2)), -1, 0)
        if r1 == 1:
            return ns.matmul(x1, x2)
        if r1 == 2:  # (k, n) @ (B, ..., n, m): one product over (n, B*...*m)
            n, shape = x2.shape[-2], tuple(x2.shape)
            t = ns.moveaxis(x2, -2, 0)  # (n, B, ..., m)
            y = ns.matmul(x1, ns.reshape(t, (n, -1)))  # (k, B*...*m)
            y = ns.reshape(y, (x1.shape[0], *shape[:-2], shape[-1]))
            return ns.moveaxis(y, 0, -2)
        return ns.matmul(x1, to_rank(ns, x2, max(r1, r2)))
    # both batched
    if r1 == 1 and r2 == 1:
        return ns.sum(x1 * x2, axis=-1)
    if r1 == 1:
        return ns.matmul(to_rank(ns, x1[:, None, :], r2), x2)[..., 0, :]
    if r2 == 1:
        return ns.matmul(x1, to_rank(ns, x2[..., None], r1))[..., 0]
    r = max(r1, r2)
    return ns.matmul(to_rank(ns, x1, r), to_rank(ns, x2, r))


def _tensordot(ns, dims, x1, x2, /, *, axes=2):
    b1, b2 = dims
    r1, r2 = x1.ndim - b1, x2.ndim - b2
    a1, a2 = tensordot_axes(axes, r1, r2)
    if b1 and not b2:
        return ns.tensordot(x1, x2, axes=([i + 1 for i in a1], a2))
    if b2 and not b1:
        y = ns.tensordot(x1, x2, axes=(a1, [i + 1 for i in a2]))
        return ns.moveaxis(y, r1 - len(a1), 0)
    n = x1.shape[0]
    f1 = [i for i in range(r1) if i not in a1]
    f2 = [i for i in range(r2) if i not in a2]
    s1 = [x1.shape[i + 1] for i in f1]
    s2 = [x2.shape[i + 1] for i in f2]
    p1 = ns.permute_dims(x1, (0, *[i + 1 for i in f1], *[i + 1 for i in a1]))
    p2 = ns.permute_dims(x2, (0, *[i + 1 for i in a2], *[i + 1 for i in f2]))
    c = 1
    for i in a1:
        c *= x1.shape[i + 1]
    m1 = ns.reshape(p1, (n, -1, c))
    m2 = ns.reshape(p2, (n, c, -1))
    return ns.reshape(ns.matmul(m1, m2), (n, *s1, *s2))


def _vecdot(ns, dims, x1, x2, /, *, axis=-1):
    x1, x2 = align(ns, dims, x1, x2)
    if axis >= 0:
        axis = axis - max(x1.ndim, x2.ndim)
    return ns.vecdot(x1, x2, axis=axis)


defbatch("matmul", _matmul)
defbatch("tensordot", _tensordot)
defbatch("vecdot", _vecdot)
defbatch("matrix_transpose", lambda ns, dims, x, /: ns.matrix_transpose(x))
