"""``compile``: trace a function once per structure, then replay a flat schedule of backend calls.

The trace runs the function, and everything it calls (``value_and_grad``, the VJP rules, an
optimizer's update), through the real engine on the abstract backend of ``pycograd_xp.memory``:
arrays with a shape and a dtype and no data. Each call that reaches the abstract backend is one
standard function of one row (its shape rule gives the output's shape and dtype), and the
recorder notes it: which function, on which earlier results, with which constants. The result is
the exact sequence of backend calls the engine would make on real arrays of those shapes,
forward pass, backward pass and update, with every Python-level decision (which rule, which
cotangents to sum, which dtype casts) already taken. On a lazy backend (Cubed) the trace runs
on the backend's own lazy arrays instead, behind proxies (:mod:`._proxy`): chunks and
Specs are then decided exactly as uncompiled, and building a lazy array computes nothing.

That sequence becomes the source of one Python function (like ``namedtuple``'s): one line per
backend call, calling the backend's own function directly, with ``del`` at each value's last use
(the liveness the memory model computes, over the order the engine executes), and, on backends
that write in place safely (NumPy, CuPy), elementwise results written into a dead operand's
buffer instead of a fresh one when nothing else holds that buffer. Calls that read no argument
(a loss's seed cotangent) are evaluated once, when the function is generated (constant folding,
:func:`._passes.fold_constants`), and a 0-d result our namespace wraps back into an array
(NumPy returns scalars) is wrapped in the replay too, so the next call runs the same arithmetic.
No wrapper objects, no nodes, no topological sort, no dtype checks run at replay. The memory
model projects the replay's peak over the same schedule (``Trace.peak_bytes``).

Soundness: a trace never sees values. Whatever needs one while tracing (``bool()``/``float()``
of an array, an output shape that depends on data) raises :class:`TracingError` naming it, so a
schedule never bakes in a branch. Python numbers among the arguments stay dynamic
(``pycograd_xp._host``) unless their value is needed, in which case they become part of the
cache key. A function called with tracked arrays (inside ``grad``) runs uncompiled.

Arrays the function closes over are constants the replay reads, not values: on an eager backend
every call of the traced namespace moves to the recording one while tracing (its
:class:`~pycograd_xp._state.Trace` frame's ``closed``; ``namespace._dispatch``), so ``data * 2.0``
on a closed-over ``data`` is recorded and recomputed by each replay from ``data``'s contents then,
as the function would; a write into such an array is refused (the replay could not repeat it). On a
lazy backend arrays never change and nothing needs recording.

The package, in the order a trace goes through it:

- :mod:`._recorder`: what the abstract backend reports while tracing, noted as the IR's calls;
  :func:`._recorder.record` runs the function under it;
- :mod:`._proxy`: the recording namespace over a lazy backend;
- :mod:`._ir`: the calls as typed records, each knowing its backend function, and the
  :class:`._ir.Schedule` the passes make of them (``compiled.schedule(*args)`` prints it);
- :mod:`._passes`: dead code elimination, constant folding, liveness, the projected peak,
  in-place reuse, elementwise results written into the views they are copied to
  (``out=``), each a plain function;
- :mod:`._codegen`: the replay function's source, and its ``exec`` (the package's only one);
- this module: ``compile``, :class:`Compiled` and its cache of plans.
"""

from __future__ import annotations

import functools
import math
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, overload

from .._abstract import c_order
from .._host import HostScalar, ValueNeededError
from .._state import STACK
from ..memory import _budget as _memory_budget
from ..namespace._array import Array, make
from ..tree import _children, _dict_keys, tree_flatten
from ._codegen import generate, rebuilder
from ._ir import Schedule
from ._passes import schedule
from ._recorder import TracingError, record

__all__ = ["Compiled", "TracingError", "compile"]


