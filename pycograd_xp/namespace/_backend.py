"""Resolve what the user passed to ``namespace()`` into a conforming backend and its capabilities.

A :class:`Backend` says what a backend *can do* (lazy, chunked, writable in place, ordered
duplicate writes, an exact scatter-add, block-wise sampling, where its memory lives); rules and
the engine ask for a capability, never compare module names. Capabilities come from probing the
backend, then from its adapter: NumPy's and array-api-strict's are below; other packages
register theirs under the ``pycograd_xp.adapters`` entry-point group (``cubed_plugin`` does for
Cubed), or at run time with :func:`register_adapter`. The core imports no adapter's package.
The record and :func:`capabilities` live in ``namespace/_capabilities.py`` (re-exported here).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import math
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

import numpy as _np

from ._capabilities import _BY_XP, Backend, _base, _owns_buffer, capabilities

__all__ = [
    "Backend",
    "SELECT_MIN",
    "capabilities",
    "load_adapters",
    "numpy_special",
    "register_adapter",
    "resolve",
]

# Modules that conform only through array-api-compat's wrapper of the same name.
_COMPAT_WRAPPED = {"numpy", "cupy", "torch", "dask.array"}


# Adapters by backend short name: ``adapt(backend) -> Backend`` refines the probed capabilities.
_ADAPTERS: dict[str, Callable[[Backend], Backend]] = {}


def register_adapter(name: str, adapt: Callable[[Backend], Backend]) -> None:
    """Make ``adapt`` refine the :class:`Backend` of backends whose short name is ``name``
    (or starts with ``name + "_"``). For namespaces created after the call."""
    _ADAPTERS[name] = adapt


def _adapter(name: str) -> Callable[[Backend], Backend] | None:
    for key in (name, name.split("_")[0]):
        if key in _ADAPTERS:
            return _ADAPTERS[key]
    for ep in entry_points(group="pycograd_xp.adapters"):
        if ep.name in (name, name.split("_")[0]):
            _ADAPTERS[ep.name] = ep.load()
            return _ADAPTERS[ep.name]
    return None


def load_adapters() -> tuple[str, ...]:
    """Load every adapter installed under the ``pycograd_xp.adapters`` entry-point group now,
    rather than when its backend's namespace is first made; loading one imports its package,
    which registers its implementations of rows (``Primitive.implement``). Returns the names
    of the adapters installed that way."""
    names = []
    for ep in entry_points(group="pycograd_xp.adapters"):
        if ep.name not in _ADAPTERS:
            _ADAPTERS[ep.name] = ep.load()
        names.append(ep.name)
    return tuple(names)


def _short_name(mod_name: str) -> str:
    if mod_name.startswith("array_api_compat."):
        mod_name = mod_name[len("array_api_compat.") :]
    # "marray" anywhere in a namespace name makes array-api-compat treat it as MArray.
    return mod_name.replace(".", "_").replace("marray", "m_array")


def _is_mutable(xp: Any, lazy: bool) -> bool:
    if lazy:
        return False
    probe = xp.zeros(2)
    try:
        probe[0] = 1.0
    except Exception:
        return False
    return True


def _probe(xp: Any) -> Backend:
    """The capabilities every backend has or shows by itself."""
    array_type = type(xp.asarray(0))
    chunked = hasattr(array_type, "chunks")
    lazy = chunked and hasattr(array_type, "compute")
    return Backend(
        xp,
        _short_name(xp.__name__),
        array_type,
        lazy=lazy,
        chunked=chunked,
        mutable=(mutable := _is_mutable(xp, lazy)),
        views_alias=mutable,
    )


def _numpy_index_add(size: int, flat_index: Any, values: Any) -> Any:
    import numpy as np

    out = np.zeros(size, dtype=values.dtype)
    np.add.at(out, flat_index, values)
    return out


# Below this many elements NumPy's where beats the blend's five calls
# (docs/calibration.md#select-min).
SELECT_MIN = 4096


def _numpy_select(condition: Any, x1: Any, x2: Any, out: Any = None) -> Any:
    """NumPy's ``where`` as a bitwise blend, ``x2 ^ ((x1 ^ x2) & -condition)`` on the bits (one
    ``&`` where a branch is a Python zero): the same values, NaN payloads and signed zeros
    included, with no branch per element. Allocates the result (or writes it into ``out``, an
    array of the result's shape and dtype, a strided view included, overlapping no operand
    but ``x1`` itself in ``where(c, out, 0)``), and where neither branch is a Python zero an
    int8 copy of the condition."""
    np = _np
    if (  # relu's where(x > 0, x, 0) and its VJP's: the checks below, inline, and their blend
        type(x2) is int
        and x2 == 0
        and type(x1) is np.ndarray
        and type(condition) is np.ndarray
        and condition.dtype == np.bool_
        and condition.shape == x1.shape
        and x1.size >= SELECT_MIN
        and x1.dtype in _BLENDED
        and (out is None or out is x1)
    ):
        ints_of = _INT_OF_SIZE[x1.dtype.itemsize]
        if out is None:  # laid out as the condition, as below
            res = np.empty_like(condition, dtype=x1.dtype)
            ints = res.view(ints_of)
            np.negative(condition.view(np.int8), out=ints)  # all bits set where True
            np.bitwise_and(ints, x1.view(ints_of), out=ints)
            return res
        ints = out.view(ints_of)
        np.bitwise_and(ints, np.negative(condition.view(np.int8)), out=ints)
        return out
    dtype = np.result_type(x1, x2)
    shapes = {getattr(condition, "shape", ()), getattr(x1, "shape", ()), getattr(x2, "shape", ())}
    shapes.discard(())
    # one shape (the common case: arrays alike, Python numbers): no broadcast_shapes call
    shape = shapes.pop() if len(shapes) == 1 else np.broadcast_shapes(*shapes)
    bits = _INT_OF_SIZE.get(dtype.itemsize)
    if (
        getattr(condition, "dtype", None) != np.bool_
        or bits is None
        or math.prod(shape) < SELECT_MIN
        or (out is not None and out.dtype != dtype)
        or _casts(x1, dtype)
        or _casts(x2, dtype)
    ):  # (a branch of another dtype: NumPy's where casts it through its buffers, not whole)
        if out is None:
            return np.where(condition, x1, x2)
        out[...] = np.where(condition, x1, x2)
        return out
    if out is not None:
        res = out
    else:  # owns its memory (no view of an integer array), laid out as where's (an operand's)
        for v in (condition, x1, x2):
            if isinstance(v, np.ndarray) and v.shape == shape:
                res = np.empty_like(v, dtype=dtype)
                break
        else:
            res = np.empty(shape, dtype)
    out = res.view(bits)
    zero1, zero2 = _zero_bits(x1), _zero_bits(x2)
    if res is x1 and zero2:  # where(c, out, 0) in place: out's bits & all-or-none
        np.bitwise_and(out, np.negative(condition.view(np.int8)), out=out)
        return res
    if zero2 or zero1:  # where(c, x, 0), where(c, 0, x): the mask in out
        np.negative(condition.view(np.int8), out=out)  # all bits set where True
        if not zero2:
            np.invert(out, out=out)
        np.bitwise_and(out, np.asarray(x2 if zero1 else x1, dtype=dtype).view(bits), out=out)
        return res
    b = np.asarray(x2, dtype=dtype).view(bits)
    np.bitwise_xor(np.asarray(x1, dtype=dtype).view(bits), b, out=out)
    np.bitwise_and(out, np.negative(condition.view(np.int8)), out=out)
    np.bitwise_xor(out, b, out=out)
    return res


# The integer dtype of each item size the blend works in.
_INT_OF_SIZE = {n: _np.dtype(f"i{n}") for n in (1, 2, 4, 8)}
# The dtypes the blend's fast path takes as they are (real floating point).
_BLENDED = frozenset(map(_np.dtype, ("float16", "float32", "float64")))


def _casts(v: Any, dtype: Any) -> bool:
    """Whether ``v`` is an array of another dtype than ``dtype`` (the blend would copy it
    whole, cast)."""
    return isinstance(v, _np.ndarray) and v.dtype != dtype


def _zero_bits(v: Any) -> bool:
    """A Python number whose bits are all zero (0, 0.0, False; not -0.0)."""
    return type(v) in (int, float, bool) and v == 0 and math.copysign(1.0, v) > 0


def _numpy_matmul_into(x1: Any, x2: Any, out: Any) -> Any:
    import numpy

    return numpy.matmul(x1, x2, out=out)


def _numpy_windows(x: Any, window_shape: tuple[int, ...], axis: tuple[int, ...]) -> Any:
    """NumPy's ``sliding_window_view(x, window_shape, axis=axis)`` (the same read-only view)
    built directly: a convolution takes one per block of the batch, and the general function's
    argument handling cost 15 microseconds a call, ``as_strided`` 6, an ``ndarray`` over a
    contiguous ``x``'s buffer 2."""
    shape = list(x.shape)
    for w, a in zip(window_shape, axis, strict=True):
        if not 0 < w <= shape[a]:
            raise ValueError(f"windows: window {w} does not fit axis {a} of {x.shape}")
        shape[a] -= w - 1
    shape += window_shape
    strides = x.strides + tuple(x.strides[a] for a in axis)
    if x.flags.c_contiguous:
        v = _np.ndarray(tuple(shape), x.dtype, x, 0, strides)
        v.flags.writeable = False
        return v
    from numpy.lib.stride_tricks import as_strided

    return as_strided(x, tuple(shape), strides, writeable=False)


