"""The pieces every part of the NumPy frontend uses: finding our arrays among NumPy's
arguments, unwrapping and wrapping them, NumPy's arrays and scalars as constants of the
namespace, writing into ``out=``, and the refusals (issue 19)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._host import NoValue
from .._state import STACK
from .._tape import is_leaf
from ..namespace._array import Array

# NumPy's "no value given" default (np._NoValue), spelled once.
_NV: Any = getattr(np, "_NoValue", None)

Composition = Callable[..., Any]


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