@dataclass
class _Plan:
    """A trace ready to replay: the generated function and how to call it."""

    replay: Callable[..., Any]
    source: str
    array_inputs: list[int]  # leaf positions of the array arguments
    scalar_inputs: list[int]  # leaf positions of the dynamic Python numbers
    rebuild: Callable[[list], Any]  # the output tree from its leaves
    outs: list[tuple[str, Any]]  # per output leaf: ("array", i) | ("host", i) | ("const", v)
    ns: Any
    calls: int  # backend calls per replay
    elided: int  # of them, results written into a dead operand's buffer (when nothing holds it)
    peak_bytes: int  # projected peak of a replay, the arguments included (the memory model's)
    argument_bytes: int
    schedule: Schedule  # what the replay computes, step by step (printable)
    writes: bool = False  # whether a step writes into an array (a setitem, an in-place update)


@dataclass(frozen=True)
class Trace:
    """One trace of a compiled function: why it happened, and what the replay does."""

    reason: str
    calls: int  # backend calls per replay
    elided: int  # of them, written into a dead operand's buffer when nothing else holds it
    static_scalars: tuple[int, ...]  # leaf positions of Python numbers made static
    # the replay's projected peak bytes (the arguments included; eager backends: the memory
    # model's rows, liveness from the schedule), and the arguments' bytes
    peak_bytes: int
    argument_bytes: int


