"""Micro-batches: a budgeted step's second lever, gradient accumulation, declared by the user.

A step whose peak is set by one layer's transients (a convolution's output, its weight
gradient's columns) rather than by what the tape keeps cannot be fitted by recomputing: no
schedule lowers it. What lowers it is fewer rows at once: split the batch into micro-batches,
run each one's forward and backward pass, add the gradients (PyTorch's and JAX's gradient
accumulation). That is right only for a loss that is a mean or a sum over independent rows of
its batch arguments (no batch norm, no contrastive term across rows), which only the user
knows: ``memory.batch_mean(loss)`` (or ``batch_sum``; ``batch=(1, 2)`` names the batch
arguments) declares it, as ``cubed_plugin.row_loss`` declares a loss row-separable.

A micro-batched call is one row of its own on the caller's tape (as ``custom_vjp``'s): its
forward pass runs, for each slice of ``rows`` rows of the batch arguments (views of them; the
last slice may have fewer rows), the slice's ``value_and_grad`` outside the caller's tape (under
the slice's own memory schedule when it has one), adds the slices' losses and gradients
(weighted by the slice's rows over the batch's for a mean) into accumulators, and records one
node whose VJP multiplies the accumulated gradients by the cotangent. The projection runs this
very loop on abstract arrays (``memory.project`` of the budgeted step), so a micro-batched
schedule is proven by projection like a recompute schedule.

The values agree with the unsplit step to floating-point rounding, not bit for bit: the sums
are added in another order. A derivative of that row's VJP is not the second derivative of the
loss, so higher order (``grad`` of ``grad``, ``jvp`` over it, ``vmap`` inside) is refused.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from .. import _api
from .._primitive import Primitive
from .._state import (
    STACK,
    Abstract,
    DebugNans,
    Frame,
    OnBackward,
    Part,
    Trace,
    interpreting,
    push,
    restore,
)
from ..namespace import of as namespace_of
from ..namespace._array import Array, ours
from ..namespace._record import record
from ..tree import tree_flatten, tree_unflatten
from ._scheduled import scheduled

REDUCTIONS = ("mean", "sum")
# The most micro-batches a step is split into (each one's step costs its Python calls again).
MAX_SLICES = 64


class Slicing:
    """One run of a micro-batched schedule: slices of ``rows`` rows, each slice's step under the
    recompute schedule dropping ``drop`` (``names``: its rows, as ``_schedule.Plan`` takes
    them; ``logs``: each slice's record of its nodes, for the probe)."""

    __slots__ = ("rows", "drop", "names", "logs")

    def __init__(
        self,
        rows: int,
        drop: frozenset[int] = frozenset(),
        names: tuple[str, ...] | None = None,
        logs: list | None = None,
    ) -> None:
        self.rows, self.drop, self.names, self.logs = rows, drop, names, logs


class MicroBatching(Frame):
    """On the interpreter stack: the :class:`Slicing` a :class:`MicroBatched` loss called runs
    in (None: as it is; the loss itself, inside its slices). The stack is the only per-thread
    state (``tests/test_dispatch.py``); the tape's views derive nothing from this frame."""

    __slots__ = ("plan",)
    kind = "micro-batch"

    def __init__(self, plan: Slicing | None) -> None:
        self.plan = plan


def _active() -> Slicing | None:
    for f in reversed(STACK.frames):
        if type(f) is MicroBatching:
            return f.plan
    return None


@contextmanager
def slicing(plan: Slicing | None) -> Iterator[None]:
    """Within the block, a :class:`MicroBatched` loss called runs in ``plan``'s slices."""
    with interpreting(MicroBatching(plan)):
        yield


def _positions(batch: Any, reduction: str) -> Any:
    """``batch`` checked: True, or the positions of the batch arguments (a sorted tuple)."""
    if batch is True:
        return True
    nums = (batch,) if isinstance(batch, int) and not isinstance(batch, bool) else batch
    if (
        not isinstance(nums, tuple | list)
        or not nums
        or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in nums)
    ):
        raise TypeError(
            f"memory.batch_{reduction}: batch must be True (every positional argument after "
            "the first is a batch of rows) or the positions of the batch arguments (ints, e.g. "
            f"batch=(1, 2) for loss(params, x, y)), got {batch!r}"
        )
    return tuple(sorted(set(nums)))


