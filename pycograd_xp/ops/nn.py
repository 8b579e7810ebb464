"""The fused rows behind :mod:`pycograd_xp.nn`: convolution, pooling and relu; and the
transformer's activations (``_gelu``, ``_gelu_tanh``, ``_silu``, ``_softplus``), normalisations
(``_layer_norm``, ``_rms_norm``), loss (``_cross_entropy``) and attention (``_attention``),
at the end of the module (softmax, log_softmax and logsumexp are the rows of ``special.py``).

These rows are not names of the Array API standard, so they are private attributes of
each namespace (``xp._conv2d``): the standard surface stays exactly the standard's, and the
abstract backend (``pycograd_xp.memory``), vmap's batched backends and ``compile`` still see
them as ordinary rows, because each of those builds one function per row of the table whatever
its name. :mod:`pycograd_xp.nn` is their public face.

The transformer rows keep only small residuals (the tape holds what a VJP declares): an
activation its input; a normalisation its input, weight and per-row statistics (as extra
outputs); cross-entropy the logits, the labels and each row's normaliser; attention q, k, v,
its output and each row's log-sum-exp, recomputing the probabilities block by block (flash
style: never a score matrix for the whole batch). On a raw backend that writes in place
their elementwise work goes block by block (``PIECE_BYTES``), so their temporaries stay a
block's, and a VJP given a cotangent only it holds writes its result there; elsewhere
(immutable or chunked arrays, ours for a higher order) each is the composition of standard
functions over whole arrays. The convolution and pooling rows are described first.

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

VJPs. Each saves only its inputs (max-pool also its small output), never the columns: the
backward rebuilds what it needs.

* conv, input: on a raw mutable backend (NumPy, CuPy, array-api-strict; also the abstract
  backend, so projections and ``compile`` see it) col2im: one product ``w^T g`` and ``prod(K)``
  strided adds back into place, columns of the input's size; elsewhere (ours, so it is
  differentiable again; immutable or chunked arrays) the transposed convolution, itself a
  convolution row (the cotangent dilated by the stride, the kernel flipped with its channel axes
  swapped per group);
* conv, weight: the correlation of the input with the cotangent, one im2col and one product;
* conv, bias: the cotangent summed over the batch and spatial axes;
* max-pool: the whole cotangent of a window goes to its first maximum in row-major window
  order (PyTorch's choice for ties; the composed ``max`` shared it among tied elements): one
  boolean mask per window offset and one ``where(mask, g, 0)`` (NumPy: a bitwise pass);
* avg-pool: the cotangent spread evenly over each window (padding included, as the forward);
* relu: ``g`` where the output is positive, 0 elsewhere (0 at 0, as PyTorch's
  ``threshold_backward``), read from the output alone: the tape keeps no mask beside it.

JVPs: a convolution is bilinear in input and weight, plus its bias (the tangent is the
convolution with one factor replaced by its tangent, summed, the bias's tangent added inside one
of them), average pooling is linear, and max pooling passes the tangent of each window's first
maximum (the element its VJP picks), relu the tangent where its output is positive.

Batching: convolution and pooling batch as one call, never one per example: a batched input
folds its batch axis into N; a batched weight folds it into the groups (each example's kernels
see only its own channels), so per-example weights cost one grouped convolution. A shared bias
goes into the call; a per-example one (or one beside per-example weights) is added after it.
Pooling works on the trailing axes, so a batched input is just one more leading axis; relu is
elementwise.

Shape and memory rules: the transients are the impl's, a padded copy of the input where there
is padding, the columns (N, C * prod(K), prod(out)) copied out of the window view for the
product (of one block of the batch at a time, see :func:`batch_blocks`: each block's product is
a temporary too), and a copy of the weight when it is not contiguous (a flipped kernel in a
transposed convolution). The flat-grid and bias-in-the-product paths have their own rules
(:func:`_flat_memory`, :func:`_bias_row_memory`). Pooling reduces strided slices pairwise: one
output-sized temporary beside the padded copy (a max-pool whose columns tile: the rows'
maximum, ``kernel[1]`` times the output, then the columns'). A convolution's input gradient on
a mutable backend is no row call but col2im (:func:`col2im`): a product, a zero fill and
strided adds, each projected by its own rule.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from .._primitive import REGISTRY, primitive
from ..namespace._backend import Backend, capabilities, resolve
from ._rules.batching import batch_size, batched, to_rank
from ._rules.jvp import TRANSPOSED, call, linear, plus
from ._rules.shapes import BUFFER_ELEMENTS, broadcast, new, ufunc_buffers
from ._rules.vjp import values_known
from .searching import select, where_memory

# -- kits shared by the rows below: the forward (im2col, products, pooling) ----------------------


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


def out_sizes(
    fname: str,
    spatial: tuple[int, ...],
    kernel: tuple[int, ...],
    stride: Any,
    padding: Any,
    dilation: Any,
) -> tuple[int, ...]:
    """Output sizes of a window op; a clear error when a window does not fit."""
    out = tuple(
        (s + pb + pa - d * (k - 1) - 1) // st + 1
        for s, k, st, (pb, pa), d in zip(spatial, kernel, stride, padding, dilation, strict=True)
    )
    if min(out, default=1) < 1:
        raise ValueError(
            f"{fname}(): the window {kernel} (dilation {tuple(dilation)}) is larger "
            f"than the padded input {spatial} (padding {tuple(padding)}); "
            "use a smaller kernel or more padding"
        )
    return out


def pad(bk: Any, x: Any, padding: Any, value: float = 0.0) -> Any:
    """``x`` with ``padding`` (one (before, after) pair per trailing axis) of ``value`` around
    its trailing axes; a negative entry crops. A copy only where something is added."""
    n = len(padding)
    if any(b < 0 or a < 0 for b, a in padding):
        idx = (slice(None),) * (x.ndim - n) + tuple(
            slice(max(-b, 0), s - max(-a, 0))
            for (b, a), s in zip(padding, x.shape[-n:], strict=True)
        )
        x = x[idx]
        padding = tuple((max(b, 0), max(a, 0)) for b, a in padding)
    if not any(b or a for b, a in padding):
        return x
    lead = tuple(x.shape[: x.ndim - n])
    if _raw(bk) and caps(bk).views_alias:  # one fill and one write
        shape = lead + tuple(s + b + a for s, (b, a) in zip(x.shape[-n:], padding, strict=True))
        out = bk.full(shape, value, dtype=x.dtype)
        out[
            (slice(None),) * len(lead)
            + tuple(slice(b, b + s) for (b, _), s in zip(padding, x.shape[-n:], strict=True))
        ] = x
        return out
    for i, (b, a) in enumerate(padding):  # immutable arrays (or recorded): concatenate
        axis = x.ndim - n + i
        parts = []
        for m in (b, None, a):
            if m is None:
                parts.append(x)
            elif m:
                part_shape = list(x.shape)
                part_shape[axis] = m
                parts.append(bk.full(tuple(part_shape), value, dtype=x.dtype, **_like(bk, x)))
        if len(parts) > 1:
            x = bk.concat(parts, axis=axis)
    return x


def window_slices(
    x: Any, kernel: tuple[int, ...], stride: Any, dilation: Any, out: tuple[int, ...]
) -> list[Any]:
    """For each window offset (row-major), the strided slice of ``x``'s trailing axes that
    holds that element of every window: shape ``x.shape[:-n] + out``."""
    lead = (slice(None),) * (x.ndim - len(kernel))
    return [
        x[
            lead
            + tuple(
                slice(o * d, o * d + s * (m - 1) + 1, s)
                for o, d, s, m in zip(offs, dilation, stride, out, strict=True)
            )
        ]
        for offs in grid(kernel)
    ]


def columns(
    bk: Any,
    x: Any,
    kernel: tuple[int, ...],
    stride: Any,
    dilation: Any,
    out: tuple[int, ...],
    batch_inner: bool = False,
) -> Any:
    """im2col of a padded ``x`` (N, C, *S): (N, C * prod(kernel), prod(out)), one copy; with
    ``batch_inner`` (C * prod(kernel), N * prod(out)) instead, the layout of one 2-D product
    over the whole batch (the weight gradient's)."""
    n, (N, C) = len(kernel), x.shape[:2]
    q, p = C * math.prod(kernel), math.prod(out)
    windows = caps(bk).windows if _raw(bk) else None
    if windows is not None:  # one view, then the one copy the product needs
        span = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation, strict=True))
        v = windows(x, span, axis=tuple(range(2, 2 + n)))  # (N, C, *full, *span)
        v = v[
            (slice(None),) * 2
            + tuple(slice(0, s * (m - 1) + 1, s) for s, m in zip(stride, out, strict=True))
            + tuple(slice(None, None, d) for d in dilation)
        ]  # (N, C, *out, *kernel)
        if batch_inner:  # (C, *kernel, N, *out)
            v = bk.permute_dims(v, (1, *range(2 + n, 2 + 2 * n), 0, *range(2, 2 + n)))
            return bk.reshape(v, (q, N * p))
        v = bk.permute_dims(v, (0, 1, *range(2 + n, 2 + 2 * n), *range(2, 2 + n)))
    elif batch_inner:  # slices of (C, N, *S): stacked, (C, prod(K), N, *out)
        v = bk.stack(
            window_slices(
                bk.permute_dims(x, (1, 0, *range(2, 2 + n))), kernel, stride, dilation, out
            ),
            axis=1,
        )
        return bk.reshape(v, (q, N * p))
    else:
        v = bk.stack(window_slices(x, kernel, stride, dilation, out), axis=2)
    return bk.reshape(v, (N, q, p))


# A 2-D convolution of stride 1 whose output rows are shorter than this many elements takes its
# columns over the flat grid of the padded input (:func:`flat_columns`): the copy out of the
# input then runs over whole images, not over rows of ``W'`` elements (measured:
# docs/calibration.md#flat-below).
FLAT_BELOW = 16


def flat_rows(
    kernel: tuple[int, ...], stride: Any, padding: Any, out: tuple[int, ...], groups: int
) -> bool:
    """Whether a convolution's forward takes its columns over the flat padded grid: 2-D,
    stride 1, one group, no cropping (the padded input is then a fresh contiguous array),
    output rows shorter than ``FLAT_BELOW``. Only the forward: its wrapped columns' products
    are dropped, while a weight gradient over them would multiply zeros with inputs no window
    reads (``0 * inf`` is NaN where the gradient is finite)."""
    return (
        len(kernel) == 2
        and groups == 1
        and all(s == 1 for s in stride)
        and all(b >= 0 and a >= 0 for b, a in padding)
        and out[-1] < FLAT_BELOW
    )


def flat_padding(padding: Any) -> tuple[tuple[int, int], ...]:
    """``padding`` with one more row after the image: :func:`flat_columns` reads the last
    window row's wrapped columns from it."""
    (hb, ha), rest = padding[0], tuple(padding[1:])
    return ((hb, ha + 1),) + rest


def flat_columns(
    bk: Any, xe: Any, kernel: tuple[int, ...], dilation: Any, out: tuple[int, ...]
) -> Any:
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
    v = bk.stack([xf[:, :, s : s + length] for s in starts], axis=1)  # (N, prod(K), C, H' W)
    return bk.reshape(v, (N, len(starts) * C, length))


