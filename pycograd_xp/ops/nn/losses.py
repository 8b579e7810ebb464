"""The loss row ``_cross_entropy`` (:func:`pycograd_xp.nn.cross_entropy`): it keeps the logits,
the labels and each row's log-sum-exp (an extra output), evaluated block by block where the
backend writes in place (:mod:`.pieces`); labels are class indices or probabilities.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import _reductions as fast
from ..._primitive import Array, primitive
from .._rules.batching import batch_size, batched, to_rank
from .._rules.jvp import plus
from .._rules.shapes import BUFFER_ELEMENTS, broadcast, new
from .._rules.vjp import values_known
from .pieces import FP, _times, block_limit, in_place, piece_size, pieces
from .windows import _like, _own, _raw, caps, itemsize

# -- _cross_entropy ------------------------------------------------------------------------------


def _is_int(bk: Any, a: Any) -> bool:
    dtype = a.dtype
    if isinstance(dtype, np.dtype):  # NumPy's, CuPy's, Cubed's: no isdtype call (slow on NumPy)
        return dtype.kind in "iu"
    return bk.isdtype(dtype, "integral")


def _is_signed(bk: Any, dtype: Any) -> bool:
    if isinstance(dtype, np.dtype):
        return dtype.kind == "i"
    return bk.isdtype(dtype, "signed integer")


_INT_MAX: dict[Any, int] = {}


def _int_max(bk: Any, dtype: Any) -> int:
    """``iinfo(dtype).max``, looked up once per dtype."""
    top = _INT_MAX.get(dtype)
    if top is None:
        top = _INT_MAX[dtype] = int(bk.iinfo(dtype).max)
    return top


def _item(bk: Any, dtype: Any) -> int:
    return dtype.itemsize if isinstance(dtype, np.dtype) else itemsize(bk, dtype)


def _lse_f(bk: Any, z: Any) -> Any:
    """``logsumexp(z, axis=-1)`` (kept dims), the maximum shifted out (0 where not finite)."""
    m = fast.max(bk, z, -1, keepdims=True)
    m = bk.where(bk.isfinite(m), m, 0.0)
    e = bk.exp(z - m)
    s = fast.sum(bk, e, -1, keepdims=True)
    del e
    return bk.log(s) + m


def _rows(z: Any, labels: Any) -> Any:
    """The row indices that pair with ``labels`` in NumPy's integer-array indexing
    (``z[rows, labels]``: one element per row), where ``z`` is a NumPy matrix and ``labels`` a
    NumPy vector of its rows' classes; else None (the standard's gather or mask is taken)."""
    if type(z) is np.ndarray and type(labels) is np.ndarray and z.ndim == 2 and labels.ndim == 1:
        return np.arange(z.shape[0])
    return None


def _gather_fits(dz: Any) -> bool:
    """Whether a row index and a gathered copy take no more memory than a one-hot mask and a
    where over the matrix ``dz`` (per row: 8 + itemsize bytes, and under one more where NumPy
    converts labels that are not intp through its buffers, against (1 + itemsize) each of its
    classes). Measured by tracemalloc over 100,000 rows: 12.0 (int64 labels) and 12.7 (int8)
    bytes a row against the mask's 15.3 for 3 float32 classes; 16.7 against 36.7 for 4
    float64 ones."""
    item = dz.dtype.itemsize
    return dz.shape[1] * (1 + item) >= 9 + item


def _picked(bk: Any, z: Any, labels: Any) -> Any:
    """``z[..., labels]`` (kept dims): a gather where the backend has one, else a masked sum.
    A NumPy matrix gathers by integer-array indexing (the same elements; NumPy's
    ``take_along_axis`` builds its index arrays in Python: 6 against 2 us for 64 rows)."""
    rows = _rows(z, labels)
    if rows is not None:
        return z[rows, labels][:, None]
    if hasattr(bk, "take_along_axis") and not (_raw(bk) and caps(bk).chunked):
        return bk.take_along_axis(z, labels[..., None], axis=-1)
    hit = labels[..., None] == bk.arange(z.shape[-1], **_like(bk, labels))
    return bk.sum(bk.where(hit, z, 0.0), axis=-1, keepdims=True)


def _cross_entropy_f(bk: Any, z: Any, y: Any) -> Any:
    lse = _lse_f(bk, z)
    if _is_int(bk, y):
        loss = lse - _picked(bk, z, y)
    else:  # sum(y (lse - z)) = lse sum(y) - <y, z>
        loss = lse * fast.sum(bk, y, -1, keepdims=True) - fast.sum(bk, y * z, -1, keepdims=True)
    return loss[..., 0], lse[..., 0]


def _labels(bk: Any, logits: Any, labels: Any, check: bool = True) -> Any:
    """The labels broadcast to the logits' rows (indices) or to the logits (probabilities);
    negative class indices counted from the last class, as NumPy's and JAX's gathers count
    them. (The forward's gather took -1 as the last class while the VJP's mask matched no
    class: a gradient that was not the loss's; the masked sum of chunked backends matched
    none in the forward too.) ``check``: refuse indices out of range (:func:`_check_classes`);
    the VJP and JVP pass False, the forward having refused them (where values are read: the
    VJP and JVP then read none, a remainder counts -C..-1 from the end)."""
    integer = _is_int(bk, labels)
    shape = _check_labels(logits, labels, integer)
    if not integer or logits.ndim < 1:
        return labels if tuple(labels.shape) == shape else bk.broadcast_to(labels, shape)
    classes = logits.shape[-1]
    signed = _is_signed(bk, labels.dtype)
    negative = signed  # whether some index may count from the end
    if signed and not check and values_known(bk):
        # the VJP's and JVP's: the forward refused indices out of range, so -C..-1 count from
        # the end by a remainder, no read of the values
        if _int_max(bk, labels.dtype) < classes:  # int8 labels of 200 classes
            labels = bk.astype(labels, bk.int64)
        labels = bk.remainder(labels, classes)
        return labels if tuple(labels.shape) == shape else bk.broadcast_to(labels, shape)
    if values_known(bk) and math.prod(labels.shape):  # the range read once, as two numbers
        low = int(fast.min(bk, labels)) if signed else 0
        negative = low < 0
        if check and (low < (-classes if signed else 0) or int(fast.max(bk, labels)) >= classes):
            _check_classes(bk, labels, classes)  # raises, naming the first index out of range
    elif check:
        _check_classes(bk, labels, classes)
    if negative:
        if _int_max(bk, labels.dtype) < classes:  # int8 labels of 200 classes
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
    if logits.ndim >= 1 and tuple(labels.shape) == want:  # (the common case: nothing to check)
        return want
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
def _cross_entropy(bk: Any, logits: Array, /, labels: Array, *, mean: bool = False) -> Any:
    """Softmax cross-entropy over the last axis, one value per row: ``logsumexp(z) - z[label]``
    for integer ``labels`` (broadcast to ``logits.shape[:-1]``), ``sum(p (logsumexp(z) - z))``
    for probabilities ``p`` (broadcast to ``logits.shape``; differentiable too). Returns the
    losses and the normaliser ``logsumexp(z)`` (``pycograd_xp.nn.cross_entropy`` reduces the
    first). Block by block over the rows; the VJP keeps the logits, the labels and the
    normaliser, never the log-probabilities or a one-hot.

    ``mean``: the losses' mean (a 0-d array) in place of the losses, as ``mean(losses)``
    computes it, bit for bit (the mean in the row: one node fewer on a step's tape, and no
    broadcast cotangent: the VJP scales the logits' by one number)."""
    own = _own(bk, "_cross_entropy")
    if own is not None:
        return own(logits, labels, mean=mean)
    loss, lse = _cross_entropy_rows(bk, logits, labels)
    return (fast.mean(bk, loss, None, False) if mean else loss), lse


def _cross_entropy_rows(bk: Any, logits: Any, labels: Any) -> Any:
    labels = _labels(bk, logits, labels)
    if not in_place(bk) or logits.ndim < 2:
        return _cross_entropy_f(bk, logits, labels)
    dtype = bk.result_type(logits, *(() if _is_int(bk, labels) else (labels,)))
    blocks = pieces(logits.shape, _item(bk, dtype), 1, block_limit(bk))
    if len(blocks) == 1:
        return _cross_entropy_f(bk, logits, labels)
    loss = bk.empty(tuple(logits.shape[:-1]), dtype=dtype)
    lse = bk.empty(tuple(logits.shape[:-1]), dtype=logits.dtype)
    for idx in blocks:  # idx ends in ...: it indexes the rows' arrays too
        loss[idx], lse[idx] = _cross_entropy_f(bk, logits[idx], labels[idx])
    return loss, lse


def _probabilities(ns, z, lse, inplace):
    """``softmax(z)`` over the last axis from the normaliser ``lse``: ``exp(z - lse)`` over its
    own sum (1 exactly; the division restores what ``lse`` loses beside a large maximum:
    logits [1e16, 1e16, 0] give [0.5, 0.5, 0], not [1, 1, 0]; :func:`..special._softmax_from`);
    in place where ``inplace``."""
    p = ns.exp(z - lse[..., None])
    s = fast.sum(ns, p, -1, keepdims=True)
    if inplace and p.dtype == ns.result_type(p, s):
        p /= s
        return p
    return p / s


# a NumPy cotangent: an array of the rows' (the mean's VJP broadcast), or one number (the mean
# in the row: NumPy's 0-d division gives a scalar)
_NUMPY_NUMBERS = frozenset((np.ndarray, np.float16, np.float32, np.float64, np.longdouble))


def _cross_entropy_grad(ns, g, z, y, lse, glse, inplace):
    """The logits' and the probabilities' cotangents of one block: ``softmax(z) (g sum(y) +
    glse) - g y``, ``g (lse - z)`` (None for integer labels). ``inplace``: ``in_place(ns)``."""
    p = _probabilities(ns, z, lse, inplace)
    g1 = g[..., None]
    if _is_int(ns, y):
        coef = g1 + glse[..., None]
        dz = p * coef if not inplace else _times(p, coef)
        rows = _rows(dz, y) if inplace else None
        # dz[i, y[i]] -= g[i]: what the mask's where subtracts there (elsewhere it subtracts 0:
        # dz unchanged), with a row index and a gathered copy (8 + itemsize bytes a row) in
        # place of the mask and the where (1 + itemsize bytes an element: memory.project
        # counts those), so only where that is no more: from 3 classes (float32)
        if rows is not None and type(g) in _NUMPY_NUMBERS and _gather_fits(dz):
            dz[rows, y] -= g
            return dz, None
        hit = y[..., None] == ns.arange(z.shape[-1], **_like(ns, y))
        if inplace:
            dz -= ns.where(hit, g1, 0.0)
        else:
            dz = dz - ns.where(hit, g1, 0.0)
        return dz, None
    coef = g1 * fast.sum(ns, y, -1, keepdims=True) + glse[..., None]
    dz = p * coef if not inplace else _times(p, coef)
    gy = g1 * y
    if inplace and dz.dtype == gy.dtype:
        dz -= gy
    else:
        dz = dz - gy
    del gy
    return dz, g1 * (lse[..., None] - z)


@_cross_entropy.defvjp(saves=("logits", "labels", "out"))
def _cross_entropy_vjp(ns, g, out, logits, /, labels, *, mean=False):
    gl, glse = g
    lse = out[1]
    if mean and math.prod(lse.shape):  # each row's cotangent: one number, the mean's g / n
        gl = gl / math.prod(lse.shape)
    labels = _labels(ns, logits, labels, check=False)
    item = _item(ns, ns.result_type(gl, logits))
    inplace = in_place(ns)
    blocks = (
        pieces(logits.shape, item, 1, block_limit(ns)) if inplace and logits.ndim >= 2 else [...]
    )
    if len(blocks) == 1:
        return _cross_entropy_grad(ns, gl, logits, labels, lse, glse, inplace)
    probs = not _is_int(ns, labels)
    dz: Any = None
    dy: Any = None
    for idx in blocks:  # idx ends in ...: it indexes the rows' arrays too
        a, b = _cross_entropy_grad(
            ns, gl if mean else gl[idx], logits[idx], labels[idx], lse[idx], glse[idx], inplace
        )
        if dz is None:
            dz = ns.empty(tuple(logits.shape), dtype=a.dtype)
            dy = ns.empty(tuple(logits.shape), dtype=b.dtype) if probs else None
        dz[idx] = a
        if probs:
            dy[idx] = b
        del a, b
    return dz, dy


@_cross_entropy.defjvp
def _cross_entropy_jvp(ns, t, out, logits, /, labels, *, mean=False):
    loss, lse = out
    labels = _labels(ns, logits, labels, check=False)
    tz, ty = (tuple(t) + (None,))[:2]
    tl = tlse = None
    p = _probabilities(ns, logits, lse, False)
    if tz is not None:
        tlse = ns.sum(p * tz, axis=-1)
        if _is_int(ns, labels):
            tl = tlse - _picked(ns, tz, labels)[..., 0]
        else:
            tl = tlse * ns.sum(labels, axis=-1) - ns.sum(labels * tz, axis=-1)
    if ty is not None:
        tl = plus(tl, ns.sum(ty * (lse[..., None] - logits), axis=-1))
    if mean and tl is not None:
        tl = ns.mean(tl)
    return tl, tlse


@_cross_entropy.defbatch
def _cross_entropy_batch(ns, dims, logits, /, labels, *, mean=False):
    n = batch_size(dims, (logits, labels))
    r = logits.ndim - (1 if dims[0] else 0)  # an example's rank
    if ns.isdtype(labels.dtype, "integral"):
        r -= 1  # the labels of an example's rows
    logits = batched(ns, logits, dims[0], n)
    labels = to_rank(ns, batched(ns, labels, dims[1], n), r)
    loss, lse = ns._cross_entropy(logits, labels)
    if mean:  # each example's mean, over its rows' axes
        loss = ns.mean(loss, axis=tuple(range(1, loss.ndim)))
    return loss, lse


def _cross_entropy_shape(a, logits, /, labels, *, mean=False):
    integer = labels.dtype.kind in "iu"
    _check_labels(logits, labels, integer)
    dtype = logits.dtype if integer else np.result_type(logits.dtype, labels.dtype)
    rows = tuple(logits.shape[:-1])
    return new(() if mean else rows, dtype), new(rows, logits.dtype)


def _cross_entropy_memory(out, logits, /, labels, *, mean=False):
    """Per block of rows (the whole where one): ``z - max`` and its exponentials, then the
    picked logits (a gather) or the product with the probabilities; a few arrays of a row's
    statistics; with ``mean`` the rows' losses before their mean."""
    loss = out[0]
    if mean:
        loss = new(tuple(logits.shape[:-1]), loss.dtype)
    item = max(loss.dtype.itemsize, logits.dtype.itemsize)
    n = (
        piece_size(logits.shape, item, 1, block_limit())
        if logits.ndim >= 2
        else math.prod(logits.shape)
    )
    rows = max(1, n // max(logits.shape[-1], 1)) if logits.ndim else 1
    cast = n * item if labels.dtype.kind == "f" and labels.dtype != logits.dtype else 0
    losses = loss.nbytes if mean else 0
    return losses + 2 * n * item + cast + 8 * rows * item + 2 * min(n, BUFFER_ELEMENTS) * item


_cross_entropy.defshape(_cross_entropy_shape, memory=_cross_entropy_memory)
