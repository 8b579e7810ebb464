"""The interpreter stack: what the running transforms must know, in one place.

Every transform that is running in this thread has one frame on :data:`STACK`, innermost last,
as JAX keeps its stack of traces: ``grad`` inside ``vmap`` inside ``jvp`` is the stack
``(Jvp, Vmap, Grad)``. A transform enters with ``with interpreting(frame):`` and leaves when the
block ends, whatever happens in it. The frames are the only per-thread state of the
transforms; another thread has its own stack (two threads may differentiate at once).

The frames (one class per kind of interpreter):

* :class:`GradMode`: ``no_grad``/``enable_grad``, and the backward pass itself (which records
  only when a higher-order gradient is asked for): whether calls record tape nodes.
* :class:`Grad`: a running ``grad``/``vjp`` (a nested one records its backward).
* :class:`Jvp`: a running ``jvp``: the tangents of the nodes recorded inside it, and the
  function that computes the tangent of each new node.
* :class:`Vmap`: a running ``vmap``: its batched namespace (a transform started inside it
  tracks its inputs at that level, so that its derivative is batched too).
* :class:`Abstract`: ``pycograd_xp.memory`` projecting: the abstract namespace that creation
  calls of every namespace go to (``xp.zeros(shape)`` inside the function must not allocate),
  and the tracker adding up the abstract arrays' bytes.
* :class:`Trace`: ``pycograd_xp.compile`` tracing: the abstract namespace, the recorder every
  call of it goes through, and (on an eager backend) the namespace whose calls move to the
  recording (a computation on an array the function closes over is recorded, not snapshotted).
* :class:`CustomRule`: a ``custom_vjp``/``custom_jvp`` function's own rule running (calling the
  function inside its rule runs the plain function).
* :class:`OnBackward`: a callback called as each backward pass of ``grad``/``vjp`` begins (the
  memory projection and the planners tell the forward pass from the backward pass so).
* :class:`DebugNans`: ``debug_nans``, the ops on the tape and the VJP rules check their results
  for NaN.
* :class:`Remat`: a memory schedule running (``pycograd_xp._schedule``): it sees each node.
* :class:`Part`: the part of the user's program running (a loss, a rule, a row), kept only
  for a backend that labels its work by it (``pycograd_xp._parts``).

What the hot path reads is derived from the frames on every push and pop, and kept as plain
attributes of :data:`STACK` (one attribute read per question, as cheap as a flag): see
:class:`_Stack`. Only this module writes them.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any, TypeVar, cast


class Frame:
    """One running transform (an interpreter on the stack)."""

    __slots__ = ()
    kind = "frame"

    def __repr__(self) -> str:
        return self.kind


class GradMode(Frame):
    """Whether calls record tape nodes: ``no_grad`` (False), ``enable_grad`` (True), the
    backward pass (``create_graph``)."""

    __slots__ = ("enabled",)
    kind = "grad_mode"

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __repr__(self) -> str:
        return "enable_grad" if self.enabled else "no_grad"


class Grad(Frame):
    """A running ``grad``/``value_and_grad``/``vjp`` (its forward pass or its backward pass)."""

    __slots__ = ()
    kind = "grad"


class Jvp(Frame):
    """A running ``jvp``: ``context`` holds the tangents; ``propagate(context, node, out, args,
    kwargs)``, called (by ``hook``, ``_forward.each_jvp``, which the tape calls on every node
    recorded while a jvp runs) computes the output's tangent."""

    __slots__ = ("context", "propagate", "hook", "outside")
    kind = "jvp"

    def __init__(
        self,
        context: Any,
        propagate: Callable[[Any, Any, Any, tuple, dict], None],
        hook: Callable[[Any, Any, tuple, dict], None],
    ) -> None:
        self.context, self.propagate, self.hook = context, propagate, hook
        # (a stack, the view of it without this jvp and the ones inside it): see each_jvp
        self.outside: tuple = ((), ())


class Vmap(Frame):
    """A running ``vmap``: ``ns`` is its batched namespace."""

    __slots__ = ("ns",)
    kind = "vmap"

    def __init__(self, ns: ModuleType) -> None:
        self.ns = ns

    def __repr__(self) -> str:
        return f"vmap(level {self.ns._backend.level})"


class Abstract(Frame):
    """``pycograd_xp.memory`` projecting: creation calls of every namespace go to the abstract
    namespace ``ns`` (None: they do not move), and ``tracker`` adds up the bytes."""

    __slots__ = ("ns", "tracker")
    kind = "abstract"

    def __init__(self, ns: ModuleType | None, tracker: Any = None) -> None:
        self.ns, self.tracker = ns, tracker


