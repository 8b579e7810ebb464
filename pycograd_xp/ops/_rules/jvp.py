"""Helpers of the JVP rules: None-aware sums and products, and the two derived kinds of rule
(:func:`linear`, :func:`TRANSPOSED`)."""

from __future__ import annotations

from typing import Any

from ..._primitive import REGISTRY
from ...namespace._array import SCALARS
from .vjp import raw


def plus(*terms: Any) -> Any:
    """The sum of the terms that are not None (None if all are: a zero tangent)."""
    total = None
    for t in terms:
        if t is not None:
            total = t if total is None else total + t
    return total


def call(ns: Any, name: str, *args: Any, **kwargs: Any) -> Any:
    """Row ``name`` on ``ns``: the backend call on a raw namespace, the public function on
    ours (recorded, for higher order)."""
    prim = REGISTRY[name]
    if raw(ns):
        if prim.impl is None:
            return getattr(ns, name)(*args, **kwargs)
        return prim.impl(ns, *args, **kwargs)
    fn = getattr(ns, prim.scope) if prim.scope else ns
    return getattr(fn, prim.short_name)(*args, **kwargs)


def _is_float_array(ns: Any, a: Any) -> bool:
    return (
        not isinstance(a, type)
        and hasattr(a, "dtype")
        and hasattr(a, "shape")
        and (ns.isdtype(a.dtype, ("real floating", "complex floating")))
    )


def _substitute(ns: Any, a: Any, t: Any) -> Any:
    """``a``'s tangent in a linear call: ``t``, or zeros for a floating argument without one."""
    if type(a) is list or type(a) is tuple:
        ts = t if t is not None else [None] * len(a)
        return type(a)(_substitute(ns, e, te) for e, te in zip(a, ts, strict=True))
    if t is not None:
        return t
    if isinstance(a, float | complex) and not isinstance(a, bool):
        return 0.0
    if _is_float_array(ns, a):
        return ns.zeros_like(a)
    return a


def linear(row: Any) -> Any:
    """The JVP of a row linear in its floating arguments jointly (the others are indices,
    shapes, conditions): the output's tangent is the row applied to the inputs' tangents."""
    name = row.name

    def rule(ns: Any, tangents: tuple, out: Any, *args: Any, **kwargs: Any) -> Any:
        new = [_substitute(ns, a, t) for a, t in zip(args, tangents, strict=False)]
        kw = dict(kwargs)
        for k, t in zip(row.diff_kwargs, tangents[len(args) :], strict=True):
            if k in kw:
                kw[k] = _substitute(ns, kw[k], t)
        return call(ns, name, *new, **kw)

    return rule


def TRANSPOSED(ns: Any, tangents: tuple, out: Any, *args: Any, **kwargs: Any) -> Any:
    """The JVP rule of a row whose JVP is derived from its VJP rule by transposing it,
    ``J t = (g -> J^T g)^T t`` (exact; two rule evaluations): a marker the JVP engine replaces
    with that derived rule (``pycograd_xp._forward.transposed_rule``)."""
    raise RuntimeError("TRANSPOSED is resolved by the JVP engine, not called")


def is_scalar(x: Any) -> bool:
    return isinstance(x, SCALARS)
