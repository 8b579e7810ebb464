"""Writes into arrays: NumPy's aliasing kept when a write has to copy (a view and its base see
each other's new values), and the error for a traced function writing into what it closes over."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._array import Array


def note_view(view: Array, base: Array, key: Any) -> None:
    """Remember that ``view`` is ``base[key]`` (basic indexing: NumPy shares the memory)."""
    view._view = (weakref.ref(base), key, base._backend.buffer(base._data))
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
    buffer = a._backend.buffer
    old = buffer(a._data)
    a._data, a._node = data, node
    view = getattr(a, "_view", None)
    if view is not None:
        base_ref, key, base_buffer = view
        base = base_ref()
        if base is not None and buffer(base._data) is base_buffer:
            base[key] = a  # the base gets the new values (and refreshes its other views)
            fresh = base[key]  # ``a`` becomes a view of the base's new value again
            a._data, a._node = fresh._data, fresh._node
            a._view = (base_ref, key, buffer(base._data))
        else:
            a._view = None  # the base is gone or holds other memory now: ``a`` stands alone
    for ref in getattr(a, "_views", None) or ():
        v = ref()
        if (
            v is not None
            and v is not a
            and getattr(v, "_view", None) is not None
            and buffer(v._data) is old
        ):
            _, key, _ = v._view
            fresh = a[key]
            v._data, v._node = fresh._data, fresh._node
            v._view = (weakref.ref(a), key, buffer(a._data))


def closed_write_error(what: str, x: Array) -> TypeError:
    """The error for a traced function that writes into an array it closes over."""
    return TypeError(
        f"{what}: the function writes into an array it closes over (shape {x.shape}, dtype "
        f"{x.dtype}); compile and memory.project trace it without running it, so the write "
        "would happen once or never instead of at each call. Pass the array as an argument "
        "(a compiled function may write into its arguments), or return the new value"
    )