class Compiled:
    """``compile(f)``: call it like ``f``. See :func:`compile`."""

    def __init__(
        self,
        f: Callable[..., Any],
        static_argnums: Sequence[int],
        static_argnames: Sequence[str],
        max_traces: int,
        on_trace: Callable[[Trace], None] | None,
    ) -> None:
        self.f = f
        self.static_argnums = frozenset(static_argnums)
        self.static_argnames = frozenset(static_argnames)
        self.max_traces = max_traces
        self.on_trace = on_trace
        self._cache: OrderedDict[Any, _Plan] = OrderedDict()
        self._static_scalars: dict[Any, frozenset[int]] = {}  # per structure: numbers made static
        self.traces: list[Trace] = []
        self.fallbacks = 0  # calls run uncompiled (tracked arrays: inside grad, jvp or vmap)
        # the name and docstring only: copying ``f.__dict__`` (a callable object's attributes,
        # or those a wrapper copied from one) would overwrite these attributes (``f`` itself)
        functools.update_wrapper(self, f, updated=())

    def __repr__(self) -> str:
        return f"<compiled {getattr(self.f, '__name__', self.f)!r}: {len(self._cache)} traces>"

    def source(self, *args: Any, **kwargs: Any) -> str:
        """The generated replay function for these arguments (tracing if needed)."""
        return self._cached(args, kwargs).source

    def schedule(self, *args: Any, **kwargs: Any) -> Schedule:
        """What the replay for these arguments computes (tracing if needed); ``str()`` of it
        gives one line per backend call: its results (symbol: dtype[shape]), the function and
        its arguments, the dead operand's buffer it may write into, the symbols freed after
        it."""
        return self._cached(args, kwargs).schedule

    def _cached(self, args: tuple, kwargs: dict) -> _Plan:
        key, leaves, sig, ns = self._key(args, kwargs)
        plan = self._cache.get(key)
        return plan if plan is not None else self._plan(key, leaves, sig, ns, args, kwargs)[0]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        key, leaves, sig, ns = self._key(args, kwargs)
        if key is None:  # tracked or abstract arrays: run the function itself
            self.fallbacks += 1
            return self.f(*args, **kwargs)
        plan = self._cache.get(key)
        if plan is None:
            plan, _ = self._plan(key, leaves, sig, ns, args, kwargs)
        else:
            self._cache.move_to_end(key)
        datas = [leaves[i]._data for i in plan.array_inputs]
        if plan.writes and _aliased(datas):  # arguments over one buffer, and a write: the
            self.fallbacks += 1  # trace took them as distinct (its reordered writes, its
            return self.f(*args, **kwargs)  # saved values), so the function itself runs
        try:
            results = plan.replay(*datas, *[leaves[i] for i in plan.scalar_inputs])
        except (ValueError, TypeError, IndexError) as e:  # the backend's, on these values
            raise replay_error(plan.replay, e, self.f) from e
        return plan.rebuild(_outputs(plan, results))

    # the cache key: structure, shapes and dtypes, static values, namespace
    def _key(self, args: tuple, kwargs: dict) -> tuple[Any, list, Any, Any]:
        leaves: list[Any] = []
        sig = _signature((args, kwargs), leaves)
        parts: list[Any] = [sig]
        ns = None
        static_pos = self._static_positions(args, kwargs, sig)
        grad_on = STACK.grad_enabled
        for i, leaf in enumerate(leaves):
            t = type(leaf)
            if isinstance(leaf, Array):
                if (
                    (leaf._node is not None and grad_on)
                    or leaf._backend.abstract
                    or leaf._backend.level
                    or STACK.tracing
                ):
                    return None, leaves, sig, ns
                if ns is None:
                    ns = leaf._ns
                elif leaf._ns is not ns:
                    raise TypeError(
                        f"compile: arguments mix arrays of {ns.__name__} and {leaf._ns.__name__}"
                    )
                d = leaf._data
                parts.append(
                    (d.shape, d.dtype, c_order(d))  # C order or not: a plan's memory (copies)
                    if not leaf._backend.chunked
                    else (d.shape, d.dtype, d.chunks, id(d.spec))
                )
            elif (t is int or t is float) and i not in static_pos:
                parts.append(t)
            else:
                try:
                    hash(leaf)
                except TypeError:
                    raise TypeError(
                        f"compile: argument leaf {i} ({t.__name__}) is neither an array nor a "
                        "hashable static value; pass arrays as arrays, or make it hashable"
                    ) from None
                parts.append(("static", t, _exact(leaf)))
        parts.append(ns)  # NumPy and CuPy arrays share dtypes: the namespace tells them apart
        return tuple(parts), leaves, sig, ns

    def _static_positions(self, args: tuple, kwargs: dict, sig: Any) -> frozenset[int]:
        found = self._static_scalars.get(sig, frozenset())
        if not self.static_argnums and not self.static_argnames:
            return found
        # leaf positions of the static arguments (positional ones, then keywords in the order
        # the pytree flattens a dict)
        pos, i = set(found), 0
        named = [(k, kwargs[k]) for k in _dict_keys(kwargs)]
        for k, a in [*enumerate(args), *named]:
            n = tree_flatten(a)[1].num_leaves
            if k in self.static_argnums or k in self.static_argnames:
                pos.update(range(i, i + n))
            i += n
        return frozenset(pos)

    def _plan(
        self, key: Any, leaves: list, sig: Any, ns: Any, args: tuple, kwargs: dict
    ) -> tuple[_Plan, Any]:
        if key is None:
            raise TypeError("compile: tracked or abstract arrays among the arguments")
        reason = "first call" if not self.traces else "new shapes, dtypes or static values"
        td = tree_flatten((args, kwargs))[1]
        while True:
            static = self._static_positions(args, kwargs, sig)
            try:
                plan = _trace(self.f, leaves, td, ns, static)
                break
            except ValueNeededError as e:
                roots = _roots(e.scalar)
                if not roots or roots <= static:
                    raise
                self._static_scalars[sig] = self._static_scalars.get(sig, frozenset()) | roots
                reason = f"argument {e.scalar.name} made static ({e.how} while tracing)"
                key = self._key(args, kwargs)[0]
        self._cache[key] = plan
        if len(self._cache) > self.max_traces:
            self._cache.popitem(last=False)
        trace = Trace(
            reason,
            plan.calls,
            plan.elided,
            tuple(sorted(self._static_scalars.get(sig, ()))),
            plan.peak_bytes,
            plan.argument_bytes,
        )
        self.traces.append(trace)
        if self.on_trace is not None:
            self.on_trace(trace)
        return plan, key

    def replay_plan(
        self, args: tuple, kwargs: dict, events: list | None = None, ns: Any = None
    ) -> _Plan:
        """The plan a call with arguments of these shapes, dtypes and static values replays,
        traced afresh and not cached: how ``memory.project`` reaches the replay's projected
        peak (``peak_bytes``, as ``Trace.peak_bytes``). Array leaves may be abstract (made from
        ``memory.spec``); the replay is generated for namespace ``ns`` (one of ours; None:
        NumPy's), whose backend the trace's rules model (a GPU's blocks and copies).
        ``events``: see :func:`._passes.projected_peak`."""
        leaves: list[Any] = []
        sig = _signature((args, kwargs), leaves)
        td = tree_flatten((args, kwargs))[1]
        while True:  # as _plan: numbers whose value the trace needs become static
            static = self._static_positions(args, kwargs, sig)
            try:
                return _trace(self.f, leaves, td, ns, static, events)
            except ValueNeededError as e:
                roots = _roots(e.scalar)
                if not roots or roots <= static:
                    raise
                self._static_scalars[sig] = self._static_scalars.get(sig, frozenset()) | roots


