"""Every per-thread state of the transforms, in one place.

Each transform keeps what it must know while it runs in a ``threading.local`` here: another
thread sees its own values (two threads may differentiate at once). A transform sets a field on
entry and restores it on exit (``prev, X.field = X.field, new ... finally: X.field = prev``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any


class _GradMode(threading.local):
    # Whether the namespaces record tape nodes (``no_grad``/``enable_grad`` switch it).
    enabled: bool = True


MODE = _GradMode()


class _Redirect(threading.local):
    # While pycograd_xp.memory projects a function: the abstract namespace that creation
    # functions of every other namespace hand their calls to (xp.zeros(shape) inside the
    # function must not allocate for real).
    ns: ModuleType | None = None
    # While ``compile`` traces a function on an eager backend: that backend's namespace, every
    # call of which moves to ``ns`` (see ``namespace._wrappers.closed_call``): a computation on an
    # array the function closes over is recorded, not snapshotted.
    closed: ModuleType | None = None


REDIRECT = _Redirect()


class _JvpHook(threading.local):
    # While pycograd_xp.jvp (the function) runs: ``hook(node, out, args, kwargs)``, called on
    # every node recorded, computes the output's tangent (forward mode); None: nothing.
    hook: Callable[[Any, Any, tuple, dict], None] | None = None


JVP = _JvpHook()


class _JvpContexts(threading.local):
    # The jvp calls running in this thread, innermost last (each carries its tangents).
    contexts: tuple = ()


JVP_CONTEXTS = _JvpContexts()


class _Batch(threading.local):
    # While pycograd_xp.vmap runs a function: the batched namespace of the innermost vmap; a
    # transform started inside it (grad, jvp) tracks its inputs at that level, so that its
    # derivative is batched too (per-example gradients). None: outside any vmap.
    ns: ModuleType | None = None


BATCH = _Batch()


class _Abstract(threading.local):
    # While pycograd_xp.memory projects: the tracker adding up the abstract arrays' bytes.
    tracker: Any = None
    # While pycograd_xp.compile traces: its recorder, which every call of the abstract backend
    # goes through (``call``, ``inplace``, ``opaque``), and which the shape rules tell when an
    # output's shape depends on data (``data_dependent``). None: not tracing.
    recorder: Any = None


CURRENT = _Abstract()


class _GradDepth(threading.local):
    # How many grad/vjp calls are running in this thread (a nested one records its backward).
    value: int = 0


GRAD_DEPTH = _GradDepth()


class _Hooks(threading.local):
    # Called by value_and_grad between the forward pass and the backward pass (the memory
    # projection marks the phase there); None: nothing.
    before_backward: Callable[[], None] | None = None


HOOKS = _Hooks()


class _Tracing(threading.local):
    # How many compile traces run in this thread (a compiled call inside one runs uncompiled).
    depth: int = 0


TRACING = _Tracing()


class _CustomActive(threading.local):
    # The custom functions whose rule (fwd, bwd, the jvp rule) is running: calling one inside
    # its own rule (JAX's fwd(x) = (f(x), ...)) runs the plain function, recorded as usual.
    ids: frozenset = frozenset()


CUSTOM_ACTIVE = _CustomActive()
