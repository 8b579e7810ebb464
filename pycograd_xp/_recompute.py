"""Recomputed residuals, the engine's half: the backward pass makes again the outputs a memory
schedule dropped (``pycograd_xp._schedule`` records them; ``memory.within`` chooses which).

While a :class:`~pycograd_xp._state.Remat` frame runs, the tape calls the schedule's hook on each
node it records (the node hook the tape already calls for ``jvp``). The schedule numbers the
nodes in the order they are recorded; a node whose number it drops gets a :class:`Recompute`:
its row's function and its arguments, each array argument either held (an input, a parameter,
an output the schedule keeps: a checkpoint) or the :class:`Recompute` of a dropped node. Every
residual slot of the tape that would hold a dropped output holds its :class:`Recompute`
instead, so the output itself is freed as soon as the user's code drops it.

The backward pass (``_tape._run_rule``) resolves a node's slots before its rule runs: a
:class:`Recompute` evaluates its row on its arguments (resolving the dropped ones first, in
forward order), with grad mode off, through the node's own namespace: the same function, the
same arguments, so the same bits. A value made again is kept while slots still to be read hold
it (the segment between two checkpoints, as in Chen et al. 2016) and dropped after its last
reader. When the pass walks past a dropped node, nothing can read its value again, and its
recipe is let go (unless the graph is retained).

Everything here is Array-API code through the namespace, so the projection
(``pycograd_xp.memory``) runs the very same schedule on abstract arrays and sees every recompute.
"""

from __future__ import annotations

from typing import Any

from ._buffers import written_since
from ._state import STACK, GradMode, push, restore

# id(node) -> the Recompute of a dropped node still on a tape. Empty (the common case): the
# backward pass skips this module with one truth test.
DROPPED: dict[int, Recompute] = {}


class Recompute:
    """How to make a dropped output again: ``fn(*args, **kwargs)`` under ``no_grad``, each array
    argument held as backend data (``wrap`` makes it an array of the namespace) or as the
    :class:`Recompute` of the dropped node that made it.

    ``holders`` counts the slots that hold this recompute (tape residuals and other recipes);
    ``left`` how many of them the running pass has not read yet since ``value`` was made.
    """

    __slots__ = ("name", "fn", "args", "kwargs", "wrap", "ns", "seq", "value", "holders", "left")

    def __init__(self, name: str, fn: Any, args: tuple, kwargs: dict, ns: Any, seq: int) -> None:
        self.name, self.fn, self.args, self.kwargs, self.ns, self.seq = (
            name,
            fn,
            args,
            kwargs,
            ns,
            seq,
        )
        self.wrap = ns._make
        self.value: Any = None
        self.holders = 0
        self.left = 0

    def __repr__(self) -> str:
        return f"<Recompute {self.name} (node {self.seq})>"


def _each(v: Any) -> list[Recompute]:
    if type(v) is Recompute:
        return [v]
    if type(v) is list or type(v) is tuple:
        return [r for e in v for r in _each(e)]
    return []


def _arg(r: Recompute, v: Any, values: dict[int, Any], array_type: type) -> Any:
    # module level, not a closure: a self-calling closure is a reference cycle, which would
    # keep the values it saw until the collector runs (see tree.py)
    if type(v) is Recompute:
        return r.wrap(values[id(v)])
    if isinstance(v, array_type):
        if written_since(r.ns._backend, v, r.seq):
            raise RuntimeError(
                f"backward: {r.name}, recomputed by the memory schedule, reads an array "
                "written in place after the forward pass used it; copy the array before "
                "writing into it, or take the gradient without a memory budget"
            )
        return r.wrap(v)
    if type(v) is list or type(v) is tuple:
        return type(v)(_arg(r, e, values, array_type) for e in v)
    return v


def _args_of(r: Recompute, values: dict[int, Any]) -> tuple[tuple, dict]:
    """``r``'s arguments as arrays of its namespace, its dropped inputs from ``values``."""
    t = r.ns._backend.array_type
    args = tuple(_arg(r, a, values, t) for a in r.args)
    return args, {k: _arg(r, v, values, t) for k, v in r.kwargs.items()}


def _evaluate(root: Recompute) -> Any:
    """``root``'s value, made again with every dropped input it needs (iteratively, inputs
    first: a long dropped chain needs no deep recursion)."""
    stack: list[tuple[Recompute, bool]] = [(root, False)]
    while stack:
        r, ready = stack.pop()
        if r.value is not None:
            continue
        inputs = _each(r.args) + _each(list(r.kwargs.values()))
        if not ready:
            stack.append((r, True))
            stack.extend((i, False) for i in inputs if i.value is None)
            continue
        values = {id(i): i.value for i in inputs}
        args, kwargs = _args_of(r, values)
        tracker = STACK.tracker  # projecting: the rows made again are named so
        before = tracker.prefix if tracker is not None else ""
        if tracker is not None:
            tracker.prefix = before + "recompute "
        try:
            prev = push(GradMode(False))  # (no_grad: a value, never a node)
            try:
                out = r.fn(*args, **kwargs)
            finally:
                restore(prev)
        finally:
            if tracker is not None:
                tracker.prefix = before
        r.value, r.left = out._data, r.holders
        for i in inputs:  # one recipe slot of each input read
            _read(i)
    return root.value


def _read(r: Recompute) -> None:
    """One slot holding ``r`` was read: after the last, its value goes."""
    r.left -= 1
    if r.left <= 0:
        r.value = None


def _resolve(v: Any) -> Any:
    if type(v) is Recompute:
        value = v.value if v.value is not None else _evaluate(v)
        _read(v)
        return value
    if (type(v) is list or type(v) is tuple) and any(type(e) is Recompute for e in v):
        return type(v)(_resolve(e) for e in v)
    return v


def resolved(node: Any) -> tuple[tuple, dict, Any]:
    """``node``'s residuals with each dropped value made again (``_tape._run_rule``)."""
    args = tuple(_resolve(a) for a in node.args)
    kwargs = {k: _resolve(v) for k, v in node.kwargs.items()} if node.kwargs else node.kwargs
    return args, kwargs, _resolve(node.out)


def passed(node: Any, retained: bool) -> None:
    """The backward pass walked past ``node``: if it was dropped, nothing reads its value again
    in this pass (a value made for slots whose nodes no cotangent reached goes too), nor its
    recipe in any pass unless the graph is ``retained``."""
    if retained:
        r = DROPPED.get(id(node))
        if r is not None:
            r.value = None
        return
    r = DROPPED.pop(id(node), None)
    if r is not None:
        r.value = r.args = r.kwargs = None  # type: ignore[assignment]
