"""Build a namespace module for one backend from the primitive table.

``build(backend)`` makes a fresh module ``pycograd_xp.<backend>`` with its own Array subclass and
one public function per row of :data:`~pycograd_xp.ops.REGISTRY`. Each public
function unwraps our arrays to backend arrays, checks dtypes (and axes where the row asks),
calls the row's ``impl`` on the backend, and wraps the result.
"""

from __future__ import annotations

import functools
import inspect
import numbers
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any, cast

from .._primitive import CATEGORIES, CONSTANTS, DTYPE_NAMES, REGISTRY, Primitive, namespace_module
from .._state import CURRENT, MODE, REDIRECT
from .._tape import is_leaf, is_saved, note_write
from ._array import (
    PLAIN_TYPES,
    SCALARS,
    Array,
    closed_write_error,
    install_operators,
    make,
    note_view,
    rebind,
)
from ._backend import Backend
from ._record import elementwise_recorder, record

API_VERSIONS = ("2021.12", "2022.12", "2023.12", "2024.12", "2025.12")
# The code of every public function the factories make (one code serves every row of its
# signature shape; the row is the closure's ``prim``). See :func:`row_of`.
_WRAPPER_CODES: set[Any] = set()


def row_of(frame: Any) -> Primitive | None:
    """The row a stack frame is running, if it is a public function of one of our namespaces
    (how ``cubed_plugin`` names the op a call of ``xp.sum`` makes); else None."""
    if frame.f_code not in _WRAPPER_CODES:
        return None
    prim = frame.f_locals.get("prim")
    return prim if isinstance(prim, Primitive) else None


# Parameter names of the standard that never hold arrays: passed to the backend untouched.
_PLAIN_PARAMS = frozenset(
    {
        "axis",
        "axes",
        "dtype",
        "keepdims",
        "device",
        "copy",
        "k",
        "offset",
        "correction",
        "descending",
        "stable",
        "side",
        "mode",
        "norm",
        "upper",
        "full_matrices",
        "include_initial",
        "indexing",
        "endpoint",
        "invert",
        "ord",
        "n",
        "s",
        "d",
        "num",
        "shape",
        "source",
        "destination",
        "shift",
        "n_rows",
        "n_cols",
        "kind",
    }
)
# Functions whose job is to take data from outside (foreign arrays are welcome there).
_CONVERTERS = frozenset({"asarray", "from_dlpack"})


def closed_call(prim: Primitive, args: tuple, kwargs: dict) -> Any:
    """A call of the namespace ``compile`` traces on (``REDIRECT.closed``), moved to the
    recording namespace. Its concrete arrays are ones the function closes over: each becomes a
    constant the replay reads (``asarray`` of it, no copy), so the replay computes the call
    afresh from the array's contents at that call, as the function itself does. Run here, the
    result would be a snapshot, stale once the caller writes into the array."""
    A = cast(ModuleType, REDIRECT.ns)  # set whenever REDIRECT.closed is (see _state.REDIRECT)
    return _function_of(A, prim)(
        *_recorded(A, args), **{k: _recorded(A, v) for k, v in kwargs.items()}
    )


def _recorded(A: ModuleType, a: Any) -> Any:
    if isinstance(a, Array) and not a._backend.abstract:
        return A.asarray(a)
    if type(a) is tuple or type(a) is list:
        return type(a)(_recorded(A, e) for e in a)
    return a


def _any_tracked(a: Any) -> bool:
    """Whether a list/tuple argument holds an array that is being differentiated."""
    if isinstance(a, list | tuple):
        return any(_any_tracked(e) for e in a)
    return isinstance(a, Array) and a._node is not None


class HandOver(Exception):  # noqa: N818 - a signal, not an error
    """An array of an abstract namespace reached a function of a concrete one: the call is
    handed over to the abstract namespace (see ``pycograd_xp.memory``)."""

    def __init__(self, ns: ModuleType) -> None:
        self.ns = ns

    def call(self, prim: Primitive, args: tuple, kwargs: dict) -> Any:
        return _function_of(self.ns, prim)(*args, **kwargs)


def _function_of(ns: ModuleType, prim: Primitive) -> Callable[..., Any]:
    return getattr(getattr(ns, prim.scope) if prim.scope else ns, prim.short_name)


# Rows that make arrays from Python values alone: while a function is projected, the ones of
# every namespace make abstract arrays instead (see ``REDIRECT``).
_SHAPE_CREATORS = frozenset({"arange", "empty", "eye", "full", "linspace", "ones", "zeros"})


class AxisError(ValueError, IndexError):
    """An axis argument outside ``[-ndim, ndim)``."""


class Info:
    """``__array_namespace_info__()``: the backend's own answers, never more than it has."""

    def __init__(self, backend: Backend) -> None:
        self._info = backend.xp.__array_namespace_info__()

    def capabilities(self) -> dict[str, Any]:
        return dict(self._info.capabilities())

    def default_device(self) -> Any:
        return self._info.default_device()

    def default_dtypes(self, *, device: Any = None) -> dict[str, Any]:
        return dict(self._info.default_dtypes(device=device))

    def dtypes(self, *, device: Any = None, kind: Any = None) -> dict[str, Any]:
        return dict(self._info.dtypes(device=device, kind=kind))

    def devices(self) -> tuple[Any, ...]:
        return tuple(self._info.devices())


# A dtype of each category, to suggest in an error.
_EXAMPLE_DTYPE: dict[str | None, str] = {
    "complex floating-point": "complex128",
    "integer": "int64",
    "integer or boolean": "int64",
    "boolean": "bool",
}


def _dtype_error(fname: str, dtype: Any, category: str | None) -> TypeError:
    example = _EXAMPLE_DTYPE.get(category, "float64")
    return TypeError(
        f"{fname}(): got an array of dtype {dtype}, but this function takes {category} dtypes; "
        f"convert first, e.g. xp.astype(x, xp.{example})"
    )


def _describe(value: Any) -> str:
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"{getattr(value.dtype, 'name', value.dtype)}{tuple(value.shape)}"
    if type(value) is list or type(value) is tuple:
        inner = ", ".join(_describe(v) for v in value)
        return f"[{inner}]" if type(value) is list else f"({inner}{',' if len(value) == 1 else ''})"
    return repr(value)


def _explain(fname: str, err: Exception, args: tuple, kwargs: dict | None = None) -> Exception:
    """The backend's error ``err`` from ``fname``, restated with the function's name and what it
    was called with (shapes and dtypes), as the same exception type when it can be."""
    if str(err).startswith(f"{fname}("):  # already names the function (our own errors)
        return err
    called = [_describe(a) for a in args] + [
        f"{k}={_describe(v)}" for k, v in (kwargs or {}).items()
    ]
    msg = f"{fname}(): {err} (called with {', '.join(called)})"
    try:
        new = type(err)(msg)
    except Exception:  # an exception type that takes other arguments: keep the original
        return err
    new.__cause__ = err
    return new


