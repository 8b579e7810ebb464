"""Code generation: a schedule (:class:`._ir.Schedule`) as the source of one Python function
(like ``namedtuple``'s), one line per backend call, and the function that rebuilds the output
tree. The package's only ``exec``."""

from __future__ import annotations

import builtins
import itertools
import linecache
import sys
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from .._host import HostScalar
from .._primitive import REGISTRY
from ..namespace._capabilities import _owns_buffer
from ._ir import Call, Host, OwnCall, Reuse, RowCall, Schedule, Sym, whole_index


def _probe_refcount() -> int:
    # What sys.getrefcount reports for an object held by one local variable only (it differs
    # between Python versions), measured the way generated code asks.
    ns: dict[str, Any] = {"rc": sys.getrefcount}
    exec("def probe():\n    t = [0]\n    return rc(t)\n", ns)
    return ns["probe"]()


_SOLE = _probe_refcount()
_FILES = itertools.count()  # each replay function's source gets its own name for tracebacks


class _Source:
    """Builds the replay function's source text and its globals."""

    def __init__(self, backend: Any) -> None:
        self.globals: dict[str, Any] = {}
        self.by_id: dict[int, str] = {}
        self.xp = backend.xp

    def const(self, v: Any) -> str:
        t = type(v)
        if v is None or t is bool or t is int or t is str:
            return repr(v)
        if t is float and np.isfinite(v):
            return repr(v)
        if v is Ellipsis:
            return "..."
        if t is tuple:
            return "(" + "".join(self.const(e) + ", " for e in v) + ")"
        if t is list:
            return "[" + ", ".join(self.const(e) for e in v) + "]"
        if t is Sym:
            return f"t{v.n}"
        if t is Host:
            return f"h{v.n}"
        if isinstance(v, np.dtype):  # the abstract backend's dtypes are NumPy's
            return self.bind(getattr(self.xp, v.name), "k")
        return self.bind(v, "k")

    def bind(self, v: Any, prefix: str) -> str:
        name = self.by_id.get(id(v))
        if name is None:
            name = self.by_id[id(v)] = f"{prefix}{len(self.by_id)}"
            self.globals[name] = v
        return name


def generate(
    sched: Schedule,
    params: list[str],
    host_list: list[HostScalar],
    hosts: dict[int, int],
    rewraps: Callable[[int], bool],
    backend: Any,
) -> tuple[Callable[..., Any], str]:
    """The replay function of ``sched`` taking ``params`` (``t<n>`` for the array arguments'
    symbols, ``h<n>`` for the dynamic numbers' host expressions), and its source.
    ``host_list``/``hosts``: the recorder's host expressions; ``rewraps(n)``: whether the
    replay wraps symbol ``n``'s result back into a 0-d array."""
    src = _Source(backend)
    src.globals["_rc"] = sys.getrefcount
    lines = [f"def replay({', '.join(params)}):"]
    folded = sched.folded
    for n in sorted({n for c in sched.steps for n in c.reads if n in folded}):  # bound once
        lines.append(f"    t{n} = {src.bind(folded[n], 'c')}")
    for n, h in enumerate(host_list):  # the host expressions, in order
        if h.op is not None and n in sched.hosts:
            args = ", ".join(
                src.const(Host(hosts[id(a)]) if isinstance(a, HostScalar) else a) for a in h.args
            )
            lines.append(f"    h{n} = {src.bind(h.op, 'op')}({args})")
    # NumPy hands back a scalar from a 0-d operation. Uncompiled, our namespace wraps it back
    # into a 0-d array (a rule's raw operations keep it a scalar); the next operation then runs
    # NumPy's ufunc loop, not its scalar arithmetic, whose complex products round differently.
    # The replay wraps exactly what the namespace wrapped.
    to_array = (
        src.bind(backend.scalar_to_array, "a") if backend.scalar_to_array is not None else None
    )
    skipped = sched.skipped()
    names: dict[int, str] = {}  # a line of the source -> the name of the row its call runs
    for j, c in enumerate(sched.steps):
        names[len(lines) + 1] = c.name
        if j in skipped:  # its value's step wrote it (into_views)
            dead = sched.freed(j)
            if dead:
                lines.append("    del " + ", ".join(f"t{n}" for n in dead))
            continue
        if j in sched.views:
            fv, k, idx = sched.views[j]
            target = src.const(sched.steps[k].args[0])
            view = target if whole_index(idx) else f"{target}[{src.const(idx)}]"
            args = ", ".join(src.const(a) for a in c.args)
            lines.append(f"    {_lhs(c.outs)} = {src.bind(fv, 'f')}({args}, out={view})")
            dead = sched.freed(j)
            if dead:
                lines.append("    del " + ", ".join(f"t{n}" for n in dead))
            continue
        if type(c) is OwnCall:  # the buffer the trace handed a VJP as its own: check, or copy
            n = c.args[0].n
            lines.append(
                f"    t{n} = t{n} if _rc(t{n}) == {_SOLE} and {_owns(n, src, backend)} else "
                f"{src.bind(c.function(backend), 'f')}(t{n})"
            )
            continue
        f = src.bind(c.function(backend), "f")
        args = ", ".join(src.const(a) for a in c.args)
        kw = "".join(f", {k}={src.const(v)}" for k, v in _replayed_kwargs(c).items())
        call = f"{f}({args}{kw})" if args else f"{f}({kw[2:]})"
        if to_array is not None and type(c.outs) is Sym and rewraps(c.outs.n):
            call = f"{to_array}({call})"
        lhs = _lhs(c.outs)
        line = f"    {lhs} = {call}" if lhs else f"    {call}"
        r = sched.reuse.get(j)
        if r is not None:
            line = f"    {lhs} = {_guarded(r, src, backend)} else {call}"
        lines.append(line)
        dead = sched.freed(j)
        if dead:
            lines.append("    del " + ", ".join(f"t{n}" for n in dead))
    lines.append("    return (" + "".join(src.const(t) + ", " for t in sched.outputs) + ")")
    source = "\n".join(lines) + "\n"
    glb = src.globals
    filename = f"<pycograd_xp.compile replay {next(_FILES)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(builtins.compile(source, filename, "exec"), glb)
    replay = glb["replay"]
    replay.step_names = names  # (the errors of a replay name their row: _compile.replay_error)
    weakref.finalize(replay, linecache.cache.pop, filename, None)  # evicted: source goes too
    return replay, source


