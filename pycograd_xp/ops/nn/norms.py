"""The normalisation rows ``_layer_norm`` and ``_rms_norm`` (:func:`pycograd_xp.nn.layer_norm`,
:func:`~pycograd_xp.nn.rms_norm`): each keeps its input, weight and per-row statistics (the
mean and 1/std as extra outputs, so that a higher-order derivative sees them as functions of
the input), evaluated block by block where the backend writes in place (:mod:`.pieces`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..._primitive import Array, primitive
from .._rules.batching import batch_size, batched, to_rank
from .._rules.jvp import plus
from .._rules.shapes import BUFFER_ELEMENTS, broadcast, in_operands_order
from .pieces import (
    FP,
    BlockConst,
    _into,
    _sum_to,
    _times,
    block_limit,
    in_place,
    piece_size,
    pieces,
)
from .windows import _like, _own, backend_of, itemsize

# -- kits: the normalisations --------------------------------------------------------------------


def _norm_axes(axis: Any, ndim: int) -> tuple[int, ...]:
    axes = axis if isinstance(axis, tuple | list) else (axis,)
    return tuple(sorted(a % ndim for a in axes)) if ndim else ()


def _trailing(x: Any, axes: tuple[int, ...], *params: Any) -> int:
    """How many trailing axes a normalisation reduces, when they are all trailing and its
    parameters span only them (block-by-block evaluation over the leading ones); else 0."""
    k = len(axes)
    if not k or axes != tuple(range(x.ndim - k, x.ndim)):
        return 0
    if any(p is not None and p.ndim > k for p in params):
        return 0
    return k


def _count(x: Any, axes: tuple[int, ...]) -> int:
    return math.prod(x.shape[a] for a in axes)


def _lead_sum(ns: Any, a: Any, k: int, scale: Any = None, rows: Any = None) -> Any:
    """``a`` (times ``scale``, a factor per row: kept dims, ``a``'s leading shape and ``k``
    ones) summed over every axis but its last ``k``. Over the rows of a float32 or float64
    array where a VJP goes by blocks (:func:`_by_rows`): one vector-matrix product of the
    factors (or ones) and the rows, the same call on ours as on a raw backend (NumPy's sum
    along the rows takes six times BLAS's product: 20 against 3 us a block of 64K float32);
    elsewhere the backend's sum. ``rows``: :func:`_by_rows`'s answer, when known."""
    if a.ndim <= k:
        return a if scale is None else a * scale
    if _by_rows(ns, a.dtype) if rows is None else rows:
        trail = tuple(a.shape[a.ndim - k :])
        lead = math.prod(a.shape[: a.ndim - k])
        rows = ns.reshape(a, (lead, math.prod(trail)))
        v = ns.ones((lead,), dtype=a.dtype, **_like(ns, a)) if scale is None else scale
        return ns.reshape(ns.reshape(v, (lead,)) @ rows, trail)
    return ns.sum(a if scale is None else a * scale, axis=tuple(range(a.ndim - k)))


def _by_rows(ns: Any, dtype: Any) -> bool:
    """Whether :func:`_lead_sum` takes a product over the rows of ``dtype`` on ``ns``: float32
    or float64 where a normalisation's VJP goes by blocks (:func:`_blocks_beneath`: a raw
    backend that writes in place, or ours over one)."""
    b = backend_of(ns)
    if b is None:
        ok = in_place(ns)
    else:
        ok = b.mutable and not b.chunked and not b.abstract and not b.level
    return bool(ok) and itemsize(ns, dtype) >= 4


def _blocks_beneath(ns: Any, shape: Any, item: int, k: int) -> list[Any]:
    """The blocks a VJP takes on ``ns``: :func:`pieces` on a raw backend that writes in place,
    and on ours over one (a higher order, or remat's recompute pulling back: their sums then
    go in the same order, so the gradients are the first-order ones to the bit); one block
    elsewhere."""
    b = backend_of(ns)
    if b is None:
        return pieces(shape, item, k, block_limit(ns)) if in_place(ns) and k else [...]
    if k and b.mutable and not b.chunked and not b.abstract and not b.level:
        return pieces(shape, item, k, block_limit(b.xp))
    return [...]


def _block_param_grads(ns, gy, xhat, k, weight, bias, blocks, scale=None):
    """:func:`_norm_param_grads` summed block by block, in the order of ``blocks``."""
    rows = _by_rows(ns, gy.dtype)
    if len(blocks) == 1:
        return _norm_param_grads(ns, gy, xhat, k, weight, bias, scale, rows)
    gw = gb = None
    for idx in blocks:
        sb = None if scale is None else scale[idx]
        pw, pb = _norm_param_grads(ns, gy[idx], xhat[idx], k, weight, bias, sb, rows)
        gw = pw if gw is None else gw + pw
        gb = pb if gb is None else gb + pb
    return gw, gb


def _norm_param_grads(ns, gy, xhat, k, weight, bias, scale=None, rows=None):
    """The cotangents of a normalisation's weight and bias (None where absent): ``gy xhat``
    (times ``scale``, a factor per row) and ``gy`` summed, the leading axes first when the
    parameters span only the ``k`` trailing ones (:func:`_lead_sum`)."""
    gw = gb = None
    if weight is not None:
        p = gy * xhat
        if k:
            p = _lead_sum(ns, p, k, scale, rows)
        elif scale is not None:
            p = p * scale
        gw = _sum_to(ns, p, tuple(weight.shape))
        del p
    if bias is not None:
        gb = _sum_to(ns, _lead_sum(ns, gy, k, None, rows) if k else gy, tuple(bias.shape))
    return gw, gb


# -- _layer_norm ---------------------------------------------------------------------------------


def _sum_squares(bk: Any, y: Any, axes: tuple[int, ...]) -> Any:
    """``sum(y * y)`` over ``axes`` (kept dims): one ``vecdot`` (no squares array) over a single
    trailing axis."""
    if axes == (y.ndim - 1,):
        return bk.vecdot(y, y)[..., None]
    return bk.sum(y * y, axis=axes, keepdims=True)


def _mean(bk: Any, x: Any, axes: tuple[int, ...], ones: Any = None) -> Any:
    """``mean(x)`` over ``axes`` (kept dims): over a single trailing axis of float32 or float64,
    one ``vecdot`` with a row of ones (``ones`` where given: :func:`_ones`, made once for the
    blocks of a call), divided by the count (NumPy's mean reduces rows of 256 float32 at a
    third of vecdot's speed: measured 21 against 5 us a block of 64K); the same call on ours
    as on a raw backend. Elsewhere the backend's mean (float16 accumulates wider there)."""
    if ones is None:
        ones = _ones(bk, x, axes)
        if ones is None:
            return bk.mean(x, axis=axes, keepdims=True)
    return bk.vecdot(x, ones)[..., None] / x.shape[-1]


def _ones(bk: Any, x: Any, axes: tuple[int, ...], dtype: Any = None) -> Any:
    """:func:`_mean`'s row of ones for an array of ``x``'s shape and ``dtype`` (x's when None),
    None where it takes the backend's mean."""
    n = x.shape[-1] if x.ndim else 0
    dtype = x.dtype if dtype is None else dtype
    if axes != (x.ndim - 1,) or not n or itemsize(bk, dtype) < 4:
        return None
    return bk.ones((n,), dtype=dtype, **_like(bk, x))


def _layer_norm_f(
    bk: Any,
    x: Any,
    w: Any,
    b: Any,
    eps: float,
    axes: tuple[int, ...],
    dst: Any = None,
    ones: Any = None,
) -> Any:
    # the centred input into ``dst`` (the output's block) where the backend takes out=; its
    # variance as numpy's, the mean of the squares (``w``, ``b`` may be BlockConst's blocks:
    # the same values)
    mean = _mean(bk, x, axes, ones)
    y = _into(bk, bk.subtract, x, mean, dst)
    s = bk.sqrt(_sum_squares(bk, y, axes) / _count(x, axes) + eps)
    if in_place(bk) and y.dtype == bk.result_type(y, s):
        y /= s
    else:
        y = y / s
    if w is not None:
        y = y * w if not in_place(bk) or y.dtype != bk.result_type(y, w) else _times(y, w)
    if b is not None:
        if in_place(bk) and y.dtype == bk.result_type(y, b):
            y += b
        else:
            y = y + b
    return y, mean, 1 / s


@primitive(FP, needs=())
def _layer_norm(
    bk: Any,
    x: Array,
    weight: Array = None,
    bias: Array = None,
    /,
    *,
    eps: float = 1e-5,
    axis: Any = -1,
) -> Any:
    """Layer normalisation over ``axis`` (an int or a tuple): ``(x - mean) / sqrt(var + eps)``,
    times ``weight`` plus ``bias`` when given (broadcast against x). Returns the output, the
    mean and ``rstd = 1 / sqrt(var + eps)`` (kept dims); ``pycograd_xp.nn.layer_norm`` shows
    the first. The VJP keeps x, the weight and these statistics (the output beside them: the
    next layer's product saves it anyway), never the centred or normalised input."""
    own = _own(bk, "_layer_norm")
    if own is not None:
        return own(x, weight, bias, eps=eps, axis=axis)
    _check_params("layer_norm", x, weight, bias)
    axes = _norm_axes(axis, x.ndim)
    k = _trailing(x, axes, weight, bias)
    if not in_place(bk) or not k:
        return _layer_norm_f(bk, x, weight, bias, eps, axes)
    dtype = bk.result_type(x, *(p for p in (weight, bias) if p is not None))
    blocks = pieces(x.shape, itemsize(bk, dtype), k, block_limit(bk))
    if len(blocks) == 1:
        return _layer_norm_f(bk, x, weight, bias, eps, axes)
    stats = tuple(1 if i in axes else s for i, s in enumerate(x.shape))
    y = bk.empty(tuple(x.shape), dtype=dtype)
    mean, rstd = bk.empty(stats, dtype=x.dtype), bk.empty(stats, dtype=x.dtype)
    # the weight and bias as blocks (BlockConst), the row of ones once, for every block
    wt, bt, ones = BlockConst(weight), BlockConst(bias), _ones(bk, x, axes)
    for idx in blocks:
        dst, xb = y[idx], x[idx]
        yb, mean[idx], rstd[idx] = _layer_norm_f(
            bk, xb, wt(bk, xb), bt(bk, xb), eps, axes, dst, ones
        )
        if yb is not dst:
            y[idx] = yb
        del yb, dst
    return y, mean, rstd


def _first_owned(owned: Any) -> bool:
    """Whether the first output's cotangent is owned: the tape hands a multi-output row one
    flag per output (``pycograd_xp._tape``), a single flag elsewhere."""
    return bool(owned[0]) if type(owned) is tuple else bool(owned)


def _ln_coefs(ns, gx, xc, rstd, axes, gm, gr, n, ones=None):
    """The per-row factors of layer norm's input cotangent ``gx rstd - c1 - xc a``: ``c1 =
    rstd mean(gx) - gm / n`` and ``a = rstd^3 (mean(gx xc) + gr / n)`` (``xc = x - mean``,
    ``gx = g weight``; ``gm``, ``gr`` the mean's and rstd's cotangents)."""
    c1 = rstd * _mean(ns, gx, axes, ones) - gm / n
    return c1, rstd * rstd * rstd * (_dot(ns, gx, xc, axes) / n + gr / n)


def _layer_norm_whole(ns, g, x, mean, rstd, weight, axes, gm, gr, n):
    """The input's cotangent ``rstd (gx - mean(gx)) - xhat rstd mean(gx xhat)`` with
    ``gx = g weight``, plus what the mean's and rstd's cotangents add (:func:`_ln_coefs`), as
    standard functions of whole arrays (immutable or chunked arrays, ours for a higher order:
    the operations of :func:`_layer_norm_grad`, the same bits); and ``xc = x - mean``."""
    xc = x - mean
    gx = g * weight if weight is not None else g
    c1, a = _ln_coefs(ns, gx, xc, rstd, axes, gm, gr, n)
    return gx * rstd - c1 - xc * a, xc


def _layer_norm_grad(
    ns, g, x, mean, rstd, weight, bias, k, axes, gm, gr, n, dst, rows, wt=None, ones=None
):
    """:func:`_layer_norm_whole`'s cotangent on a backend that writes in place, with the
    weight's and bias's (``g xc`` summed over the rows weighted by ``rstd``: no ``xhat``
    array): on fresh temporaries, every read of ``g`` first, then the last operations into
    ``dst`` where it takes out= (``dst`` may be ``g``'s own memory: a cotangent only the
    backward pass holds). ``wt``: the weight as a block (:class:`BlockConst`), ``ones``
    :func:`_mean`'s row, both made once a call; the same values."""
    xc = x - mean
    gx = g * (weight if wt is None else wt) if weight is not None else g
    c1, a = _ln_coefs(ns, gx, xc, rstd, axes, gm, gr, n, ones)
    gw, gb = _norm_param_grads(ns, g, xc, k, weight, bias, rstd, rows)  # (g's last read)
    if weight is not None and gx.dtype == ns.result_type(gx, rstd):
        gx *= rstd  # g weight: a fresh temporary
        dx = gx
    else:
        dx = _into(ns, ns.multiply, gx, rstd, dst)
    dx -= c1
    t = _times(xc, a) if xc.dtype == ns.result_type(xc, a) else xc * a
    if dx is dst:
        dx -= t
        return dx, gw, gb
    return _into(ns, ns.subtract, dx, t, dst), gw, gb


def _sums_nothing(bias: Any, g: Any) -> bool:
    """Whether ``bias``'s cotangent is ``g`` itself or a view of it: a bias with as many elements
    as the output sums nothing (:func:`_lead_sum` and :func:`_sum_to` hand ``g`` back), so the
    input's cotangent must not be written into ``g``'s memory."""
    return bias is not None and math.prod(bias.shape) == math.prod(g.shape)


def _dot(ns: Any, a: Any, b: Any, axes: tuple[int, ...]) -> Any:
    """``sum(a * b)`` over ``axes`` (kept dims): one ``vecdot`` over a single trailing axis of
    arrays of one shape (no product array), the same call on ours as on a raw backend."""
    if axes == (a.ndim - 1,) and tuple(a.shape) == tuple(b.shape):
        return ns.vecdot(a, b)[..., None]
    return ns.sum(a * b, axis=axes, keepdims=True)


@_layer_norm.defvjp(saves=("x", "weight", "out"), takes_owned=True)
def _layer_norm_vjp(ns, g, out, x, weight=None, bias=None, /, *, eps=1e-5, axis=-1, owned=False):
    """Block by block where the backend writes in place, each block's cotangent written into
    the output's cotangent itself when only the backward pass holds it (``owned``)."""
    gy, gm, gr = g
    _, mean, rstd = out
    axes = _norm_axes(axis, x.ndim)
    n = _count(x, axes)
    k = _trailing(x, axes, weight, bias)
    blocks = _blocks_beneath(ns, x.shape, itemsize(ns, gy.dtype), k)
    inplace = in_place(ns)
    if not inplace:  # (ours over a raw backend: the parameters' sums in the first order's blocks)
        dx, xc = _layer_norm_whole(ns, gy, x, mean, rstd, weight, axes, gm, gr, n)
        return (dx, *_block_param_grads(ns, gy, xc, k, weight, bias, blocks, rstd))
    own = _first_owned(owned) and gy.dtype == ns.result_type(x, gy) and not _sums_nothing(bias, gy)
    rows = _by_rows(ns, gy.dtype)
    if len(blocks) == 1:
        dst = gy if own else None
        return _layer_norm_grad(ns, gy, x, mean, rstd, weight, bias, k, axes, gm, gr, n, dst, rows)
    dx = gy if own else None
    gw = gb = None
    wt = BlockConst(weight)
    ones = _ones(ns, x, axes, gy.dtype if weight is None else ns.result_type(gy, weight))
    for idx in blocks:
        if dx is None:
            dx = ns.empty(tuple(x.shape), dtype=ns.result_type(x, gy))
        dst = dx[idx]
        blk = (gy[idx], x[idx], mean[idx], rstd[idx])
        gs = (gm[idx], gr[idx])
        tile = wt(ns, blk[1])
        d, pw, pb = _layer_norm_grad(ns, *blk, weight, bias, k, axes, *gs, n, dst, rows, tile, ones)
        gw = pw if gw is None else gw + pw
        gb = pb if gb is None else gb + pb
        if d is not dst:
            dx[idx] = d
        del d, dst, blk, gs, tile
    return dx, gw, gb


@_layer_norm.defjvp
def _layer_norm_jvp(ns, t, out, x, weight=None, bias=None, /, *, eps=1e-5, axis=-1):
    y, mean, rstd = out
    axes = _norm_axes(axis, x.ndim)
    tx, tw, tb = (tuple(t) + (None, None))[:3]
    xhat = (x - mean) * rstd
    ty = tmean = trstd = None
    if tx is not None:  # dxhat = rstd (tx - mean(tx)) - xhat rstd mean(xhat tx)
        tmean = ns.mean(tx, axis=axes, keepdims=True)
        c = ns.mean(xhat * tx, axis=axes, keepdims=True)
        trstd = -(rstd * rstd) * c
        dxhat = rstd * (tx - tmean) - xhat * (rstd * c)
        ty = dxhat * weight if weight is not None else dxhat
    if tw is not None:
        ty = plus(ty, xhat * tw)
    if tb is not None:
        ty = plus(ty, ns.zeros_like(y) + tb)
    return ty, tmean, trstd


@_layer_norm.defbatch
def _layer_norm_batch(ns, dims, x, weight=None, bias=None, /, *, eps=1e-5, axis=-1):
    nd = x.ndim - (1 if dims[0] else 0)  # an example's rank
    axes = tuple(a % nd for a in (axis if isinstance(axis, tuple | list) else (axis,)))
    n = batch_size(dims, (x, weight, bias))
    x = batched(ns, x, dims[0], n)
    params = [
        p if p is None or not d else to_rank(ns, p, nd)
        for p, d in zip((weight, bias), tuple(dims[1:]) + (False, False), strict=False)
    ]
    return ns._layer_norm(x, *params, eps=eps, axis=tuple(a + 1 for a in axes))


def _stats_shape(x: Any, axis: Any) -> tuple[int, ...]:
    axes = _norm_axes(axis, x.ndim)
    return tuple(1 if i in axes else s for i, s in enumerate(x.shape))


def _check_params(fname: str, x: Any, *params: Any) -> None:
    """A normalisation's weight and bias must broadcast to its input's shape."""
    given = [tuple(p.shape) for p in params if p is not None]
    try:
        ok = tuple(broadcast(tuple(x.shape), *given)) == tuple(x.shape)
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(
            f"{fname}(): weight/bias {given} do not broadcast to the input {tuple(x.shape)}"
        )


def _layer_norm_shape(a, x, weight=None, bias=None, /, *, eps=1e-5, axis=-1):
    params = [p for p in (weight, bias) if p is not None]
    _check_params("layer_norm", x, weight, bias)
    stats = _stats_shape(x, axis)
    dtype = np.result_type(x.dtype, *(p.dtype for p in params))
    # in x's layout (NumPy's order K: a normalisation of an array in Fortran order is one)
    like = in_operands_order
    return like(x.shape, dtype, x), like(stats, x.dtype, x), like(stats, x.dtype, x)


def _norm_memory(out, x, axes, k, params, temps):
    """A normalisation's transients: ``temps`` arrays of a block (of the whole when it is one
    block, or not block by block), with the iterator's buffers, and a few of the statistics'
    size."""
    item = out.dtype.itemsize
    if k:
        n = piece_size(x.shape, item, k, block_limit())
    else:
        n = math.prod(x.shape)
    stats = math.prod(s for i, s in enumerate(x.shape) if i not in axes) or 1
    cast = n * item if x.dtype != out.dtype else 0  # x - mean in the wider dtype
    return (
        temps * n * item
        + cast
        + 4 * stats * max(item, x.dtype.itemsize)
        + (2 + len(params)) * min(n, BUFFER_ELEMENTS) * item
    )


def _layer_norm_memory(out, x, weight=None, bias=None, /, *, eps=1e-5, axis=-1):
    """Whole: ``x - mean``, its squares (then ``/ s``, ``* w``, ``+ b`` in place, or a new
    array each where the dtype widens). By blocks: the same per block beside the outputs, and
    the weight and bias as blocks (:class:`BlockConst`) where there are several."""
    y = out[0]
    axes = _norm_axes(axis, x.ndim)
    params = [p for p in (weight, bias) if p is not None]
    k = _trailing(x, axes, weight, bias)
    n = piece_size(x.shape, y.dtype.itemsize, k, block_limit())
    tiles = len(params) if k and n < x.size else 0
    return _norm_memory(y, x, axes, k, params, (3 if k else 2) + tiles)


_layer_norm.defshape(_layer_norm_shape, memory=_layer_norm_memory)


# -- _rms_norm -----------------------------------------------------------------------------------


def _rms_norm_f(bk: Any, x: Any, w: Any, eps: float, axes: tuple[int, ...]) -> Any:
    s = bk.sqrt(_sum_squares(bk, x, axes) / _count(x, axes) + eps)
    y = x / s
    if w is not None:
        y = y * w if not in_place(bk) or y.dtype != bk.result_type(y, w) else _times(y, w)
    return y, 1 / s


@primitive(FP, needs=())
def _rms_norm(
    bk: Any, x: Array, weight: Array = None, /, *, eps: float = 1e-6, axis: Any = -1
) -> Any:
    """RMS normalisation over ``axis``: ``x / sqrt(mean(x^2) + eps)``, times ``weight`` when
    given. Returns the output and ``rstd = 1 / sqrt(mean(x^2) + eps)`` (kept dims); the VJP
    keeps x, the weight and rstd (and the output, which the next product saves anyway)."""
    own = _own(bk, "_rms_norm")
    if own is not None:
        return own(x, weight, eps=eps, axis=axis)
    _check_params("rms_norm", x, weight)
    axes = _norm_axes(axis, x.ndim)
    k = _trailing(x, axes, weight)
    if not in_place(bk) or not k:
        return _rms_norm_f(bk, x, weight, eps, axes)
    dtype = bk.result_type(x, *(() if weight is None else (weight,)))
    blocks = pieces(x.shape, itemsize(bk, dtype), k, block_limit(bk))
    if len(blocks) == 1:
        return _rms_norm_f(bk, x, weight, eps, axes)
    y = bk.empty(tuple(x.shape), dtype=dtype)
    rstd = bk.empty(_stats_shape(x, axis), dtype=x.dtype)
    for idx in blocks:
        y[idx], rstd[idx] = _rms_norm_f(bk, x[idx], weight, eps, axes)
    return y, rstd


def _rms_norm_grad(ns, g, x, rstd, weight, axes, gr, n):
    """``rstd gx - xhat (rstd mean(gx xhat) + gr rstd^2 / n)``, ``gx = g weight``, as ``rstd gx
    - x a`` with ``a = rstd^3 (mean(gx x) + gr / n)`` (no ``xhat`` array): standard functions
    of whole arrays, the operations of :func:`_rms_norm_block` (the same bits)."""
    gx = g * weight if weight is not None else g
    return rstd * gx - x * _rms_coef(ns, gx, x, rstd, axes, gr, n)


def _rms_coef(ns, gx, x, rstd, axes, gr, n):
    return rstd * rstd * rstd * (_dot(ns, gx, x, axes) / n + gr / n)


def _rms_norm_block(ns, g, x, rstd, weight, k, axes, gr, n, dst, rows):
    """:func:`_rms_norm_grad` of one block on a backend that writes in place, with the weight's
    cotangent (``g x`` summed over the rows weighted by ``rstd``): every read of ``g`` first,
    the last operation into ``dst`` where it takes out= (``dst`` may be ``g``'s own memory)."""
    gx = g * weight if weight is not None else g
    a = _rms_coef(ns, gx, x, rstd, axes, gr, n)
    pw = _norm_param_grads(ns, g, x, k, weight, None, rstd, rows)[0]  # (g's last read)
    dx = rstd * gx
    return _into(ns, ns.subtract, dx, x * a, dst), pw


@_rms_norm.defvjp(saves=("x", "weight", "out"), takes_owned=True)
def _rms_norm_vjp(ns, g, out, x, weight=None, /, *, eps=1e-6, axis=-1, owned=False):
    gy, gr = g
    rstd = out[1]
    axes = _norm_axes(axis, x.ndim)
    n = _count(x, axes)
    k = _trailing(x, axes, weight)
    blocks = _blocks_beneath(ns, x.shape, itemsize(ns, gy.dtype), k)
    if len(blocks) == 1 or not in_place(ns):
        dx = _rms_norm_grad(ns, gy, x, rstd, weight, axes, gr, n)
        return (dx, _block_param_grads(ns, gy, x, k, weight, None, blocks, rstd)[0])
    dx = gy if _first_owned(owned) and gy.dtype == ns.result_type(x, gy) else None
    gw, rows = None, _by_rows(ns, gy.dtype)
    for idx in blocks:
        if dx is None:
            dx = ns.empty(tuple(x.shape), dtype=ns.result_type(x, gy))
        dst = dx[idx]
        blk = (gy[idx], x[idx], rstd[idx])
        d, pw = _rms_norm_block(ns, *blk, weight, k, axes, gr[idx], n, dst, rows)
        gw = pw if gw is None else gw + pw
        if d is not dst:
            dx[idx] = d
        del d, dst, blk
    return dx, gw


@_rms_norm.defjvp
def _rms_norm_jvp(ns, t, out, x, weight=None, /, *, eps=1e-6, axis=-1):
    rstd = out[1]
    axes = _norm_axes(axis, x.ndim)
    tx, tw = (tuple(t) + (None,))[:2]
    xhat = x * rstd
    ty = trstd = None
    if tx is not None:  # dxhat = rstd tx - xhat rstd mean(xhat tx)
        c = ns.mean(xhat * tx, axis=axes, keepdims=True)
        trstd = -(rstd * rstd) * c
        dxhat = rstd * tx - xhat * (rstd * c)
        ty = dxhat * weight if weight is not None else dxhat
    if tw is not None:
        ty = plus(ty, xhat * tw)
    return ty, trstd


@_rms_norm.defbatch
def _rms_norm_batch(ns, dims, x, weight=None, /, *, eps=1e-6, axis=-1):
    nd = x.ndim - (1 if dims[0] else 0)
    axes = tuple(a % nd for a in (axis if isinstance(axis, tuple | list) else (axis,)))
    n = batch_size(dims, (x, weight))
    x = batched(ns, x, dims[0], n)
    if weight is not None and len(dims) > 1 and dims[1]:
        weight = to_rank(ns, weight, nd)
    return ns._rms_norm(x, weight, eps=eps, axis=tuple(a + 1 for a in axes))


def _rms_norm_shape(a, x, weight=None, /, *, eps=1e-6, axis=-1):
    _check_params("rms_norm", x, weight)
    stats = _stats_shape(x, axis)
    dtype = x.dtype if weight is None else np.result_type(x.dtype, weight.dtype)
    like = in_operands_order  # in x's layout, as layer_norm's
    return like(x.shape, dtype, x), like(stats, x.dtype, x)


def _rms_norm_memory(out, x, weight=None, /, *, eps=1e-6, axis=-1):
    """The squares, then ``x / s`` (and ``* w`` in place, or new where it widens)."""
    axes = _norm_axes(axis, x.ndim)
    params = [] if weight is None else [weight]
    k = _trailing(x, axes, weight)
    return _norm_memory(out[0], x, axes, k, params, 3 if k else 2)


_rms_norm.defshape(_rms_norm_shape, memory=_rms_norm_memory)
