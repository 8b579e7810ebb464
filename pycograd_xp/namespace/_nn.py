"""Convolution, pooling and relu: the fused rows behind :mod:`pycograd_xp.nn`.

These five rows are not names of the Array API standard, so they are private attributes of
each namespace (``xp._conv2d``): the standard surface stays exactly the standard's, and the
abstract backend (``pycograd_xp.memory``), vmap's batched backends and ``compile`` still see
them as ordinary rows, because each of those builds one function per row of the table whatever
its name. :mod:`pycograd_xp.nn` is their public face.

Layout is PyTorch's: ``x`` (N, C, *S), ``w`` (O, C / groups, *K), output (N, O, *S'). The
rows take normalized keyword arguments, one entry per spatial axis: ``stride`` and
``dilation`` ints, ``padding`` (before, after) pairs (a negative entry crops).

An implementation is one im2col and one matrix product. On a backend with the ``windows``
capability (NumPy, CuPy: a strided sliding-window view) the columns are one copy out of a
view; elsewhere (array-api-strict) they are a stack of ``prod(K)`` strided slices. On a backend
that writes in place, output rows shorter than ``FLAT_BELOW`` take the columns over the flat
padded image instead (one contiguous slice per offset, :func:`flat_columns`), and inputs of
fewer than ``BIAS_ROW_BELOW`` channels take the bias into the product
(:func:`_conv_bias_row`). A chunked backend (Cubed) contracts the channels once per window
offset instead (no reshapes).
Pooling reduces the strided slices pairwise (``maximum``/``add``): cheaper than any reduction
over a window view. A backend built from the table (the abstract and batched backends) has the
row itself, and gets the call.

The helpers below are Array-API code on a namespace ``bk`` (raw or ours); the VJP, JVP and
batching rules use them too.
"""

from __future__ import annotations

import math
from typing import Any

from .._primitive import primitive
from ..ops.searching import select
from ._backend import Backend, capabilities, resolve

FP = "real floating-point"


def caps(bk: Any) -> Backend:
    """The capabilities of a namespace: ours carry them; a raw one is looked up or resolved."""
    try:
        return capabilities(bk)
    except TypeError:  # a conforming namespace no namespace() call has met yet
        return resolve(bk)


def _raw(bk: Any) -> bool:
    return getattr(bk, "_backend", None) is None


def _like(bk: Any, x: Any) -> dict[str, Any]:
    like = caps(bk).like_kwargs if _raw(bk) else None
    return like(x) if like is not None else {}


