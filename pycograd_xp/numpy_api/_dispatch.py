"""The protocols and their tables: ``__array_ufunc__`` (NEP 13) and ``__array_function__``
(NEP 18) of the arrays of a namespace over NumPy, the tables they read (:data:`UFUNCS`,
:data:`REDUCTIONS`, :data:`ACCUMULATIONS`, :data:`FUNCTIONS`, :data:`VALUE_FUNCTIONS`), the ufunc
methods (``reduce``, ``accumulate``, ``outer``, ``at``) and :func:`covered`. The package's
docstring (``pycograd_xp/numpy_api/__init__.py``) says which calls go where."""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from .._primitive import REGISTRY
from ..namespace._array import Array
from ..namespace._frontend import FOREIGN_UFUNCS
from . import traced_values
from ._convert import (
    _NV,
    _PY_SCALARS,
    Composition,
    _array,
    _computable,
    _is_array,
    _operand,
    _ours,
    _raw,
    _refusal,
    _unsupported,
    _wrap,
    _write,
    _write_all,
)

# -- the tables ----------------------------------------------------------------------------------

# A NumPy ufunc (by ``ufunc.__name__``; only NumPy's own ufunc of that name) -> the name of our
# namespace's function of the same meaning, or a composition ``f(ns, *inputs)`` (filled below).
UFUNCS: dict[str, str | Composition] = {
    # one argument
    "absolute": "abs",
    "fabs": "abs",
    "arccos": "acos",
    "arccosh": "acosh",
    "arcsin": "asin",
    "arcsinh": "asinh",
    "arctan": "atan",
    "arctanh": "atanh",
    "ceil": "ceil",
    "conjugate": "conj",
    "cos": "cos",
    "cosh": "cosh",
    "exp": "exp",
    "expm1": "expm1",
    "floor": "floor",
    "invert": "bitwise_invert",
    "isfinite": "isfinite",
    "isinf": "isinf",
    "isnan": "isnan",
    "log": "log",
    "log10": "log10",
    "log1p": "log1p",
    "log2": "log2",
    "negative": "negative",
    "positive": "positive",
    "reciprocal": "reciprocal",
    "rint": "round",
    "sign": "sign",
    "signbit": "signbit",
    "sin": "sin",
    "sinh": "sinh",
    "sqrt": "sqrt",
    "square": "square",
    "tan": "tan",
    "tanh": "tanh",
    "trunc": "trunc",
    # two arguments
    "add": "add",
    "arctan2": "atan2",
    "bitwise_and": "bitwise_and",
    "bitwise_or": "bitwise_or",
    "bitwise_xor": "bitwise_xor",
    "copysign": "copysign",
    "divide": "divide",
    "equal": "equal",
    "floor_divide": "floor_divide",
    "greater": "greater",
    "greater_equal": "greater_equal",
    "hypot": "hypot",
    "left_shift": "bitwise_left_shift",
    "less": "less",
    "less_equal": "less_equal",
    "logaddexp": "logaddexp",
    "matmul": "matmul",
    "maximum": "maximum",
    "minimum": "minimum",
    "multiply": "multiply",
    "nextafter": "nextafter",
    "not_equal": "not_equal",
    "power": "pow",
    "remainder": "remainder",
    "right_shift": "bitwise_right_shift",
    "subtract": "subtract",
}

# ``ufunc.reduce`` -> our reduction; ``ufunc.accumulate`` -> our cumulative function.
REDUCTIONS: dict[str, str] = {
    "add": "sum",
    "multiply": "prod",
    "maximum": "max",
    "minimum": "min",
    "logical_and": "all",
    "logical_or": "any",
}
ACCUMULATIONS: dict[str, str] = {"add": "cumulative_sum", "multiply": "cumulative_prod"}

# NumPy's functions (by their name under ``numpy``) -> ``f(ns, <NumPy's arguments>)`` (filled
# below, with :func:`_implements`).
FUNCTIONS: dict[str, Composition] = {}

# Functions whose result carries no gradient whatever the inputs: computed by NumPy on the
# values (stop_gradient semantics), their arrays wrapped back.
VALUE_FUNCTIONS: tuple[str, ...] = (
    "allclose",
    "array_equal",
    "array_equiv",
    "isclose",
    "iscomplex",
    "isreal",
    "min_scalar_type",
    "count_nonzero",
    "argwhere",
    "flatnonzero",
    "isin",
    "searchsorted",
    "digitize",
)