def _missing(fname: str, backend: Backend, missing: str) -> Callable[..., Any]:
    def unavailable(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f"{fname}(): the {backend.name} backend does not implement {missing}; "
            "use a backend that does (e.g. numpy) for this function"
        )

    return unavailable


def _has(xp: Any, dotted: str) -> bool:
    obj = xp
    for part in dotted.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            return False
    return True


_P = inspect.Parameter
_POSITIONAL = (_P.POSITIONAL_ONLY, _P.POSITIONAL_OR_KEYWORD)
# The default of a fixed-arity closure's optional positional parameter: left out of the call
# (given by keyword, or missing), so the call is bound by the signature instead.
_ABSENT: Any = object()


def _given(*args: Any) -> tuple:
    """The positional arguments a fixed-arity closure was given (its parameters left at
    ``_ABSENT`` dropped)."""
    return tuple(a for a in args if a is not _ABSENT)


class _Params:
    """A general row's spec signature, read once: how its public function binds a call, which
    arguments may hold arrays, and which factory of :class:`_Builder` makes the function
    (``shape``, the factory's name)."""

    def __init__(self, prim: Primitive) -> None:
        assert prim.signature is not None
        self.fname = prim.short_name  # as Python's own errors name a function
        params = list(prim.signature.parameters.values())
        positional = [p for p in params if p.kind in _POSITIONAL]
        self.names = tuple(p.name for p in positional)
        self.defaults = tuple(p.default for p in positional)  # _P.empty: required
        self.posonly = frozenset(p.name for p in positional if p.kind is _P.POSITIONAL_ONLY)
        self.var = any(p.kind is _P.VAR_POSITIONAL for p in params)
        self.kwdefaults = {p.name: p.default for p in params if p.kind is _P.KEYWORD_ONLY}
        self.keywords = frozenset(self.kwdefaults)
        self.by_name = frozenset(self.names) - self.posonly | self.keywords
        # Parameters that may hold arrays (all but _PLAIN_PARAMS), by position (the *args too)
        # and by keyword; the positional-only ones have their dtype checked; a list of arrays
        # (a parameter named "arrays...") is tracked when any of its elements is.
        self.arrays = tuple(i for i, n in enumerate(self.names) if n not in _PLAIN_PARAMS)
        self.checked = frozenset(i for i in self.arrays if self.names[i] in self.posonly)
        self.lists = frozenset(i for i in self.arrays if "array" in self.names[i])
        self.kw_arrays = tuple(n for n in self.kwdefaults if n not in _PLAIN_PARAMS)
        self.kw_lists = frozenset(n for n in self.kw_arrays if "array" in n)
        self.shape = self._shape(prim)

    def _shape(self, prim: Primitive) -> str:
        """The factory for the row: a fixed-arity one where the row's keyword-only parameters
        hold no array and have defaults, :meth:`_Builder.any_shape` for the rest."""
        if self.var or self.kw_arrays or any(d is _P.empty for d in self.kwdefaults.values()):
            return "any_shape"
        n, k = len(self.names), len(self.arrays)
        # the arrays come first, positional-only and required; the parameters after them hold
        # no array and have no default; the axis (when checked) is a keyword
        simple = (
            self.arrays == tuple(range(k))
            and len(self.checked) == k
            and all(d is _P.empty for d in self.defaults)
            and (not prim.axis_check or "axis" in self.keywords)
        )
        if simple and self.lists:
            return "array_list" if n == 1 else "any_shape"
        if simple:
            if k == 0 and n == 1 and prim.vjp is None:
                return "no_array"
            if k == 1 and n <= 2:
                return "one_array" if n == 1 else "array_and_plain"
            if k == 2 and n == 2:
                return "two_arrays"
            if k == 3 and n == 3 and not self.keywords:
                return "three_arrays"
        if n == 3 and not self.lists and not prim.axis_check:
            return "three_positional"
        return "any_shape"

    def bind(self, args: tuple, kw: dict) -> tuple[tuple, dict]:
        """``args``/``kw`` as the signature binds them: every positional parameter's value in
        order (then the ``*args``), and every keyword-only one's, defaults filled in. A call
        the signature refuses raises the TypeError Python raises for it."""
        n, names = len(args), self.names
        if not kw and (n == len(names) or (self.var and n > len(names))):
            return args, dict(self.kwdefaults)
        if (n > len(names) and not self.var) or (kw and not kw.keys() <= self.by_name):
            raise self.error(args, kw)
        if kw and any(name in kw for name in names[:n]):
            raise self.error(args, kw)
        left = zip(names[n:], self.defaults[n:], strict=True)
        values = args[: len(names)] + tuple(kw[k] if k in kw else d for k, d in left)
        kwargs = {k: kw.get(k, d) for k, d in self.kwdefaults.items()}
        if any(v is _P.empty for v in values) or any(v is _P.empty for v in kwargs.values()):
            raise self.error(args, kw)
        return values + args[len(names) :], kwargs

    def refuse(self, args: tuple, kw: dict) -> None:
        """Raise Python's TypeError if the signature takes no keyword of these names (a
        fixed-arity closure passes the keywords given straight to the backend call, and asks
        here when that call fails)."""
        if kw and not kw.keys() <= self.keywords:
            raise self.error(args, kw) from None

    def error(self, args: tuple, kw: dict) -> TypeError:
        """The TypeError Python raises for a call of the signature with ``args``/``kw``."""
        f, names, n = self.fname, self.names, len(args)
        unknown = [k for k in kw if k not in self.by_name and k not in self.posonly]
        if unknown:
            return TypeError(f"{f}() got an unexpected keyword argument {unknown[0]!r}")
        if n > len(names) and not self.var:
            least = sum(d is _P.empty for d in self.defaults)
            takes = f"from {least} to {len(names)}" if least < len(names) else f"{len(names)}"
            s = "" if takes == "1" else "s"
            was = "was" if n == 1 else "were"
            return TypeError(f"{f}() takes {takes} positional argument{s} but {n} {was} given")
        passed = ", ".join(repr(k) for k in kw if k in self.posonly)
        if passed:
            return TypeError(
                f"{f}() got some positional-only arguments passed as keyword arguments: {passed}"
            )
        twice = [k for k in names[:n] if k in kw]
        if twice:
            return TypeError(f"{f}() got multiple values for argument {twice[0]!r}")
        kind = "positional"
        required = [k for k, d in zip(names, self.defaults, strict=True) if d is _P.empty]
        missing = [k for k in required[n:] if k not in kw]
        if not missing:
            kind = "keyword-only"
            missing = [k for k, d in self.kwdefaults.items() if k not in kw and d is _P.empty]
        q = [repr(k) for k in missing]
        listed = " and ".join(q) if len(q) < 3 else f"{', '.join(q[:-1])}, and {q[-1]}"
        s = "" if len(q) == 1 else "s"
        return TypeError(f"{f}() missing {len(q)} required {kind} argument{s}: {listed}")