@functools.cache
def numpy_special(name: str) -> Callable[..., Any] | None:
    """scipy.special's function ``name`` (NumPy arrays in and out), imported on first use; None
    without scipy. ``polygamma(n, x)`` is ``digamma`` for ``n == 0`` and otherwise
    ``(-1)^(n+1) n! zeta(n + 1, x)`` as scipy computes it, but in ``x``'s dtype (scipy's own
    returns float64 for float32 input) and with no temporary beyond its result."""
    try:
        import scipy.special as sc
    except ImportError:
        return None
    if name == "polygamma":
        return _numpy_polygamma
    return getattr(sc, name, None)


def _numpy_polygamma(n: int, x: Any) -> Any:
    import scipy.special as sc

    if n == 0:
        return sc.digamma(x)
    try:
        factorial = math.gamma(n + 1.0)
    except OverflowError:  # n > 170: inf, as scipy's gamma(n + 1.0)
        factorial = math.inf
    out = sc.zeta(n + 1, x)
    out *= (-1.0) ** (n + 1) * factorial  # a Python float: x's dtype stays
    return out


def _adapt_numpy(b: Backend) -> Backend:
    import numpy

    return dataclasses.replace(
        b,
        ordered_writes=True,
        index_add=_numpy_index_add,
        windows=_numpy_windows,
        select=_numpy_select,
        matmul_into=_numpy_matmul_into,
        scalar_type=numpy.generic,
        scalar_to_array=numpy.asarray,
        owns_buffer=_owns_buffer,
        takes_out=lambda f: isinstance(f, numpy.ufunc),
        special=numpy_special,
        numpy_functions=True,
    )


