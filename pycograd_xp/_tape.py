"""The tape: nodes, grad mode, and the backward pass.

A tracked array's ``_node`` is the :class:`Node` that made it. A node keeps the primitive row, its
parents (the nodes of its tracked array inputs), and only the residuals the row's VJP rule
declared (``Primitive.saves``): every other array input is kept as an :class:`ShapeDtype` (shape
and dtype, no data). The output is kept only when the rule saves ``"out"``.

``backward`` walks the nodes reachable from a root in reverse creation order (creation order is a
topological order), calls each rule once with the summed cotangent of its output, reduces each
input cotangent to its input's shape and realness (the one place broadcasting is undone), and
frees the node's residuals unless asked to retain the graph.

Node kinds are explicit (:data:`LEAF`, :data:`OP`, :data:`SELECT`), never inferred. This module
is the engine only: recording (which needs the Array class) lives in
``pycograd_xp.namespace._record``, and the engine reaches arrays only through a node's namespace.

In-place writes are tracked per buffer (PyTorch's version counters, keyed by the memory's owner
so views are covered, ``_buffers.py``): a residual whose buffer was written after its node was
recorded is refused when the rule would read it, never silently used. ``debug_nans``'s checks
are ``_nans.py``'s.
"""

from __future__ import annotations

import math
import operator
import sys
from collections.abc import Iterable
from typing import Any

from . import _reductions as fast
from ._buffers import _WRITES, LAST_WRITE, SEQ, check_unchanged, is_saved, mark_saved, note_write
from ._nans import check_nans
from ._parts import WATCHED, enter, leave, within
from ._primitive import Shared
from ._recompute import DROPPED, passed, resolved
from ._state import STACK, GradMode, push, restore

# (re-exported: what the namespace's recording and writes use)
__all__ = ["backward", "is_saved", "leaf", "mark_saved", "note_write"]


# Node kinds.
LEAF = "leaf"  # an array marked with requires_grad_: backward accumulates into its .grad
OP = "op"  # one primitive applied to tracked inputs
SELECT = "select"  # output ``index`` of a multi-output op


class ShapeDtype:
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
        return f"ShapeDtype(shape={self.shape}, dtype={self.dtype})"


class Node:
    """One recorded primitive application (kind :data:`OP`) or a leaf (:data:`LEAF`).

    ``args``/``kwargs`` are the call's arguments with each array replaced by its backend array
    when the rule saves it, else by an :class:`ShapeDtype` (shape and dtype). ``saved`` maps the
    position of each saved array that carried a node to that node (``"out"`` for the outputs
    of a multi-output node: a flag per output, whether it carries a gradient; its Select
    handles are made afresh, never kept, since each holds the node), so a higher-order
    backward can rebuild them as differentiable arrays; None when there are none.
    ``parents`` lists ``(position, node)`` for every tracked array input: the index of the
    positional argument (or the kwarg name), plus an index into it for list arguments.
    ``out`` is the output's backend array when saved, else None (a list of them, or
    Abstracts, for several outputs); ``grad`` the accumulated gradient of a leaf.
    """

    __slots__ = (
        "kind",
        "prim",
        "args",
        "kwargs",
        "out",
        "parents",
        "seq",
        "grad",
        "ns",
        "saved",
        "__weakref__",
    )

    def __init__(
        self,
        prim: Any,
        ns: Any,
        args: tuple,
        kwargs: dict,
        out: Any,
        parents: list,
        saved: dict | None = None,
        kind: str = OP,
    ) -> None:
        self.kind, self.prim, self.ns, self.args, self.kwargs = kind, prim, ns, args, kwargs
        self.out, self.parents, self.saved = out, parents, saved
        self.seq = next(SEQ)
        self.grad = None

    @property
    def name(self) -> str:
        return self.prim.name if self.kind == OP else self.kind

    def __repr__(self) -> str:
        return f"<Node {self.seq} {self.name}>"


class Select:
    """Output ``index`` of a multi-output node (``eigh``, ``svd``, ``unstack``, ...): an
    intermediate like any other, never a leaf."""

    __slots__ = ("node", "index", "count", "seq", "__weakref__")

    kind = SELECT
    parents = ()

    def __init__(self, node: Node, index: int, count: int) -> None:
        self.node, self.index, self.count = node, index, count
        self.seq = next(SEQ)

    @property
    def name(self) -> str:
        return f"{self.node.name}[{self.index}]"


def leaf(ns: Any) -> Node:
    return Node(None, ns, (), {}, None, [], kind=LEAF)


def is_leaf(node: Any) -> bool:
    return node is not None and node.kind == LEAF


