"""The pooling rows ``_max_pool2d`` and ``_avg_pool2d`` (:func:`pycograd_xp.nn.max_pool2d`,
:func:`~pycograd_xp.nn.avg_pool2d`): the strided window slices reduced pairwise
(``maximum``/``add``), cheaper than any reduction over a window view. A backend built from the
table (the abstract and batched backends) has the row itself, and gets the call.

VJPs: max-pool (which saves its small output too) sends the whole cotangent of a window to its
first maximum in row-major window order (PyTorch's choice for ties; the composed ``max`` shared
it among tied elements): one boolean mask per window offset and one ``where(mask, g, 0)``
(NumPy: a bitwise pass); avg-pool spreads the cotangent evenly over each window (padding
included, as the forward). JVPs: average pooling is linear; max pooling passes the tangent of
each window's first maximum (the element its VJP picks). Batching: pooling works on the
trailing axes, so a batched input is one more leading axis.

Memory: one output-sized temporary beside the padded copy (a max-pool whose columns tile: the
rows' maximum, ``kernel[1]`` times the output, then the columns').
"""

from __future__ import annotations

import functools
import math
from typing import Any

from ..._primitive import Array, primitive
from .._rules.jvp import linear
from .._rules.shapes import BUFFER_ELEMENTS, in_operands_order
from ..searching import select
from .pieces import FP
from .windows import (
    VIEW_BYTES,
    _mask_blocks,
    _own,
    _padded_bytes,
    _raw,
    caps,
    grid,
    out_sizes,
    pad,
    strided,
    unwindow,
    window_slices,
)


def rows_first(kernel: Any, stride: Any) -> bool:
    """Whether a 2-D max-pool reduces each window's rows first: where the columns' windows
    tile (stride == kernel, both at least 2), the rows' maximum is one pass over runs of whole
    rows (long inner loops), and only the half-sized columns' pass is strided."""
    return len(kernel) == 2 and kernel[0] >= 2 and kernel[1] >= 2 and stride[1] == kernel[1]


def _lowest(bk: Any, dtype: Any, padding: Any) -> Any:
    """What max-pool pads with (the dtype's lowest value: it never wins the max); 0.0 where
    nothing is padded (no ``finfo`` call)."""
    return bk.finfo(dtype).min if any(b or a for b, a in padding) else 0.0


def pool(bk: Any, fname: str, x: Any, kernel: Any, stride: Any, padding: Any, how: str) -> Any:
    """Max or mean over windows, reduced pairwise over the strided slices (a max-pool whose
    columns tile: over whole rows first, see :func:`rows_first`)."""
    n = len(kernel)
    out = out_sizes(fname, tuple(x.shape[-n:]), kernel, stride, padding, (1,) * n)
    fill = _lowest(bk, x.dtype, padding) if how == "max" else 0.0
    if how == "max" and rows_first(kernel, stride):
        xp_ = pad(bk, x, padding, fill)
        (kh, kw), (sh, _), (ho, wo) = kernel, stride, out
        lead = (slice(None),) * (x.ndim - 2)
        rows = [
            strided(xp_, lead + (slice(i, i + sh * (ho - 1) + 1, sh), slice(0, wo * kw)))
            for i in range(kh)
        ]
        v = rows[0]
        for r in rows[1:]:
            v = bk.maximum(v, r)  # (..., ho, wo * kw)
        cols = [strided(v, lead + (slice(None), slice(j, None, kw))) for j in range(kw)]
        acc = cols[0]
        for c in cols[1:]:
            acc = bk.maximum(acc, c)
        return acc
    parts = window_slices(pad(bk, x, padding, fill), kernel, stride, (1,) * n, out)
    acc = parts[0] if len(parts) > 1 else bk.asarray(parts[0], copy=True)  # never a view of x
    for p in parts[1:]:
        acc = bk.maximum(acc, p) if how == "max" else acc + p
    return acc if how == "max" else acc / math.prod(kernel)


def _unpool(ns, parts, x, kernel, stride, padding, dilation=None):
    """Window contributions summed back onto ``x``'s shape (padding dropped)."""
    n = len(kernel)
    shape = tuple(x.shape[: x.ndim - n]) + tuple(
        s + pb + pa for s, (pb, pa) in zip(x.shape[x.ndim - n :], padding, strict=True)
    )
    dx = unwindow(ns, parts, shape, kernel, stride, dilation or (1,) * n)
    return pad(ns, dx, tuple((-pb, -pa) for pb, pa in padding))


