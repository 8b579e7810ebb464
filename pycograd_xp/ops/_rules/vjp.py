"""Helpers shared by the VJP rules. Each works on the raw backend namespace (first-order
backward) and on our differentiable namespace (higher order), using standard functions only,
except where a backend offers a faster exact primitive (NumPy's ``add.at``)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from ... import _reductions as fast
from ...namespace._array import SCALARS
from ...namespace._backend import capabilities


def raw(ns: Any) -> bool:
    """Whether ``ns`` is a backend namespace (a first-order backward), not one of ours."""
    if type(ns) is ModuleType:  # (ours hold it in their dict; a miss through NumPy's module
        return "_backend" not in ns.__dict__  # __getattr__ costs 1.8 us, rules ask often)
    return getattr(ns, "_backend", None) is None


def chunked(ns: Any) -> bool:
    """Whether ``ns`` is a chunked backend's own namespace: ``broadcast_to`` takes ``chunks=``
    there (first order only; our namespace keeps the standard's signature)."""
    return raw(ns) and capabilities(ns).chunked


def values_known(ns: Any) -> bool:
    """Whether a rule may read values on ``ns`` as a whole (a Python bool of an array's):
    not on a lazy or abstract backend (Cubed, a projection, a compiled trace), nor inside
    vmap, whose batched values have one per example (its levels, and namespaces no namespace
    of ours wraps)."""
    try:
        b = capabilities(ns)
    except TypeError:
        return False
    return not (b.lazy or b.abstract or b.level)


def made_like(ns: Any, like: Any) -> dict[str, Any]:
    """Keyword arguments that make a constant (``eye``, ``zeros``, ``asarray``) of the backend's
    own namespace belong with ``like`` (Cubed: its Spec; Cubed refuses to mix Specs)."""
    like_kwargs = capabilities(ns).like_kwargs if raw(ns) else None
    return like_kwargs(like) if like_kwargs is not None else {}


def eye(
    ns: Any, like: Any, n_rows: int, n_cols: int | None = None, *, k: int = 0, dtype: Any = None
) -> Any:
    """``ns.eye`` made with ``like``'s Spec on a chunked backend."""
    return ns.eye(n_rows, n_cols, k=k, dtype=dtype, **made_like(ns, like))


def is_scalar(x: Any) -> bool:
    return isinstance(x, SCALARS)


def is_complex(ns: Any, x: Any) -> bool:
    return ns.isdtype(x.dtype, "complex floating")


def tensordot_axes(axes: Any, nd1: int, nd2: int) -> tuple[list[int], list[int]]:
    """``tensordot``'s ``axes`` (an int ``n``: the last ``n`` of x1 with the first ``n`` of x2;
    or a pair of sequences, or of ints as NumPy takes them) as two lists of non-negative axes.
    The one reading of ``axes`` the VJP, batching and shape rules share."""
    if isinstance(axes, int):
        return list(range(nd1 - axes, nd1)), list(range(axes))
    a, b = axes
    a = [a] if isinstance(a, int) else list(a)
    b = [b] if isinstance(b, int) else list(b)
    return [i % nd1 for i in a], [i % nd2 for i in b]


def norm_axes(axis: Any, ndim: int) -> tuple[int, ...]:
    """``axis`` (None, an int or a tuple) as sorted non-negative ints."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, int):
        axis = (axis,)
    return tuple(sorted(a % ndim for a in axis)) if ndim else ()


def kept(ns: Any, v: Any, ndim: int, axis: Any, keepdims: bool) -> Any:
    """A reduction's result ``v`` with its reduced axes back as ones (keepdims): it broadcasts
    against the reduction's input (``ndim`` axes) in an elementwise op, with no array of the
    input's shape made for it. A 0-d one, a full reduction's, broadcasts as it is."""
    if keepdims or not v.ndim:
        return v
    for a in norm_axes(axis, ndim):
        v = ns.expand_dims(v, axis=a)
    return v


def expand_to(ns: Any, g: Any, like: Any, axis: Any = None, keepdims: bool = True) -> Any:
    """Broadcast a reduction's cotangent ``g`` back to the shape of its input ``like``: the
    cotangent of ``like`` itself (a view on NumPy). A rule that multiplies ``g`` by an array of
    ``like``'s shape needs only :func:`kept`.

    On Cubed the result keeps the input's chunking (a plain ``broadcast_to`` would make size-1
    chunks along the new dimensions: a plan of thousands of tasks).
    """
    g = kept(ns, g, like.ndim, axis, keepdims)
    if chunked(ns):
        return ns.broadcast_to(g, tuple(like.shape), chunks=like.chunks)
    return fast.broadcast_to(ns, g, tuple(like.shape))


def zeros_beside(ns: Any, g: Any, axis: int, size: int) -> Any:
    """Zeros shaped like ``g`` but ``size`` long on ``axis``, made from ``g`` so that on a chunked
    backend they share its Spec and its chunk size (Cubed 0.27's concat gives wrong values when
    its operands' chunk sizes along the axis differ)."""
    edge = [slice(None)] * g.ndim
    edge[axis] = slice(0, 1)
    block = list(g.shape)
    block[axis] = size
    if chunked(ns):
        return ns.zeros_like(ns.broadcast_to(g[tuple(edge)], tuple(block), chunks=g.chunksize))
    return ns.zeros_like(ns.broadcast_to(g[tuple(edge)], tuple(block)))


def count(shape: tuple[int, ...], axes: tuple[int, ...]) -> int:
    n = 1
    for a in axes:
        n *= shape[a]
    return n


def sgn(ns: Any, x: Any) -> Any:
    """d|x|/dx in the JAX convention: sign(x) for reals, conj(x)/|x| (0 at 0) for complex."""
    if not is_complex(ns, x):
        return ns.sign(x)
    a = ns.abs(x)
    return ns.conj(x) / ns.where(a == 0, 1.0, a)


def to_complex(ns: Any, g: Any) -> Any:
    return ns.astype(g, ns.complex64 if g.dtype == ns.float32 else ns.complex128)


def mT(ns: Any, x: Any) -> Any:  # the standard's x.mT where arrays have it (NumPy 2: no call)
    t = getattr(x, "mT", None)
    return t if t is not None else ns.matrix_transpose(x)


def move_to_last(ns: Any, x: Any, axis: int) -> Any:
    return ns.moveaxis(x, axis, -1)


def index_add(ns: Any, size: int, flat_index: Any, values: Any) -> Any:
    """A length-``size`` vector with ``values`` summed at ``flat_index`` (duplicates add up).

    A backend's own exact scatter-add where it has one (NumPy's ``add.at``). Elsewhere, and
    on our namespace (higher order), a sort-based segment sum from standard functions only (no
    scatter, which array-api-strict and Cubed lack): sort the indices, take cumulative sums of
    the values in that order, and read each position's segment off with ``searchsorted``. It is
    itself differentiable, for higher order.
    """
    fast = capabilities(ns).index_add
    if fast is not None and raw(ns):
        return fast(size, flat_index, values)
    order = ns.argsort(flat_index)
    idx = ns.take(flat_index, order)
    sums = ns.cumulative_sum(ns.take(values, order), include_initial=True)
    positions = ns.arange(size, dtype=idx.dtype)
    hi = ns.searchsorted(idx, positions, side="right")
    lo = ns.searchsorted(idx, positions, side="left")
    return ns.take(sums, hi) - ns.take(sums, lo)
