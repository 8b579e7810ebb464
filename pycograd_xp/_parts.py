"""Which part of the user's program is running, for backends that name the work they are given.

A lazy backend plans now and runs later, and when a task of its plan fails or overruns its
memory it can only name the op by its own counter (Cubed's ``op-042``). Its adapter can name
the op by the part of the program that built it ("``mul in mlp (backward of tanh)``") if the
engine says which part is running. The engine says it here, as a stack of ``(kind, name)``
pairs, innermost last (:class:`~pycograd_xp._state.Part` frames on the interpreter stack):

- ``("loss", name)``: ``grad``/``value_and_grad``/``vjp`` (and a ``vjp``'s pullback) of the
  function ``name``;
- ``("backward", "")``: the backward pass (the cotangents added up between rules);
- ``("rule", name)``: the VJP rule of the row ``name`` (the tape's node);
- ``("row", name)``: the forward call of the row ``name`` (the namespace's function).

The last two run through :func:`within`, which also hands the backend's ``labeller`` (a field of
:class:`~pycograd_xp.namespace.Backend`) a mark before the call and the arrays it made after it,
so the backend can name what it planned in between by the parts running. Nothing is kept until a
backend asks (:func:`watch`; ``cubed_plugin`` does when it builds its namespace): until then the
engine's only cost is one read of :data:`WATCHED` per ``grad`` call and per backward pass, and
namespaces of backends without a labeller make no call here at all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._state import STACK, Frame, Part, push, restore

__all__ = ["WATCHED", "current", "enter", "leave", "watch", "within"]

# [whether a backend asked]: a list, read by the engine's hot paths without a call
WATCHED = [False]


def watch() -> None:
    """Keep the parts from now on, in every thread (for the rest of the process)."""
    WATCHED[0] = True


def enter(kind: str, name: str) -> tuple[Frame, ...]:
    """Push the part ``(kind, name)`` (a :class:`~pycograd_xp._state.Part` frame on the
    interpreter stack); returns the stack as it was, for :func:`leave`."""
    return push(Part(kind, name))


def leave(prev: tuple[Frame, ...]) -> None:
    """Restore the stack :func:`enter` returned (in a ``finally``: an error leaves it too)."""
    restore(prev)


def current() -> tuple[tuple[str, str], ...]:
    """The parts running now in this thread, outermost first, as ``(kind, name)`` pairs."""
    return tuple([(f.part, f.name) for f in STACK.frames if type(f) is Part])


def within(
    labeller: Any,
    kind: str,
    name: str,
    run: Callable[[], Any],
    made: Callable[[Any], Any] | None = None,
) -> Any:
    """``run()`` inside the part ``(kind, name)``, the backend's ``labeller`` told of it:
    ``labeller.mark()`` before, ``labeller.label(mark, arrays)`` after, ``arrays`` being
    ``made(value)`` (default: ``run``'s value itself) -- the backend arrays the call made."""
    prev = enter(kind, name)
    try:
        mark = labeller.mark()
        value = run()
        labeller.label(mark, value if made is None else made(value))
        return value
    finally:
        leave(prev)
