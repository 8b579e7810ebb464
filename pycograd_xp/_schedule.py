"""A memory schedule while it records: which nodes' outputs the tape keeps, and, for each one
it drops, the :class:`~pycograd_xp._recompute.Recompute` the backward pass makes it again from
(the engine's half is :mod:`pycograd_xp._recompute`; ``memory.within`` chooses the schedule).
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

from ._buffers import mark_saved
from ._recompute import DROPPED, Recompute
from ._state import STACK, push, restore
from .namespace._array import Array
from .namespace._dispatch import bind, has_function


@contextlib.contextmanager
def outside() -> Iterator[None]:
    """Run the block on an empty stack, as if no transform were running (a schedule chosen at
    the first call of a function being differentiated projects the step as it will run, not
    as a nested one); the stack as it was after it."""
    prev = push()
    restore(())
    try:
        yield
    finally:
        restore(prev)


# -- recording: the plan ---------------------------------------------------------------------

# Rows never dropped: an in-place write (recomputing it would write again).
_NEVER = frozenset({"__setitem__"})


class Plan:
    """One run of a schedule: ``drop`` holds the numbers (in recording order) of the nodes whose
    outputs the backward pass makes again; ``names`` (when given) the row of each number, so a
    run that records other rows than the schedule was chosen for stops dropping rather than drop
    the wrong ones. ``log`` (when a list) receives one :class:`Recorded` per node: the probe
    ``memory.within`` runs to see the candidates.
    """

    def __init__(
        self, drop: frozenset[int], names: tuple[str, ...] | None = None, log: list | None = None
    ) -> None:
        self.drop, self.names, self.log = drop, names, log
        self.count = 0
        self.then: Any = None  # the running jvps' node hook (set by the stack: _state._derive)
        self.off = False  # the run left the schedule's sequence of rows
        # dropped nodes of this run: node -> Recompute (weak: a tape dropped unrun frees them)
        self.by_node: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        # (the probe) each recorded node's number
        self.index: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def _deps(self, node: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The numbers of the nodes whose outputs ``node`` takes, and of those its rule saves."""

        def number(p: Any) -> int | None:
            return self.index.get(getattr(p, "node", p))  # a Select: its node's output

        inputs = tuple(k for _, p in node.parents if (k := number(p)) is not None)
        saved = node.saved or {}
        reads = tuple(
            k for pos, p in saved.items() if pos != "out" and (k := number(p)) is not None
        )
        return inputs, reads

    def hook(self, node: Any, out: Any, args: tuple, kwargs: dict) -> None:
        """Called by the tape on each node recorded in the plan's frame."""
        k = self.count
        self.count = k + 1
        prim = getattr(node, "prim", None)
        if self.names is not None and not self.off:
            if k >= len(self.names) or prim is None or self.names[k] != prim.name:
                self.off = True  # another sequence of rows than the schedule's: keep all now
                _left_schedule(k, self.names, node)
        if node.saved and self.by_node:
            self._refer(node)
        droppable = _droppable(node, out)
        if self.log is not None:
            self.index[node] = k
            self.log.append(Recorded.of(k, node, out, args, droppable, self._deps(node)))
        if droppable and k in self.drop and not self.off:
            self._drop(node, out, args, kwargs)
        if self.then is not None:
            self.then(node, out, args, kwargs)

    def _refer(self, node: Any) -> None:
        """Each residual slot of ``node`` holding a dropped output holds its Recompute."""
        by_node = self.by_node
        args = list(node.args)
        changed = False
        for position, parent in node.saved.items():
            r = by_node.get(parent) if position != "out" else None
            if r is None:
                continue
            r.holders += 1
            changed = True
            if type(position) is int:
                args[position] = r
            elif type(position) is tuple:
                i, j = position
                seq = list(args[i])
                seq[j] = r
                args[i] = type(args[i])(seq)
            else:
                node.kwargs = {**node.kwargs, position: r}
        if changed:
            node.args = tuple(args)

    def _drop(self, node: Any, out: Any, args: tuple, kwargs: dict) -> None:
        """Give ``node`` its Recompute: its row, and its arguments held or recomputed."""
        ns, by_node = node.ns, self.by_node
        backend = ns._backend
        r = Recompute(
            node.prim.name,
            _row_call(node.prim, ns),
            tuple(_held(a, by_node, backend) for a in args),
            {k: _held(v, by_node, backend) for k, v in kwargs.items()} if kwargs else {},
            ns,
            node.seq,
        )
        by_node[node] = r
        if STACK.tracker is not None:  # a projection: the recipe's own Python objects
            STACK.tracker.alloc(RECIPE_BYTES)
        DROPPED[id(node)] = r
        weakref.finalize(node, DROPPED.pop, id(node), None)
        if node.out is not None:  # the rule reads the output: it is made again too
            node.out = r
            r.holders += 1


# The Python objects a dropped output's recipe costs while the tape holds it, beyond the
# projection's allowance per call (memory._report: OVERHEAD_PER_CALL times its objects): its
# Recompute, the arguments it holds and the node's rewritten ones, the finalizer that
# unregisters it, the protected buffers' entries. Measured with tracemalloc on a random
# program's tape (186 outputs dropped: 1.11 kB each, 836 B of them this module's objects, 240 B
# weakref.finalize's), rounded up; a projection counts it from the drop to the step's end (the
# pass frees it sooner).
RECIPE_BYTES = 1280


def _held(a: Any, by_node: Any, backend: Any) -> Any:
    """What a recipe holds for argument ``a``: the Recompute of a dropped input, else its data
    (protected from in-place writes). Module level, not a closure: a self-calling closure is a
    reference cycle (see tree.py)."""
    if isinstance(a, Array):
        r = by_node.get(a._node) if a._node is not None else None
        if r is not None:
            r.holders += 1
            return r
        mark_saved(backend, a._data)  # a write into it would copy it first
        return a._data
    if type(a) is list or type(a) is tuple:
        return type(a)(_held(e, by_node, backend) for e in a)
    return a


