"""The attention row ``_attention`` (:func:`pycograd_xp.nn.scaled_dot_product_attention`): it
keeps q, k, v, its output and each row's log-sum-exp, and recomputes the probabilities block by
block (flash style: a block of at most ``ATTENTION_BLOCK_BYTES`` of scores, ``CAUSAL_ROWS``
query rows of a causal block; never a score matrix for the whole batch).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..._primitive import Array, primitive
from .._rules.batching import batch_size, batched, to_rank
from .._rules.jvp import TRANSPOSED
from .._rules.shapes import BUFFER_ELEMENTS, broadcast, new
from .pieces import FP, _exp_in_place, _sum_to, in_place, piece_size, pieces
from .windows import _like, _own, itemsize

# -- kits: attention -----------------------------------------------------------------------------

# Flash-style attention keeps each block of scores (batch items x heads x query rows x keys)
# within this many bytes: the forward holds one block and its exponentials, the backward one
# block of probabilities and one of their cotangents. Never an L x L array for the whole batch
# (docs/calibration.md#attention-block-bytes).
ATTENTION_BLOCK_BYTES = 2 * 2**20


# With a causal mask the queries go in blocks of at most this many rows, each against the keys
# up to its last row only: about half the products and exponentials of the full square
# (measured: docs/calibration.md#causal-rows).
CAUSAL_ROWS = 64


def heads(ns: Any, a: Any) -> Any:
    """``a`` (..., L, H, d) as (..., H, L, d): a view."""
    n = a.ndim
    return ns.permute_dims(a, (*range(n - 3), n - 2, n - 3, n - 1))


def _attention_shapes(q: Any, k: Any, v: Any) -> tuple[tuple[int, ...], int, int, int]:
    """(batch shape, Lq, Lk, H) of attention over q (*B, Lq, H, d), k (*B', Lk, H, d),
    v (*B'', Lk, H, dv); a clear error where they do not fit."""
    if q.ndim < 3 or k.ndim < 3 or v.ndim < 3:
        raise ValueError(
            "scaled_dot_product_attention(): q, k and v need (..., L, H, d) axes, got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    h, lk = q.shape[-2], k.shape[-3]
    if k.shape[-2] != h or v.shape[-2] != h or q.shape[-1] != k.shape[-1] or v.shape[-3] != lk:
        raise ValueError(
            "scaled_dot_product_attention(): q (..., Lq, H, d), k (..., Lk, H, d) and "
            f"v (..., Lk, H, dv) do not match: {tuple(q.shape)}, {tuple(k.shape)}, "
            f"{tuple(v.shape)}"
        )
    if lk == 0:
        raise ValueError("scaled_dot_product_attention(): there are no keys (Lk = 0)")
    batch = broadcast(tuple(q.shape[:-3]), tuple(k.shape[:-3]), tuple(v.shape[:-3]))
    return tuple(batch), q.shape[-3], lk, h


def _default_scale(q: Any) -> float:
    """``1 / sqrt(d)``, refused for q without features (d = 0) by name."""
    if q.shape[-1] == 0:
        raise ValueError(
            "scaled_dot_product_attention(): q and k have no features (d = 0), so the default "
            "scale 1 / sqrt(d) is undefined; give features, or pass scale="
        )
    return 1 / math.sqrt(q.shape[-1])


def attention_plan(
    batch: tuple[int, ...], lq: int, lk: int, h: int, item: int, causal_only: bool
) -> tuple[list[tuple[Any, ...]], int, int]:
    """How the blockwise attention goes, from ATTENTION_BLOCK_BYTES: (blocks of the batch, as
    index tuples over its axes; query rows a block; keys a block). A function of shapes only,
    so a projection and a compiled replay loop as the call does."""
    row = max(h, 1) * lk * item  # one query row of one batch item against every key (no
    if row <= ATTENTION_BLOCK_BYTES:  # head: a block as for one, of nothing)
        rows, keys = min(lq, ATTENTION_BLOCK_BYTES // row), lk
        if causal_only:
            rows = min(rows, CAUSAL_ROWS)
    else:  # keys in blocks too, with an online softmax
        rows = min(lq, 16)
        keys = max(1, ATTENTION_BLOCK_BYTES // (max(h, 1) * rows * item))
    rows, per = max(rows, 1), max(h, 1) * max(rows, 1) * keys * item
    blocks = []
    for idx in pieces(batch, per, 0, ATTENTION_BLOCK_BYTES):
        lead = idx[:-1]  # without the Ellipsis: one entry per batch axis
        blocks.append(lead + (slice(None),) * (len(batch) - len(lead)))
    return blocks, rows, keys


def _key_end(i1: int, lk: int, causal_only: bool) -> int:
    """The keys a block of queries ending at row ``i1`` reads (causal: up to its last row)."""
    return min(i1, lk) if causal_only else lk


def _additive(bk: Any, mask: Any) -> bool:
    """Whether ``mask`` is added to the scores (floating) rather than selecting them."""
    return mask is not None and not bk.isdtype(mask.dtype, "bool")


def _scores(ns, qs, k, kidx, i0, i1, j0, j1, causal, maskf, low, additive=False):
    """One block of masked scores ``qs k^T`` (nb, H, rows, keys) for query rows [i0, i1) and
    keys [j0, j1) (masked ones ``low``), with the block of a boolean mask where one is given
    (the causal triangle within it; None otherwise: a causal score is masked in place, an
    additive mask's block added in place)."""
    s = ns.matmul(qs, ns.matrix_transpose(heads(ns, k[kidx])))
    c0 = max(i0 + 1 - j0, 0)  # the first column where a key may follow a query row
    tri = None
    if causal and j1 - j0 > c0:
        rows = ns.arange(i0, i1, **_like(ns, s))[:, None]
        tri = rows >= ns.arange(j0 + c0, j1, **_like(ns, s))[None, :]
    if additive:
        s += maskf[(..., slice(i0, i1), slice(j0, j1))]  # s has the promoted dtype
    if maskf is None or additive:
        if tri is not None:  # only the columns the triangle crosses
            s[..., c0:] += _causal_bias(ns, tri, low, s)
        return s, None
    allowed = maskf[(..., slice(i0, i1), slice(j0, j1))]
    if tri is not None:
        full = ns.ones((i1 - i0, c0), dtype=ns.bool, **_like(ns, s))
        allowed = ns.logical_and(allowed, ns.concat([full, tri], axis=-1) if c0 else tri)
    return ns.where(allowed, s, low), allowed


def _causal_bias(ns: Any, tri: Any, low: float, s: Any) -> Any:
    """The causal triangle's block as an additive bias of ``s``'s dtype: 0 where a key may
    follow a query row, ``low`` above the diagonal. Added to the scores in place (one pass, no
    array beside them: a ``where`` wrote a new block and copied it back), it masks them as
    ``where(tri, s, low)`` does: their exponentials are 0 either way, and no causal row is
    masked whole (its diagonal stays). Small (query rows x the columns the triangle crosses),
    and a compiled replay folds it (it reads no argument)."""
    return ns.where(tri, ns.zeros(tuple(tri.shape), dtype=s.dtype, **_like(ns, s)), low)


def _row_sums(bk: Any, p: Any) -> Any:
    """``sum(p, axis=-1, keepdims=True)`` of a block of probabilities as one ``vecdot`` with a
    row of ones (NumPy's sum over rows of 64 to 256 float32 runs at a third of its speed:
    measured); the backend's sum for float16 (which accumulates wider there)."""
    if itemsize(bk, p.dtype) < 4:
        return bk.sum(p, axis=-1, keepdims=True)
    ones = bk.ones((p.shape[-1],), dtype=p.dtype, **_like(bk, p))
    return bk.vecdot(p, ones)[..., None]


def _attention_f(bk, q, k, v, maskf, causal, scale, low, additive=False):
    """The composed attention over whole arrays (immutable or chunked backends): scores,
    softmax and values. Returns the output and the log-sum-exp."""
    s = bk.matmul(heads(bk, q) * scale, bk.matrix_transpose(heads(bk, k)))
    lq, lk = s.shape[-2], s.shape[-1]
    allowed = maskf
    if additive:
        s, allowed = s + maskf, None
    if causal:
        tri = bk.arange(lq, **_like(bk, s))[:, None] >= bk.arange(lk, **_like(bk, s))[None, :]
        allowed = tri if allowed is None else bk.logical_and(allowed, tri)
    if allowed is not None:
        s = bk.where(allowed, s, low)
    m = bk.max(s, axis=-1, keepdims=True)
    if additive:
        m = _shift(bk, m)
    e = bk.exp(s - m)
    tot = bk.sum(e, axis=-1, keepdims=True)
    if not additive:
        return heads(bk, bk.matmul(e, heads(bk, v)) / tot), (bk.log(tot) + m)[..., 0]
    empty = tot == 0  # every score -inf: output 0 (PyTorch's), log-sum-exp -inf
    tot = bk.where(empty, 1.0, tot)
    lse = bk.where(empty, -math.inf, bk.log(tot) + m)
    return heads(bk, bk.matmul(e, heads(bk, v)) / tot), lse[..., 0]


def _shift(bk: Any, m: Any) -> Any:
    """A row maximum made finite: 0 where every score of the row is -inf (an additive mask's),
    so the shifted scores stay -inf there and their exponentials 0."""
    return bk.where(m == -math.inf, 0.0, m)


def _nonzero(bk: Any, c: Any) -> Any:
    """Row sums of recomputed probabilities to divide by: 1 where a row has none (an additive
    mask's row of -inf: its cotangents are 0, not NaN)."""
    return bk.where(c == 0, 1.0, c)


def _finite_lse(bk: Any, lse: Any) -> Any:
    """The log-sum-exp a backward subtracts: +inf where it is -inf (a row an additive mask
    takes whole), so the recomputed probabilities are 0 there, not NaN."""
    return bk.where(lse == -math.inf, math.inf, lse)


def _mask_full(bk, mask, batch, h, lq, lk):
    """The mask broadcast to (*B, H, Lq, Lk) (a view), or None; a clear error where it is
    neither boolean nor real floating, or does not broadcast."""
    if mask is None:
        return None
    kind = bk.isdtype(mask.dtype, "bool") or bk.isdtype(mask.dtype, "real floating")
    _check_mask(tuple(mask.shape), kind, (*batch, h, lq, lk), mask.dtype)
    return bk.broadcast_to(mask, (*batch, h, lq, lk))


def _check_mask(shape: tuple[int, ...], kind: bool, want: tuple[int, ...], dtype: Any) -> None:
    if not kind:
        raise TypeError(
            "scaled_dot_product_attention(): the mask must be boolean (True where attention "
            "is allowed) or real floating (added to the scores), got "
            f"{getattr(dtype, 'name', dtype)}; cast it with astype"
        )
    try:
        ok = tuple(broadcast(shape, want)) == want
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(
            f"scaled_dot_product_attention(): the mask {shape} does not broadcast to "
            f"(..., H, Lq, Lk) = {want}"
        )


def _add_mask_grad(ns: Any, dm: Any, ds: Any, at: tuple[Any, ...]) -> None:
    """Add a block ``ds`` of the scores' cotangent, at index ``at`` of the scores (*B, H, Lq,
    Lk), into ``dm``, the cotangent of an additive mask of its own shape: summed over the axes
    along which the mask broadcasts."""
    n, r = ds.ndim, dm.ndim
    shape = (1,) * (n - r) + tuple(dm.shape)
    axes = tuple(a for a in range(n) if shape[a] == 1 and ds.shape[a] != 1)
    part = ns.sum(ds, axis=axes, keepdims=True) if axes else ds
    if n > r:
        part = ns.reshape(part, tuple(part.shape[n - r :]))
    dm[tuple(slice(None) if shape[a] == 1 else at[a] for a in range(n - r, n))] += part


def _same(bk, a, dtype, shape):
    """``a`` in ``dtype`` broadcast to ``shape`` (a view where nothing changes)."""
    if a.dtype != dtype:
        a = bk.astype(a, dtype)
    return a if tuple(a.shape) == tuple(shape) else bk.broadcast_to(a, tuple(shape))


# -- _attention ----------------------------------------------------------------------------------


@primitive(FP, needs=())
def _attention(
    bk: Any,
    query: Array,
    key: Array,
    value: Array,
    /,
    mask: Array = None,
    *,
    is_causal: bool = False,
    scale: Array = None,
) -> Any:
    """Scaled dot-product attention, heads beside the features: q (*B, Lq, H, d),
    k (*B, Lk, H, d), v (*B, Lk, H, dv) (batch axes broadcast) -> (*B, Lq, H, dv), and the
    log-sum-exp of each row of scores (*B, H, Lq). ``mask`` broadcastable to (*B, H, Lq, Lk):
    booleans, True where attention is allowed (masked scores get the dtype's lowest value: a
    row masked whole averages every value), or real floats added to the scaled scores (their
    dtype promotes with q, k and v's; differentiable; -inf excludes a key, and a row whose
    scores are all -inf gives 0, as PyTorch's). ``is_causal``: key j only for query i >= j
    (top-left aligned; beside a float mask, as if -inf were added above the diagonal).
    ``scale``: 1 / sqrt(d) when None.

    Flash-style on a backend that writes in place: blocks of query rows (and of keys, with an
    online softmax, where one row outgrows the budget) within ATTENTION_BLOCK_BYTES, each
    written into the output; no L x L array for the whole batch. The VJP keeps q, k, v, the
    mask, the output and the log-sum-exp, and recomputes each block's probabilities."""
    own = _own(bk, "_attention")
    if own is not None:
        return own(query, key, value, mask, is_causal=is_causal, scale=scale)
    q, k, v = query, key, value  # (not "k": a plain parameter's name in the namespace)
    batch, lq, lk, h = _attention_shapes(q, k, v)
    maskf = _mask_full(bk, mask, batch, h, lq, lk)
    additive = _additive(bk, mask)
    dtype = bk.result_type(q, k, v, *((mask,) if additive else ()))
    scale = _default_scale(q) if scale is None else scale
    low = -math.inf if additive else float(bk.finfo(dtype).min)
    q, k, v = (_same(bk, a, dtype, (*batch, *a.shape[-3:])) for a in (q, k, v))
    if not in_place(bk):
        return _attention_f(bk, q, k, v, maskf, is_causal, scale, low, additive)
    causal_only = is_causal and mask is None
    item = itemsize(bk, dtype)
    blocks, rows, keys = attention_plan(batch, lq, lk, h, item, causal_only)
    out = bk.empty((*batch, lq, h, v.shape[-1]), dtype=dtype)
    lse = bk.empty((*batch, h, lq), dtype=dtype)
    for bi in blocks:
        for i0 in range(0, lq, rows):
            i1 = min(i0 + rows, lq)
            qidx = (*bi, slice(i0, i1), ...)
            qs = heads(bk, q[qidx]) * scale
            kend = _key_end(i1, lk, causal_only)
            mb = None if maskf is None else maskf[(*bi, ...)]
            m = sh = acc = tot = None
            for j0 in range(0, kend, keys):
                j1 = min(j0 + keys, kend)
                kidx = (*bi, slice(j0, j1), ...)
                s, _ = _scores(bk, qs, k, kidx, i0, i1, j0, j1, is_causal, mb, low, additive)
                mx = bk.max(s, axis=-1, keepdims=True)
                if m is not None:  # online: rescale what the earlier key blocks summed
                    mx = bk.maximum(mx, m)
                sh = _shift(bk, mx) if additive else mx
                s -= sh
                p = _exp_in_place(bk, s)
                part = bk.matmul(p, heads(bk, v[kidx]))
                ps = _row_sums(bk, p)
                del s, p
                if m is None:
                    acc, tot = part, ps
                else:
                    alpha = bk.exp(m - sh)  # 0 where every earlier score was -inf
                    acc *= alpha
                    acc += part
                    tot *= alpha
                    tot += ps
                m = mx
                del part, ps
            assert acc is not None and tot is not None  # every block reads a key at least
            if additive:  # a row whose scores are all -inf: output 0, log-sum-exp -inf
                empty = tot == 0
                tot = bk.where(empty, 1.0, tot)
                lse_b = bk.where(empty, -math.inf, bk.log(tot) + sh)
            else:
                lse_b = bk.log(tot) + sh
            acc /= tot
            out[qidx] = heads(bk, acc)
            lse[(*bi, slice(None), slice(i0, i1))] = lse_b[..., 0]
            del acc, tot, qs, lse_b
    return out, lse


def _attention_grad_whole(ns, g, glse, q, k, v, mask, maskf, out, lse, is_causal, scale, low):
    """The cotangents of q, k, v and of an additive mask (None unless ``mask`` is given and
    floating) over whole arrays (ours, for a higher order; immutable or chunked backends): the
    probabilities recomputed from the log-sum-exp."""
    additive = _additive(ns, mask)
    qh, kh, vh, gh, oh = (heads(ns, a) for a in (q, k, v, g, out))
    qs = qh * scale
    s = ns.matmul(qs, ns.matrix_transpose(kh))
    lq, lk = s.shape[-2], s.shape[-1]
    allowed = maskf
    if additive:
        s, allowed = s + maskf, None
    if is_causal:
        tri = ns.arange(lq, **_like(ns, s))[:, None] >= ns.arange(lk, **_like(ns, s))[None, :]
        allowed = tri if allowed is None else ns.logical_and(allowed, tri)
    if allowed is not None:
        s = ns.where(allowed, s, low)
    lse1 = lse[..., None]
    p = ns.exp(s - (_finite_lse(ns, lse1) if additive else lse1))
    if mask is not None and not additive:  # a row masked whole averages every value
        p = ns.where(lse1 == low, 1.0 / lk, p)
    p = p / _nonzero(ns, ns.sum(p, axis=-1, keepdims=True))  # (_attention_vjp: why)
    dv = ns.matmul(ns.matrix_transpose(p), gh)
    d = ns.sum(gh * oh, axis=-1, keepdims=True) - glse[..., None]
    ds = p * (ns.matmul(gh, ns.matrix_transpose(vh)) - d)
    if allowed is not None:
        ds = ns.where(allowed, ds, 0.0)
    dq = ns.matmul(ds, kh) * scale
    dk = ns.matmul(ns.matrix_transpose(ds), qs)
    dm = _sum_to(ns, ds, tuple(mask.shape)) if additive else None
    return (*(heads(ns, a) for a in (dq, dk, dv)), dm)  # (..., H, L, d) back to (..., L, H, d)


def _probabilities(ns, qs, k, kidx, i0, i1, j0, j1, score_args, lse1):
    """A block of recomputed probabilities ``exp(s - lse)`` for query rows [i0, i1) and keys
    [j0, j1), and the block of the mask (:func:`_scores`); ``score_args``: (is_causal, the
    batch block's mask, the masked score, additive, Lk)."""
    is_causal, mb, low, additive, lk = score_args
    s, allowed = _scores(ns, qs, k, kidx, i0, i1, j0, j1, is_causal, mb, low, additive)
    s -= lse1
    p = _exp_in_place(ns, s)
    if allowed is not None:  # a row masked whole averages every value
        p = ns.where(lse1 == low, 1.0 / lk, p)
    return p, allowed


@_attention.defvjp(saves=("query", "key", "value", "mask", "out"), takes_needs=True)
def _attention_vjp(
    ns, g, out, q, k, v, /, mask=None, *, is_causal=False, scale=None, needs=(0, 1, 2, 3)
):
    go, glse = g
    o, lse = out
    batch, lq, lk, h = _attention_shapes(q, k, v)
    additive = _additive(ns, mask)
    dtype = ns.result_type(q, k, v, *((mask,) if additive else ()))
    scale = _default_scale(q) if scale is None else scale
    low = -math.inf if additive else float(ns.finfo(dtype).min)
    q, k, v = (_same(ns, a, dtype, (*batch, *a.shape[-3:])) for a in (q, k, v))
    maskf = _mask_full(ns, mask, batch, h, lq, lk)
    if not in_place(ns):
        return _attention_grad_whole(
            ns, go, glse, q, k, v, mask, maskf, o, lse, is_causal, scale, low
        )
    causal_only = is_causal and mask is None
    item = itemsize(ns, dtype)
    blocks, rows, keys = attention_plan(batch, lq, lk, h, item, causal_only)
    dq = ns.empty(tuple(q.shape), dtype=dtype)
    dk = ns.zeros(tuple(k.shape), dtype=dtype)
    dv = ns.zeros(tuple(v.shape), dtype=dtype)
    dm = ns.zeros(tuple(mask.shape), dtype=dtype) if additive and 3 in needs else None
    for bi in blocks:
        for i0 in range(0, lq, rows):
            i1 = min(i0 + rows, lq)
            qidx = (*bi, slice(i0, i1), ...)
            qs = heads(ns, q[qidx]) * scale
            gb = heads(ns, go[qidx])
            d = ns.vecdot(gb, heads(ns, o[qidx]))[..., None]  # no product array
            d -= glse[(*bi, slice(None), slice(i0, i1))][..., None]
            lse1 = lse[(*bi, slice(None), slice(i0, i1))][..., None]
            if additive:
                lse1 = _finite_lse(ns, lse1)
            mb = None if maskf is None else maskf[(*bi, ...)]
            score_args = (is_causal, mb, low, additive, lk)
            dqb = None
            kend = _key_end(i1, lk, causal_only)

            # The probabilities exp(s - lse) sum to 1 only as far as the stored log-sum-exp
            # keeps log(sum) beside the row's maximum: with scores of 1e7 in float32 (1e16 in
            # float64) it keeps none of it, and tied maxima would each get probability 1. Each
            # row is divided by its sum, through the cotangent's rows (ds = (p / c) (g v^T - d)
            # = p ((g / c) v^T - d / c)): one sum of the block (a product with ones), no pass
            # over it; where the keys go in blocks (a query row over ATTENTION_BLOCK_BYTES), their
            # sums first, from the scores again: a third more time there (measured: 336 against
            # 455 ms CPU, 256 queries against 16384 keys, 4 heads, keys in blocks of 512).
            c = None
            if kend > keys:
                for j0 in range(0, kend, keys):
                    j1 = min(j0 + keys, kend)
                    kidx = (*bi, slice(j0, j1), ...)
                    p = _probabilities(ns, qs, k, kidx, i0, i1, j0, j1, score_args, lse1)[0]
                    ps = _row_sums(ns, p)
                    c = ps if c is None else c + ps
                    del p, ps
            for j0 in range(0, kend, keys):
                j1 = min(j0 + keys, kend)
                kidx = (*bi, slice(j0, j1), ...)
                p, allowed = _probabilities(ns, qs, k, kidx, i0, i1, j0, j1, score_args, lse1)
                if j0 == 0:
                    if c is None:
                        c = _row_sums(ns, p)
                    c = _nonzero(ns, c)
                    gn = gb / c
                    dn = d / c
                dv[kidx] += heads(ns, ns.matmul(ns.matrix_transpose(p), gn))
                ds = ns.matmul(gn, ns.matrix_transpose(heads(ns, v[kidx])))
                ds -= dn
                ds *= p
                del p
                if allowed is not None:
                    ds = ns.where(allowed, ds, 0.0)
                if dm is not None:
                    _add_mask_grad(ns, dm, ds, (*bi, slice(None), slice(i0, i1), slice(j0, j1)))
                dk[kidx] += heads(ns, ns.matmul(ns.matrix_transpose(ds), qs))
                part = ns.matmul(ds, heads(ns, k[kidx]))
                del ds
                if dqb is None:
                    dqb = part
                else:
                    dqb += part
                del part
            dqb *= scale
            dq[qidx] = heads(ns, dqb)
            del dqb, qs, gb, d, gn, dn, c
    return dq, dk, dv, dm


_attention.defjvp(TRANSPOSED)


@_attention.defbatch
def _attention_batch(ns, dims, q, k, v, /, mask=None, *, is_causal=False, scale=None):
    n = batch_size(dims, (q, k, v, mask))
    r = max(a.ndim - (1 if d else 0) for a, d in zip((q, k, v), dims, strict=False))
    q, k, v = (to_rank(ns, batched(ns, a, d, n), r) for a, d in zip((q, k, v), dims, strict=False))
    if mask is not None and len(dims) > 3 and dims[3]:  # examples of (*B, H, Lq, Lk)'s rank
        mask = to_rank(ns, mask, r)
    return ns._attention(q, k, v, mask, is_causal=is_causal, scale=scale)


def _attention_dtype(q: Any, k: Any, v: Any, mask: Any) -> Any:
    """The computation's dtype: q, k and v's, promoted with an additive mask's."""
    floats = (mask.dtype,) if mask is not None and mask.dtype.kind == "f" else ()
    return np.result_type(q.dtype, k.dtype, v.dtype, *floats)


def _attention_shape(a, q, k, v, /, mask=None, *, is_causal=False, scale=None):
    batch, lq, lk, h = _attention_shapes(q, k, v)
    if mask is not None:
        kind = mask.dtype.kind in "bf"
        _check_mask(tuple(mask.shape), kind, (*batch, h, lq, lk), mask.dtype)
    dtype = _attention_dtype(q, k, v, mask)
    return new((*batch, lq, h, v.shape[-1]), dtype), new((*batch, h, lq), dtype)


def _attention_memory(out, q, k, v, /, mask=None, *, is_causal=False, scale=None):
    """Casts and broadcast copies of q, k, v where they differ; then per block of the plan
    (:func:`attention_plan`): the scaled queries, a block of scores and, while they are masked,
    a second one (with the mask's booleans where a mask is given), the block's product with the
    values and its sum beside the accumulated one, and the row statistics."""
    o = out[0]
    item = o.dtype.itemsize
    batch, lq, lk, h = _attention_shapes(q, k, v)
    d, dv = q.shape[-1], v.shape[-1]
    casts = sum(math.prod((*batch, *a.shape[-3:])) * item for a in (q, k, v) if a.dtype != o.dtype)
    causal_only = is_causal and mask is None
    blocks, rows, keys = attention_plan(batch, lq, lk, h, item, causal_only)
    keys = min(keys, lk)
    # an empty batch still runs NumPy's broadcasts and products on the operands that are not
    # empty (measured: 75 kB beyond the arguments for no query): count one example's block
    nb = max(1, piece_size(batch, h * rows * keys * item, 0, ATTENTION_BLOCK_BYTES))
    scores = nb * h * rows * keys * item
    boolean = mask is not None and mask.dtype.kind == "b"
    masked = scores // item if boolean else (rows * keys if is_causal else 0)
    online = 2 if keys < lk else 1
    per_block = (
        nb * h * rows * d * item  # the scaled queries
        + 2 * scores  # the scores, and what masking them makes
        + masked  # the mask's booleans
        + (online + 1) * nb * h * rows * dv * item  # the products and the accumulator
        + 8 * nb * h * rows * item  # the row statistics
    )
    return casts + per_block + 2 * min(scores // item, BUFFER_ELEMENTS) * item


_attention.defshape(_attention_shape, memory=_attention_memory)
