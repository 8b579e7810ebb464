"""Shape and memory rules of convolution and pooling. The transients are the impl's (see
``pycograd_xp.namespace._nn``): a padded copy of the input where there is padding, the columns
(N, C * prod(K), prod(out)) copied out of the window view for the product (of one block of
the batch at a time, see ``namespace._nn.batch_blocks``: each block's product is a temporary
too), and a copy of the weight when it is not contiguous (a flipped kernel in a transposed
convolution). The flat-grid and bias-in-the-product paths have their own rules
(:func:`_flat_memory`, :func:`_bias_row_memory`). Pooling reduces strided slices pairwise: one
output-sized temporary beside the padded copy (a max-pool whose columns tile: the rows'
maximum, ``kernel[1]`` times the output, then the columns'). A convolution's input gradient on
a mutable backend is no row call but col2im (``vjp/_nn.py``): a product, a zero fill and
strided adds, each projected by its own rule."""

from __future__ import annotations

import math

import numpy as np

from ..._primitive import defshape
from ...namespace._nn import (
    bias_row,
    blocks_of,
    check_bias,
    flat_padding,
    flat_rows,
    out_sizes,
    rows_first,
)
from ...ops._rules.shapes import BUFFER_ELEMENTS, new, ufunc_buffers
from ...ops.searching import where_memory


def _padded_bytes(x, padding):
    n = len(padding)
    if not any(b > 0 or a > 0 for b, a in padding):
        return 0
    spatial = [max(s + min(b, 0) + min(a, 0), 0) + max(b, 0) + max(a, 0)
               for s, (b, a) in zip(x.shape[x.ndim - n:], padding, strict=True)]  # fmt: skip
    return math.prod(x.shape[: x.ndim - n]) * math.prod(spatial) * x.dtype.itemsize


def _conv(fname):
    def shape(a, x, w, b=None, /, *, stride, padding, dilation, groups):
        n = w.ndim - 2
        if x.ndim != n + 2 or x.shape[1] != w.shape[1] * groups or w.shape[0] % groups:
            raise ValueError(f"{fname}(): input {x.shape} and weight {w.shape} do not match "
                             f"with groups={groups}")  # fmt: skip
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
            bias = ufunc_buffers(out, new((n, *out.shape[1:]), prod),
                                 new((1, w.shape[0]) + (1,) * (out.ndim - 2), b.dtype))
            if prod != out.dtype:
                bias += block * out.dtype.itemsize
        return (_padded_bytes(x, padding) + cols * x.dtype.itemsize + cast + w_bytes
                + block_out + bias)

    return shape, memory


def _block_rows(x, per):
    """The examples in the largest block of the batch a convolution takes at a time, for
    ``per`` column elements an example (``namespace._nn.blocks_of``)."""
    return max(stop - start for start, stop in blocks_of(x.shape[0], per * x.dtype.itemsize))


def _flat_memory(out, x, w, b, padding):
    """A convolution over the flat padded grid (``namespace._nn._conv_flat``): the input padded
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
    return (_padded_bytes(x, flat_padding(padding)) + w_bytes + cols + cast
            + block * prod.itemsize + bias)


def _bias_row_memory(out, x, w, padding):
    """A convolution with the bias in its product (``namespace._nn._conv_bias_row``): the
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
    return (_padded_bytes(x, padding) + wa + n * per * x.dtype.itemsize + max(ones, cast)
            + block)


def _pool(fname):
    def shape(a, x, /, *, kernel, stride, padding):
        n = len(kernel)
        out = out_sizes(fname, x.shape[x.ndim - n:], kernel, stride, padding, (1,) * n)
        return new((*x.shape[: x.ndim - n], *out), x.dtype)

    def memory(out, x, /, *, kernel, stride, padding):
        if fname == "max_pool2d" and rows_first(kernel, stride):  # rows' maximum v, then columns'
            (kh, kw), m = kernel, math.prod(out.shape) * out.dtype.itemsize
            v = m * kw  # (..., ho, wo * kw)
            return _padded_bytes(x, padding) + max(v * (1 if kh == 2 else 2),
                                                   v + (m if kw > 2 else 0))  # fmt: skip
        return _padded_bytes(x, padding) + out.nbytes

    return shape, memory


for _name in ("conv1d", "conv2d"):
    _s, _m = _conv(_name)
    defshape(f"_{_name}", _s, memory=_m)
for _name in ("max_pool2d", "avg_pool2d"):
    _s, _m = _pool(_name)
    defshape(f"_{_name}", _s, memory=_m)


def _relu(a, x, /):
    return new(x.shape, x.dtype)


def _relu_memory(out, x, /):
    """The mask ``x > 0`` (one byte an element) beside the select's own transients."""
    mask = new(x.shape, np.bool_)
    return mask.nbytes + max(ufunc_buffers(mask, x, 0), where_memory(out, mask, x, 0))


defshape("_relu", _relu, memory=_relu_memory)
