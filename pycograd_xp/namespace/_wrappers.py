"""The bodies of the public functions of general rows: one closure factory per signature shape.

A namespace's public function for a general row is a closure made by one of the factories of
:class:`GeneralWrappers` (one array, with or without keywords; an array and a plain value; two or
three arrays; a list of arrays; no array; the plain path for the rest), chosen by :class:`_Params`
from the row's signature. Each takes its arguments at a fixed arity, checks the dtypes, unwraps our
arrays, calls the backend, wraps the result and records a tape node when an argument is
differentiated. Every other case (an argument of another namespace, abstract or batched; ``compile``
tracing this namespace; a creation call while ``memory`` projects) leaves through the one choke
point, :func:`~pycograd_xp.namespace._dispatch.bind`. Errors name the function and the way out
(:func:`_explain`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from types import ModuleType
from typing import Any

from .._primitive import Primitive
from .._state import STACK
from ._array import Array
from ._dispatch import SHAPE_CREATORS, HandOver, bind
from ._record import record

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


def _any_tracked(a: Any) -> bool:
    """Whether a list/tuple argument holds an array that is being differentiated."""
    if isinstance(a, list | tuple):
        return any(_any_tracked(e) for e in a)
    return isinstance(a, Array) and a._node is not None


class AxisError(ValueError, IndexError):
    """An axis argument outside ``[-ndim, ndim)``."""


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
    if str(err).startswith((f"{fname}(", f"{fname.lstrip('_')}(")):
        return err  # already names the function, or the public one a private row serves
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
    arguments may hold arrays, and which factory of :class:`GeneralWrappers` makes the function
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
        hold no array and have defaults, :meth:`GeneralWrappers.any_shape` for the rest."""
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


def _check_axis(fname: str, axis: Any, ndim: int) -> None:
    for a in axis if isinstance(axis, tuple) else (axis,):
        if not isinstance(a, int) or isinstance(a, bool):
            raise TypeError(f"{fname}(): axis must be an int or a tuple of ints, got {axis!r}")
        if not -ndim <= a < ndim:
            raise AxisError(
                f"{fname}(): axis {a} is out of range for an array of {ndim} dimensions; "
                f"use an axis in [{-ndim}, {ndim - 1}]"
            )