# -- the backward pass ----------------------------------------------------------------------------


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
        ones = [lead + i for i, s in enumerate(shape) if s == 1 and ct.shape[lead + i] != 1]
        if lead and not ones:  # leading axes only (a bias): their sum has the input's shape
            ct = fast.sum(ops, ct, tuple(range(lead)))
        elif lead or ones:
            ct = fast.sum(ops, ct, (*range(lead), *ones), keepdims=True)
            ct = ops.reshape(ct, shape) if lead else ct
    if ct.dtype != like.dtype:  # (equal dtypes: both complex or neither, nothing to cast)
        if ops.isdtype(ct.dtype, "complex floating") and not ops.isdtype(
            like.dtype, "complex floating"
        ):
            ct = ops.real(ct)
        if ct.dtype != like.dtype:
            ct = ops.astype(ct, like.dtype)
    return ct


def backward(
    roots: list[tuple[Any, Any]],
    *,
    targets: Iterable[Any] = (),
    retain_graph: bool = False,
    create_graph: bool = False,
) -> dict[int, Any]:
    """Run the backward pass from ``roots`` (pairs of node and cotangent).

    Cotangents are backend arrays, or arrays of the namespace when ``create_graph`` (then the
    rules run on the differentiable namespace and record their own nodes, for higher order).
    Returns ``{id(node): cotangent}`` for the ``targets``; leaves that are not targets
    accumulate into ``node.grad``.
    """
    targets = list(targets)
    target_ids = {id(t) for t in targets}
    stop_below = min((t.seq for t in targets), default=0)
    cts: dict[int, Any] = {}
    for node, g in roots:  # (a caller's list copied: its parts are never owned)
        cts[id(node)] = _add(cts.get(id(node)), list(g) if type(g) is list else g)
    results: dict[int, Any] = {}
    # a lazy backend's op labels: which rule made each op (pycograd_xp._parts)
    was = enter("backward", "") if WATCHED[0] else None
    prev = push(GradMode(create_graph))
    try:
        for node in _toposort([n for n, _ in roots], stop_below):
            key = id(node)
            g = cts.pop(key, None)
            if g is None:
                if DROPPED:  # a memory schedule's output made again: not read past here
                    passed(node, retain_graph)
                continue
            kind = node.kind
            if key in target_ids:
                results[key] = g
            elif kind is SELECT:
                parts = list(cts.get(id(node.node)) or [None] * node.count)
                parts[node.index] = _add(parts[node.index], g)
                cts[id(node.node)] = parts
            elif kind is LEAF:
                node.grad = _add(node.grad, g)
            else:
                if was is None or node.ns._backend.labeller is None:
                    _run_rule(node, g, cts, create_graph)
                else:  # the backend names the work the rule plans (pycograd_xp._parts)
                    _run_rule_within(node, g, cts, create_graph)
                if not retain_graph:
                    node.args = node.kwargs = node.out = None
                if DROPPED:
                    passed(node, retain_graph)
    finally:
        restore(prev)
        if was is not None:
            leave(was)
    return results


def _run_rule_within(node: Node, g: Any, cts: dict[int, Any], create_graph: bool) -> None:
    """:func:`_run_rule` inside the part ``("rule", node's row)``, the backend's labeller given
    the cotangents it made (pycograd_xp._parts)."""

    def made(_: Any) -> list:
        return [getattr(c, "_data", c) for c in (cts.get(id(p)) for _, p in node.parents)]

    within(
        node.ns._backend.labeller,
        "rule",
        node.name,
        lambda: _run_rule(node, g, cts, create_graph),
        made,
    )


def _run_rule(node: Node, g: Any, cts: dict[int, Any], create_graph: bool) -> None:
    """Call ``node``'s VJP rule with cotangent ``g`` and add its results into ``cts``."""
    args = node.args
    if args is None:
        raise RuntimeError(
            f"backward through {node.name} a second time: its saved values were freed after the "
            "first backward; pass retain_graph=True to the first backward to keep them"
        )
    if _WRITES and LAST_WRITE[0] > node.seq:  # a buffer written since the node was recorded
        check_unchanged(node)
    if not (any(gi is not None and gi.size for gi in g) if type(g) is list else g.size):
        return  # an output with no element: its VJP is the zero map; no rule runs
    kwargs, out = node.kwargs, node.out
    if DROPPED:  # residuals a memory schedule dropped are made again (pycograd_xp._recompute)
        args, kwargs, out = resolved(node)
    if create_graph:  # the rule runs on the namespace: saved values become tracked arrays
        ops = node.ns
        args, kwargs, out = _rebuild(node, args, kwargs, out)
    else:
        ops = node.ns._backend.xp
    if type(g) is list:  # multi-output: missing parts are zeros, made like a present part
        like_kwargs = node.ns._backend.like_kwargs if not create_graph else None
        kw = like_kwargs(next(gi for gi in g if gi is not None)) if like_kwargs else {}
        g = [
            gi if gi is not None else ops.zeros(o.shape, dtype=o.dtype, **kw)
            for gi, o in zip(g, out, strict=True)
        ]
    prim = node.prim
    if prim.takes_needs:  # the rule skips the cotangents no parent needs
        needs = tuple([p for p, _ in node.parents])
        if len(needs) == 2 and node.parents[0][1] is node.parents[1][1]:  # x * x: one parent
            needs = Shared(needs)
        kwargs = {**kwargs, "needs": needs} if kwargs else {"needs": needs}
    if prim.takes_owned:  # the rule may write into g when only this pass references it
        owned = not create_graph and _owned(node.ns._backend.owns_buffer, g)
        kwargs = {**kwargs, "owned": owned} if kwargs else {"owned": owned}
    try:
        results = prim.vjp(ops, g, out, *args, **kwargs)
    except (ValueError, TypeError, IndexError, ZeroDivisionError):
        if _parents_empty(node, args, kwargs):
            return  # every input it flows to holds no element: nothing flows
        raise
    if STACK.debug_nans:
        _check_rule_nans(node, g, results, args, out)
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


