"""Resolve what the user passed to ``namespace()`` into a conforming backend and its capabilities.

A :class:`Backend` says what a backend *can do* (lazy, chunked, writable in place, ordered
duplicate writes, an exact scatter-add, block-wise sampling, where its memory lives); rules and
the engine ask for a capability, never compare module names. Capabilities come from probing the
backend, then from its adapter: NumPy's and array-api-strict's are below; other packages
register theirs under the ``pycograd_xp.adapters`` entry-point group (``cubed_plugin`` does for
Cubed), or at run time with :func:`register_adapter`. The core imports no adapter's package.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

# Modules that conform only through array-api-compat's wrapper of the same name.
_COMPAT_WRAPPED = {"numpy", "cupy", "torch", "dask.array"}


def _base(d: Any) -> Any:
    """The array that owns ``d``'s memory: NumPy-style ``.base`` chains, else ``d`` itself."""
    while getattr(d, "base", None) is not None:
        d = d.base
    return d


@dataclass(frozen=True)
class Backend:
    """A conforming namespace plus what it can do."""

    xp: Any  # the conforming namespace all calls go to (and first-order rules run on)
    name: str  # short, unique, used for our module's ``__name__`` ("numpy", "cubed", ...)
    array_type: type  # the backend's array class
    lazy: bool = False  # values are computed on demand: never print or branch on them
    chunked: bool = False  # arrays have ``.chunks``; ``broadcast_to`` takes ``chunks=``
    mutable: bool = False  # ``x[idx] = v`` writes the backend array in place
    # A write into a view (a slice or a reshape of ``a``) changes ``a`` too, as NumPy's views
    # do: rules may fill a buffer through its views. False where ``x[idx] = v`` rebinds ``x``
    # alone (vmap's batched arrays): a write into a view never reaches its base there.
    views_alias: bool = False
    # Arrays with a shape and a dtype and no data (pycograd_xp.memory): a function of another
    # namespace given one of its arrays hands the call over to it.
    abstract: bool = False
    # Duplicate integer indices in ``x[idx] = v``: the last write wins, deterministically.
    # Where False, a differentiated write with duplicates is refused (which one lands is
    # unspecified, so no gradient can say which value survived).
    ordered_writes: bool = False
    # ``index_add(size, flat_index, values)``: a length-``size`` vector with ``values`` summed
    # at ``flat_index``, exact and fast (NumPy's ``add.at``); None: a sort-based segment sum.
    index_add: Callable[..., Any] | None = None
    # ``windows(x, window_shape, axis)``: every window of ``x`` along ``axis`` as one strided
    # view, shape ``x.shape`` with ``axis`` shrunk, then ``window_shape`` (NumPy's
    # ``sliding_window_view``); convolutions take their columns from it with one copy. None:
    # the columns are a stack of strided slices.
    windows: Callable[..., Any] | None = None
    # ``select(condition, x1, x2, out=None)``: ``where`` with the same values bit for bit,
    # faster where the backend's own ``where`` branches per element (NumPy: a random mask costs
    # it a mispredicted branch per element, 10x a bitwise blend), written into ``out`` when
    # given (no overlap with the operands). None: the backend's ``where``.
    select: Callable[..., Any] | None = None
    # ``matmul_into(x1, x2, out)``: ``matmul(x1, x2)`` written into ``out`` (of the result's
    # shape and dtype; a strided view whose last axis is contiguous: a BLAS leading dimension),
    # returned (NumPy's ``out=``): a product straight into part of a larger buffer. None: none.
    matmul_into: Callable[..., Any] | None = None
    # ``block_sampler(xp, shape, chunks, dtype, draw_block)``: a lazy array whose block at
    # offset ``i`` is ``draw_block(i, block_shape)`` (random numbers on a chunked backend).
    block_sampler: Callable[..., Any] | None = None
    # ``like_kwargs(a)``: keyword arguments that make a new constant (``zeros``, ``eye``,
    # ``asarray``) of the backend's own namespace belong with array ``a`` (Cubed: its Spec,
    # since arrays of two Specs cannot meet); None: none needed.
    like_kwargs: Callable[[Any], dict] | None = None
    # ``device_peak(run)``: the peak bytes the backend's own allocator hands out while ``run()``
    # runs (CuPy: its memory pool); None: host memory, measured with tracemalloc.
    device_peak: Callable[[Callable[[], Any]], int] | None = None
    # ``projector(f, *args, argnums=, backend=, **kwargs)``: per-task memory projections of a
    # gradient step in the chunked backend's own terms (pycograd_xp.memory.project hands over).
    projector: Callable[..., Any] | None = None
    # The object that owns an array's memory (a view's base): in-place writes are tracked per
    # buffer, so a write through one view is seen by every array sharing the memory.
    buffer: Callable[[Any], Any] = _base
    # NumPy returns scalars (np.float64, ...) from 0-d operations: their type and the fast way
    # back to a 0-d array. None where the backend always returns arrays.
    scalar_type: type | None = None
    scalar_to_array: Any = None
    # vmap's batched namespaces (pycograd_xp._vmap): their nesting level (0: an ordinary
    # backend). A function given an array of a higher level hands the call over to that
    # level's namespace; ``lift(a)`` makes an array ``a`` of a lower level one of this backend's
    # arrays (unbatched).
    level: int = 0
    lift: Callable[[Any], Any] | None = None
    # pycograd_xp.compile: ``owns_buffer(a)``, whether array ``a`` owns its memory (is no view);
    # with no other reference to it (its reference count says so), a dead temporary's buffer
    # can take an elementwise result in place. None: never written in place. ``takes_out(f)``:
    # whether backend function ``f`` accepts ``out=`` (NumPy's ufuncs).
    owns_buffer: Callable[[Any], bool] | None = None
    takes_out: Callable[[Any], bool] | None = None
    # ``special(name)``: scipy.special's function ``name`` over the backend's arrays (same
    # signature; ``polygamma(n, x)`` with a Python int ``n``), or None where the backend has
    # none (NumPy without scipy). NumPy: scipy.special's; CuPy: cupyx.scipy.special's; Cubed:
    # one NumPy call per block (cubed_plugin). None: no special functions at all (the rows of
    # ``ops/special.py`` then compose what the standard allows and refuse the rest).
    special: Callable[[str], Callable[..., Any] | None] | None = None
    # NumPy's own ufuncs and functions given our arrays dispatch to the namespace's functions
    # (``__array_ufunc__``/``__array_function__``, pycograd_xp/numpy_api/): NumPy's
    # arrays, and the levels built over them (vmap's, compile's tracing namespace).
    numpy_functions: bool = False
    # ``compute(*arrays)``: the values of a lazy backend's arrays (its own, not ours) as NumPy
    # arrays, all computed in one computation (Cubed: one plan, shared inputs read once); what
    # ``optim.lbfgs`` needs for the scalar decisions of its line search. None: eager, or none.
    compute: Callable[..., Any] | None = None
    # ``getitem(x, key)``: ``x[key]`` for a backend array, where the backend's own indexing
    # lacks part of the standard's (Cubed: negative slice steps; an integer-array index as
    # long as its axis). None: ``x[key]``.
    getitem: Callable[[Any, Any], Any] | None = None
    # ``labeller``: the backend's adapter names the work it plans by the part of the program
    # that built it (:mod:`pycograd_xp._parts`): ``labeller.mark()`` before a row's forward
    # call or a VJP rule, ``labeller.label(mark, outputs)`` after it, with the part on the stack
    # (cubed_plugin._labels: Cubed's op counter, then a label on each op made since). None:
    # nothing is named (the functions' fast paths).
    labeller: Any = None