class Trace(Frame):
    """``pycograd_xp.compile`` tracing: calls of the abstract namespace ``ns`` are recorded by
    ``recorder``; calls of the concrete namespace ``closed`` (None on a lazy backend) move to
    ``ns`` (see ``namespace._dispatch``)."""

    __slots__ = ("ns", "recorder", "closed")
    kind = "trace"

    def __init__(self, ns: ModuleType, recorder: Any, closed: ModuleType | None) -> None:
        self.ns, self.recorder, self.closed = ns, recorder, closed


class CustomRule(Frame):
    """The rule (fwd, bwd, the jvp rule) of the custom function ``fn`` is running."""

    __slots__ = ("fn",)
    kind = "custom_rule"

    def __init__(self, fn: Any) -> None:
        self.fn = fn


class OnBackward(Frame):
    """``callback()`` is called as each backward pass of ``grad``/``vjp`` begins, ``after()``
    (when given) as it ends."""

    __slots__ = ("callback", "after")
    kind = "on_backward"

    def __init__(
        self, callback: Callable[[], None], after: Callable[[], None] | None = None
    ) -> None:
        self.callback, self.after = callback, after


class DebugNans(Frame):
    """``debug_nans``: every op recorded on the tape, and every VJP rule, checks its results for
    NaN made from inputs without one, and raises naming the op (JAX's ``jax_debug_nans``)."""

    __slots__ = ("enabled",)
    kind = "debug_nans"

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled


class Remat(Frame):
    """A memory schedule running: the tape calls ``plan.hook`` on each node it records."""

    __slots__ = ("plan",)
    kind = "remat"

    def __init__(self, plan: Any) -> None:
        self.plan = plan


class Part(Frame):
    """Which part of the user's program is running (``part`` ``"loss"``, ``"backward"``,
    ``"rule"`` or ``"row"``, and its ``name``), pushed only for a backend that labels the work it
    plans by it (:mod:`pycograd_xp._parts`). No view of the stack depends on it."""

    __slots__ = ("part", "name")
    kind = "part"

    def __init__(self, part: str, name: str) -> None:
        self.part, self.name = part, name

    def __repr__(self) -> str:
        return f"{self.part}({self.name})" if self.name else self.part


class _Stack(threading.local):
    """The frames of this thread, and what the hot path reads, derived from them.

    * ``grad_enabled``: the innermost :class:`GradMode`'s (True without one);
    * ``grad_depth``: how many :class:`Grad` frames there are;
    * ``jvp``: the :class:`Jvp` frames, outermost first; ``jvp_hook``: what the tape calls on
      each node it records: a :class:`Remat`'s hook, then the jvps' (``_forward.each_jvp``);
    * ``batch``: the innermost :class:`Vmap`'s namespace (None: outside any vmap);
    * ``redirect``: the abstract namespace of the innermost :class:`Abstract` or :class:`Trace`
      frame that has one (where creation calls go); ``tracker``: that frame's tracker (a
      :class:`Trace` has none);
    * ``closed``, ``recorder``: the innermost :class:`Trace`'s; ``tracing``: how many;
    * ``custom``: the custom functions whose rule is running;
    * ``before_backward``, ``after_backward``: the innermost :class:`OnBackward`'s callbacks;
    * ``unwritable``: the ids of buffers a write must copy, not write in place, even under
      ``no_grad`` (:func:`unwritable`); not a frame's, set by the block that needs it.
    """

    frames: tuple[Frame, ...] = ()
    grad_enabled: bool = True
    grad_depth: int = 0
    jvp: tuple[Jvp, ...] = ()
    jvp_hook: Callable[[Any, Any, tuple, dict], None] | None = None
    batch: ModuleType | None = None
    redirect: ModuleType | None = None
    tracker: Any = None
    closed: ModuleType | None = None
    recorder: Any = None
    tracing: int = 0
    custom: frozenset = frozenset()
    before_backward: Callable[[], None] | None = None
    after_backward: Callable[[], None] | None = None
    debug_nans: bool = False
    unwritable: frozenset = frozenset()


STACK = _Stack()


