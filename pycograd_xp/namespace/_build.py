"""Build a namespace module for one backend from the primitive table.

``build(backend)`` makes a fresh module ``pycograd_xp.<backend>`` with its own Array subclass and
one public function per row of :data:`~pycograd_xp.namespace._ops.REGISTRY`. Each public
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
from typing import Any

from .._primitive import CATEGORIES, LINALG_ALIASES, REGISTRY, Primitive
from .._tape import MODE, REDIRECT, is_leaf, is_saved, note_write
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
DTYPE_NAMES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
               "float32", "float64", "complex64", "complex128")  # fmt: skip
CONSTANTS = ("e", "inf", "nan", "newaxis", "pi")
# Parameter names of the standard that never hold arrays: passed to the backend untouched.
_PLAIN_PARAMS = frozenset({
    "axis", "axes", "dtype", "keepdims", "device", "copy", "k", "offset", "correction",
    "descending", "stable", "side", "mode", "norm", "upper", "full_matrices", "include_initial",
    "indexing", "endpoint", "invert", "ord", "n", "s", "d", "num", "shape", "source",
    "destination", "shift", "n_rows", "n_cols", "kind",
})  # fmt: skip
# Functions whose job is to take data from outside (foreign arrays are welcome there).
_CONVERTERS = frozenset({"asarray", "from_dlpack"})


def closed_call(prim: Primitive, args: tuple, kwargs: dict) -> Any:
    """A call of the namespace ``compile`` traces on (``REDIRECT.closed``), moved to the
    recording namespace. Its concrete arrays are ones the function closes over: each becomes a
    constant the replay reads (``asarray`` of it, no copy), so the replay computes the call
    afresh from the array's contents at that call, as the function itself does. Run here, the
    result would be a snapshot, stale once the caller writes into the array."""
    A = REDIRECT.ns
    return _function_of(A, prim)(*_recorded(A, args),
                                 **{k: _recorded(A, v) for k, v in kwargs.items()})


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


class Forward(Exception):  # noqa: N818 - a signal, not an error
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
_EXAMPLE_DTYPE = {"complex floating-point": "complex128", "integer": "int64",
                  "integer or boolean": "int64", "boolean": "bool"}  # fmt: skip


def _dtype_error(fname: str, dtype: Any, category: str) -> TypeError:
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
    called = [_describe(a) for a in args] + [f"{k}={_describe(v)}" for k, v in
                                             (kwargs or {}).items()]  # fmt: skip
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


class _Builder:
    """Everything one namespace's functions close over: its backend and its Array class."""

    def __init__(self, backend: Backend, mod: ModuleType) -> None:
        self.backend = backend
        self.bk = bk = backend.xp
        self.mod = mod
        self.Arr = type("Array", (Array,), {"__slots__": (), "_ns": mod, "_backend": backend,
                                             "__module__": mod.__name__,
                                             "__qualname__": "Array"})  # fmt: skip
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
            a = obj_new(Arr)
            a._data = data
            a._node = None
            return a

        if not self.backend.abstract:
            return new
        from .._abstract import CURRENT

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

        An array of an abstract namespace given to a concrete one raises :class:`Forward` (the
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
                        raise Forward(a._ns)
                    return lift(a)
                if a._backend.abstract and not abstract:
                    raise Forward(a._ns)
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
        Arr = self.Arr

        def unwrap(a: Any) -> Any:
            if type(a) is Arr:
                return a._data
            if isinstance(a, Array):  # another namespace's array: take its value
                if a._backend.level != self.backend.level:  # vmap: see unwrap
                    if a._backend.level > self.backend.level:
                        raise Forward(a._ns)
                    return self.backend.lift(a)
                if a._backend.abstract and not self.backend.abstract:
                    raise Forward(a._ns)
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
        return elementwise_recorder(prim, self.mod, floating, self.backend.chunked,
                                    self.backend.abstract)  # fmt: skip

    def _backend_fn(self, prim: Primitive) -> Callable[..., Any]:
        if prim.impl is None:
            return getattr(self.bk, prim.name)
        return functools.partial(prim.impl, self.bk)

    def unary(self, prim: Primitive) -> Callable[[Any], Array]:
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
                except Forward as fw:
                    return fw.call(prim, (x,), {})
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
            except Forward as fw:  # an abstract operand: the call moves to its namespace
                return fw.call(prim, (x1, x2), {})

        return f

    def general(self, prim: Primitive) -> Callable[..., Any]:
        """A function with the row's exact signature, compiled from source like ``namedtuple``.

        For ``sum(x, /, *, axis=None, dtype=None, keepdims=False)`` the source reads::

            def sum(x, /, *, axis=None, dtype=None, keepdims=False):
                tracked = False
                if typeof(x) is Arr:
                    if x._data.dtype not in allowed: raise dtype_error(x._data)
                    x_ = x._data
                    if x._node is not None: tracked = True
                else:
                    x_ = unwrap(x)
                if axis is not None: check_axis(axis, x_.ndim)
                out = wrap(impl(bk, x_, axis=axis, dtype=dtype, keepdims=keepdims))
                if tracked and MODE.enabled:
                    return record(prim, ns, out, (x,), {"axis": axis, ...})
                return out

        Parameters in :data:`_PLAIN_PARAMS` never hold arrays and pass through untouched; the
        dtype check applies to the positional parameters that hold arrays. Compiling saves the
        ``*args``/``**kwargs`` packing and unpacking a generic wrapper pays on every call.
        """
        name, sig = prim.name, prim.signature
        assert prim.impl is not None and sig is not None
        diff = prim.vjp is not None
        env = {
            "Arr": self.Arr, "wrap": self.wrap(), "impl": prim.impl, "bk": self.bk,
            "unwrap": self.unwrap_foreign() if name in _CONVERTERS else self.unwrap(name),
            "allowed": self.categories[prim.dtypes] if prim.dtypes else None,
            "dtype_error": lambda data: _dtype_error(name, data.dtype, prim.dtypes),
            "check_axis": lambda axis, ndim: _check_axis(name, axis, ndim),
            "defaults": [p.default for p in sig.parameters.values()],
            "MODE": MODE, "record": record, "prim": prim, "ns": self.mod, "typeof": type,
            "any_tracked": _any_tracked, "explain": _explain, "name": name,
            "Forward": Forward, "REDIRECT": REDIRECT, "closed_call": closed_call,
        }  # fmt: skip
        P = inspect.Parameter
        plist = list(sig.parameters.values())
        params, call, body, rec_args, rec_kwargs = [], [], ["    tracked = False"], [], []
        for i, p in enumerate(plist):
            default = "" if p.default is P.empty else f"=defaults[{i}]"
            plain = p.name in _PLAIN_PARAMS
            var = p.name if plain else p.name + "_"
            if p.kind is P.VAR_POSITIONAL:
                params.append(f"*{p.name}")
                call.append(f"*{var}")
                rec_args.append(f"*{p.name}")
            elif p.kind is P.KEYWORD_ONLY:
                if not any(q.kind in (P.KEYWORD_ONLY, P.VAR_POSITIONAL) for q in plist[:i]):
                    params.append("*")
                params.append(p.name + default)
                call.append(f"{p.name}={var}")
                rec_kwargs.append(f"{p.name!r}: {p.name}")
            else:
                params.append(p.name + default)
                call.append(var)
                rec_args.append(p.name)
                if p.kind is P.POSITIONAL_ONLY and (
                    i + 1 == len(plist) or plist[i + 1].kind is not P.POSITIONAL_ONLY
                ):
                    params.append("/")
            if plain:
                continue
            n = p.name
            if p.kind is not P.VAR_POSITIONAL:
                lines = [f"    if typeof({n}) is Arr:"]  # a parameter may be named "type"
                if p.kind is P.POSITIONAL_ONLY and env["allowed"] is not None:
                    lines += [f"        if {n}._data.dtype not in allowed:",
                              f"            raise dtype_error({n}._data)"]  # fmt: skip
                lines += [f"        {n}_ = {n}._data"]
                if diff:
                    lines += [f"        if {n}._node is not None: tracked = True"]
                lines += ["    else:", f"        {n}_ = unwrap({n})"]
            else:
                lines = [f"    {n}_ = unwrap({n})"]
            if diff and (p.kind is P.VAR_POSITIONAL or "array" in n):
                lines += [f"    if not tracked and any_tracked({n}): tracked = True"]
            body += lines
        if prim.axis_check:
            body.append(f"    if axis is not None: check_axis(axis, {plist[0].name}_.ndim)")
        # a backend error is restated with the function's name and the arguments' shapes
        pos = "".join(c + ", " for c in call if "=" not in c)
        kw = ", ".join(f"{k!r}: {v}" for k, _, v in (c.partition("=") for c in call if "=" in c))
        body += ["    try:",
                 f"        out = wrap(impl(bk, {', '.join(call)}))",
                 "    except (ValueError, TypeError, IndexError) as e:",
                 f"        raise explain(name, e, ({pos}), {{{kw}}}) from e"]  # fmt: skip
        if diff:
            body += ["    if tracked and MODE.enabled:",
                     f"        return record(prim, ns, out, ({', '.join(rec_args)},), "
                     f"{{{', '.join(rec_kwargs)}}})"]  # fmt: skip
        body.append("    return out")
        original = f"({', '.join(rec_args)}{',' if rec_args else ''}), {{{', '.join(rec_kwargs)}}}"
        body = ["    " + line for line in body]
        body = ["    try:", *body, "    except Forward as fw:  # an abstract argument: move there",
                f"        return fw.call(prim, {original})"]  # fmt: skip
        if name in _SHAPE_CREATORS:  # while projecting, make abstract arrays instead
            body = ["    if REDIRECT.ns is not None and REDIRECT.ns is not ns:",
                    f"        return Forward(REDIRECT.ns).call(prim, {original})", *body]
        else:  # while compile traces on this namespace, record (see closed_call)
            body = ["    if REDIRECT.closed is ns:",
                    f"        return closed_call(prim, {original})", *body]
        src = f"def {prim.short_name}({', '.join(params)}):\n" + "\n".join(body) + "\n"
        exec(compile(src, f"<pycograd_xp {name}>", "exec"), env)
        f = env[prim.short_name]
        f.__signature__ = sig  # type: ignore[attr-defined]
        f._source = src  # type: ignore[attr-defined]
        return f

    # -- indexing -------------------------------------------------------------------------------
    def getitem(self) -> Callable[[Array, Any], Array]:
        unwrap, wrap, mod = self.unwrap("__getitem__"), self.wrap(), self.mod
        GETITEM = REGISTRY["__getitem__"]  # noqa: N806
        mutable = self.backend.mutable

        def getitem(x: Array, key: Any) -> Array:
            if REDIRECT.closed is mod:  # compile is tracing: record (see closed_call)
                A = REDIRECT.ns
                return A._getitem(A.asarray(x), key)
            try:
                k = unwrap(key)
            except Forward as fw:  # a batched index (vmap): the call moves to its level
                return fw.ns._getitem(fw.ns._make(fw.ns._backend.lift(x)), key)
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
        unwrap, backend, mod, new, bk = self.unwrap("__setitem__"), self.backend, self.mod, \
            self.new(), self.bk  # fmt: skip

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
            except Forward as fw:  # a batched value or key (vmap): x becomes batched
                if fw.ns._backend.lift is None:  # a traced value into a concrete array
                    raise closed_write_error("__setitem__", x) from None
                lifted = fw.ns._make(fw.ns._backend.lift(new_like(x)))
                fw.ns._setitem(lifted, key, value)
                x._rebind(lifted, "__setitem__")
                return
            value_tracked = isinstance(value, Array) and value._node is not None
            if not MODE.enabled or (x._node is None and not value_tracked
                                    and not is_saved(backend, x._data)):  # fmt: skip
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
    ext = {"linalg": ModuleType(f"{name}.linalg"), "fft": ModuleType(f"{name}.fft")}
    for prim in REGISTRY.values():
        if prim.kind == "method":  # __getitem__/__setitem__: served by the Array class
            continue
        target = ext[prim.scope] if prim.scope else mod
        setattr(target, prim.short_name, b.function(prim))
    for alias in LINALG_ALIASES:
        setattr(ext["linalg"], alias, getattr(mod, alias))
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
        linalg=ext["linalg"],
        fft=ext["fft"],
    )
    for m in (mod, *ext.values()):
        sys.modules[m.__name__] = m
    return mod