# Adapters by backend short name: ``adapt(backend) -> Backend`` refines the probed capabilities.
_ADAPTERS: dict[str, Callable[[Backend], Backend]] = {}
# The Backend of every resolved namespace, by the id of its ``xp`` (see :func:`capabilities`).
_BY_XP: dict[int, Backend] = {}


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


def capabilities(ns: Any) -> Backend:
    """The :class:`Backend` behind ``ns``: one of our namespaces, or a backend namespace that
    one of them wraps (what a first-order VJP rule receives)."""
    b = getattr(ns, "_backend", None)
    if b is None:
        b = _BY_XP.get(id(ns))
    if b is None:
        raise TypeError(f"{getattr(ns, '__name__', ns)!r} is not a namespace pycograd_xp wraps")
    return b


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
    import numpy as np

    dtype = np.result_type(x1, x2)
    shapes = {getattr(v, "shape", ()) for v in (condition, x1, x2)} - {()}
    # one shape (the common case: arrays alike, Python numbers): no broadcast_shapes call
    shape = shapes.pop() if len(shapes) == 1 else np.broadcast_shapes(*shapes)
    if (
        getattr(condition, "dtype", None) != np.bool_
        or dtype.itemsize not in (1, 2, 4, 8)
        or math.prod(shape) < SELECT_MIN
        or (out is not None and out.dtype != dtype)
    ):
        if out is None:
            return np.where(condition, x1, x2)
        out[...] = np.where(condition, x1, x2)
        return out
    # owns its memory (no view of an integer array), laid out as where's (an operand's order)
    like = [v for v in (condition, x1, x2) if isinstance(v, np.ndarray) and v.shape == shape]
    if out is not None:
        res = out
    else:
        res = np.empty_like(like[0], dtype=dtype) if like else np.empty(shape, dtype)
    bits = np.dtype(f"i{dtype.itemsize}")
    out = res.view(bits)
    if res is x1 and _zero_bits(x2):  # where(c, out, 0) in place: out's bits & all-or-none
        np.bitwise_and(out, np.negative(condition.view(np.int8)), out=out)
        return res
    if _zero_bits(x2) or _zero_bits(x1):  # where(c, x, 0), where(c, 0, x): the mask in out
        np.negative(condition.view(np.int8), out=out)  # all bits set where True
        if not _zero_bits(x2):
            np.invert(out, out=out)
        np.bitwise_and(
            out, np.asarray(x2 if _zero_bits(x1) else x1, dtype=dtype).view(bits), out=out
        )
        return res
    b = np.asarray(x2, dtype=dtype).view(bits)
    np.bitwise_xor(np.asarray(x1, dtype=dtype).view(bits), b, out=out)
    np.bitwise_and(out, np.negative(condition.view(np.int8)), out=out)
    np.bitwise_xor(out, b, out=out)
    return res


