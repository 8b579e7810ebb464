"""The one choke point: where a call goes when its namespace does not evaluate it itself.

Every public function of a namespace is a wrapper around its row, made by one of the eager
interpreter's families (``_eager``): it evaluates the call on its backend
and, when an argument is being differentiated, records a tape node (``_record.record``), which
the running ``jvp`` frames then process. Every other case leaves the wrapper through
:func:`bind`, which asks the interpreter stack (``_state.STACK``) and the arguments which
interpreter takes the call, as JAX's ``bind`` finds the top trace:

1. **An argument of a namespace above this one** (``above``): an abstract array (memory
   projection, compile's tracing) or a batched array of a running ``vmap``. The call moves to
   that namespace, whose wrapper evaluates it there: abstract arrays through the rows' shape
   rules (and compile's recorder), batched arrays through the rows' batching rules. Unwrapping
   an argument finds it (it raises :class:`HandOver`).
2. **compile is tracing this namespace** (a :class:`~pycograd_xp._state.Trace` frame whose
   ``closed`` is it, on an eager backend): the call is recorded on the abstract namespace, and
   its concrete arrays, which the traced function closes over, become constants the replay
   reads afresh (a snapshot would be stale once the caller writes into the array).
3. **memory is projecting** (an :class:`~pycograd_xp._state.Abstract` frame): a creation call
   of a concrete namespace (``xp.zeros(shape)`` inside the projected function) makes abstract
   arrays instead of allocating.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any, cast

from .._primitive import Primitive
from .._state import STACK
from ._array import Array

# Rows that make arrays from Python values alone: while a function is projected, the ones of
# every namespace make abstract arrays instead (case 3 of :func:`bind`).
SHAPE_CREATORS = frozenset({"arange", "empty", "eye", "full", "linspace", "ones", "zeros"})


class HandOver(Exception):  # noqa: N818 - a signal, not an error
    """Raised while unwrapping the arguments of a call: one is an array of the namespace ``ns``
    above the caller's (case 1 of :func:`bind`)."""

    def __init__(self, ns: ModuleType) -> None:
        self.ns = ns


def bind(
    prim: Primitive, ns: ModuleType, args: tuple, kwargs: dict, above: ModuleType | None = None
) -> Any:
    """Call ``prim`` with ``args``/``kwargs``, given to ``ns``'s function for it, on the
    interpreter that takes it: the namespace ``above`` (an argument's, see :class:`HandOver`),
    else compile's recording of ``ns``, else memory's abstract namespace (a creation call)."""
    if above is not None:
        return function_of(above, prim)(*args, **kwargs)
    A = cast(ModuleType, STACK.redirect)  # set under every Trace and Abstract frame
    if STACK.closed is ns:
        return function_of(A, prim)(
            *_constants(A, args), **{k: _constants(A, v) for k, v in kwargs.items()}
        )
    return function_of(A, prim)(*args, **kwargs)


def _constants(A: ModuleType, a: Any) -> Any:
    """``a`` with each concrete array as a constant of the abstract namespace ``A``
    (``asarray`` of it, no copy: the replay reads the array's contents at each call)."""
    if isinstance(a, Array) and not a._backend.abstract:
        return A.asarray(a)
    if type(a) is tuple or type(a) is list:
        return type(a)(_constants(A, e) for e in a)
    return a


def function_of(ns: ModuleType, prim: Primitive) -> Callable[..., Any]:
    """``ns``'s function for the row ``prim`` (``x[key]`` for ``__getitem__``)."""
    if prim.name == "__getitem__":
        return cast(Callable[..., Any], ns._getitem)
    return cast(
        Callable[..., Any],
        getattr(getattr(ns, prim.scope) if prim.scope else ns, prim.short_name),
    )


def has_function(ns: ModuleType, prim: Primitive) -> bool:
    """Whether ``ns`` has a function for the row ``prim`` (a row of the table: not a custom
    function's nor a segment's), so that :func:`bind` can call it there."""
    try:
        function_of(ns, prim)
    except AttributeError:
        return False
    return True