def _implements(*names: str) -> Callable[[Composition], Composition]:
    """Put ``f`` in :data:`FUNCTIONS` under each of ``names``."""

    def put(f: Composition) -> Composition:
        for n in names:
            if n in FUNCTIONS:
                raise RuntimeError(f"numpy.{n} mapped twice")
            FUNCTIONS[n] = f
        return f

    return put


# -- __array_ufunc__ -------------------------------------------------------------------------------


def _ufunc_function(ns: Any, ufunc: Any) -> Composition | None:
    """Our function for ``ufunc``'s ``__call__``, as ``f(*inputs)``, or None."""
    name = ufunc.__name__
    if getattr(np, name, None) is ufunc:
        entry = UFUNCS.get(name)
        if entry is None:
            return None
        if isinstance(entry, str):
            return _function(ns, entry)
        return functools.partial(entry, ns)
    row = FOREIGN_UFUNCS.get(name)
    if row is None or row not in REGISTRY:
        return None
    return _function(ns, row)


def _function(ns: Any, name: str) -> Any:
    obj = ns
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def _ufunc_library(ufunc: Any) -> str:
    """Where ``ufunc`` comes from, as a user imports it: ``numpy`` or ``scipy.special`` (every
    ufunc reports ``numpy`` as its module)."""
    if getattr(np, ufunc.__name__, None) is ufunc:
        return "numpy"
    special = sys.modules.get("scipy.special")
    if special is not None and getattr(special, ufunc.__name__, None) is ufunc:
        return "scipy.special"
    return "the ufunc"


def _ufunc_name(ufunc: Any, method: str) -> str:
    return ufunc.__name__ if method == "__call__" else f"{ufunc.__name__}.{method}"


def _foreign(values: Any) -> bool:
    """An argument of a type that has its own ufunc protocol and is none of ours or NumPy's: it
    gets the call (NEP 13)."""
    for v in values:
        t = type(v)
        if (
            not issubclass(t, Array | np.ndarray | np.generic)
            and getattr(t, "__array_ufunc__", None) is not None
        ):
            return True
    return False