def _row_call(prim: Any, ns: Any) -> Any:
    """``ns``'s function for the row ``prim``, called through the choke point (``bind``)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return bind(prim, ns, args, kwargs, ns)

    return call


def _left_schedule(k: int, names: tuple[str, ...], node: Any) -> None:
    """Say that a run recorded other rows than its schedule was chosen for: from there it keeps
    every output (correct values), and its peak may pass the budget the schedule was proven
    for."""
    import warnings

    expected = names[k] if k < len(names) else "nothing more"
    warnings.warn(
        f"memory schedule: this call recorded {node.name} as node {k}, where the schedule was "
        f"chosen for {expected}: a Python branch or a shape took another path. It keeps every "
        "output from there (the same values), and its peak may pass the budget; call the "
        "budgeted function with arguments that take the same path, or choose its schedule "
        "for them (memory.within(f, budget, *args))",
        RuntimeWarning,
        stacklevel=2,
    )


def _droppable(node: Any, out: Any) -> bool:
    """Whether the node's output can be made again from its row's function: one output, a row of
    the namespace (not a custom function's or a segment's), not an in-place write."""
    prim = getattr(node, "prim", None)
    if prim is None or prim.name in _NEVER or isinstance(out, tuple):
        return False
    return has_function(node.ns, prim)


class Recorded:
    """One node as the probe saw it: its number, row, output bytes, the work of making it again
    (``cost``, in element operations: 2 m n k for a product, the elements read and written
    otherwise) and whether it can be dropped."""

    __slots__ = (
        "index",
        "name",
        "nbytes",
        "cost",
        "droppable",
        "shape",
        "inputs",
        "reads",
        "reads_out",
    )

    def __init__(
        self,
        index: int,
        name: str,
        nbytes: int,
        cost: int,
        droppable: bool,
        shape: tuple,
        inputs: tuple[int, ...] = (),
        reads: tuple[int, ...] = (),
        reads_out: bool = False,
    ) -> None:
        self.index, self.name, self.nbytes, self.cost = index, name, nbytes, cost
        self.droppable, self.shape = droppable, shape
        # the nodes whose outputs it takes, those its rule reads, and whether it reads its own
        self.inputs, self.reads, self.reads_out = inputs, reads, reads_out

    @classmethod
    def of(
        cls,
        k: int,
        node: Any,
        out: Any,
        args: tuple,
        droppable: bool,
        deps: tuple[tuple[int, ...], tuple[int, ...]] = ((), ()),
    ) -> Recorded:
        name = node.prim.name if getattr(node, "prim", None) is not None else node.name
        outs = list(out) if isinstance(out, tuple) else [out]
        nbytes = sum(_nbytes(o) for o in outs)
        shape = tuple(getattr(outs[0], "shape", ()))
        reads_out = node.out is not None and not isinstance(node.out, list)
        cost = _cost(name, outs[0], args)
        return cls(k, name, nbytes, cost, droppable, shape, deps[0], deps[1], reads_out)

    def __repr__(self) -> str:
        return f"<Recorded {self.index} {self.name} {self.nbytes} B>"


def _size(a: Any) -> int:
    shape = getattr(a, "shape", None)
    if not isinstance(shape, tuple):  # a Python value, a dtype
        return 1
    n = 1
    for s in shape:
        n *= int(s)
    return n


def _arrays(args: Any) -> list:
    out = []
    for a in args:
        if type(a) is list or type(a) is tuple:
            out += _arrays(a)
        elif isinstance(getattr(a, "shape", None), tuple):
            out.append(a)
    return out


def _nbytes(a: Any) -> int:
    d = getattr(a, "_data", a)
    if getattr(d, "base", None) is not None:  # a view owns no bytes (NumPy's and the model's)
        return 0
    nb = getattr(d, "nbytes", None)
    if nb is not None:
        return int(nb)
    import numpy as np

    return _size(d) * np.dtype(str(getattr(d, "dtype", "float64"))).itemsize


# Rows whose work is a product: 2 * (output elements) * (the contracted length).
_PRODUCTS = frozenset({"matmul", "tensordot", "vecdot", "linalg.matmul", "linalg.vecdot"})


def _cost(name: str, out: Any, args: tuple) -> int:
    """The work of making ``out`` again, in element operations."""
    arrays = _arrays(args)
    if name in _PRODUCTS and len(arrays) >= 2:
        k = int(arrays[0].shape[-1]) if arrays[0].shape else 1
        return 2 * _size(out) * max(k, 1)
    if name.startswith("_conv") or name.endswith("conv2d") or name.endswith("conv1d"):
        w = arrays[1] if len(arrays) > 1 else None
        k = _size(w) // max(int(w.shape[0]), 1) if w is not None and w.shape else 1
        return 2 * _size(out) * max(k, 1)
    return _size(out) + sum(_size(a) for a in arrays)


def recomputed(nodes: Sequence[Recorded], drop: frozenset[int]) -> set[int]:
    """The dropped outputs a backward pass really makes again: those a rule reads, and the
    dropped inputs of each of them (a dropped output nothing reads costs nothing)."""
    by_index = {r.index: r for r in nodes}
    todo = [i for r in nodes for i in r.reads if i in drop]
    todo += [r.index for r in nodes if r.reads_out and r.index in drop]
    made: set[int] = set()
    while todo:
        i = todo.pop()
        if i in made:
            continue
        made.add(i)
        r = by_index.get(i)
        if r is not None:
            todo.extend(j for j in r.inputs if j in drop and j not in made)
    return made