def grid(kernel: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Every offset of a window, in row-major order (the order that breaks max-pool ties)."""
    out: list[tuple[int, ...]] = [()]
    for k in kernel:
        out = [g + (i,) for g in out for i in range(k)]
    return out


def out_sizes(fname: str, spatial: tuple[int, ...], kernel: tuple[int, ...], stride: Any,
              padding: Any, dilation: Any) -> tuple[int, ...]:  # fmt: skip
    """Output sizes of a window op; a clear error when a window does not fit."""
    out = tuple((s + pb + pa - d * (k - 1) - 1) // st + 1 for s, k, st, (pb, pa), d in
                zip(spatial, kernel, stride, padding, dilation, strict=True))  # fmt: skip
    if min(out, default=1) < 1:
        raise ValueError(f"{fname}(): the window {kernel} (dilation {tuple(dilation)}) is larger "
                         f"than the padded input {spatial} (padding {tuple(padding)}); "
                         "use a smaller kernel or more padding")  # fmt: skip
    return out


def pad(bk: Any, x: Any, padding: Any, value: float = 0.0) -> Any:
    """``x`` with ``padding`` (one (before, after) pair per trailing axis) of ``value`` around
    its trailing axes; a negative entry crops. A copy only where something is added."""
    n = len(padding)
    if any(b < 0 or a < 0 for b, a in padding):
        idx = (slice(None),) * (x.ndim - n) + tuple(
            slice(max(-b, 0), s - max(-a, 0)) for (b, a), s in zip(padding, x.shape[-n:],
                                                                    strict=True))  # fmt: skip
        x = x[idx]
        padding = tuple((max(b, 0), max(a, 0)) for b, a in padding)
    if not any(b or a for b, a in padding):
        return x
    lead = tuple(x.shape[: x.ndim - n])
    if _raw(bk) and caps(bk).mutable:  # one fill and one write
        shape = lead + tuple(s + b + a for s, (b, a) in zip(x.shape[-n:], padding, strict=True))
        out = bk.full(shape, value, dtype=x.dtype)
        out[(slice(None),) * len(lead) + tuple(slice(b, b + s) for (b, _), s in
                                               zip(padding, x.shape[-n:], strict=True))] = x
        return out
    for i, (b, a) in enumerate(padding):  # immutable arrays (or recorded): concatenate
        axis = x.ndim - n + i
        parts = []
        for m in (b, None, a):
            if m is None:
                parts.append(x)
            elif m:
                shape = list(x.shape)
                shape[axis] = m
                parts.append(bk.full(tuple(shape), value, dtype=x.dtype, **_like(bk, x)))
        if len(parts) > 1:
            x = bk.concat(parts, axis=axis)
    return x


def window_slices(x: Any, kernel: tuple[int, ...], stride: Any, dilation: Any,
                  out: tuple[int, ...]) -> list[Any]:  # fmt: skip
    """For each window offset (row-major), the strided slice of ``x``'s trailing axes that
    holds that element of every window: shape ``x.shape[:-n] + out``."""
    lead = (slice(None),) * (x.ndim - len(kernel))
    return [x[lead + tuple(slice(o * d, o * d + s * (m - 1) + 1, s) for o, d, s, m in
                           zip(offs, dilation, stride, out, strict=True))]  # fmt: skip
            for offs in grid(kernel)]


def columns(bk: Any, x: Any, kernel: tuple[int, ...], stride: Any, dilation: Any,
            out: tuple[int, ...], batch_inner: bool = False) -> Any:  # fmt: skip
    """im2col of a padded ``x`` (N, C, *S): (N, C * prod(kernel), prod(out)), one copy; with
    ``batch_inner`` (C * prod(kernel), N * prod(out)) instead, the layout of one 2-D product
    over the whole batch (the weight gradient's)."""
    n, (N, C) = len(kernel), x.shape[:2]
    q, p = C * math.prod(kernel), math.prod(out)
    windows = caps(bk).windows if _raw(bk) else None
    if windows is not None:  # one view, then the one copy the product needs
        span = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation, strict=True))
        v = windows(x, span, axis=tuple(range(2, 2 + n)))  # (N, C, *full, *span)
        v = v[(slice(None),) * 2 + tuple(slice(0, s * (m - 1) + 1, s) for s, m in
                                         zip(stride, out, strict=True))  # fmt: skip
              + tuple(slice(None, None, d) for d in dilation)]  # (N, C, *out, *kernel)
        if batch_inner:  # (C, *kernel, N, *out)
            v = bk.permute_dims(v, (1, *range(2 + n, 2 + 2 * n), 0, *range(2, 2 + n)))
            return bk.reshape(v, (q, N * p))
        v = bk.permute_dims(v, (0, 1, *range(2 + n, 2 + 2 * n), *range(2, 2 + n)))
    elif batch_inner:  # slices of (C, N, *S): stacked, (C, prod(K), N, *out)
        v = bk.stack(window_slices(bk.permute_dims(x, (1, 0, *range(2, 2 + n))), kernel,
                                   stride, dilation, out), axis=1)  # fmt: skip
        return bk.reshape(v, (q, N * p))
    else:
        v = bk.stack(window_slices(x, kernel, stride, dilation, out), axis=2)
    return bk.reshape(v, (N, q, p))


# A 2-D convolution of stride 1 whose output rows are shorter than this many elements takes its
# columns over the flat grid of the padded input (:func:`flat_columns`): the copy out of the
# input then runs over whole images, not over rows of ``W'`` elements. Measured on the small
# CNN's second layer (rows of 11): 1.07 against 1.25 ms; on its first (rows of 26) the narrow
# columns stay faster (0.31 against 0.37 ms).
FLAT_BELOW = 16