def array_ufunc(self: Array, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
    """``__array_ufunc__`` of the arrays of a namespace over NumPy (NEP 13)."""
    outs = kwargs.get("out", ())
    if _foreign(inputs) or _foreign(outs):
        return NotImplemented
    arrays: list[Array] = []
    _ours(inputs, arrays)
    _ours(outs, arrays)
    where = kwargs.get("where")
    if isinstance(where, Array):
        arrays.append(where)
    ns = self._ns
    if _computable(arrays):
        return _ufunc_by_numpy(ns, ufunc, method, inputs, kwargs)
    what = _ufunc_name(ufunc, method)
    fn = _ufunc_function(ns, ufunc)
    if method == "__call__" and fn is not None:
        return _call(ns, ufunc, fn, inputs, dict(kwargs))
    if method == "reduce" and ufunc.__name__ in REDUCTIONS and fn is not None:
        return _reduce(ns, ufunc.__name__, inputs, dict(kwargs))
    if method == "accumulate" and ufunc.__name__ in ACCUMULATIONS and fn is not None:
        return _accumulate(ns, ufunc.__name__, inputs, dict(kwargs))
    if method == "accumulate":  # no gradient: projected while traced (memory.project)
        r = traced_values.accumulate(ns, ufunc, inputs, dict(kwargs), arrays)
        if r is not NotImplemented:
            return r
    if method == "outer" and fn is not None:
        return _outer(ns, ufunc, fn, inputs, dict(kwargs))
    if method == "at" and fn is not None:
        return _at(ns, ufunc, fn, inputs, dict(kwargs))
    ours = _ufunc_hint(ufunc, method)
    raise _refusal(ns, what, arrays, ours, _ufunc_library(ufunc))


def _ufunc_hint(ufunc: Any, method: str) -> str | None:
    """The function of ours to name in a refusal, if there is one of that meaning."""
    name = ufunc.__name__
    if method == "reduce":
        return REDUCTIONS.get(name)
    if method == "accumulate":
        return ACCUMULATIONS.get(name)
    if method != "__call__":
        return None
    entry = UFUNCS.get(name)
    return entry if isinstance(entry, str) else name


def _ufunc_by_numpy(ns: Any, ufunc: Any, method: str, inputs: tuple, kwargs: dict) -> Any:
    """NumPy's own ufunc on the unwrapped arrays; writes into our arrays go through the
    namespace's setitem (so a tape that saved the buffer still sees its old value)."""
    raw_inputs = tuple(_raw(a) for a in inputs)
    kw = {k: _raw(v) for k, v in kwargs.items() if k != "out"}
    if method == "at":
        target = inputs[0]
        if isinstance(target, Array):
            data = target._data.copy()
            ufunc.at(data, *raw_inputs[1:], **kw)
            target[...] = ns._make(data)
        else:
            ufunc.at(*raw_inputs, **kw)
        return None
    outs = kwargs.get("out")
    if not outs:
        return _wrap(ns, getattr(ufunc, method)(*raw_inputs, **kw))
    temps = tuple(
        o._data.copy() if isinstance(o, Array) else o for o in outs
    )  # NumPy writes into copies; the namespace writes them back
    r = getattr(ufunc, method)(*raw_inputs, out=temps, **kw)
    for o, t in zip(outs, temps, strict=True):
        if isinstance(o, Array):
            o[...] = ns._make(t)
    back = dict(zip(map(id, temps), outs, strict=True))

    def result(v: Any) -> Any:
        return back.get(id(v), _wrap(ns, v))

    return tuple(result(v) for v in r) if isinstance(r, tuple) else result(r)


_CALL_DEFAULTS = {"casting": "same_kind", "order": "K", "subok": True}


def _pop_call_options(what: str, kwargs: dict) -> tuple[Any, Any, Any]:
    """``out``, ``where`` and ``dtype`` of a ufunc call; other options only at their defaults."""
    out = kwargs.pop("out", None)
    where = kwargs.pop("where", True)
    dtype = kwargs.pop("dtype", None)
    sig = kwargs.pop("signature", None)
    if sig is not None and dtype is None:
        dtype = sig[-1] if isinstance(sig, tuple) else None
    for k, default in _CALL_DEFAULTS.items():
        v = kwargs.pop(k, default)
        if v != default:
            raise _unsupported(what, f"{k}={v!r}")
    if kwargs:
        raise _unsupported(what, ", ".join(f"{k}=" for k in kwargs))
    return out, where, dtype


def _loop_dtypes(ufunc: Any, args: list, dtype: Any) -> tuple | None:
    """The dtypes NumPy's ufunc computes in for these operands (its type resolution: NumPy 2's
    promotion, Python numbers weak), or None where NumPy cannot say (then the rows decide)."""
    spec = (
        tuple(
            a.dtype if isinstance(a, Array) else (np.dtype(bool) if type(a) is bool else type(a))
            for a in args
        )
        + (None,) * ufunc.nout
    )
    try:
        if dtype is None:
            return tuple(ufunc.resolve_dtypes(spec))
        sig = (None,) * ufunc.nin + (np.dtype(dtype),) * ufunc.nout
        return tuple(ufunc.resolve_dtypes(spec, signature=sig))
    except Exception:  # no loop, or dtypes NumPy does not know (another namespace's): the
        return None  # rows decide, and say why they refuse


def _cast_inputs(ns: Any, ufunc: Any, args: list, dtype: Any) -> list:
    """The array operands cast to the dtypes of NumPy's loop (integers to float for ``exp``
    or ``divide``, float32 to float64 beside a float64 array, ``dtype=``)."""
    loop = _loop_dtypes(ufunc, args, dtype)
    if loop is None:
        return args
    return [
        ns.astype(a, loop[i]) if isinstance(a, Array) and a.dtype != loop[i] else a
        for i, a in enumerate(args)
    ]


def _call(ns: Any, ufunc: Any, fn: Composition, inputs: tuple, kwargs: dict) -> Any:
    what = ufunc.__name__
    out, where, dtype = _pop_call_options(what, kwargs)
    args = [_operand(ns, a) for a in inputs]
    if not any(_is_array(a) for a in args):  # only out= is ours: the inputs are numbers
        args[0] = _array(ns, args[0])
    args = _cast_inputs(ns, ufunc, args, dtype)
    r = fn(*args)
    if where is not True:
        if out is None:
            raise _unsupported(
                what, "where= without out= (NumPy leaves the unselected elements uninitialized)"
            )
        mask = _array(ns, where)
        if isinstance(r, tuple):
            r = tuple(ns.where(mask, ri, _array(ns, o)) for ri, o in zip(r, out, strict=True))
        else:
            r = ns.where(mask, r, _array(ns, out[0]))
    if out is not None:
        return _write_all(ns, out, r, what)
    return r


def _norm_axis(axis: Any) -> Any:
    if isinstance(axis, list):
        return tuple(axis)
    return axis


def _reduce(ns: Any, name: str, inputs: tuple, kwargs: dict) -> Any:
    what = f"{name}.reduce"
    (a,) = inputs
    x = _array(ns, a)
    axis = _norm_axis(kwargs.pop("axis", 0))
    dtype = kwargs.pop("dtype", None)
    out = kwargs.pop("out", None)
    keepdims = bool(kwargs.pop("keepdims", False))
    initial = kwargs.pop("initial", _NV)
    where = kwargs.pop("where", True)
    if kwargs:
        raise _unsupported(what, ", ".join(f"{k}=" for k in kwargs))
    return _reduction(
        ns, what, REDUCTIONS[name], x, axis, dtype, keepdims, initial, where, out and out[0]
    )


_COMBINE = {"sum": "add", "prod": "multiply", "max": "maximum", "min": "minimum"}


def _reduction(
    ns: Any,
    what: str,
    fname: str,
    x: Any,
    axis: Any,
    dtype: Any,
    keepdims: bool,
    initial: Any,
    where: Any,
    out: Any,
) -> Any:
    """Our reduction ``fname`` of ``x`` with NumPy's options (``initial``, ``where``)."""
    if initial is None:
        initial = _NV
    if where is not True and where is not _NV and where is not None:
        mask = _array(ns, where)
        fill = {"sum": 0, "prod": 1, "all": True, "any": False}.get(fname)
        if fill is None:
            if initial is _NV:
                raise ValueError(
                    f"numpy.{what}(): reduction operation {fname} does not have an identity, "
                    "so to use a where mask one has to specify 'initial'"
                )
            fill = initial
        x = ns.where(mask, x, ns.asarray(fill, dtype=x.dtype))
    f = _function(ns, fname)
    if fname in ("sum", "prod"):
        r = f(x, axis=axis, dtype=dtype, keepdims=keepdims)
    else:
        if fname in ("all", "any") and x.dtype != ns.bool:
            x = x != 0
        r = f(x, axis=axis, keepdims=keepdims)
        if dtype is not None:
            r = ns.astype(r, np.dtype(dtype))
    if initial is not _NV:
        if fname in ("all", "any"):
            r = (ns.logical_and if fname == "all" else ns.logical_or)(r, bool(initial))
        else:
            r = _function(ns, _COMBINE[fname])(r, _operand(ns, initial))
    return _write(ns, out, r, what) if out is not None else r


def _accumulate(ns: Any, name: str, inputs: tuple, kwargs: dict) -> Any:
    what = f"{name}.accumulate"
    (a,) = inputs
    x = _array(ns, a)
    axis = kwargs.pop("axis", 0)
    dtype = kwargs.pop("dtype", None)
    out = kwargs.pop("out", None)
    if kwargs:
        raise _unsupported(what, ", ".join(f"{k}=" for k in kwargs))
    r = _function(ns, ACCUMULATIONS[name])(x, axis=axis, dtype=dtype)
    return _write(ns, out[0], r, what) if out else r


def _outer(ns: Any, ufunc: Any, fn: Composition, inputs: tuple, kwargs: dict) -> Any:
    a, b = (_array(ns, v) for v in inputs)
    a = ns.reshape(a, tuple(a.shape) + (1,) * b.ndim)
    return _call(ns, ufunc, fn, (a, b), kwargs)


def _at(ns: Any, ufunc: Any, fn: Composition, inputs: tuple, kwargs: dict) -> Any:
    """``ufunc.at(x, idx[, v])``: for each index in order, ``x[i] = ufunc(x[i], v[j])``
    (unbuffered: a repeated index sees the previous writes). Done as rounds of distinct
    indices, each ``x[k] = ufunc(x[k], v[sel])`` through the namespace's setitem."""
    what = f"{ufunc.__name__}.at"
    if kwargs:
        raise _unsupported(what, ", ".join(f"{k}=" for k in kwargs))
    x, idx = inputs[0], inputs[1]
    if not isinstance(x, Array):
        raise TypeError(
            f"numpy.{what}(): the array written into is a NumPy array, and writing values "
            "being differentiated into it would drop their gradient; make it an array of the "
            f"namespace ({ns.__name__}.asarray(a)) first"
        )
    key_arrays: list[Array] = []
    _ours(idx if type(idx) is tuple else (idx,), key_arrays)
    if any(a._node is not None for a in key_arrays):
        raise TypeError(f"numpy.{what}(): the index is being differentiated; indices have none")
    shape: tuple[int, ...] = tuple(x._data.shape)
    try:
        pos = np.arange(math.prod(shape)).reshape(shape)[_raw(idx)]
    except IndexError as e:
        raise IndexError(f"numpy.{what}(): {e}") from e
    flat = np.ravel(pos)
    m = flat.size
    # each element's rank among the occurrences of its index: round r writes the r-th ones
    order = np.argsort(flat, kind="stable")
    srt = flat[order]
    start = np.ones(m, dtype=bool)
    start[1:] = srt[1:] != srt[:-1]
    first = np.maximum.accumulate(np.where(start, np.arange(m), 0)) if m else start
    rank = np.empty(m, dtype=np.intp)
    rank[order] = np.arange(m) - first
    rounds = int(rank.max()) + 1 if m else 0
    values = None
    if len(inputs) > 2:
        v = inputs[2]
        if type(v) in _PY_SCALARS:
            values = v
        else:
            values = ns.reshape(ns.broadcast_to(_array(ns, v), pos.shape), (-1,))
    for r in range(rounds):
        sel = np.nonzero(rank == r)[0]
        k = tuple(ns.asarray(i) for i in np.unravel_index(flat[sel], shape))
        current = x[k]
        if values is None:
            new = fn(current)
        elif isinstance(values, Array):
            new = fn(current, ns.take(values, ns.asarray(sel)))
        else:
            new = fn(current, values)
        x[k] = new
    return None


# -- __array_function__ ----------------------------------------------------------------------------


@functools.cache
def _by_object() -> dict[int, tuple[str, Composition]]:
    """id(NumPy function) -> (its name, our composition), for the names this NumPy has."""
    table: dict[int, tuple[str, Composition]] = {}
    for name, f in FUNCTIONS.items():
        obj = _numpy_object(name)
        if obj is not None:
            table.setdefault(id(obj), (name, f))
    for name in VALUE_FUNCTIONS:
        obj = _numpy_object(name)
        if obj is not None and id(obj) not in table:
            table[id(obj)] = (name, functools.partial(_by_value, obj))
    return table


def _numpy_object(name: str) -> Any:
    obj: Any = np
    for part in name.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _numpy_name(func: Any) -> str:
    mod = getattr(func, "__module__", None) or "numpy"
    name = getattr(func, "__name__", repr(func))
    prefix = mod[len("numpy.") :] + "." if mod.startswith("numpy.") else ""
    return prefix + name


def array_function(self: Array, func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
    """``__array_function__`` of the arrays of a namespace over NumPy (NEP 18)."""
    for t in types:
        if not issubclass(t, Array | np.ndarray):
            return NotImplemented
    arrays: list[Array] = []
    _ours(args, arrays)
    _ours(kwargs.values(), arrays)
    ns = self._ns
    entry = _by_object().get(id(func))
    computable = _computable(arrays)
    if entry is not None and not (computable and entry[0] in NATIVE_WHEN_UNTRACKED):
        # the namespace's composition, gradient or not: what memory.project projects is what
        # runs (NumPy's own median, kron and gradient copied more than their projections)
        try:
            return entry[1](ns, *args, **kwargs)
        except NotImplementedError:  # an option the composition lacks: NumPy's own, on values
            if not computable:
                raise
    if computable:
        return _function_by_numpy(ns, func, args, kwargs)
    name = _numpy_name(func)
    raise _refusal(ns, name, arrays, name)


# Functions whose composition projects NumPy's own result when nothing is differentiated (a
# strided view where the composition gathers): there NumPy's own function runs.
NATIVE_WHEN_UNTRACKED = frozenset({"lib.stride_tricks.sliding_window_view"})

# NumPy's functions that write into their first argument.
_WRITES_FIRST = frozenset({"copyto", "put", "place", "putmask", "fill_diagonal", "put_along_axis"})


def _function_by_numpy(ns: Any, func: Any, args: tuple, kwargs: dict) -> Any:
    """NumPy's own function on the unwrapped arrays. An array of ours it writes into (given as
    ``out``, or the first argument of ``np.copyto``, ``np.put``, ...) gets the new values
    through the namespace's setitem, as ``x[...] = v`` would: a buffer a tape saved is
    copied, not overwritten."""
    out = kwargs.get("out")
    if isinstance(out, Array):
        temp = out._data.copy()
        func(*_raw(args), **{**_raw(kwargs), "out": temp})
        out[...] = ns._make(temp)
        return out
    if args and isinstance(args[0], Array) and getattr(func, "__name__", "") in _WRITES_FIRST:
        target = args[0]
        temp = target._data.copy()
        r = func(temp, *_raw(args[1:]), **_raw(kwargs))
        target[...] = ns._make(temp)
        return r
    return _wrap(ns, func(*_raw(args), **_raw(kwargs)))


def _by_value(func: Any, ns: Any, *args: Any, **kwargs: Any) -> Any:
    """A function whose result carries no gradient: NumPy's, on the values (there must be
    values: not an array vmap batches or a trace holds)."""
    arrays: list[Array] = []
    _ours(args, arrays)
    _ours(kwargs.values(), arrays)
    if not all(isinstance(a._data, np.ndarray) and not a._backend.level for a in arrays):
        raise _refusal(ns, _numpy_name(func), arrays)
    return _wrap(ns, func(*_raw(args), **_raw(kwargs)))


def covered() -> dict[str, list[str]]:
    """What NumPy code reaches on our arrays with gradients, by kind: ``"ufuncs"`` (their
    ``__call__``, ``outer`` and ``at``), ``"ufunc.reduce"``, ``"ufunc.accumulate"``,
    ``"functions"`` (with the installed NumPy: names it lacks are left out) and ``"values"``
    (computed on the values, no gradient); each ``numpy name -> ours`` where ours is a
    namespace function, else the NumPy name alone (a composition)."""

    def show(n: str, e: Any) -> str:
        return f"{n} -> {e}" if isinstance(e, str) else n

    funcs = sorted(n for n in FUNCTIONS if _numpy_object(n) is not None)
    return {
        "ufuncs": sorted(
            show(n, e) for n, e in UFUNCS.items() if isinstance(getattr(np, n, None), np.ufunc)
        ),
        "ufunc.reduce": sorted(f"{n}.reduce -> {e}" for n, e in REDUCTIONS.items()),
        "ufunc.accumulate": sorted(f"{n}.accumulate -> {e}" for n, e in ACCUMULATIONS.items()),
        "functions": funcs,
        "values": sorted(n for n in VALUE_FUNCTIONS if _numpy_object(n) is not None),
    }


def _len(self: Array) -> int:
    """``len(x)``, as NumPy's: NumPy code given back our arrays by ``np.atleast_1d`` and the
    like asks for it (scipy.signal.lfilter)."""
    if self.ndim == 0:
        raise TypeError("len() of unsized object")
    return int(self.shape[0])


def install(cls: type[Array]) -> None:
    """Give the Array class ``cls`` of a namespace over NumPy both protocols (and ``len``)."""
    cls.__array_ufunc__ = array_ufunc  # type: ignore[method-assign]
    cls.__array_function__ = array_function  # type: ignore[attr-defined]
    cls.__len__ = _len  # type: ignore[attr-defined]
