"""Build a namespace module for one backend from the primitive table.

``build(backend)`` makes a fresh module ``pycograd_xp.<backend>`` with its own Array subclass and
one public function per row of :data:`~pycograd_xp.ops.REGISTRY`. Each public function unwraps our
arrays to backend arrays, checks dtypes (and axes where the row asks), calls the row's ``impl`` on
the backend, wraps the result and records a tape node when an argument is differentiated; every
other case leaves through ``_dispatch.bind``. Those functions are the eager interpreter's
families (``namespace/_eager.py``); the moving of arrays between ours and the backend's, and
indexing, are written here.
"""

from __future__ import annotations

import functools
import numbers
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from .._primitive import CATEGORIES, CONSTANTS, DTYPE_NAMES, REGISTRY, Primitive, namespace_module
from .._state import STACK
from .._tape import is_leaf, is_saved, note_write
from ._array import PLAIN_TYPES, Array, make
from ._backend import Backend
from ._dispatch import HandOver, bind
from ._eager import Eager
from ._frontend import NUMPY_CONSTANTS, index_constants, numpy_frontend
from ._immutable import functional_setitem
from ._operators import install_operators
from ._record import record
from ._signature import explain
from ._writes import ViewBy, closed_write_error, note_view, rebind

API_VERSIONS = ("2021.12", "2022.12", "2023.12", "2024.12", "2025.12")


def _holds_array(a: list | tuple) -> bool:
    """Whether a (nested) list or tuple holds one of our arrays (``asarray`` then unwraps a
    copy of it; a list of Python numbers passes as it is, with no copy of its million
    references)."""
    return any(
        isinstance(e, Array) or ((type(e) is list or type(e) is tuple) and _holds_array(e))
        for e in a
    )


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


# the standard's functions whose output shape depends on the data: a backend that reports
# "data-dependent shapes": False (a lazy one: Cubed) cannot have them
_DATA_DEPENDENT = frozenset(
    {"nonzero", "unique_all", "unique_counts", "unique_inverse", "unique_values"}
)


def _missing(fname: str, backend: Backend, missing: str) -> Callable[..., Any]:
    why = "use a backend that does (e.g. numpy) for this function"
    if fname in _DATA_DEPENDENT and not _data_dependent_shapes(backend):
        why = (
            "its result's shape depends on the data, which this backend cannot have (its "
            "capabilities: 'data-dependent shapes': False); compute the array first and call "
            f"it eagerly, e.g. pycograd_xp.namespace(numpy).{fname}(numpy.asarray(x))"
        )

    def unavailable(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f"{fname}(): the {backend.name} backend does not implement {missing}; {why}"
        )

    return unavailable


def _data_dependent_shapes(backend: Backend) -> bool:
    """The backend's ``capabilities()["data-dependent shapes"]`` (True when it reports none)."""
    try:
        info = backend.xp.__array_namespace_info__()
        return bool(info.capabilities().get("data-dependent shapes", True))
    except Exception:  # a namespace without the inspection API
        return True


def _has(xp: Any, dotted: str) -> bool:
    obj = xp
    for part in dotted.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            return False
    return True