def flat_rows(kernel: tuple[int, ...], stride: Any, padding: Any, out: tuple[int, ...],
              groups: int) -> bool:  # fmt: skip
    """Whether a convolution's forward takes its columns over the flat padded grid: 2-D,
    stride 1, one group, no cropping (the padded input is then a fresh contiguous array),
    output rows shorter than ``FLAT_BELOW``. Only the forward: its wrapped columns' products
    are dropped, while a weight gradient over them would multiply zeros with inputs no window
    reads (``0 * inf`` is NaN where the gradient is finite)."""
    return (len(kernel) == 2 and groups == 1 and all(s == 1 for s in stride)
            and all(b >= 0 and a >= 0 for b, a in padding) and out[-1] < FLAT_BELOW)  # fmt: skip


def flat_padding(padding: Any) -> tuple[tuple[int, int], ...]:
    """``padding`` with one more row after the image: :func:`flat_columns` reads the last
    window row's wrapped columns from it."""
    (hb, ha), rest = padding[0], tuple(padding[1:])
    return ((hb, ha + 1),) + rest


def flat_columns(bk: Any, xe: Any, kernel: tuple[int, ...], dilation: Any,
                 out: tuple[int, ...]) -> Any:  # fmt: skip
    """im2col over the flat grid of ``xe`` (N, C, H, W), the input padded with
    :func:`flat_padding`: (N, prod(K) * C, H' * W), row ``(k, c)`` channel ``c``'s flattened
    image from kernel offset ``k``'s start on. Column ``r * W + j`` holds the window at
    ``(r, j)`` for ``j < W'``; the others wrap into the next row (a product's columns there
    are dropped, a cotangent's are zero). One contiguous slice per offset, so the copy runs
    over whole images; ``W / W'`` times the narrow columns' size."""
    N, C, H, W = xe.shape
    xf = bk.reshape(xe, (N, C, H * W))
    length = out[0] * W
    starts = [i * dilation[0] * W + j * dilation[1] for i, j in grid(kernel)]
    v = bk.stack([xf[:, :, s:s + length] for s in starts], axis=1)  # (N, prod(K), C, H' W)
    return bk.reshape(v, (N, len(starts) * C, length))


# A convolution with a bias over fewer input channels than this, one group, takes the bias
# into its product (:func:`_conv_bias_row`): a product column per channel costs less than a
# pass over the output. Measured on the small CNN's first layer (C = 1): 0.29 against 0.40 ms.
BIAS_ROW_BELOW = 8


def bias_row(channels: int, groups: int, b: Any) -> bool:
    """Whether a convolution takes its bias into the product (:func:`_conv_bias_row`)."""
    return b is not None and groups == 1 and channels < BIAS_ROW_BELOW


# Loops over the batch keep each step's columns within this many bytes on a backend that
# writes in place: the peak stays a fraction of one layer's activations (PyTorch's level), at
# a few Python calls per block.
BLOCK_BYTES = 2 * 2**20


def batch_blocks(bk: Any, n: int, bytes_per_example: int) -> list[tuple[int, int]]:
    """``[(start, stop), ...]`` covering ``range(n)`` in near-equal blocks of at most
    ``BLOCK_BYTES`` of columns each (one block on an immutable or chunked backend, or on ours):
    a function of shapes only, so a projection and a compiled replay loop as the call does."""
    if not (_raw(bk) and caps(bk).mutable and not caps(bk).chunked):
        return [(0, n)]
    return blocks_of(n, bytes_per_example)


# An elementwise rule that writes its result block by block (relu's VJP) keeps each block's
# cotangent-sized work within this many bytes: its mask then stays a fraction of a layer.
MASK_BLOCK_BYTES = 2 * 2**20