class _Builder:
    """Everything one namespace's functions close over: its backend and its Array class."""

    def __init__(self, backend: Backend, mod: ModuleType) -> None:
        self.backend = backend
        self.bk = bk = backend.xp
        self.mod = mod
        attrs = {"__slots__": (), "_ns": mod, "_backend": backend, "__module__": mod.__name__}
        self.Arr: type[Array] = type("Array", (Array,), {**attrs, "__qualname__": "Array"})
        all_dtypes = list(bk.__array_namespace_info__().dtypes().values())
        self.categories = {
            cat: frozenset(dt for dt in all_dtypes if any(bk.isdtype(dt, k) for k in kinds))
            for cat, kinds in CATEGORIES.items()
        }

    # -- moving between our arrays and the backend's --------------------------------------------
    def new(self) -> Callable[[Any], Array]:
        """The fastest way to wrap one backend array (no checks)."""
        Arr, obj_new = self.Arr, object.__new__

        def new(data: Any) -> Array:
            a: Array = obj_new(Arr)
            a._data = data
            a._node = None
            return a

        if not self.backend.abstract:
            return new

        def new_traced(data: Any) -> Array:
            # compile's trace: what our namespace hands out (NumPy's 0-d results wrapped back
            # into 0-d arrays), as distinct from the raw results inside a first-order rule
            recorder = CURRENT.recorder
            if recorder is not None:
                recorder.wrapped(data)
            return new(data)

        return new_traced

    def wrap(self) -> Callable[[Any], Any]:
        """Wrap a backend result: an array, a (named) tuple or list of them, or a plain value."""
        T, bk, new = self.backend.array_type, self.bk, self.new()
        scalar_type = self.backend.scalar_type or ()
        scalar_to_array = self.backend.scalar_to_array

        def wrap(r: Any) -> Any:
            if type(r) is T:
                return new(r)
            if isinstance(r, scalar_type):
                return new(scalar_to_array(r))
            if isinstance(r, T):
                return new(r)
            if isinstance(r, tuple):
                items = [wrap(e) for e in r]
                return type(r)(*items) if hasattr(r, "_fields") else tuple(items)
            if isinstance(r, list):
                return [wrap(e) for e in r]
            if hasattr(r, "shape") and hasattr(r, "dtype"):  # NumPy's 0-d results are scalars
                return new(bk.asarray(r))
            return r

        return wrap

    def unwrap(self, fname: str) -> Callable[[Any], Any]:
        """Map our arrays (also inside tuples and lists) to backend arrays; refuse foreign ones.

        An array of an abstract namespace given to a concrete one raises :class:`HandOver` (the
        call moves there); a concrete array given to an abstract namespace becomes a constant
        of its shape and dtype.
        """
        Arr, mod, abstract, bk = self.Arr, self.mod, self.backend.abstract, self.bk
        level, lift = self.backend.level, self.backend.lift

        def unwrap(a: Any) -> Any:
            t = type(a)
            if t is Arr:
                return a._data
            if t in PLAIN_TYPES:
                return a
            if t is tuple or t is list:
                return t(unwrap(e) for e in a)
            if isinstance(a, Array):
                if a._backend.level != level:  # vmap: the higher level takes the call
                    if a._backend.level > level:
                        raise HandOver(a._ns)
                    assert lift is not None  # a lower level reached a vmap level's namespace
                    return lift(a)
                if a._backend.abstract and not abstract:
                    raise HandOver(a._ns)
                if abstract:
                    return bk.asarray(a._data)
                raise TypeError(
                    f"{fname}(): cannot mix arrays of {mod.__name__} and {a._ns.__name__}; "
                    f"convert with {mod.__name__}.asarray first"
                )
            if isinstance(a, numbers.Number):  # NumPy scalars (np.int64 as an index, ...)
                return a
            if not isinstance(a, type) and (
                hasattr(a, "__array_namespace__") or hasattr(a, "__array__")
            ):
                raise TypeError(
                    f"{fname}(): got a {type(a).__module__}.{type(a).__name__}, not an array of "
                    f"{mod.__name__}; convert it with {mod.__name__}.asarray(...)"
                )
            return a  # dtypes, devices, and other plain values

        return unwrap

    def unwrap_foreign(self) -> Callable[[Any], Any]:
        """For converters: our arrays unwrap, anything else (lists, NumPy arrays) passes."""
        Arr, lift = self.Arr, self.backend.lift

        def unwrap(a: Any) -> Any:
            if type(a) is Arr:
                return a._data
            if isinstance(a, Array):  # another namespace's array: take its value
                if a._backend.level != self.backend.level:  # vmap: see unwrap
                    if a._backend.level > self.backend.level:
                        raise HandOver(a._ns)
                    assert lift is not None  # a lower level reached a vmap level's namespace
                    return lift(a)
                if a._backend.abstract and not self.backend.abstract:
                    raise HandOver(a._ns)
                return a._concrete("asarray")
            if type(a) is list or type(a) is tuple:
                return type(a)(unwrap(e) for e in a)
            return a

        return unwrap

    # -- one public function per row -------------------------------------------------------------
    def function(self, prim: Primitive) -> Callable[..., Any]:
        missing = [n for n in prim.needs if not _has(self.bk, n)]
        if missing:
            f = _missing(prim.name, self.backend, ", ".join(missing))
            if prim.signature is not None:
                f.__signature__ = prim.signature  # type: ignore[attr-defined]
        elif prim.kind == "unary":
            f = self.unary(prim)
        elif prim.kind == "binary":
            f = self.binary(prim)
        else:
            f = self.general(prim)
        f.__name__ = f.__qualname__ = prim.short_name
        f.__module__ = self.mod.__name__
        _WRAPPER_CODES.add(f.__code__)
        f.__doc__ = (prim.impl.__doc__ if prim.impl is not None else None) or (
            f"``{prim.name}`` of the Array API standard, differentiable, on the "
            f"{self.backend.name} backend."
        )
        return f

    def lifted(self, x: Any) -> bool:
        """Whether ``x`` is an array of a lower vmap level, which this namespace takes in."""
        return self.backend.lift is not None and isinstance(x, Array)

    def recorder(self, prim: Primitive) -> Callable[..., Any]:
        floating = self.categories["floating-point"]
        return elementwise_recorder(
            prim, self.mod, floating, self.backend.chunked, self.backend.abstract
        )

    def _backend_fn(self, prim: Primitive) -> Callable[..., Any]:
        if prim.impl is None:
            return getattr(self.bk, prim.name)
        return functools.partial(prim.impl, self.bk)

    def unary(self, prim: Primitive) -> Callable[[Any], Array]:
        assert prim.dtypes is not None  # an elementwise row always names its dtypes
        name, fn, allowed = prim.name, self._backend_fn(prim), self.categories[prim.dtypes]
        Arr, T, new, wrap = self.Arr, self.backend.array_type, self.new(), self.wrap()
        unwrap, diff, rec = self.unwrap(name), prim.vjp is not None, self.recorder(prim)
        lifted, mod = self.lifted, self.mod

        def f(x: Array, /) -> Array:
            if REDIRECT.closed is mod:  # compile is tracing: record (see closed_call)
                return closed_call(prim, (x,), {})
            if type(x) is not Arr:
                try:
                    d = unwrap(x)  # raises a clear TypeError for foreign arrays
                except HandOver as over:
                    return over.call(prim, (x,), {})
                if lifted(x):
                    return wrap(fn(d))
                raise TypeError(f"{name}(): expected an array, got {type(x).__name__}")
            d = x._data
            if d.dtype not in allowed:
                raise _dtype_error(name, d.dtype, prim.dtypes)
            try:
                r = fn(d)
            except (ValueError, TypeError, IndexError) as e:
                raise _explain(name, e, (d,)) from e
            out = new(r) if type(r) is T else wrap(r)
            if x._node is not None and diff and MODE.enabled:
                return rec(out, x)
            return out

        return f

    def binary(self, prim: Primitive) -> Callable[[Any, Any], Array]:
        assert prim.dtypes is not None  # an elementwise row always names its dtypes
        name, fn, allowed = prim.name, self._backend_fn(prim), self.categories[prim.dtypes]
        Arr, T, new, wrap = self.Arr, self.backend.array_type, self.new(), self.wrap()
        unwrap, diff, rec = self.unwrap(name), prim.vjp is not None, self.recorder(prim)

        lifted, abstract, mod = self.lifted, self.backend.abstract, self.mod

        def operand(x: Any) -> Any:
            if isinstance(x, SCALARS):
                return x
            d = unwrap(x)
            if lifted(x) or (abstract and isinstance(x, Array)):  # a constant from outside
                return d
            raise TypeError(
                f"{name}(): expected an array or a Python scalar, got {type(x).__name__}"
            )

        def f(x1: Any, x2: Any, /) -> Array:
            if REDIRECT.closed is mod:  # compile is tracing: record (see closed_call)
                return closed_call(prim, (x1, x2), {})
            try:
                if type(x1) is Arr:
                    d1 = x1._data
                    if d1.dtype not in allowed:
                        raise _dtype_error(name, d1.dtype, prim.dtypes)
                    if type(x2) is Arr:
                        d2 = x2._data
                        if d2.dtype not in allowed:
                            raise _dtype_error(name, d2.dtype, prim.dtypes)
                    elif isinstance(x2, SCALARS):
                        d2 = x2
                    else:
                        d2 = operand(x2)
                elif type(x2) is Arr:
                    d1, d2 = operand(x1), x2._data
                    if d2.dtype not in allowed:
                        raise _dtype_error(name, d2.dtype, prim.dtypes)
                else:
                    d1, d2 = operand(x1), operand(x2)
                    if lifted(x1) or lifted(x2):
                        return wrap(fn(d1, d2))
                    raise TypeError(
                        f"{name}(): at least one argument must be an array, got two scalars"
                    )
                try:
                    r = fn(d1, d2)
                except (ValueError, TypeError, IndexError) as e:
                    raise _explain(name, e, (d1, d2)) from e
                out = new(r) if type(r) is T else wrap(r)
                if (
                    diff
                    and MODE.enabled
                    and (
                        (type(x1) is Arr and x1._node is not None)
                        or (type(x2) is Arr and x2._node is not None)
                    )
                ):
                    return rec(out, x1, x2)
                return out
            except HandOver as over:  # an abstract operand: the call moves to its namespace
                return over.call(prim, (x1, x2), {})

        return f

    # -- the general rows: a closure factory per signature shape --------------------------------
    # A general row's function binds a call as its spec signature does (Python's TypeErrors for
    # a wrong one), unwraps the arguments that may hold arrays, checks their dtypes (and the
    # axis, where the row asks), calls ``impl(bk, ...)``, wraps the result, and records a node
    # when an input is tracked. The common shapes get a closure with a fixed positional arity
    # that passes the keywords given straight on (the backend call's own defaults fill in the
    # others; a keyword the signature lacks is caught when that call refuses it); every other
    # row takes the plain path, :meth:`any_shape`. Python itself refuses a wrong number of
    # arrays; its message names the closure's parameters (``x``, ``x1``, ``arrays``), which
    # are the spec's names for all but a few rows (``asarray(obj, /)`` is told ``'x'``).

    def general(self, prim: Primitive) -> Callable[..., Any]:
        """The public function of a ``general`` row, made by the factory of its shape."""
        params = _Params(prim)
        f = getattr(self, params.shape)(prim, params)
        f.__signature__ = prim.signature  # read by inspect
        return f

    def _parts(self, prim: Primitive) -> tuple[Any, ...]:
        """What every factory's closure reads: the row's name, its backend call, the dtypes its
        positional-only arrays accept (None: any) and the unwrapping of an argument."""
        name = prim.name
        unwrap = self.unwrap_foreign() if name in _CONVERTERS else self.unwrap(name)
        allowed = self.categories[prim.dtypes] if prim.dtypes else None
        return name, prim.impl, allowed, unwrap

    def one_array(self, prim: Primitive, params: _Params) -> Callable[..., Any]:
        """``f(x, /, *, <keywords>)``: ``sum``, ``sort``, ``linalg.inv``, ``fft.fft``, ..."""
        if not params.keywords:
            return self.one_array_only(prim, params)
        name, impl, allowed, unwrap = self._parts(prim)
        Arr, bk, ns, wrap, dtypes = self.Arr, self.bk, self.mod, self.wrap(), prim.dtypes
        T, new = self.backend.array_type, self.new()  # one backend array: wrapped at once
        scalar, to_array = self.backend.scalar_type or (), self.backend.scalar_to_array
        kwdefaults, diff, axis_check = params.kwdefaults, prim.vjp is not None, prim.axis_check
        axis_default = kwdefaults.get("axis")

        def f(x: Any, /, **kw: Any) -> Any:
            if REDIRECT.closed is ns:  # compile is tracing: record (see closed_call)
                return closed_call(prim, (x,), {**kwdefaults, **kw})
            try:
                if type(x) is Arr:
                    d = x._data
                    if allowed is not None and d.dtype not in allowed:
                        raise _dtype_error(name, d.dtype, dtypes)
                    tracked = diff and x._node is not None
                else:
                    d, tracked = unwrap(x), False
                if axis_check:  # the default axis too (sort's -1 on a 0-d array)
                    axis = kw["axis"] if "axis" in kw else axis_default
                    if axis is not None:
                        _check_axis(name, axis, d.ndim)
                try:
                    r = impl(bk, d, **kw) if kw else impl(bk, d)
                    if type(r) is T:
                        out = new(r)
                    elif isinstance(r, scalar):  # a reduction's NumPy scalar: a 0-d array
                        out = new(to_array(r))
                    else:
                        out = wrap(r)
                except (ValueError, TypeError, IndexError) as e:
                    params.refuse((x,), kw)
                    raise _explain(name, e, (d,), {**kwdefaults, **kw}) from e
                if tracked and MODE.enabled:
                    return record(prim, ns, out, (x,), {**kwdefaults, **kw})
                return out
            except HandOver as over:  # an abstract argument: the call moves to its namespace
                return over.call(prim, (x,), {**kwdefaults, **kw})

        return f

    def one_array_only(self, prim: Primitive, params: _Params) -> Callable[..., Any]:
        """``f(x, /)``: ``linalg.inv``, ``linalg.det``, ``matrix_transpose``, ``nonzero``, ...
        (:meth:`one_array` without keywords: no dict made per call)."""
        name, impl, allowed, unwrap = self._parts(prim)
        Arr, bk, ns, wrap, dtypes = self.Arr, self.bk, self.mod, self.wrap(), prim.dtypes
        T, new = self.backend.array_type, self.new()  # one backend array: wrapped at once
        scalar, to_array = self.backend.scalar_type or (), self.backend.scalar_to_array
        diff = prim.vjp is not None

        def f(x: Any, /) -> Any:
            if REDIRECT.closed is ns:  # compile is tracing: record (see closed_call)
                return closed_call(prim, (x,), {})
            try:
                if type(x) is Arr:
                    d = x._data
                    if allowed is not None and d.dtype not in allowed:
                        raise _dtype_error(name, d.dtype, dtypes)
                    tracked = diff and x._node is not None
                else:
                    d, tracked = unwrap(x), False
                try:
                    r = impl(bk, d)
                    if type(r) is T:
                        out = new(r)
                    elif isinstance(r, scalar):  # a reduction's NumPy scalar: a 0-d array
                        out = new(to_array(r))
                    else:
                        out = wrap(r)
                except (ValueError, TypeError, IndexError) as e:
                    raise _explain(name, e, (d,), {}) from e
                if tracked and MODE.enabled:
                    return record(prim, ns, out, (x,), {})
                return out
            except HandOver as over:  # an abstract argument: the call moves to its namespace
                return over.call(prim, (x,), {})

        return f

    def array_and_plain(self, prim: Primitive, params: _Params) -> Callable[..., Any]:
        """``f(x, a, /, *, <keywords>)`` where ``a`` holds no array: ``reshape``, ``astype``,
        ``expand_dims``, ``permute_dims``, ..."""
        name, impl, allowed, unwrap = self._parts(prim)
        Arr, bk, ns, wrap, dtypes = self.Arr, self.bk, self.mod, self.wrap(), prim.dtypes
        T, new = self.backend.array_type, self.new()  # one backend array: wrapped at once
        kwdefaults, diff, axis_check = params.kwdefaults, prim.vjp is not None, prim.axis_check
        axis_default = kwdefaults.get("axis")
        a_name = params.names[1] if params.names[1] in params.by_name else None  # a by keyword

        def f(x: Any, a: Any = _ABSENT, /, *more: Any, **kw: Any) -> Any:
            if a is _ABSENT and a_name is not None and a_name in kw:  # expand_dims(x, axis=0)
                a = kw[a_name]
                del kw[a_name]
            if a is _ABSENT or more:  # a call to refuse
                (x, a), kw = params.bind(_given(x, a, *more), kw)
            if REDIRECT.closed is ns:  # compile is tracing: record (see closed_call)
                return closed_call(prim, (x, a), {**kwdefaults, **kw})
            try:
                if type(x) is Arr:
                    d = x._data
                    if allowed is not None and d.dtype not in allowed:
                        raise _dtype_error(name, d.dtype, dtypes)
                    tracked = diff and x._node is not None
                else:
                    d, tracked = unwrap(x), False
                if axis_check:  # the default axis too (sort's -1 on a 0-d array)
                    axis = kw["axis"] if "axis" in kw else axis_default
                    if axis is not None:
                        _check_axis(name, axis, d.ndim)
                try:
                    r = impl(bk, d, a, **kw) if kw else impl(bk, d, a)
                    out = new(r) if type(r) is T else wrap(r)
                except (ValueError, TypeError, IndexError) as e:
                    params.refuse((x, a), kw)
                    raise _explain(name, e, (d, a), {**kwdefaults, **kw}) from e
                if tracked and MODE.enabled:
                    return record(prim, ns, out, (x, a), {**kwdefaults, **kw})
                return out
            except HandOver as over:  # an abstract argument: the call moves to its namespace
                return over.call(prim, (x, a), {**kwdefaults, **kw})

        return f

    def two_arrays(self, prim: Primitive, params: _Params) -> Callable[..., Any]:
        """``f(x1, x2, /, *, <keywords>)``: ``matmul``, ``tensordot``, ``take``,
        ``linalg.solve``, ... (with ``condition`` first, ``where``: :meth:`three_arrays`)."""
        if not params.keywords:
            return self.two_arrays_only(prim, params)
        name, impl, allowed, unwrap = self._parts(prim)
        Arr, bk, ns, wrap, dtypes = self.Arr, self.bk, self.mod, self.wrap(), prim.dtypes
        T, new = self.backend.array_type, self.new()  # one backend array: wrapped at once
        kwdefaults, diff = params.kwdefaults, prim.vjp is not None

        def f(x1: Any, x2: Any, /, **kw: Any) -> Any:
            if REDIRECT.closed is ns:  # compile is tracing: record (see closed_call)
                return closed_call(prim, (x1, x2), {**kwdefaults, **kw})
            try:
                tracked = False
                if type(x1) is Arr:
                    d1 = x1._data
                    if allowed is not None and d1.dtype not in allowed:
                        raise _dtype_error(name, d1.dtype, dtypes)
                    tracked = x1._node is not None
                else:
                    d1 = unwrap(x1)
                if type(x2) is Arr:
                    d2 = x2._data
                    if allowed is not None and d2.dtype not in allowed:
                        raise _dtype_error(name, d2.dtype, dtypes)
                    tracked = tracked or x2._node is not None
                else:
                    d2 = unwrap(x2)
                try:
                    r = impl(bk, d1, d2, **kw) if kw else impl(bk, d1, d2)
                    out = new(r) if type(r) is T else wrap(r)
                except (ValueError, TypeError, IndexError) as e:
                    params.refuse((x1, x2), kw)
                    raise _explain(name, e, (d1, d2), {**kwdefaults, **kw}) from e
                if diff and tracked and MODE.enabled:
                    return record(prim, ns, out, (x1, x2), {**kwdefaults, **kw})
                return out
            except HandOver as over:  # an abstract argument: the call moves to its namespace
                return over.call(prim, (x1, x2), {**kwdefaults, **kw})

        return f

    def two_arrays_only(self, prim: Primitive, params: _Params) -> Callable[..., Any]:
        """``f(x1, x2, /)``: ``matmul``, ``linalg.solve``, ``linalg.outer``, ``tile``, ...
        (:meth:`two_arrays` without keywords: no dict made per call)."""
        name, impl, allowed, unwrap = self._parts(prim)
        Arr, bk, ns, wrap, dtypes = self.Arr, self.bk, self.mod, self.wrap(), prim.dtypes
        T, new = self.backend.array_type, self.new()  # one backend array: wrapped at once
        diff = prim.vjp is not None

        def f(x1: Any, x2: Any, /) -> Any:
            if REDIRECT.closed is ns:  # compile is tracing: record (see closed_call)
                return closed_call(prim, (x1, x2), {})
            try:
                tracked = False
                if type(x1) is Arr:
                    d1 = x1._data
                    if allowed is not None and d1.dtype not in allowed:
                        raise _dtype_error(name, d1.dtype, dtypes)
                    tracked = x1._node is not None
                else:
                    d1 = unwrap(x1)
                if type(x2) is Arr:
                    d2 = x2._data
                    if allowed is not None and d2.dtype not in allowed:
                        raise _dtype_error(name, d2.dtype, dtypes)
                    tracked = tracked or x2._node is not None
                else:
                    d2 = unwrap(x2)
                try:
                    r = impl(bk, d1, d2)
                    out = new(r) if type(r) is T else wrap(r)
                except (ValueError, TypeError, IndexError) as e:
                    raise _explain(name, e, (d1, d2), {}) from e
                if diff and tracked and MODE.enabled:
                    return record(prim, ns, out, (x1, x2), {})
                return out
            except HandOver as over:  # an abstract argument: the call moves to its namespace
                return over.call(prim, (x1, x2), {})

        return f

    def three_arrays(self, prim: Primitive, params: _Params) -> Callable[..., Any]:
        """``f(condition, x1, x2, /)``: ``where``."""
        name, impl, allowed, unwrap = self._parts(prim)
        Arr, bk, ns, wrap, dtypes = self.Arr, self.bk, self.mod, self.wrap(), prim.dtypes
        T, new = self.backend.array_type, self.new()  # one backend array: wrapped at once
        diff = prim.vjp is not None

        def f(condition: Any, x1: Any, x2: Any, /) -> Any:
            if REDIRECT.closed is ns:  # compile is tracing: record (see closed_call)
                return closed_call(prim, (condition, x1, x2), {})
            try:
                tracked = False
                if type(condition) is Arr:
                    d0 = condition._data
                    if allowed is not None and d0.dtype not in allowed:
                        raise _dtype_error(name, d0.dtype, dtypes)
                    tracked = condition._node is not None
                else:
                    d0 = unwrap(condition)
                if type(x1) is Arr:
                    d1 = x1._data
                    if allowed is not None and d1.dtype not in allowed:
                        raise _dtype_error(name, d1.dtype, dtypes)
                    tracked = tracked or x1._node is not None
                else:
                    d1 = unwrap(x1)
                if type(x2) is Arr:
                    d2 = x2._data
                    if allowed is not None and d2.dtype not in allowed:
                        raise _dtype_error(name, d2.dtype, dtypes)
                    tracked = tracked or x2._node is not None
                else:
                    d2 = unwrap(x2)
                try:
                    r = impl(bk, d0, d1, d2)
                    out = new(r) if type(r) is T else wrap(r)
                except (ValueError, TypeError, IndexError) as e:
                    raise _explain(name, e, (d0, d1, d2), {}) from e
                if diff and tracked and MODE.enabled:
                    return record(prim, ns, out, (condition, x1, x2), {})
                return out
            except HandOver as over:  # an abstract argument: the call moves to its namespace
                return over.call(prim, (condition, x1, x2), {})

        return f

    def array_list(self, prim: Primitive, params: _Params) -> Callable[..., Any]:
        """``f(arrays, /, *, <keywords>)``: ``concat``, ``stack``."""
        name, impl, allowed, unwrap = self._parts(prim)
        Arr, bk, ns, wrap, dtypes = self.Arr, self.bk, self.mod, self.wrap(), prim.dtypes
        T, new = self.backend.array_type, self.new()  # one backend array: wrapped at once
        kwdefaults, diff = params.kwdefaults, prim.vjp is not None

        def f(arrays: Any, /, **kw: Any) -> Any:
            if REDIRECT.closed is ns:  # compile is tracing: record (see closed_call)
                return closed_call(prim, (arrays,), {**kwdefaults, **kw})
            try:
                if type(arrays) is Arr:  # not a list: the backend says what it makes of it
                    d = arrays._data
                    if allowed is not None and d.dtype not in allowed:
                        raise _dtype_error(name, d.dtype, dtypes)
                    tracked = arrays._node is not None
                else:
                    d, tracked = unwrap(arrays), False
                tracked = diff and (tracked or _any_tracked(arrays))
                try:
                    r = impl(bk, d, **kw) if kw else impl(bk, d)
                    out = new(r) if type(r) is T else wrap(r)
                except (ValueError, TypeError, IndexError) as e:
                    params.refuse((arrays,), kw)
                    raise _explain(name, e, (d,), {**kwdefaults, **kw}) from e
                if tracked and MODE.enabled:
                    return record(prim, ns, out, (arrays,), {**kwdefaults, **kw})
                return out
            except HandOver as over:  # an abstract argument: the call moves to its namespace
                return over.call(prim, (arrays,), {**kwdefaults, **kw})

        return f

    def no_array(self, prim: Primitive, params: _Params) -> Callable[..., Any]:
        """``f(a, /, *, <keywords>)`` where nothing holds an array (``zeros``, ``ones``,
        ``empty``, ``fft.fftfreq``): all is passed as given, nothing is recorded."""
        name, impl, bk, ns, wrap = prim.name, prim.impl, self.bk, self.mod, self.wrap()
        T, new = self.backend.array_type, self.new()  # one backend array: wrapped at once
        kwdefaults, creates = params.kwdefaults, name in _SHAPE_CREATORS
        assert impl is not None

        def f(a: Any = _ABSENT, /, *more: Any, **kw: Any) -> Any:
            if a is _ABSENT or more:  # ``a`` given by keyword, or a call to refuse
                (a,), kw = params.bind(_given(a, *more), kw)
            if creates:
                if REDIRECT.ns is not None and REDIRECT.ns is not ns:  # abstract arrays instead
                    return HandOver(REDIRECT.ns).call(prim, (a,), {**kwdefaults, **kw})
            elif REDIRECT.closed is ns:  # compile is tracing: record (see closed_call)
                return closed_call(prim, (a,), {**kwdefaults, **kw})
            try:
                r = impl(bk, a, **kw) if kw else impl(bk, a)
                return new(r) if type(r) is T else wrap(r)
            except (ValueError, TypeError, IndexError) as e:
                params.refuse((a,), kw)
                raise _explain(name, e, (a,), {**kwdefaults, **kw}) from e

        return f

    def three_positional(self, prim: Primitive, params: _Params) -> Callable[..., Any]:
        """``f(a0, a1, a2, /, *, <keywords>)``, each positional parameter an array or not, with
        or without a default: ``clip``, ``linspace``, ``arange``, ``moveaxis``."""
        name, impl, allowed, unwrap = self._parts(prim)
        Arr, bk, ns, wrap, dtypes = self.Arr, self.bk, self.mod, self.wrap(), prim.dtypes
        T, new = self.backend.array_type, self.new()  # one backend array: wrapped at once
        kwdefaults, diff, creates = params.kwdefaults, prim.vjp is not None, name in _SHAPE_CREATORS
        is0, is1, is2 = (i in params.arrays for i in range(3))  # may hold an array
        ch0, ch1, ch2 = (i in params.checked and allowed is not None for i in range(3))

        def f(
            a0: Any = _ABSENT, a1: Any = _ABSENT, a2: Any = _ABSENT, /, *more: Any, **kw: Any
        ) -> Any:
            if a2 is _ABSENT or more:  # left to its default, given by keyword, or refused
                (a0, a1, a2), kw = params.bind(_given(a0, a1, a2, *more), kw)
            if creates:
                if REDIRECT.ns is not None and REDIRECT.ns is not ns:  # abstract arrays instead
                    return HandOver(REDIRECT.ns).call(prim, (a0, a1, a2), {**kwdefaults, **kw})
            elif REDIRECT.closed is ns:  # compile is tracing: record (see closed_call)
                return closed_call(prim, (a0, a1, a2), {**kwdefaults, **kw})
            try:
                tracked = False
                d0, d1, d2 = a0, a1, a2
                if is0:
                    if type(a0) is Arr:
                        d0 = a0._data
                        if ch0 and d0.dtype not in allowed:
                            raise _dtype_error(name, d0.dtype, dtypes)
                        tracked = a0._node is not None
                    else:
                        d0 = unwrap(a0)
                if is1:
                    if type(a1) is Arr:
                        d1 = a1._data
                        if ch1 and d1.dtype not in allowed:
                            raise _dtype_error(name, d1.dtype, dtypes)
                        tracked = tracked or a1._node is not None
                    else:
                        d1 = unwrap(a1)
                if is2:
                    if type(a2) is Arr:
                        d2 = a2._data
                        if ch2 and d2.dtype not in allowed:
                            raise _dtype_error(name, d2.dtype, dtypes)
                        tracked = tracked or a2._node is not None
                    else:
                        d2 = unwrap(a2)
                try:
                    r = impl(bk, d0, d1, d2, **kw) if kw else impl(bk, d0, d1, d2)
                    out = new(r) if type(r) is T else wrap(r)
                except (ValueError, TypeError, IndexError) as e:
                    params.refuse((a0, a1, a2), kw)
                    raise _explain(name, e, (d0, d1, d2), {**kwdefaults, **kw}) from e
                if diff and tracked and MODE.enabled:
                    return record(prim, ns, out, (a0, a1, a2), {**kwdefaults, **kw})
                return out
            except HandOver as over:  # an abstract argument: the call moves to its namespace
                return over.call(prim, (a0, a1, a2), {**kwdefaults, **kw})

        return f

    def any_shape(self, prim: Primitive, params: _Params) -> Callable[..., Any]:
        """The plain path, for every other signature (``meshgrid``, ``full``, ``diff``,
        ``searchsorted``, ``eye``, the convolutions, ...): bind by the signature, then unwrap one
        by one the arguments that may hold arrays."""
        name, impl, allowed, unwrap = self._parts(prim)
        Arr, bk, ns, wrap, dtypes = self.Arr, self.bk, self.mod, self.wrap(), prim.dtypes
        T, new = self.backend.array_type, self.new()  # one backend array: wrapped at once
        kwdefaults, diff, axis_check = params.kwdefaults, prim.vjp is not None, prim.axis_check
        axis_default = kwdefaults.get("axis")
        arrays, checked, lists = params.arrays, params.checked, params.lists
        kw_arrays, kw_lists = params.kw_arrays, params.kw_lists
        npos, var, creates = len(params.names), params.var, name in _SHAPE_CREATORS
        lists_too = diff and (bool(lists) or var)  # a list is tracked when an element is
        axis_at = None if "axis" in kwdefaults or not axis_check else params.names.index("axis")

        def f(*args: Any, **kw: Any) -> Any:
            if len(args) != npos:  # a positional parameter left out or given by keyword, *args
                args, kw = params.bind(args, kw)  # or Python's TypeError
            if creates:
                if REDIRECT.ns is not None and REDIRECT.ns is not ns:  # abstract arrays instead
                    return HandOver(REDIRECT.ns).call(prim, args, {**kwdefaults, **kw})
            elif REDIRECT.closed is ns:  # compile is tracing: record (see closed_call)
                return closed_call(prim, args, {**kwdefaults, **kw})
            try:
                tracked = False
                pos, kwd = list(args), kw  # what the backend call gets
                for i in (*arrays, *range(npos, len(args))) if var else arrays:
                    a = args[i]
                    if type(a) is Arr:
                        d = pos[i] = a._data
                        if i in checked and allowed is not None and d.dtype not in allowed:
                            raise _dtype_error(name, d.dtype, dtypes)
                        if a._node is not None:
                            tracked = True
                    else:
                        pos[i] = unwrap(a)
                    if lists_too and not tracked and (i in lists or i >= npos):  # (*args too)
                        tracked = _any_tracked(a)
                if kw_arrays:
                    kwd = {**kwdefaults, **kw}
                    for k in kw_arrays:
                        a = kwd[k]
                        if type(a) is Arr:
                            kwd[k] = a._data
                            tracked = tracked or a._node is not None
                        else:
                            kwd[k] = unwrap(a)
                        if diff and not tracked and k in kw_lists:
                            tracked = _any_tracked(a)
                if axis_check:
                    axis = kw.get("axis", axis_default) if axis_at is None else args[axis_at]
                    if axis is not None:
                        _check_axis(name, axis, pos[0].ndim)
                try:
                    r = impl(bk, *pos, **kwd) if kwd else impl(bk, *pos)
                    out = new(r) if type(r) is T else wrap(r)
                except (ValueError, TypeError, IndexError) as e:
                    params.refuse(args, kw)
                    raise _explain(name, e, tuple(pos), {**kwdefaults, **kwd}) from e
                if diff and tracked and MODE.enabled:
                    return record(prim, ns, out, args, {**kwdefaults, **kw})
                return out
            except HandOver as over:  # an abstract argument: the call moves to its namespace
                return over.call(prim, args, {**kwdefaults, **kw})

        return f

    # -- indexing -------------------------------------------------------------------------------
    def getitem(self) -> Callable[[Array, Any], Array]:
        unwrap, wrap, mod = self.unwrap("__getitem__"), self.wrap(), self.mod
        GETITEM = REGISTRY["__getitem__"]  # noqa: N806
        mutable = self.backend.mutable

        def getitem(x: Array, key: Any) -> Array:
            if REDIRECT.closed is mod:  # compile is tracing: record (see closed_call)
                A = cast(ModuleType, REDIRECT.ns)
                return A._getitem(A.asarray(x), key)
            try:
                k = unwrap(key)
            except HandOver as over:  # a batched index (vmap): the call moves to its level
                return over.ns._getitem(over.ns._make(over.ns._backend.lift(x)), key)
            try:
                out = wrap(x._data[k])
            except (ValueError, TypeError, IndexError) as e:
                raise _explain("__getitem__", e, (x._data, k)) from e
            if mutable and _is_basic(key):  # NumPy returns a view: keep the aliasing
                note_view(out, x, key)
            if x._node is not None and MODE.enabled:
                return record(GETITEM, mod, out, (x, key), {})
            return out

        return getitem

    def setitem(self) -> Callable[[Array, Any, Any], None]:
        """``x[key] = value``: rebind ``x`` to the updated array.

        On a mutable backend the buffer is written in place (NumPy semantics: views see it)
        unless a tape could see the change: when ``x`` or ``value`` is being differentiated, or
        ``x``'s buffer is saved for a backward pass. Then the update is functional (copy, then
        write) and recorded. Under ``no_grad`` it is always in place.
        """
        unwrap, backend, mod, new, bk = (
            self.unwrap("__setitem__"),
            self.backend,
            self.mod,
            self.new(),
            self.bk,
        )

        def new_like(x: Array) -> Array:
            a = new(x._data)
            a._node = x._node
            return a

        SETITEM = REGISTRY["__setitem__"]  # noqa: N806

        def setitem(x: Array, key: Any, value: Any) -> None:
            if not backend.mutable:
                raise NotImplementedError(
                    f"__setitem__: the {backend.name} backend has immutable arrays; "
                    "build the new array with xp.where(mask, value, x) instead"
                )
            if REDIRECT.closed is mod:
                raise closed_write_error("__setitem__", x)
            try:
                k, v = unwrap(key), unwrap(value)
            except HandOver as over:  # a batched value or key (vmap): x becomes batched
                if over.ns._backend.lift is None:  # a traced value into a concrete array
                    raise closed_write_error("__setitem__", x) from None
                lifted = over.ns._make(over.ns._backend.lift(new_like(x)))
                over.ns._setitem(lifted, key, value)
                x._rebind(lifted, "__setitem__")
                return
            value_tracked = isinstance(value, Array) and value._node is not None
            if not MODE.enabled or (
                x._node is None and not value_tracked and not is_saved(backend, x._data)
            ):
                x._data[k] = v  # nothing being recorded can see this buffer change
                note_write(backend, x._data)  # a retained graph that saved it will refuse it
                return
            if is_leaf(x._node):
                raise RuntimeError(
                    "__setitem__: this array is a leaf that requires grad; writing into it "
                    "would lose its gradient. Update it under pycograd_xp.no_grad(), or write "
                    "into a copy (xp.asarray(x, copy=True))"
                )
            data = bk.asarray(x._data, copy=True)
            data[k] = v
            out = new(data)
            if x._node is not None or value_tracked:
                record(SETITEM, mod, out, (x, key, value), {})
            rebind(x, out._data, out._node)

        return setitem


