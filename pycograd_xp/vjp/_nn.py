"""VJP rules of convolution and pooling. Each saves only its inputs (max-pool also its small
output), never the columns: the backward rebuilds what it needs.

* conv, input: on a raw mutable backend (NumPy, CuPy, array-api-strict; also the abstract
  backend, so projections and ``compile`` see it) col2im: one product ``w^T g`` and ``prod(K)``
  strided adds back into place, columns of the input's size; elsewhere (ours, so it is
  differentiable again; immutable or chunked arrays) the transposed convolution, itself a
  convolution row (the cotangent dilated by the stride, the kernel flipped with its channel axes
  swapped per group);
* conv, weight: the correlation of the input with the cotangent, one im2col and one product;
* max-pool: the whole cotangent of a window goes to its first maximum in row-major window
  order (PyTorch's choice for ties; the composed ``max`` shared it among tied elements): one
  boolean mask per window offset and one ``where(mask, g, 0)`` (NumPy: a bitwise pass);
* avg-pool: the cotangent spread evenly over each window (padding included, as the forward).
"""

from __future__ import annotations

import math

from ..namespace._nn import (
    _raw,
    caps,
    columns,
    grid,
    pad,
    unwindow,
    weight_grad_by_offsets,
    window_slices,
)
from ..namespace._ops import REGISTRY, defvjp
from ..namespace._searching import select


def call(ns, name, *args, **kwargs):
    """Row ``name`` on ``ns``: the row's impl on a raw namespace, our recorded function on
    ours (higher order, vmap of a pullback)."""
    if getattr(ns, "_backend", None) is None:
        return REGISTRY[name].impl(ns, *args, **kwargs)
    return getattr(ns, name)(*args, **kwargs)


def dilate(ns, g, stride):
    """``g`` with ``stride - 1`` zeros between neighbours along its trailing axes."""
    if all(s == 1 for s in stride):
        return g
    return unwindow(ns, [g], tuple(g.shape[: g.ndim - len(stride)]) + tuple(
        (m - 1) * s + 1 for m, s in zip(g.shape[g.ndim - len(stride):], stride, strict=True)),
        (1,) * len(stride), stride, (1,) * len(stride))  # fmt: skip


