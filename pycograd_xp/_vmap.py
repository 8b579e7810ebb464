"""``vmap``: batching as a backend built from the primitive table.

A batched value is a :class:`BatchedArray`: an array ``data`` of an inner namespace (ours, so the
tape sees it) whose axis 0 is the batch when ``batched``, else the same value for every example.
Its ``shape`` is one example's. For each inner namespace, :func:`batched_namespace` builds a
conforming backend module whose function for each row calls the row's batching rule
(``Primitive.batch``, attached in :mod:`pycograd_xp.ops`) when an argument is batched, and the inner
function otherwise; ``namespace()`` of that module is then an ordinary differentiable namespace
(as ``pycograd_xp.memory`` does with abstract arrays). Its level is one more than the inner one:
a function of a lower level given a batched array hands the call over (``HandOver``), and lower
arrays enter a higher level unbatched (``Backend.lift``). vmap inside vmap nests levels.

The two orders of vmap and grad compose for the same reason JAX's do:

* ``grad(vmap(f))``: the batching rules call the inner namespace, whose tape records the batched
  computation; the outer gradient flows through it.
* ``vmap(grad(f))``: grad inside vmap tracks its inputs at the batched level (the innermost
  :class:`~pycograd_xp._state.Vmap` frame's), so the tape records batched arrays and the VJP rules
  run on the batched backend: the backward pass is batched too (per-example gradients: matmul's
  cotangent for an unbatched weight becomes one broadcast outer product, never a loop over
  examples).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import threading
import weakref
from collections.abc import Callable
from types import ModuleType
from typing import Any

from ._primitive import CONSTANTS, DTYPE_NAMES, UnbatchableError, namespace_module
from ._state import STACK, Vmap, interpreting
from .namespace import namespace
from .namespace._array import Array, make
from .namespace._backend import register_adapter
from .namespace._capabilities import capabilities
from .namespace._operators import install_backend_operators
from .tree import _children as _tree_children
from .tree import tree_flatten, tree_unflatten

__all__ = ["BatchedArray", "UnbatchableError", "batched_namespace", "vmap"]


class BatchedArray:
    """An array of an inner namespace; axis 0 is the batch when ``batched`` (see module doc).

    An unbatched array that is a view of another (``y[0]``, ``y.mT`` of an unbatched ``y``, on an
    inner backend whose views alias) keeps a ``link`` to it and how to make the view again, and
    the viewed array keeps weak references to its ``views``: when values that differ per
    example are written into either, :meth:`promote` makes the viewed array a batch and each
    view again from it, so the write reaches them all, as each example's write would."""

    __slots__ = ("data", "batched", "link", "views", "__weakref__")
    _mod: ModuleType  # set on each level's subclass

    def __init__(self, data: Any, batched: bool) -> None:
        self.data, self.batched = data, batched
        self.link: tuple[BatchedArray, Callable[[], Any]] | None = None
        self.views: list[weakref.ref[BatchedArray]] | None = None

    def viewed(self, data: Any, remake: Callable[[], Any]) -> BatchedArray:
        """``data`` (an inner array computed from this unbatched one) as an unbatched array,
        linked to this one where it is a view of it; ``remake()`` makes it again (as a batch)
        once this one is a batch."""
        out = type(self)(data, False)
        root = _numpy_root(data)
        if root is not None and root is _numpy_root(self.data):
            out.link = (self, remake)
            if self.views is None:
                self.views = []
            self.views.append(weakref.ref(out))
        return out

    def promote(self, n: int) -> None:
        """Make this unbatched array a batch of ``n`` copies of itself (a copy: never the
        caller's buffer), before values that differ per example are written into it; the
        array it views first (then it is made again from that), and the views of it after."""
        if self.batched:
            return
        link = self.link
        if link is not None:
            link[0].promote(n)
            new = link[1]()  # (the viewed array is a batch: the view of it, made again)
            self.data, self.batched = new.data, new.batched
        else:
            inner = self._mod._inner
            self.data = inner.asarray(
                inner.broadcast_to(self.data, (n, *self.data.shape)), copy=True
            )
            self.batched = True
        for ref in self.views or ():
            v = ref()
            if v is not None and not v.batched:
                v.promote(n)

    def store(self, data: Any, batched: bool = True) -> None:
        """This array's examples become ``data`` (a batch, or one value for all when not
        ``batched``): written into its own buffer where it is batched alike, of ``data``'s shape
        and dtype, on an inner backend whose views alias (the arrays it views and its views see
        it, as each example's write does), else rebound."""
        old = self.data
        if (
            self.batched == batched
            and data.dtype == old.dtype
            and tuple(data.shape) == tuple(old.shape)
            and capabilities(self._mod._inner).views_alias
            and _writable(old)
        ):
            old[...] = data
        else:
            self.data, self.batched = data, batched

    @property
    def base(self) -> Any:
        """The NumPy array that owns this array's memory (the backend's ``buffer``: two
        batched arrays alias where theirs is the same, as their examples' arrays would), or
        None where the inner arrays are not NumPy's (then this array is its own buffer)."""
        return _numpy_root(self.data)

    @property
    def shape(self) -> tuple[int, ...]:
        s = tuple(self.data.shape)
        return s[1:] if self.batched else s

    @property
    def ndim(self) -> int:
        return self.data.ndim - self.batched

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def dtype(self) -> Any:
        return self.data.dtype

    @property
    def device(self) -> Any:
        return self.data.device

    @property
    def T(self) -> BatchedArray:
        return self._mod.permute_dims(self, tuple(reversed(range(self.ndim))))

    @property
    def mT(self) -> BatchedArray:
        return self._mod.matrix_transpose(self)

    def __array_namespace__(self, /, *, api_version: str | None = None) -> ModuleType:
        return self._mod

    def __repr__(self) -> str:
        b = f"batch of {self.data.shape[0]}" if self.batched else "unbatched"
        return f"BatchedArray({b}, shape={self.shape}, dtype={self.dtype})"

    def __getitem__(self, key: Any) -> BatchedArray:
        return self._mod.__getitem__(self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._mod.__setitem__(self, key, value)

    def _scalar(self, conv: Callable[[Any], Any]) -> Any:
        if self.batched:
            raise TypeError(
                "vmap: a batched value cannot become a Python scalar (the function branches on "
                "the value of each example); use xp.where, or pass it with in_axes=None"
            )
        return conv(self.data)

    def __bool__(self) -> bool:
        return self._scalar(bool)

    def __float__(self) -> float:
        return self._scalar(float)

    def __int__(self) -> int:
        return self._scalar(int)

    def __index__(self) -> int:
        return self._scalar(int)

    def __complex__(self) -> complex:
        return self._scalar(complex)

    __hash__ = None  # type: ignore[assignment]


def _inplace(fname: str) -> Callable[..., Any]:
    """``x op= y``. Where the result fits ``x``'s buffer (its shape, dtype and batching) on an
    inner backend whose views alias (NumPy's), it is written into that buffer, as each example's
    ``x op= y`` writes NumPy's: views of ``x`` and the array ``x`` views see it (``z = y[:];
    z -= v`` changes ``y``), as ``x[key] = v`` does under vmap. Otherwise ``x`` is rebound."""

    def op(self: BatchedArray, other: Any) -> Any:
        new = getattr(self._mod, fname)(self, other)
        if new.batched and not self.batched:  # per-example values into a shared array: its
            self.promote(new.data.shape[0])  # batch first, with what it views and its views
        if new.batched == self.batched:
            self.store(new.data, new.batched)
        else:
            self.data, self.batched = new.data, new.batched
        return self

    return op


def _writable(data: Any) -> bool:
    """Whether ``data`` (an inner array) can be written in place: not a read-only NumPy view
    (a broadcast)."""
    flags = getattr(getattr(data, "_data", data), "flags", None)
    return flags is None or bool(flags.writeable)


def _numpy_root(a: Any) -> Any:
    """The NumPy array owning the memory of the inner array ``a`` (namespace(numpy)'s, tracked
    or not), or None for any other (whose views are not followed)."""
    import numpy as np

    d = getattr(a, "_data", None)
    if type(d) is not np.ndarray:
        return None
    while type(d.base) is np.ndarray:
        d = d.base
    return d


install_backend_operators(BatchedArray, lambda self, f: getattr(self._mod, f), _inplace)


# -- the batched backend: one function per row ----------------------------------------------------


def _any_batched(args: tuple, kwargs: dict, T: Any) -> bool:
    for a in args:
        if type(a) is T:
            if a.batched:
                return True
        elif (type(a) is list or type(a) is tuple) and any(type(e) is T and e.batched for e in a):
            return True
    return any(type(v) is T and v.batched for v in kwargs.values())


def _plain(a: Any, T: Any) -> Any:
    """The inner value of an argument (BatchedArrays inside lists and tuples too)."""
    if type(a) is T:
        return a.data
    if type(a) is list or type(a) is tuple:
        return type(a)(_plain(e, T) for e in a)
    return a


def _dim(a: Any, T: Any) -> Any:
    if type(a) is T:
        return a.batched
    if type(a) is list or type(a) is tuple:
        return [_dim(e, T) for e in a]
    return False


def _wrapper(T: type) -> Callable[[Any, bool], Any]:
    def wrap(r: Any, batched: bool) -> Any:
        if isinstance(r, Array):
            return T(r, batched)
        if isinstance(r, tuple):
            items = [wrap(e, batched) for e in r]
            return type(r)(*items) if hasattr(r, "_fields") else tuple(items)
        if isinstance(r, list):
            return [wrap(e, batched) for e in r]
        return r

    return wrap


def _function(prim: Any, inner: ModuleType, T: type[BatchedArray]) -> Callable[..., Any]:
    name = prim.name
    inner_fn = getattr(getattr(inner, prim.scope) if prim.scope else inner, prim.short_name)
    wrap = _wrapper(T)
    sig = prim.signature

    def f(*args: Any, **kwargs: Any) -> Any:
        if not _any_batched(args, kwargs, T):
            plain_kw = {k: _plain(v, T) for k, v in kwargs.items()}
            r = inner_fn(*[_plain(a, T) for a in args], **plain_kw)
            if args and type(args[0]) is T and isinstance(r, Array):  # a view of it? (reshape,
                return args[0].viewed(r, lambda: f(*args, **kwargs))  # permute_dims, ...)
            return wrap(r, False)
        rule = prim.batch
        if rule is None:
            raise UnbatchableError(
                f"vmap: {name}() cannot be batched: "
                f"{prim.unbatchable or 'it has no batching rule'}; call it outside vmap"
            )
        if sig is not None and kwargs:  # arguments given by name go to their positions
            bound = sig.bind(*args, **kwargs)
            args, kwargs = bound.args, bound.kwargs
        dims = tuple(_dim(a, T) for a in args)
        return wrap(rule(inner, dims, *[_plain(a, T) for a in args], **kwargs), True)

    f.__name__ = f.__qualname__ = prim.short_name
    return f


def _method(prim: Any, inner: ModuleType, T: type) -> Callable[..., Any]:
    """``__getitem__``/``__setitem__``: the rule gets the BatchedArrays (keys hold them)."""

    def f(x: Any, key: Any, *value: Any) -> Any:
        return prim.batch(inner, T, x, key, *value)

    f.__name__ = f.__qualname__ = prim.short_name
    return f


def _lift_into(T: type) -> Callable[[Any], Any]:
    def lift(a: Any) -> Any:
        return T(a, False)

    return lift


_CACHE: dict[str, ModuleType] = {}
_LOCK = threading.RLock()


def batched_namespace(inner: ModuleType) -> ModuleType:
    """The differentiable namespace of vmap's level above ``inner`` (one of our namespaces)."""
    key = inner.__name__
    ns = _CACHE.get(key)
    if ns is not None:
        return ns
    with _LOCK:
        if key in _CACHE:
            return _CACHE[key]
        level = inner._backend.level + 1
        name = f"vmap_{level}_{inner._backend.name}"
        mod = ModuleType(name, f"vmap's batched arrays over {inner.__name__}.")
        T = type("BatchedArray", (BatchedArray,), {"__slots__": (), "_mod": mod})
        namespace_module(
            mod, lambda prim: _function(prim, inner, T), lambda prim: _method(prim, inner, T)
        )
        for n in (*DTYPE_NAMES, *CONSTANTS):
            setattr(mod, n, getattr(inner, n))
        mod.__dict__.update(
            __array_api_version__="2025.12",
            __array_namespace_info__=inner.__array_namespace_info__,
            Array=T,
            _level=level,
            _lift=_lift_into(T),
            _inner=inner,
        )
        ns = _CACHE[key] = namespace(mod)
        return ns


def _adapt(b: Any) -> Any:
    inner = b.xp._inner._backend
    return dataclasses.replace(
        b,
        level=b.xp._level,
        lift=b.xp._lift,
        mutable=True,
        views_alias=False,  # a write rebinds the batched array written, never its base
        ordered_writes=inner.ordered_writes,
        numpy_functions=inner.numpy_functions,  # np.exp(x) of a batched x: the rows
    )


register_adapter("vmap", _adapt)


# -- vmap ------------------------------------------------------------------------------------------


def _prefix(axes: Any, tree: Any, where: str) -> list:
    """``axes`` (an int, None, or a pytree prefix of ``tree`` of them) as one entry per leaf of
    ``tree`` (JAX's rule: a leaf of ``axes`` applies to the whole subtree under it)."""
    if axes is None or (isinstance(axes, int) and not isinstance(axes, bool)):
        return [axes] * len(tree_flatten(tree)[0])
    pa, pt = _tree_children(axes), _tree_children(tree)
    if pa is None:
        raise TypeError(f"{where}: axes must be ints, None, or pytrees of them, got {axes!r}")
    if (
        pt is None
        or pa[0] != pt[0]
        or len(pa[2]) != len(pt[2])
        or (pa[0] == "dict" and list(pa[1]) != list(pt[1]))
    ):
        raise ValueError(
            f"{where}: axes {axes!r} do not match the structure of the arguments "
            "or results they describe"
        )
    return [e for a, t in zip(pa[2], pt[2], strict=True) for e in _prefix(a, t, where)]


def _level_of(a: Any) -> int:
    return a._backend.level if isinstance(a, Array) else -1


def vmap(f: Callable[..., Any], in_axes: Any = 0, out_axes: Any = 0) -> Callable[..., Any]:
    """``f`` mapped over an axis of its arguments, without a loop: JAX's ``vmap``.

    ``f`` runs once on the whole batch, each op through its row's batching rule; an op that
    cannot batch (``nonzero``, ``unique_*``) raises naming itself. Arguments and results may be
    pytrees. Composes with grad, jvp and itself in any order.

    Parameters
    ----------
    f : callable
        The function of one example, called with positional arguments only.
    in_axes : int, None, or tuple/pytree of them, default 0
        For each positional argument, the axis of its arrays that is the batch: an int, None
        for an argument passed unbatched to every example, or a pytree prefix of the argument
        of them; an int or None applies to all.
    out_axes : int, None, or pytree of them, default 0
        Where the batch goes in each output leaf (likewise; None only for outputs that do not
        depend on the batch).

    Returns
    -------
    callable
        The batched function, of ``f``'s positional arguments with their batch axes.

    Raises
    ------
    ValueError
        At the call: ``in_axes`` does not match the arguments, an axis is out of range, or the
        batched arguments disagree on the batch size.
    TypeError
        At the call: a batched argument is not an array of a pycograd_xp namespace.

    Examples
    --------
    Per-example gradients:

    >>> import numpy, pycograd_xp as pg
    >>> xp = pg.namespace(numpy)
    >>> def loss(w, x):
    ...     return xp.sum(w * x) ** 2
    >>> w, X = xp.ones(3), xp.reshape(xp.arange(6.0), (2, 3))
    >>> pg.unwrap(pg.vmap(pg.grad(loss), in_axes=(None, 0))(w, X))
    array([[  0.,   6.,  12.],
           [ 72.,  96., 120.]])
    """

    @functools.wraps(f)
    def wrapped(*args: Any) -> Any:
        where = f"vmap({getattr(f, '__name__', 'f')})"
        axes_arg = in_axes
        if isinstance(in_axes, list):
            axes_arg = tuple(in_axes)
        if isinstance(axes_arg, tuple) and len(axes_arg) != len(args):
            raise ValueError(
                f"{where}: in_axes has {len(axes_arg)} entries but the function "
                f"was called with {len(args)} positional arguments"
            )
        axes = _prefix(axes_arg, args, where)
        leaves, td = tree_flatten(args)
        size, base = None, STACK.batch
        for lf, ax in zip(leaves, axes, strict=True):
            if ax is None:
                continue
            if not isinstance(lf, Array):
                raise TypeError(
                    f"{where}: a batched argument is a {type(lf).__name__}, not an "
                    "array of a pycograd_xp namespace (use xp.asarray)"
                )
            if not -lf.ndim <= ax < max(lf.ndim, 1) or lf.ndim == 0:
                raise ValueError(
                    f"{where}: in_axes {ax} is out of range for an argument of shape {lf.shape}"
                )
            n = lf.shape[ax]
            if size is not None and n != size:
                raise ValueError(
                    f"{where}: batched arguments have different sizes along "
                    f"their in_axes ({size} and {n})"
                )
            size = n
            if base is None or _level_of(lf) > base._backend.level:
                base = lf._ns
        if size is None or base is None:
            raise ValueError(f"{where}: no argument is batched (in_axes are all None)")
        bns = batched_namespace(base)
        T = bns._backend.array_type
        new = []
        for lf, ax in zip(leaves, axes, strict=True):
            if ax is not None:
                d = lf if ax in (0, -lf.ndim) else lf._ns.moveaxis(lf, ax, 0)
                lf = make(bns.Array, T(d, True))
            elif isinstance(lf, Array) and _level_of(lf) <= base._backend.level:  # shared: a
                # write that makes it batched rebinds this wrapper (every example's), never
                # the caller's array
                lf = make(bns.Array, T(lf, False))
            new.append(lf)
        with interpreting(Vmap(bns)):
            out = f(*tree_unflatten(td, new))
        o_leaves, o_td = tree_flatten(out)
        o_axes = _prefix(tuple(out_axes) if isinstance(out_axes, list) else out_axes, out, where)
        return tree_unflatten(
            o_td,
            [_unbatch(o, ax, bns, T, size, where) for o, ax in zip(o_leaves, o_axes, strict=True)],
        )

    return wrapped


def _unbatch(o: Any, ax: Any, bns: ModuleType, T: type, size: int, where: str) -> Any:
    if isinstance(o, Array) and o._ns is bns:
        data, batched = o._data.data, o._data.batched
    elif isinstance(o, Array):
        data, batched = o, False
    else:
        raise TypeError(
            f"{where}: the function returned a {type(o).__name__}; it must return "
            "arrays of a pycograd_xp namespace"
        )
    if ax is None:
        if batched:
            raise ValueError(
                f"{where}: out_axes=None for an output that depends on the batch; give it an axis"
            )
        return data
    ns = data._ns
    if not batched:
        data = ns.broadcast_to(data, (size, *data.shape))
    return data if ax in (0, -data.ndim) else ns.moveaxis(data, 0, ax)
