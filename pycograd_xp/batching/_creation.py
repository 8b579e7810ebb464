"""Creation rows: ``*_like`` keep the batch axis; ``full`` with a batched fill value broadcasts
it; tril/triu work on the last two axes; linspace with batched ends scales one shared grid
(its length is a Python int). arange's length would depend on each example's values: it
cannot batch."""

from __future__ import annotations

from .._primitive import defbatch, unbatchable
from ..namespace._array import detach
from ..ops._rules.batching import batch_size, batched, constant_like, to_rank


def _like(name):
    return lambda ns, dims, x, /, **kw: getattr(ns, name)(x, **kw)


def _full(ns, dims, shape, fill_value, *, dtype=None, device=None):
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    n = fill_value.shape[0]
    v = to_rank(ns, fill_value, len(shape))
    out = ns.broadcast_to(v, (n, *shape))
    return ns.astype(out, dtype, copy=True) if dtype is not None else ns.asarray(out, copy=True)


def _full_like(ns, dims, x, /, fill_value, *, dtype=None, device=None):
    if not dims[1]:
        return ns.full_like(x, fill_value, dtype=dtype)
    n = fill_value.shape[0]
    shape = tuple(x.shape[1:]) if dims[0] else tuple(x.shape)
    out = ns.broadcast_to(to_rank(ns, fill_value, len(shape)), (n, *shape))
    return ns.astype(out, dtype if dtype is not None else x.dtype, copy=True)


def _asarray(ns, dims, obj, /, *, dtype=None, device=None, copy=None):
    if dims[0] is True:
        return ns.asarray(obj, dtype=dtype, copy=copy)
    # a (nested) list holding batched arrays: stack the examples' values
    n = _first_batch(obj, dims[0])
    return ns.asarray(ns.stack(_stacked(ns, obj, dims[0], n), axis=1), dtype=dtype)


def _first_batch(obj, d):
    for o, di in zip(obj, d, strict=True):
        if di is True:
            return o.shape[0]
        if isinstance(di, list):
            n = _first_batch(o, di)
            if n is not None:
                return n
    return None


def _stacked(ns, obj, d, n):
    out = []
    for o, di in zip(obj, d, strict=True):
        if isinstance(di, list):
            out.append(ns.stack(_stacked(ns, o, di, n), axis=1))
        else:
            out.append(batched(ns, ns.asarray(o) if not hasattr(o, "shape") else o, di, n))
    return out


def _last2(name):
    return lambda ns, dims, x, /, **kw: getattr(ns, name)(x, **kw)


def _meshgrid(ns, dims, *arrays, indexing="xy"):
    n = next(a.shape[0] for a, d in zip(arrays, dims, strict=True) if d)
    lens = [a.shape[-1] for a in arrays]
    k = len(arrays)
    pos = list(range(k))
    if indexing == "xy" and k >= 2:
        pos[0], pos[1] = 1, 0
    shape = [0] * k
    for i, p in enumerate(pos):
        shape[p] = lens[i]
    out = []
    for a, d, p in zip(arrays, dims, pos, strict=True):
        a = batched(ns, a, d, n)
        view = [1] * k
        view[p] = a.shape[1]
        out.append(ns.broadcast_to(ns.reshape(a, (n, *view)), (n, *shape)))
    return out


def _linspace(ns, dims, start, stop, /, num, *, dtype=None, device=None, endpoint=True):
    # num is a Python int, so each example's grid has the same length: start + (stop - start)
    # times one shared unit grid (linspace has no gradient: the ends are detached)
    n = batch_size(dims, (start, stop))
    like = start if dims[0] else stop
    t = constant_like(like, lambda bk, kw: bk.linspace(0.0, 1.0, num, dtype=dtype,
                                                       endpoint=endpoint, **kw))  # fmt: skip
    ends = []
    for v, d in zip((start, stop), dims[:2], strict=True):
        v = detach(batched(ns, v, d, n))
        if not ns.isdtype(v.dtype, ("real floating", "complex floating")) or dtype is not None:
            v = ns.astype(v, t.dtype)
        ends.append(v[:, None])
    a, b = ends
    out = a + (b - a) * t
    if endpoint and num > 1:  # the last point is stop exactly, as in NumPy
        last = constant_like(like, lambda bk, kw: bk.arange(num, **kw)) == num - 1
        out = ns.where(last, b, out)
    return out


for _n in ("empty_like", "ones_like", "zeros_like"):
    defbatch(_n, _like(_n))
for _n in ("tril", "triu"):
    defbatch(_n, _last2(_n))
defbatch("full", _full)
defbatch("full_like", _full_like)
defbatch("asarray", _asarray)
defbatch("meshgrid", _meshgrid)
defbatch("linspace", _linspace)
unbatchable("its length would depend on each example's values; build the grid outside vmap "
            "(or use start + step * xp.arange(n))", "arange")  # fmt: skip
unbatchable("a batched value has no single DLPack buffer; use xp.asarray", "from_dlpack")
unbatchable("it takes only Python values (a shape), never a batched array", "empty", "eye",
            "ones", "zeros", "fft.fftfreq", "fft.rfftfreq", "broadcast_shapes")  # fmt: skip
