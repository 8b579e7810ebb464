"""NumPy's own functions on our arrays: ``__array_ufunc__`` (NEP 13) and ``__array_function__``
(NEP 18) of the arrays of a namespace over NumPy (issue 19).

``np.exp(x)``, ``np.add.reduce(x, axis=0)``, ``np.einsum('ij,jk->ik', a, b)``,
``np.linalg.norm(x, ord=1)``, ``np.nanmean(x)``: NumPy hands the call to the array, and the array
answers with its namespace's functions, so the gradient flows through the rows' rules. The
tables below are data: :data:`UFUNCS` (a ufunc's ``__call__``), :data:`REDUCTIONS` and
:data:`ACCUMULATIONS` (its ``reduce`` and ``accumulate``; ``outer`` and ``at`` work for every
mapped ufunc), :data:`FUNCTIONS` (NumPy's functions, by their name under ``numpy``:
``"concatenate"``, ``"linalg.norm"``, ``"fft.rfft"``); each entry is the name of a function of
our namespace or a composition of them with NumPy's argument conventions translated.
:func:`covered` lists them (``python -m pycograd_xp.ops --numpy``).

Which calls go where:

* every argument of ours holds NumPy data that no gradient flows through (nothing is being
  differentiated, traced or batched): NumPy computes the call itself on the unwrapped arrays, and
  the arrays (and NumPy scalars) it returns come back as arrays of our namespace; the call
  behaves exactly as NumPy's, mapped or not;
* otherwise a mapped function runs on our namespace (with its gradient); NumPy arrays and NumPy
  scalars among the arguments become constants of the namespace (NumPy 2's rules: a NumPy scalar
  is typed, a Python number is not);
* a function with no mapping refuses with a TypeError naming it and the way out:
  ``pycograd_xp.stop_gradient(x)`` (NumPy's own result, with no gradient) or the namespace's
  function to use, where one exists. Nothing loses a gradient silently.

Functions whose result carries no gradient whatever their inputs (``allclose``,
``array_equal``, ``isclose``, ``shape``, ...) compare the values (``stop_gradient`` semantics) and
answer as NumPy does.

``out=`` is honoured as our in-place operators are: the result is written into ``out`` through
the namespace's ``x[...] = value`` (in place when no tape can see the buffer, else ``out`` is
rebound to the new value and the write recorded), so ``np.add(a, b, out=a)`` is ``a += b``. A
leaf that requires grad refuses, as ``x += 1`` does: its gradient would be lost. A NumPy array
given as ``out`` refuses a result being differentiated. ``ufunc.at(x, idx, v)`` writes through
the same path, one ``x[k] = ufunc(x[k], v)`` per round of distinct indices, so duplicate indices
accumulate in order, as NumPy's unbuffered ``at`` does.

The ufuncs of other libraries (scipy.special's ``erf``, ...) reach the same ``__array_ufunc__``;
an ops module that declares rows for them registers its table with :func:`register_ufuncs`
(``ufunc.__name__`` -> row name), looked up only for ufuncs that are not NumPy's own.
"""

from __future__ import annotations

import functools
import math
import string
import sys
from collections.abc import Callable, Mapping
from typing import Any, cast

import numpy as np

from .._host import NoValue
from .._primitive import REGISTRY
from .._state import STACK
from .._tape import is_leaf
from ._array import Array

# NumPy's "no value given" default (np._NoValue), spelled once.
_NV: Any = getattr(np, "_NoValue", None)

Composition = Callable[..., Any]


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

# Ufuncs of other libraries (scipy.special's), by ``ufunc.__name__`` -> the name of the row that
# computes them (``REGISTRY``): filled by the ops modules that declare those rows.
FOREIGN_UFUNCS: dict[str, str] = {}


def register_ufuncs(table: Mapping[str, str]) -> None:
    """Make the ufuncs named in ``table`` (``ufunc.__name__`` of a library's ufunc that is not
    NumPy's own, e.g. scipy.special's ``"erf"``) dispatch to the rows named there (a row's name
    in ``REGISTRY``, e.g. ``"_erf"``) when they meet our arrays. A name registered twice for
    different rows raises."""
    for name, row in table.items():
        old = FOREIGN_UFUNCS.get(name)
        if old is not None and old != row:
            raise ValueError(f"register_ufuncs: {name!r} is already mapped to row {old!r}")
        FOREIGN_UFUNCS[name] = row


def _implements(*names: str) -> Callable[[Composition], Composition]:
    """Put ``f`` in :data:`FUNCTIONS` under each of ``names``."""

    def put(f: Composition) -> Composition:
        for n in names:
            if n in FUNCTIONS:
                raise RuntimeError(f"numpy.{n} mapped twice")
            FUNCTIONS[n] = f
        return f

    return put


# -- finding our arrays, unwrapping and wrapping ---------------------------------------------------


def _ours(values: Any, found: list[Array], depth: int = 0) -> None:
    """Append the arrays of ours among ``values`` (through lists, tuples and dicts)."""
    for v in values:
        if isinstance(v, Array):
            found.append(v)
        elif depth < 4 and (type(v) is list or type(v) is tuple):
            _ours(v, found, depth + 1)
        elif depth < 4 and type(v) is dict:
            _ours(v.values(), found, depth + 1)


def _raw(v: Any) -> Any:
    """``v`` with our arrays replaced by their NumPy arrays (through lists, tuples, dicts)."""
    if isinstance(v, Array):
        return v._data
    t = type(v)
    if t is list or t is tuple:
        return t(_raw(e) for e in v)
    if t is dict:
        return {k: _raw(e) for k, e in v.items()}
    return v


_KINDS = frozenset("biufc")  # the dtype kinds of the standard: bool, ints, floats, complex


def _wrap(ns: Any, r: Any) -> Any:
    """NumPy's result with its arrays (and NumPy scalars, as our functions do with NumPy's 0-d
    results) made arrays of ``ns``; other values (Python numbers, dtypes, strings, arrays of
    other dtypes) as they are."""
    if type(r) is np.ndarray:
        return ns._make(r) if r.dtype.kind in _KINDS else r
    if isinstance(r, np.generic):
        return ns._make(np.asarray(r)) if r.dtype.kind in _KINDS else r
    if isinstance(r, tuple):
        items = [_wrap(ns, e) for e in r]
        return type(r)(*items) if hasattr(r, "_fields") else tuple(items)
    if type(r) is list:
        return [_wrap(ns, e) for e in r]
    return r


def _computable(arrays: list[Array]) -> bool:
    """Whether NumPy can compute the call itself: every array of ours holds NumPy data no
    gradient flows through, and no trace (compile) is recording the namespace's calls."""
    if STACK.closed is not None:
        return False
    for a in arrays:
        b = a._backend
        if a._node is not None or b.abstract or b.level or not b.numpy_functions:
            return False
        if not isinstance(a._data, np.ndarray):
            return False
    return True


def _why(arrays: list[Array]) -> str:
    """Why NumPy cannot compute the call on the values (for the refusal)."""
    for a in arrays:
        if a._node is not None:
            return "that is being differentiated"
    for a in arrays:
        if a._backend.level:
            return "that vmap is batching (it holds every example at once)"
        if a._backend.abstract:
            return "that is being traced (compile, memory.project: it holds no values)"
    if STACK.closed is not None:
        return "while pycograd_xp.compile traces the function (the call must be recorded)"
    return "of a namespace whose data NumPy cannot compute on"


def _exists(ns: Any, name: str) -> bool:
    obj = ns
    for part in name.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return False
    return callable(obj)


def _refusal(
    ns: Any, what: str, arrays: list[Array], ours: str | None = None, library: str = "numpy"
) -> TypeError:
    """The TypeError for ``library``'s ``what`` (NumPy's ``"percentile"``, ``"add.reduceat"``;
    scipy.special's ``"struve"``) with no rule."""
    mod = ns.__name__
    what = f"{library}.{what}"
    if ours is not None and _exists(ns, ours):
        alt = f"use {mod}.{ours}(...) (xp.{ours}), which has one, or "
    else:
        alt = ""
    if all(a._node is None for a in arrays) and any(a._backend.abstract for a in arrays):
        # nothing differentiated, but traced: no values for NumPy, and no rule to project
        return TypeError(
            f"{what}() cannot be traced ({NoValue.TRACED_BY}): its arrays hold no values "
            f"and pycograd_xp has no rule for {what}, so what it allocates is unknown. "
            f"Compute it outside the traced function and pass its result in as an argument, "
            f"or {alt.removesuffix(', or ') + ', or ' if alt else ''}write it with xp functions"
        )
    return TypeError(
        f"{what}() was given an array of {mod} {_why(arrays)}, and pycograd_xp has no "
        f"rule for {what}: it would be computed without the gradient. To differentiate "
        f"it, {alt}write it with xp functions; to compute it without a gradient, call "
        f"{what} on pycograd_xp.stop_gradient(x) (or x.detach())"
    )


def _unsupported(what: str, detail: str) -> TypeError:
    return TypeError(
        f"numpy.{what}(): {detail} is not supported on arrays being differentiated; call it on "
        "pycograd_xp.stop_gradient(x) for NumPy's result without a gradient"
    )


# -- NumPy arrays and scalars as constants of our namespace ----------------------------------------

_PY_SCALARS = (bool, int, float, complex)


def _array(ns: Any, a: Any) -> Any:
    """``a`` as an array of ``ns`` (ours pass; NumPy arrays, NumPy scalars, Python numbers and
    nested lists of them become constants; a list holding our arrays is stacked)."""
    if isinstance(a, Array):
        return a
    if isinstance(a, np.ndarray | np.generic):
        return ns.asarray(np.asarray(a))
    if type(a) is list or type(a) is tuple:
        found: list[Array] = []
        _ours(a, found)
        if found:
            return ns.stack([_array(ns, e) for e in a])
        return ns.asarray(np.asarray(a))
    if isinstance(a, _PY_SCALARS):
        return ns.asarray(a)
    raise TypeError(
        f"pycograd_xp: cannot take a {type(a).__module__}.{type(a).__name__} as an array of "
        f"{ns.__name__}"
    )


def _operand(ns: Any, a: Any) -> Any:
    """An elementwise operand: a Python number stays one (weakly typed, as in NumPy 2 and the
    standard), anything else becomes an array of ``ns``."""
    if type(a) in _PY_SCALARS:
        return a
    return _array(ns, a)


def _is_array(a: Any) -> bool:
    return isinstance(a, Array)


# -- writing into out= -----------------------------------------------------------------------------


def _write(ns: Any, out: Any, r: Any, what: str) -> Any:
    """Write result ``r`` into ``out`` as NumPy's ``out=`` does, through the mutation path."""
    if out is None:
        return r
    if not isinstance(r, Array):
        r = _array(ns, r)
    if isinstance(out, Array):
        if not np.can_cast(r.dtype, out.dtype, casting="same_kind"):
            raise TypeError(
                f"numpy.{what}(out=...): cannot cast the result from {r.dtype} to the out "
                f"array's {out.dtype} with casting rule 'same_kind'"
            )
        if is_leaf(out._node) and STACK.grad_enabled:
            raise RuntimeError(
                f"numpy.{what}(out=...): the out array is a leaf that requires grad; writing "
                "into it would lose its gradient (as x += ... would). Do it under "
                "pycograd_xp.no_grad(), or leave out= off and use the result"
            )
        out[...] = r  # the namespace's setitem: in place, or rebound and recorded
        return out
    if isinstance(out, np.ndarray):
        if r._node is not None:
            raise TypeError(
                f"numpy.{what}(out=...): out is a NumPy array, and writing the result into it "
                "would drop its gradient. The code that called it made out with NumPy: that "
                "path is not Array API code (in a library with Array API support, such as "
                "scikit-learn, another solver or option may be: LinearDiscriminantAnalysis's "
                "solver='svd', not 'lsqr'); in your own code, pass an array of the namespace as "
                "out, or none"
            )
        out[...] = r._data
        return out
    raise TypeError(f"numpy.{what}(out=...): out must be an array, got {type(out).__name__}")


def _write_all(ns: Any, outs: tuple, results: Any, what: str) -> Any:
    if not isinstance(results, tuple):
        return _write(ns, outs[0], results, what)
    return tuple(_write(ns, o, r, what) for o, r in zip(outs, results, strict=True))


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


# -- compositions for the ufuncs without a row of their own ---------------------------------------


def _compose(*names: str) -> Callable[[Composition], Composition]:
    def put(f: Composition) -> Composition:
        for n in names:
            UFUNCS[n] = f
        return f

    return put


def _float_of(ns: Any, x: Any) -> Any:
    return (
        x
        if ns.isdtype(x.dtype, ("real floating", "complex floating"))
        else ns.astype(x, ns.float64)
    )


@_compose("exp2")
def _exp2(ns: Any, x: Any) -> Any:
    return ns.pow(2.0, _float_of(ns, _array(ns, x)))


@_compose("cbrt")
def _cbrt(ns: Any, x: Any) -> Any:
    x = _float_of(ns, _array(ns, x))
    return ns.sign(x) * ns.pow(ns.abs(x), 1.0 / 3.0)


@_compose("deg2rad", "radians")
def _deg2rad(ns: Any, x: Any) -> Any:
    return _float_of(ns, _array(ns, x)) * (math.pi / 180.0)


@_compose("rad2deg", "degrees")
def _rad2deg(ns: Any, x: Any) -> Any:
    return _float_of(ns, _array(ns, x)) * (180.0 / math.pi)


@_compose("logical_not")
def _logical_not(ns: Any, x: Any) -> Any:
    return ns.logical_not(_bool(ns, x))


def _bool(ns: Any, x: Any) -> Any:
    x = _array(ns, x)
    return x if x.dtype == ns.bool else x != 0


@_compose("logical_and")
def _logical_and(ns: Any, x1: Any, x2: Any) -> Any:
    return ns.logical_and(_bool(ns, x1), _bool(ns, x2))


@_compose("logical_or")
def _logical_or(ns: Any, x1: Any, x2: Any) -> Any:
    return ns.logical_or(_bool(ns, x1), _bool(ns, x2))


@_compose("logical_xor")
def _logical_xor(ns: Any, x1: Any, x2: Any) -> Any:
    return ns.logical_xor(_bool(ns, x1), _bool(ns, x2))


