"""Multi-tensor updates: the first-order optimizers' steps over all parameters at once, on the
backend's arrays (PyTorch's ``foreach`` optimizers).

Each optimizer's update is first-order Array API code on the namespace's arrays, one leaf at a
time (``_transforms``): about a dozen namespace calls per parameter, each checking, dispatching
and wrapping. For a small model that is most of a step. Where nothing needs those calls (eager
arrays of one namespace whose backend writes ``out=``: NumPy, CuPy; no transform running, no
array on a tape), the update runs here instead: the trees flattened once, then one pass per
state kind (``mu`` of every parameter, then ``nu``, then the updates), each a loop over the
backend's arrays that writes its temporaries in place, and one wrap per result.

The values are those of the per-parameter code bit for bit: the same backend operations on the
same operands in the same order, with the same Python scalars (multiplication and addition of
two values are commutative in IEEE arithmetic, so ``x *= c`` is ``c * x``; nothing is
reassociated). The memory is at most the per-parameter code's: the same results, and fewer
temporaries (each written into one the loop owns), so ``memory.project``, which evaluates the
per-parameter code on abstract arrays, stays an upper bound.

Everything else takes the per-parameter code: lazy backends (Cubed), backends without ``out=``
(array-api-strict), ``memory.project`` and ``pycograd_xp.compile`` (their arrays are abstract,
and compile's replay writes in place itself), ``vmap``, ``jvp``, ``debug_nans``, an array
being differentiated (an update under ``grad``), a learning rate or hyperparameter that is not a
Python number, and a non-floating leaf or one whose dtype differs between the trees.
:func:`per_parameter` turns this module off (the tests compare the two).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from operator import attrgetter
from typing import Any

from .._state import STACK
from ..namespace._array import Array, make
from ..tree import tree_flatten, tree_unflatten

_OFF: list[bool] = [False]
_data, _node, _dtype = attrgetter("_data"), attrgetter("_node"), attrgetter("dtype")
_kind = attrgetter("kind")


@contextmanager
def per_parameter() -> Iterator[None]:
    """Within the block every optimizer updates leaf by leaf on the namespace's arrays (the
    reference the multi-tensor updates are compared with)."""
    before = _OFF[0]
    _OFF[0] = True
    try:
        yield
    finally:
        _OFF[0] = before


def numbers(*values: Any) -> bool:
    """Whether every value is a Python ``int`` or ``float`` (not a host scalar of a traced
    function, not an array, not a NumPy scalar: those take the per-parameter code)."""
    return _NUMBERS.issuperset(map(type, values))


_NUMBERS = frozenset((int, float))


class Group:
    """The leaves of one tree structure, as backend arrays, ready for a multi-tensor pass.

    ``data[i]`` is the i-th tree's leaves' backend arrays; ``wrap(list)`` makes a tree of the
    structure from backend results.
    """

    __slots__ = ("cls", "data", "sqrt", "to_array", "treedef", "array_type")

    def __init__(self, cls: type, backend: Any, treedef: Any, data: list[list[Any]]) -> None:
        self.cls, self.treedef, self.data = cls, treedef, data
        self.sqrt = backend.xp.sqrt
        self.array_type = backend.array_type
        self.to_array = backend.scalar_to_array

    def wrap(self, results: list[Any]) -> Any:
        """A tree of the group's structure holding ``results`` (backend arrays, or a NumPy
        scalar from a 0-d operation: only a backend with ``scalar_type`` makes those, and
        it has ``scalar_to_array``) as arrays of the namespace."""
        cls, T, to_array = self.cls, self.array_type, self.to_array
        if set(map(type, results)) == {T}:  # (backend arrays all: wrapped from C, no loop)
            return tree_unflatten(self.treedef, list(map(partial(make, cls), results)))
        return tree_unflatten(
            self.treedef, [make(cls, r if type(r) is T else to_array(r)) for r in results]
        )


def group(*trees: Any) -> Group | None:
    """The trees' leaves as one :class:`Group` when a multi-tensor update applies to them (see
    the module's docstring), else None. ``trees`` share one structure (the first's); a tree
    of another structure gives None, and the per-parameter code then says what differs."""
    if (
        _OFF[0]
        or STACK.redirect is not None
        or STACK.tracing
        or STACK.batch is not None
        or STACK.jvp
        or STACK.debug_nans
    ):
        return None
    first, treedef = tree_flatten(trees[0])
    if not first or not isinstance(first[0], Array):
        return None
    cls = type(first[0])
    backend = first[0]._backend
    if not _eager_writes(backend):
        return None
    tracked = STACK.grad_enabled
    data: list[list[Any]] = []
    dtypes = None
    for i, tree in enumerate(trees):
        if i:
            leaves, td = tree_flatten(tree)
            if td is not treedef and td != treedef:
                return None
        else:
            leaves = first
        if set(map(type, leaves)) != {cls}:
            return None
        if tracked and set(map(_node, leaves)) != {None}:  # on a tape: its ops record
            return None
        column = list(map(_data, leaves))
        if dtypes is None:  # one floating dtype per parameter across the trees
            dtypes = list(map(_dtype, column))
            try:
                if set(map(_kind, dtypes)) != {"f"}:
                    return None
            except AttributeError:  # (a dtype without NumPy's kind)
                return None
        elif list(map(_dtype, column)) != dtypes:
            return None
        data.append(column)
    return Group(cls, backend, treedef, data)


# id(backend) -> (backend, whether multi-tensor updates run on it), decided once per backend
_EAGER_WRITES: dict[int, tuple[Any, bool]] = {}


def _eager_writes(backend: Any) -> bool:
    """Whether ``backend`` is eager, concrete, unbatched and writes ``out=`` (NumPy, CuPy)."""
    known = _EAGER_WRITES.get(id(backend))
    if known is None or known[0] is not backend:
        ok = not (
            backend.lazy
            or backend.abstract
            or backend.level
            or backend.takes_out is None
            or (backend.scalar_type is not None and backend.scalar_to_array is None)
            or not backend.takes_out(backend.xp.sqrt)
        )
        if len(_EAGER_WRITES) > 64:  # (backends made on the fly, vmap's levels: kept few)
            _EAGER_WRITES.clear()
        known = _EAGER_WRITES[id(backend)] = (backend, ok)
    return known[1]


def _root(sqrt: Any, x: Any) -> Any:
    """``sqrt(x)`` written into ``x`` (a temporary of the caller's); a 0-d value (a NumPy
    scalar) is not writable: a new one."""
    return sqrt(x, out=x) if getattr(x, "ndim", 0) else sqrt(x)


# -- the optimizers' passes (each mirrors its per-parameter code in _transforms) ----------------
def sgd(
    grp: Group, rate: Any, momentum: float, nesterov: bool, weight_decay: float, on: list[bool]
) -> tuple[list[Any], list[Any] | None]:
    """``sgd``'s update: (updates, velocity or None) as backend arrays. ``grp.data``: grads,
    params (when ``weight_decay``), velocity (when ``momentum``)."""
    gs = grp.data[0]
    if weight_decay:  # g + weight_decay * p
        ps = grp.data[1]
        gs = [g + p * weight_decay if m else g for g, p, m in zip(gs, ps, on, strict=True)]
    velocity = None
    if momentum:
        velocity = []
        for v, g in zip(grp.data[-1], gs, strict=True):  # momentum * v + g
            t = v * momentum
            t += g
            velocity.append(t)
        if nesterov:  # g + momentum * v
            steps = []
            for v, g in zip(velocity, gs, strict=True):
                t = v * momentum
                t += g
                steps.append(t)
        else:
            steps = velocity
    else:
        steps = gs
    minus = -rate
    return [s * minus for s in steps], velocity


def rmsprop(
    grp: Group, rate: Any, decay: float, eps: float, momentum: float
) -> tuple[list[Any], list[Any], list[Any] | None]:
    """``rmsprop``'s update: (updates, nu, mom or None). ``grp.data``: grads, nu (, mom)."""
    gs, sqrt = grp.data[0], grp.sqrt
    nu = []
    for s, g in zip(grp.data[1], gs, strict=True):  # decay * s + (1 - decay) * g * g
        t = g * (1 - decay)
        t *= g
        n = s * decay
        n += t
        del t
        nu.append(n)
    scaled = []
    for g, n in zip(gs, nu, strict=True):  # g / (sqrt(s) + eps)
        d = sqrt(n)
        d += eps
        scaled.append(g / d)
        del d
    mom = None
    if momentum:
        mom = []
        for m, u in zip(grp.data[2], scaled, strict=True):  # momentum * m + u
            t = m * momentum
            t += u
            mom.append(t)
        scaled = mom
    minus = -rate
    return [u * minus for u in scaled], nu, mom