def _signature(x: Any, leaves: list) -> Any:
    """The structure of pytree ``x`` as nested tuples (hashable, cheap to compare), appending
    its leaves to ``leaves`` in ``tree_flatten``'s order: the per-call part of the cache key."""
    t = type(x)
    if t is tuple or t is list:
        return (t, *[_signature(e, leaves) for e in x])
    if t is dict:
        keys = _dict_keys(x)
        return (dict, tuple(keys), *[_signature(x[k], leaves) for k in keys])
    if x is None:
        return None
    parts = _children(x)
    if parts is None:
        leaves.append(x)
        return 0
    kind, meta, kids = parts
    return (kind, meta, *[_signature(k, leaves) for k in kids])


def _roots(h: HostScalar) -> frozenset[int]:
    """Leaf positions of the arguments a host scalar was computed from."""
    out: set[int] = set()
    stack = [h]
    while stack:
        s = stack.pop()
        if s.op is None:
            out.add(s.index)
        stack.extend(a for a in s.args if isinstance(a, HostScalar))
    return frozenset(out)


def _outputs(plan: _Plan, results: tuple) -> list[Any]:
    ns = plan.ns
    Arr, T = ns.Array, ns._backend.array_type
    to_array = ns._backend.scalar_to_array
    out = []
    for kind, v in plan.outs:
        if kind == "array":
            d = results[v]
            if type(d) is not T and to_array is not None:
                d = to_array(d)
            out.append(make(Arr, d))
        elif kind == "host":
            out.append(results[v])
        else:
            out.append(v)
    return out


def _trace(
    f: Callable[..., Any],
    leaves: list,
    td: Any,
    ns: Any,
    static: frozenset[int],
    events: list | None = None,
) -> _Plan:
    """Record ``f`` (see :func:`._recorder.record`), run the passes, generate the replay."""
    if ns is None:
        import numpy

        from .. import namespace as _namespace

        ns = _namespace(numpy)
    r = record(f, leaves, td, ns, static)
    rec = r.rec
    sched, peak = schedule(
        rec.calls,
        rec.meta,
        rec.rewraps,
        rec.host_list,
        rec.hosts,
        r.input_syms,
        r.templates,
        ns._backend,
        events,
    )
    params = [f"t{n}" for n in r.input_syms] + [f"h{rec.hosts[id(h)]}" for h in r.host_inputs]
    replay, source = generate(sched, params, rec.host_list, rec.hosts, rec.rewraps, ns._backend)
    arguments = sum(rec.meta[n].nbytes for n in set(r.input_syms))
    return _Plan(
        replay,
        source,
        r.array_inputs,
        r.scalar_inputs,
        rebuilder(r.out_def),
        r.outs,
        ns,
        len(sched.steps),
        len(sched.reuse),
        peak,
        arguments,
        sched,
        any(c.writes for c in sched.steps),
    )


def _aliased(datas: list[Any]) -> bool:
    """Whether two of the backend arrays share one buffer (one array twice, or views of one
    array: their ``base`` chains end at one object)."""
    roots = set()
    for d in datas:
        while getattr(d, "base", None) is not None:
            d = d.base
        if id(d) in roots:
            return True
        roots.add(id(d))
    return False


def _exact(v: Any) -> Any:
    """A static value as a key part that tells -0.0 from 0.0 (equal as numbers, not to a
    function: ``x / s``, ``copysign``), in tuples too."""
    if type(v) is float:
        return (v, math.copysign(1.0, v))
    if type(v) is tuple:
        return tuple(_exact(u) for u in v)
    return v