@_compose("float_power")
def _float_power(ns: Any, x1: Any, x2: Any) -> Any:
    def wide(v: Any) -> Any:
        if type(v) in _PY_SCALARS:
            return v
        cplx = ns.isdtype(v.dtype, "complex floating")
        return ns.astype(v, ns.complex128 if cplx else ns.float64)

    return ns.pow(wide(x1), wide(x2))


_LN2 = math.log(2.0)


@_compose("logaddexp2")
def _logaddexp2(ns: Any, x1: Any, x2: Any) -> Any:
    return ns.logaddexp(x1 * _LN2, x2 * _LN2) / _LN2


@_compose("fmax")
def _fmax(ns: Any, x1: Any, x2: Any) -> Any:
    a, b = _array(ns, x1), _array(ns, x2)
    return ns.where(ns.isnan(b), a, ns.where(ns.isnan(a), b, ns.maximum(a, b)))


@_compose("fmin")
def _fmin(ns: Any, x1: Any, x2: Any) -> Any:
    a, b = _array(ns, x1), _array(ns, x2)
    return ns.where(ns.isnan(b), a, ns.where(ns.isnan(a), b, ns.minimum(a, b)))


@_compose("fmod")
def _fmod(ns: Any, x1: Any, x2: Any) -> Any:
    # remainder takes the divisor's sign, fmod the dividend's: shift by the divisor where
    # they differ (the same values; the gradient -trunc(x1 / x2) for x2)
    r = ns.remainder(x1, x2)
    a = _array(ns, x1)
    return ns.where((r != 0) & (ns.signbit(r) != ns.signbit(a)), r - x2, r)


@_compose("divmod")
def _divmod(ns: Any, x1: Any, x2: Any) -> Any:
    return ns.floor_divide(x1, x2), ns.remainder(x1, x2)


@_compose("modf")
def _modf(ns: Any, x: Any) -> Any:
    x = _array(ns, x)
    whole = ns.trunc(x)
    frac = ns.where(ns.isinf(x), ns.copysign(ns.zeros_like(x), x), x - whole)
    return frac, whole


@_compose("heaviside")
def _heaviside(ns: Any, x1: Any, x2: Any) -> Any:
    a = _array(ns, x1)
    at0 = _array(ns, x2)
    one = ns.ones_like(a)
    step = ns.where(a < 0, ns.zeros_like(a), one)
    return ns.where(ns.isnan(a), a, ns.where(a == 0, at0 * one, step))


@_compose("ldexp")
def _ldexp(ns: Any, x1: Any, x2: Any) -> Any:
    a = _float_of(ns, _array(ns, x1))
    e = x2 if type(x2) in _PY_SCALARS else ns.astype(_array(ns, x2), a.dtype)
    return a * ns.pow(2.0, e)


@_compose("vecdot")
def _vecdot_ufunc(ns: Any, x1: Any, x2: Any) -> Any:
    return ns.vecdot(_array(ns, x1), _array(ns, x2))


@_compose("matvec")
def _matvec(ns: Any, x1: Any, x2: Any) -> Any:
    return ns.matmul(_array(ns, x1), _array(ns, x2)[..., None])[..., 0]


@_compose("vecmat")
def _vecmat(ns: Any, x1: Any, x2: Any) -> Any:
    return ns.matmul(ns.conj(_array(ns, x1))[..., None, :], _array(ns, x2))[..., 0, :]


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
    if _computable(arrays):
        return _function_by_numpy(ns, func, args, kwargs)
    entry = _by_object().get(id(func))
    if entry is None:
        name = _numpy_name(func)
        raise _refusal(ns, name, arrays, name)
    return entry[1](ns, *args, **kwargs)


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


# NumPy's own arrays and scalars: an operand of these in an operator of ours is a constant
# (namespace._array.install_operators), as NumPy's operators make ours an operand of a ufunc.
NUMPY_CONSTANTS = (np.ndarray, np.generic)


def install(cls: type[Array]) -> None:
    """Give the Array class ``cls`` of a namespace over NumPy both protocols (and ``len``)."""
    cls.__array_ufunc__ = array_ufunc  # type: ignore[method-assign]
    cls.__array_function__ = array_function  # type: ignore[attr-defined]
    cls.__len__ = _len  # type: ignore[attr-defined]


# -- the functions ---------------------------------------------------------------------------------
# Each takes the namespace, then NumPy's arguments as NumPy's signature names them.


def _axis_none_flat(ns: Any, x: Any, axis: Any) -> tuple[Any, Any]:
    """NumPy's ``axis=None`` for functions along one axis: the flattened array, axis 0."""
    if axis is None:
        return ns.reshape(x, (-1,)), 0
    return x, axis


def _shape(shape: Any) -> tuple[int, ...]:
    return (int(shape),) if isinstance(shape, int | np.integer) else tuple(int(s) for s in shape)


def _finish(ns: Any, r: Any, out: Any, what: str) -> Any:
    return _write(ns, out, r, what) if out is not None else r


# reductions


def _numpy_reduction(fname: str, what: str) -> Composition:
    def f(
        ns: Any,
        a: Any,
        axis: Any = None,
        dtype: Any = None,
        out: Any = None,
        keepdims: Any = False,
        initial: Any = _NV,
        where: Any = _NV,
    ) -> Any:
        keepdims = False if keepdims is _NV else bool(keepdims)
        w = True if where is _NV else where
        return _reduction(
            ns, what, fname, _array(ns, a), _norm_axis(axis), dtype, keepdims, initial, w, out
        )

    return f


FUNCTIONS["sum"] = _numpy_reduction("sum", "sum")
FUNCTIONS["prod"] = _numpy_reduction("prod", "prod")


def _numpy_extremum(fname: str, what: str) -> Composition:
    def f(
        ns: Any,
        a: Any,
        axis: Any = None,
        out: Any = None,
        keepdims: Any = False,
        initial: Any = _NV,
        where: Any = _NV,
    ) -> Any:
        keepdims = False if keepdims is _NV else bool(keepdims)
        w = True if where is _NV else where
        return _reduction(
            ns, what, fname, _array(ns, a), _norm_axis(axis), None, keepdims, initial, w, out
        )

    return f


FUNCTIONS["max"] = _numpy_extremum("max", "max")
FUNCTIONS["amax"] = _numpy_extremum("max", "amax")
FUNCTIONS["min"] = _numpy_extremum("min", "min")
FUNCTIONS["amin"] = _numpy_extremum("min", "amin")


def _logical_reduction(fname: str) -> Composition:
    def f(
        ns: Any,
        a: Any,
        axis: Any = None,
        out: Any = None,
        keepdims: Any = False,
        *,
        where: Any = _NV,
    ) -> Any:
        keepdims = False if keepdims is _NV else bool(keepdims)
        w = True if where is _NV else where
        return _reduction(
            ns, fname, fname, _array(ns, a), _norm_axis(axis), None, keepdims, _NV, w, out
        )

    return f


FUNCTIONS["all"] = _logical_reduction("all")
FUNCTIONS["any"] = _logical_reduction("any")


def _where_count(ns: Any, x: Any, where: Any, axis: Any, keepdims: bool) -> tuple[Any, Any]:
    """``x`` zeroed outside ``where`` and the number of elements selected along ``axis``."""
    mask = ns.broadcast_to(_array(ns, where), tuple(x.shape))
    zero = ns.zeros_like(x)
    n = ns.sum(ns.astype(mask, _real_dtype(ns, x)), axis=axis, keepdims=keepdims)
    return ns.where(mask, x, zero), n


def _real_dtype(ns: Any, x: Any) -> Any:
    if ns.isdtype(x.dtype, "complex floating"):
        return ns.float32 if x.dtype == ns.complex64 else ns.float64
    if ns.isdtype(x.dtype, "real floating"):
        return x.dtype
    return ns.float64


@_implements("mean")
def _mean(
    ns: Any,
    a: Any,
    axis: Any = None,
    dtype: Any = None,
    out: Any = None,
    keepdims: Any = False,
    *,
    where: Any = _NV,
) -> Any:
    x = _array(ns, a)
    keepdims = False if keepdims is _NV else bool(keepdims)
    axis = _norm_axis(axis)
    if dtype is not None:
        x = ns.astype(x, np.dtype(dtype))
    elif not ns.isdtype(x.dtype, ("real floating", "complex floating")):
        x = ns.astype(x, ns.float64)
    if where is not _NV and where is not True:
        xs, n = _where_count(ns, x, where, axis, keepdims)
        r = ns.sum(xs, axis=axis, keepdims=keepdims) / n
    else:
        r = ns.mean(x, axis=axis, keepdims=keepdims)
    return _finish(ns, r, out, "mean")


def _ddof(what: str, ddof: Any, correction: Any) -> Any:
    if correction is not _NV:
        if ddof not in (0, _NV):
            raise ValueError(
                f"numpy.{what}(): ddof and correction can't be provided simultaneously"
            )
        return correction
    return 0 if ddof is _NV else ddof


def _moment_arguments(
    ns: Any,
    what: str,
    a: Any,
    axis: Any,
    dtype: Any,
    ddof: Any,
    keepdims: Any,
    mean: Any,
    correction: Any,
) -> tuple[Any, Any, bool, Any]:
    """NumPy's var/std arguments (also the nan forms') as the namespace takes them: the array
    in its computing dtype, the axis, keepdims and the correction."""
    x = _array(ns, a)
    keepdims = False if keepdims is _NV else bool(keepdims)
    axis = _norm_axis(axis)
    c = _ddof(what, ddof, correction)
    if mean is not _NV:
        raise _unsupported(what, "mean=")
    if dtype is not None:
        x = ns.astype(x, np.dtype(dtype))
    elif not ns.isdtype(x.dtype, ("real floating", "complex floating")):
        x = ns.astype(x, ns.float64)
    return x, axis, keepdims, c


def _moment(sqrt: bool) -> Composition:
    what = "std" if sqrt else "var"

    def f(
        ns: Any,
        a: Any,
        axis: Any = None,
        dtype: Any = None,
        out: Any = None,
        ddof: Any = 0,
        keepdims: Any = False,
        *,
        where: Any = _NV,
        mean: Any = _NV,
        correction: Any = _NV,
    ) -> Any:
        x, axis, keepdims, c = _moment_arguments(
            ns, what, a, axis, dtype, ddof, keepdims, mean, correction
        )
        if where is not _NV and where is not True:
            xs, n = _where_count(ns, x, where, axis, True)
            m = ns.sum(xs, axis=axis, keepdims=True) / n
            mask = ns.broadcast_to(_array(ns, where), tuple(x.shape))
            d = ns.where(mask, x - m, ns.zeros_like(x))
            sq = ns.real(d * ns.conj(d)) if ns.isdtype(d.dtype, "complex floating") else d * d
            v = ns.sum(sq, axis=axis, keepdims=keepdims)
            n = n if keepdims else ns.sum(ns.astype(mask, v.dtype), axis=axis)
            r = v / (n - c)
            r = ns.sqrt(r) if sqrt else r
        else:
            r = (ns.std if sqrt else ns.var)(x, axis=axis, correction=c, keepdims=keepdims)
        return _finish(ns, r, out, what)

    return f


FUNCTIONS["std"] = _moment(True)
FUNCTIONS["var"] = _moment(False)


@_implements("ptp")
def _ptp(ns: Any, a: Any, axis: Any = None, out: Any = None, keepdims: Any = False) -> Any:
    x = _array(ns, a)
    keepdims = False if keepdims is _NV else bool(keepdims)
    axis = _norm_axis(axis)
    r = ns.max(x, axis=axis, keepdims=keepdims) - ns.min(x, axis=axis, keepdims=keepdims)
    return _finish(ns, r, out, "ptp")


@_implements("average")
def _average(
    ns: Any,
    a: Any,
    axis: Any = None,
    weights: Any = None,
    returned: bool = False,
    *,
    keepdims: Any = _NV,
) -> Any:
    x = _array(ns, a)
    keepdims = False if keepdims is _NV else bool(keepdims)
    axis = _norm_axis(axis)
    if not ns.isdtype(x.dtype, ("real floating", "complex floating")):
        x = ns.astype(x, ns.float64)
    if weights is None:
        avg = ns.mean(x, axis=axis, keepdims=keepdims)
        n = (
            x.size
            if axis is None
            else math.prod(x.shape[i] for i in ((axis,) if isinstance(axis, int) else axis))
        )
        scl = ns.full_like(avg, float(n))
    else:
        w = _array(ns, weights)
        if w.shape != x.shape:
            if axis is None or not isinstance(axis, int) or w.ndim != 1:
                raise TypeError(
                    "numpy.average(): weights differing in shape from a need a 1-D weights "
                    "and an int axis"
                )
            shape = [1] * x.ndim
            shape[axis] = w.shape[0]
            w = ns.reshape(w, tuple(shape))
        w = ns.broadcast_to(w, tuple(x.shape))
        scl = ns.sum(w, axis=axis, keepdims=keepdims)
        avg = ns.sum(x * w, axis=axis, keepdims=keepdims) / scl
    return (avg, scl) if returned else avg


# NaN-ignoring reductions: NaNs replaced by the reduction's identity (their gradient is zero)


def _nan_fill(ns: Any, x: Any, fill: Any) -> Any:
    if not ns.isdtype(x.dtype, ("real floating", "complex floating")):
        return x
    return ns.where(ns.isnan(x), ns.asarray(fill, dtype=x.dtype), x)


@_implements("nansum")
def _nansum(
    ns: Any,
    a: Any,
    axis: Any = None,
    dtype: Any = None,
    out: Any = None,
    keepdims: Any = False,
    initial: Any = _NV,
    where: Any = _NV,
) -> Any:
    x = _nan_fill(ns, _array(ns, a), 0)
    return FUNCTIONS["sum"](ns, x, axis, dtype, out, keepdims, initial, where)


@_implements("nanprod")
def _nanprod(
    ns: Any,
    a: Any,
    axis: Any = None,
    dtype: Any = None,
    out: Any = None,
    keepdims: Any = False,
    initial: Any = _NV,
    where: Any = _NV,
) -> Any:
    x = _nan_fill(ns, _array(ns, a), 1)
    return FUNCTIONS["prod"](ns, x, axis, dtype, out, keepdims, initial, where)