_RESHAPE = REGISTRY["reshape"]


def _replayed_kwargs(c: Call) -> dict:
    """The keywords the replay passes: the trace's, but a reshape the trace made without a copy
    (``copy=False``) replays with ``copy=None``. The trace decided it could be a view from its
    model of the layouts (the abstract backend's flags), and a rule that tried it (a linear
    layer's folded product) took that branch; where the real layout differs the replay then
    copies (the same values) rather than raising where the function itself would not."""
    if c.kwargs.get("copy") is False and type(c) is RowCall and c.prim is _RESHAPE:
        return {**c.kwargs, "copy": None}
    return c.kwargs


def _owns(n: int, src: _Source, backend: Any) -> str:
    """The test that ``t<n>`` owns its buffer: ``t<n>.base is None`` inline where that is the
    backend's own test (NumPy's: no Python call per step), else its ``owns_buffer``."""
    if backend.owns_buffer is _owns_buffer:
        return f"t{n}.base is None"
    return f"{src.bind(backend.owns_buffer, 'own')}(t{n})"


def _guarded(r: Reuse, src: _Source, backend: Any) -> str:
    """The in-place form of a step (``result if the buffer is free``, before ``else``)."""
    n = r.into
    free = f"_rc(t{n}) == {_SOLE} and {_owns(n, src, backend)}"
    if r.how == "operator":
        iop = src.bind(r.f, "op")
        return f"{iop}(t{n}, {src.const(r.others[0])}) if {free}"
    if r.how == "select":
        sel = src.bind(r.f, "f")
        cond, x2 = r.others
        return f"{sel}({src.const(cond)}, t{n}, {src.const(x2)}, out=t{n}) if {free}"
    args = ", ".join(src.const(a) for a in r.others) if r.others else f"t{n}"
    return f"{src.bind(r.f, 'f')}({args}, out=t{n}) if {free}"


def _lhs(outs: Any) -> str:
    if type(outs) is Sym:
        return f"t{outs.n}"
    if isinstance(outs, tuple):
        return ", ".join(f"t{o.n}" if o is not None else "_" for o in outs) + ","
    return ""


def rebuilder(td: Any) -> Callable[[list], Any]:
    """A function rebuilding a tree of structure ``td`` from its leaves, generated once."""
    glb: dict[str, Any] = {}
    counter = itertools.count()

    def bind(v: Any) -> str:
        name = f"k{len(glb)}"
        glb[name] = v
        return name

    def expr(d: Any) -> str:
        if d.kind == "leaf":
            return f"L[{next(counter)}]"
        if d.kind == "none":
            return "None"
        kids = [expr(c) for c in d.children]
        if d.kind == "tuple":
            return "(" + "".join(k + ", " for k in kids) + ")"
        if d.kind == "list":
            return "[" + ", ".join(kids) + "]"
        if d.kind == "namedtuple":
            return f"{bind(d.meta)}({', '.join(kids)})"
        if d.kind == "dict":
            return (
                "{" + ", ".join(f"{bind(k)}: {v}" for k, v in zip(d.meta, kids, strict=True)) + "}"
            )
        cls, names, statics = d.meta
        fields = ", ".join(f"{n}={v}" for n, v in zip(names, kids, strict=True))
        return f"{bind(cls)}({fields}{''.join(f', {n}={bind(v)}' for n, v in statics)})"

    exec(f"def rebuild(L):\n    return {expr(td)}\n", glb)
    return glb["rebuild"]
