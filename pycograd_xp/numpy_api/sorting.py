"""NumPy's sorting and searching on our arrays: ``sort``, ``argsort``, ``argmax``/``argmin``,
``unique`` and its standard forms, ``nonzero``."""

from __future__ import annotations

from typing import Any

from ._convert import _NV, Composition, _array, _axis_none_flat, _finish, _unsupported
from ._dispatch import FUNCTIONS, _function, _implements

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
    sorted: bool = True,
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
