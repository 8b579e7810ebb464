"""The tape: nodes, grad mode, and the backward pass.

A tracked array's ``_node`` is the :class:`Node` that made it. A node keeps the primitive row, its
parents (the nodes of its tracked array inputs), and only the residuals the row's VJP rule
declared (``Primitive.saves``): every other array input is kept as an :class:`Abstract` (shape
and dtype, no data). The output is kept only when the rule saves ``"out"``.

``backward`` walks the nodes reachable from a root in reverse creation order (creation order is a
topological order), calls each rule once with the summed cotangent of its output, reduces each
input cotangent to its input's shape and realness (the one place broadcasting is undone), and
frees the node's residuals unless asked to retain the graph.
"""

from __future__ import annotations

import itertools
import operator
import threading
import weakref
from collections.abc import Iterable
from typing import Any

_seq = itertools.count()


class _GradMode(threading.local):
    enabled = True


MODE = _GradMode()


class Abstract:
    """An array input a rule did not save: shape, dtype and (chunked backends) chunks only;
    reading data fails."""

    __slots__ = ("shape", "dtype", "chunks")

    def __init__(self, shape: tuple[int, ...], dtype: Any, chunks: Any = None) -> None:
        self.shape, self.dtype, self.chunks = shape, dtype, chunks

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def __repr__(self) -> str:
        return f"Abstract(shape={self.shape}, dtype={self.dtype})"


class Node:
    """One recorded primitive application (or a leaf, when ``prim`` is None).

    ``args``/``kwargs`` are the call's arguments with each array replaced by its backend array
    when the rule saves it, else by an :class:`Abstract` (shape and dtype). ``saved`` maps the
    position of each saved array that carried a node to that node (``"out"`` for the output),
    so a higher-order backward can rebuild them as differentiable arrays; None when there are
    none. ``parents`` lists ``(position, node)`` for every tracked array input: the index of
    the positional argument (or the kwarg name), plus an index into it for list arguments.
    ``out`` is the output's backend array when saved, else None (a list of them, or
    Abstracts, for several outputs); ``grad`` the accumulated gradient of a leaf.
    """

    __slots__ = ("prim", "args", "kwargs", "out", "parents", "seq", "grad", "ns", "saved",
                 "__weakref__")  # fmt: skip

    def __init__(self, prim: Any, ns: Any, args: tuple, kwargs: dict, out: Any,
                 parents: list, saved: dict | None = None) -> None:  # fmt: skip
        self.prim, self.ns, self.args, self.kwargs = prim, ns, args, kwargs
        self.out, self.parents, self.saved = out, parents, saved
        self.seq = next(_seq)
        self.grad = None

    @property
    def name(self) -> str:
        return self.prim.name if self.prim is not None else "leaf"

    def __repr__(self) -> str:
        return f"<Node {self.seq} {self.name}>"


class Select:
    """Output ``index`` of a multi-output node (``eigh``, ``unstack``, ...)."""

    __slots__ = ("node", "index", "count", "seq", "__weakref__")

    prim = None
    parents = ()
    name = "select"

    def __init__(self, node: Node, index: int, count: int) -> None:
        self.node, self.index, self.count = node, index, count
        self.seq = next(_seq)


def leaf(ns: Any) -> Node:
    return Node(None, ns, (), {}, None, [])


def _toposort(roots: Iterable[Any], stop_below: int) -> list[Any]:
    """Nodes reachable from ``roots`` (not below sequence ``stop_below``), newest first."""
    seen: dict[int, Any] = {}
    stack = list(roots)
    pop, push = stack.pop, stack.append
    while stack:
        n = pop()
        k = id(n)
        if k in seen or n.seq < stop_below:
            continue
        seen[k] = n
        if type(n) is Select:
            push(n.node)
        else:
            for _, p in n.parents:
                push(p)
    return sorted(seen.values(), key=_SEQ, reverse=True)


_SEQ = operator.attrgetter("seq")


def _add(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, list):
        return [_add(x, y) for x, y in zip(a, b, strict=True)]
    return a + b


def _part(node: Node, cts: Any, position: Any) -> Any:
    """The cotangent of one input from the rule's result tuple.

    A rule returns one entry per positional argument (a list for a list argument), then one
    per name in its row's ``diff_kwargs``.
    """
    if isinstance(position, tuple):
        pos, sub = position
        part = cts[pos]
        return None if part is None else part[sub]
    if isinstance(position, str):
        return cts[len(node.args) + node.prim.diff_kwargs.index(position)]
    return cts[position]


def _fit(ops: Any, ct: Any, like: Any) -> Any:
    """Reduce a cotangent to its input's shape (undo broadcasting) and realness."""
    shape = tuple(like.shape)
    if tuple(ct.shape) != shape:
        lead = ct.ndim - len(shape)
        axes = tuple(range(lead)) + tuple(
            lead + i for i, s in enumerate(shape) if s == 1 and ct.shape[lead + i] != 1
        )
        ct = ops.sum(ct, axis=axes, keepdims=True) if axes else ct
        if lead:
            ct = ops.reshape(ct, shape)
    complex_ct = ops.isdtype(ct.dtype, "complex floating")
    if complex_ct and not ops.isdtype(like.dtype, "complex floating"):
        ct = ops.real(ct)
    if ct.dtype != like.dtype:
        ct = ops.astype(ct, like.dtype)
    return ct