def _valid(ns: Any, x: Any, where: Any) -> Any:
    """The elements that count: not NaN, and selected by ``where``."""
    ok = (
        ns.logical_not(ns.isnan(x))
        if ns.isdtype(x.dtype, ("real floating", "complex floating"))
        else ns.ones_like(x, dtype=ns.bool)
    )
    if where is not _NV and where is not True:
        ok = ns.logical_and(ok, ns.broadcast_to(_array(ns, where), tuple(x.shape)))
    return ok


@_implements("nanmean")
def _nanmean(
    ns: Any,
    a: Any,
    axis: Any = None,
    dtype: Any = None,
    out: Any = None,
    keepdims: Any = False,
    *,
    where: Any = _NV,
) -> Any:
    x = _array(ns, a)
    keepdims = False if keepdims is _NV else bool(keepdims)
    axis = _norm_axis(axis)
    if dtype is not None:
        x = ns.astype(x, np.dtype(dtype))
    elif not ns.isdtype(x.dtype, ("real floating", "complex floating")):
        x = ns.astype(x, ns.float64)
    ok = _valid(ns, x, where)
    s = ns.sum(ns.where(ok, x, ns.zeros_like(x)), axis=axis, keepdims=keepdims)
    n = ns.sum(ns.astype(ok, _real_dtype(ns, x)), axis=axis, keepdims=keepdims)
    return _finish(ns, s / n, out, "nanmean")  # an all-NaN slice: 0 / 0, NaN (as NumPy)


def _nan_moment(sqrt: bool) -> Composition:
    what = "nanstd" if sqrt else "nanvar"

    def f(
        ns: Any,
        a: Any,
        axis: Any = None,
        dtype: Any = None,
        out: Any = None,
        ddof: Any = 0,
        keepdims: Any = False,
        *,
        where: Any = _NV,
        mean: Any = _NV,
        correction: Any = _NV,
    ) -> Any:
        x, axis, keepdims, c = _moment_arguments(
            ns, what, a, axis, dtype, ddof, keepdims, mean, correction
        )
        ok = _valid(ns, x, where)
        zero = ns.zeros_like(x)
        xs = ns.where(ok, x, zero)
        rd = _real_dtype(ns, x)
        n_keep = ns.sum(ns.astype(ok, rd), axis=axis, keepdims=True)
        m = ns.sum(xs, axis=axis, keepdims=True) / n_keep
        d = ns.where(ok, x - m, zero)
        sq = ns.real(d * ns.conj(d)) if ns.isdtype(d.dtype, "complex floating") else d * d
        v = ns.sum(sq, axis=axis, keepdims=keepdims)
        n = ns.sum(ns.astype(ok, rd), axis=axis, keepdims=keepdims)
        dof = n - c
        # NumPy: NaN where the degrees of freedom are not positive
        r = ns.where(
            dof > 0, v / ns.where(dof > 0, dof, ns.ones_like(dof)), ns.full_like(v, math.nan)
        )
        return _finish(ns, ns.sqrt(r) if sqrt else r, out, what)

    return f


FUNCTIONS["nanvar"] = _nan_moment(False)
FUNCTIONS["nanstd"] = _nan_moment(True)


def _nan_extremum(fname: str) -> Composition:
    what = f"nan{fname}"

    def f(
        ns: Any,
        a: Any,
        axis: Any = None,
        out: Any = None,
        keepdims: Any = False,
        initial: Any = _NV,
        where: Any = _NV,
    ) -> Any:
        x = _array(ns, a)
        keepdims = False if keepdims is _NV else bool(keepdims)
        axis = _norm_axis(axis)
        w = True if where is _NV else where
        if not ns.isdtype(x.dtype, "real floating"):
            return _reduction(ns, what, fname, x, axis, None, keepdims, initial, w, out)
        nan = ns.isnan(x)
        fill = -math.inf if fname == "max" else math.inf
        r = _reduction(
            ns, what, fname, _nan_fill(ns, x, fill), axis, None, keepdims, initial, w, None
        )
        if initial is _NV:  # an all-NaN slice gives NaN (NumPy warns)
            r = ns.where(ns.all(nan, axis=axis, keepdims=keepdims), ns.full_like(r, math.nan), r)
        return _finish(ns, r, out, what)

    return f


FUNCTIONS["nanmax"] = _nan_extremum("max")
FUNCTIONS["nanmin"] = _nan_extremum("min")


def _nan_arg(fname: str) -> Composition:
    def f(ns: Any, a: Any, axis: Any = None, out: Any = None, *, keepdims: Any = False) -> Any:
        x = _array(ns, a)
        keepdims = False if keepdims is _NV else bool(keepdims)
        fill = -math.inf if fname == "argmax" else math.inf
        r = _function(ns, fname)(_nan_fill(ns, x, fill), axis=axis, keepdims=keepdims)
        return _finish(ns, r, out, f"nan{fname}")

    return f


FUNCTIONS["nanargmax"] = _nan_arg("argmax")
FUNCTIONS["nanargmin"] = _nan_arg("argmin")