def _strict_buffer(d: Any) -> Any:
    # array-api-strict wraps a NumPy array; its views share that array's memory.
    return _base(getattr(d, "_array", d))


def _adapt_strict(b: Backend) -> Backend:
    return dataclasses.replace(b, ordered_writes=True, buffer=_strict_buffer)


register_adapter("numpy", _adapt_numpy)
register_adapter("array_api_strict", _adapt_strict)


def resolve(backend: Any = None) -> Backend:
    """Return the :class:`Backend` for ``backend`` (a module or namespace object; None = NumPy).

    Raises TypeError, naming the object, when it is not an Array API namespace and
    array-api-compat does not wrap it.
    """
    if backend is None:
        import numpy as backend
    if isinstance(backend, str):
        backend = importlib.import_module(backend)
    mod_name = getattr(backend, "__name__", None)
    if not isinstance(mod_name, str):
        raise TypeError(
            f"namespace(): {backend!r} is not an array namespace; pass a module such as "
            "numpy, cupy, cubed or array_api_strict"
        )
    if mod_name == "cubed.array_api":  # the same functions as the top-level cubed module
        backend, mod_name = importlib.import_module("cubed"), "cubed"
    if mod_name in _COMPAT_WRAPPED:
        xp = importlib.import_module(f"array_api_compat.{mod_name}")
    elif mod_name.startswith("pycograd_xp."):
        raise TypeError(
            f"namespace(): {mod_name} is already a pycograd_xp namespace; pass its backend instead"
        )
    elif hasattr(backend, "__array_api_version__") and hasattr(backend, "asarray"):
        xp = backend
    else:
        raise TypeError(
            f"namespace(): module {mod_name!r} does not implement the Python Array API standard "
            "(it has no __array_api_version__) and array-api-compat does not wrap it"
        )
    b = _probe(xp)
    adapt = _adapter(b.name)
    if adapt is not None:
        b = adapt(b)
    _BY_XP[id(b.xp)] = b
    return b