def backward(roots: list[tuple[Any, Any]], *, targets: Iterable[Any] = (),
             retain_graph: bool = False, create_graph: bool = False) -> dict[int, Any]:  # fmt: skip
    """Run the backward pass from ``roots`` (pairs of node and cotangent).

    Cotangents are backend arrays, or arrays of the namespace when ``create_graph`` (then the
    rules run on the differentiable namespace and record their own nodes, for higher order).
    Returns ``{id(node): cotangent}`` for the ``targets``; leaves (nodes without a primitive)
    that are not targets accumulate into ``node.grad``.
    """
    targets = list(targets)
    target_ids = {id(t) for t in targets}
    stop_below = min((t.seq for t in targets), default=0)
    cts: dict[int, Any] = {}
    for node, g in roots:
        cts[id(node)] = _add(cts.get(id(node)), g)
    results: dict[int, Any] = {}
    prev, MODE.enabled = MODE.enabled, create_graph
    try:
        for node in _toposort([n for n, _ in roots], stop_below):
            key = id(node)
            g = cts.pop(key, None)
            if g is None:
                continue
            if key in target_ids:
                results[key] = g
            elif type(node) is Select:
                parts = list(cts.get(id(node.node)) or [None] * node.count)
                parts[node.index] = _add(parts[node.index], g)
                cts[id(node.node)] = parts
            elif node.prim is None:
                node.grad = _add(node.grad, g)
            else:
                _run_rule(node, g, cts, create_graph)
                if not retain_graph:
                    node.args = node.kwargs = node.out = None
    finally:
        MODE.enabled = prev
    return results


def _run_rule(node: Node, g: Any, cts: dict[int, Any], create_graph: bool) -> None:
    """Call ``node``'s VJP rule with cotangent ``g`` and add its results into ``cts``."""
    args = node.args
    if args is None:
        raise RuntimeError(
            f"backward through {node.name} a second time: its saved values were freed after the "
            "first backward; pass retain_graph=True to the first backward to keep them"
        )
    kwargs, out = node.kwargs, node.out
    if create_graph:  # the rule runs on the namespace: saved values become tracked arrays
        ops = node.ns
        args, kwargs, out = _rebuild(node)
    else:
        ops = node.ns._backend.xp
    if type(g) is list:  # multi-output: missing parts are zeros
        g = [gi if gi is not None else ops.zeros(o.shape, dtype=o.dtype) for gi, o in
             zip(g, out, strict=True)]  # fmt: skip
    prim = node.prim
    if prim.takes_needs:  # the rule skips the cotangents no parent needs
        needs = tuple([p for p, _ in node.parents])
        kwargs = {**kwargs, "needs": needs} if kwargs else {"needs": needs}
    results = prim.vjp(ops, g, out, *args, **kwargs)
    for position, parent in node.parents:
        if type(position) is int:
            ct, like = results[position], args[position]
        else:
            ct, like = _part(node, results, position), _arg_at(args, kwargs, position)
        if ct is None:
            continue
        if ct.shape != like.shape or ct.dtype != like.dtype:
            ct = _fit(ops, ct, like)
        key = id(parent)
        old = cts.get(key)
        cts[key] = ct if old is None else _add(old, ct)


def _arg_at(args: tuple, kwargs: dict, position: Any) -> Any:
    if isinstance(position, tuple):
        return args[position[0]][position[1]]
    return kwargs[position]


def _rebuild(node: Node) -> tuple[tuple, dict, Any]:
    """``node``'s saved values as arrays of its namespace carrying the nodes they had."""
    Arr, array_type = node.ns.Array, node.ns._backend.array_type
    saved = node.saved or {}

    def wrap(a: Any, position: Any) -> Any:
        if isinstance(a, array_type):
            return make(Arr, a, saved.get(position))
        if type(a) is list or type(a) is tuple:
            return type(a)(wrap(e, (position, j)) for j, e in enumerate(a))
        return a

    args = tuple(wrap(a, i) for i, a in enumerate(node.args))
    kwargs = {k: wrap(v, k) for k, v in node.kwargs.items()}
    out = node.out
    if isinstance(out, list):
        outs = saved.get("out") or [None] * len(out)
        out = [o if not isinstance(o, array_type) else make(Arr, o, h) for o, h in
               zip(out, outs, strict=True)]  # fmt: skip
    elif out is not None:
        out = make(Arr, out, node)
    return args, kwargs, out


def _save(a: Any, position: Any, saved: dict) -> Any:
    """The backend array of ``a``, noting its node (for higher order) or protecting its buffer
    from in-place writes (an untracked array the tape now depends on)."""
    if a._node is None:
        mark_saved(a._data)
    else:
        saved[position] = a._node
    return a._data


