"""Recording: attach a tape node to the output of a primitive applied to tracked arrays.

The namespace's functions call :func:`record` (general rows) or a recorder from
:func:`elementwise_recorder` (the hot elementwise path) only when grad mode is on and an input
is tracked. A node keeps its parents and only what the row's rule declared it reads
(``Primitive.saves``); every other array argument is kept as an :class:`ShapeDtype`.
"""

from __future__ import annotations

from typing import Any

from .._nans import check_nans
from .._state import STACK
from .._tape import Node, Select, ShapeDtype, mark_saved
from ._array import PLAIN_TYPES, Array


def _parent(a: Any, floating: frozenset) -> Node | Select | None:
    """The node of ``a`` if a gradient flows into it (a tracked floating-point array), else None."""
    if isinstance(a, Array) and a._node is not None and a._data.dtype in floating:
        return a._node
    return None


def _save(a: Array, position: Any, saved: dict) -> Any:
    """The backend array of ``a``, noting its node (for higher order) or protecting its buffer
    from in-place writes while recording (an untracked array the tape now depends on)."""
    if a._node is None:
        mark_saved(a._backend, a._data)
    else:
        saved[position] = a._node
    return a._data


def _shape_dtype(d: Any, chunked: bool) -> ShapeDtype:
    return ShapeDtype(d.shape, d.dtype, d.chunks if chunked else None)


def _keep(a: Any, keep: bool, chunked: bool, position: Any, saved: dict) -> Any:
    """What a node holds for argument ``a``: its backend array if the rule saves it, else its
    shape and dtype."""
    if type(a) in PLAIN_TYPES:
        return a
    if isinstance(a, Array):
        return _save(a, position, saved) if keep else _shape_dtype(a._data, chunked)
    if (type(a) is list or type(a) is tuple) and any(isinstance(e, Array) for e in a):
        return type(a)(_keep(e, keep, chunked, (position, j), saved) for j, e in enumerate(a))
    return a


def _lift(ns: Any, a: Any) -> Any:
    """``a`` as an array of the batched namespace ``ns`` if it is an array of a lower vmap
    level (so the node saves it at ``ns``'s level and never takes a lower level's node)."""
    if isinstance(a, Array):
        if a._backend.level < ns._backend.level:
            return ns._make(ns._backend.lift(a))
        return a
    if (type(a) is list or type(a) is tuple) and any(isinstance(e, Array) for e in a):
        return type(a)(_lift(ns, e) for e in a)
    return a


def _constant(ns: Any, a: Any) -> Any:
    """``a`` as a constant of the abstract namespace ``ns`` if it is an untracked array of a
    concrete one (a function being projected or compiled that closes over data): the node then
    saves an abstract array, never the data."""
    if isinstance(a, Array):
        if a._ns is not ns and a._node is None and not a._backend.abstract:
            return ns.asarray(a)
        return a
    if (type(a) is list or type(a) is tuple) and any(isinstance(e, Array) for e in a):
        return type(a)(_constant(ns, e) for e in a)
    return a


def _datas(items: Any) -> list:
    out = []
    for a in items:
        if isinstance(a, Array):
            out.append(a._data)
        elif type(a) is list or type(a) is tuple:
            out += _datas(a)
    return out


def record(prim: Any, ns: Any, out: Any, args: tuple, kwargs: dict) -> Any:
    """Attach a node for ``prim`` applied to ``args``/``kwargs`` to ``out`` (already wrapped).

    Inputs that are not floating-point, and outputs that are not, never carry nodes. Each
    floating output of a multi-output row gets a :class:`Select` of the one node.
    """
    floating = ns._floating
    if ns._backend.lift is not None:  # vmap: arrays of lower levels enter unbatched
        args = tuple(_lift(ns, a) for a in args)
        kwargs = {k: _lift(ns, v) for k, v in kwargs.items()} if kwargs else kwargs
    if ns._backend.abstract:  # data a projected or compiled function closes over
        args = tuple(_constant(ns, a) for a in args)
        kwargs = {k: _constant(ns, v) for k, v in kwargs.items()} if kwargs else kwargs
    parents: list[tuple[Any, Node | Select]] = []  # (position: i, (i, j) or a name, node)
    for i, a in enumerate(args):
        if type(a) is list or type(a) is tuple:
            parents.extend(
                ((i, j), p) for j, e in enumerate(a) if (p := _parent(e, floating)) is not None
            )
        elif (p := _parent(a, floating)) is not None:
            parents.append((i, p))
    for name in prim.diff_kwargs:
        if (p := _parent(kwargs.get(name), floating)) is not None:
            parents.append((name, p))
    if not parents:
        return out
    if STACK.debug_nans:
        outs = list(out) if isinstance(out, tuple) else [out]
        check_nans(
            f"{prim.name}()", ns._backend, _datas(outs), _datas(args) + _datas(kwargs.values())
        )
    chunked, saves, names = ns._backend.chunked, prim.saves, prim.arg_names
    last = len(names) - 1
    saved: dict = {}
    kept: list = []
    for i, a in enumerate(args):  # (_keep, its commonest cases inline)
        if type(a) in PLAIN_TYPES:
            kept.append(a)
        elif not isinstance(a, Array):
            kept.append(_keep(a, names[i if i < last else last] in saves, chunked, i, saved))
        elif names[i if i < last else last] in saves:
            kept.append(_save(a, i, saved))
        else:
            d = a._data
            kept.append(ShapeDtype(d.shape, d.dtype, d.chunks if chunked else None))
    kept_args = tuple(kept)
    kept_kwargs = (
        {k: _keep(v, k in saves, chunked, k, saved) for k, v in kwargs.items()} if kwargs else {}
    )
    if isinstance(out, tuple):  # several outputs: each floating one gets a Select handle
        node = Node(prim, ns, kept_args, kept_kwargs, None, parents, saved or None)
        handles: list[Select | None] = [None] * len(out)
        for i, o in enumerate(out):
            if isinstance(o, Array) and o._data.dtype in floating:
                o._node = handles[i] = Select(node, i, len(out))
        if not any(handles):
            return out
        keep_out = "out" in saves
        node.out = [o._data if keep_out else _shape_dtype(o._data, chunked) for o in out]
        if keep_out:  # which outputs carry a gradient: a flag, not the Select handles (each
            # holds the node: a reference cycle keeping the saved outputs until the collector
            # runs, where a retained graph, a vjp's pullback, keeps them)
            saved["out"] = [h is not None for h in handles]
            node.saved = saved
        if STACK.jvp_hook is not None:  # running jvps: the output's tangent
            STACK.jvp_hook(node, out, args, kwargs)
        return out
    if out._data.dtype not in floating:
        return out
    node = Node(prim, ns, kept_args, kept_kwargs, None, parents, saved or None)
    out._node = node
    if "out" in saves:
        node.out = out._data
    if STACK.jvp_hook is not None:  # running jvps: the output's tangent
        STACK.jvp_hook(node, out, args, kwargs)
    return out