def _derive(frames: tuple[Frame, ...]) -> dict[str, Any]:
    view: dict[str, Any] = dict.fromkeys(
        (
            "jvp_hook",
            "batch",
            "redirect",
            "tracker",
            "closed",
            "recorder",
            "before_backward",
            "after_backward",
        )
    )
    view.update(frames=frames, grad_enabled=True, grad_depth=0, tracing=0, debug_nans=False)
    jvps: list[Jvp] = []
    custom: set[int] = set()
    remat: Remat | None = None
    for f in frames:
        if type(f) is GradMode:
            view["grad_enabled"] = f.enabled
        elif type(f) is Grad:
            view["grad_depth"] += 1
        elif type(f) is Jvp:
            jvps.append(f)
        elif type(f) is Vmap:
            view["batch"] = f.ns
        elif type(f) is Abstract:
            if f.ns is not None:
                view["redirect"] = f.ns
            view["tracker"] = f.tracker
        elif type(f) is Trace:
            view.update(redirect=f.ns, tracker=None, closed=f.closed, recorder=f.recorder)
            view["tracing"] += 1
        elif type(f) is CustomRule:
            custom.add(id(f.fn))
        elif type(f) is OnBackward:
            view["before_backward"] = f.callback
            view["after_backward"] = f.after
        elif type(f) is DebugNans:
            view["debug_nans"] = f.enabled
        elif type(f) is Remat:
            remat = f
    view["jvp"] = tuple(jvps)
    view["jvp_hook"] = jvps[0].hook if jvps else None
    if remat is not None:  # the schedule's hook first, then the jvps'
        remat.plan.then, view["jvp_hook"] = view["jvp_hook"], remat.plan.hook
    view["custom"] = frozenset(custom)
    return view


def _set(frames: tuple[Frame, ...]) -> None:
    STACK.__dict__.update(_derive(frames))


_COUNTED = frozenset((GradMode, Grad, Part))  # the frames a push derives nothing for


# The views a push replaced, by the id of their stack (each holds its stack, so the id stays
# its own): restoring that stack takes its view back instead of deriving it again. Bounded:
# a stack set with ``_set`` and never restored leaves its entry, cleared at the bound.
_SAVED_VIEWS = 64


def push(*frames: Frame) -> tuple[Frame, ...]:
    """Push ``frames`` (innermost last); returns the stack as it was, for :func:`restore`.

    The hot path of every ``grad`` call (a ``Grad`` and ``GradMode`` frames on the way in, the
    stack as it was on the way out): the view being replaced is kept for :func:`restore`, and
    pushing only ``GradMode``, ``Grad`` and ``Part`` frames changes just the two fields the first
    two decide."""
    d = STACK.__dict__
    prev: tuple[Frame, ...] = STACK.frames
    if d:  # (a thread's first push has no view to keep: its stack is the class's defaults)
        saved = d.setdefault("saved", {})
        if len(saved) >= _SAVED_VIEWS:
            saved.clear()
        saved[id(prev)] = dict(d)
    if d and _COUNTED.issuperset(map(type, frames)):
        for f in frames:  # (a Part changes no field)
            if type(f) is GradMode:
                d["grad_enabled"] = f.enabled
            elif type(f) is Grad:
                d["grad_depth"] += 1
        d["frames"] = prev + frames
    else:
        _set(prev + frames)
    return prev


def restore(frames: tuple[Frame, ...]) -> None:
    """Set the stack back to ``frames`` (what :func:`push` returned)."""
    d = STACK.__dict__
    view = d.get("saved", {}).pop(id(frames), None)
    if view is not None and view["frames"] is frames:
        d.update(view)
    else:
        _set(frames)


@contextlib.contextmanager
def interpreting(*frames: Frame) -> Iterator[None]:
    """Push ``frames`` (innermost last) for the block; the stack as it was after it."""
    prev = push(*frames)
    try:
        yield
    finally:
        restore(prev)


@contextlib.contextmanager
def unwritable(buffers: Any) -> Iterator[None]:
    """For the block, writes into ``buffers`` (arrays owning their memory) copy them first and
    rebind the array written, under ``no_grad`` too: ``remat``'s forward pass runs its segment
    untaped on the arguments' buffers, which the recompute reads and the caller still holds."""
    prev = STACK.unwritable
    STACK.unwritable = prev | {id(b) for b in buffers}
    try:
        yield
    finally:
        STACK.unwritable = prev


_F = TypeVar("_F", bound=Callable[..., Any])


class Block:
    """A context manager that runs its block with one frame pushed (:meth:`_frame`), also a
    decorator (``no_grad``, ``enable_grad``, ``debug_nans``). A fresh frame per entry, so the
    same object may be entered again inside itself."""

    def _frame(self) -> Frame:
        raise NotImplementedError

    def __enter__(self) -> None:
        self._prev = push(self._frame())

    def __exit__(self, *exc: Any) -> None:
        restore(self._prev)

    def __call__(self, f: _F) -> _F:
        """``f`` run inside this block at each call (the decorator form).

        Parameters
        ----------
        f : callable
            The function to wrap.

        Returns
        -------
        callable
            ``f``, each call run inside the block.
        """

        @functools.wraps(f)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            prev = push(self._frame())
            try:
                return f(*args, **kwargs)
            finally:
                restore(prev)

        return cast(_F, wrapped)  # functools.wraps keeps f's signature


def describe() -> str:
    """The running transforms, outermost first (``"jvp > vmap(level 1) > grad"``; the
    :class:`Part` frames, which are no transform, left out)."""
    return " > ".join([repr(f) for f in STACK.frames if type(f) is not Part]) or "none"