def _cumulative(fname: str, what: str, nan_fill: Any = None) -> Composition:
    def f(ns: Any, a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
        x = _array(ns, a)
        if nan_fill is not None:
            x = _nan_fill(ns, x, nan_fill)
        x, axis = _axis_none_flat(ns, x, axis)
        if x.ndim == 0:
            x = ns.reshape(x, (1,))
        r = _function(ns, fname)(x, axis=axis, dtype=dtype)
        return _finish(ns, r, out, what)

    return f


FUNCTIONS["cumsum"] = _cumulative("cumulative_sum", "cumsum")
FUNCTIONS["cumprod"] = _cumulative("cumulative_prod", "cumprod")
FUNCTIONS["nancumsum"] = _cumulative("cumulative_sum", "nancumsum", 0)
FUNCTIONS["nancumprod"] = _cumulative("cumulative_prod", "nancumprod", 1)


def _cumulative_std(fname: str) -> Composition:
    def f(
        ns: Any,
        x: Any,
        /,
        *,
        axis: Any = None,
        dtype: Any = None,
        out: Any = None,
        include_initial: bool = False,
    ) -> Any:
        r = _function(ns, fname)(
            _array(ns, x), axis=axis, dtype=dtype, include_initial=include_initial
        )
        return _finish(ns, r, out, fname)

    return f


FUNCTIONS["cumulative_sum"] = _cumulative_std("cumulative_sum")
FUNCTIONS["cumulative_prod"] = _cumulative_std("cumulative_prod")


@_implements("diff")
def _diff(
    ns: Any, a: Any, n: int = 1, axis: int = -1, prepend: Any = _NV, append: Any = _NV
) -> Any:
    x = _array(ns, a)
    if n == 0:
        return x

    def edge(v: Any) -> Any:
        if v is _NV:
            return None
        e = _array(ns, v)
        if e.ndim == 0:
            shape = list(x.shape)
            shape[axis] = 1
            e = ns.broadcast_to(e, tuple(shape))
        return e

    return ns.diff(x, axis=axis, n=n, prepend=edge(prepend), append=edge(append))


# elementwise functions that are not ufuncs


@_implements("clip")
def _clip(
    ns: Any,
    a: Any,
    a_min: Any = _NV,
    a_max: Any = _NV,
    out: Any = None,
    *,
    min: Any = _NV,  # noqa: A002
    max: Any = _NV,  # noqa: A002
    **kwargs: Any,
) -> Any:
    if kwargs:
        raise _unsupported("clip", ", ".join(f"{k}=" for k in kwargs))
    lo = a_min if a_min is not _NV else min
    hi = a_max if a_max is not _NV else max
    x = _array(ns, a)

    def bound(v: Any) -> Any:
        if v is _NV or v is None:
            return None
        return v if type(v) in _PY_SCALARS else _array(ns, v)

    lo, hi = bound(lo), bound(hi)
    # NumPy's clip is minimum(maximum(a, lo), hi): array bounds take part in the promotion
    dt = np.result_type(x.dtype, *(b.dtype for b in (lo, hi) if isinstance(b, Array)))
    if dt != x.dtype:
        x = ns.astype(x, dt)
    lo, hi = (ns.astype(b, dt) if isinstance(b, Array) and b.dtype != dt else b for b in (lo, hi))
    return _finish(ns, ns.clip(x, lo, hi), out, "clip")


@_implements("where")
def _where(ns: Any, condition: Any, x: Any = _NV, y: Any = _NV) -> Any:
    if x is _NV and y is _NV:
        return ns.nonzero(_bool(ns, condition))
    if x is _NV or y is _NV:
        raise ValueError("numpy.where(): either both or neither of x and y should be given")
    return ns.where(_bool(ns, condition), _operand(ns, x), _operand(ns, y))


@_implements("round", "around")
def _round(ns: Any, a: Any, decimals: int = 0, out: Any = None) -> Any:
    x = _array(ns, a)
    if decimals == 0:
        r = ns.round(x)
    else:
        scale = 10.0**decimals
        r = ns.round(x * scale) / scale
    return _finish(ns, r, out, "round")


@_implements("fix")
def _fix(ns: Any, x: Any, out: Any = None) -> Any:
    return _finish(ns, ns.trunc(_array(ns, x)), out, "fix")


@_implements("real")
def _real(ns: Any, val: Any) -> Any:
    x = _array(ns, val)
    return ns.real(x) if ns.isdtype(x.dtype, "complex floating") else x


@_implements("imag")
def _imag(ns: Any, val: Any) -> Any:
    x = _array(ns, val)
    return ns.imag(x) if ns.isdtype(x.dtype, "complex floating") else ns.zeros_like(x)


@_implements("angle")
def _angle(ns: Any, z: Any, deg: bool = False) -> Any:
    x = _array(ns, z)
    if ns.isdtype(x.dtype, "complex floating"):
        r = ns.atan2(ns.imag(x), ns.real(x))
    else:
        x = _float_of(ns, x)
        r = ns.atan2(ns.zeros_like(x), x)
    return r * (180.0 / math.pi) if deg else r


@_implements("nan_to_num")
def _nan_to_num(
    ns: Any, x: Any, copy: bool = True, nan: float = 0.0, posinf: Any = None, neginf: Any = None
) -> Any:
    a = _array(ns, x)
    if not ns.isdtype(a.dtype, ("real floating", "complex floating")):
        return a
    if ns.isdtype(a.dtype, "complex floating"):
        re = _nan_to_num(ns, ns.real(a), copy, nan, posinf, neginf)
        im = _nan_to_num(ns, ns.imag(a), copy, nan, posinf, neginf)
        return re + im * 1j
    info = np.finfo(np.dtype(a.dtype))
    hi = float(info.max) if posinf is None else posinf
    lo = float(info.min) if neginf is None else neginf

    def const(v: Any) -> Any:
        return ns.asarray(v, dtype=a.dtype)

    r = ns.where(ns.isnan(a), const(nan), a)
    r = ns.where(ns.isinf(a) & (a > 0), const(hi), r)
    return ns.where(ns.isinf(a) & (a < 0), const(lo), r)


@_implements("isposinf")
def _isposinf(ns: Any, x: Any, out: Any = None) -> Any:
    a = _array(ns, x)
    return _finish(ns, ns.isinf(a) & ns.logical_not(ns.signbit(a)), out, "isposinf")


@_implements("isneginf")
def _isneginf(ns: Any, x: Any, out: Any = None) -> Any:
    a = _array(ns, x)
    return _finish(ns, ns.isinf(a) & ns.signbit(a), out, "isneginf")


@_implements("copy")
def _copy(ns: Any, a: Any, order: str = "K", subok: bool = False) -> Any:
    return ns.asarray(_array(ns, a), copy=True)


# what an array is, from its shape and dtype (no values needed)


def _dtype_of(a: Any) -> Any:
    return a.dtype if isinstance(a, Array) else a


@_implements("shape")
def _shape_of(ns: Any, a: Any) -> tuple:
    return tuple(_array(ns, a).shape)


@_implements("ndim")
def _ndim_of(ns: Any, a: Any) -> int:
    return int(_array(ns, a).ndim)


@_implements("size")
def _size_of(ns: Any, a: Any, axis: Any = None) -> int:
    shape = _array(ns, a).shape
    if axis is None:
        return math.prod(shape)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    return math.prod(shape[i] for i in axes)


@_implements("result_type")
def _result_type(ns: Any, *arrays_and_dtypes: Any) -> Any:
    return np.result_type(*(_dtype_of(a) for a in arrays_and_dtypes))


@_implements("can_cast")
def _can_cast(ns: Any, from_: Any, to: Any, casting: Any = "safe") -> bool:
    return bool(np.can_cast(_dtype_of(from_), _dtype_of(to), casting=casting))


@_implements("iscomplexobj")
def _iscomplexobj(ns: Any, x: Any) -> bool:
    return isinstance(x, Array) and np.dtype(x.dtype).kind == "c" or np.iscomplexobj(_raw(x))


@_implements("isrealobj")
def _isrealobj(ns: Any, x: Any) -> bool:
    return not _iscomplexobj(ns, x)


# shapes


def _c_order(what: str, order: Any) -> None:
    if order not in ("C", "K", "A", None):
        raise _unsupported(what, f"order={order!r} (only C order)")


@_implements("reshape")
def _reshape(
    ns: Any,
    a: Any,
    /,
    shape: Any = None,
    order: str = "C",
    *,
    newshape: Any = None,
    copy: Any = None,
) -> Any:
    _c_order("reshape", order)
    if shape is None:
        shape = newshape
    if isinstance(shape, int):
        shape = (shape,)
    return ns.reshape(_array(ns, a), tuple(shape), copy=copy)


@_implements("ravel")
def _ravel(ns: Any, a: Any, order: str = "C") -> Any:
    _c_order("ravel", order)
    return ns.reshape(_array(ns, a), (-1,))


@_implements("transpose", "permute_dims")
def _transpose(ns: Any, a: Any, axes: Any = None) -> Any:
    x = _array(ns, a)
    if axes is None:
        axes = tuple(range(x.ndim))[::-1]
    return ns.permute_dims(x, tuple(axes))


@_implements("matrix_transpose", "linalg.matrix_transpose")
def _matrix_transpose(ns: Any, x: Any, /) -> Any:
    return ns.matrix_transpose(_array(ns, x))


@_implements("swapaxes")
def _swapaxes(ns: Any, a: Any, axis1: int, axis2: int) -> Any:
    x = _array(ns, a)
    perm = list(range(x.ndim))
    i, j = axis1 % max(x.ndim, 1), axis2 % max(x.ndim, 1)
    perm[i], perm[j] = perm[j], perm[i]
    return ns.permute_dims(x, tuple(perm))


@_implements("moveaxis")
def _moveaxis(ns: Any, a: Any, source: Any, destination: Any) -> Any:
    if isinstance(source, list):
        source = tuple(source)
    if isinstance(destination, list):
        destination = tuple(destination)
    return ns.moveaxis(_array(ns, a), source, destination)


@_implements("rollaxis")
def _rollaxis(ns: Any, a: Any, axis: int, start: int = 0) -> Any:
    x = _array(ns, a)
    n = x.ndim
    axis %= n
    if start < 0:
        start += n
    if axis < start:
        start -= 1
    if axis == start:
        return x
    return ns.moveaxis(x, axis, start)


@_implements("expand_dims")
def _expand_dims(ns: Any, a: Any, axis: Any) -> Any:
    x = _array(ns, a)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    nd = x.ndim + len(axes)
    for ax in sorted(ax % nd for ax in axes):
        x = ns.expand_dims(x, axis=ax)
    return x


@_implements("squeeze")
def _squeeze(ns: Any, a: Any, axis: Any = None) -> Any:
    x = _array(ns, a)
    if axis is None:
        axis = tuple(i for i, s in enumerate(x.shape) if s == 1)
        if not axis:
            return x
    elif isinstance(axis, list):
        axis = tuple(axis)
    return ns.squeeze(x, axis=axis)


@_implements("concatenate", "concat")
def _concatenate(
    ns: Any,
    arrays: Any,
    axis: Any = 0,
    out: Any = None,
    *,
    dtype: Any = None,
    casting: Any = "same_kind",
) -> Any:
    xs = [_array(ns, e) for e in arrays]
    if axis is None:
        xs = [ns.reshape(e, (-1,)) for e in xs]
        axis = 0
    if dtype is not None:
        xs = [ns.astype(e, np.dtype(dtype)) for e in xs]
    return _finish(ns, ns.concat(xs, axis=axis), out, "concatenate")


@_implements("stack")
def _stack(
    ns: Any,
    arrays: Any,
    axis: int = 0,
    out: Any = None,
    *,
    dtype: Any = None,
    casting: Any = "same_kind",
) -> Any:
    xs = [_array(ns, e) for e in arrays]
    if dtype is not None:
        xs = [ns.astype(e, np.dtype(dtype)) for e in xs]
    return _finish(ns, ns.stack(xs, axis=axis), out, "stack")


def _atleast(ns: Any, x: Any, nd: int) -> Any:
    x = _array(ns, x)
    if x.ndim >= nd:
        return x
    if nd == 1:
        return ns.reshape(x, (1,))
    if nd == 2:
        return ns.reshape(x, (1, *x.shape) if x.ndim == 1 else (1, 1))
    if x.ndim == 0:
        return ns.reshape(x, (1, 1, 1))
    if x.ndim == 1:
        return ns.reshape(x, (1, x.shape[0], 1))
    return ns.reshape(x, (*x.shape, 1))


def _atleast_nd(nd: int) -> Composition:
    def f(ns: Any, *arys: Any) -> Any:
        res = tuple(_atleast(ns, a, nd) for a in arys)
        return res[0] if len(res) == 1 else res

    return f


FUNCTIONS["atleast_1d"] = _atleast_nd(1)
FUNCTIONS["atleast_2d"] = _atleast_nd(2)
FUNCTIONS["atleast_3d"] = _atleast_nd(3)


@_implements("vstack", "row_stack")
def _vstack(ns: Any, tup: Any, *, dtype: Any = None, casting: Any = "same_kind") -> Any:
    return _concatenate(ns, [_atleast(ns, e, 2) for e in tup], 0, dtype=dtype)


@_implements("hstack")
def _hstack(ns: Any, tup: Any, *, dtype: Any = None, casting: Any = "same_kind") -> Any:
    xs = [_atleast(ns, e, 1) for e in tup]
    return _concatenate(ns, xs, 0 if xs and xs[0].ndim == 1 else 1, dtype=dtype)


@_implements("dstack")
def _dstack(ns: Any, tup: Any) -> Any:
    return _concatenate(ns, [_atleast(ns, e, 3) for e in tup], 2)


@_implements("column_stack")
def _column_stack(ns: Any, tup: Any) -> Any:
    xs = []
    for e in tup:
        x = _array(ns, e)
        xs.append(ns.reshape(x, (x.shape[0], 1)) if x.ndim < 2 else x)
    return ns.concat(xs, axis=1)


@_implements("append")
def _append(ns: Any, arr: Any, values: Any, axis: Any = None) -> Any:
    a, v = _array(ns, arr), _array(ns, values)
    if axis is None:
        return ns.concat([ns.reshape(a, (-1,)), ns.reshape(v, (-1,))], axis=0)
    return ns.concat([a, v], axis=axis)


def _split_points(what: str, n: int, sections: Any, even: bool) -> list[int]:
    if isinstance(sections, int | np.integer):
        k = int(sections)
        if k <= 0:
            raise ValueError(f"numpy.{what}(): number sections must be larger than 0.")
        if even and n % k:
            raise ValueError(f"numpy.{what}(): array split does not result in an equal division")
        size, extra = divmod(n, k)
        points, at = [0], 0
        for i in range(k):
            at += size + (1 if i < extra else 0)
            points.append(at)
        return points
    return [0, *(int(i) for i in sections), n]


def _split_with(what: str, even: bool, default_axis: int = 0) -> Composition:
    def f(ns: Any, ary: Any, indices_or_sections: Any, axis: int = default_axis) -> Any:
        x = _array(ns, ary)
        axis %= x.ndim
        n = x.shape[axis]
        pts = _split_points(what, n, indices_or_sections, even)
        out = []
        for lo, hi in zip(pts[:-1], pts[1:], strict=True):
            lo, hi = max(min(lo, n), 0), max(min(hi, n), 0)
            key = (slice(None),) * axis + (slice(lo, max(lo, hi)),)
            out.append(x[key])
        return out

    return f


FUNCTIONS["split"] = _split_with("split", True)
FUNCTIONS["array_split"] = _split_with("array_split", False)


@_implements("hsplit")
def _hsplit(ns: Any, ary: Any, indices_or_sections: Any) -> Any:
    x = _array(ns, ary)
    return FUNCTIONS["split"](ns, x, indices_or_sections, 1 if x.ndim > 1 else 0)


@_implements("vsplit")
def _vsplit(ns: Any, ary: Any, indices_or_sections: Any) -> Any:
    return FUNCTIONS["split"](ns, ary, indices_or_sections, 0)


@_implements("dsplit")
def _dsplit(ns: Any, ary: Any, indices_or_sections: Any) -> Any:
    return FUNCTIONS["split"](ns, ary, indices_or_sections, 2)


@_implements("unstack")
def _unstack(ns: Any, x: Any, /, *, axis: int = 0) -> Any:
    return ns.unstack(_array(ns, x), axis=axis)


@_implements("flip")
def _flip(ns: Any, m: Any, axis: Any = None) -> Any:
    return ns.flip(_array(ns, m), axis=_norm_axis(axis))


@_implements("fliplr")
def _fliplr(ns: Any, m: Any) -> Any:
    return ns.flip(_array(ns, m), axis=1)


@_implements("flipud")
def _flipud(ns: Any, m: Any) -> Any:
    return ns.flip(_array(ns, m), axis=0)


@_implements("roll")
def _roll(ns: Any, a: Any, shift: Any, axis: Any = None) -> Any:
    if isinstance(shift, list):
        shift = tuple(shift)
    return ns.roll(_array(ns, a), shift, axis=_norm_axis(axis))


@_implements("tile")
def _tile(ns: Any, A: Any, reps: Any) -> Any:
    reps = (int(reps),) if isinstance(reps, int | np.integer) else tuple(int(r) for r in reps)
    return ns.tile(_array(ns, A), reps)


@_implements("repeat")
def _repeat(ns: Any, a: Any, repeats: Any, axis: Any = None) -> Any:
    x = _array(ns, a)
    if not isinstance(repeats, int | np.integer):
        repeats = _array(ns, repeats)
        if repeats.ndim == 0:
            repeats = int(repeats)
    else:
        repeats = int(repeats)
    if axis is None:
        x, axis = ns.reshape(x, (-1,)), 0
    return ns.repeat(x, repeats, axis=axis)


@_implements("broadcast_to")
def _broadcast_to(ns: Any, array: Any, shape: Any, subok: bool = False) -> Any:
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return ns.broadcast_to(_array(ns, array), shape)


@_implements("broadcast_arrays")
def _broadcast_arrays(ns: Any, *args: Any, subok: bool = False) -> Any:
    return tuple(ns.broadcast_arrays(*[_array(ns, a) for a in args]))


@_implements("take")
def _take(
    ns: Any, a: Any, indices: Any, axis: Any = None, out: Any = None, mode: str = "raise"
) -> Any:
    if mode != "raise":
        raise _unsupported("take", f"mode={mode!r}")
    x = _array(ns, a)
    x, axis = _axis_none_flat(ns, x, axis)
    idx = _array(ns, indices)
    r = ns.take(x, ns.reshape(idx, (-1,)), axis=axis)
    if idx.ndim != 1:
        axis %= x.ndim
        r = ns.reshape(r, (*x.shape[:axis], *idx.shape, *x.shape[axis + 1 :]))
    return _finish(ns, r, out, "take")


@_implements("take_along_axis")
def _take_along_axis(ns: Any, arr: Any, indices: Any, axis: Any = -1) -> Any:
    x, idx = _array(ns, arr), _array(ns, indices)
    if axis is None:
        x, axis = ns.reshape(x, (-1,)), 0
    return ns.take_along_axis(x, idx, axis=axis)


def _to_end(ns: Any, x: Any, axis1: int, axis2: int) -> Any:
    """``x`` with ``axis1``, ``axis2`` moved to the end, in that order."""
    return ns.moveaxis(x, (axis1, axis2), (-2, -1))


@_implements("diagonal")
def _diagonal(ns: Any, a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
    x = _to_end(ns, _array(ns, a), axis1, axis2)
    return ns.linalg.diagonal(x, offset=offset)


@_implements("trace")
def _trace(
    ns: Any,
    a: Any,
    offset: int = 0,
    axis1: int = 0,
    axis2: int = 1,
    dtype: Any = None,
    out: Any = None,
) -> Any:
    x = _to_end(ns, _array(ns, a), axis1, axis2)
    r = ns.linalg.trace(x, offset=offset, dtype=dtype)
    return _finish(ns, r, out, "trace")


@_implements("tril")
def _tril(ns: Any, m: Any, k: int = 0) -> Any:
    return ns.tril(_array(ns, m), k=k)


@_implements("triu")
def _triu(ns: Any, m: Any, k: int = 0) -> Any:
    return ns.triu(_array(ns, m), k=k)


# sorting and searching


def _sort_like(fname: str) -> Composition:
    def f(
        ns: Any, a: Any, axis: Any = -1, kind: Any = None, order: Any = None, *, stable: Any = None
    ) -> Any:
        if order is not None:
            raise _unsupported(fname, "order=")
        x = _array(ns, a)
        x, axis = _axis_none_flat(ns, x, axis)
        return _function(ns, fname)(x, axis=axis, stable=True)

    return f


FUNCTIONS["sort"] = _sort_like("sort")
FUNCTIONS["argsort"] = _sort_like("argsort")


def _arg_extremum(fname: str) -> Composition:
    def f(ns: Any, a: Any, axis: Any = None, out: Any = None, *, keepdims: Any = False) -> Any:
        keepdims = False if keepdims is _NV else bool(keepdims)
        r = _function(ns, fname)(_array(ns, a), axis=axis, keepdims=keepdims)
        return _finish(ns, r, out, fname)

    return f


FUNCTIONS["argmax"] = _arg_extremum("argmax")
FUNCTIONS["argmin"] = _arg_extremum("argmin")


@_implements("unique")
def _unique(
    ns: Any,
    ar: Any,
    return_index: bool = False,
    return_inverse: bool = False,
    return_counts: bool = False,
    axis: Any = None,
    *,
    equal_nan: bool = True,
    sorted: bool = True,  # noqa: A002
) -> Any:
    if return_index or return_inverse or return_counts or axis is not None:
        raise _unsupported(
            "unique",
            "return_index=, return_inverse=, return_counts= or axis= (use "
            "numpy.unique_all, unique_inverse or unique_counts)",
        )
    return ns.unique_values(ns.reshape(_array(ns, ar), (-1,)))


def _unique_std(fname: str) -> Composition:
    def f(ns: Any, x: Any, /) -> Any:
        return _function(ns, fname)(_array(ns, x))

    return f


for _name in ("unique_values", "unique_counts", "unique_inverse", "unique_all"):
    FUNCTIONS[_name] = _unique_std(_name)


@_implements("nonzero")
def _nonzero(ns: Any, a: Any) -> Any:
    return ns.nonzero(_array(ns, a))


# creation from an array's shape and dtype


def _like(fname: str) -> Composition:
    def f(
        ns: Any,
        a: Any,
        dtype: Any = None,
        order: str = "K",
        subok: bool = True,
        shape: Any = None,
        *,
        device: Any = None,
    ) -> Any:
        x = _array(ns, a)
        dt = None if dtype is None else np.dtype(dtype)
        if shape is not None:
            shape = (shape,) if isinstance(shape, int) else tuple(shape)
            return _function(ns, fname[: -len("_like")])(shape, dtype=dt or x.dtype)
        return _function(ns, fname)(x, dtype=dt)

    return f


FUNCTIONS["zeros_like"] = _like("zeros_like")
FUNCTIONS["ones_like"] = _like("ones_like")
FUNCTIONS["empty_like"] = _like("empty_like")


@_implements("full_like")
def _full_like(
    ns: Any,
    a: Any,
    fill_value: Any,
    dtype: Any = None,
    order: str = "K",
    subok: bool = True,
    shape: Any = None,
    *,
    device: Any = None,
) -> Any:
    x = _array(ns, a)
    dt = x.dtype if dtype is None else np.dtype(dtype)
    if isinstance(fill_value, Array) or isinstance(fill_value, np.ndarray | np.generic):
        v = ns.astype(_array(ns, fill_value), dt)
        target = tuple(x.shape) if shape is None else _shape(shape)
        return ns.asarray(ns.broadcast_to(v, target), copy=True)
    if shape is not None:
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        return ns.full(shape, fill_value, dtype=dt)
    return ns.full_like(x, fill_value, dtype=dt)


@_implements("meshgrid")
def _meshgrid(
    ns: Any, *xi: Any, copy: bool = True, sparse: bool = False, indexing: str = "xy"
) -> Any:
    if sparse:
        raise _unsupported("meshgrid", "sparse=True")
    return tuple(ns.meshgrid(*[ns.reshape(_array(ns, x), (-1,)) for x in xi], indexing=indexing))


# products


@_implements("dot")
def _dot(ns: Any, a: Any, b: Any, out: Any = None) -> Any:
    x, y = _array(ns, a), _array(ns, b)
    if x.ndim == 0 or y.ndim == 0:
        r = x * y
    elif x.ndim <= 2 and y.ndim <= 2:
        r = ns.matmul(x, y)
    else:  # sum over the last axis of a and the second-to-last of b
        r = ns.tensordot(x, y, axes=([x.ndim - 1], [max(y.ndim - 2, 0)]))
    return _finish(ns, r, out, "dot")


@_implements("vdot")
def _vdot(ns: Any, a: Any, b: Any) -> Any:
    x, y = ns.reshape(_array(ns, a), (-1,)), ns.reshape(_array(ns, b), (-1,))
    return ns.sum(ns.conj(x) * y) if ns.isdtype(x.dtype, "complex floating") else ns.sum(x * y)


@_implements("inner")
def _inner(ns: Any, a: Any, b: Any) -> Any:
    x, y = _array(ns, a), _array(ns, b)
    if x.ndim == 0 or y.ndim == 0:
        return x * y
    return ns.tensordot(x, y, axes=([x.ndim - 1], [y.ndim - 1]))


@_implements("outer")
def _outer_function(ns: Any, a: Any, b: Any, out: Any = None) -> Any:
    x, y = ns.reshape(_array(ns, a), (-1,)), ns.reshape(_array(ns, b), (-1,))
    return _finish(ns, x[:, None] * y[None, :], out, "outer")


@_implements("linalg.outer")
def _linalg_outer(ns: Any, x1: Any, x2: Any, /) -> Any:
    return ns.linalg.outer(_array(ns, x1), _array(ns, x2))


def _tensordot_axes(axes: Any) -> Any:
    if isinstance(axes, int | np.integer):
        return int(axes)
    a, b = axes
    a = [int(a)] if isinstance(a, int | np.integer) else [int(i) for i in a]
    b = [int(b)] if isinstance(b, int | np.integer) else [int(i) for i in b]
    return (a, b)


@_implements("tensordot", "linalg.tensordot")
def _tensordot(ns: Any, a: Any, b: Any, axes: Any = 2) -> Any:
    return ns.tensordot(_array(ns, a), _array(ns, b), axes=_tensordot_axes(axes))


@_implements("linalg.matmul")
def _linalg_matmul(ns: Any, x1: Any, x2: Any, /) -> Any:
    return ns.matmul(_array(ns, x1), _array(ns, x2))


@_implements("linalg.vecdot")
def _linalg_vecdot(ns: Any, x1: Any, x2: Any, /, *, axis: int = -1) -> Any:
    return ns.vecdot(_array(ns, x1), _array(ns, x2), axis=axis)


@_implements("cross", "linalg.cross")
def _cross(
    ns: Any,
    a: Any,
    b: Any,
    axisa: int = -1,
    axisb: int = -1,
    axisc: int = -1,
    axis: Any = None,
) -> Any:
    x, y = _array(ns, a), _array(ns, b)
    if axis is not None:
        axisa = axisb = axisc = axis
    x, y = ns.moveaxis(x, axisa, -1), ns.moveaxis(y, axisb, -1)
    if x.shape[-1] != 3 or y.shape[-1] != 3:
        raise _unsupported("cross", "vectors of 2 components")
    r = ns.linalg.cross(x, y, axis=-1)
    return ns.moveaxis(r, -1, axisc) if r.ndim else r


@_implements("kron")
def _kron(ns: Any, a: Any, b: Any) -> Any:
    x, y = _array(ns, a), _array(ns, b)
    nd = max(x.ndim, y.ndim)
    x = ns.reshape(x, (1,) * (nd - x.ndim) + tuple(x.shape))
    y = ns.reshape(y, (1,) * (nd - y.ndim) + tuple(y.shape))
    # x[i, None, j, None] * y[None, k, None, l] -> (i*k, j*l)
    xs = ns.reshape(x, tuple(s for d in x.shape for s in (d, 1)))
    ys = ns.reshape(y, tuple(s for d in y.shape for s in (1, d)))
    return ns.reshape(xs * ys, tuple(p * q for p, q in zip(x.shape, y.shape, strict=True)))


_LETTERS = string.ascii_letters


def _sublist_subscripts(args: tuple) -> tuple[str, list]:
    """np.einsum's alternative form ``(op0, sublist0, op1, sublist1, ..., [sublistout])``
    as a subscripts string and the operands."""
    ops, terms = [], []
    rest = list(args)
    while len(rest) >= 2:
        ops.append(rest.pop(0))
        terms.append(rest.pop(0))

    def term(sub: Any) -> str:
        return "".join("..." if s is Ellipsis else _LETTERS[int(s)] for s in sub)

    spec = ",".join(term(t) for t in terms)
    if rest:
        spec += "->" + term(rest[0])
    return spec, ops


@_implements("einsum")
def _einsum(
    ns: Any,
    *operands: Any,
    out: Any = None,
    dtype: Any = None,
    order: str = "K",
    casting: str = "safe",
    optimize: Any = False,
) -> Any:
    if isinstance(operands[0], str):
        subscripts, ops = operands[0].replace(" ", ""), list(operands[1:])
    else:
        subscripts, ops = _sublist_subscripts(operands)
    xs = [_array(ns, o) for o in ops]
    if dtype is not None:
        xs = [ns.astype(x, np.dtype(dtype)) for x in xs]
    return _finish(ns, ns._einsum(subscripts, *xs), out, "einsum")


@_implements("linalg.multi_dot")
def _multi_dot(ns: Any, arrays: Any, *, out: Any = None) -> Any:
    xs = [_array(ns, a) for a in arrays]
    first_vec, last_vec = xs[0].ndim == 1, xs[-1].ndim == 1
    if first_vec:
        xs[0] = xs[0][None, :]
    if last_vec:
        xs[-1] = xs[-1][:, None]
    r = xs[0]
    for x in xs[1:]:
        r = ns.matmul(r, x)
    if first_vec and last_vec:
        r = r[0, 0]
    elif first_vec:
        r = r[0]
    elif last_vec:
        r = r[:, 0]
    return _finish(ns, r, out, "linalg.multi_dot")


# numpy.linalg


def _linalg1(fname: str) -> Composition:
    def f(ns: Any, a: Any) -> Any:
        return _function(ns, f"linalg.{fname}")(_array(ns, a))

    return f


for _name in ("inv", "det", "slogdet", "svdvals"):
    FUNCTIONS[f"linalg.{_name}"] = _linalg1(_name)


@_implements("linalg.solve")
def _solve(ns: Any, a: Any, b: Any) -> Any:
    return ns.linalg.solve(_array(ns, a), _array(ns, b))


@_implements("linalg.cholesky")
def _cholesky(ns: Any, a: Any, /, *, upper: bool = False) -> Any:
    return ns.linalg.cholesky(_array(ns, a), upper=upper)


@_implements("linalg.qr")
def _qr(ns: Any, a: Any, mode: str = "reduced") -> Any:
    if mode == "r":
        return ns.linalg.qr(_array(ns, a), mode="reduced")[1]
    if mode not in ("reduced", "complete"):
        raise _unsupported("linalg.qr", f"mode={mode!r}")
    return ns.linalg.qr(_array(ns, a), mode=mode)


@_implements("linalg.svd")
def _svd(
    ns: Any, a: Any, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False
) -> Any:
    x = _array(ns, a)
    if not compute_uv:
        return ns.linalg.svdvals(x)
    return ns.linalg.svd(x, full_matrices=full_matrices)


def _lower(ns: Any, x: Any, uplo: str) -> Any:
    """NumPy's eigh reads one triangle: the matrix it means, from the lower (or upper) one."""
    if uplo not in ("L", "U"):
        raise ValueError("numpy.linalg.eigh(): UPLO argument must be 'L' or 'U'")
    low = ns.tril(x) if uplo == "L" else ns.matrix_transpose(ns.triu(x))
    strict = ns.tril(low, k=-1)
    return low + ns.conj(ns.matrix_transpose(strict))


@_implements("linalg.eigh")
def _eigh(ns: Any, a: Any, UPLO: str = "L") -> Any:  # noqa: N803
    return ns.linalg.eigh(_lower(ns, _array(ns, a), UPLO))


@_implements("linalg.eigvalsh")
def _eigvalsh(ns: Any, a: Any, UPLO: str = "L") -> Any:  # noqa: N803
    return ns.linalg.eigvalsh(_lower(ns, _array(ns, a), UPLO))


@_implements("linalg.pinv")
def _pinv(ns: Any, a: Any, rcond: Any = None, hermitian: bool = False, *, rtol: Any = _NV) -> Any:
    tol = rcond if rcond is not None else (None if rtol is _NV else rtol)
    return ns.linalg.pinv(_array(ns, a), rtol=tol)


@_implements("linalg.lstsq")
def _lstsq(ns: Any, a: Any, b: Any, rcond: Any = None) -> Any:
    """NumPy's least squares: ``(x, residuals, rank, s)``, ``x`` the minimum-norm solution
        ``pinv(a) b`` (singular values at most ``rcond`` times the largest taken as 0: machine
        precision times max(M, N) by default, as NumPy's), the residuals' squared norms per column
        of ``b`` where ``a`` has full column rank N < M (else empty), the rank and ``a``'s singular
        values. ``x`` and the residuals are differentiable where the rank does not change. Where
    the rank cannot be read (inside vmap, on a lazy backend), the residuals are the squared norms
    whenever M > N, whatever the rank."""
    A, B = _float_of(ns, _array(ns, a)), _float_of(ns, _array(ns, b))
    if A.ndim != 2:
        raise np.linalg.LinAlgError(
            f"numpy.linalg.lstsq(): {A.ndim}-dimensional array given. Array must be two-dimensional"
        )
    m, n = A.shape
    if B.ndim not in (1, 2) or B.shape[0] != m:
        raise np.linalg.LinAlgError(
            f"numpy.linalg.lstsq(): incompatible dimensions: a is {tuple(A.shape)}, b is "
            f"{tuple(B.shape)}"
        )
    dtype = ns.result_type(A, B)
    A, B = ns.astype(A, dtype), ns.astype(B, dtype)
    eps = float(ns.finfo(dtype).eps)
    tol = eps * max(m, n) if rcond is None else (eps if rcond < 0 else float(rcond))
    s = ns.linalg.svdvals(A)
    rank = ns.astype(ns.linalg.matrix_rank(A, rtol=tol), ns.int32)  # NumPy's dtype
    x = ns.linalg.pinv(A, rtol=tol) @ B
    b = rank._backend
    if isinstance(rank._data, NoValue) or b.abstract or b.lazy or b.level:
        # traced, projected, lazy or batched (one rank per example): no one value to branch
        # on. The full-rank case's shape: the residuals' squared norms where M > N (NumPy's
        # where the rank is N; where it is not, NumPy's are empty, which a batch cannot hold)
        if STACK.recorder is not None:
            STACK.recorder.data_dependent(
                "numpy.linalg.lstsq (its residuals, empty unless a has rank N)"
            )
        full = m > n
    else:
        full = int(rank) == n and m > n
    if full:
        r = B - A @ x
        sq = ns.real(ns.conj(r) * r) if ns.isdtype(dtype, "complex floating") else r * r
        residuals = ns.sum(sq, axis=0)
        residuals = ns.reshape(residuals, (1,)) if B.ndim == 1 else residuals
    else:
        residuals = ns.zeros((0,), dtype=s.dtype)
    return x, residuals, rank, s


@_implements("linalg.matrix_power")
def _matrix_power(ns: Any, a: Any, n: int) -> Any:
    return ns.linalg.matrix_power(_array(ns, a), int(n))


@_implements("linalg.matrix_rank")
def _matrix_rank(
    ns: Any, A: Any, tol: Any = None, hermitian: bool = False, *, rtol: Any = None
) -> Any:
    if tol is not None:
        raise _unsupported("linalg.matrix_rank", "tol=")
    return ns.linalg.matrix_rank(_array(ns, A), rtol=rtol)


@_implements("linalg.trace")
def _linalg_trace(ns: Any, x: Any, /, *, offset: int = 0, dtype: Any = None) -> Any:
    return ns.linalg.trace(_array(ns, x), offset=offset, dtype=dtype)


@_implements("linalg.diagonal")
def _linalg_diagonal(ns: Any, x: Any, /, *, offset: int = 0) -> Any:
    return ns.linalg.diagonal(_array(ns, x), offset=offset)


@_implements("linalg.matrix_norm")
def _linalg_matrix_norm(ns: Any, x: Any, /, *, keepdims: bool = False, ord: Any = "fro") -> Any:  # noqa: A002
    return ns.linalg.matrix_norm(_array(ns, x), keepdims=keepdims, ord=ord)


@_implements("linalg.vector_norm")
def _linalg_vector_norm(
    ns: Any,
    x: Any,
    /,
    *,
    axis: Any = None,
    keepdims: bool = False,
    ord: Any = 2,  # noqa: A002
) -> Any:
    return ns.linalg.vector_norm(_array(ns, x), axis=_norm_axis(axis), keepdims=keepdims, ord=ord)


@_implements("linalg.norm")
def _norm(ns: Any, x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A002
    """NumPy's rules: no axis and no ord, the 2-norm of the flattened array; an int axis (or a
    1-D array), a vector norm; two axes (or a 2-D array), a matrix norm."""
    a = _array(ns, x)
    if not ns.isdtype(a.dtype, ("real floating", "complex floating")):
        a = ns.astype(a, ns.float64)
    if axis is None:
        if ord is None:
            r = ns.linalg.vector_norm(a, axis=None, ord=2)
            if keepdims:
                r = ns.reshape(r, (1,) * a.ndim)
            return r
        if a.ndim == 1:
            axis = (0,)
        elif a.ndim == 2:
            axis = (0, 1)
        else:
            raise ValueError("numpy.linalg.norm(): improper number of dimensions to norm")
    elif isinstance(axis, int | np.integer):
        axis = (int(axis),)
    else:
        axis = tuple(int(i) for i in axis)
    if len(axis) == 1:
        if isinstance(ord, str):
            raise ValueError(f"numpy.linalg.norm(): invalid norm order {ord!r} for vectors")
        p = 2 if ord is None else ord
        return ns.linalg.vector_norm(a, axis=axis[0], keepdims=keepdims, ord=p)
    if len(axis) != 2:
        raise ValueError("numpy.linalg.norm(): improper number of dimensions to norm")
    r0, r1 = (ax % a.ndim for ax in axis)
    if r0 == r1:
        raise ValueError("numpy.linalg.norm(): duplicate axes given")
    p = "fro" if ord in (None, "fro", "f") else ord
    if p not in ("fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf):
        raise ValueError(f"numpy.linalg.norm(): invalid norm order {ord!r} for matrices")
    m = ns.moveaxis(a, (r0, r1), (-2, -1))
    r = ns.linalg.matrix_norm(m, ord=p)
    if keepdims:
        r = ns.expand_dims(ns.expand_dims(r, axis=min(r0, r1)), axis=max(r0, r1))
    return r


# numpy.fft


def _norm_mode(norm: Any) -> str:
    return "backward" if norm is None else norm


# The standard's transforms of complex input (NumPy casts real input to complex for them).
_COMPLEX_IN = frozenset({"fft", "ifft", "fftn", "ifftn", "irfft", "irfftn", "hfft"})


def _fft_input(ns: Any, a: Any, fname: str) -> Any:
    """``a`` in the dtype the standard's ``fname`` takes: complex for the complex transforms,
    real floating for the others (NumPy takes any numbers and casts)."""
    x = _array(ns, a)
    single = x.dtype in (ns.float32, ns.complex64)
    if fname in _COMPLEX_IN:
        if not ns.isdtype(x.dtype, "complex floating"):
            x = ns.astype(x, ns.complex64 if single else ns.complex128)
    elif not ns.isdtype(x.dtype, "real floating"):
        if ns.isdtype(x.dtype, "complex floating"):
            raise TypeError(f"numpy.fft.{fname}(): takes real input, got {x.dtype}")
        x = ns.astype(x, ns.float64)
    return x


def _fft1(fname: str) -> Composition:
    def f(ns: Any, a: Any, n: Any = None, axis: int = -1, norm: Any = None, out: Any = None) -> Any:
        x = _fft_input(ns, a, fname)
        r = _function(ns, f"fft.{fname}")(x, n=n, axis=axis, norm=_norm_mode(norm))
        return _finish(ns, r, out, f"fft.{fname}")

    return f


for _name in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft"):
    FUNCTIONS[f"fft.{_name}"] = _fft1(_name)


def _fftn(fname: str, default_axes: Any = None) -> Composition:
    def f(
        ns: Any, a: Any, s: Any = None, axes: Any = default_axes, norm: Any = None, out: Any = None
    ) -> Any:
        x = _fft_input(ns, a, fname)
        if axes is not None:
            axes = tuple(axes)
        if s is not None:
            s = tuple(int(v) for v in s)
            if axes is None:
                axes = tuple(range(-len(s), 0))
        r = _function(ns, f"fft.{fname}")(x, s=s, axes=axes, norm=_norm_mode(norm))
        return _finish(ns, r, out, f"fft.{fname}")

    return f


for _name in ("fftn", "ifftn", "rfftn", "irfftn"):
    FUNCTIONS[f"fft.{_name}"] = _fftn(_name)
    FUNCTIONS[f"fft.{_name[:-1]}2"] = _fftn(_name, (-2, -1))


def _fftshift(fname: str) -> Composition:
    def f(ns: Any, x: Any, axes: Any = None) -> Any:
        if isinstance(axes, list):
            axes = tuple(axes)
        return _function(ns, f"fft.{fname}")(_array(ns, x), axes=axes)

    return f


FUNCTIONS["fft.fftshift"] = _fftshift("fftshift")
FUNCTIONS["fft.ifftshift"] = _fftshift("ifftshift")


# order statistics: quantile, percentile (NumPy's thirteen methods), median, and their nan forms
# (method "linear", NumPy's default).
# The values are sorted along the reduced axis (the sort's rule sends the gradient back to the
# elements), the neighbours of NumPy's virtual index are gathered and interpolated with NumPy's
# own ``_lerp``: the gradient flows to the elements the interpolation uses, as NumPy selects them.


def _reduced_last(ns: Any, x: Any, axis: Any) -> tuple[Any, tuple[int, ...]]:
    """``x`` with the ``axis`` axes moved to the end and merged into one, and the shape of the
    result with keepdims (the reduced axes as 1)."""
    if axis is None:
        return ns.reshape(x, (-1,)), (1,) * x.ndim
    axes = (axis,) if isinstance(axis, int | np.integer) else tuple(axis)
    nd = x.ndim
    axes = tuple(sorted(int(a) % nd for a in axes))
    if len(set(axes)) != len(axes):
        raise ValueError("duplicate value in 'axis'")
    rest = [i for i in range(nd) if i not in axes]
    moved = ns.permute_dims(x, (*rest, *axes))
    kept = tuple(1 if i in axes else x.shape[i] for i in range(nd))
    n = math.prod(x.shape[i] for i in axes)
    return ns.reshape(moved, (*(x.shape[i] for i in rest), n)), kept


def _order_input(ns: Any, what: str, a: Any) -> Any:
    x = _array(ns, a)
    if ns.isdtype(x.dtype, "complex floating"):
        raise TypeError(f"numpy.{what}(): a must be an array of real numbers")
    if not ns.isdtype(x.dtype, "real floating"):
        x = ns.astype(x, ns.float64)
    return x


def _lerp(ns: Any, a: Any, b: Any, t: Any) -> Any:
    """NumPy's ``_lerp``: ``a + (b - a) t``, or ``b - (b - a)(1 - t)`` where ``t >= 0.5``."""
    d = b - a
    if isinstance(t, float):
        return b - d * (1 - t) if t >= 0.5 else a + d * t
    t_arr: Any = t if isinstance(t, Array) else ns.asarray(t)
    one_minus: Any = (1 - t_arr) if isinstance(t, Array) else ns.asarray(1 - t)
    return ns.where(t_arr >= 0.5, b - d * one_minus, a + d * t_arr)


_QUANTILE_METHODS = (
    "inverted_cdf",
    "averaged_inverted_cdf",
    "closest_observation",
    "interpolated_inverted_cdf",
    "hazen",
    "weibull",
    "linear",
    "median_unbiased",
    "normal_unbiased",
    "lower",
    "higher",
    "midpoint",
    "nearest",
)  # NumPy's, in its order
# the methods whose quantile is one of the observations (NumPy takes it, no interpolation)
_QUANTILE_OBSERVATIONS = frozenset(
    {"inverted_cdf", "closest_observation", "lower", "higher", "nearest"}
)


def _quantile_core(
    ns: Any, what: str, a: Any, q: Any, axis: Any, keepdims: Any, method: str, nan: bool
) -> Any:
    if method not in _QUANTILE_METHODS:
        raise ValueError(f"numpy.{what}(): method={method!r} is not one of {_QUANTILE_METHODS}")
    if nan and method != "linear":
        raise _unsupported(what, f"method={method!r} (nan-quantiles take only 'linear')")
    weak = isinstance(q, float | int) and not isinstance(q, bool)
    if isinstance(q, Array):
        q = _values(what, q)
    qv = np.asanyarray(q)
    if qv.dtype.kind not in "iuf":
        raise TypeError(f"numpy.{what}(): q must be real numbers")
    if not (np.all(qv >= 0) and np.all(qv <= 1)):
        raise ValueError(f"numpy.{what}(): quantiles must be in the range [0, 1]")
    x = _order_input(ns, what, a)
    keepdims = False if keepdims is _NV else bool(keepdims)
    flat, kept = _reduced_last(ns, x, _norm_axis(axis))
    n = flat.shape[-1]
    if n == 0:
        raise IndexError(f"numpy.{what}(): cannot take a quantile of an empty slice")
    s = ns.sort(flat, axis=-1)
    qf = np.reshape(qv, (-1,))
    lead = tuple(flat.shape[:-1])
    if nan:
        valid = ns.logical_not(ns.isnan(flat))
        count = ns.sum(ns.astype(valid, ns.float64), axis=-1, keepdims=True)  # (..., 1)
        vi = (count - 1.0) * ns.asarray(qf.astype(np.float64))  # (..., nq)
        last = ns.maximum(count - 1.0, ns.zeros_like(count))
        prev = ns.floor(vi)
        above = vi >= count - 1.0
        prev = ns.where(above, last * ns.ones_like(vi), ns.where(vi < 0, 0.0, prev))
        nxt = ns.where(above | (vi < 0), prev, prev + 1.0)
        gamma = vi - prev
        if weak:
            gamma = ns.astype(gamma, x.dtype)
        lo = ns.take_along_axis(s, ns.astype(prev, ns.int64), axis=-1)
        hi = ns.take_along_axis(s, ns.astype(nxt, ns.int64), axis=-1)
        r = _lerp(ns, lo, hi, gamma)
    else:
        # Every method is a virtual index into the sorted slice, ``vi = prev + gamma``, and the
        # lerp of the two values beside it: NumPy's own quantile of 0..n-1 gives that index
        # (the discontinuous methods give whole or half indices). 'linear' computes it so too.
        if method == "linear":
            vi = np.asanyarray((n - 1) * qf)
        else:
            index = np.arange(n, dtype=np.float64)
            vi = np.asanyarray(np.quantile(index, qf, method=cast(Any, method)))
        prev = np.floor(vi)
        nxt = prev + 1
        above = vi >= n - 1
        prev[above] = n - 1
        nxt[above] = n - 1
        gamma = np.asanyarray(vi - np.floor(vi), dtype=vi.dtype)
        gamma[above] = 0
        lo = ns.take(s, ns.asarray(prev.astype(np.int64)), axis=-1)
        if method in _QUANTILE_OBSERVATIONS:  # an element itself, in its dtype (as NumPy)
            r = lo
        else:
            hi = ns.take(s, ns.asarray(nxt.astype(np.int64)), axis=-1)
            r = _lerp(ns, lo, hi, float(gamma[0]) if weak else gamma)
        # a slice holding a NaN gives NaN (NaN sorts last)
        has_nan = ns.isnan(s[..., -1:])
        r = ns.where(has_nan, ns.full_like(r, math.nan), r)
    # (..., nq) -> q's shape first, then the kept axes
    r = ns.reshape(r, (*lead, *qv.shape))
    nq = qv.ndim
    r = ns.permute_dims(r, (*range(len(lead), len(lead) + nq), *range(len(lead))))
    if keepdims:
        r = ns.reshape(r, (*qv.shape, *kept))
    return r


def _values(what: str, a: Array, name: str = "q") -> np.ndarray:
    """The NumPy values of an array of ours that only parametrizes a function (argument
    ``name``: quantile's ``q``, cov's ``fweights``)."""
    if a._node is not None or not isinstance(a._data, np.ndarray):
        raise _unsupported(what, f"{name} being differentiated, batched or traced")
    return np.asarray(a._data)


def _quantile_function(what: str, scale: float, nan: bool) -> Composition:
    def f(
        ns: Any,
        a: Any,
        q: Any,
        axis: Any = None,
        out: Any = None,
        overwrite_input: bool = False,
        method: str = "linear",
        keepdims: Any = False,
        *,
        weights: Any = None,
        interpolation: Any = None,
    ) -> Any:
        if weights is not None:
            raise _unsupported(what, "weights=")
        if interpolation is not None:
            method = interpolation
        if scale != 1.0:
            weak = isinstance(q, float | int) and not isinstance(q, bool)
            qv = np.true_divide(_values(what, q) if isinstance(q, Array) else q, scale)
            q = float(qv) if weak else qv
            if not (np.all(np.asarray(q) >= 0) and np.all(np.asarray(q) <= 1)):
                raise ValueError(f"numpy.{what}(): percentiles must be in the range [0, 100]")
        r = _quantile_core(ns, what, a, q, axis, keepdims, method, nan)
        return _finish(ns, r, out, what)

    return f


FUNCTIONS["quantile"] = _quantile_function("quantile", 1.0, False)
FUNCTIONS["percentile"] = _quantile_function("percentile", 100.0, False)
FUNCTIONS["nanquantile"] = _quantile_function("nanquantile", 1.0, True)
FUNCTIONS["nanpercentile"] = _quantile_function("nanpercentile", 100.0, True)


def _median_function(what: str, nan: bool) -> Composition:
    def f(
        ns: Any,
        a: Any,
        axis: Any = None,
        out: Any = None,
        overwrite_input: bool = False,
        keepdims: Any = False,
    ) -> Any:
        x = _order_input(ns, what, a)
        keepdims = False if keepdims is _NV else bool(keepdims)
        flat, kept = _reduced_last(ns, x, _norm_axis(axis))
        n = flat.shape[-1]
        s = ns.sort(flat, axis=-1)
        if nan:
            count = ns.sum(ns.astype(ns.logical_not(ns.isnan(flat)), ns.int64), axis=-1)
            lo_i = ns.where(count > 0, (count - 1) // 2, ns.zeros_like(count))
            hi_i = count // 2
            lo = ns.take_along_axis(s, lo_i[..., None], axis=-1)[..., 0]
            hi = ns.take_along_axis(s, ns.minimum(hi_i, n - 1)[..., None], axis=-1)[..., 0]
            r = (lo + hi) / 2
        else:
            if n == 0:
                r = ns.full(tuple(flat.shape[:-1]), math.nan, dtype=x.dtype)
            elif n % 2:
                r = s[..., n // 2]
            else:
                r = (s[..., n // 2 - 1] + s[..., n // 2]) / 2
            r = ns.where(ns.isnan(s[..., -1]), ns.full_like(r, math.nan), r)
        if keepdims:
            r = ns.reshape(r, kept)
        return _finish(ns, r, out, what)

    return f


FUNCTIONS["median"] = _median_function("median", False)
FUNCTIONS["nanmedian"] = _median_function("nanmedian", True)


# covariance and correlation


@_implements("cov")
def _cov(
    ns: Any,
    m: Any,
    y: Any = None,
    rowvar: bool = True,
    bias: bool = False,
    ddof: Any = None,
    fweights: Any = None,
    aweights: Any = None,
    *,
    dtype: Any = None,
) -> Any:
    x = _array(ns, m)
    if x.ndim > 2:
        raise ValueError("numpy.cov(): m has more than 2 dimensions")
    yy = None if y is None else _array(ns, y)
    if yy is not None and yy.ndim > 2:
        raise ValueError("numpy.cov(): y has more than 2 dimensions")
    if dtype is None:
        dtype = np.result_type(x.dtype, *(() if yy is None else (yy.dtype,)), np.float64)
    dt = np.dtype(dtype)
    X = ns.astype(_atleast(ns, x, 2), dt)
    if not rowvar and x.ndim != 1:
        X = ns.matrix_transpose(X)
    if X.shape[0] == 0:
        return ns.reshape(ns.asarray([], dtype=ns.float64), (0, 0))
    if yy is not None:
        Y = ns.astype(_atleast(ns, yy, 2), dt)
        if not rowvar and Y.shape[0] != 1:
            Y = ns.matrix_transpose(Y)
        X = ns.concat([X, Y], axis=0)
    if ddof is None:
        ddof = 1 if bias == 0 else 0
    # The weights: fweights are counts (their values are read: no gradient); aweights may be
    # differentiated, batched or traced (the sums below are the namespace's).
    w: Any = None
    if fweights is not None:
        fw = _values("cov", fweights, "fweights") if isinstance(fweights, Array) else fweights
        fw = np.asarray(fw, dtype=float)
        if not np.all(fw == np.around(fw)):
            raise TypeError("numpy.cov(): fweights must be integer")
        _check_weights("fweights", fw, X.shape[1])
        w = ns.asarray(fw, dtype=dt)
    aw: Any = None
    if aweights is not None:
        aw = ns.astype(_array(ns, aweights), dt)
        data = getattr(aweights, "_data", aweights)
        _check_weights("aweights", data if isinstance(data, np.ndarray) else aw, X.shape[1])
        w = aw if w is None else w * aw
    if w is None:
        avg = ns.mean(X, axis=1)
        fact: Any = X.shape[1] - ddof
    else:
        w_sum = ns.sum(w)
        avg = ns.sum(X * w, axis=1) / w_sum
        if ddof == 0:
            fact = w_sum
        elif aw is None:
            fact = w_sum - ddof
        else:
            fact = w_sum - ddof * ns.sum(w * aw) / w_sum
    if isinstance(fact, Array):
        fact = ns.where(fact <= 0, 0.0, fact)
    elif fact <= 0:
        fact = 0.0
    Xc = X - avg[:, None]
    Xt = ns.matrix_transpose(Xc if w is None else Xc * w)
    if ns.isdtype(Xt.dtype, "complex floating"):
        Xt = ns.conj(Xt)
    c = ns.matmul(Xc, Xt)
    with np.errstate(divide="ignore"):
        c = c / fact if isinstance(fact, Array) else c * np.true_divide(1, fact)
    return _squeeze(ns, c)


def _check_weights(name: str, w: Any, samples: int) -> None:
    """numpy.cov's weights: 1-D, one per sample, non-negative (where the values are known)."""
    if w.ndim != 1 or w.shape[0] != samples or (isinstance(w, np.ndarray) and np.any(w < 0)):
        raise ValueError(f"numpy.cov(): {name} must be 1-D, non-negative, one per sample")


@_implements("corrcoef")
def _corrcoef(
    ns: Any,
    x: Any,
    y: Any = None,
    rowvar: bool = True,
    bias: Any = _NV,
    ddof: Any = _NV,
    *,
    dtype: Any = None,
) -> Any:
    c = _cov(ns, x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return c / c
    d = ns.linalg.diagonal(c)
    stddev = ns.sqrt(ns.real(d) if ns.isdtype(d.dtype, "complex floating") else d)
    c = c / stddev[:, None]
    c = c / stddev[None, :]
    if ns.isdtype(c.dtype, "complex floating"):
        return ns.clip(ns.real(c), -1.0, 1.0) + 1j * ns.imag(c)
    return ns.clip(c, -1.0, 1.0)


# padding


def _pairs(what: str, v: Any, ndim: int, as_index: bool) -> np.ndarray:
    """NumPy's ``_as_pairs``: ``v`` as ``ndim`` (before, after) pairs."""
    if isinstance(v, Array):
        v = _values(what, v)
    a = np.asarray(v)
    if as_index:
        a = np.around(a).astype(np.intp)
        if np.any(a < 0):
            raise ValueError(f"numpy.{what}(): index can't contain negative values")
    try:
        return np.broadcast_to(a, (ndim, 2))
    except ValueError as e:
        raise ValueError(
            f"numpy.{what}(): operands could not be broadcast to ({ndim}, 2): {e}"
        ) from None


_PAD_INDEX_MODES = frozenset({"edge", "reflect", "symmetric", "wrap"})
_PAD_STAT_MODES = frozenset({"maximum", "minimum", "mean", "median"})
_PAD_KEYWORDS = {
    "constant": {"constant_values"},
    "reflect": {"reflect_type"},
    "symmetric": {"reflect_type"},
    "linear_ramp": {"end_values"},
    **dict.fromkeys(_PAD_STAT_MODES, {"stat_length"}),
}


def _along(x: Any, ax: int, start: int, stop: int) -> Any:
    """``x[start:stop]`` along axis ``ax``."""
    return x[(slice(None),) * ax + (slice(start, stop),)]


def _pad_stat(ns: Any, region: Any, ax: int, mode: str) -> Any:
    """NumPy's statistic of a pad region along ``ax`` (kept as an axis of 1): integers get the
    mean and median rounded, as NumPy's ``pad`` does."""
    if mode == "maximum":
        return ns.max(region, axis=ax, keepdims=True)
    if mode == "minimum":
        return ns.min(region, axis=ax, keepdims=True)
    stat = FUNCTIONS["median"](ns, region, axis=ax, keepdims=True) if mode == "median" else None
    if stat is None:
        floating = ns.isdtype(region.dtype, ("real floating", "complex floating"))
        stat = ns.mean(
            region if floating else ns.astype(region, ns.float64), axis=ax, keepdims=True
        )
    if not ns.isdtype(region.dtype, ("real floating", "complex floating")):
        stat = ns.astype(ns.round(stat), region.dtype)
    return stat


def _pad_ramp(ns: Any, edge: Any, end: Any, width: int, ax: int, before: bool) -> Any:
    """NumPy's ``linspace(end, edge, width, endpoint=False)`` along ``ax`` (outermost first;
    reversed after the array): ``end + i (edge - end) / width``."""
    floating = ns.isdtype(edge.dtype, ("real floating", "complex floating"))
    e = edge if floating else ns.astype(edge, ns.float64)
    steps = np.arange(width, dtype=np.float64)
    shape = [1] * edge.ndim
    shape[ax] = width
    i = ns.asarray(np.reshape(steps if before else steps[::-1], shape), dtype=e.dtype)
    ramp = end + i * ((e - end) / width)
    return ramp if floating else ns.astype(ns.floor(ramp), edge.dtype)


@_implements("pad")
def _pad(ns: Any, array: Any, pad_width: Any, mode: Any = "constant", **kwargs: Any) -> Any:
    """Axis by axis, as NumPy's own ``pad`` (a later axis pads what the earlier ones padded):
    ``constant`` and ``empty`` (zeros) concatenate blocks of the constant; ``edge``,
    ``reflect``, ``symmetric`` and ``wrap`` gather along the axis with the index NumPy's own
    ``pad`` gives ``arange(n)`` (the gradient scatters back through the gather);
    ``maximum``, ``minimum``, ``mean`` and ``median`` concatenate the statistic of the first
    and last ``stat_length`` elements, and ``linear_ramp`` a ramp from ``end_values`` to the
    edge (the gradient flows through the statistic and the edge). A callable mode and
    ``reflect_type='odd'`` refuse."""
    x = _array(ns, array)
    if callable(mode) or mode not in _PAD_INDEX_MODES | _PAD_STAT_MODES | {
        "constant",
        "empty",
        "linear_ramp",
    }:
        name = getattr(mode, "__name__", mode)
        raise _unsupported(
            "pad",
            f"mode={name!r} (constant, edge, linear_ramp, maximum, mean, median, minimum, "
            "reflect, symmetric, wrap and empty are)",
        )
    extra = set(kwargs) - _PAD_KEYWORDS.get(mode, set())
    if extra:
        raise ValueError(f"numpy.pad(): unsupported keyword arguments for mode {mode!r}: {extra}")
    if kwargs.get("reflect_type", "even") != "even":
        raise _unsupported("pad", f"reflect_type={kwargs['reflect_type']!r} (only 'even')")
    widths = _pairs("pad", pad_width, x.ndim, True)
    if mode in ("constant", "empty"):
        values = _pairs("pad", kwargs.get("constant_values", 0), x.ndim, False)
    elif mode == "linear_ramp":
        values = _pairs("pad", kwargs.get("end_values", 0), x.ndim, False)
    elif mode in _PAD_STAT_MODES and kwargs.get("stat_length") is not None:
        lengths = _pairs("pad", kwargs["stat_length"], x.ndim, True)
    else:
        lengths = None
    for ax in range(x.ndim):
        before, after = int(widths[ax, 0]), int(widths[ax, 1])
        if before == 0 and after == 0:
            continue
        n = int(x.shape[ax])
        if mode in ("constant", "empty"):
            parts = []
            for width, v in ((before, values[ax, 0]), (after, values[ax, 1])):
                shape = list(x.shape)
                shape[ax] = width
                fill = np.asarray(v).astype(x.dtype).item()
                parts.append(ns.full(tuple(shape), fill, dtype=x.dtype))
            x = ns.concat([parts[0], x, parts[1]], axis=ax)
            continue
        if n == 0:
            raise ValueError(
                f"numpy.pad(): can't extend empty axis {ax} using modes other than "
                "'constant' or 'empty'"
            )
        if mode in _PAD_INDEX_MODES:
            idx = np.pad(np.arange(n), (before, after), mode=mode)
            x = ns.take(x, ns.asarray(idx), axis=ax)
            continue
        parts = []
        for side, width in ((0, before), (1, after)):
            shape = list(x.shape)
            shape[ax] = width
            if width == 0:
                parts.append(ns.zeros(tuple(shape), dtype=x.dtype))
            elif mode == "linear_ramp":
                edge = _along(x, ax, 0, 1) if side == 0 else _along(x, ax, n - 1, n)
                parts.append(_pad_ramp(ns, edge, float(values[ax, side]), width, ax, side == 0))
            else:
                k = n if lengths is None else min(int(lengths[ax, side]), n)
                if k == 0:
                    raise ValueError("numpy.pad(): stat_length of 0 yields no value for padding")
                region = _along(x, ax, 0, k) if side == 0 else _along(x, ax, n - k, n)
                stat = _pad_stat(ns, region, ax, mode)
                parts.append(ns.broadcast_to(stat, tuple(shape)))
        x = ns.concat([parts[0], x, parts[1]], axis=ax)
    return x


# interpolation, finite differences, convolution, polynomials


@_implements("interp")
def _interp(
    ns: Any, x: Any, xp: Any, fp: Any, left: Any = None, right: Any = None, period: Any = None
) -> Any:
    """NumPy's piecewise-linear interpolation (in float64, as NumPy computes it): the gradient
    flows to ``x`` (the slope), ``fp`` and ``xp`` through ``fp[j] + slope (x - xp[j])``. At a
    knot (not differentiable in x) the slope to its right, at the last knot the last
    interval's, as JAX's; 0 outside ``[xp[0], xp[-1]]`` (the constant ``left``/``right``)."""
    if period is not None:
        raise _unsupported("interp", "period=")
    f64 = ns.float64
    xs = ns.astype(_array(ns, x), f64)
    xq = ns.astype(_array(ns, xp), f64)
    fq = _array(ns, fp)
    if ns.isdtype(fq.dtype, "complex floating"):
        raise _unsupported("interp", "complex fp")
    fq = ns.astype(fq, f64)
    if xq.ndim != 1 or fq.ndim != 1:
        raise ValueError("numpy.interp(): xp and fp must be 1-D sequences")
    m = xq.shape[0]
    if fq.shape[0] != m:
        raise ValueError("numpy.interp(): fp and xp are not of the same length.")
    if m == 0:
        raise ValueError("numpy.interp(): array of sample points is empty")
    shape = tuple(xs.shape)
    xv = ns.reshape(xs, (-1,))
    lval = fq[0] if left is None else _operand(ns, left)
    rval = fq[m - 1] if right is None else _operand(ns, right)
    if m == 1:
        r = ns.broadcast_to(fq[0], tuple(xv.shape))
        last = fq[0] * ns.ones_like(xv)
    else:
        j = ns.searchsorted(_detach(xq), _detach(xv), side="right") - 1
        j = ns.clip(j, 0, m - 2)
        x0, x1 = ns.take(xq, j), ns.take(xq, j + 1)
        f0, f1 = ns.take(fq, j), ns.take(fq, j + 1)
        slope = (f1 - f0) / (x1 - x0)
        r = slope * (xv - x0) + f0
        # At a knot, where interp is not differentiable in x: the slope of the interval to
        # its right (at the last knot, the last interval's), as JAX's; the value exactly fp's
        # there (the product with x - xp is 0), and a duplicated knot's slope 0.
        knot = ns.where(x1 == x0, 0.0, slope)
        r = ns.where(xv == x0, f0 + knot * (xv - x0), r)
        last = fq[m - 1] + knot * (xv - xq[m - 1])
    r = ns.where(xv == xq[m - 1], last, r)
    r = ns.where(xv < xq[0], lval * ns.ones_like(xv), r)
    r = ns.where(xv > xq[m - 1], rval * ns.ones_like(xv), r)
    return ns.reshape(r, shape)


def _detach(a: Any) -> Any:
    """``a`` without its tape (an index computation: its value only)."""
    return a.detach() if isinstance(a, Array) and a._node is not None else a


@_implements("gradient")
def _gradient(ns: Any, f: Any, *varargs: Any, axis: Any = None, edge_order: int = 1) -> Any:
    """NumPy's second-order central differences inside, first- or second-order one-sided at
    the edges, with scalar spacings (one for all axes or one per axis)."""
    x = _array(ns, f)
    nd = x.ndim
    if axis is None:
        axes = tuple(range(nd))
    else:
        given = (axis,) if isinstance(axis, int | np.integer) else tuple(axis)
        axes = tuple(int(a) % nd for a in given)
    if len(varargs) == 0:
        dx: list[Any] = [1.0] * len(axes)
    elif len(varargs) == 1 and np.ndim(_raw(varargs[0])) == 0:
        dx = list(varargs) * len(axes)
    elif len(varargs) == len(axes):
        dx = list(varargs)
    else:
        raise TypeError("numpy.gradient(): invalid number of arguments")
    for d in dx:
        if np.ndim(_raw(d)) != 0:
            raise _unsupported("gradient", "coordinate arrays as spacing (scalar spacings are)")
    if edge_order > 2:
        raise ValueError("numpy.gradient(): 'edge_order' greater than 2 not supported")
    if not ns.isdtype(x.dtype, ("real floating", "complex floating")):
        x = ns.astype(x, ns.float64)
    outs = []
    for ax, h in zip(axes, dx, strict=True):
        h = h if type(h) in _PY_SCALARS else _array(ns, h)
        n = int(x.shape[ax])
        if n < edge_order + 1:
            raise ValueError(
                "numpy.gradient(): shape of array too small to calculate a numerical gradient, "
                "at least (edge_order + 1) elements are required."
            )

        def sl(start: Any, stop: Any = None, ax: int = ax) -> Any:
            key = [slice(None)] * nd
            key[ax] = slice(start, stop) if stop is not None or start is None else start
            return x[tuple(key)]

        def at(i: int, ax: int = ax) -> Any:
            key: list[Any] = [slice(None)] * nd
            key[ax] = slice(i, i + 1) if i != -1 else slice(-1, None)
            return x[tuple(key)]

        inner = (sl(2, n) - sl(0, n - 2)) / (2.0 * h)
        if edge_order == 1:
            first = (at(1) - at(0)) / h
            last = (at(-1) - at(n - 2)) / h
        else:
            first = (-1.5 / h) * at(0) + (2.0 / h) * at(1) + (-0.5 / h) * at(2)
            last = (0.5 / h) * at(n - 3) + (-2.0 / h) * at(n - 2) + (1.5 / h) * at(-1)
        outs.append(ns.concat([first, inner, last], axis=ax))
    return outs[0] if len(outs) == 1 else tuple(outs)


def _correlate_full(ns: Any, long: Any, short: Any, start: int, length: int) -> Any:
    """``out[i] = sum_j long_padded[start + i + j] short[j]``, the rows ``start`` to
    ``start + length`` of the full correlation (``long`` padded with ``len(short) - 1`` zeros
    on each side): a gather into windows and one matmul."""
    k = int(short.shape[0])
    zeros = ns.zeros((k - 1,), dtype=long.dtype)
    padded = ns.concat([zeros, long, zeros], axis=0)
    idx = np.arange(start, start + length)[:, None] + np.arange(k)[None, :]
    windows = ns.reshape(ns.take(padded, ns.asarray(idx.reshape(-1))), (length, k))
    return ns.matmul(windows, short)


def _correlate_mode(ns: Any, what: str, a: Any, v: Any, mode: str) -> Any:
    x, y = _array(ns, a), _array(ns, v)
    if x.ndim != 1 or y.ndim != 1:
        raise ValueError(f"numpy.{what}(): object too deep for desired array")
    if x.shape[0] == 0:
        raise ValueError(f"numpy.{what}(): a cannot be empty")
    if y.shape[0] == 0:
        raise ValueError(f"numpy.{what}(): v cannot be empty")
    dt = np.result_type(x.dtype, y.dtype)
    x, y = ns.astype(x, dt), ns.astype(y, dt)
    swapped = x.shape[0] < y.shape[0]
    long, short = (y, x) if swapped else (x, y)
    n1, n = int(long.shape[0]), int(short.shape[0])
    if mode in ("valid", 0):
        start, length = n - 1, n1 - n + 1
    elif mode in ("same", 1):
        start, length = n - 1 - n // 2, n1
    elif mode in ("full", 2):
        start, length = 0, n1 + n - 1
    else:
        raise ValueError(f"numpy.{what}(): mode must be one of 'valid', 'same', or 'full'")
    r = _correlate_full(ns, long, short, start, length)
    return ns.flip(r, axis=0) if swapped else r


@_implements("correlate")
def _correlate(ns: Any, a: Any, v: Any, mode: str = "valid") -> Any:
    for e in (a, v):
        if isinstance(e, Array) and ns.isdtype(e.dtype, "complex floating"):
            raise _unsupported("correlate", "complex input")
    return _correlate_mode(ns, "correlate", a, v, mode)


@_implements("convolve")
def _convolve(ns: Any, a: Any, v: Any, mode: str = "full") -> Any:
    x, y = _array(ns, a), _array(ns, v)
    if x.ndim != 1 or y.ndim != 1:
        raise ValueError("numpy.convolve(): object too deep for desired array")
    if y.shape[0] > x.shape[0]:
        x, y = y, x
    if y.shape[0] == 0 or x.shape[0] == 0:
        raise ValueError("numpy.convolve(): a and v cannot be empty")
    return _correlate_mode(ns, "convolve", x, ns.flip(y, axis=0), mode)


@_implements("polyval")
def _polyval(ns: Any, p: Any, x: Any) -> Any:
    """Horner's rule, as NumPy: ``y = y * x + p[i]`` from ``zeros_like(x)``."""
    coeffs = _array(ns, p)
    xv = _array(ns, x)
    y = ns.zeros_like(xv)
    for i in range(int(coeffs.shape[0])):
        y = y * xv + coeffs[i]
    return y


@_implements("sinc")
def _sinc(ns: Any, x: Any) -> Any:
    """``sin(pi x) / (pi x)`` and 1 at 0, as NumPy; the division never sees 0, so the gradient
    at 0 is the limit, 0."""
    v = _float_of(ns, _array(ns, x))
    zero = v == 0
    y = math.pi * ns.where(zero, 1.0, v)
    return ns.where(zero, 1.0, ns.sin(y) / y)


@_implements("trapezoid")
def _trapezoid(ns: Any, y: Any, x: Any = None, dx: Any = 1.0, axis: int = -1) -> Any:
    """NumPy's trapezoidal rule: ``sum(d * (y[1:] + y[:-1]) / 2)`` along ``axis``, ``d`` the
    spacing (``dx``, or the differences of ``x``: 1-D along ``axis``, or of ``y``'s shape)."""
    v = _float_of(ns, _array(ns, y))
    axis = axis + v.ndim if axis < 0 else axis
    if x is None:
        d = dx if type(dx) in _PY_SCALARS else _array(ns, dx)
    else:
        xs = _array(ns, x)
        if xs.ndim == 1:
            d = ns.reshape(ns.diff(xs), tuple(-1 if i == axis else 1 for i in range(v.ndim)))
        else:
            d = ns.diff(xs, axis=axis)
    n = v.ndim
    upper = tuple(slice(1, None) if i == axis else slice(None) for i in range(n))
    lower = tuple(slice(None, -1) if i == axis else slice(None) for i in range(n))
    return ns.sum(d * (v[upper] + v[lower]) / 2.0, axis=axis)


@_implements("lib.stride_tricks.sliding_window_view")
def _sliding_window_view(
    ns: Any,
    x: Any,
    window_shape: Any,
    axis: Any = None,
    *,
    subok: bool = False,
    writeable: bool = False,
) -> Any:
    """NumPy's windows (a view there, a gather here: the gradient of overlapping windows adds
    up); the window axes are appended in the order of ``axis``."""
    if writeable:
        raise _unsupported(
            "lib.stride_tricks.sliding_window_view", "writeable=True (the windows are a copy)"
        )
    out = _array(ns, x)
    nd = out.ndim
    shape = (int(window_shape),) if np.ndim(window_shape) == 0 else tuple(window_shape)
    if axis is None:
        if len(shape) != nd:
            raise ValueError(
                f"numpy.lib.stride_tricks.sliding_window_view(): since axis is None, "
                f"window_shape must have the same length as x.ndim ({nd})"
            )
        axes: tuple[int, ...] = tuple(range(nd))
    else:
        axes = (int(axis),) if np.ndim(axis) == 0 else tuple(int(a) for a in axis)
        if len(axes) != len(shape):
            raise ValueError(
                "numpy.lib.stride_tricks.sliding_window_view(): must provide matching length "
                "window_shape and axis"
            )
    # projected with nothing differentiated, NumPy makes the windows itself (a strided view,
    # see array_function): a view of the same shape stands for it (a slice of ``x``, broadcast
    # along each window axis), which owns no bytes and which a reduction buffers, as NumPy's
    view = out._backend.abstract and not out._backend.level and out._node is None
    view = view and STACK.closed is None and STACK.recorder is None
    for ax, w in zip(axes, shape, strict=True):
        ax %= nd
        n = int(out.shape[ax])
        if w < 0 or w > n:
            raise ValueError(
                "numpy.lib.stride_tricks.sliding_window_view(): window shape cannot be larger "
                "than input array shape"
            )
        if view:
            part = out[tuple(slice(0, n - w + 1) if i == ax else slice(None) for i in range(nd))]
            out = ns.broadcast_to(part[..., None], (*part.shape, w))
            continue
        idx = np.arange(n - w + 1)[:, None] + np.arange(w)[None, :]
        t = ns.take(out, ns.asarray(idx.reshape(-1)), axis=ax)
        t = ns.reshape(t, (*out.shape[:ax], n - w + 1, w, *out.shape[ax + 1 :]))
        out = ns.moveaxis(t, ax + 1, -1)
    return out


# -- NumPy's names on the namespace module ---------------------------------------------------------


class _Names:
    """``xp.lib.stride_tricks``: the mapped NumPy functions under a dotted prefix."""

    def __init__(self, mod: Any, prefix: str) -> None:
        self._mod, self._prefix = mod, prefix

    def __getattr__(self, name: str) -> Any:
        return _numpy_name_of(self._mod, f"{self._prefix}.{name}")


def _numpy_name_of(mod: Any, name: str) -> Any:
    entry = FUNCTIONS.get(name)
    if entry is not None:
        f = functools.partial(entry, mod)
        functools.update_wrapper(f, entry)
        f.__name__ = name.rsplit(".", 1)[-1]  # type: ignore[attr-defined]
        return f
    if any(k.startswith(name + ".") for k in FUNCTIONS):
        return _Names(mod, name)
    raise AttributeError(f"module {mod.__name__!r} has no attribute {name!r}")


class _Special:
    """``xp.special``: the functions of :data:`FOREIGN_UFUNCS` (scipy.special's names) as the
    rows that compute them. scipy.special with ``SCIPY_ARRAY_API=1`` looks for
    ``xp.special.<name>`` (the anticipated 'special' extension of the standard) before it
    converts to NumPy, so ``scipy.special.erf(x)`` on our arrays runs the ``_erf`` row."""

    def __init__(self, mod: Any) -> None:
        self._mod = mod

    def __getattr__(self, name: str) -> Any:
        row = FOREIGN_UFUNCS.get(name)
        if row is None or row not in REGISTRY:
            raise AttributeError(f"{self._mod.__name__}.special has no function {name!r}")
        mod, fn = self._mod, _function(self._mod, row)

        def f(*args: Any, **kwargs: Any) -> Any:
            if kwargs:
                raise _unsupported(f"special.{name}", ", ".join(f"{k}=" for k in kwargs))
            xs = [a if type(a) in _PY_SCALARS else _float_of(mod, _array(mod, a)) for a in args]
            if not any(isinstance(a, Array) for a in xs):
                xs[0] = _float_of(mod, _array(mod, xs[0]))
            return fn(*xs)

        f.__name__ = f.__qualname__ = name
        return f

    def __dir__(self) -> list[str]:
        return sorted(n for n, r in FOREIGN_UFUNCS.items() if r in REGISTRY)


def numpy_names(mod: Any) -> Callable[[str], Any]:
    """The module ``__getattr__`` (PEP 562) of a namespace over NumPy: code that takes NumPy's
    names from the array's namespace (xarray's ``xp.transpose``, ``xp.pad``, ``xp.quantile``,
    ``xp.lib.stride_tricks.sliding_window_view``) gets the mapped compositions of
    :data:`FUNCTIONS`, with NumPy's signatures; ``xp.special`` is scipy.special's ufuncs that
    have rows (:class:`_Special`). The standard's names are the module's own
    attributes and never reach it; ``dir()`` lists only those."""

    def __getattr__(name: str) -> Any:  # noqa: N807
        if name.startswith("_"):
            raise AttributeError(f"module {mod.__name__!r} has no attribute {name!r}")
        if name == "special":
            return _Special(mod)
        return _numpy_name_of(mod, name)

    return __getattr__


# -- NumPy index arrays in our arrays' keys ------------------------------------------------------


def index_constants(mod: Any) -> Callable[[Any], Any]:
    """For ``x[key]`` and ``x[key] = v`` on a namespace over NumPy: NumPy integer and boolean
    arrays in ``key`` (xarray's groupby indexes with them) become constant arrays of ``mod``,
    as NumPy arrays do everywhere else in the protocols (an index carries no gradient)."""

    def convert(key: Any) -> Any:
        t = type(key)
        if t is np.ndarray:
            return mod.asarray(key) if key.dtype.kind in "iub" else key
        if t is tuple and any(type(k) is np.ndarray for k in key):
            return tuple(convert(k) for k in key)
        return key

    return convert