def batch_mean(loss: Callable[..., Any] | None = None, *, batch: Any = True) -> Any:
    """Declare ``loss`` a mean over the rows (leading axis) of its batch arguments, so that a
    budgeted step may run it in micro-batches (gradient accumulation).

    The declared loss computes what ``loss`` computes. Given a budget (``memory.within``,
    ``grad``/``value_and_grad`` with ``budget=``, ``train.make_step`` with ``budget=``), when no
    recompute schedule of the whole batch fits, the step runs in the fewest micro-batches whose
    whole projected step fits, each micro-batch's loss and gradient weighted by its rows; when
    one fits, in those micro-batches instead where the time model projects them faster (the
    outputs made again against the extra micro-batches' calls: ``memory._cost``). The
    values then agree with ``loss``'s to rounding, not bit for bit (the rows are added in
    another order), and only first derivatives are taken. Declare only a loss whose rows are
    independent: no batch norm, no term across rows (the declaration is trusted).

    Parameters
    ----------
    loss : callable, optional
        ``loss(params, *batch_args)``, a mean over the rows (None: returns the decorator).
    batch : True, int or sequence of int, default True
        The positions of the batch arguments, every leaf of which has one row per example
        along its leading axis (True: every positional argument after the first).

    Returns
    -------
    callable
        The declared loss (a decorator making one, without ``loss``).

    Examples
    --------
    >>> import numpy, pycograd_xp as pg
    >>> from pycograd_xp import memory
    >>> xp = pg.namespace(numpy)
    >>> @memory.batch_mean
    ... def loss(w, x, y):
    ...     return xp.mean((x @ w - y) ** 2)
    >>> w, x, y = xp.ones(3), xp.ones((512, 3)), xp.zeros(512)
    >>> float(loss(w, x, y))
    9.0
    """
    positions = _positions(batch, "mean")
    if loss is None:
        return lambda f: MicroBatched(f, positions, "mean")
    return MicroBatched(loss, positions, "mean")


def batch_sum(loss: Callable[..., Any] | None = None, *, batch: Any = True) -> Any:
    """Declare ``loss`` a sum over the rows of its batch arguments: as :func:`batch_mean`, the
    micro-batches' losses and gradients added unweighted.

    Parameters
    ----------
    loss : callable, optional
        ``loss(params, *batch_args)``, a sum over the rows (None: returns the decorator).
    batch : True, int or sequence of int, default True
        As :func:`batch_mean`'s.

    Returns
    -------
    callable
        The declared loss (a decorator making one, without ``loss``).
    """
    positions = _positions(batch, "sum")
    if loss is None:
        return lambda f: MicroBatched(f, positions, "sum")
    return MicroBatched(loss, positions, "sum")


class MicroBatched:
    """``loss`` declared a mean or sum (``reduction``) over the rows (leading axis) of its
    positional arguments at ``positions`` (True: every one after the first). Called as it is,
    it is ``loss``; inside :func:`slicing` it runs in micro-batches (module docstring)."""

    def __init__(self, loss: Callable[..., Any], positions: Any, reduction: str) -> None:
        if reduction not in REDUCTIONS:
            raise ValueError(f"micro-batches: reduction must be 'mean' or 'sum', got {reduction!r}")
        functools.update_wrapper(self, loss, updated=())  # (not loss.__dict__: ours)
        self.loss, self.positions, self.reduction = loss, positions, reduction
        self.name = getattr(loss, "__name__", "loss")

    def __repr__(self) -> str:
        return f"memory.batch_{self.reduction}({self.name})"

    def batch_positions(self, nargs: int) -> tuple[int, ...]:
        if self.positions is True:
            return tuple(range(1, nargs))
        bad = [i for i in self.positions if i >= nargs]
        if bad:
            raise ValueError(
                f"{self!r}: batch argument position(s) {bad} name no positional argument of a "
                f"call with {nargs}; give the positions of the arguments whose rows are the batch"
            )
        return tuple(self.positions)

    def rows(self, args: tuple) -> int:
        """The rows of the batch (the leading axis every leaf of the batch arguments shares);
        a leaf without one, or leading axes that disagree, is refused."""
        found: list[tuple[int, int]] = []
        for i in self.batch_positions(len(args)):
            for leaf in tree_flatten(args[i])[0]:
                shape = getattr(leaf, "shape", None)
                if shape is None or len(shape) == 0:
                    raise ValueError(
                        f"{self!r}: batch argument {i} has a leaf without a leading axis "
                        f"({type(leaf).__name__} of shape {shape}); every array of a batch "
                        "argument must have one row per example, or leave the argument out "
                        "of the batch positions"
                    )
                found.append((i, int(shape[0])))
        if not found:
            raise ValueError(f"{self!r}: no batch argument: a call with {len(args)} argument(s)")
        n = found[0][1]
        other = next(((i, m) for i, m in found if m != n), None)
        if other is not None:
            raise ValueError(
                f"{self!r}: the batch arguments' leading axes disagree: argument {found[0][0]} "
                f"has {n} rows, argument {other[0]} has {other[1]}; every batch argument must "
                "have one row per example (or leave an argument out of the batch positions)"
            )
        return n

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        plan = _active()
        if plan is None:
            return self.loss(*args, **kwargs)
        with slicing(None):  # (the loss itself runs unsliced inside)
            return _sliced(self, plan, args, kwargs)