def _zero_bits(v: Any) -> bool:
    """A Python number whose bits are all zero (0, 0.0, False; not -0.0)."""
    return type(v) in (int, float, bool) and v == 0 and math.copysign(1.0, v) > 0


def _owns_buffer(d: Any) -> bool:
    return d.base is None


def _numpy_matmul_into(x1: Any, x2: Any, out: Any) -> Any:
    import numpy

    return numpy.matmul(x1, x2, out=out)


def _numpy_windows(x: Any, window_shape: tuple[int, ...], axis: tuple[int, ...]) -> Any:
    """NumPy's ``sliding_window_view(x, window_shape, axis=axis)`` (the same read-only view)
    built with ``as_strided`` directly: a convolution takes one per block of the batch, and
    the general function's argument handling cost 15 against 4 microseconds a call."""
    from numpy.lib.stride_tricks import as_strided

    shape = list(x.shape)
    for w, a in zip(window_shape, axis, strict=True):
        if not 0 < w <= shape[a]:
            raise ValueError(f"windows: window {w} does not fit axis {a} of {x.shape}")
        shape[a] -= w - 1
    return as_strided(
        x,
        tuple(shape) + tuple(window_shape),
        tuple(x.strides) + tuple(x.strides[a] for a in axis),
        writeable=False,
    )


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
