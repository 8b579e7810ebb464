"""Helpers of the JVP rules: None-aware sums and products, and the two derived kinds of rule
(:func:`linear`, :func:`transposed`)."""

from __future__ import annotations

from typing import Any

from .. import _api, _tape
from ..namespace import of as namespace_of
from ..namespace._array import SCALARS, Array, make
from ..namespace._ops import REGISTRY, defjvp
from ..vjp._helpers import raw


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
    return not isinstance(a, type) and hasattr(a, "dtype") and hasattr(a, "shape") and (
        ns.isdtype(a.dtype, ("real floating", "complex floating")))


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


def linear(*names: str) -> None:
    """Declare rows linear in their floating arguments jointly (the others are indices,
    shapes, conditions): the output's tangent is the row applied to the inputs' tangents."""
    for name in names:
        prim = REGISTRY[name]

        def rule(ns: Any, tangents: tuple, out: Any, *args: Any, _name: str = name,
                 _prim: Any = prim, **kwargs: Any) -> Any:  # fmt: skip
            new = [_substitute(ns, a, t) for a, t in zip(args, tangents, strict=False)]
            kw = dict(kwargs)
            for k, t in zip(_prim.diff_kwargs, tangents[len(args):], strict=True):
                if k in kw:
                    kw[k] = _substitute(ns, kw[k], t)
            return call(ns, _name, *new, **kw)

        defjvp(name, rule)


def _wrap(ns: Any, a: Any) -> Any:
    if isinstance(a, ns._backend.array_type):
        return make(ns.Array, a)
    if type(a) is list or type(a) is tuple:
        return type(a)(_wrap(ns, e) for e in a)
    return a


def transposed_rule(prim: Any) -> Any:
    """The JVP of ``prim`` derived from its VJP rule: the rule is linear in the cotangent ``g``,
    so it is run on the differentiable namespace with ``g`` tracked, and a reverse pass through
    that recording, seeded with the input tangents, gives ``J t``. Exact (no differences); two
    rule evaluations."""

    def rule(ops: Any, tangents: tuple, out: Any, *args: Any, **kwargs: Any) -> Any:
        ns = namespace_of(ops)
        nested = ops is ns
        if not nested:
            args, kwargs, out = _wrap(ns, args), _wrap(ns, kwargs), _wrap(ns, out)
            tangents = _wrap(ns, tangents)
        multi = isinstance(out, list | tuple)
        outs = list(out) if multi else [out]
        floating = ns._floating
        with _api.enable_grad():
            gs, handles = [], []
            for o in outs:
                z = ns.zeros_like(o)
                if z._data.dtype in floating:
                    z, inp = _api._track(z, f"jvp of {prim.name}", "a cotangent")
                    handles.append(inp.node)
                else:
                    handles.append(None)
                gs.append(z)
            kw = dict(kwargs)
            if prim.takes_needs:
                kw["needs"] = tuple(i for i, t in enumerate(tangents) if t is not None)
            cts = prim.vjp(ns, gs if multi else gs[0], out, *args, **kw)
            pairs = []
            for ct, t in zip(cts, tangents, strict=False):
                if ct is None or t is None:
                    continue
                if type(t) is list or type(t) is tuple:
                    pairs += [(c, u) for c, u in zip(ct, t, strict=True)
                              if c is not None and u is not None]  # fmt: skip
                else:
                    pairs.append((ct, t))
            roots = []
            for ct, t in pairs:
                if not isinstance(ct, Array) or ct._node is None:
                    continue  # constant in g: no contribution
                if ct.shape != t.shape or ct.dtype != t.dtype:
                    ct = _tape._fit(ns, ct, t)
                roots.append((ct._node, t if nested else t._data))
            found = _tape.backward(roots, targets=[h for h in handles if h is not None],
                                   create_graph=nested,
                                   retain_graph=nested) if roots else {}  # fmt: skip
        res = []
        for h in handles:
            r = found.get(id(h)) if h is not None else None
            if r is not None and not nested and isinstance(r, Array):
                r = r._data
            res.append(r)
        return res if multi else res[0]

    return rule


def transposed(*names: str) -> None:
    """Declare rows whose JVP is derived from their VJP rule (see :func:`transposed_rule`)."""
    for name in names:
        defjvp(name, transposed_rule(REGISTRY[name]))


def is_scalar(x: Any) -> bool:
    return isinstance(x, SCALARS)