# Buffers of arrays no gradient flows through that the tape saved for a backward pass. Writing
# into one in place (x[idx] = v on an untracked array) would change a saved value, so setitem
# copies such a buffer first. Keyed by the ultimate base buffer, so views are covered too.
_SAVED_BUFFERS: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def _base(d: Any) -> Any:
    while getattr(d, "base", None) is not None:
        d = d.base
    return d


def mark_saved(d: Any) -> None:
    b = _base(d)
    try:
        _SAVED_BUFFERS[id(b)] = b
    except TypeError:  # not weak-referenceable: nothing to protect it with
        pass


def is_saved(d: Any) -> bool:
    b = _base(d)
    return _SAVED_BUFFERS.get(id(b)) is b


def _abstract(d: Any, chunked: bool) -> Abstract:
    return Abstract(d.shape, d.dtype, d.chunks if chunked else None)


def _keep(a: Any, keep: bool, chunked: bool, position: Any, saved: dict) -> Any:
    """What a node holds for argument ``a``: its backend array if the rule saves it, else its
    shape and dtype."""
    if type(a) in PLAIN_TYPES:
        return a
    if isinstance(a, Array):
        return _save(a, position, saved) if keep else _abstract(a._data, chunked)
    if (type(a) is list or type(a) is tuple) and any(isinstance(e, Array) for e in a):
        return type(a)(_keep(e, keep, chunked, (position, j), saved) for j, e in enumerate(a))
    return a


def record(prim: Any, ns: Any, out: Any, args: tuple, kwargs: dict) -> Any:
    """Attach a node for ``prim`` applied to ``args``/``kwargs`` to ``out`` (already wrapped).

    Called by the namespace's functions only when grad mode is on and some input is tracked.
    Inputs that are not floating-point, and outputs that are not, never carry nodes.
    """
    floating = ns._floating
    parents = []
    for i, a in enumerate(args):
        if isinstance(a, Array):
            if a._node is not None and a._data.dtype in floating:
                parents.append((i, a._node))
        elif type(a) is list or type(a) is tuple:
            parents.extend(((i, j), e._node) for j, e in enumerate(a) if isinstance(e, Array)
                           and e._node is not None and e._data.dtype in floating)  # fmt: skip
    for name in prim.diff_kwargs:
        a = kwargs.get(name)
        if isinstance(a, Array) and a._node is not None and a._data.dtype in floating:
            parents.append((name, a._node))
    if not parents:
        return out
    chunked, saves, names = ns._backend.lazy, prim.saves, prim.arg_names
    last = len(names) - 1
    saved: dict = {}
    kept_args = tuple(_keep(a, names[i if i < last else last] in saves, chunked, i, saved)
                      for i, a in enumerate(args))  # fmt: skip
    kept_kwargs = {k: _keep(v, k in saves, chunked, k, saved) for k, v in kwargs.items()} \
        if kwargs else {}  # fmt: skip
    if isinstance(out, tuple):  # several outputs: each floating one gets a Select handle
        node = Node(prim, ns, kept_args, kept_kwargs, None, parents, saved or None)
        handles = [None] * len(out)
        for i, o in enumerate(out):
            if isinstance(o, Array) and o._data.dtype in floating:
                o._node = handles[i] = Select(node, i, len(out))
        if not any(handles):
            return out
        keep_out = "out" in saves
        node.out = [o._data if keep_out else _abstract(o._data, chunked) for o in out]
        if keep_out:
            saved["out"] = handles
            node.saved = saved
        return out
    if out._data.dtype not in floating:
        return out
    node = Node(prim, ns, kept_args, kept_kwargs, None, parents, saved or None)
    out._node = node
    if "out" in saves:
        node.out = out._data
    return out


def elementwise_recorder(prim: Any, ns: Any, floating: frozenset, chunked: bool) -> Any:
    """``record`` specialised for one elementwise row of one namespace: the hot path.

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
        return Abstract(d.shape, d.dtype, d.chunks if chunked else None)

    def attach(out: Any, kept: tuple, parents: list, saved: dict) -> Any:
        node = new_node(prim, ns, kept, {}, out._data if save_out else None, parents,
                        saved or None)  # fmt: skip
        out._node = node
        return out

    def rec1(out: Any, x: Any) -> Any:
        d = out._data
        if d.dtype not in floating or x._data.dtype not in floating:
            return out
        saved: dict = {}
        return attach(out, (keep(x, 0, saved),), [(0, x._node)], saved)

    def rec2(out: Any, x1: Any, x2: Any) -> Any:
        d = out._data
        if d.dtype not in floating:
            return out
        parents = []
        if isinstance(x1, Array) and x1._node is not None and x1._data.dtype in floating:
            parents.append((0, x1._node))
        if isinstance(x2, Array) and x2._node is not None and x2._data.dtype in floating:
            parents.append((1, x2._node))
        if not parents:
            return out
        saved: dict = {}
        return attach(out, (keep(x1, 0, saved), keep(x2, 1, saved)), parents, saved)

    return rec1 if prim.kind == "unary" else rec2


# Imported last: the namespace package imports this module while it is being built.
from .namespace._array import PLAIN_TYPES, Array, make  # noqa: E402
