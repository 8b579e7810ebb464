"""What the rows of :mod:`pycograd_xp.ops.nn` share: the backend's capabilities (:func:`caps`,
:func:`_raw`, :func:`_own`), blocks of the batch (``BLOCK_BYTES``, :func:`batch_blocks`), and
the windows of convolution and pooling (im2col).

Layout is PyTorch's: ``x`` (N, C, *S), ``w`` (O, C / groups, *K), output (N, O, *S'). The
rows take normalized keyword arguments, one entry per spatial axis: ``stride`` and
``dilation`` ints, ``padding`` (before, after) pairs (a negative entry crops).

The columns of an im2col: on a backend with the ``windows`` capability (NumPy, CuPy: a strided
sliding-window view) one copy out of a view; elsewhere (array-api-strict) a stack of
``prod(K)`` strided slices. On a backend that writes in place, output rows shorter than
``FLAT_BELOW`` take the columns over the flat padded image instead (one contiguous slice per
offset, :func:`flat_columns`), and inputs of fewer than ``BIAS_ROW_BELOW`` channels take the
bias into the product (:func:`bias_row`).

The helpers are Array-API code on a namespace ``bk`` (raw or ours); the VJP, JVP and batching
rules use them too.
"""

from __future__ import annotations

import functools
import math
from types import ModuleType
from typing import Any

from ...namespace._backend import Backend, capabilities, resolve
from ...namespace._capabilities import _BY_XP


def attribute(ns: Any, name: str) -> Any:
    """``getattr(ns, name, None)``, reading a module's dict first: a failed attribute lookup on
    a module builds an AttributeError (0.6 us; the nn rows ask whether a namespace is ours, and
    for a backend's own rows, tens of times a step)."""
    if type(ns) is ModuleType:
        d = ns.__dict__
        if "__getattr__" not in d:  # (a module's own __getattr__ may answer: ask it)
            return d.get(name)
    return getattr(ns, name, None)


def backend_of(ns: Any) -> Backend | None:
    """The :class:`Backend` of one of our namespaces (or of a level built over one: vmap's,
    the abstract one); None for a backend's own namespace (what a first-order rule gets)."""
    return attribute(ns, "_backend")


def caps(bk: Any) -> Backend:
    """The capabilities of a namespace: ours carry them; a raw one is looked up or resolved."""
    b = _BY_XP.get(id(bk))  # (a rule's backend namespace: most calls)
    if b is not None:
        return b
    try:
        return capabilities(bk)
    except TypeError:  # a conforming namespace no namespace() call has met yet
        return resolve(bk)


def _raw(bk: Any) -> bool:
    return backend_of(bk) is None


def _like(bk: Any, x: Any) -> dict[str, Any]:
    like = caps(bk).like_kwargs if _raw(bk) else None
    return like(x) if like is not None else {}