def elementwise_recorder(
    prim: Any, ns: Any, floating: frozenset, chunked: bool, abstract: bool = False
) -> Any:
    """:func:`record` specialised for one elementwise row of one namespace: the hot path.

    ``rec(out, x)`` (unary) or ``rec(out, x1, x2)`` (binary) is called only when an input is
    tracked and grad mode is on. What the row saves is looked up once here, not on every call.
    """
    saves = prim.saves
    save = [name in saves for name in prim.arg_names]
    save_out = "out" in saves
    new_node = Node

    def keep(a: Any, i: int, saved: dict) -> Any:
        if not isinstance(a, Array):
            return a  # a Python scalar
        if save[i]:
            return _save(a, i, saved)
        d = a._data
        return ShapeDtype(d.shape, d.dtype, d.chunks if chunked else None)

    def attach(out: Any, kept: tuple, parents: list, saved: dict) -> Any:
        node = new_node(prim, ns, kept, {}, out._data if save_out else None, parents, saved or None)
        out._node = node
        return out

    def rec1(out: Any, x: Any) -> Any:
        if out._data.dtype not in floating or x._data.dtype not in floating:
            return out
        if STACK.debug_nans:
            check_nans(f"{prim.name}()", ns._backend, [out._data], [x._data])
        saved: dict = {}
        attach(out, (keep(x, 0, saved),), [(0, x._node)], saved)
        if STACK.jvp_hook is not None:  # running jvps: the output's tangent
            STACK.jvp_hook(out._node, out, (x,), {})
        return out

    def rec2(out: Any, x1: Any, x2: Any) -> Any:
        if out._data.dtype not in floating:
            return out
        if ns._backend.lift is not None:  # vmap: arrays of lower levels enter unbatched
            x1, x2 = _lift(ns, x1), _lift(ns, x2)
        if abstract:  # data a projected or compiled function closes over
            x1, x2 = _constant(ns, x1), _constant(ns, x2)
        parents = []  # (_parent, inline)
        if isinstance(x1, Array) and (p := x1._node) is not None and x1._data.dtype in floating:
            parents.append((0, p))
        if isinstance(x2, Array) and (p := x2._node) is not None and x2._data.dtype in floating:
            parents.append((1, p))
        if not parents:
            return out
        if STACK.debug_nans:
            check_nans(f"{prim.name}()", ns._backend, [out._data], _datas((x1, x2)))
        saved: dict = {}
        kept = (keep(x1, 0, saved), keep(x2, 1, saved))
        node = new_node(prim, ns, kept, {}, out._data if save_out else None, parents, saved or None)
        out._node = node
        if STACK.jvp_hook is not None:  # running jvps: the output's tangent
            STACK.jvp_hook(node, out, (x1, x2), {})
        return out

    return rec1 if prim.kind == "unary" else rec2


def one_array_recorder(prim: Any, ns: Any, floating: frozenset, chunked: bool, Arr: Any) -> Any:
    """:func:`record` for a general row called as ``f(x, /, **kw)`` or ``f(x, a, /, **kw)``, the
    rest plain values (the one-array lane's: ``sum``, ``reshape``); else :func:`record`."""
    save_x = prim.arg_names[0] in prim.saves
    save_out = "out" in prim.saves
    no_kwarg_rules = not prim.diff_kwargs
    new_node = Node

    def rec(out: Any, args: tuple, kwargs: dict) -> Any:
        x = args[0]
        if type(out) is not Arr or type(x) is not Arr or STACK.debug_nans or not no_kwarg_rules:
            return record(prim, ns, out, args, kwargs)
        for v in (*args[1:], *kwargs.values()):  # plain values, or tuples of them (a shape)
            t = type(v)
            if t not in PLAIN_TYPES and not (t is tuple and PLAIN_TYPES.issuperset(map(type, v))):
                return record(prim, ns, out, args, kwargs)
        p = x._node
        if p is None or x._data.dtype not in floating or out._data.dtype not in floating:
            return out
        saved: dict = {}
        if save_x:
            kept = _save(x, 0, saved)
        else:
            d = x._data
            kept = ShapeDtype(d.shape, d.dtype, d.chunks if chunked else None)
        node = new_node(prim, ns, (kept, *args[1:]), dict(kwargs), None, [(0, p)], saved or None)
        out._node = node
        if save_out:
            node.out = out._data
        if STACK.jvp_hook is not None:  # running jvps: the output's tangent
            STACK.jvp_hook(node, out, args, kwargs)
        return out

    return rec