def slices(n: int, rows: int) -> list[tuple[int, int]]:
    """The ``(start, stop)`` of each micro-batch of a batch of ``n`` rows in micro-batches of at
    most ``rows``: ``ceil(n / rows)`` of them, as even as can be (their rows differ by one at
    most)."""
    count = slice_count(n, rows)
    return [(k * n // count, (k + 1) * n // count) for k in range(count)]


def slice_count(n: int, rows: int) -> int:
    """How many micro-batches of at most ``rows`` rows a batch of ``n`` takes."""
    return max(1, math.ceil(n / max(1, rows)))


# The frames a slice's step runs under: what projects, compiles, checks or labels it, not the
# caller's transforms (its grad, its jvp, its no_grad, its phase callbacks).
_KEPT = (Abstract, Trace, DebugNans, Part)


def _refuse_higher_order(mb: MicroBatched) -> None:
    if STACK.grad_depth > 1 or STACK.jvp or STACK.batch is not None:
        what = "vmap" if STACK.batch is not None else ("jvp" if STACK.jvp else "grad of grad")
        raise NotImplementedError(
            f"{mb!r}: a micro-batched step under {what}: its gradient is accumulated over "
            "micro-batches as a value, whose derivative is not the loss's second derivative. "
            "Take higher derivatives of the undeclared loss (a recompute-only budget, or none)"
        )


def _sliced(mb: MicroBatched, plan: Slicing, args: tuple, kwargs: dict) -> Any:
    """``mb``'s loss on ``args`` in ``plan``'s slices: the weighted sum of the slices' losses,
    one node on the caller's tape whose VJP is the accumulated gradients (module docstring)."""
    n = mb.rows(args)
    if n == 0:
        return mb.loss(*args, **kwargs)
    batch = set(mb.batch_positions(len(args)))
    flat = [tree_flatten(a) for a in args]
    leaves = [(i, leaf) for i, (ls, _) in enumerate(flat) for leaf in ls]
    differentiated = STACK.grad_enabled
    tracked = [
        k
        for k, (_, leaf) in enumerate(leaves)
        if differentiated
        and isinstance(leaf, Array)
        and leaf._node is not None
        and leaf._data.dtype in leaf._ns._floating
    ]
    if tracked:
        _refuse_higher_order(mb)
    values = [leaf._ns._make(leaf._data) if isinstance(leaf, Array) else leaf for _, leaf in leaves]
    shapes = [len(ls) for ls, _ in flat]
    weigh = mb.reduction == "mean"
    total: Any = None
    accs: dict[int, Any] = {}  # tracked leaf -> its gradient summed over the slices
    rowed = {k for k in tracked if leaves[k][0] in batch}
    sliced = [k for k, (i, v) in enumerate(leaves) if i in batch and isinstance(v, Array)]

    def step(diff: list, part: list) -> Any:
        now = list(part)
        for k, d in zip(tracked, diff, strict=True):
            now[k] = d
        a, at = [], 0
        for (_, td), size in zip(flat, shapes, strict=True):
            a.append(tree_unflatten(td, now[at : at + size]))
            at += size
        return mb.loss(*a, **kwargs)

    f = (
        scheduled(step, plan.drop, plan.names, plan.logs)
        if tracked and (plan.drop or plan.logs is not None)
        else step
    )
    both = _api.value_and_grad(f) if tracked else None
    prev = push()
    restore(tuple(f for f in prev if isinstance(f, _KEPT)))
    tracker = STACK.tracker
    try:
        for start, stop in slices(n, plan.rows):
            if tracker is not None:  # (the rows of one micro-batch: _report._calls)
                tracker.prefix = f"slice {start}:{stop} "
            part = list(values)
            for k in sliced:  # the batch's rows (a view: nothing recorded, nothing tracked)
                v = values[k]
                part[k] = v._ns._make(v._data[start:stop, ...])
            if both is not None:
                if tracker is None:
                    value, grads = both([part[k] for k in tracked], part)
                else:
                    with _phases(tracker):
                        value, grads = both([part[k] for k in tracked], part)
            else:
                with _api.no_grad():
                    value, grads = f([], part), []
            w = (stop - start) / n
            # the sums as the backend's arrays (nothing recorded), through its operators: in
            # place where it has them; each first one a new array (a gradient may be a
            # read-only view, a broadcast one)
            ns = value._ns
            raw = value._data * w if weigh else value._data
            total = raw if total is None else total + raw
            for k, g in zip(tracked, grads, strict=True):
                if k in rowed:  # a batch argument's: its rows of the gradient
                    with _api.no_grad():
                        if weigh:
                            g = g * w
                        if k not in accs:
                            leaf = leaves[k][1]
                            accs[k] = leaf._ns.zeros(tuple(leaf.shape), dtype=g.dtype)
                        accs[k][start:stop, ...] = g
                    continue
                raw = g._data * w if weigh else g._data
                if k not in accs:
                    accs[k] = raw if weigh else raw * 1.0
                elif g._backend.abstract:  # projected: our in-place add, no temporary (as
                    with _api.no_grad():  # NumPy's +=; an abstract array's own charges one)
                        acc = g._ns._make(accs[k])
                        acc += g._ns._make(raw)
                        accs[k] = acc._data
                else:
                    accs[k] += raw
            # (nothing of this micro-batch outlives it: its gradients, the last one scaled)
            del value, grads, part
            g = raw = None
    finally:
        if tracker is not None:
            tracker.prefix = ""
        restore(prev)
    total = ours(ns, total)  # (NumPy's 0-d products are scalars)
    if not tracked:
        return total
    saved = [ours(ns, accs.pop(k))._data for k in tracked]
    return _node(mb, total, [leaves[k][1] for k in tracked], saved)


@contextmanager
def _phases(tracker: Any) -> Iterator[None]:
    """A slice's backward pass shown as the backward phase in a projection's rows."""
    if tracker is None:
        yield
        return
    before = tracker.phase

    def back() -> None:
        tracker.phase = "backward"

    def done() -> None:
        tracker.phase = before

    prev = push(OnBackward(back, done))
    try:
        yield
    finally:
        restore(prev)
        tracker.phase = before


def _node(mb: MicroBatched, total: Any, inputs: list, saved: list) -> Any:
    """``total`` recorded as one node of the caller's tape over ``inputs``, its VJP the
    gradients ``saved`` (backend arrays) times the cotangent."""
    name = repr(mb)

    def vjp(ops: Any, g: Any, out: Any, *a: Any) -> tuple:
        if ops is namespace_of(ops):  # a graph of the backward pass asked for: higher order
            raise NotImplementedError(
                f"{name}: a second derivative through a micro-batched step (create_graph): its "
                "gradient is accumulated as a value; take higher derivatives of the undeclared loss"
            )
        return tuple(
            ops.multiply(g if g.dtype == s.dtype else ops.astype(g, s.dtype), s) for s in saved
        )

    def jvp(*_: Any, **__: Any) -> Any:
        raise NotImplementedError(
            f"{name}: forward mode (jvp) through a micro-batched step; take it of the "
            "undeclared loss"
        )

    prim = Primitive(name, "general", None, None, (), signature=_SIGNATURE, vjp=vjp, jvp=jvp)
    ns = inputs[0]._ns
    out = ns._make(total._data)
    return record(prim, ns, out, tuple(inputs), {})


def _signature() -> Any:
    import inspect

    return inspect.Signature([inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL)])


_SIGNATURE = _signature()


def under(f: Callable[..., Any], plan: Slicing) -> Callable[..., Any]:
    """``f`` called with ``plan`` active: its :class:`MicroBatched` loss runs in slices."""

    @functools.wraps(f)
    def g(*args: Any, **kwargs: Any) -> Any:
        with slicing(plan):
            return f(*args, **kwargs)

    from ._project import AS_IS

    if getattr(f, AS_IS, False):
        setattr(g, AS_IS, True)
    return g


def batch_rows(micro: MicroBatched, args: Sequence[Any]) -> int:
    """The batch's rows of a call with ``args`` (arrays or specs)."""
    return micro.rows(tuple(args))