def _max_pool_vjp(ns, g, out, x, /, *, kernel, stride, padding):
    n = len(kernel)
    xp_ = pad(ns, x, padding, _lowest(ns, x.dtype, padding))
    parts = window_slices(xp_, kernel, stride, (1,) * n, tuple(out.shape[out.ndim - n :]))
    if _raw(ns) and caps(ns).views_alias and not caps(ns).chunked:
        return (_max_pool_in_place(ns, g, out, x, parts, kernel, stride, padding),)
    free, cts = None, []  # free: windows whose maximum no earlier offset held
    for part in parts[:-1]:  # the first maximum of each window takes the whole cotangent
        hit = part == out
        if free is not None:
            hit = ns.logical_and(hit, free)
        free = ns.logical_not(hit) if free is None else ns.logical_and(free, ns.logical_not(hit))
        cts.append(select(ns, hit, g, 0))
    cts.append(g if free is None else select(ns, free, g, 0))
    return (_unpool(ns, cts, x, kernel, stride, padding),)


def _max_pool_in_place(ns, g, out, x, parts, kernel, stride, padding):
    """Max-pool's cotangent written offset by offset into one array, block by block of the
    batch (each offset's window-sized temporaries a block's, never all of them: measured, the
    small CNN's step peaked in this rule's first layer, 4.5 MiB over the saved values with one
    block). ``free``: windows whose maximum no earlier offset held; offset ``k`` takes
    ``eq_k and free``, the last one every window left (a NaN maximum equals nothing). Two
    window-sized masks and one window-sized cotangent, reused by every offset.
    Where the windows tile the padded input exactly, every element is written once and no
    zero fill is needed."""
    lead, sizes, tiled, overlap, spots = _unpool_plan(
        tuple(x.shape), tuple(out.shape), tuple(kernel), tuple(stride), tuple(map(tuple, padding))
    )
    dx = (ns.empty if tiled else ns.zeros)(lead + sizes, dtype=g.dtype)
    if lead:
        blocks = _mask_blocks(ns, dx)
    else:
        blocks = [None]
    for blk in blocks:
        rows = () if blk is None else (slice(*blk),)
        gb, ob = g[rows + (...,)], out[rows + (...,)]
        free = ct = None  # free: windows whose maximum no earlier offset held
        for k, (spot, part) in enumerate(zip(spots, parts, strict=True)):
            if k == len(parts) - 1:
                ct = gb if free is None else select(ns, free, gb, 0, out=ct)
            else:
                hit = part[rows + (...,)] == ob
                if free is None:
                    free = ns.logical_not(hit)
                else:  # the first maximum: equal, and no earlier offset's (in place: two
                    hit &= free  # window-sized masks in all)
                    free ^= hit  # hit is within free
                ct = select(ns, hit, gb, 0, out=ct)  # one cotangent buffer for every offset
                del hit
            idx = rows + spot
            if overlap:
                dx[idx] += ct
            else:
                dx[idx] = ct
        del ct, free
    return pad(ns, dx, tuple((-pb, -pa) for pb, pa in padding))


@functools.lru_cache(maxsize=256)
def _unpool_plan(
    shape: tuple[int, ...],
    out_shape: tuple[int, ...],
    kernel: tuple[int, ...],
    stride: tuple[int, ...],
    padding: tuple,
) -> tuple:
    """What :func:`_max_pool_in_place` works out from the shapes alone, once per layout: the
    leading axes, the padded sizes, whether the windows tile them (no zero fill) or overlap
    (an add, not a write), and each offset's spot in the padded input (the block's rows
    before it)."""
    n = len(kernel)
    out_sizes_ = out_shape[len(out_shape) - n :]
    lead = shape[: len(shape) - n]
    sizes = tuple(s + pb + pa for s, (pb, pa) in zip(shape[len(shape) - n :], padding, strict=True))
    tiled = all(
        k == s and m * s == size
        for k, s, m, size in zip(kernel, stride, out_sizes_, sizes, strict=True)
    )
    overlap = any(s < k for s, k in zip(stride, kernel, strict=True))
    spots = tuple(
        (slice(None),) * (len(lead) - 1)
        + tuple(
            slice(o, o + s * (m - 1) + 1, s)
            for o, s, m in zip(offs, stride, out_sizes_, strict=True)
        )
        for offs in grid(kernel)
    )
    return lead, sizes, tiled, overlap, spots