def _is_basic(key: Any) -> bool:
    """Whether ``key`` is basic indexing (ints, slices, ``...``, None): NumPy gives a view."""
    parts = key if type(key) is tuple else (key,)
    return all(type(k) in _BASIC_KEYS for k in parts)


_BASIC_KEYS = frozenset({int, slice, type(None), type(Ellipsis)})


def _check_axis(fname: str, axis: Any, ndim: int) -> None:
    for a in axis if isinstance(axis, tuple) else (axis,):
        if not isinstance(a, int) or isinstance(a, bool):
            raise TypeError(f"{fname}(): axis must be an int or a tuple of ints, got {axis!r}")
        if not -ndim <= a < ndim:
            raise AxisError(
                f"{fname}(): axis {a} is out of range for an array of {ndim} dimensions; "
                f"use an axis in [{-ndim}, {ndim - 1}]"
            )


def build(backend: Backend) -> ModuleType:
    """Make the namespace module ``pycograd_xp.<backend.name>``."""
    name = f"pycograd_xp.{backend.name}"
    mod = ModuleType(name, f"The Array API standard over {backend.xp.__name__}, differentiable.")
    b = _Builder(backend, mod)
    namespace_module(mod, b.function)  # __getitem__/__setitem__: served by the Array class
    for dtype_name in DTYPE_NAMES:
        setattr(mod, dtype_name, getattr(backend.xp, dtype_name))
    for const in CONSTANTS:
        setattr(mod, const, getattr(backend.xp, const))
    install_operators(b.Arr, mod)
    info = Info(backend)
    mod.__dict__.update(
        __array_api_version__="2025.12",
        __array_namespace_info__=lambda: info,
        _api_versions=API_VERSIONS,
        _backend=backend,
        _make=functools.partial(make, b.Arr),
        _floating=b.categories["floating-point"],
        _real_floating=b.categories["real floating-point"],
        _getitem=b.getitem(),
        _setitem=b.setitem(),
        Array=b.Arr,
    )
    for m in (mod, mod.linalg, mod.fft):
        sys.modules[m.__name__] = m
    return mod
