"""Buffers: what the tape saved, and what was written in place since (PyTorch's version
counters, keyed by the buffer that owns the memory, so views are covered).

A write into a buffer the tape saved for a backward pass (``x[idx] = v`` on an array no
gradient flows through) copies it first (:func:`is_saved`); a write the tape could not prevent
(under ``no_grad``) is noted (:func:`note_write`), and the backward pass refuses a rule that
would read the new value (:func:`check_unchanged`).
"""

from __future__ import annotations

import functools
import itertools
import weakref
from typing import Any

__all__ = ["SEQ", "check_unchanged", "is_saved", "mark_saved", "note_write", "written_since"]

# The tape's sequence: each node takes the next number when recorded, each in-place write when
# noted, so "written after it was saved" is a comparison of two numbers.
SEQ = itertools.count()

# Buffers of arrays no gradient flows through that the tape saved for a backward pass. Writing
# into one while recording (x[idx] = v on an untracked array) would change a saved value, so
# setitem copies such a buffer first. Keyed by the buffer that owns the memory: views are covered.
# id(buffer) -> a weak reference to it whose callback drops the entry (a WeakValueDictionary's
# Python-level bookkeeping cost more than the rest of recording a node that saves its input).
_SAVED_BUFFERS: dict[int, Any] = {}
# id(buffer) -> (weak reference to it, sequence number of its last in-place write).
_WRITES: dict[int, tuple[Any, int]] = {}
# The sequence number of the latest in-place write noted: a node recorded after it cannot have
# a residual written since (an optimizer's in-place update before the next step's forward).
LAST_WRITE = [-1]


def mark_saved(backend: Any, d: Any) -> None:
    b = backend.buffer(d)
    key = id(b)
    old = _SAVED_BUFFERS.get(key)
    if old is not None and old() is b:  # (marked already: its reference stands)
        return
    try:
        _SAVED_BUFFERS[key] = weakref.ref(b, functools.partial(_forget_saved, key))
    except TypeError:  # not weak-referenceable: nothing to protect it with
        pass


def _forget_saved(key: int, _: Any) -> None:
    """The buffer of ``_SAVED_BUFFERS[key]`` is gone (its reference's callback)."""
    ref = _SAVED_BUFFERS.get(key)
    if ref is not None and ref() is None:
        del _SAVED_BUFFERS[key]


def is_saved(backend: Any, d: Any) -> bool:
    b = backend.buffer(d)
    ref = _SAVED_BUFFERS.get(id(b))
    return ref is not None and ref() is b


def note_write(backend: Any, d: Any) -> None:
    """Record that ``d``'s memory was just written in place (its version moves on)."""
    b = backend.buffer(d)
    key = id(b)

    def forget(_: Any) -> None:
        _WRITES.pop(key, None)

    try:
        ref = weakref.ref(b, forget)
    except TypeError:  # not weak-referenceable: cannot be told apart from a later buffer
        return
    seq = LAST_WRITE[0] = next(SEQ)
    _WRITES[key] = (ref, seq)


def written_since(backend: Any, d: Any, seq: int) -> bool:
    b = backend.buffer(d)
    entry = _WRITES.get(id(b))
    return entry is not None and entry[0]() is b and entry[1] > seq


def check_unchanged(node: Any) -> None:
    """Refuse to run ``node``'s rule on a residual written in place after it was saved."""
    backend = node.ns._backend
    array_type = backend.array_type
    found = None
    for i, a in enumerate(node.args):
        for e in a if type(a) is list or type(a) is tuple else (a,):
            if isinstance(e, array_type) and written_since(backend, e, node.seq):
                found = node.prim.arg_names[min(i, len(node.prim.arg_names) - 1)]
    for k, v in node.kwargs.items():
        if isinstance(v, array_type) and written_since(backend, v, node.seq):
            found = k
    outs = node.out if isinstance(node.out, list) else [node.out]
    if any(isinstance(o, array_type) and written_since(backend, o, node.seq) for o in outs):
        found = "its output"
    if found is not None:
        raise RuntimeError(
            f"backward through {node.name}: {found!r}, which {node.name} saved for the backward "
            "pass, was modified in place afterwards (e.g. under no_grad()), so the gradient would "
            "use the new value. Modify a copy instead (xp.asarray(x, copy=True)), or run the "
            "in-place update after backward"
        )
