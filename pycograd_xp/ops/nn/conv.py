"""The convolution rows ``_conv1d`` and ``_conv2d`` (:func:`pycograd_xp.nn.conv1d`,
:func:`~pycograd_xp.nn.conv2d`): one im2col and one matrix product (:mod:`.windows`); a
chunked backend (Cubed) contracts the channels once per window offset instead (no reshapes).

VJPs save only the inputs, never the columns: the backward rebuilds what it needs.

* input: on a raw mutable backend (NumPy, CuPy, array-api-strict; also the abstract backend, so
  projections and ``compile`` see it) col2im (:func:`col2im`): one product ``w^T g`` and
  ``prod(K)`` strided adds back into place, columns of the input's size; elsewhere (ours, so it
  is differentiable again; immutable or chunked arrays) the transposed convolution, itself a
  convolution row (the cotangent dilated by the stride, the kernel flipped with its channel
  axes swapped per group);
* weight: the correlation of the input with the cotangent, one im2col and one product;
* bias: the cotangent summed over the batch and spatial axes.

JVP: a convolution is bilinear in input and weight, plus its bias (the tangent is the
convolution with one factor replaced by its tangent, summed, the bias's tangent added inside
one of them).

Batching: one call, never one per example: a batched input folds its batch axis into N; a
batched weight folds it into the groups (each example's kernels see only its own channels), so
per-example weights cost one grouped convolution. A shared bias goes into the call; a
per-example one (or one beside per-example weights) is added after it.

Memory: the transients are the impl's, a padded copy of the input where there is padding, the
columns (N, C * prod(K), prod(out)) copied out of the window view for the product (of one block
of the batch at a time, see :func:`~.windows.batch_blocks`: each block's product is a temporary
too), and a copy of the weight when it is not contiguous (a flipped kernel in a transposed
convolution). The flat-grid and bias-in-the-product paths have their own rules
(:func:`_flat_memory`, :func:`_bias_row_memory`). The input gradient on a mutable backend is
no row call but col2im: a product, a zero fill and strided adds, each projected by its own rule.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from ..._primitive import REGISTRY, Array, primitive
from .._rules.batching import batch_size
from .._rules.jvp import call, plus
from .._rules.shapes import BUFFER_ELEMENTS, new, ufunc_buffers
from .pieces import FP, on_device
from .windows import (
    VIEW_BYTES,
    _own,
    _padded_bytes,
    _raw,
    add_bias,
    backend_of,
    batch_blocks,
    bias_row,
    blocks_of,
    caps,
    check_bias,
    columns,
    flat_columns,
    flat_padding,
    flat_rows,
    grid,
    itemsize,
    out_sizes,
    pad,
    unwindow,
    window_slices,
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
    into = caps(bk).matmul_into  # each block's product straight into its rows of y
    for start, stop in blocks:
        xb = xp_[start:stop, ...]
        ones = bk.ones((stop - start, C, *out), dtype=x.dtype)
        cols = bk.stack(
            window_slices(xb, tuple(w.shape[2:]), stride, dilation, out) + [ones], axis=2
        )  # (n, C, prod(K) + 1, *out)
        del ones
        cols = bk.reshape(cols, (stop - start, C * (kk + 1), p))
        if y is None:
            y = bk.matmul(wa, cols)
        elif into is not None:
            into(wa, cols, y[start:stop, ...])
        else:
            y[start:stop, ...] = bk.matmul(wa, cols)  # the block's product, then its copy
        del cols  # before the next block's
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
    columns = math.prod(w.shape[1:])  # (no -1: out_c may be 0)
    wm = bk.reshape(bk.permute_dims(w, (0, 2, 3, 1)), (out_c, columns))  # rows (o), cols (k, c)
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


# -- kits: the VJPs (col2im, the weight's correlation, unpooling) --------------------------------


def _call(ns, name, *args, **kwargs):
    """Row ``name`` on ``ns``: the row's impl on a raw namespace, our recorded function on
    ours (higher order, vmap of a pullback)."""
    impl = REGISTRY[name].impl
    if backend_of(ns) is None and impl is not None:
        return impl(ns, *args, **kwargs)
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
    steps, starts = _flat_starts(tuple(sizes), kernel, tuple(dilation))
    into = caps(ns).matmul_into
    # g's positions on the flat padded grid: the first out[0] rows (all of it without into)
    length = out[0] * steps[0] if into is not None else size
    grid_pad = tuple((0, s - m) for s, m in zip(sizes, out, strict=True))
    if into is not None:
        grid_pad = ((0, 0),) + grid_pad[1:]
    dtype = ns.result_type(w.dtype, g.dtype)
    dxf = ns.reshape(dx, (N, groups, c * size))
    rows = kk // kernel[0] if n > 1 else kk  # offsets per product: a kernel row's
    # a block's working set, an example's share: the columns of one kernel row, the cotangent
    # read and laid on the grid, the input gradient written
    per = groups * (rows * c * size + og * (length + math.prod(out)) + c * size)
    per *= itemsize(ns, g.dtype)
    for a, b in batch_blocks(ns, N, per):
        gb = ns.reshape(pad(ns, g[a:b, ...], grid_pad), (b - a, groups, og, length))
        cols = None
        for r0 in range(0, kk, rows):
            wr = wk[:, r0 * c : (r0 + rows) * c, :]
            if into is None:
                cols = ns.matmul(wr, gb)
            else:  # one buffer for every row's product, its zero tail filled once
                if cols is None:
                    cols = ns.empty((b - a, groups, rows * c, size), dtype=dtype)
                    cols[..., length:] = 0
                into(wr, gb, cols[..., :length])
            part = ns.reshape(cols, (b - a, groups, rows, c * size))
            for k, start in enumerate(starts[r0 : r0 + rows]):
                dxf[a:b, :, start:] += part[:, :, k, : c * size - start]
            del part
        del cols, gb  # before the next block's: one block's columns alive at a time
    return pad(ns, dx, tuple((-pb, -pa) for pb, pa in padding))


@functools.lru_cache(maxsize=256)
def _flat_starts(sizes: tuple, kernel: tuple, dilation: tuple) -> tuple[tuple, tuple]:
    """The flat padded grid's step per axis, and each kernel offset's start on it
    (:func:`_col2im_runs`), once per layout."""
    steps = tuple(math.prod(sizes[i + 1 :]) for i in range(len(sizes)))
    starts = tuple(
        sum(i * d * st for i, d, st in zip(offs, dilation, steps, strict=True))
        for offs in grid(kernel)
    )
    return steps, starts


def weight_grad(ns, g, x, w, *, stride, padding, dilation, groups):
    """The correlation of ``x`` with ``g``: the cotangent of ``w``. Where one example's
    product is large against its positions (``O * Q > P``) on a raw backend that writes in
    place, one product per example with the cotangent channels-last, block by block of the
    batch (:func:`_weight_grad_per_example`), or where the products would outgrow the columns
    (``O > P``) one 2-D product per block, columns (Q, n * P) against the cotangent
    (O, n * P), summed over the blocks; else (and on ours, and on a GPU) a batched product per
    example over the whole batch and a sum (a long, thin 2-D product is the slower one there)."""
    if not x.shape[0]:  # an empty batch: no example, no term
        return ns.zeros(tuple(w.shape), dtype=ns.result_type(g, x))
    if backend_of(ns) is None and caps(ns).chunked:
        return weight_grad_by_offsets(
            ns, g, pad(ns, x, padding), tuple(w.shape), stride, dilation, groups
        )
    kernel, out = tuple(w.shape[2:]), tuple(g.shape[2:])
    n_, o, p = x.shape[0], w.shape[0], math.prod(out)
    q = x.shape[1] * math.prod(kernel)
    xpad = pad(ns, x, padding)
    device = on_device(ns)  # a GPU: one batched product, never a loop of launches
    if _raw(ns) and caps(ns).views_alias and p < o * q and o <= p and not device:
        return _weight_grad_per_example(ns, g, xpad, w, stride, dilation, groups)
    if o * q <= p or not _raw(ns) or device:
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
        if 0 in (math.prod(g.shape), math.prod(x.shape), math.prod(w.shape)):
            # a sum of no products (an empty batch, no channels): zeros, no window walked
            gx = ns.zeros_like(x) if 0 in needs else None
            gw = ns.zeros_like(w) if 1 in needs else None
        else:
            gx = input_grad(ns, name, g, x, w, **kw) if 0 in needs else None
            gw = weight_grad(ns, g, x, w, **kw) if 1 in needs else None
        if b is None:
            return gx, gw
        # the batch first (a contiguous reduction), then the positions: faster than one
        # reduction over axes (0, 2, 3) (measured: docs/calibration.md#bias-row-below)
        gb = ns.sum(ns.sum(g, axis=0), axis=tuple(range(1, g.ndim - 1))) if 2 in needs else None
        return gx, gw, gb

    return rule


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
            assert tb is not None  # (a tangent of none of them: no JVP is asked)
            return ns.reshape(tb, (1, tb.shape[-1]) + (1,) * (out.ndim - 2))
        return plus(tx, tw)

    return rule


# -- kits: batching ------------------------------------------------------------------------------


def _conv_batch(name):
    def rule(ns, dims, x, w, bias=None, /, *, stride, padding, dilation, groups):
        f = getattr(ns, name)
        kw = dict(stride=stride, padding=padding, dilation=dilation)
        bx, bw = dims[0], dims[1]
        bb = len(dims) > 2 and bool(dims[2])
        if not batch_size(dims, (x, w, bias)):  # no example: its shape (0 groups is none)
            xe, we = (a.shape[1:] if d else a.shape for a, d in ((x, bx), (w, bw)))
            out = out_sizes(name, tuple(xe[2:]), tuple(we[2:]), stride, padding, dilation)
            dtype = ns.result_type(*(a for a in (x, w, bias) if a is not None))
            return ns.zeros((0, xe[0], we[0], *out), dtype=dtype)
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
            per = (bias.shape[0] if bb else 1, 1, bias.shape[-1])  # (no -1: 0 channels)
            return y + ns.reshape(bias, per + (1,) * k)
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


# -- _conv1d, _conv2d ----------------------------------------------------------------------------


@primitive(FP, needs=())
def _conv1d(
    bk: Any,
    x: Array,
    w: Array,
    b: Array = None,
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
    x: Array,
    w: Array,
    b: Array = None,
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
