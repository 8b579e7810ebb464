"""Writes into arrays: NumPy's aliasing kept when a write has to copy (a view and its base see
each other's new values), and the error for a traced function writing into what it closes over."""

from __future__ import annotations

import math
import weakref
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._array import Array


class ViewBy:
    """The key of a view made by a function of its base rather than by indexing
    (``permute_dims``, ``matrix_transpose``, ``expand_dims``, ``squeeze``, ``moveaxis``,
    ``flip``: NumPy's views, each showing every element of its base once): :func:`read` makes
    it again from the base, :func:`write` puts values back into the base, in the order the same
    function gives the base's element positions."""

    __slots__ = ("fn", "args", "kwargs")

    def __init__(self, fn: Any, args: tuple, kwargs: dict) -> None:
        self.fn, self.args, self.kwargs = fn, args, kwargs

    def __call__(self, base: Array) -> Array:
        return self.fn(base, *self.args, **self.kwargs)


def read(base: Array, key: Any) -> Array:
    """``base[key]``, or the view ``key`` makes of ``base`` (a :class:`ViewBy`)."""
    return key(base) if type(key) is ViewBy else base[key]


def write(base: Array, key: Any, value: Any) -> None:
    """``base[key] = value``, or ``value`` into the elements of ``base`` that the view ``key``
    shows (a :class:`ViewBy`, whose function shows each element of the base once: ``value``'s
    elements put back in the base's order, by standard functions only)."""
    if type(key) is not ViewBy:
        base[key] = value
        return
    ns = base._ns
    shape = tuple(base.shape)
    n = math.prod(shape)
    # where each element of the view sits in the base (a permutation of the base's positions)
    at = ns.reshape(key(ns.reshape(ns.arange(n, dtype=ns.int64), shape)), (n,))
    base[...] = ns.reshape(ns.take(ns.reshape(value, (n,)), ns.argsort(at)), shape)


def note_view(view: Array, base: Array, key: Any) -> None:
    """Remember that ``view`` is ``base[key]`` (basic indexing: NumPy shares the memory), or
    the view a :class:`ViewBy` ``key`` makes of ``base``. The view holds its base (as a NumPy
    view holds its base array), so a view of a view made on the fly (``y[1:][::2]``) still
    reaches ``y`` when a write into it has to copy; the base holds its views weakly."""
    view._view = (base, key, base._backend.buffer(base._data))
    views = getattr(base, "_views", None)
    if views is None:
        base._views = [weakref.ref(view)]
    else:
        if len(views) >= 8:  # drop the views that are gone
            views[:] = [r for r in views if r() is not None]
        views.append(weakref.ref(view))


def rebind(a: Array, data: Any, node: Any) -> None:
    """Make ``a`` hold a new value that was computed into a new buffer (a write that had to
    copy because a tape can see it), keeping NumPy's aliasing: the array ``a`` is a view of
    gets the new values written into it (functionally, so the tape sees that too), and views
    of ``a`` become views of the new value. Without this, ``v = c[0]; v[0] = 1`` would leave
    ``c`` unchanged while recording, and differently from NumPy (and from no_grad) silently.
    """
    old = a._backend.buffer(a._data)
    a._data, a._node = data, node
    _to_base(a)
    _refresh_views(a, old)


def rebind_level(a: Array, new: Array) -> None:
    """Make ``a``, an array of a lower vmap level, hold ``new``, of a higher one (values that
    differ per example written into it), keeping NumPy's aliasing across the levels as
    :func:`rebind` keeps it within one: the array ``a`` is a view of gets the new values
    written into it, which brings it (and its other views) to the higher level, and ``a``
    becomes its view there; the views of ``a`` become views of ``a``'s new value. Without
    this, ``out = xp.zeros(...); out[0][:] = x`` inside vmap left ``out`` unchanged."""
    old = a._backend.buffer(a._data)
    _become(a, new)
    _to_base(a)
    _refresh_views(a, old)


def _become(a: Array, new: Array) -> None:
    a.__class__ = type(new)
    a._data, a._node = new._data, new._node


def _to_base(a: Array) -> None:
    """The new value of ``a`` (a view) written into the array it views, and ``a`` made its
    view of that again; ``a`` stands alone where that array holds other memory now."""
    link = getattr(a, "_view", None)
    if link is None:
        return
    base, key, base_buffer = link
    if base._backend.buffer(base._data) is not base_buffer:
        a._view = None  # the base holds other memory now: ``a`` stands alone
        return
    write(base, key, a)  # the base gets the new values (and refreshes its other views)
    _become(a, read(base, key))  # ``a`` a view of the base's new value again
    a._view = (base, key, base._backend.buffer(base._data))


def _refresh_views(a: Array, old: Any) -> None:
    """The views of ``a`` over its ``old`` buffer made views of its new value (and theirs of
    theirs), at its level."""
    for ref in getattr(a, "_views", None) or ():
        v = ref()
        link = getattr(v, "_view", None) if v is not None else None
        if v is None or v is a or link is None or v._backend.buffer(v._data) is not old:
            continue
        key = link[1]
        _become(v, read(a, key))
        v._view = (a, key, a._backend.buffer(a._data))
        _refresh_views(v, old)


def closed_write_error(what: str, x: Array) -> TypeError:
    """The error for a traced function that writes into an array it closes over."""
    return TypeError(
        f"{what}: the function writes into an array it closes over (shape {x.shape}, dtype "
        f"{x.dtype}); compile and memory.project trace it without running it, so the write "
        "would happen once or never instead of at each call. Pass the array as an argument "
        "(a compiled function may write into its arguments), or return the new value"
    )