def blocks_of(n: int, bytes_per_example: int,
              block_bytes: int | None = None) -> list[tuple[int, int]]:  # fmt: skip
    """The blocks of :func:`batch_blocks` on a backend that writes in place (of at most
    ``block_bytes`` each, BLOCK_BYTES when None)."""
    limit = BLOCK_BYTES if block_bytes is None else block_bytes
    k = min(n, max(1, -(-n * bytes_per_example // limit)))
    return [(i * n // k, (i + 1) * n // k) for i in range(k)]


def itemsize(bk: Any, dtype: Any) -> int:
    return bk.finfo(dtype).bits // 8


def unwindow(bk: Any, parts: list[Any], shape: tuple[int, ...], kernel: tuple[int, ...],
             stride: Any, dilation: Any) -> Any:  # fmt: skip
    """The transpose of :func:`window_slices`: an array of ``shape`` (zeros) with each part
    added at its window offset. One zero fill and one strided write (or add, where windows
    overlap) per offset on a raw mutable backend; elsewhere each part is dilated by the stride
    and padded into place, and the parts are summed (on a chunked backend, whose reshapes need
    regular chunks, placed by products with 0/1 matrices instead: exact for finite values)."""
    n = len(kernel)
    lead, sizes = tuple(shape[: len(shape) - n]), tuple(shape[len(shape) - n:])
    out = tuple(parts[0].shape[parts[0].ndim - n:])
    spots = [tuple(slice(o * d, o * d + s * (m - 1) + 1, s) for o, d, s, m in
                   zip(offs, dilation, stride, out, strict=True)) for offs in grid(kernel)]
    if _raw(bk) and caps(bk).mutable:
        overlap = any(s < d * (k - 1) + 1 and k > 1 for s, d, k in
                      zip(stride, dilation, kernel, strict=True))  # fmt: skip
        dx = bk.zeros(shape, dtype=parts[0].dtype)
        for spot, part in zip(spots, parts, strict=True):
            idx = (slice(None),) * len(lead) + spot
            if overlap:
                dx[idx] += part
            else:
                dx[idx] = part
        return dx
    total = None
    if _raw(bk) and caps(bk).chunked:  # no reshape of irregular chunks: 0/1 placement products
        for spot, part in zip(spots, parts, strict=True):
            placed = part
            for i, (sp, size, m) in enumerate(zip(spot, sizes, out, strict=True)):
                rows = bk.arange(size, **_like(bk, part))[:, None]
                cols = sp.start + sp.step * bk.arange(m, **_like(bk, part))[None, :]
                e = bk.astype(rows == cols, part.dtype)  # (size, m)
                if i == n - 1:  # the last axis
                    placed = bk.matmul(placed, bk.matrix_transpose(e))
                else:  # n == 2: the second-to-last axis
                    placed = bk.matmul(e, placed)
            total = placed if total is None else total + placed
        return total
    for spot, part in zip(spots, parts, strict=True):
        for i, s in enumerate(stride):  # s - 1 zeros after each element along axis i
            if s == 1:
                continue
            axis = part.ndim - n + i
            m = part.shape[axis]
            zero = bk.zeros_like(part)
            part = bk.reshape(bk.stack([part] + [zero] * (s - 1), axis=axis + 1),
                              tuple(part.shape[:axis]) + (m * s,) + tuple(part.shape[axis + 1:]))
            part = part[(slice(None),) * axis + (slice(0, (m - 1) * s + 1), ...)]
        placed = pad(bk, part, tuple((sp.start, size - sp.start - p) for sp, size, p in
                                     zip(spot, sizes, part.shape[part.ndim - n:], strict=True)))
        total = placed if total is None else total + placed
    return total


def add_bias(bk: Any, y: Any, b: Any) -> Any:
    """``y + b`` over the channel axis 1 of ``y`` (N, O, ...): in place in ``y``'s buffer (a
    fresh product the caller owns) on a raw backend that writes in place, where the sum keeps
    ``y``'s dtype; else a new array."""
    if b is None:
        return y
    bb = bk.reshape(b, (1, -1) + (1,) * (y.ndim - 2))
    if (_raw(bk) and caps(bk).mutable and not caps(bk).chunked
            and bk.result_type(y.dtype, b.dtype) == y.dtype):  # fmt: skip
        y += bb
        return y
    return y + bb


def check_bias(fname: str, w: Any, b: Any) -> None:
    if b is not None and tuple(b.shape) != (w.shape[0],):
        raise ValueError(f"{fname}(): bias {tuple(b.shape)} does not match weight "
                         f"{tuple(w.shape)}: expected one value per output channel "
                         f"({w.shape[0]},)")  # fmt: skip


def conv(bk: Any, fname: str, x: Any, w: Any, stride: Any, padding: Any, dilation: Any,
         groups: int, b: Any = None) -> Any:  # fmt: skip
    """The convolution (cross-correlation) of ``x`` with ``w``, plus the bias ``b`` (None:
    none) per output channel: one im2col, one product, the bias added into the product's
    buffer (of each block of the batch while it is fresh in cache)."""
    n = w.ndim - 2
    N, C, out_c, Cg = x.shape[0], x.shape[1], w.shape[0], w.shape[1]
    kernel = tuple(w.shape[2:])
    if x.ndim != n + 2 or C != Cg * groups or out_c % groups:
        raise ValueError(f"{fname}(): input {tuple(x.shape)} and weight {tuple(w.shape)} do "
                         f"not match with groups={groups}: expected x (N, C, {n} spatial axes) "
                         "and w (O, C / groups, kernel...) with O divisible by groups")  # fmt: skip
    check_bias(fname, w, b)
    out = out_sizes(fname, tuple(x.shape[2:]), kernel, stride, padding, dilation)
    if _raw(bk) and caps(bk).chunked:
        return add_bias(bk, _conv_by_offsets(bk, pad(bk, x, padding), w, kernel, stride,
                                             dilation, out, groups), b)  # fmt: skip
    if _raw(bk) and caps(bk).mutable and flat_rows(kernel, stride, padding, out, groups):
        return _conv_flat(bk, x, w, b, padding, dilation, out)
    if _raw(bk) and caps(bk).mutable and bias_row(C, groups, b):
        return _conv_bias_row(bk, x, w, b, stride, padding, dilation, out)
    xp_ = pad(bk, x, padding)
    q, p = C * math.prod(kernel), math.prod(out)
    wm = bk.reshape(w, (out_c, q) if groups == 1 else (groups, out_c // groups, q // groups))

    def product(xb: Any) -> Any:  # (n, out_c, P) for a block of the batch
        cols = columns(bk, xb, kernel, stride, dilation, out)  # (n, Q, P)
        if groups == 1:
            return bk.matmul(wm, cols)
        cols = bk.reshape(cols, (xb.shape[0], groups, q // groups, p))
        return bk.reshape(bk.matmul(wm, cols), (xb.shape[0], out_c, p))  # (n, G, out_c/G, P)

    blocks = batch_blocks(bk, N, q * p * itemsize(bk, x.dtype))
    if len(blocks) == 1:
        y = add_bias(bk, product(xp_), b)
    else:  # the columns of one block at a time, each product written into its rows
        dtype = bk.result_type(x.dtype, w.dtype, *(() if b is None else (b.dtype,)))
        y = bk.empty((N, out_c, p), dtype=dtype)
        for start, stop in blocks:
            y[start:stop, ...] = add_bias(bk, product(xp_[start:stop, ...]), b)
    return bk.reshape(y, (N, out_c, *out))


def _conv_bias_row(bk: Any, x: Any, w: Any, b: Any, stride: Any, padding: Any, dilation: Any,
                   out: tuple[int, ...]) -> Any:  # fmt: skip
    """:func:`conv` with the bias in the product: the columns, a stack of the window slices,
    get one more slice of ones per channel, and the weight one more column per channel (the
    bias in channel 0's, zeros in the others'), so no pass over the output adds it."""
    N, C, out_c = x.shape[0], x.shape[1], w.shape[0]
    kk, p = math.prod(w.shape[2:]), math.prod(out)
    xp_ = pad(bk, x, padding)
    wa = bk.zeros((out_c, C, kk + 1), dtype=bk.result_type(x.dtype, w.dtype, b.dtype))
    wa[:, :, :kk] = bk.reshape(w, (out_c, C, kk))
    wa[:, 0, kk] = b
    wa = bk.reshape(wa, (out_c, C * (kk + 1)))
    blocks = blocks_of(N, C * (kk + 1) * p * itemsize(bk, x.dtype))
    y = None if len(blocks) == 1 else bk.empty((N, out_c, p), dtype=wa.dtype)
    for start, stop in blocks:
        xb = xp_[start:stop, ...]
        ones = bk.ones((stop - start, C, *out), dtype=x.dtype)
        cols = bk.stack(window_slices(xb, tuple(w.shape[2:]), stride, dilation, out) + [ones],
                        axis=2)  # (n, C, prod(K) + 1, *out)  # fmt: skip
        del ones
        prod = bk.matmul(wa, bk.reshape(cols, (stop - start, C * (kk + 1), p)))
        del cols
        if y is None:
            y = prod
        else:
            y[start:stop, ...] = prod
        del prod  # before the next block's
    return bk.reshape(y, (N, out_c, *out))


def _conv_flat(bk: Any, x: Any, w: Any, b: Any, padding: Any, dilation: Any,
               out: tuple[int, ...]) -> Any:  # fmt: skip
    """:func:`conv` with the columns over the flat padded grid (:func:`flat_columns`), one
    block of the batch at a time: each block's product (n, O, H' * W) has the bias added in
    place and its valid columns (``j < W'`` of each row) copied into the output."""
    N, out_c = x.shape[0], w.shape[0]
    kernel = tuple(w.shape[2:])
    xe = pad(bk, x, flat_padding(padding))
    wm = bk.reshape(bk.permute_dims(w, (0, 2, 3, 1)), (out_c, -1))  # rows (o), columns (k, c)
    length = out[0] * xe.shape[3]
    dtype = bk.result_type(x.dtype, w.dtype, *(() if b is None else (b.dtype,)))
    y = bk.empty((N, out_c, *out), dtype=dtype)
    for start, stop in blocks_of(N, wm.shape[1] * length * itemsize(bk, x.dtype)):
        prod = bk.matmul(wm, flat_columns(bk, xe[start:stop, ...], kernel, dilation, out))
        prod = bk.reshape(add_bias(bk, prod, b), (stop - start, out_c, out[0], xe.shape[3]))
        y[start:stop, ...] = prod[..., : out[1]]
        del prod  # before the next block's
    return y


def _group(x: Any, axis: int, i: int, size: int) -> Any:
    return x[(slice(None),) * axis + (slice(i * size, (i + 1) * size), ...)]


def _conv_by_offsets(bk: Any, x: Any, w: Any, kernel: tuple[int, ...], stride: Any,
                     dilation: Any, out: tuple[int, ...], groups: int) -> Any:  # fmt: skip
    """A chunked backend's convolution: one contraction over the channels per window offset,
    summed. No columns, so no reshape (which a chunked backend refuses on the irregular chunks
    that padding and strided slices leave)."""
    og, cg = w.shape[0] // groups, w.shape[1]
    ys = []
    for gi in range(groups):
        xg, wg = _group(x, 1, gi, cg), _group(w, 0, gi, og)
        acc = None
        for offs, sl in zip(grid(kernel), window_slices(xg, kernel, stride, dilation, out),
                            strict=True):  # fmt: skip
            t = bk.tensordot(sl, wg[(slice(None), slice(None), *offs)], axes=([1], [1]))
            acc = t if acc is None else acc + t  # (N, *out, O / G)
        ys.append(acc)
    return bk.moveaxis(ys[0] if groups == 1 else bk.concat(ys, axis=-1), -1, 1)


def weight_grad_by_offsets(bk: Any, g: Any, x: Any, w_shape: tuple[int, ...], stride: Any,
                           dilation: Any, groups: int) -> Any:  # fmt: skip
    """A chunked backend's weight cotangent (``x`` padded): one contraction per offset."""
    kernel, out = tuple(w_shape[2:]), tuple(g.shape[2:])
    og, cg = w_shape[0] // groups, w_shape[1]
    axes = [0, *range(2, 2 + len(kernel))]
    ws = []
    for gi in range(groups):
        gg, xg = _group(g, 1, gi, og), _group(x, 1, gi, cg)
        parts = [bk.tensordot(gg, sl, axes=(axes, axes)) for sl in
                 window_slices(xg, kernel, stride, dilation, out)]  # each (O / G, C / G)
        ws.append(bk.reshape(bk.stack(parts, axis=-1), (og, cg, *kernel)))
    return ws[0] if groups == 1 else bk.concat(ws, axis=0)


def rows_first(kernel: Any, stride: Any) -> bool:
    """Whether a 2-D max-pool reduces each window's rows first: where the columns' windows
    tile (stride == kernel, both at least 2), the rows' maximum is one pass over runs of whole
    rows (long inner loops), and only the half-sized columns' pass is strided."""
    return len(kernel) == 2 and kernel[0] >= 2 and kernel[1] >= 2 and stride[1] == kernel[1]


def pool(bk: Any, fname: str, x: Any, kernel: Any, stride: Any, padding: Any, how: str) -> Any:
    """Max or mean over windows, reduced pairwise over the strided slices (a max-pool whose
    columns tile: over whole rows first, see :func:`rows_first`)."""
    n = len(kernel)
    out = out_sizes(fname, tuple(x.shape[-n:]), kernel, stride, padding, (1,) * n)
    fill = bk.finfo(x.dtype).min if how == "max" else 0.0
    if how == "max" and rows_first(kernel, stride):
        xp_ = pad(bk, x, padding, fill)
        (kh, kw), (sh, _), (ho, wo) = kernel, stride, out
        lead = (slice(None),) * (x.ndim - 2)
        rows = [xp_[lead + (slice(i, i + sh * (ho - 1) + 1, sh), slice(0, wo * kw))]
                for i in range(kh)]  # fmt: skip
        v = rows[0]
        for r in rows[1:]:
            v = bk.maximum(v, r)  # (..., ho, wo * kw)
        cols = [v[lead + (slice(None), slice(j, None, kw))] for j in range(kw)]
        acc = cols[0]
        for c in cols[1:]:
            acc = bk.maximum(acc, c)
        return acc
    parts = window_slices(pad(bk, x, padding, fill), kernel, stride, (1,) * n, out)
    acc = parts[0] if len(parts) > 1 else bk.asarray(parts[0], copy=True)  # never a view of x
    for p in parts[1:]:
        acc = bk.maximum(acc, p) if how == "max" else acc + p
    return acc if how == "max" else acc / math.prod(kernel)


def _own(bk: Any, name: str) -> Any:
    """The backend's own function for this row (abstract and batched backends are built from
    the table), or None."""
    return getattr(bk, name, None)


@primitive(FP, needs=())
def _conv1d(bk: Any, x: Any, w: Any, b: Any = None, /, *, stride: Any = (1,),
            padding: Any = ((0, 0),), dilation: Any = (1,), groups: int = 1) -> Any:
    """Convolution (cross-correlation) of x (N, C, L) with w (O, C / groups, K), plus the
    bias b (O,) when given: (N, O, L')."""
    own = _own(bk, "_conv1d")
    if own is not None:
        return own(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups)
    return conv(bk, "conv1d", x, w, stride, padding, dilation, groups, b)


@primitive(FP, needs=())
def _conv2d(bk: Any, x: Any, w: Any, b: Any = None, /, *, stride: Any = (1, 1),
            padding: Any = ((0, 0), (0, 0)), dilation: Any = (1, 1), groups: int = 1) -> Any:
    """Convolution (cross-correlation) of x (N, C, H, W) with w (O, C / groups, KH, KW), plus
    the bias b (O,) when given: (N, O, H', W')."""
    own = _own(bk, "_conv2d")
    if own is not None:
        return own(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups)
    return conv(bk, "conv2d", x, w, stride, padding, dilation, groups, b)


@primitive(FP, needs=())
def _max_pool2d(bk: Any, x: Any, /, *, kernel: Any = (2, 2), stride: Any = (2, 2),
                padding: Any = ((0, 0), (0, 0))) -> Any:  # fmt: skip
    """Max over the windows of the last two axes (padding never wins)."""
    own = _own(bk, "_max_pool2d")
    if own is not None:
        return own(x, kernel=kernel, stride=stride, padding=padding)
    return pool(bk, "max_pool2d", x, kernel, stride, padding, "max")


@primitive(FP, needs=())
def _avg_pool2d(bk: Any, x: Any, /, *, kernel: Any = (2, 2), stride: Any = (2, 2),
                padding: Any = ((0, 0), (0, 0))) -> Any:  # fmt: skip
    """Mean over the windows of the last two axes (zero padding counts, as PyTorch's default)."""
    own = _own(bk, "_avg_pool2d")
    if own is not None:
        return own(x, kernel=kernel, stride=stride, padding=padding)
    return pool(bk, "avg_pool2d", x, kernel, stride, padding, "avg")


@primitive(FP, needs=())
def _relu(bk: Any, x: Any, /) -> Any:
    """``where(x > 0, x, 0)``: 0 at 0 and at NaN, +0 at -0. One comparison and one select
    with a Python zero (on NumPy a bitwise blend: faster than ``maximum``, and exact where
    ``maximum`` keeps NaN and -0). Its VJP reads only the output: no mask is kept."""
    own = _own(bk, "_relu")
    if own is not None:
        return own(x)
    return select(bk, x > 0, x, 0)
