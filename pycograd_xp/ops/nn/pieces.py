"""Block-by-block evaluation for the transformer rows (activations, normalisations,
cross-entropy, attention), and what those rows share.

These rows keep only small residuals (the tape holds what a VJP declares): an activation its
input; a normalisation its input, weight and per-row statistics (as extra outputs);
cross-entropy the logits, the labels and each row's normaliser; attention q, k, v, its output
and each row's log-sum-exp. On a raw backend that writes in place their elementwise work goes
block by block (``PIECE_BYTES``), so their temporaries stay a block's, and a VJP given a
cotangent only it holds writes its result there; elsewhere (immutable or chunked arrays, ours
for a higher order) each is the composition of standard functions over whole arrays.
"""

from __future__ import annotations

import itertools
import math
import sys
from typing import Any

from ..._abstract import models_a_gpu
from .._rules.shapes import BUFFER_ELEMENTS, in_operands_order
from .windows import _like, _raw, caps, itemsize

FP = "real floating-point"


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


def on_device(bk: Any = None) -> bool:
    """Whether ``bk`` runs its calls as GPU kernels (``Backend.device``, CuPy): each call a
    launch, so a whole array is better than cache-sized blocks. The abstract backend, and
    ``bk`` None (a memory rule), as the backend the running projection or trace stands for."""
    c = None if bk is None else caps(bk)
    return models_a_gpu() if c is None or c.abstract else c.device


def block_limit(bk: Any = None) -> int:
    """The bytes of a block of :func:`pieces` on ``bk``: PIECE_BYTES, or no limit on a GPU
    (one block, the whole array, still written in place); ``bk`` None: in a memory rule."""
    return sys.maxsize if on_device(bk) else PIECE_BYTES


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
    blocks: list[Any] = [...]
    if in_place(bk) and x.ndim:
        blocks = pieces(x.shape, itemsize(bk, x.dtype), keep, block_limit(bk))
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


def tanh_grad(ns: Any, g: Any, out: Any, owned: bool) -> Any:
    """tanh's VJP ``g - out^2 g`` block by block (:func:`pieces`) on a backend that writes in
    place: one block's square at a time, not a temporary of the whole array (the deep MLP's
    step peaked at it), written into ``g`` when ``owned``; the same values. None where it does
    not apply (another backend, operands of other shapes or dtypes, one block): the caller
    takes the whole arrays."""
    if not in_place(ns) or tuple(g.shape) != tuple(out.shape) or g.dtype != out.dtype:
        return None
    if g.size * itemsize(ns, g.dtype) <= block_limit(ns):  # one block: the whole arrays
        return None

    def block(ns: Any, gb: Any, yb: Any, dst: Any = None) -> Any:
        t = yb * yb
        t *= gb
        return _into(ns, ns.subtract, gb, t, dst)

    return by_pieces(ns, block, g, out, out=g if owned else None)


class BlockConst:
    """A value (a number, or an array that broadcasts against the blocks) as an array of the
    first block's shape (:func:`pieces`' largest), made once for the blocks of a call and
    sliced for a smaller one: NumPy reads an operand of the block's shape at up to 1.6x the
    speed of a row broadcast over it (measured 8.3 against 13.6 us a block of 64K float32),
    the same values. None stays None."""

    def __init__(self, value: Any) -> None:
        self.value, self.full = value, None

    def __call__(self, ns: Any, block: Any) -> Any:
        if self.value is None:
            return None
        shape = tuple(block.shape)
        f = self.full
        if f is None:
            dtype = getattr(self.value, "dtype", block.dtype)
            f = self.full = ns.empty(shape, dtype=dtype, **_like(ns, block))
            f[...] = self.value
        if tuple(f.shape) == shape:
            return f
        return f[tuple(slice(0, s) for s in shape)]


def _into(bk: Any, f: Any, a: Any, b: Any, dst: Any) -> Any:
    """``f(a, b)`` (a binary function of ``bk``) written into ``dst`` where given, of the
    result's dtype, and ``f`` takes ``out=`` (NumPy's ufuncs: no temporary and no copy); a new
    array elsewhere (the abstract backend, whose projections count it: an upper bound)."""
    if dst is not None and (
        dst.dtype == a.dtype == getattr(b, "dtype", None) or dst.dtype == bk.result_type(a, b)
    ):
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
    return in_operands_order(x.shape, x.dtype, x)  # x's layout, as NumPy's ufuncs give


def _pieces_memory(temps: int) -> Any:
    """The transients of a one-argument row evaluated block by block into a new output:
    ``temps`` arrays of the largest block alive at once, and the iterator's buffers of a
    block in another layout than its temporaries'."""

    def memory(out: Any, x: Any, /, **kw: Any) -> int:
        item = out.dtype.itemsize
        n = piece_size(x.shape, item, 0, block_limit())
        return temps * n * item + 2 * min(n, BUFFER_ELEMENTS) * item

    return memory


def _activation_vjp(d: Any, per_call: Any = None) -> Any:
    """The VJP ``g d(ns, x)`` of an activation whose derivative is ``d``: block by block into
    ``g`` when only the backward pass holds it (``owned``), else into a new array.
    ``per_call()``: keywords for ``d`` made once a call and shared by its blocks (GELU's clip
    bound, :class:`BlockConst`)."""

    def rule(ns: Any, g: Any, out: Any, x: Any, /, *, owned: bool = False) -> Any:
        kw = per_call() if per_call is not None else {}

        def block(ns: Any, gb: Any, xb: Any, dst: Any = None) -> Any:
            r = d(ns, xb, **kw)
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
