"""The passes over a recorded trace, each a plain function of the IR (:mod:`._ir`): dead code
elimination, constant folding, liveness, the projected peak (the memory model over the
schedule), in-place reuse and results written straight into the views they are copied to.
:func:`schedule` runs them in order."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from .._abstract import CALL_SLACK
from .._host import HostScalar
from .._primitive import REGISTRY
from ..memory._report import _overhead
from ..namespace._backend import _zero_bits
from ._ir import (
    GETITEM,
    SETITEM,
    WHERE,
    Call,
    Host,
    Meta,
    OwnCall,
    Reuse,
    RowCall,
    Schedule,
    Sym,
    collect_hosts,
    row_function,
    size,
    whole_index,
)

# compile evaluates once, when it generates the replay, the calls that read no argument (a
# loss's seed cotangent: ones, a division, expand_dims, broadcast_to), each result owning at
# most this many bytes: the replay binds the results instead of calling the backend again.
FOLD_MAX_BYTES = 64 * 1024

# Results at least this large are written into a dead operand's buffer (smaller ones gain
# nothing: the check would cost more than the allocation it saves).
ELIDE_MIN_BYTES = 8 * 1024

# Elementwise rows with an in-place operator of the standard (the result may go into a dead
# operand's buffer), and the commutative ones (either operand's buffer will do).
_INPLACE = {
    REGISTRY["add"]: operator.iadd,
    REGISTRY["subtract"]: operator.isub,
    REGISTRY["multiply"]: operator.imul,
    REGISTRY["divide"]: operator.itruediv,
}
_COMMUTATIVE = frozenset({REGISTRY["add"], REGISTRY["multiply"]})


def drop_idle_claims(calls: list[Call], meta: list[Meta]) -> list[Call]:
    """The calls without the claims (:class:`._ir.OwnCall`) after which nothing writes into
    the claimed buffer before it is claimed again or the trace ends: the tape asked whether a
    cotangent was its own, and the VJP did not write into it (it was shared, or the rule
    writes nowhere). A claim kept guards the writes that follow it."""

    def owner(n: int) -> int:
        m = meta[n]
        return n if m.holds or m.base is None else m.base

    keep = [True] * len(calls)
    pending: dict[int, int] = {}  # buffer -> its latest claim not yet followed by a write
    for j, c in enumerate(calls):
        if type(c) is OwnCall:
            o = owner(c.args[0].n)
            if o in pending:
                keep[pending[o]] = False
            pending[o] = j
        elif c.mutates is not None:
            pending.pop(owner(c.mutates), None)
    for j in pending.values():
        keep[j] = False
    return [c for c, k in zip(calls, keep, strict=True) if k]


def eliminate_dead_code(
    calls: list[Call], outputs: list[Any], host_list: list[HostScalar], hosts: dict[int, int]
) -> tuple[list[Call], set[int]]:
    """The calls some result of which is used (by the ``outputs`` templates or a later kept
    call) or that write into a buffer, and the host expressions they and the outputs need
    (``host_list``: the recorder's expressions, ``hosts``: id of each -> its index)."""
    needed: set[int] = {t.n for t in outputs if type(t) is Sym}
    needed_hosts: set[int] = {t.n for t in outputs if type(t) is Host}
    keep = [False] * len(calls)
    for j in range(len(calls) - 1, -1, -1):
        c = calls[j]
        if c.mutates is not None or any(w in needed for w in c.writes):
            keep[j] = True
            needed.update(c.reads)
            collect_hosts((c.args, c.kwargs), needed_hosts)
    for n in range(len(host_list) - 1, -1, -1):  # and what those host numbers need
        if n in needed_hosts:
            needed_hosts.update(
                hosts[id(a)] for a in host_list[n].args if isinstance(a, HostScalar)
            )
    return [c for c, k in zip(calls, keep, strict=True) if k], needed_hosts


def fold_constants(
    meta: list[Meta],
    rewraps: Any,
    live: list[Call],
    inputs: set[int],
    outputs: set[int],
    backend: Any,
) -> dict[int, Any]:
    """Constant folding: the values of the symbols that depend on no argument and no host
    number, made by pure calls (rows and operators, no write into a buffer), into buffers the
    replay never writes, and that are no output of the function (a caller may write into an
    output). ``rewraps(n)``: whether symbol ``n`` is wrapped back into a 0-d array. A lazy
    backend folds nothing: its arrays belong to one computation."""
    if backend.lazy:
        return {}

    def owner(n: int) -> int:
        base = meta[n].base
        return n if meta[n].holds or base is None else base

    # buffers written in place, and those an output (or a view the caller gets) lives in
    written = {owner(c.mutates) for c in live if c.mutates is not None}
    written |= {owner(n) for n in outputs}
    arrays = backend.array_type  # a closed-over array: read afresh by each replay, never folded
    values: dict[int, Any] = {}
    to_array = backend.scalar_to_array
    for c in live:
        if (
            not isinstance(c, RowCall)
            or c.mutates is not None
            or not c.writes
            or c.prim is SETITEM
            or _has_host((c.args, c.kwargs), arrays)
            or any(n not in values for n in c.reads)
            or any(
                n in inputs or owner(n) in written or meta[n].nbytes > FOLD_MAX_BYTES
                for n in c.writes
            )
        ):
            continue
        try:
            f = c.function(backend)
            args = _evaluate(c.args, values, backend.xp)
            kwargs = {k: _evaluate(v, values, backend.xp) for k, v in c.kwargs.items()}
            result = f(*args, **kwargs)
        except Exception:  # never worse than not folding: the replay calls it
            continue
        outs = [(c.outs, result)] if type(c.outs) is Sym else list(zip(c.outs, result, strict=True))
        for sym, v in outs:
            if sym is None:
                continue
            if to_array is not None and rewraps(sym.n):
                v = to_array(v)
            values[sym.n] = v
    return values


def _has_host(v: Any, arrays: type) -> bool:
    """Whether a template holds a host number or an array of the backend (one the function
    closes over, which the caller may write between calls)."""
    t = type(v)
    if t is Host or isinstance(v, arrays):
        return True
    if t is tuple or t is list:
        return any(_has_host(e, arrays) for e in v)
    if t is dict:
        return any(_has_host(e, arrays) for e in v.values())
    return t is slice and any(type(p) is Host for p in (v.start, v.stop, v.step))


def _evaluate(v: Any, values: dict[int, Any], xp: Any) -> Any:
    """A template's value with the folded symbols' values (what the replay's text says)."""
    t = type(v)
    if t is Sym:
        return values[v.n]
    if t is tuple or t is list:
        return t(_evaluate(e, values, xp) for e in v)
    if isinstance(v, np.dtype):
        return getattr(xp, v.name)
    return v


def liveness(steps: list[Call]) -> dict[int, int]:
    """Each symbol's last use: the index of the last step that reads or writes it."""
    last: dict[int, int] = {}
    for j, c in enumerate(steps):
        for n in c.reads:
            last[n] = j
        for n in c.writes:
            last.setdefault(n, j)
            last[n] = max(last[n], j)
    return last


def projected_peak(
    meta: list[Meta],
    steps: list[Call],
    last: dict[int, int],
    held: list[int],
    protected: set[int],
    events: list | None = None,
) -> int:
    """The replay's peak bytes by the memory model: the arrays ``held`` from the start (the
    arguments, the folded constants), each call's new outputs and its transients (the rows'
    memory rules), each buffer freed when its owner and every view of it are dead (the
    ``del`` lines). Writes into dead buffers are counted as fresh allocations (the guard may
    refuse them): an upper bound. ``events`` (memory.project's rows) gets per call ``(call,
    name, outputs, transient, live after, peak during)``."""
    owner = {n: (n if m.holds else m.base) for n, m in enumerate(meta)}
    end: dict[int, int] = {}  # owner -> the call after which its buffer is dead
    kept = set(protected)
    for n, j in last.items():
        o = owner.get(n)
        if o is None:
            continue
        if n in protected:
            kept.add(o)
        end[o] = max(end.get(o, j), j)
    frees: dict[int, int] = {}
    for o, j in end.items():
        if o not in kept:
            frees[j] = frees.get(j, 0) + meta[o].nbytes
    current = sum(meta[n].nbytes for n in set(held))
    peak = current
    for j, c in enumerate(steps):
        new = 0 if c.mutates is not None else sum(meta[n].nbytes for n in c.writes)
        peak = max(peak, current + new + c.transient + CALL_SLACK)
        if events is not None:
            outs = [
                (
                    meta[n].shape,
                    np.dtype(meta[n].dtype).name,
                    0 if c.mutates is not None else meta[n].nbytes,
                )
                for n in c.writes
            ]
            events.append(
                (
                    c,
                    c.name,
                    outs,
                    c.transient + CALL_SLACK,
                    current + new - frees.get(j, 0),
                    current + new + c.transient + CALL_SLACK,
                )
            )
        current += new - frees.get(j, 0)
    # (two allowances an output: a replay's arrays are plain, with no tape, tangent nor batch)
    return peak + _overhead(sum(2 * max(1, len(c.writes)) for c in steps))


def inplace_reuse(
    meta: list[Meta], steps: list[Call], last: dict[int, int], protected: set[int], backend: Any
) -> dict[int, Reuse]:
    """The steps whose result may go into a dead operand's buffer (the replay checks that
    nothing else holds it): on backends that write in place safely (``owns_buffer``)."""
    if backend.owns_buffer is None:
        return {}
    found = {}
    for j, c in enumerate(steps):
        if type(c) is RowCall and not c.kwargs:
            r = _reuse(c, j, meta, last, protected, backend)
            if r is not None:
                found[j] = r
    return found


def _reuse(
    c: RowCall, j: int, meta: list[Meta], last: dict[int, int], protected: set[int], backend: Any
) -> Reuse | None:
    prim = c.prim
    if type(c.outs) is not Sym:
        return None
    out = meta[c.outs.n]
    if out.dtype.itemsize * size(out.shape) < ELIDE_MIN_BYTES:
        return None

    def dead_operand(a: Any) -> int | None:
        if type(a) is not Sym or a.n in protected or last.get(a.n) != j:
            return None
        m = meta[a.n]
        return a.n if m.owns and m.shape == out.shape and m.dtype == out.dtype else None

    if prim.kind == "binary" and prim in _INPLACE:
        x1, x2 = c.args
        n = dead_operand(x1)
        if n is None and prim in _COMMUTATIVE:
            n = dead_operand(x2)
            x1, x2 = x2, x1
        if n is not None:
            return Reuse("operator", n, _INPLACE[prim], (x2,))
    if prim.kind == "binary" and backend.takes_out is not None and len(c.args) == 2:
        # any other binary row, or the second operand dead (1 / e, minimum(u, bound)): the
        # backend's function with out= either operand's buffer
        f = row_function(prim, backend)
        n = dead_operand(c.args[0])
        if n is None:
            n = dead_operand(c.args[1])
        if n is None or not backend.takes_out(f):
            return None
        return Reuse("out", n, f, tuple(c.args))
    if prim is WHERE and backend.select is not None and len(c.args) == 3 and not c.kwargs:
        # where(c, x, 0) into x's dead buffer (a VJP's mask: relu's), as the eager rule writes
        # an owned cotangent; the select capability takes out= (NumPy's blend, in place)
        cond, x1, x2 = c.args
        n = dead_operand(x1)
        if n is None or not _zero_bits(x2):
            return None
        return Reuse("select", n, backend.select, (cond, x2))
    if prim.kind == "unary" and backend.takes_out is not None:
        f = c.function(backend)
        if not backend.takes_out(f):
            return None
        n = dead_operand(c.args[0])
        if n is None:
            return None
        return Reuse("out", n, f)
    return None


def _args_of(c: Call) -> tuple:
    """A step's arguments, list arguments' members among them (concat's, stack's)."""
    args = getattr(c, "args", ())
    return tuple(a for v in args for a in (v if isinstance(v, list | tuple) else (v,)))


def _constant_array(a: Any) -> bool:
    """Whether a step's argument is an array the trace closed over (a constant, no symbol)."""
    return type(a) is not Sym and getattr(a, "ndim", 0) > 0


def into_views(
    meta: list[Meta], steps: list[Call], last: dict[int, int], protected: set[int], backend: Any
) -> dict[int, tuple[Any, int, Any]]:
    """The elementwise steps whose result is only copied into a view of another buffer
    (``t = f(a, b); ...; buf[idx] = t``): written there directly (``f(a, b, out=buf[idx])``,
    the copy's step skipped), on backends whose functions take ``out=``. Step -> (the
    function, the copy's step, its index template). Only where the index is basic (the
    view is the buffer's memory, never a copy), the result fills the view exactly (its shape
    and dtype), no operand lives in the buffer written (no overlap, whatever the backend), and
    no step between the two touches that buffer (nothing reads the region early)."""
    if backend.takes_out is None:
        return {}

    def owner(n: int) -> int:
        m = meta[n]
        return n if m.holds or m.base is None else m.base

    born: dict[int, int] = {}  # symbol -> the step that makes it
    sliced: dict[int, tuple[int, Any]] = {}  # a basic index's view -> (its array, the index)
    for j, c in enumerate(steps):
        for n in c.writes:
            born.setdefault(n, j)
        if type(c) is RowCall and c.prim is GETITEM and type(c.outs) is Sym:
            a, idx = c.args
            if type(a) is Sym and _view_shape(meta[a.n].shape, idx) is not None:
                sliced[c.outs.n] = (a.n, idx)
    select = backend.select
    found: dict[int, tuple[Any, int, Any]] = {}
    for j, c in enumerate(steps):
        if (
            type(c) is not RowCall
            or c.mutates is not None
            or c.kwargs
            or type(c.outs) is not Sym
            or not (
                c.prim.kind in ("unary", "binary")
                or (c.prim is WHERE and select is not None and len(c.args) == 3)
            )
        ):
            continue
        v = c.outs.n
        out = meta[v]
        k = last.get(v)
        if v in protected or not out.owns or not out.shape or k is None or k <= j:
            continue
        s = steps[k]
        if not (isinstance(s, RowCall) and s.prim is SETITEM and len(s.args) == 3):
            continue
        target, idx, value = s.args
        if type(target) is not Sym or type(value) is not Sym or value.n != v:
            continue
        buf = owner(target.n)
        if born.get(target.n, -1) >= j or meta[target.n].dtype != out.dtype:
            continue
        if _view_shape(meta[target.n].shape, idx) != tuple(out.shape):
            continue
        # an operand in the buffer written only where it is that very view (an elementwise
        # function reads each element before it writes it); for the select capability only
        # its first branch, the written array itself (NumPy's blend writes in place only then)
        if c.prim is WHERE:  # (where(c, out, 0) in place: the capability's one overlap)
            same = {target.n} if whole_index(idx) and _zero_bits(c.args[2]) else set()
            if any(owner(n) == buf for n in c.reads if n not in same) or any(
                type(a) is Sym and a.n in same for a in (c.args[0], c.args[2])
            ):
                continue
        elif any(
            owner(n) == buf
            and not (n == target.n and whole_index(idx))
            and sliced.get(n, (None, None)) != (target.n, idx)
            for n in c.reads
        ):
            continue
        if any(
            owner(n) == buf or n == v
            for i in range(j + 1, k)
            for n in (*steps[i].reads, *steps[i].writes)
        ):
            continue
        if any(_constant_array(a) for i in range(j + 1, k) for a in _args_of(steps[i])):
            continue  # a closed-over array read between: it may be a view of the buffer
        f = row_function(c.prim, backend)
        if f is select or backend.takes_out(f):
            found[j] = (f, k, idx)
    return found


def _view_shape(shape: tuple[int, ...], idx: Any) -> tuple[int, ...] | None:
    """The shape of ``a[idx]`` for an array ``a`` of ``shape`` where ``idx`` is a basic index of
    constants (integers, slices of integers, ``...``, None): a view; else None."""
    parts = idx if type(idx) is tuple else (idx,)
    for p in parts:
        t = type(p)
        if t is slice:
            if any(q is not None and type(q) is not int for q in (p.start, p.stop, p.step)):
                return None
        elif not (t is int or p is Ellipsis or p is None):
            return None
    try:
        return tuple(np.broadcast_to(np.empty((), np.int8), shape)[idx].shape)
    except (IndexError, TypeError, ValueError):
        return None


def schedule(
    calls: list[Call],
    meta: list[Meta],
    rewraps: Any,
    host_list: list[HostScalar],
    hosts: dict[int, int],
    inputs: list[int],
    outputs: list[Any],
    backend: Any,
    events: list | None = None,
) -> tuple[Schedule, int]:
    """The passes in order over a trace's ``calls``: the schedule, and its projected peak."""
    calls = drop_idle_claims(calls, meta)
    live, needed_hosts = eliminate_dead_code(calls, outputs, host_list, hosts)
    protected_outs = {t.n for t in outputs if type(t) is Sym}
    folded = fold_constants(meta, rewraps, live, set(inputs), protected_outs, backend)
    live = [c for c in live if not (c.writes and all(n in folded for n in c.writes))]
    last = liveness(live)
    # the folded constants live as long as the replay: never freed, never written in place
    protected = set(inputs) | protected_outs | set(folded)
    peak = projected_peak(meta, live, last, [*inputs, *folded], protected, events)
    views = into_views(meta, live, last, protected, backend)  # before reuse: it wins
    reuse = inplace_reuse(meta, live, last, protected, backend)
    for j in views:
        reuse.pop(j, None)
    return Schedule(
        meta, inputs, live, needed_hosts, folded, last, protected, reuse, outputs, views
    ), peak