@overload
def compile(
    f: Callable[..., Any],
    *,
    static_argnums: int | Sequence[int] = (),
    static_argnames: str | Sequence[str] = (),
    max_traces: int = 64,
    on_trace: Callable[[Trace], None] | None = None,
) -> Compiled: ...
@overload
def compile(
    f: None = None,
    *,
    static_argnums: int | Sequence[int] = (),
    static_argnames: str | Sequence[str] = (),
    max_traces: int = 64,
    on_trace: Callable[[Trace], None] | None = None,
) -> Callable[[Callable[..., Any]], Compiled]: ...
def compile(
    f: Callable[..., Any] | None = None,
    *,
    static_argnums: int | Sequence[int] = (),
    static_argnames: str | Sequence[str] = (),
    max_traces: int = 64,
    on_trace: Callable[[Trace], None] | None = None,
) -> Any:
    """Compile ``f``: trace it once per structure of its arguments, then replay the recorded
    backend calls directly.

    ``f`` takes and returns pytrees of arrays of one pycograd_xp namespace, Python numbers and
    other values; it may be ``value_and_grad(loss)``, ``grad(loss)`` or a whole training step
    (``pycograd_xp.train.make_step``, optimizer update included). The first call for a given
    structure (pytree structure, shapes, dtypes, static values, namespace) traces; later calls
    replay. A new structure traces again (at most ``max_traces`` are kept, least recently used
    first out); ``compiled.traces`` lists them and ``on_trace(trace)`` is told of each.

    Python ``int``/``float`` arguments are dynamic (a step count, a learning rate: no retrace
    when they change) unless their value is needed while tracing, which makes them static
    (``static_argnums`` and ``static_argnames`` make whole arguments static from the start;
    ``bool`` and other values are always static). Anything that needs an array's value while
    tracing raises :class:`TracingError`. Called with arrays being differentiated (inside
    ``grad``, ``jvp``, ``vmap``) the function runs uncompiled (``compiled.fallbacks`` counts
    it).

    Parameters
    ----------
    f : callable, optional
        The function. Without it, ``compile(...)`` returns a decorator taking the keyword
        arguments given.
    static_argnums : int or sequence of int, default ()
        Positional arguments that are static from the start (a retrace per value).
    static_argnames : str or sequence of str, default ()
        Keyword arguments that are static from the start.
    max_traces : int, default 64
        How many traces are kept (least recently used first out).
    on_trace : callable, optional
        Called with each new :class:`~pycograd_xp._compile.Trace` (why it happened, backend calls
        per replay, projected peak bytes).

    Returns
    -------
    Compiled
        Callable like ``f``; ``compiled.source(*args)`` shows the generated replay and
        ``compiled.schedule(*args)`` what it computes, step by step. Without ``f``, a decorator
        making one.

    Examples
    --------
    >>> import numpy, pycograd_xp as pg
    >>> xp = pg.namespace(numpy)
    >>> step = pg.compile(pg.value_and_grad(lambda w, x: xp.sum(xp.tanh(x @ w) ** 2)))
    >>> w, x = xp.ones(3), xp.ones((4, 3))
    >>> value, g = step(w, x)  # traces
    >>> value, g = step(w, 2 * x)  # replays
    >>> len(step.traces)
    1
    """
    if f is None:
        return functools.partial(
            compile,
            static_argnums=static_argnums,
            static_argnames=static_argnames,
            max_traces=max_traces,
            on_trace=on_trace,
        )
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)
    if isinstance(static_argnames, str):
        static_argnames = (static_argnames,)
    return Compiled(f, static_argnums, static_argnames, max_traces, on_trace)


# a memory budget given to a compiled step is proven on the replay compile generates
_memory_budget.COMPILE[0] = compile


def replay_error(replay: Callable[..., Any], e: Exception, f: Any) -> Exception:
    """The backend's error ``e`` from a line of ``replay``, as the function's own call would
    raise it: named after the row that line runs (``take(): index 5 is out of bounds ...``),
    with the compiled function's name."""
    names = getattr(replay, "step_names", {})
    filename = replay.__code__.co_filename
    tb, name = e.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            name = names.get(tb.tb_lineno, name)
        tb = tb.tb_next
    if name is None:
        return e
    msg = f"{name}(): {e} (in the replay of compile({getattr(f, '__name__', 'f')}))"
    try:
        return type(e)(msg)
    except Exception:  # an error type with other arguments (NumPy's AxisError): its base's
        base = next(b for b in (IndexError, TypeError, ValueError) if isinstance(e, b))
        return base(msg)