class _Builder(Eager):
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
                return t(map(unwrap, a))
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

    def unwrap_foreign(self, name: str) -> Callable[[Any], Any]:
        """For converters: our arrays unwrap, anything else (lists, NumPy arrays) passes; a list
        is copied only where it holds arrays of ours. While memory projects (or compile traces
        another namespace), ``asarray`` of Python values moves to the abstract namespace, as
        the shape creators do (``_dispatch.bind``, case 3): its result is counted."""
        Arr, lift, mod, abstract = self.Arr, self.backend.lift, self.mod, self.backend.abstract
        redirects = name == "asarray" and not abstract

        def convert(a: Any) -> Any:
            if redirects and STACK.redirect is not None and STACK.redirect is not mod:
                if not isinstance(a, Array):
                    raise HandOver(STACK.redirect)
            return unwrap(a)

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
            if (type(a) is list or type(a) is tuple) and _holds_array(a):
                return type(a)(unwrap_element(e) for e in a)
            return a

        def unwrap_element(e: Any) -> Any:
            if isinstance(e, Array) and e._node is not None:
                raise TypeError(
                    f"{name}(): the sequence holds an array being differentiated, and "
                    "converting it would drop its gradient; build the array with "
                    "xp.stack([...]) (a stack of stacks for nested lists) to keep it"
                )
            return unwrap(e)

        return convert

    # -- one public function per row -------------------------------------------------------------
    def function(self, prim: Primitive) -> Callable[..., Any]:
        missing = [n for n in prim.needs if not _has(self.bk, n)]
        if missing:
            f = _missing(prim.name, self.backend, ", ".join(missing))
            if prim.signature is not None:
                f.__signature__ = prim.signature  # type: ignore[attr-defined]
        else:
            f = self.eager(prim)[0]
            b = self.backend
            if prim.name in VIEW_ROWS and b.mutable:
                f = _noting_views(f, b.buffer)
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

    # -- indexing -------------------------------------------------------------------------------
    def getitem(self) -> Callable[[Array, Any], Array]:
        unwrap, wrap, mod = self.unwrap("__getitem__"), self.wrap(), self.mod
        GETITEM = REGISTRY["__getitem__"]
        mutable = self.backend.mutable
        numpy_keys = index_constants(mod) if self.backend.numpy_functions else None
        index, buffer, bk = self.backend.getitem, self.backend.buffer, self.bk
        b = self.backend  # (a concrete backend that gives 0-d views of its own: CuPy)
        zero_d_views = b.scalar_type is None and not b.abstract and b.lift is None
        batched = b.lift is not None  # (vmap: its examples' data are views of the batch's)

        def getitem(x: Array, key: Any) -> Array:
            if numpy_keys is not None and type(key) not in _BASIC_KEYS:
                key = numpy_keys(key)  # NumPy index arrays: constants (xarray's groupby)
            if STACK.closed is mod:  # compile is tracing: recorded (see _dispatch.bind)
                return bind(GETITEM, mod, (x, key), {})
            try:
                k = unwrap(key)
            except HandOver as over:  # a batched index (vmap): the call moves to its level
                return over.ns._getitem(over.ns._make(over.ns._backend.lift(x)), key)
            try:
                out = wrap(x._data[k] if index is None else index(x._data, k))
            except (ValueError, TypeError, IndexError) as e:
                raise explain("__getitem__", e, (x._data, k)) from e
            # NumPy returns a view: keep the aliasing. An integer per axis gives NumPy's
            # scalar, a copy, which writes must not carry to x: a 0-d array of x's memory is
            # copied (a traced or batched one: the function's own values under compile and
            # vmap), unless a concrete device backend gives such views itself (CuPy)
            if mutable and _is_basic(key):
                if not _one_int_per_axis(key, x.ndim):
                    note_view(out, x, key)
                elif batched or buffer(out._data) is buffer(x._data):
                    if zero_d_views:
                        note_view(out, x, key)
                    else:
                        out = wrap(bk.asarray(out._data, copy=True))
            if x._node is not None and STACK.grad_enabled:
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

        SETITEM = REGISTRY["__setitem__"]
        numpy_keys = index_constants(mod) if backend.numpy_functions else None

        def setitem(x: Array, key: Any, value: Any) -> None:
            if numpy_keys is not None and type(key) not in _BASIC_KEYS:
                key = numpy_keys(key)
            if STACK.closed is mod:
                raise closed_write_error("__setitem__", x)
            if not backend.mutable:  # a new array made of recorded functions, x rebound to it
                x._rebind(functional_setitem(mod, x, key, value), "__setitem__")
                return
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
            recording = STACK.grad_enabled
            if (
                not recording
                or (x._node is None and not value_tracked and not is_saved(backend, x._data))
            ) and not (STACK.unwritable and id(backend.buffer(x._data)) in STACK.unwritable):
                x._data[k] = v  # nothing being recorded can see this buffer change
                note_write(backend, x._data)  # a retained graph that saved it will refuse it
                return
            if recording and is_leaf(x._node):
                raise RuntimeError(
                    "__setitem__: this array is a leaf that requires grad; writing into it "
                    "would lose its gradient. Update it under pycograd_xp.no_grad(), or write "
                    "into a copy (xp.asarray(x, copy=True))"
                )
            data = bk.asarray(x._data, copy=True)
            data[k] = v
            out = new(data)
            if recording and (x._node is not None or value_tracked):
                record(SETITEM, mod, out, (x, key, value), {})
            rebind(x, out._data, out._node)

        return setitem


# The rows whose result NumPy always makes a view of their first argument's memory: the result
# is noted as a view of it (``_writes.ViewBy``), so that a write into either that has to copy (a
# tape sees it, or compile traces it) still reaches the other, as NumPy's write would. Not
# reshape: NumPy's is a view or a copy by the memory layout, which differs between an example
# and vmap's batch, and between a traced argument and a later one; the standard leaves writes
# through views unspecified (docs/guides/mutation.md).
VIEW_ROWS = frozenset(
    {"permute_dims", "matrix_transpose", "expand_dims", "squeeze", "moveaxis", "flip"}
)


def _noting_views(f: Callable[..., Any], buffer: Callable[[Any], Any]) -> Callable[..., Any]:
    """The row ``f`` of :data:`VIEW_ROWS`, its result noted as a view of its first argument
    where it shares that argument's memory."""

    @functools.wraps(f)
    def row(x: Any, /, *args: Any, **kwargs: Any) -> Any:
        out = f(x, *args, **kwargs)
        if type(out) is type(x) and out is not x and buffer(out._data) is buffer(x._data):
            note_view(out, x, ViewBy(f, args, kwargs))
        return out

    return row


def _is_basic(key: Any) -> bool:
    """Whether ``key`` is basic indexing (ints, slices, ``...``, None): NumPy gives a view."""
    parts = key if type(key) is tuple else (key,)
    return all(type(k) in _BASIC_KEYS for k in parts)


_BASIC_KEYS = frozenset({int, slice, type(None), type(Ellipsis)})


def _one_int_per_axis(key: Any, ndim: int) -> bool:
    """Whether a basic ``key`` is an integer for each of ``ndim`` axes (NumPy: a scalar)."""
    parts = key if type(key) is tuple else (key,)
    return len(parts) == ndim and all(type(k) is int for k in parts)


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
    # on NumPy, x * ndarray takes the ndarray as a constant, as ndarray * x does (the protocols)
    install_operators(b.Arr, mod, NUMPY_CONSTANTS if backend.numpy_functions else ())
    if backend.numpy_functions:  # np.exp(x), np.einsum(...): the rows, with gradients
        install_numpy_protocols, numpy_names = numpy_frontend()  # pycograd_xp.numpy_api
        install_numpy_protocols(b.Arr)
        mod.__getattr__ = numpy_names(mod)  # type: ignore[method-assign]  # xp.pad, xp.quantile
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