def _avg_pool_vjp(ns, g, out, x, /, *, kernel, stride, padding):
    share = g / math.prod(kernel)
    return (_unpool(ns, [share] * len(grid(kernel)), x, kernel, stride, padding),)


def _max_pool_jvp(ns, t, out, x, /, *, kernel, stride, padding):
    n = len(kernel)
    size = tuple(out.shape[out.ndim - n :])
    xs = window_slices(
        pad(ns, x, padding, _lowest(ns, x.dtype, padding)), kernel, stride, (1,) * n, size
    )
    ts = window_slices(pad(ns, t[0], padding), kernel, stride, (1,) * n, size)
    chosen = ts[-1]
    for xk, tk in zip(reversed(xs[:-1]), reversed(ts[:-1]), strict=True):  # the first wins
        chosen = ns.where(xk == out, tk, chosen)
    return chosen


def _pool_batch(name):
    def rule(ns, dims, x, /, **kwargs):
        return getattr(ns, name)(x, **kwargs)

    return rule


def _pool_shape(fname):
    def shape(a, x, /, *, kernel, stride, padding):
        n = len(kernel)
        out = out_sizes(fname, x.shape[x.ndim - n :], kernel, stride, padding, (1,) * n)
        return in_operands_order((*x.shape[: x.ndim - n], *out), x.dtype, x)

    def memory(out, x, /, *, kernel, stride, padding):
        # each pairwise step reads two strided window slices through the iterator's buffers,
        # and each slice is a view with its header (measured: 3 kB over on a 3 x 3 average
        # pool of 1 x 16 x 56 x 40, 29 kB on a 2 x 2 max pool of 6 x 9 x 18 x 18)
        item = out.dtype.itemsize
        slices = VIEW_BYTES * math.prod(kernel) + 2 * min(out.size, BUFFER_ELEMENTS) * item
        if fname == "max_pool2d" and rows_first(kernel, stride):  # rows' maximum v, then columns'
            (kh, kw), m = kernel, math.prod(out.shape) * out.dtype.itemsize
            slices = VIEW_BYTES * (kh + kw) + 2 * min(out.size * kw, BUFFER_ELEMENTS) * item
            v = m * kw  # (..., ho, wo * kw)
            return (
                _padded_bytes(x, padding)
                + max(v * (1 if kh == 2 else 2), v + (m if kw > 2 else 0))
                + slices
            )
        return _padded_bytes(x, padding) + out.nbytes + slices

    return shape, memory


# -- _max_pool2d ---------------------------------------------------------------------------------


@primitive(FP, needs=())
def _max_pool2d(
    bk: Any,
    x: Array,
    /,
    *,
    kernel: Any = (2, 2),
    stride: Any = (2, 2),
    padding: Any = ((0, 0), (0, 0)),
) -> Any:
    """Max over the windows of the last two axes (padding never wins)."""
    own = _own(bk, "_max_pool2d")
    if own is not None:
        return own(x, kernel=kernel, stride=stride, padding=padding)
    return pool(bk, "max_pool2d", x, kernel, stride, padding, "max")


_max_pool2d.defvjp(_max_pool_vjp, saves=("x", "out"))


_max_pool2d.defjvp(_max_pool_jvp)


_max_pool2d.defbatch(_pool_batch(_max_pool2d.name))


_s, _m = _pool_shape("max_pool2d")


_max_pool2d.defshape(_s, memory=_m)


# -- _avg_pool2d ---------------------------------------------------------------------------------


@primitive(FP, needs=())
def _avg_pool2d(
    bk: Any,
    x: Array,
    /,
    *,
    kernel: Any = (2, 2),
    stride: Any = (2, 2),
    padding: Any = ((0, 0), (0, 0)),
) -> Any:
    """Mean over the windows of the last two axes (zero padding counts, as PyTorch's default)."""
    own = _own(bk, "_avg_pool2d")
    if own is not None:
        return own(x, kernel=kernel, stride=stride, padding=padding)
    return pool(bk, "avg_pool2d", x, kernel, stride, padding, "avg")


_avg_pool2d.defvjp(_avg_pool_vjp)


_avg_pool2d.defjvp(linear(_avg_pool2d))


_avg_pool2d.defbatch(_pool_batch(_avg_pool2d.name))


_s, _m = _pool_shape("avg_pool2d")


_avg_pool2d.defshape(_s, memory=_m)