def _parents_empty(node: Node, args: tuple, kwargs: dict) -> bool:
    """Whether every input of ``node`` a cotangent flows to holds no element (its rule raised:
    Cubed 0.27's rechunk fails the rules' own operators on chunked arrays with an empty axis)."""
    for position, _ in node.parents:
        a = args[position] if type(position) is int else _arg_at(args, kwargs, position)
        if math.prod(getattr(a, "shape", ())) != 0:
            return False
    return True


def _check_rule_nans(node: Any, g: Any, results: Any, args: tuple, out: Any) -> None:
    """``debug_nans`` in the backward pass: a cotangent with a NaN from a rule whose cotangent,
    saved values and output held none names the op whose VJP made it."""

    def datas(v: Any) -> list:
        if isinstance(v, list | tuple):
            return [d for e in v for d in datas(e)]
        if v is None or isinstance(v, ShapeDtype):
            return []
        return [getattr(v, "_data", v)]

    check_nans(
        f"the VJP of {node.name}()",
        node.ns._backend,
        datas(results),
        datas(g) + datas(args) + datas(out),
    )


# References to a cotangent only the backward pass holds, as _owned counts them: g of backward,
# _run_rule and _owned, getrefcount's argument (a list's part: the lists backward popped and
# _run_rule filled, the argument). Tests check fresh ones are owned (relu's, layer norm's).
_PASS_REFS = 4


def _owned(owns_buffer: Any, g: Any) -> Any:
    """Whether ``g`` owns its memory (no view: NumPy's ``base is None``, the test its own
    temporary elision uses) and nothing outside the backward pass holds it: no other
    cotangent slot (a rule that hands ``g`` to two parents), no saved value, no view of it, no
    caller, no user array; a flag per part of a list (the count first: compile's claims)."""
    if type(g) is list:
        return tuple(
            owns_buffer is not None and sys.getrefcount(g[i]) < _PASS_REFS and owns_buffer(g[i])
            for i in range(len(g))
        )
    return owns_buffer is not None and sys.getrefcount(g) <= _PASS_REFS and owns_buffer(g)


def _arg_at(args: tuple, kwargs: dict, position: Any) -> Any:
    if isinstance(position, tuple):
        return args[position[0]][position[1]]
    return kwargs[position]


def _wrap_saved(a: Any, position: Any, make: Any, array_type: type, saved: dict) -> Any:
    # module level, not a closure: a self-calling closure is a reference cycle (see tree.py)
    if isinstance(a, array_type):
        return make(a, saved.get(position))
    if type(a) is list or type(a) is tuple:
        return type(a)(
            _wrap_saved(e, (position, j), make, array_type, saved) for j, e in enumerate(a)
        )
    return a


def _rebuild(node: Node, args: tuple, kwargs: dict, out: Any) -> tuple[tuple, dict, Any]:
    """``node``'s saved values (its resolved residuals) as arrays carrying their nodes."""
    make, array_type = node.ns._make, node.ns._backend.array_type
    saved = node.saved or {}
    args = tuple(_wrap_saved(a, i, make, array_type, saved) for i, a in enumerate(args))
    kwargs = {k: _wrap_saved(v, k, make, array_type, saved) for k, v in kwargs.items()}
    if isinstance(out, list):  # a fresh Select of each output that carries a gradient
        flags = saved.get("out") or [False] * len(out)
        n = len(out)
        out = [
            o if not isinstance(o, array_type) else make(o, Select(node, i, n) if f else None)
            for i, (o, f) in enumerate(zip(out, flags, strict=True))
        ]
    elif out is not None:
        out = make(out, node)
    return args, kwargs, out
