"""Tracing over a lazy backend (Cubed): a recording namespace whose arrays are the real lazy
arrays behind a thin proxy.

``compile`` traces eager backends on the abstract backend (shapes and dtypes only). A lazy,
chunked backend decides more from its arrays than their shapes: chunks, the ``Spec`` every
constant must share, its own functional (non-mutating) writes. There the trace runs on the
backend itself: each array is a :class:`Proxy` of a real lazy array (building a lazy array
computes nothing), and every function of :func:`recording` calls the backend's own function on
the real arrays and reports the call to the recorder, exactly like the abstract backend's.
Reading a value (``bool()``, ``float()``) is refused, as on abstract arrays.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from types import ModuleType
from typing import Any

from .._host import HostScalar, NoValue
from .._primitive import CONSTANTS, DTYPE_NAMES, namespace_module
from .._state import STACK
from ..namespace._backend import _BY_XP, Backend
from ..namespace._operators import install_backend_operators
from ._ir import GETITEM, SETITEM, row_function


class Proxy(NoValue):
    """A real array of a lazy backend, seen by a trace (the replay uses the backend's own)."""

    __slots__ = ("real", "ns", "__weakref__")
    TRACED_BY = "pycograd_xp.compile"

    def __init__(self, real: Any, ns: ModuleType) -> None:
        self.real, self.ns = real, ns

    shape = property(lambda self: self.real.shape)
    dtype = property(lambda self: self.real.dtype)
    ndim = property(lambda self: self.real.ndim)
    size = property(lambda self: self.real.size)
    device = property(lambda self: self.real.device)
    chunks = property(lambda self: self.real.chunks)
    spec = property(lambda self: self.real.spec)

    @property
    def T(self) -> Proxy:
        return self.ns.permute_dims(self, tuple(reversed(range(self.ndim))))

    @property
    def mT(self) -> Proxy:
        return self.ns.matrix_transpose(self)

    def __array_namespace__(self, /, *, api_version: str | None = None) -> ModuleType:
        return self.ns

    def __repr__(self) -> str:
        return f"Proxy({self.real!r})"

    def __getitem__(self, key: Any) -> Any:
        return self.ns.__getitem__(self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        self.ns.__setitem__(self, key, value)

    def __array__(self, *args: Any, **kwargs: Any) -> Any:  # a real array behind: refuse
        return self._no_value("conversion to NumPy")


def _inplace(fname: str) -> Callable[..., Any]:
    def op(self: Proxy, other: Any) -> Any:  # immutable arrays: a new value, as the backend's
        return getattr(self.ns, fname)(self, other)

    return op


install_backend_operators(Proxy, lambda self, f: getattr(self.ns, f), _inplace)


def real(v: Any) -> Any:
    """``v`` as the lazy backend's own functions take it: each proxy replaced by its real
    array, each host scalar by its example (the number of this trace)."""
    t = type(v)
    if t is Proxy:
        return v.real
    if t is HostScalar:
        return v.example
    if t is tuple or t is list:
        return t(real(e) for e in v)
    if t is dict:
        return {k: real(e) for k, e in v.items()}
    return v


def _function(prim: Any, target: Backend, mod: ModuleType) -> Callable[..., Any]:
    if prim is GETITEM:
        fn: Callable[..., Any] = lambda x, key: x[key]
    elif prim is SETITEM:

        def fn(x: Any, key: Any, value: Any) -> None:
            x[key] = value
    else:
        fn = row_function(prim, target)

    def f(*args: Any, **kwargs: Any) -> Any:
        rec = STACK.recorder
        if rec is None:  # outside a trace (building the namespace): the backend itself
            return fn(*real(args), **real(kwargs))
        return rec.call_real(prim, fn, mod, args, kwargs)

    f.__name__ = f.__qualname__ = prim.short_name
    return f


_CACHE: dict[str, Any] = {}


def recording(target: Backend) -> Any:
    """The differentiable namespace over the recording module of ``target`` (cached)."""
    from ..namespace._build import build

    ns = _CACHE.get(target.name)
    if ns is not None:
        return ns
    mod = ModuleType(f"tracing_{target.name}", f"{target.name}, recorded by pycograd_xp.compile")

    def function(prim: Any) -> Callable[..., Any] | None:
        scope = getattr(target.xp, prim.scope, None) if prim.scope else target.xp
        if (
            prim.kind != "method"
            and (scope is None or not hasattr(scope, prim.short_name))
            and prim.impl is None
        ):
            return None  # the backend lacks it: so does the recording (the namespace says so)
        return _function(prim, target, mod)

    namespace_module(mod, function, function)
    for name, value in vars(target.xp).items():  # dtypes, constants, the info function
        if (
            not name.startswith("_")
            and not callable(value)
            and not hasattr(mod, name)
            and not isinstance(value, ModuleType)
        ):
            setattr(mod, name, value)
    for name in (*DTYPE_NAMES, *CONSTANTS):
        if hasattr(target.xp, name):
            setattr(mod, name, getattr(target.xp, name))
    mod.__dict__.update(
        __array_api_version__=target.xp.__array_api_version__,
        __array_namespace_info__=target.xp.__array_namespace_info__,
    )
    like = target.like_kwargs
    b = dataclasses.replace(
        target,
        xp=mod,
        name=f"tracing_{target.name}",
        array_type=Proxy,
        abstract=True,
        like_kwargs=(
            (lambda *arrays: like(*(a.real if type(a) is Proxy else a for a in arrays)))
            if like
            else None
        ),
        projector=None,
        device_peak=None,
        owns_buffer=None,
        takes_out=None,
    )
    _BY_XP[id(mod)] = b
    ns = _CACHE[target.name] = build(b)
    return ns