def input_grad(ns, name, g, x, w, *, stride, padding, dilation, groups):
    """The transposed convolution of ``g`` with ``w``: the cotangent of ``x``. On a raw
    mutable backend one product and ``prod(K)`` strided adds back into place (col2im: columns
    of the input's size, not of the padded cotangent's); elsewhere (immutable or chunked arrays,
    and ours, so that it is differentiable again) the convolution of the dilated, padded
    cotangent with the flipped kernel, itself a convolution row."""
    if _raw(ns) and caps(ns).mutable and not caps(ns).chunked:
        return col2im(ns, g, x, w, stride=stride, padding=padding, dilation=dilation,
                      groups=groups)  # fmt: skip
    n = w.ndim - 2
    o, cg, kernel = w.shape[0], w.shape[1], tuple(w.shape[2:])
    wt = ns.reshape(w, (groups, o // groups, cg, *kernel))
    wt = ns.reshape(ns.permute_dims(wt, (0, 2, 1, *range(3, 3 + n))),
                    (groups * cg, o // groups, *kernel))  # fmt: skip
    wt = ns.flip(wt, axis=tuple(range(2, 2 + n)))
    pads = []
    for s, k, st, (pb, pa), d, m in zip(x.shape[2:], kernel, stride, padding, dilation,
                                        g.shape[2:], strict=True):  # fmt: skip
        rest = s + pb + pa - d * (k - 1) - 1 - st * (m - 1)  # input never reached by a window
        pads.append((d * (k - 1) - pb, d * (k - 1) - pa + rest))
    return call(ns, name, dilate(ns, g, stride), wt, stride=(1,) * n, padding=tuple(pads),
                dilation=dilation, groups=groups)  # fmt: skip


def col2im(ns, g, x, w, *, stride, padding, dilation, groups):
    """The cotangent of ``x`` as ``w^T g`` per group, (N, C, *K, *out), each window offset's
    slice added at its place in the padded input, the padding then dropped."""
    N, P = g.shape[0], math.prod(g.shape[2:])
    o, cg, kernel = w.shape[0], w.shape[1], tuple(w.shape[2:])
    wm = ns.reshape(w, (groups, o // groups, cg * math.prod(kernel)))
    cols = ns.matmul(ns.matrix_transpose(wm), ns.reshape(g, (N, groups, o // groups, P)))
    cols = ns.reshape(cols, (N, groups * cg, *kernel, *g.shape[2:]))  # (N, C, *K, *out)
    parts = [cols[(slice(None), slice(None), *offs, ...)] for offs in grid(kernel)]
    return _unpool(ns, parts, x, kernel, stride, padding, dilation)


def weight_grad(ns, g, x, w, *, stride, padding, dilation, groups):
    """The correlation of ``x`` with ``g``: the cotangent of ``w``."""
    if getattr(ns, "_backend", None) is None and caps(ns).chunked:
        return weight_grad_by_offsets(ns, g, pad(ns, x, padding), tuple(w.shape), stride,
                                      dilation, groups)  # fmt: skip
    kernel, out = tuple(w.shape[2:]), tuple(g.shape[2:])
    n_, o, p = x.shape[0], w.shape[0], math.prod(out)
    cols = columns(ns, pad(ns, x, padding), kernel, stride, dilation, out)  # (N, Q, P)
    q = cols.shape[1]
    gm = ns.reshape(g, (n_, groups, o // groups, p))
    cols = ns.reshape(cols, (n_, groups, q // groups, p))
    gw = ns.sum(ns.matmul(gm, ns.matrix_transpose(cols)), axis=0)  # (G, O/G, Q/G)
    return ns.reshape(gw, tuple(w.shape))


def _conv(name):
    def rule(ns, g, out, x, w, /, *, stride, padding, dilation, groups, needs=(0, 1)):
        kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
        gx = input_grad(ns, name, g, x, w, **kw) if 0 in needs else None
        gw = weight_grad(ns, g, x, w, **kw) if 1 in needs else None
        return gx, gw

    return rule


def _unpool(ns, parts, x, kernel, stride, padding, dilation=None):
    """Window contributions summed back onto ``x``'s shape (padding dropped)."""
    n = len(kernel)
    shape = tuple(x.shape[: x.ndim - n]) + tuple(
        s + pb + pa for s, (pb, pa) in zip(x.shape[x.ndim - n:], padding, strict=True))
    dx = unwindow(ns, parts, shape, kernel, stride, dilation or (1,) * n)
    return pad(ns, dx, tuple((-pb, -pa) for pb, pa in padding))


def _max_pool(ns, g, out, x, /, *, kernel, stride, padding):
    n = len(kernel)
    xp_ = pad(ns, x, padding, ns.finfo(x.dtype).min)
    parts = window_slices(xp_, kernel, stride, (1,) * n, tuple(out.shape[out.ndim - n:]))
    free, cts = None, []  # free: windows whose maximum no earlier offset held
    for part in parts[:-1]:  # the first maximum of each window takes the whole cotangent
        hit = part == out
        if free is not None:
            hit = ns.logical_and(hit, free)
        free = ns.logical_not(hit) if free is None else ns.logical_and(free, ns.logical_not(hit))
        cts.append(select(ns, hit, g, 0))
    cts.append(g if free is None else select(ns, free, g, 0))
    return (_unpool(ns, cts, x, kernel, stride, padding),)


def _avg_pool(ns, g, out, x, /, *, kernel, stride, padding):
    share = g / math.prod(kernel)
    return (_unpool(ns, [share] * len(grid(kernel)), x, kernel, stride, padding),)


defvjp("_conv1d", _conv("_conv1d"), saves=("x", "w"), takes_needs=True)
defvjp("_conv2d", _conv("_conv2d"), saves=("x", "w"), takes_needs=True)
defvjp("_max_pool2d", _max_pool, saves=("x", "out"))
defvjp("_avg_pool2d", _avg_pool)