def grid(kernel: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """Every offset of a window, in row-major order (the order that breaks max-pool ties)."""
    return _grid(tuple(kernel))


@functools.lru_cache(maxsize=64)
def _grid(kernel: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    out: list[tuple[int, ...]] = [()]
    for k in kernel:
        out = [g + (i,) for g in out for i in range(k)]
    return tuple(out)


def out_sizes(
    fname: str,
    spatial: tuple[int, ...],
    kernel: tuple[int, ...],
    stride: Any,
    padding: Any,
    dilation: Any,
) -> tuple[int, ...]:
    """Output sizes of a window op; a clear error when a window does not fit or is empty."""
    if min(kernel, default=1) < 1:
        raise ValueError(
            f"{fname}(): the window {tuple(kernel)} has an axis of size 0; a window needs at "
            "least one element along each axis"
        )
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
    crop = grow = False
    for b, a in padding:  # (one pass: most calls add or crop nothing)
        crop = crop or b < 0 or a < 0
        grow = grow or b > 0 or a > 0
    if not grow and not crop:
        return x
    n = len(padding)
    if crop:
        idx = (slice(None),) * (x.ndim - n) + tuple(
            slice(max(-b, 0), s - max(-a, 0))
            for (b, a), s in zip(padding, x.shape[-n:], strict=True)
        )
        x = x[idx]
        if not grow:
            return x
        padding = tuple((max(b, 0), max(a, 0)) for b, a in padding)
    lead = tuple(x.shape[: x.ndim - n])
    if _raw(bk) and caps(bk).views_alias:  # one fill and one write
        shape, idx = list(lead), [slice(None)] * len(lead)
        for s, (b, a) in zip(x.shape[-n:], padding, strict=True):
            shape.append(s + b + a)
            idx.append(slice(b, b + s))
        out = bk.full(tuple(shape), value, dtype=x.dtype)
        out[tuple(idx)] = x
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
    holds that element of every window: shape ``x.shape[:-n] + out``. On a chunked array
    (Cubed's) a strided slice goes in two: its span, then the step (Cubed 0.27 refuses a
    strided slice that also shortens an axis longer than one chunk of the result)."""
    keys = _window_keys(x.ndim, tuple(kernel), tuple(stride), tuple(dilation), tuple(out))
    return [strided(x, key) for key in keys]


def strided(x: Any, key: tuple[slice, ...]) -> Any:
    """``x[key]`` for a key of slices. On a chunked array (Cubed's) a strided slice goes in two:
    its span, then the step (Cubed 0.27 refuses a strided slice that also shortens an axis longer
    than one chunk of the result)."""
    if getattr(x, "chunks", None) is not None and any(k.step not in (None, 1) for k in key):
        span = x[tuple(slice(k.start, k.stop) for k in key)]
        return span[tuple(slice(None, None, k.step) for k in key)]
    return x[key]


@functools.lru_cache(maxsize=256)
def _window_keys(
    ndim: int, kernel: tuple[int, ...], stride: tuple, dilation: tuple, out: tuple[int, ...]
) -> tuple[tuple[slice, ...], ...]:
    """The index of each offset's slice (:func:`window_slices`), worked out once per layout:
    a small CNN's step asks for the same ones on every call."""
    lead = (slice(None),) * (ndim - len(kernel))
    return tuple(
        lead
        + tuple(
            slice(o * d, o * d + s * (m - 1) + 1, s)
            for o, d, s, m in zip(offs, dilation, stride, out, strict=True)
        )
        for offs in grid(kernel)
    )


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
# into its product (``conv.py``'s ``_conv_bias_row``): a product column per channel costs less
# than a pass over the output (measured: docs/calibration.md#bias-row-below).
BIAS_ROW_BELOW = 8


def bias_row(channels: int, groups: int, b: Any) -> bool:
    """Whether a convolution takes its bias into the product (``conv.py``'s ``_conv_bias_row``)."""
    return b is not None and groups == 1 and channels < BIAS_ROW_BELOW


# Loops over the batch keep each step's columns within this many bytes on a backend that
# writes in place: the peak stays a fraction of one layer's activations (PyTorch's level), at
# a few Python calls per block (measured: docs/calibration.md#block-bytes).
BLOCK_BYTES = 2**20


def batch_blocks(bk: Any, n: int, bytes_per_example: int) -> list[tuple[int, int]]:
    """``[(start, stop), ...]`` covering ``range(n)`` in near-equal blocks of at most
    ``BLOCK_BYTES`` of columns each (one block on an immutable or chunked backend, or on ours):
    a function of shapes only, so a projection and a compiled replay loop as the call does."""
    if not (_raw(bk) and caps(bk).views_alias and not caps(bk).chunked):
        return [(0, n)]
    return blocks_of(n, bytes_per_example)


# An elementwise rule that writes its result block by block (relu's and max-pool's VJPs) keeps
# each block's cotangent-sized work within this many bytes: its masks then stay a fraction of a
# layer (docs/calibration.md#block-bytes).
MASK_BLOCK_BYTES = 2**20


def blocks_of(
    n: int, bytes_per_example: int, block_bytes: int | None = None
) -> list[tuple[int, int]]:
    """The blocks of :func:`batch_blocks` on a backend that writes in place (of at most
    ``block_bytes`` each, BLOCK_BYTES when None)."""
    limit = BLOCK_BYTES if block_bytes is None else block_bytes
    k = min(n, max(1, -(-n * bytes_per_example // limit)))
    return [(i * n // k, (i + 1) * n // k) for i in range(k)]


def itemsize(bk: Any, dtype: Any) -> int:
    """Bytes of an element of the floating ``dtype`` (NumPy's dtypes say so themselves)."""
    size = getattr(dtype, "itemsize", None)
    return size if type(size) is int else bk.finfo(dtype).bits // 8


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
    bb = bk.reshape(b, (1, b.shape[-1]) + (1,) * (y.ndim - 2))  # (no -1: 0 channels)
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


def _own(bk: Any, name: str) -> Any:
    """The backend's own function for this row (abstract and batched backends are built from
    the table), or None."""
    return attribute(bk, name)


def _mask_blocks(ns, a):
    """Blocks of ``a``'s first axis of at most MASK_BLOCK_BYTES each: an elementwise rule's
    masks and temporaries a block's, never the whole array's."""
    per = math.prod(a.shape[1:]) * itemsize(ns, a.dtype)
    return blocks_of(a.shape[0], per, MASK_BLOCK_BYTES)


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


# Python objects of one strided view a row makes inside (a pool's window slices): as
# manipulation.VIEW_HEADER_BYTES (docs/calibration.md#view-header-bytes)
VIEW_BYTES = 256