def adagrad(grp: Group, rate: Any, eps: float) -> tuple[list[Any], list[Any]]:
    """``adagrad``'s update: (updates, sum_sq). ``grp.data``: grads, sum_sq."""
    gs, sqrt = grp.data[0], grp.sqrt
    acc = []
    for a, g in zip(grp.data[1], gs, strict=True):  # a + g * g
        t = g * g
        t += a
        acc.append(t)
    minus, updates = -rate, []
    for g, a in zip(gs, acc, strict=True):  # -rate * g / (sqrt(a) + eps)
        d = sqrt(a)
        d += eps
        u = g * minus
        u /= d
        del d
        updates.append(u)
    return updates, acc


def adam(
    grp: Group,
    rate: Any,
    b1: float,
    b2: float,
    eps: float,
    c1: Any,
    c2: Any,
    weight_decay: float,
    on: list[bool],
) -> tuple[list[Any], list[Any], list[Any]]:
    """``adam``'s update: (updates, mu, nu). ``grp.data``: grads, mu, nu (, params when
    ``weight_decay``)."""
    gs, sqrt = grp.data[0], grp.sqrt
    mu = []
    for m, g in zip(grp.data[1], gs, strict=True):  # b1 * m + (1 - b1) * g
        t = m * b1
        t += g * (1 - b1)
        mu.append(t)
    nu = []
    for v, g in zip(grp.data[2], gs, strict=True):  # b2 * v + (1 - b2) * (g * g)
        gg = g * g
        gg *= 1 - b2
        t = v * b2
        t += gg
        del gg
        nu.append(t)
    scale, decay = -rate / c1, rate * weight_decay
    updates = []
    ps = grp.data[3] if weight_decay else gs
    for m, v, p, wd in zip(mu, nu, ps, on, strict=True):
        d = _root(sqrt, v / c2)  # (-rate / c1) * m / (sqrt(v / c2) + eps)
        d += eps
        u = m * scale
        u /= d
        del d
        if wd:  # u - (rate * weight_decay) * p
            u -= p * decay
        updates.append(u)
    return updates, mu, nu


def add(grp: Group) -> list[Any]:
    """``apply_updates``: ``p + u`` per leaf. ``grp.data``: params, updates."""
    return [p + u for p, u in zip(grp.data[0], grp.data[1], strict=True)]