# A convolution with a bias over fewer input channels than this, one group, takes the bias
# into its product (:func:`_conv_bias_row`): a product column per channel costs less than a
# pass over the output (measured: docs/calibration.md#bias-row-below).
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
    if not (_raw(bk) and caps(bk).views_alias and not caps(bk).chunked):
        return [(0, n)]
    return blocks_of(n, bytes_per_example)


# An elementwise rule that writes its result block by block (relu's VJP) keeps each block's
# cotangent-sized work within this many bytes: its mask then stays a fraction of a layer.
MASK_BLOCK_BYTES = 2 * 2**20


def blocks_of(
    n: int, bytes_per_example: int, block_bytes: int | None = None
) -> list[tuple[int, int]]:
    """The blocks of :func:`batch_blocks` on a backend that writes in place (of at most
    ``block_bytes`` each, BLOCK_BYTES when None)."""
    limit = BLOCK_BYTES if block_bytes is None else block_bytes
    k = min(n, max(1, -(-n * bytes_per_example // limit)))
    return [(i * n // k, (i + 1) * n // k) for i in range(k)]


def itemsize(bk: Any, dtype: Any) -> int:
    return bk.finfo(dtype).bits // 8


def unwindow(
    bk: Any,
    parts: list[Any],
    shape: tuple[int, ...],
    kernel: tuple[int, ...],
    stride: Any,
    dilation: Any,
) -> Any:
    """The transpose of :func:`window_slices`: an array of ``shape`` (zeros) with each part
    added at its window offset. One zero fill and one strided write (or add, where windows
    overlap) per offset on a raw mutable backend; elsewhere each part is dilated by the stride
    and padded into place, and the parts are summed (on a chunked backend, whose reshapes need
    regular chunks, placed by products with 0/1 matrices instead: exact for finite values)."""
    n = len(kernel)
    lead, sizes = tuple(shape[: len(shape) - n]), tuple(shape[len(shape) - n :])
    out = tuple(parts[0].shape[parts[0].ndim - n :])
    spots = [
        tuple(
            slice(o * d, o * d + s * (m - 1) + 1, s)
            for o, d, s, m in zip(offs, dilation, stride, out, strict=True)
        )
        for offs in grid(kernel)
    ]
    if _raw(bk) and caps(bk).views_alias:
        overlap = any(
            s < d * (k - 1) + 1 and k > 1 for s, d, k in zip(stride, dilation, kernel, strict=True)
        )
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
            part = bk.reshape(
                bk.stack([part] + [zero] * (s - 1), axis=axis + 1),
                tuple(part.shape[:axis]) + (m * s,) + tuple(part.shape[axis + 1 :]),
            )
            part = part[(slice(None),) * axis + (slice(0, (m - 1) * s + 1), ...)]
        placed = pad(
            bk,
            part,
            tuple(
                (sp.start, size - sp.start - p)
                for sp, size, p in zip(spot, sizes, part.shape[part.ndim - n :], strict=True)
            ),
        )
        total = placed if total is None else total + placed
    return total


def add_bias(bk: Any, y: Any, b: Any) -> Any:
    """``y + b`` over the channel axis 1 of ``y`` (N, O, ...): in place in ``y``'s buffer (a
    fresh product the caller owns) on a raw backend that writes in place, where the sum keeps
    ``y``'s dtype; else a new array."""
    if b is None:
        return y
    bb = bk.reshape(b, (1, -1) + (1,) * (y.ndim - 2))
    if (
        _raw(bk)
        and caps(bk).views_alias
        and not caps(bk).chunked
        and bk.result_type(y.dtype, b.dtype) == y.dtype
    ):
        y += bb
        return y
    return y + bb


def check_bias(fname: str, w: Any, b: Any) -> None:
    if b is not None and tuple(b.shape) != (w.shape[0],):
        raise ValueError(
            f"{fname}(): bias {tuple(b.shape)} does not match weight "
            f"{tuple(w.shape)}: expected one value per output channel "
            f"({w.shape[0]},)"
        )


def conv(
    bk: Any,
    fname: str,
    x: Any,
    w: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    groups: int,
    b: Any = None,
) -> Any:
    """The convolution (cross-correlation) of ``x`` with ``w``, plus the bias ``b`` (None:
    none) per output channel: one im2col, one product, the bias added into the product's
    buffer (of each block of the batch while it is fresh in cache)."""
    n = w.ndim - 2
    N, C, out_c, Cg = x.shape[0], x.shape[1], w.shape[0], w.shape[1]
    kernel = tuple(w.shape[2:])
    if x.ndim != n + 2 or C != Cg * groups or out_c % groups:
        raise ValueError(
            f"{fname}(): input {tuple(x.shape)} and weight {tuple(w.shape)} do "
            f"not match with groups={groups}: expected x (N, C, {n} spatial axes) "
            "and w (O, C / groups, kernel...) with O divisible by groups"
        )
    check_bias(fname, w, b)
    out = out_sizes(fname, tuple(x.shape[2:]), kernel, stride, padding, dilation)
    if _raw(bk) and caps(bk).chunked:
        return add_bias(
            bk,
            _conv_by_offsets(bk, pad(bk, x, padding), w, kernel, stride, dilation, out, groups),
            b,
        )
    if _raw(bk) and caps(bk).views_alias and flat_rows(kernel, stride, padding, out, groups):
        return _conv_flat(bk, x, w, b, padding, dilation, out)
    if _raw(bk) and caps(bk).views_alias and bias_row(C, groups, b):
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


def _conv_bias_row(
    bk: Any, x: Any, w: Any, b: Any, stride: Any, padding: Any, dilation: Any, out: tuple[int, ...]
) -> Any:
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
        cols = bk.stack(
            window_slices(xb, tuple(w.shape[2:]), stride, dilation, out) + [ones], axis=2
        )  # (n, C, prod(K) + 1, *out)
        del ones
        prod = bk.matmul(wa, bk.reshape(cols, (stop - start, C * (kk + 1), p)))
        del cols
        if y is None:
            y = prod
        else:
            y[start:stop, ...] = prod
        del prod  # before the next block's
    return bk.reshape(y, (N, out_c, *out))


def _conv_flat(
    bk: Any, x: Any, w: Any, b: Any, padding: Any, dilation: Any, out: tuple[int, ...]
) -> Any:
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


def _conv_by_offsets(
    bk: Any,
    x: Any,
    w: Any,
    kernel: tuple[int, ...],
    stride: Any,
    dilation: Any,
    out: tuple[int, ...],
    groups: int,
) -> Any:
    """A chunked backend's convolution: one contraction over the channels per window offset,
    summed. No columns, so no reshape (which a chunked backend refuses on the irregular chunks
    that padding and strided slices leave)."""
    og, cg = w.shape[0] // groups, w.shape[1]
    ys = []
    for gi in range(groups):
        xg, wg = _group(x, 1, gi, cg), _group(w, 0, gi, og)
        acc = None
        for offs, sl in zip(
            grid(kernel), window_slices(xg, kernel, stride, dilation, out), strict=True
        ):
            t = bk.tensordot(sl, wg[(slice(None), slice(None), *offs)], axes=([1], [1]))
            acc = t if acc is None else acc + t  # (N, *out, O / G)
        ys.append(acc)
    return bk.moveaxis(ys[0] if groups == 1 else bk.concat(ys, axis=-1), -1, 1)


def weight_grad_by_offsets(
    bk: Any, g: Any, x: Any, w_shape: tuple[int, ...], stride: Any, dilation: Any, groups: int
) -> Any:
    """A chunked backend's weight cotangent (``x`` padded): one contraction per offset."""
    kernel, out = tuple(w_shape[2:]), tuple(g.shape[2:])
    og, cg = w_shape[0] // groups, w_shape[1]
    axes = [0, *range(2, 2 + len(kernel))]
    ws = []
    for gi in range(groups):
        gg, xg = _group(g, 1, gi, og), _group(x, 1, gi, cg)
        parts = [
            bk.tensordot(gg, sl, axes=(axes, axes))
            for sl in window_slices(xg, kernel, stride, dilation, out)
        ]  # each (O / G, C / G)
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
        rows = [
            xp_[lead + (slice(i, i + sh * (ho - 1) + 1, sh), slice(0, wo * kw))] for i in range(kh)
        ]
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


# -- kits: the VJPs (col2im, the weight's correlation, unpooling) --------------------------------


def _call(ns, name, *args, **kwargs):
    """Row ``name`` on ``ns``: the row's impl on a raw namespace, our recorded function on
    ours (higher order, vmap of a pullback)."""
    if getattr(ns, "_backend", None) is None:
        return REGISTRY[name].impl(ns, *args, **kwargs)
    return getattr(ns, name)(*args, **kwargs)


def dilate(ns, g, stride):
    """``g`` with ``stride - 1`` zeros between neighbours along its trailing axes."""
    if all(s == 1 for s in stride):
        return g
    return unwindow(
        ns,
        [g],
        tuple(g.shape[: g.ndim - len(stride)])
        + tuple(
            (m - 1) * s + 1 for m, s in zip(g.shape[g.ndim - len(stride) :], stride, strict=True)
        ),
        (1,) * len(stride),
        stride,
        (1,) * len(stride),
    )


def input_grad(ns, name, g, x, w, *, stride, padding, dilation, groups):
    """The transposed convolution of ``g`` with ``w``: the cotangent of ``x``. On a raw
    mutable backend one product and ``prod(K)`` strided adds back into place (col2im: columns
    of the input's size, not of the padded cotangent's); elsewhere (immutable or chunked arrays,
    and ours, so that it is differentiable again) the convolution of the dilated, padded
    cotangent with the flipped kernel, itself a convolution row."""
    if _raw(ns) and caps(ns).views_alias and not caps(ns).chunked:
        return col2im(ns, g, x, w, stride=stride, padding=padding, dilation=dilation, groups=groups)
    n = w.ndim - 2
    o, cg, kernel = w.shape[0], w.shape[1], tuple(w.shape[2:])
    wt = ns.reshape(w, (groups, o // groups, cg, *kernel))
    wt = ns.reshape(
        ns.permute_dims(wt, (0, 2, 1, *range(3, 3 + n))), (groups * cg, o // groups, *kernel)
    )
    wt = ns.flip(wt, axis=tuple(range(2, 2 + n)))
    pads = []
    for s, k, st, (pb, pa), d, m in zip(
        x.shape[2:], kernel, stride, padding, dilation, g.shape[2:], strict=True
    ):
        rest = s + pb + pa - d * (k - 1) - 1 - st * (m - 1)  # input never reached by a window
        pads.append((d * (k - 1) - pb, d * (k - 1) - pa + rest))
    return _call(
        ns,
        name,
        dilate(ns, g, stride),
        wt,
        stride=(1,) * n,
        padding=tuple(pads),
        dilation=dilation,
        groups=groups,
    )


def col2im(ns, g, x, w, *, stride, padding, dilation, groups):
    """The cotangent of ``x`` as ``w^T g`` per group, (N, C, *K, *out), each window offset's
    slice added at its place in the padded input, the padding then dropped. One block of the
    batch at a time (its columns within ``BLOCK_BYTES``); with stride 1, one long add per
    offset (:func:`_col2im_runs`)."""
    N = g.shape[0]
    o, cg, kernel = w.shape[0], w.shape[1], tuple(w.shape[2:])
    out = tuple(g.shape[2:])
    sizes = tuple(s + pb + pa for s, (pb, pa) in zip(x.shape[2:], padding, strict=True))
    dx = ns.zeros((N, groups * cg, *sizes), dtype=g.dtype)
    if all(st == 1 for st in stride):
        return _col2im_runs(ns, g, w, dx, sizes, out, dilation, padding, groups)
    p, kk = math.prod(out), math.prod(kernel)
    wm = ns.matrix_transpose(ns.reshape(w, (groups, o // groups, cg * kk)))
    overlap = any(
        s < d * (k - 1) + 1 and k > 1 for s, d, k in zip(stride, dilation, kernel, strict=True)
    )
    for a, b in batch_blocks(ns, N, groups * cg * kk * p * itemsize(ns, g.dtype)):
        gb = g[a:b, ...]
        cols = ns.matmul(wm, ns.reshape(gb, (b - a, groups, o // groups, p)))
        cols = ns.reshape(cols, (b - a, groups * cg, *kernel, *out))  # (n, C, *K, *out)
        dxb = dx[a:b, ...]
        for offs in grid(kernel):
            part = cols[(slice(None), slice(None), *offs, ...)]
            idx = (slice(None), slice(None)) + tuple(
                slice(i * d, i * d + s * (m - 1) + 1, s)
                for i, d, s, m in zip(offs, dilation, stride, out, strict=True)
            )
            if overlap:
                dxb[idx] += part
            else:
                dxb[idx] = part
        del cols, gb, part  # before the next block's: one block's columns alive at a time
    return pad(ns, dx, tuple((-pb, -pa) for pb, pa in padding))


def _col2im_runs(ns, g, w, dx, sizes, out, dilation, padding, groups):
    """col2im for stride 1, one add per kernel offset and block: the product's rows, ordered
    (offset, channel) within each group, each span a channel's whole flat padded image, so
    that each offset's rows are one contiguous run over every channel of the group; added at
    the offset's flat start, a run spills into the next channel only its zero tail (an output
    position plus an offset stays inside its image). With the ``matmul_into`` capability
    (NumPy) the product covers only the first ``out[0]`` rows of each image (``g`` padded
    along the other axes) and is written into a buffer whose tail is zero: on the small CNN's
    second layer 1.24 against 1.46 ms for the product over ``g`` padded to the whole image.
    Measured there too: the adds 0.07 against 0.22 ms per block (one short add per channel
    and offset)."""
    n = len(sizes)
    N, (o, c), kernel = g.shape[0], w.shape[:2], tuple(w.shape[2:])
    og, kk, size = o // groups, math.prod(kernel), math.prod(sizes)
    wk = ns.reshape(
        ns.permute_dims(ns.reshape(w, (groups, og, c, *kernel)), (0, *range(3, 3 + n), 2, 1)),
        (groups, kk * c, og),
    )  # rows (k, c) of each group
    steps = [math.prod(sizes[i + 1 :]) for i in range(n)]
    starts = [
        sum(i * d * st for i, d, st in zip(offs, dilation, steps, strict=True))
        for offs in grid(kernel)
    ]
    into = caps(ns).matmul_into
    # g's positions on the flat padded grid: the first out[0] rows (all of it without into)
    length = out[0] * steps[0] if into is not None else size
    grid_pad = tuple((0, s - m) for s, m in zip(sizes, out, strict=True))
    if into is not None:
        grid_pad = ((0, 0),) + grid_pad[1:]
    dtype = ns.result_type(w.dtype, g.dtype)
    dxf = ns.reshape(dx, (N, groups, c * size))
    for a, b in batch_blocks(ns, N, groups * kk * c * size * itemsize(ns, g.dtype)):
        gb = ns.reshape(pad(ns, g[a:b, ...], grid_pad), (b - a, groups, og, length))
        if into is None:
            cols = ns.matmul(wk, gb)
        else:
            cols = ns.empty((b - a, groups, kk * c, size), dtype=dtype)
            cols[..., length:] = 0
            into(wk, gb, cols[..., :length])
        cols = ns.reshape(cols, (b - a, groups, kk, c * size))
        for k, start in enumerate(starts):
            dxf[a:b, :, start:] += cols[:, :, k, : c * size - start]
        del cols, gb  # before the next block's: one block's columns alive at a time
    return pad(ns, dx, tuple((-pb, -pa) for pb, pa in padding))


def weight_grad(ns, g, x, w, *, stride, padding, dilation, groups):
    """The correlation of ``x`` with ``g``: the cotangent of ``w``. Where one example's
    product is large against its positions (``O * Q > P``) on a raw backend that writes in
    place, one product per example with the cotangent channels-last, block by block of the
    batch (:func:`_weight_grad_per_example`), or where the products would outgrow the columns
    (``O > P``) one 2-D product per block, columns (Q, n * P) against the cotangent
    (O, n * P), summed over the blocks; else (and on ours) a batched product per example over
    the whole batch and a sum (a long, thin 2-D product is the slower one there)."""
    if getattr(ns, "_backend", None) is None and caps(ns).chunked:
        return weight_grad_by_offsets(
            ns, g, pad(ns, x, padding), tuple(w.shape), stride, dilation, groups
        )
    kernel, out = tuple(w.shape[2:]), tuple(g.shape[2:])
    n_, o, p = x.shape[0], w.shape[0], math.prod(out)
    q = x.shape[1] * math.prod(kernel)
    xpad = pad(ns, x, padding)
    if _raw(ns) and caps(ns).views_alias and p < o * q and o <= p:
        return _weight_grad_per_example(ns, g, xpad, w, stride, dilation, groups)
    if o * q <= p or not _raw(ns):
        cols = columns(ns, xpad, kernel, stride, dilation, out)  # (N, Q, P)
        gm = ns.reshape(g, (n_, groups, o // groups, p))
        cols = ns.reshape(cols, (n_, groups, q // groups, p))
        gw = ns.sum(ns.matmul(gm, ns.matrix_transpose(cols)), axis=0)  # (G, O/G, Q/G)
        return ns.reshape(gw, tuple(w.shape))
    gw = None
    for a, b in batch_blocks(ns, n_, q * p * itemsize(ns, x.dtype)):
        cols = columns(ns, xpad[a:b, ...], kernel, stride, dilation, out, batch_inner=True)
        cols = ns.reshape(cols, (groups, q // groups, (b - a) * p))  # (G, Q/G, n P)
        gq = ns.permute_dims(ns.reshape(g[a:b, ...], (b - a, o, p)), (1, 0, 2))
        gq = ns.reshape(gq, (groups, o // groups, (b - a) * p))  # (G, O/G, n P)
        part = ns.matmul(cols, ns.matrix_transpose(gq))  # (G, Q/G, O/G)
        del cols, gq  # before the next block's: one block's columns alive at a time
        gw = part if gw is None else gw + part
    return ns.reshape(ns.matrix_transpose(gw), tuple(w.shape))


def _weight_grad_per_example(ns, g, xpad, w, stride, dilation, groups):
    """The weight cotangent one block of the batch at a time, one product per example and
    group: its columns (Q, P) times its cotangent copied channels-last (P, O), summed over the
    block. Both operands row-major, the layout OpenBLAS multiplies fastest: measured on the
    small CNN's second layer, 1.37 against 1.54 ms for one (Q, n * P) times (n * P, O) product
    per block. Where an example's product (Q, O) is no larger than its columns (O <= P)."""
    kernel, out = tuple(w.shape[2:]), tuple(g.shape[2:])
    n_, o, p = xpad.shape[0], w.shape[0], math.prod(out)
    q = xpad.shape[1] * math.prod(kernel)
    og, qg = o // groups, q // groups
    gw = None
    for a, b in blocks_of(n_, (q * p + q * o + p * o) * itemsize(ns, xpad.dtype)):
        cols = columns(ns, xpad[a:b, ...], kernel, stride, dilation, out)  # (n, Q, P)
        gt = ns.empty((b - a, groups, p, og), dtype=g.dtype)
        gt[...] = ns.permute_dims(ns.reshape(g[a:b, ...], (b - a, groups, og, p)), (0, 1, 3, 2))
        part = ns.sum(ns.matmul(ns.reshape(cols, (b - a, groups, qg, p)), gt), axis=0)
        del cols, gt  # before the next block's
        gw = part if gw is None else gw + part  # (G, Q/G, O/G)
    return ns.reshape(ns.matrix_transpose(gw), tuple(w.shape))


def _conv_vjp(name):
    def rule(ns, g, out, x, w, b=None, /, *, stride, padding, dilation, groups, needs=(0, 1, 2)):
        kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
        gx = input_grad(ns, name, g, x, w, **kw) if 0 in needs else None
        gw = weight_grad(ns, g, x, w, **kw) if 1 in needs else None
        if b is None:
            return gx, gw
        # the batch first (a contiguous reduction), then the positions: faster than one
        # reduction over axes (0, 2, 3) (measured: docs/calibration.md#bias-row-below)
        gb = ns.sum(ns.sum(g, axis=0), axis=tuple(range(1, g.ndim - 1))) if 2 in needs else None
        return gx, gw, gb

    return rule


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
    xp_ = pad(ns, x, padding, ns.finfo(x.dtype).min)
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


def _mask_blocks(ns, a):
    """Blocks of ``a``'s first axis of at most MASK_BLOCK_BYTES each: an elementwise rule's
    masks and temporaries a block's, never the whole array's."""
    per = math.prod(a.shape[1:]) * itemsize(ns, a.dtype)
    return blocks_of(a.shape[0], per, MASK_BLOCK_BYTES)


def _max_pool_in_place(ns, g, out, x, parts, kernel, stride, padding):
    """Max-pool's cotangent written offset by offset into one array, block by block of the
    batch (each offset's window-sized temporaries a block's, never all of them: measured, the
    small CNN's step peaked in this rule's first layer, 4.5 MiB over the saved values with one
    block). ``taken``: windows whose maximum an earlier offset held; offset ``k`` takes
    ``eq_k and not taken``, the last one every window left (a NaN maximum equals nothing).
    Where the windows tile the padded input exactly, every element is written once and no
    zero fill is needed."""
    n = len(kernel)
    out_sizes_ = tuple(out.shape[out.ndim - n :])
    lead = tuple(x.shape[: x.ndim - n])
    sizes = tuple(s + pb + pa for s, (pb, pa) in zip(x.shape[x.ndim - n :], padding, strict=True))
    tiled = all(
        k == s and m * s == size
        for k, s, m, size in zip(kernel, stride, out_sizes_, sizes, strict=True)
    )
    overlap = any(s < k for s, k in zip(stride, kernel, strict=True))
    dx = (ns.empty if tiled else ns.zeros)(lead + sizes, dtype=g.dtype)
    spots = [
        (slice(None),) * (len(lead) - 1)
        + tuple(
            slice(o, o + s * (m - 1) + 1, s)
            for o, s, m in zip(offs, stride, out_sizes_, strict=True)
        )
        for offs in grid(kernel)
    ]
    if lead:
        blocks = _mask_blocks(ns, dx)
    else:
        blocks = [None]
    for blk in blocks:
        rows = () if blk is None else (slice(*blk),)
        gb, ob = g[rows + (...,)], out[rows + (...,)]
        taken = None
        for k, (spot, part) in enumerate(zip(spots, parts, strict=True)):
            if k == len(parts) - 1:
                ct = gb if taken is None else select(ns, taken, 0, gb)
            else:
                eq = part[rows + (...,)] == ob
                if taken is None:
                    hit = taken = eq  # fresh: updated in place below once hit is used
                else:  # the standard's in-place operators: two window-sized masks, not five
                    hit = ns.logical_not(taken)
                    hit &= eq
                    taken |= eq
                ct = select(ns, hit, gb, 0)
                del eq, hit
            idx = rows + spot
            if overlap:
                dx[idx] += ct
            else:
                dx[idx] = ct
            del ct
    return pad(ns, dx, tuple((-pb, -pa) for pb, pa in padding))


def _avg_pool_vjp(ns, g, out, x, /, *, kernel, stride, padding):
    share = g / math.prod(kernel)
    return (_unpool(ns, [share] * len(grid(kernel)), x, kernel, stride, padding),)


def _relu_vjp(ns, g, out, x, /, *, owned=False):
    """``where(out > 0, g, 0)``; into ``g`` itself when the tape says only it holds ``g``
    (``owned``) on a raw backend that writes in place, block by block of the batch so that the
    mask (a quarter of the cotangent in bytes) never exists whole: no second array of the
    layer's size. Measured: the small CNN's step peaked here, at its first layer's saved
    output, cotangent, mask and result (2.8, 2.8, 0.7 and 2.8 MB). Otherwise (a shared
    cotangent; compile's trace, whose replay writes the select into a dead buffer itself) one
    select."""
    if not (owned and _raw(ns) and caps(ns).views_alias and not caps(ns).chunked and g.ndim):
        return (select(ns, out > 0, g, 0),)
    for a, b in _mask_blocks(ns, g):
        block = g[a:b, ...]
        select(ns, out[a:b, ...] > 0, block, 0, out=block)
    return (g,)


# -- kits: the JVPs ------------------------------------------------------------------------------


def _conv_jvp(name):
    def rule(ns, t, out, x, w, b=None, /, **kwargs):
        tb = t[2] if len(t) > 2 else None  # the bias enters affinely: fused into one term
        tx = (
            None
            if t[0] is None
            else call(ns, name, t[0], w, *(() if tb is None else (tb,)), **kwargs)
        )
        tw = (
            None
            if t[1] is None
            else call(ns, name, x, t[1], *(() if tb is None or tx is not None else (tb,)), **kwargs)
        )
        if tx is None and tw is None:  # the bias's tangent alone, over the channel axis
            return ns.reshape(tb, (1, -1) + (1,) * (out.ndim - 2))
        return plus(tx, tw)

    return rule


def _max_pool_jvp(ns, t, out, x, /, *, kernel, stride, padding):
    n = len(kernel)
    size = tuple(out.shape[out.ndim - n :])
    xs = window_slices(pad(ns, x, padding, ns.finfo(x.dtype).min), kernel, stride, (1,) * n, size)
    ts = window_slices(pad(ns, t[0], padding), kernel, stride, (1,) * n, size)
    chosen = ts[-1]
    for xk, tk in zip(reversed(xs[:-1]), reversed(ts[:-1]), strict=True):  # the first wins
        chosen = ns.where(xk == out, tk, chosen)
    return chosen


def _relu_jvp(ns, t, out, x, /):
    return select(ns, out > 0, t[0], 0)


# -- kits: batching ------------------------------------------------------------------------------


def _conv_batch(name):
    def rule(ns, dims, x, w, bias=None, /, *, stride, padding, dilation, groups):
        f = getattr(ns, name)
        kw = dict(stride=stride, padding=padding, dilation=dilation)
        bx, bw = dims[0], dims[1]
        bb = len(dims) > 2 and bool(dims[2])
        if bias is not None and (bb or bw):  # a per-example bias: added after, per example
            y = (
                rule(
                    ns,
                    (bx, bw),
                    x,
                    w,
                    stride=stride,
                    padding=padding,
                    dilation=dilation,
                    groups=groups,
                )
                if bx or bw
                else f(x, w, groups=groups, **kw)[None, ...]
            )
            k = y.ndim - 3  # spatial axes of (B, N, O, *S)
            return y + ns.reshape(bias, (bias.shape[0] if bb else 1, 1, -1) + (1,) * k)
        fused = () if bias is None else (bias,)  # one bias for every example: inside the row
        if not bw:  # (B, N, C, *S) as (B*N, C, *S)
            b, n = x.shape[0], x.shape[1]
            y = f(ns.reshape(x, (b * n, *x.shape[2:])), w, *fused, groups=groups, **kw)
            return ns.reshape(y, (b, n, *y.shape[1:]))
        k = w.ndim - 3  # spatial axes
        b, o, cg, kernel = w.shape[0], w.shape[1], w.shape[2], tuple(w.shape[3:])
        og = o // groups
        # kernels ordered (group, example, out channel): one group per (group, example)
        wg = ns.permute_dims(
            ns.reshape(w, (b, groups, og, cg, *kernel)), (1, 0, 2, 3, *range(4, 4 + k))
        )
        wg = ns.reshape(wg, (groups * b * og, cg, *kernel))
        if bx:  # input channels ordered (group, example, channel) likewise
            n, spatial = x.shape[1], tuple(x.shape[3:])
            xg = ns.permute_dims(
                ns.reshape(x, (b, n, groups, cg, *spatial)), (1, 2, 0, 3, *range(4, 4 + k))
            )
            y = f(ns.reshape(xg, (n, groups * b * cg, *spatial)), wg, groups=groups * b, **kw)
        else:  # every example's kernels read the same channels of the shared input
            n = x.shape[0]
            y = f(x, wg, groups=groups, **kw)
        out = tuple(y.shape[2:])
        y = ns.permute_dims(ns.reshape(y, (n, groups, b, og, *out)), (2, 0, 1, 3, *range(4, 4 + k)))
        return ns.reshape(y, (b, n, o, *out))

    return rule


def _pool_batch(name):
    def rule(ns, dims, x, /, **kwargs):
        return getattr(ns, name)(x, **kwargs)

    return rule


# -- kits: shapes and memory ---------------------------------------------------------------------


def _padded_bytes(x, padding):
    n = len(padding)
    if not any(b > 0 or a > 0 for b, a in padding):
        return 0
    spatial = [
        max(s + min(b, 0) + min(a, 0), 0) + max(b, 0) + max(a, 0)
        for s, (b, a) in zip(x.shape[x.ndim - n :], padding, strict=True)
    ]
    return math.prod(x.shape[: x.ndim - n]) * math.prod(spatial) * x.dtype.itemsize


def _conv_shape(fname):
    def shape(a, x, w, b=None, /, *, stride, padding, dilation, groups):
        n = w.ndim - 2
        if x.ndim != n + 2 or x.shape[1] != w.shape[1] * groups or w.shape[0] % groups:
            raise ValueError(
                f"{fname}(): input {x.shape} and weight {w.shape} do not match with groups={groups}"
            )
        check_bias(fname, w, b)
        out = out_sizes(fname, x.shape[2:], w.shape[2:], stride, padding, dilation)
        dtypes = (x.dtype, w.dtype) if b is None else (x.dtype, w.dtype, b.dtype)
        return new((x.shape[0], w.shape[0], *out), np.result_type(*dtypes))

    def memory(out, x, w, b=None, /, *, stride, padding, dilation, groups):
        if flat_rows(tuple(w.shape[2:]), stride, padding, tuple(out.shape[2:]), groups):
            return _flat_memory(out, x, w, b, padding)
        if bias_row(x.shape[1], groups, b):
            return _bias_row_memory(out, x, w, padding)
        per = x.shape[1] * math.prod(w.shape[2:]) * math.prod(out.shape[2:])  # one example's
        n = _block_rows(x, per)
        cols = n * per  # the columns of one block of the batch at a time
        prod = np.result_type(x.dtype, w.dtype)  # the product's dtype
        cast = cols * prod.itemsize if x.dtype != prod else 0  # matmul's cast copy
        w_bytes = math.prod(w.shape) * max(w.dtype.itemsize, prod.itemsize)
        block = n * math.prod(out.shape[1:])  # the elements of one block's product
        block_out = block * prod.itemsize if n < x.shape[0] else 0
        bias = 0
        if b is not None:  # added into the product in place; a new sum where it widens it
            bias = ufunc_buffers(
                out,
                new((n, *out.shape[1:]), prod),
                new((1, w.shape[0]) + (1,) * (out.ndim - 2), b.dtype),
            )
            if prod != out.dtype:
                bias += block * out.dtype.itemsize
        return (
            _padded_bytes(x, padding) + cols * x.dtype.itemsize + cast + w_bytes + block_out + bias
        )

    return shape, memory


def _block_rows(x, per):
    """The examples in the largest block of the batch a convolution takes at a time, for
    ``per`` column elements an example (:func:`blocks_of`)."""
    return max(stop - start for start, stop in blocks_of(x.shape[0], per * x.dtype.itemsize))


def _flat_memory(out, x, w, b, padding):
    """A convolution over the flat padded grid (:func:`_conv_flat`): the input padded
    with one more row (always a copy), the weight's permuted copy, and per block of the batch
    its columns (n, prod(K) * C, H' * W), the product (n, O, H' * W) and what adding the bias
    into it takes."""
    wp = x.shape[3] + padding[1][0] + padding[1][1]  # the padded width
    length = out.shape[2] * wp
    per = w.shape[1] * math.prod(w.shape[2:]) * length  # one example's columns
    n = _block_rows(x, per)
    prod = np.result_type(x.dtype, w.dtype)
    cols = n * per * x.dtype.itemsize
    cast = n * per * prod.itemsize if x.dtype != prod else 0  # matmul's cast copy
    w_bytes = math.prod(w.shape) * (w.dtype.itemsize + (prod.itemsize if w.dtype != prod else 0))
    block = n * w.shape[0] * length  # the elements of one block's product
    bias = 0
    if b is not None:  # added into the product in place (the iterator buffers the broadcast
        widened = np.result_type(prod, b.dtype)  # bias); a new sum where it widens it
        bias = min(block, BUFFER_ELEMENTS) * widened.itemsize
        if widened != prod:
            bias += block * widened.itemsize
    return (
        _padded_bytes(x, flat_padding(padding))
        + w_bytes
        + cols
        + cast
        + block * prod.itemsize
        + bias
    )


def _bias_row_memory(out, x, w, padding):
    """A convolution with the bias in its product (:func:`_conv_bias_row`): the
    padded copy, the weight with a column per channel more, and per block of the batch the
    slice of ones (until stacked), the columns (n, C * (prod(K) + 1), P), matmul's cast copy
    of them where the weight is wider, and the block's product where there are several."""
    c, kk, p = x.shape[1], math.prod(w.shape[2:]), math.prod(out.shape[2:])
    per = c * (kk + 1) * p  # one example's columns
    n = _block_rows(x, per)
    item = out.dtype.itemsize
    wa = w.shape[0] * c * (kk + 1) * item
    ones = n * c * p * x.dtype.itemsize
    cast = n * per * item if x.dtype != out.dtype else 0
    block = n * w.shape[0] * p * item if n < x.shape[0] else 0
    return _padded_bytes(x, padding) + wa + n * per * x.dtype.itemsize + max(ones, cast) + block


# Python objects of one strided view a row makes inside (a pool's window slices): as
# manipulation.VIEW_HEADER_BYTES (docs/calibration.md#view-header-bytes)
VIEW_BYTES = 256


def _pool_shape(fname):
    def shape(a, x, /, *, kernel, stride, padding):
        n = len(kernel)
        out = out_sizes(fname, x.shape[x.ndim - n :], kernel, stride, padding, (1,) * n)
        return new((*x.shape[: x.ndim - n], *out), x.dtype)

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


def _relu_shape(a, x, /):
    return new(x.shape, x.dtype)


def _relu_memory(out, x, /):
    """The mask ``x > 0`` (one byte an element) beside the select's own transients."""
    mask = new(x.shape, np.bool_)
    return mask.nbytes + max(ufunc_buffers(mask, x, 0), where_memory(out, mask, x, 0))


# -- _conv1d, _conv2d ----------------------------------------------------------------------------


@primitive(FP, needs=())
def _conv1d(
    bk: Any,
    x: Any,
    w: Any,
    b: Any = None,
    /,
    *,
    stride: Any = (1,),
    padding: Any = ((0, 0),),
    dilation: Any = (1,),
    groups: int = 1,
) -> Any:
    """Convolution (cross-correlation) of x (N, C, L) with w (O, C / groups, K), plus the
    bias b (O,) when given: (N, O, L')."""
    own = _own(bk, "_conv1d")
    if own is not None:
        return own(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups)
    return conv(bk, "conv1d", x, w, stride, padding, dilation, groups, b)


@primitive(FP, needs=())
def _conv2d(
    bk: Any,
    x: Any,
    w: Any,
    b: Any = None,
    /,
    *,
    stride: Any = (1, 1),
    padding: Any = ((0, 0), (0, 0)),
    dilation: Any = (1, 1),
    groups: int = 1,
) -> Any:
    """Convolution (cross-correlation) of x (N, C, H, W) with w (O, C / groups, KH, KW), plus
    the bias b (O,) when given: (N, O, H', W')."""
    own = _own(bk, "_conv2d")
    if own is not None:
        return own(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups)
    return conv(bk, "conv2d", x, w, stride, padding, dilation, groups, b)


def _with_slices(rule):
    """A convolution's memory rule with the headers of the strided views its columns are
    copied from, one per kernel offset (measured: 9 kB over on a 12 x 12 kernel)."""

    def memory(out, x, w, *args, **kwargs):
        return rule(out, x, w, *args, **kwargs) + VIEW_BYTES * math.prod(w.shape[2:])

    return memory


for _row, _fname in ((_conv1d, "conv1d"), (_conv2d, "conv2d")):
    _row.defvjp(_conv_vjp(_row.name), saves=("x", "w"), takes_needs=True)
    _row.defjvp(_conv_jvp(_row.name))
    _row.defbatch(_conv_batch(_row.name))
    _s, _m = _conv_shape(_fname)
    _row.defshape(_s, memory=_with_slices(_m))


# -- _max_pool2d ---------------------------------------------------------------------------------


@primitive(FP, needs=())
def _max_pool2d(
    bk: Any,
    x: Any,
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
    x: Any,
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


# -- _relu ---------------------------------------------------------------------------------------


@primitive(FP, needs=())
def _relu(bk: Any, x: Any, /) -> Any:
    """``where(x > 0, x, 0)``: 0 at 0 and at NaN, +0 at -0. One comparison and one select
    with a Python zero (on NumPy a bitwise blend: faster than ``maximum``, and exact where
    ``maximum`` keeps NaN and -0). Its VJP reads only the output: no mask is kept."""
    own = _own(bk, "_relu")
    if own is not None:
        return own(x)
    return select(bk, x > 0, x, 0)


_relu.defvjp(_relu_vjp, saves=("out",), takes_owned=True)
_relu.defjvp(_relu_jvp)
_relu.defbatch(lambda ns, dims, x, /: ns._relu(x))
_relu.defshape(_relu_shape, memory=_relu_memory)


# == the fused rows of transformers: activations, normalisations, the loss, attention ==========


# -- kits shared by the rows below: evaluation block by block ------------------------------------

# The rows below do their elementwise work block by block on a raw backend that writes in place
# (NumPy, CuPy, array-api-strict, the abstract backend): each block's temporaries stay within
# this many bytes (in cache), never a layer's size, and a VJP given a cotangent only it holds
# writes its result into it. Elsewhere (immutable or chunked arrays; ours, for a higher order)
# one block: the whole array (measured: docs/calibration.md#piece-bytes).
PIECE_BYTES = 256 * 2**10


def in_place(bk: Any) -> bool:
    """Whether ``bk`` is a raw backend that writes in place (block-by-block evaluation)."""
    return _raw(bk) and caps(bk).views_alias and not caps(bk).chunked


def pieces(
    shape: Any, itemsize: int, keep: int = 0, limit: int | None = None
) -> list[tuple[Any, ...]]:
    """Basic indices covering an array of ``shape`` (elements of ``itemsize`` bytes) in blocks
    of at most ``limit`` bytes (PIECE_BYTES when None), each a view whatever the layout:
    ``[(...,)]`` (one block) when the whole fits. The last ``keep`` axes are never split (a row
    a reduction needs whole); a block is one index of the leading axes (a slice of one: it keeps
    the rank) and a slice of the first axis whose rows fit, then ``...``."""
    limit = PIECE_BYTES if limit is None else limit
    shape = tuple(shape)
    lead = len(shape) - keep
    if lead <= 0 or math.prod(shape) * itemsize <= limit:
        return [(...,)]
    k, row = 0, 0
    for k in range(lead):  # the first axis whose single index fits (the last leading one at most)
        row = math.prod(shape[k + 1 :]) * itemsize
        if row <= limit:
            break
    step = max(1, limit // max(row, 1))
    return [  # slices of one along the outer axes: a block keeps the array's rank
        (*(slice(i, i + 1) for i in outer), slice(a, min(a + step, shape[k])), ...)
        for outer in itertools.product(*(range(s) for s in shape[:k]))
        for a in range(0, shape[k], step)
    ]


def piece_size(shape: Any, itemsize: int, keep: int = 0, limit: int | None = None) -> int:
    """Elements of the largest block :func:`pieces` makes (all of them for one block)."""
    limit = PIECE_BYTES if limit is None else limit
    shape = tuple(shape)
    lead = len(shape) - keep
    total = math.prod(shape)
    if lead <= 0 or total * itemsize <= limit:
        return total
    k, row = 0, 1
    for k in range(lead):
        row = math.prod(shape[k + 1 :])
        if row * itemsize <= limit:
            break
    return min(shape[k], max(1, limit // max(row * itemsize, 1))) * row


def by_pieces(bk: Any, f: Any, *arrays: Any, keep: int = 0, out: Any = None) -> Any:
    """``f(bk, *blocks, dst=block)`` over the blocks of ``arrays`` (all of one shape and of the
    result's dtype; :func:`pieces`), written into ``out`` (a new array when None) unless ``f``
    returns ``dst`` itself (its last operation wrote there, :func:`_into`); the whole arrays in
    one call ``f(bk, *arrays)`` where there is one block or ``bk`` does not write in place (then
    ``out`` is not written)."""
    x = arrays[0]
    blocks = pieces(x.shape, itemsize(bk, x.dtype), keep) if in_place(bk) and x.ndim else [...]
    if len(blocks) == 1:
        return f(bk, *arrays)
    if out is None:
        out = bk.empty(tuple(x.shape), dtype=x.dtype)
    for idx in blocks:
        dst = out[idx]
        r = f(bk, *(a[idx] for a in arrays), dst=dst)
        if r is not dst:
            out[idx] = r
        del r, dst
    return out


def _into(bk: Any, f: Any, a: Any, b: Any, dst: Any) -> Any:
    """``f(a, b)`` (a binary function of ``bk``) written into ``dst`` where given, of the
    result's dtype, and ``f`` takes ``out=`` (NumPy's ufuncs: no temporary and no copy); a new
    array elsewhere (the abstract backend, whose projections count it: an upper bound)."""
    if dst is not None and dst.dtype == bk.result_type(a, b):
        c = caps(bk)
        if c.takes_out is not None and c.takes_out(f) and isinstance(dst, c.array_type):
            return f(a, b, out=dst)
    return f(a, b)


def _sum_to(ns: Any, a: Any, shape: tuple[int, ...]) -> Any:
    """``a`` summed down to ``shape`` (a shape it was broadcast from)."""
    shape = tuple(shape)
    if tuple(a.shape) == shape:
        return a
    lead = a.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, s in enumerate(shape) if s == 1 and a.shape[lead + i] != 1
    )
    a = ns.sum(a, axis=axes, keepdims=True) if axes else a
    return ns.reshape(a, shape) if lead else a


def _same_shape(a: Any, x: Any, /, **kw: Any) -> Any:
    return new(x.shape, x.dtype)


def _pieces_memory(temps: int) -> Any:
    """The transients of a one-argument row evaluated block by block into a new output:
    ``temps`` arrays of the largest block alive at once, and the iterator's buffers of a
    block in another layout than its temporaries'."""

    def memory(out: Any, x: Any, /, **kw: Any) -> int:
        item = out.dtype.itemsize
        n = piece_size(x.shape, item)
        return temps * n * item + 2 * min(n, BUFFER_ELEMENTS) * item

    return memory


def _activation_vjp(d: Any) -> Any:
    """The VJP ``g d(ns, x)`` of an activation whose derivative is ``d``: block by block into
    ``g`` when only the backward pass holds it (``owned``), else into a new array."""

    def rule(ns: Any, g: Any, out: Any, x: Any, /, *, owned: bool = False) -> Any:
        def block(ns: Any, gb: Any, xb: Any, dst: Any = None) -> Any:
            r = d(ns, xb)
            if not in_place(ns):
                return r * gb
            return _into(ns, ns.multiply, r, gb, dst) if dst is not None else _times(r, gb)

        if g.dtype != x.dtype:
            return (d(ns, x) * g,)
        return (by_pieces(ns, block, g, x, out=g if owned else None),)

    return rule


def _times(r: Any, g: Any) -> Any:
    r *= g  # a fresh derivative block: the product in its buffer
    return r


def _activation_jvp(d: Any) -> Any:
    """The JVP ``t d(ns, x)`` of an activation whose derivative is ``d``."""
    return lambda ns, t, out, x, /: t[0] * d(ns, x)


def _same_row(row: Any) -> Any:
    """The batching rule of an elementwise row: the row on the batched operand."""
    name = row.name
    return lambda ns, dims, x, /: getattr(ns, name)(x)


# -- _gelu, _gelu_tanh ---------------------------------------------------------------------------

_SQRT_2_PI = math.sqrt(2 / math.pi)
_GELU_A = 0.044715
_INV_SQRT2 = 1 / math.sqrt(2.0)
_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)


_GELU_CA = _SQRT_2_PI * _GELU_A
# -2u, u = sqrt(2/pi) (x + 0.044715 x^3), is clipped here before its exponential: exp stays
# finite (no overflow), and where it bites GELU is below 1e-34 |x| and its derivative smaller.
_GELU_CLIP = 80.0


def _gelu_tanh_f(bk: Any, x: Any, dst: Any = None) -> Any:
    # 0.5 x (1 + tanh(u)) = x sigmoid(2u) = x / (1 + exp(-2u)), -2u = x (-2c - 2ca x^2): an
    # exponential is cheaper than tanh (and the sigmoid exact where 1 + tanh cancels); on a
    # backend that writes in place, one temporary and six passes beside exp, the last one into
    # ``dst`` (by_pieces' block of the output) where the backend takes out=
    if not in_place(bk):
        return 0.5 * x * (1 + bk.tanh(_SQRT_2_PI * (x + _GELU_A * x * x * x)))
    u = x * x
    u *= -2 * _GELU_CA
    u += -2 * _SQRT_2_PI
    u *= x
    u = _into(bk, bk.minimum, u, _GELU_CLIP, u)
    e = _exp_in_place(bk, u)
    e += 1
    return _into(bk, bk.divide, x, e, dst)


def _d_gelu_tanh(ns: Any, x: Any) -> Any:
    # s (1 + x 2u' (1 - s)), s = sigmoid(2u) = 1 / (1 + exp(-2u)), x 2u' = x (2c + 6ca x^2): the
    # same operations in the same order whether in place (fresh temporaries, a backend that
    # writes in place) or not (ours, for a higher order: remat's recompute pulls back there,
    # and its gradients are the plain step's to the bit)
    x2 = x * x
    if not in_place(ns):
        e = ns.exp(ns.minimum((x2 * (-2 * _GELU_CA) + (-2 * _SQRT_2_PI)) * x, _GELU_CLIP)) + 1
        sg = 1.0 / e
        w = (x2 * (6 * _GELU_CA) + 2 * _SQRT_2_PI) * x
        w = w - w * sg
        return (w + 1) * sg
    u = x2 * (-2 * _GELU_CA)
    u += -2 * _SQRT_2_PI
    u *= x
    u = ns.minimum(u, _GELU_CLIP)  # (new arrays, each freeing the last: what a projection
    e = ns.exp(u)  # of this rule on abstract arrays counts, not out= it cannot see)
    del u
    e += 1
    sg = 1.0 / e
    del e
    x2 *= 6 * _GELU_CA
    x2 += 2 * _SQRT_2_PI
    x2 *= x  # x 2u'
    m = x2 * sg
    x2 -= m  # x 2u' (1 - s)
    del m
    x2 += 1
    x2 *= sg
    return x2


@primitive(FP, needs=())
def _gelu_tanh(bk: Any, x: Any, /) -> Any:
    """GELU's tanh approximation ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``, block by
    block, as ``x sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3))`` (the same function; one exp, no
    tanh) on a backend that writes in place; its VJP keeps only x."""
    own = _own(bk, "_gelu_tanh")
    if own is not None:
        return own(x)
    return by_pieces(bk, _gelu_tanh_f, x)


_gelu_tanh.defvjp(_activation_vjp(_d_gelu_tanh), saves=("x",), takes_owned=True)
_gelu_tanh.defjvp(_activation_jvp(_d_gelu_tanh))
_gelu_tanh.defbatch(_same_row(_gelu_tanh))
_gelu_tanh.defshape(_same_shape, memory=_pieces_memory(3))


def _gelu_f(bk: Any, x: Any, dst: Any = None) -> Any:
    # 0.5 x (1 + erf(x / sqrt 2)), erf the backend's (scipy.special's on NumPy)
    return 0.5 * x * (1 + call(bk, "_erf", x * _INV_SQRT2))


def _d_gelu(ns: Any, x: Any) -> Any:
    # Phi(x) + x phi(x)
    return 0.5 * (1 + call(ns, "_erf", x * _INV_SQRT2)) + x * (_INV_SQRT_2PI * ns.exp(-0.5 * x * x))


@primitive(FP, needs=())
def _gelu(bk: Any, x: Any, /) -> Any:
    """GELU ``x Phi(x) = 0.5 x (1 + erf(x / sqrt 2))`` with the backend's erf (scipy.special's
    on NumPy); a backend without erf raises NotImplementedError (``pycograd_xp.nn.gelu`` then
    composes its approximation). Its VJP keeps only x."""
    own = _own(bk, "_gelu")
    if own is not None:
        return own(x)
    return by_pieces(bk, _gelu_f, x)


_gelu.defvjp(_activation_vjp(_d_gelu), saves=("x",), takes_owned=True)
_gelu.defjvp(_activation_jvp(_d_gelu))
_gelu.defbatch(_same_row(_gelu))
_gelu.defshape(_same_shape, memory=_pieces_memory(3))


# -- _silu ---------------------------------------------------------------------------------------


def _silu_f(bk: Any, x: Any, dst: Any = None) -> Any:
    # x sigmoid(x), sigmoid(x) = (tanh(x / 2) + 1) / 2 (stable), as pycograd_xp.nn.sigmoid
    return x * (0.5 * (bk.tanh(0.5 * x) + 1))


def _d_silu(ns: Any, x: Any) -> Any:
    s = 0.5 * (ns.tanh(0.5 * x) + 1)  # s (1 + x (1 - s))
    return s * (1 + x * (1 - s))


@primitive(FP, needs=())
def _silu(bk: Any, x: Any, /) -> Any:
    """SiLU (swish) ``x sigmoid(x)``, block by block; its VJP keeps only x."""
    own = _own(bk, "_silu")
    if own is not None:
        return own(x)
    return by_pieces(bk, _silu_f, x)


_silu.defvjp(_activation_vjp(_d_silu), saves=("x",), takes_owned=True)
_silu.defjvp(_activation_jvp(_d_silu))
_silu.defbatch(_same_row(_silu))
_silu.defshape(_same_shape, memory=_pieces_memory(3))


# -- _softplus -----------------------------------------------------------------------------------


def _softplus_f(bk: Any, x: Any, dst: Any = None) -> Any:
    # log(1 + exp(x)) as logaddexp(0, x): stable at both ends
    return bk.logaddexp(bk.zeros_like(x), x)


def _d_softplus(ns: Any, x: Any) -> Any:
    return 0.5 * (ns.tanh(0.5 * x) + 1)  # sigmoid(x)


@primitive(FP, needs=())
def _softplus(bk: Any, x: Any, /) -> Any:
    """softplus ``log(1 + exp(x))`` (logaddexp), block by block; its VJP keeps only x."""
    own = _own(bk, "_softplus")
    if own is not None:
        return own(x)
    return by_pieces(bk, _softplus_f, x)


_softplus.defvjp(_activation_vjp(_d_softplus), saves=("x",), takes_owned=True)
_softplus.defjvp(_activation_jvp(_d_softplus))
_softplus.defbatch(_same_row(_softplus))
_softplus.defshape(_same_shape, memory=_pieces_memory(2))


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


def _lead_sum(ns: Any, a: Any, k: int) -> Any:
    """``a`` summed over every axis but its last ``k``."""
    return ns.sum(a, axis=tuple(range(a.ndim - k))) if a.ndim > k else a


def _blocks_beneath(ns: Any, shape: Any, item: int, k: int) -> list[Any]:
    """The blocks a VJP takes on ``ns``: :func:`pieces` on a raw backend that writes in place,
    and on ours over one (a higher order, or remat's recompute pulling back: their sums then
    go in the same order, so the gradients are the first-order ones to the bit); one block
    elsewhere."""
    b = getattr(ns, "_backend", None)
    if b is None:
        return pieces(shape, item, k) if in_place(ns) and k else [...]
    if k and b.mutable and not b.chunked and not b.abstract and not b.level:
        return pieces(shape, item, k)
    return [...]


def _block_param_grads(ns, gy, xhat, k, weight, bias, blocks):
    """:func:`_norm_param_grads` summed block by block, in the order of ``blocks``."""
    if len(blocks) == 1:
        return _norm_param_grads(ns, gy, xhat, k, weight, bias)
    gw = gb = None
    for idx in blocks:
        pw, pb = _norm_param_grads(ns, gy[idx], xhat[idx], k, weight, bias)
        gw = pw if gw is None else gw + pw
        gb = pb if gb is None else gb + pb
    return gw, gb


def _norm_param_grads(ns, gy, xhat, k, weight, bias):
    """The cotangents of a normalisation's weight and bias (None where absent), the leading
    axes summed first when the parameters span only the ``k`` trailing ones."""
    gw = gb = None
    if weight is not None:
        p = gy * xhat
        gw = _sum_to(ns, _lead_sum(ns, p, k) if k else p, tuple(weight.shape))
        del p
    if bias is not None:
        gb = _sum_to(ns, _lead_sum(ns, gy, k) if k else gy, tuple(bias.shape))
    return gw, gb


# -- _layer_norm ---------------------------------------------------------------------------------


def _sum_squares(bk: Any, y: Any, axes: tuple[int, ...]) -> Any:
    """``sum(y * y)`` over ``axes`` (kept dims): one ``vecdot`` (no squares array) over a single
    trailing axis."""
    if axes == (y.ndim - 1,):
        return bk.vecdot(y, y)[..., None]
    return bk.sum(y * y, axis=axes, keepdims=True)


def _layer_norm_f(
    bk: Any, x: Any, w: Any, b: Any, eps: float, axes: tuple[int, ...], dst: Any = None
) -> Any:
    # the centred input into ``dst`` (the output's block) where the backend takes out=; its
    # variance as numpy's, the mean of the squares
    mean = bk.mean(x, axis=axes, keepdims=True)
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
    x: Any,
    weight: Any = None,
    bias: Any = None,
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
    blocks = pieces(x.shape, itemsize(bk, dtype), k)
    if len(blocks) == 1:
        return _layer_norm_f(bk, x, weight, bias, eps, axes)
    stats = tuple(1 if i in axes else s for i, s in enumerate(x.shape))
    y = bk.empty(tuple(x.shape), dtype=dtype)
    mean, rstd = bk.empty(stats, dtype=x.dtype), bk.empty(stats, dtype=x.dtype)
    for idx in blocks:
        dst = y[idx]
        yb, mean[idx], rstd[idx] = _layer_norm_f(bk, x[idx], weight, bias, eps, axes, dst)
        if yb is not dst:
            y[idx] = yb
        del yb, dst
    return y, mean, rstd


def _layer_norm_grad(ns, g, x, mean, rstd, weight, axes, gm, gr, n):
    """The input's cotangent: ``rstd (gx - mean(gx)) - xhat rstd mean(gx xhat)`` with
    ``gx = g weight``, plus what the mean's and rstd's cotangents (``gm``, ``gr``) add; and
    ``xhat``."""
    xhat = (x - mean) * rstd
    gx = g * weight if weight is not None else g
    c1 = rstd * ns.mean(gx, axis=axes, keepdims=True) - gm / n
    c2 = rstd * (_dot(ns, gx, xhat, axes) / n) + gr * (rstd * rstd) / n
    if not in_place(ns):
        return rstd * gx - c1 - xhat * c2, xhat
    dx = rstd * gx  # in place on fresh temporaries
    dx -= c1
    t = xhat * c2
    dx -= t
    return dx, xhat


def _dot(ns: Any, a: Any, b: Any, axes: tuple[int, ...]) -> Any:
    """``sum(a * b)`` over ``axes`` (kept dims): one ``vecdot`` over a single trailing axis of
    arrays of one shape (no product array), the same call on ours as on a raw backend."""
    if axes == (a.ndim - 1,) and tuple(a.shape) == tuple(b.shape):
        return ns.vecdot(a, b)[..., None]
    return ns.sum(a * b, axis=axes, keepdims=True)


@_layer_norm.defvjp(saves=("x", "weight", "out"), takes_owned=True)
def _(ns, g, out, x, weight=None, bias=None, /, *, eps=1e-5, axis=-1, owned=False):
    gy, gm, gr = g
    _, mean, rstd = out
    axes = _norm_axes(axis, x.ndim)
    n = _count(x, axes)
    k = _trailing(x, axes, weight, bias)
    blocks = _blocks_beneath(ns, x.shape, itemsize(ns, gy.dtype), k)
    if len(blocks) == 1 or not in_place(ns):
        dx, xhat = _layer_norm_grad(ns, gy, x, mean, rstd, weight, axes, gm, gr, n)
        return (dx, *_block_param_grads(ns, gy, xhat, k, weight, bias, blocks))
    dx = gy if owned and gy.dtype == ns.result_type(x, gy) else None
    gw = gb = None
    for idx in blocks:
        gb_ = gy[idx]
        d, xhat = _layer_norm_grad(
            ns, gb_, x[idx], mean[idx], rstd[idx], weight, axes, gm[idx], gr[idx], n
        )
        pw, pb = _norm_param_grads(ns, gb_, xhat, k, weight, bias)
        gw = pw if gw is None else gw + pw
        gb = pb if gb is None else gb + pb
        del xhat, gb_
        if dx is None:
            dx = ns.empty(tuple(x.shape), dtype=d.dtype)
        dx[idx] = d
        del d
    return dx, gw, gb


@_layer_norm.defjvp
def _(ns, t, out, x, weight=None, bias=None, /, *, eps=1e-5, axis=-1):
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
def _(ns, dims, x, weight=None, bias=None, /, *, eps=1e-5, axis=-1):
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
    return new(x.shape, dtype), new(stats, x.dtype), new(stats, x.dtype)


def _norm_memory(out, x, axes, k, params, temps):
    """A normalisation's transients: ``temps`` arrays of a block (of the whole when it is one
    block, or not block by block), with the iterator's buffers, and a few of the statistics'
    size."""
    item = out.dtype.itemsize
    if k:
        n = piece_size(x.shape, item, k)
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
    array each where the dtype widens). By blocks: the same per block beside the outputs."""
    y = out[0]
    axes = _norm_axes(axis, x.ndim)
    params = [p for p in (weight, bias) if p is not None]
    k = _trailing(x, axes, weight, bias)
    return _norm_memory(y, x, axes, k, params, 3 if k else 2)


_layer_norm.defshape(_layer_norm_shape, memory=_layer_norm_memory)


# -- _rms_norm -----------------------------------------------------------------------------------


def _rms_norm_f(bk: Any, x: Any, w: Any, eps: float, axes: tuple[int, ...]) -> Any:
    s = bk.sqrt(_sum_squares(bk, x, axes) / _count(x, axes) + eps)
    y = x / s
    if w is not None:
        y = y * w if not in_place(bk) or y.dtype != bk.result_type(y, w) else _times(y, w)
    return y, 1 / s


@primitive(FP, needs=())
def _rms_norm(bk: Any, x: Any, weight: Any = None, /, *, eps: float = 1e-6, axis: Any = -1) -> Any:
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
    blocks = pieces(x.shape, itemsize(bk, dtype), k)
    if len(blocks) == 1:
        return _rms_norm_f(bk, x, weight, eps, axes)
    y = bk.empty(tuple(x.shape), dtype=dtype)
    rstd = bk.empty(_stats_shape(x, axis), dtype=x.dtype)
    for idx in blocks:
        y[idx], rstd[idx] = _rms_norm_f(bk, x[idx], weight, eps, axes)
    return y, rstd


def _rms_norm_grad(ns, g, x, rstd, weight, axes, gr, n):
    """``rstd gx - xhat (rstd mean(gx xhat) + gr rstd^2 / n)``, ``gx = g weight``."""
    xhat = x * rstd
    gx = g * weight if weight is not None else g
    c = rstd * (_dot(ns, gx, xhat, axes) / n) + gr * (rstd * rstd) / n
    return rstd * gx - xhat * c, xhat


@_rms_norm.defvjp(saves=("x", "weight", "out"), takes_owned=True)
def _(ns, g, out, x, weight=None, /, *, eps=1e-6, axis=-1, owned=False):
    gy, gr = g
    rstd = out[1]
    axes = _norm_axes(axis, x.ndim)
    n = _count(x, axes)
    k = _trailing(x, axes, weight)
    blocks = _blocks_beneath(ns, x.shape, itemsize(ns, gy.dtype), k)
    if len(blocks) == 1 or not in_place(ns):
        dx, xhat = _rms_norm_grad(ns, gy, x, rstd, weight, axes, gr, n)
        return (dx, _block_param_grads(ns, gy, xhat, k, weight, None, blocks)[0])
    dx = gy if owned and gy.dtype == ns.result_type(x, gy) else None
    gw = None
    for idx in blocks:
        gb_ = gy[idx]
        d, xhat = _rms_norm_grad(ns, gb_, x[idx], rstd[idx], weight, axes, gr[idx], n)
        pw = _norm_param_grads(ns, gb_, xhat, k, weight, None)[0]
        gw = pw if gw is None else gw + pw
        del xhat, gb_
        if dx is None:
            dx = ns.empty(tuple(x.shape), dtype=d.dtype)
        dx[idx] = d
        del d
    return dx, gw


@_rms_norm.defjvp
def _(ns, t, out, x, weight=None, /, *, eps=1e-6, axis=-1):
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
def _(ns, dims, x, weight=None, /, *, eps=1e-6, axis=-1):
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
    return new(x.shape, dtype), new(stats, x.dtype)


def _rms_norm_memory(out, x, weight=None, /, *, eps=1e-6, axis=-1):
    """The squares, then ``x / s`` (and ``* w`` in place, or new where it widens)."""
    axes = _norm_axes(axis, x.ndim)
    params = [] if weight is None else [weight]
    k = _trailing(x, axes, weight)
    return _norm_memory(out[0], x, axes, k, params, 3 if k else 2)


_rms_norm.defshape(_rms_norm_shape, memory=_rms_norm_memory)


# -- _cross_entropy ------------------------------------------------------------------------------


def _is_int(bk: Any, a: Any) -> bool:
    return bk.isdtype(a.dtype, "integral")


def _lse_f(bk: Any, z: Any) -> Any:
    """``logsumexp(z, axis=-1)`` (kept dims), the maximum shifted out (0 where not finite)."""
    m = bk.max(z, axis=-1, keepdims=True)
    m = bk.where(bk.isfinite(m), m, 0.0)
    e = bk.exp(z - m)
    s = bk.sum(e, axis=-1, keepdims=True)
    del e
    return bk.log(s) + m


def _picked(bk: Any, z: Any, labels: Any) -> Any:
    """``z[..., labels]`` (kept dims): a gather where the backend has one, else a masked sum."""
    if hasattr(bk, "take_along_axis") and not (_raw(bk) and caps(bk).chunked):
        return bk.take_along_axis(z, bk.expand_dims(labels, axis=-1), axis=-1)
    hit = bk.expand_dims(labels, axis=-1) == bk.arange(z.shape[-1], **_like(bk, labels))
    return bk.sum(bk.where(hit, z, 0.0), axis=-1, keepdims=True)


def _cross_entropy_f(bk: Any, z: Any, y: Any) -> Any:
    lse = _lse_f(bk, z)
    if _is_int(bk, y):
        loss = lse - _picked(bk, z, y)
    else:  # sum(y (lse - z)) = lse sum(y) - <y, z>
        loss = lse * bk.sum(y, axis=-1, keepdims=True) - bk.sum(y * z, axis=-1, keepdims=True)
    return loss[..., 0], lse[..., 0]


def _labels(bk: Any, logits: Any, labels: Any, check: bool = True) -> Any:
    """The labels broadcast to the logits' rows (indices) or to the logits (probabilities);
    negative class indices counted from the last class, as NumPy's and JAX's gathers count
    them. (The forward's gather took -1 as the last class while the VJP's mask matched no
    class: a gradient that was not the loss's; the masked sum of chunked backends matched
    none in the forward too.) ``check``: refuse indices out of range (:func:`_check_classes`);
    the VJP and JVP pass False, the forward having refused them."""
    integer = _is_int(bk, labels)
    shape = _check_labels(logits, labels, integer)
    if check and integer and logits.ndim >= 1:
        _check_classes(bk, labels, logits.shape[-1])
    if integer and bk.isdtype(labels.dtype, "signed integer") and logits.ndim >= 1:
        classes = logits.shape[-1]
        if bk.iinfo(labels.dtype).max < classes:  # int8 labels of 200 classes
            labels = bk.astype(labels, bk.int64)
        # only -C..-1 count from the end: an index below -C stays out of range, so that a
        # backend's gather refuses it (it wrapped to a class the VJP's mask never matched)
        labels = bk.where((labels < 0) & (labels >= -classes), labels + classes, labels)
    return labels if tuple(labels.shape) == shape else bk.broadcast_to(labels, shape)


def _check_classes(bk: Any, labels: Any, classes: int) -> None:
    """Refuse class indices outside ``-classes .. classes - 1``, naming the first one, where
    the values can be read as a whole (:func:`values_known`; elsewhere a gather refuses what
    NumPy's would, or the VJP's mask matches no class)."""
    if not values_known(bk) or math.prod(labels.shape) == 0:
        return
    low = -classes if bk.isdtype(labels.dtype, "signed integer") else 0
    bad = (labels < low) | (labels >= classes)
    if bool(bk.any(bad)):
        first = int(bk.reshape(labels, (-1,))[bk.reshape(bad, (-1,))][0])
        hint = (
            "; PyTorch's padding label -100 is ignored with cross_entropy(..., ignore_index=-100)"
            if first == -100
            else ""
        )
        raise IndexError(
            f"cross_entropy(): class index {first} is out of range for {classes} classes (valid: "
            f"0 to {classes - 1}, or {-classes} to -1 counting from the last){hint}"
        )


def _check_labels(logits: Any, labels: Any, integer: bool) -> tuple[int, ...]:
    """The shape the labels broadcast to: the logits' rows (indices) or the logits
    (probabilities); a clear error where they do not."""
    want = tuple(logits.shape[:-1]) if integer else tuple(logits.shape)
    if not integer and labels.ndim != logits.ndim:
        # probabilities of another rank: float class indices (n,) against logits (n, C) would
        # broadcast along the classes where n == C, a wrong loss without an error
        hint = (
            "; these look like class indices: give them as integers, xp.astype(labels, xp.int64)"
            if tuple(labels.shape) == tuple(logits.shape[:-1])
            else ""
        )
        raise ValueError(
            f"cross_entropy(): labels that are not integers are class probabilities: they "
            f"need the logits' axes, shape {tuple(logits.shape)} (or 1 along any of them); "
            f"got shape {tuple(labels.shape)}{hint}"
        )
    try:
        ok = logits.ndim >= 1 and tuple(broadcast(tuple(labels.shape), want)) == want
    except ValueError:
        ok = False
    if not ok:
        what = "class indices" if integer else "probabilities"
        shape = tuple(logits.shape)
        first = integer and len(shape) >= 3 and tuple(labels.shape) == shape[:1] + shape[2:]
        hint = (  # PyTorch's layout (N, C, *spatial)
            f"; the classes are the logits' last axis (PyTorch's are axis 1): "
            f"xp.moveaxis(logits, 1, -1) gives {shape[:1] + shape[2:] + shape[1:2]}"
            if first
            else ""
        )
        raise ValueError(
            f"cross_entropy(): {what} of shape {tuple(labels.shape)} do not broadcast to "
            f"{want} (logits {shape}){hint}"
        )
    return want


@primitive(FP, needs=())
def _cross_entropy(bk: Any, logits: Any, /, labels: Any) -> Any:
    """Softmax cross-entropy over the last axis, one value per row: ``logsumexp(z) - z[label]``
    for integer ``labels`` (broadcast to ``logits.shape[:-1]``), ``sum(p (logsumexp(z) - z))``
    for probabilities ``p`` (broadcast to ``logits.shape``; differentiable too). Returns the
    losses and the normaliser ``logsumexp(z)`` (``pycograd_xp.nn.cross_entropy`` reduces the
    first). Block by block over the rows; the VJP keeps the logits, the labels and the
    normaliser, never the log-probabilities or a one-hot."""
    own = _own(bk, "_cross_entropy")
    if own is not None:
        return own(logits, labels)
    labels = _labels(bk, logits, labels)
    if not in_place(bk) or logits.ndim < 2:
        return _cross_entropy_f(bk, logits, labels)
    dtype = bk.result_type(logits, *(() if _is_int(bk, labels) else (labels,)))
    blocks = pieces(logits.shape, itemsize(bk, dtype), 1)
    if len(blocks) == 1:
        return _cross_entropy_f(bk, logits, labels)
    loss = bk.empty(tuple(logits.shape[:-1]), dtype=dtype)
    lse = bk.empty(tuple(logits.shape[:-1]), dtype=logits.dtype)
    for idx in blocks:  # idx ends in ...: it indexes the rows' arrays too
        loss[idx], lse[idx] = _cross_entropy_f(bk, logits[idx], labels[idx])
    return loss, lse


def _cross_entropy_grad(ns, g, z, y, lse, glse):
    """The logits' and the probabilities' cotangents of one block: ``softmax(z) (g sum(y) +
    glse) - g y``, ``g (lse - z)`` (None for integer labels)."""
    p = ns.exp(z - lse[..., None])
    g1 = g[..., None]
    if _is_int(ns, y):
        coef = g1 + glse[..., None]
        dz = p * coef if not in_place(ns) else _times(p, coef)
        hit = ns.expand_dims(y, axis=-1) == ns.arange(z.shape[-1], **_like(ns, y))
        if in_place(ns):
            dz -= ns.where(hit, g1, 0.0)
        else:
            dz = dz - ns.where(hit, g1, 0.0)
        return dz, None
    coef = g1 * ns.sum(y, axis=-1, keepdims=True) + glse[..., None]
    dz = p * coef if not in_place(ns) else _times(p, coef)
    gy = g1 * y
    if in_place(ns) and dz.dtype == gy.dtype:
        dz -= gy
    else:
        dz = dz - gy
    del gy
    return dz, g1 * (lse[..., None] - z)


@_cross_entropy.defvjp(saves=("logits", "labels", "out"))
def _(ns, g, out, logits, /, labels):
    gl, glse = g
    lse = out[1]
    labels = _labels(ns, logits, labels, check=False)
    item = itemsize(ns, ns.result_type(gl, logits))
    blocks = pieces(logits.shape, item, 1) if in_place(ns) and logits.ndim >= 2 else [...]
    if len(blocks) == 1:
        return _cross_entropy_grad(ns, gl, logits, labels, lse, glse)
    probs = not _is_int(ns, labels)
    dz = dy = None
    for idx in blocks:  # idx ends in ...: it indexes the rows' arrays too
        a, b = _cross_entropy_grad(ns, gl[idx], logits[idx], labels[idx], lse[idx], glse[idx])
        if dz is None:
            dz = ns.empty(tuple(logits.shape), dtype=a.dtype)
            dy = ns.empty(tuple(logits.shape), dtype=b.dtype) if probs else None
        dz[idx] = a
        if probs:
            dy[idx] = b
        del a, b
    return dz, dy


@_cross_entropy.defjvp
def _(ns, t, out, logits, /, labels):
    loss, lse = out
    labels = _labels(ns, logits, labels, check=False)
    tz, ty = (tuple(t) + (None,))[:2]
    tl = tlse = None
    p = ns.exp(logits - lse[..., None])
    if tz is not None:
        tlse = ns.sum(p * tz, axis=-1)
        if _is_int(ns, labels):
            tl = tlse - _picked(ns, tz, labels)[..., 0]
        else:
            tl = tlse * ns.sum(labels, axis=-1) - ns.sum(labels * tz, axis=-1)
    if ty is not None:
        tl = plus(tl, ns.sum(ty * (lse[..., None] - logits), axis=-1))
    return tl, tlse


@_cross_entropy.defbatch
def _(ns, dims, logits, /, labels):
    n = batch_size(dims, (logits, labels))
    r = logits.ndim - (1 if dims[0] else 0)  # an example's rank
    if ns.isdtype(labels.dtype, "integral"):
        r -= 1  # the labels of an example's rows
    logits = batched(ns, logits, dims[0], n)
    labels = to_rank(ns, batched(ns, labels, dims[1], n), r)
    return ns._cross_entropy(logits, labels)


def _cross_entropy_shape(a, logits, /, labels):
    integer = labels.dtype.kind in "iu"
    _check_labels(logits, labels, integer)
    dtype = logits.dtype if integer else np.result_type(logits.dtype, labels.dtype)
    rows = tuple(logits.shape[:-1])
    return new(rows, dtype), new(rows, logits.dtype)


def _cross_entropy_memory(out, logits, /, labels):
    """Per block of rows (the whole where one): ``z - max`` and its exponentials, then the
    picked logits (a gather) or the product with the probabilities; a few arrays of a row's
    statistics."""
    loss = out[0]
    item = max(loss.dtype.itemsize, logits.dtype.itemsize)
    n = piece_size(logits.shape, item, 1) if logits.ndim >= 2 else math.prod(logits.shape)
    rows = max(1, n // max(logits.shape[-1], 1)) if logits.ndim else 1
    cast = n * item if labels.dtype.kind == "f" and labels.dtype != logits.dtype else 0
    return 2 * n * item + cast + 8 * rows * item + 2 * min(n, BUFFER_ELEMENTS) * item


_cross_entropy.defshape(_cross_entropy_shape, memory=_cross_entropy_memory)


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


def attention_plan(
    batch: tuple[int, ...], lq: int, lk: int, h: int, item: int, causal_only: bool
) -> tuple[list[tuple[Any, ...]], int, int]:
    """How the blockwise attention goes, from ATTENTION_BLOCK_BYTES: (blocks of the batch, as
    index tuples over its axes; query rows a block; keys a block). A function of shapes only,
    so a projection and a compiled replay loop as the call does."""
    row = h * lk * item  # one query row of one batch item against every key
    if row <= ATTENTION_BLOCK_BYTES:
        rows, keys = min(lq, ATTENTION_BLOCK_BYTES // row), lk
        if causal_only:
            rows = min(rows, CAUSAL_ROWS)
    else:  # keys in blocks too, with an online softmax
        rows = min(lq, 16)
        keys = max(1, ATTENTION_BLOCK_BYTES // (h * rows * item))
    rows, per = max(rows, 1), h * max(rows, 1) * keys * item
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
            s[..., c0:] = ns.where(tri, s[..., c0:], low)
        return s, None
    allowed = maskf[(..., slice(i0, i1), slice(j0, j1))]
    if tri is not None:
        full = ns.ones((i1 - i0, c0), dtype=ns.bool, **_like(ns, s))
        allowed = ns.logical_and(allowed, ns.concat([full, tri], axis=-1) if c0 else tri)
    return ns.where(allowed, s, low), allowed


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


def _exp_in_place(bk: Any, s: Any, f: Any = None) -> Any:
    """``f(s)`` (``exp``, or another unary function of ``bk``) into ``s`` where it takes
    ``out=`` (NumPy's, CuPy's ufuncs); a new
    array elsewhere, as on the abstract backend: a projection and a compiled replay of a VJP
    that calls it count and make the new array (an upper bound of the in-place run)."""
    f = bk.exp if f is None else f
    c = caps(bk)
    if c.takes_out is not None and c.takes_out(f) and isinstance(s, c.array_type):
        return f(s, out=s)  # (not a 0-d array's product: NumPy makes that a scalar)
    return f(s)


# -- _attention ----------------------------------------------------------------------------------


@primitive(FP, needs=())
def _attention(
    bk: Any,
    query: Any,
    key: Any,
    value: Any,
    /,
    mask: Any = None,
    *,
    is_causal: bool = False,
    scale: Any = None,
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
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
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
                ps = bk.sum(p, axis=-1, keepdims=True)
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
    dv = ns.matmul(ns.matrix_transpose(p), gh)
    d = ns.sum(gh * oh, axis=-1, keepdims=True) - glse[..., None]
    ds = p * (ns.matmul(gh, ns.matrix_transpose(vh)) - d)
    if allowed is not None:
        ds = ns.where(allowed, ds, 0.0)
    dq = ns.matmul(ds, kh) * scale
    dk = ns.matmul(ns.matrix_transpose(ds), qs)
    dm = _sum_to(ns, ds, tuple(mask.shape)) if additive else None
    return (*(heads(ns, a) for a in (dq, dk, dv)), dm)  # (..., H, L, d) back to (..., L, H, d)


@_attention.defvjp(saves=("query", "key", "value", "mask", "out"), takes_needs=True)
def _(ns, g, out, q, k, v, /, mask=None, *, is_causal=False, scale=None, needs=(0, 1, 2, 3)):
    go, glse = g
    o, lse = out
    batch, lq, lk, h = _attention_shapes(q, k, v)
    additive = _additive(ns, mask)
    dtype = ns.result_type(q, k, v, *((mask,) if additive else ()))
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
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
            d = ns.sum(gb * heads(ns, o[qidx]), axis=-1, keepdims=True)
            d -= glse[(*bi, slice(None), slice(i0, i1))][..., None]
            lse1 = lse[(*bi, slice(None), slice(i0, i1))][..., None]
            if additive:
                lse1 = _finite_lse(ns, lse1)
            mb = None if maskf is None else maskf[(*bi, ...)]
            dqb = None
            kend = _key_end(i1, lk, causal_only)
            for j0 in range(0, kend, keys):
                j1 = min(j0 + keys, kend)
                kidx = (*bi, slice(j0, j1), ...)
                s, allowed = _scores(ns, qs, k, kidx, i0, i1, j0, j1, is_causal, mb, low, additive)
                s -= lse1
                p = _exp_in_place(ns, s)
                del s
                if allowed is not None:  # a row masked whole averages every value
                    p = ns.where(lse1 == low, 1.0 / lk, p)
                dv[kidx] += heads(ns, ns.matmul(ns.matrix_transpose(p), gb))
                ds = ns.matmul(gb, ns.matrix_transpose(heads(ns, v[kidx])))
                ds -= d
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
            del dqb, qs, gb, d
    return dq, dk, dv, dm


_attention.defjvp(TRANSPOSED)


@_attention.defbatch
def _(ns, dims, q, k, v, /, mask=None, *, is_causal=False, scale=None):
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