class GeneralWrappers:
    """The factories of general rows' public functions, a part of the namespace builder
    (``namespace._build._Builder``), which provides the attributes below."""

    Arr: Any
    bk: Any
    backend: Any
    mod: ModuleType
    categories: dict[str, Any]
    new: Any
    wrap: Any
    unwrap: Any
    unwrap_foreign: Any

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
        unwrap = self.unwrap_foreign(name) if name in _CONVERTERS else self.unwrap(name)
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
            if STACK.closed is ns:  # compile is tracing: recorded (see _dispatch.bind)
                return bind(prim, ns, (x,), {**kwdefaults, **kw})
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
                    if axis is not None and (type(axis) is not int or not -d.ndim <= axis < d.ndim):
                        _check_axis(name, axis, d.ndim)  # a tuple, or an axis to refuse
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
                if tracked and STACK.grad_enabled:
                    return record(prim, ns, out, (x,), {**kwdefaults, **kw})
                return out
            except HandOver as over:  # an abstract argument: the call moves to its namespace
                return bind(prim, ns, (x,), {**kwdefaults, **kw}, over.ns)

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
            if STACK.closed is ns:  # compile is tracing: recorded (see _dispatch.bind)
                return bind(prim, ns, (x,), {})
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
                if tracked and STACK.grad_enabled:
                    return record(prim, ns, out, (x,), {})
                return out
            except HandOver as over:  # an abstract argument: the call moves to its namespace
                return bind(prim, ns, (x,), {}, over.ns)

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
            if a is _ABSENT or more:  # a by keyword (expand_dims(x, axis=0)), or a call to refuse
                if a is _ABSENT and not more and a_name is not None and a_name in kw:
                    a = kw.pop(a_name)
                else:
                    (x, a), kw = params.bind(_given(x, a, *more), kw)
            if STACK.closed is ns:  # compile is tracing: recorded (see _dispatch.bind)
                return bind(prim, ns, (x, a), {**kwdefaults, **kw})
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
                    if axis is not None and (type(axis) is not int or not -d.ndim <= axis < d.ndim):
                        _check_axis(name, axis, d.ndim)  # a tuple, or an axis to refuse
                try:
                    r = impl(bk, d, a, **kw) if kw else impl(bk, d, a)
                    out = new(r) if type(r) is T else wrap(r)
                except (ValueError, TypeError, IndexError) as e:
                    params.refuse((x, a), kw)
                    raise _explain(name, e, (d, a), {**kwdefaults, **kw}) from e
                if tracked and STACK.grad_enabled:
                    return record(prim, ns, out, (x, a), {**kwdefaults, **kw})
                return out
            except HandOver as over:  # an abstract argument: the call moves to its namespace
                return bind(prim, ns, (x, a), {**kwdefaults, **kw}, over.ns)

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
            if STACK.closed is ns:  # compile is tracing: recorded (see _dispatch.bind)
                return bind(prim, ns, (x1, x2), {**kwdefaults, **kw})
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
                if diff and tracked and STACK.grad_enabled:
                    return record(prim, ns, out, (x1, x2), {**kwdefaults, **kw})
                return out
            except HandOver as over:  # an abstract argument: the call moves to its namespace
                return bind(prim, ns, (x1, x2), {**kwdefaults, **kw}, over.ns)

        return f

    def two_arrays_only(self, prim: Primitive, params: _Params) -> Callable[..., Any]:
        """``f(x1, x2, /)``: ``matmul``, ``linalg.solve``, ``linalg.outer``, ``tile``, ...
        (:meth:`two_arrays` without keywords: no dict made per call)."""
        name, impl, allowed, unwrap = self._parts(prim)
        Arr, bk, ns, wrap, dtypes = self.Arr, self.bk, self.mod, self.wrap(), prim.dtypes
        T, new = self.backend.array_type, self.new()  # one backend array: wrapped at once
        diff = prim.vjp is not None

        def f(x1: Any, x2: Any, /) -> Any:
            if STACK.closed is ns:  # compile is tracing: recorded (see _dispatch.bind)
                return bind(prim, ns, (x1, x2), {})
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
                if diff and tracked and STACK.grad_enabled:
                    return record(prim, ns, out, (x1, x2), {})
                return out
            except HandOver as over:  # an abstract argument: the call moves to its namespace
                return bind(prim, ns, (x1, x2), {}, over.ns)

        return f

    def three_arrays(self, prim: Primitive, params: _Params) -> Callable[..., Any]:
        """``f(condition, x1, x2, /)``: ``where``."""
        name, impl, allowed, unwrap = self._parts(prim)
        Arr, bk, ns, wrap, dtypes = self.Arr, self.bk, self.mod, self.wrap(), prim.dtypes
        T, new = self.backend.array_type, self.new()  # one backend array: wrapped at once
        diff = prim.vjp is not None

        def f(condition: Any, x1: Any, x2: Any, /) -> Any:
            if STACK.closed is ns:  # compile is tracing: recorded (see _dispatch.bind)
                return bind(prim, ns, (condition, x1, x2), {})
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
                if diff and tracked and STACK.grad_enabled:
                    return record(prim, ns, out, (condition, x1, x2), {})
                return out
            except HandOver as over:  # an abstract argument: the call moves to its namespace
                return bind(prim, ns, (condition, x1, x2), {}, over.ns)

        return f

    def array_list(self, prim: Primitive, params: _Params) -> Callable[..., Any]:
        """``f(arrays, /, *, <keywords>)``: ``concat``, ``stack``."""
        name, impl, allowed, unwrap = self._parts(prim)
        Arr, bk, ns, wrap, dtypes = self.Arr, self.bk, self.mod, self.wrap(), prim.dtypes
        T, new = self.backend.array_type, self.new()  # one backend array: wrapped at once
        kwdefaults, diff = params.kwdefaults, prim.vjp is not None

        def f(arrays: Any, /, **kw: Any) -> Any:
            if STACK.closed is ns:  # compile is tracing: recorded (see _dispatch.bind)
                return bind(prim, ns, (arrays,), {**kwdefaults, **kw})
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
                if tracked and STACK.grad_enabled:
                    return record(prim, ns, out, (arrays,), {**kwdefaults, **kw})
                return out
            except HandOver as over:  # an abstract argument: the call moves to its namespace
                return bind(prim, ns, (arrays,), {**kwdefaults, **kw}, over.ns)

        return f

    def no_array(self, prim: Primitive, params: _Params) -> Callable[..., Any]:
        """``f(a, /, *, <keywords>)`` where nothing holds an array (``zeros``, ``ones``,
        ``empty``, ``fft.fftfreq``): all is passed as given, nothing is recorded."""
        name, impl, bk, ns, wrap = prim.name, prim.impl, self.bk, self.mod, self.wrap()
        T, new = self.backend.array_type, self.new()  # one backend array: wrapped at once
        kwdefaults, creates = params.kwdefaults, name in SHAPE_CREATORS
        assert impl is not None

        def f(a: Any = _ABSENT, /, *more: Any, **kw: Any) -> Any:
            if a is _ABSENT or more:  # ``a`` given by keyword, or a call to refuse
                (a,), kw = params.bind(_given(a, *more), kw)
            if creates:
                if STACK.redirect is not None and STACK.redirect is not ns:  # abstract arrays
                    return bind(prim, ns, (a,), {**kwdefaults, **kw})
            elif STACK.closed is ns:  # compile is tracing: recorded (see _dispatch.bind)
                return bind(prim, ns, (a,), {**kwdefaults, **kw})
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
        kwdefaults, diff, creates = params.kwdefaults, prim.vjp is not None, name in SHAPE_CREATORS
        is0, is1, is2 = (i in params.arrays for i in range(3))  # may hold an array
        ch0, ch1, ch2 = (i in params.checked and allowed is not None for i in range(3))

        def f(
            a0: Any = _ABSENT, a1: Any = _ABSENT, a2: Any = _ABSENT, /, *more: Any, **kw: Any
        ) -> Any:
            if a2 is _ABSENT or more:  # left to its default, given by keyword, or refused
                (a0, a1, a2), kw = params.bind(_given(a0, a1, a2, *more), kw)
            if creates:
                if STACK.redirect is not None and STACK.redirect is not ns:  # abstract arrays
                    return bind(prim, ns, (a0, a1, a2), {**kwdefaults, **kw})
            elif STACK.closed is ns:  # compile is tracing: recorded (see _dispatch.bind)
                return bind(prim, ns, (a0, a1, a2), {**kwdefaults, **kw})
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
                if diff and tracked and STACK.grad_enabled:
                    return record(prim, ns, out, (a0, a1, a2), {**kwdefaults, **kw})
                return out
            except HandOver as over:  # an abstract argument: the call moves to its namespace
                return bind(prim, ns, (a0, a1, a2), {**kwdefaults, **kw}, over.ns)

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
        npos, var, creates = len(params.names), params.var, name in SHAPE_CREATORS
        lists_too = diff and (bool(lists) or var)  # a list is tracked when an element is
        axis_at = None if "axis" in kwdefaults or not axis_check else params.names.index("axis")

        def f(*args: Any, **kw: Any) -> Any:
            if len(args) != npos:  # a positional parameter left out or given by keyword, *args
                args, kw = params.bind(args, kw)  # or Python's TypeError
            if creates:
                if STACK.redirect is not None and STACK.redirect is not ns:  # abstract arrays
                    return bind(prim, ns, args, {**kwdefaults, **kw})
            elif STACK.closed is ns:  # compile is tracing: recorded (see _dispatch.bind)
                return bind(prim, ns, args, {**kwdefaults, **kw})
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
                    if axis is not None and (
                        type(axis) is not int or not -pos[0].ndim <= axis < pos[0].ndim
                    ):
                        _check_axis(name, axis, pos[0].ndim)  # a tuple, or an axis to refuse
                try:
                    r = impl(bk, *pos, **kwd) if kwd else impl(bk, *pos)
                    out = new(r) if type(r) is T else wrap(r)
                except (ValueError, TypeError, IndexError) as e:
                    params.refuse(args, kw)
                    raise _explain(name, e, tuple(pos), {**kwdefaults, **kwd}) from e
                if diff and tracked and STACK.grad_enabled:
                    return record(prim, ns, out, args, {**kwdefaults, **kw})
                return out
            except HandOver as over:  # an abstract argument: the call moves to its namespace
                return bind(prim, ns, args, {**kwdefaults, **kw}, over.ns)

        return f
