"""The trace's IR: references to earlier results, array metadata, one typed record per backend
call, and the :class:`Schedule` the passes make of them (printable: one line per step).

A call's ``args`` and ``kwargs`` are templates: constants, :class:`Sym` (an earlier result),
:class:`Host` (a Python number computed at each call), and tuples or lists of them. Each kind of
call knows its name and the backend function its replay runs (:meth:`Call.function`).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._primitive import REGISTRY


class Sym:
    """A reference, in a recorded call's arguments, to an earlier result (symbol ``n``)."""

    __slots__ = ("n",)

    def __init__(self, n: int) -> None:
        self.n = n

    def __repr__(self) -> str:
        return f"t{self.n}"


class Host:
    """A reference to a host expression (a Python number computed at each call)."""

    __slots__ = ("n",)

    def __init__(self, n: int) -> None:
        self.n = n

    def __repr__(self) -> str:
        return f"h{self.n}"


def size(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


@dataclass
class Meta:
    """What a trace knows of one symbol's array."""

    shape: tuple[int, ...]
    dtype: Any
    owns: bool  # owns its memory (not a view)
    base: int | None = None  # a view's base symbol (None: owns its memory, or unknown)
    # a view of a fresh array its call made and returned only through it (descending sort's
    # flipped copy): the view holds that array's bytes, alive as long as the view
    hidden: int = 0

    @property
    def nbytes(self) -> int:
        if self.owns:
            return size(self.shape) * np.dtype(self.dtype).itemsize
        return self.hidden

    @property
    def holds(self) -> bool:
        """Whether the symbol holds a buffer of its own (owns it, or a hidden base's)."""
        return self.owns or self.hidden > 0

    def __str__(self) -> str:
        return f"{np.dtype(self.dtype).name}[{','.join(map(str, self.shape))}]"


@dataclass(eq=False, kw_only=True)
class Call:
    """One recorded backend call."""

    args: tuple  # templates
    kwargs: dict
    outs: Any  # Sym, a tuple of Sym (None for a non-array output), or None
    mutates: int | None = None  # the symbol whose buffer the call writes in place
    reads: list[int] = field(default_factory=list)
    writes: list[int] = field(default_factory=list)
    transient: int = 0  # bytes the call allocates beyond its outputs (the row's memory rule)

    @property
    def name(self) -> str:
        raise NotImplementedError

    def function(self, backend: Any) -> Callable[..., Any]:
        """The function the replay calls on ``backend``'s arrays."""
        raise NotImplementedError


@dataclass(eq=False, kw_only=True)
class RowCall(Call):
    """A row's function (``via``: the Python operator that made the call, which the replay then
    uses too: NumPy's 0-d results are scalars, whose operators use their own arithmetic)."""

    prim: Any
    via: Callable[..., Any] | None = None

    @property
    def name(self) -> str:
        return self.prim.name

    def function(self, backend: Any) -> Callable[..., Any]:
        return self.via if self.via is not None else row_function(self.prim, backend)


# The in-place Python operator of each row an in-place operator (``x += y``) records.
_OPERATOR_INPLACE = {
    REGISTRY[name]: op
    for name, op in (
        ("add", operator.iadd),
        ("subtract", operator.isub),
        ("multiply", operator.imul),
        ("divide", operator.itruediv),
        ("floor_divide", operator.ifloordiv),
        ("remainder", operator.imod),
        ("pow", operator.ipow),
        ("bitwise_and", operator.iand),
        ("bitwise_or", operator.ior),
        ("bitwise_xor", operator.ixor),
        ("bitwise_left_shift", operator.ilshift),
        ("bitwise_right_shift", operator.irshift),
    )
}


@dataclass(eq=False, kw_only=True)
class InplaceCall(Call):
    """``x op= other``: a write into ``x``'s buffer."""

    prim: Any

    @property
    def name(self) -> str:
        return self.prim.name

    def function(self, backend: Any) -> Callable[..., Any]:
        return _OPERATOR_INPLACE[self.prim]


@dataclass(eq=False, kw_only=True)
class IndexAddCall(Call):
    """``index_add(size, flat_index, values)``: a scatter-add into a fresh flat array."""

    @property
    def name(self) -> str:
        return "index_add"

    def function(self, backend: Any) -> Callable[..., Any]:
        if backend.index_add is not None:
            return backend.index_add
        from ..ops._rules.vjp import index_add

        return functools.partial(index_add, backend.xp)


def _matmul_into(matmul: Callable[..., Any], x1: Any, x2: Any, out: Any) -> Any:
    out[...] = matmul(x1, x2)  # a backend with no matmul_into capability: a product, a write
    return out


@dataclass(eq=False, kw_only=True)
class MatmulIntoCall(Call):
    """``matmul_into(x1, x2, out)``: a product written into a view of a buffer."""

    @property
    def name(self) -> str:
        return "matmul_into"

    def function(self, backend: Any) -> Callable[..., Any]:
        if backend.matmul_into is not None:
            return backend.matmul_into
        return functools.partial(_matmul_into, backend.xp.matmul)


@dataclass(eq=False, kw_only=True)
class OwnCall(Call):
    """A cotangent the trace handed a VJP as its own to write into (``owned``): the replay
    makes sure its buffer is its own and unshared, as the tape checked on the abstract array,
    or copies it first (``t = t if only t holds its buffer else copy(t)``). Kept only where a
    write into that buffer follows (:func:`._passes.drop_idle_claims`); its ``transient`` is
    the copy's bytes."""

    @property
    def name(self) -> str:
        return "own"

    def function(self, backend: Any) -> Callable[..., Any]:
        return functools.partial(backend.xp.asarray, copy=True)


def _host_array(asarray: Callable[..., Any], fn: Callable[..., Any], dtype: Any, *args: Any) -> Any:
    return asarray(fn(*args), dtype=dtype)


@dataclass(eq=False, kw_only=True)
class HostArrayCall(Call):
    """``asarray(fn(*args), dtype=dtype)``: an array made on the host from host numbers."""

    fn: Callable[..., Any]
    dtype: Any

    @property
    def name(self) -> str:
        return "host_array"

    def function(self, backend: Any) -> Callable[..., Any]:
        return functools.partial(_host_array, backend.xp.asarray, self.fn, self.dtype)


GETITEM, SETITEM, WHERE = REGISTRY["__getitem__"], REGISTRY["__setitem__"], REGISTRY["where"]


def row_function(prim: Any, backend: Any) -> Callable[..., Any]:
    """The backend's own function for row ``prim``."""
    if prim is GETITEM:
        return operator.getitem
    if prim is SETITEM:
        return operator.setitem
    if prim is WHERE and backend.select is not None:  # the same values, faster
        return backend.select
    mod = getattr(backend.xp, prim.scope) if prim.scope else backend.xp
    f = getattr(mod, prim.short_name, None)
    if f is None and prim.impl is not None:  # a row beyond the standard (conv2d): its impl
        return functools.partial(prim.impl, backend.xp)
    if f is None:
        raise NotImplementedError(f"compile: the {backend.name} backend has no {prim.name}")
    return f


def whole_index(idx: Any) -> bool:
    """Whether a basic index is ``...``, the whole array (a replay writing into that view
    passes the array itself as ``out=``)."""
    return idx is Ellipsis or (type(idx) is tuple and len(idx) == 1 and idx[0] is Ellipsis)


def syms(outs: Any) -> list[int]:
    """The symbols among a call's outputs."""
    if type(outs) is Sym:
        return [outs.n]
    if isinstance(outs, tuple):
        return [o.n for o in outs if o is not None]
    return []


def collect_hosts(v: Any, into: set[int]) -> None:
    """Add the host expressions a template reads to ``into``."""
    t = type(v)
    if t is Host:
        into.add(v.n)
    elif t is tuple or t is list:
        for e in v:
            collect_hosts(e, into)
    elif t is dict:
        for e in v.values():
            collect_hosts(e, into)


@dataclass(frozen=True)
class Reuse:
    """Step ``j`` of a schedule written into the buffer of its dead operand ``into`` when
    nothing else holds it (the replay checks), by ``how``: ``"operator"`` (``op(t, other)``,
    an in-place operator), ``"select"`` (``select(cond, t, other, out=t)``) or ``"out"``
    (``f(t, out=t)``; with ``others``, the call's operands: ``f(a, b, out=t)``)."""

    how: str
    into: int
    f: Callable[..., Any]
    others: tuple = ()  # the templates beside the operand


@dataclass
class Schedule:
    """The calls a replay makes, in order, with what the passes decided about them."""

    meta: list[Meta]
    inputs: list[int]  # the array arguments' symbols
    steps: list[Call]  # after dead code elimination and constant folding
    hosts: set[int]  # the host expressions the steps and outputs need
    folded: dict[int, Any]  # symbols computed once, when the replay is generated
    last: dict[int, int]  # symbol -> the step that uses it last (liveness)
    protected: set[int]  # never freed, never written in place: inputs, outputs, folded
    reuse: dict[int, Reuse]  # step -> the dead operand's buffer it may be written into
    outputs: list[Any]  # templates of the results
    # step -> (its function, the step copying its result into a view, that view's index): the
    # result written into the view directly, the copy skipped (_passes.into_views)
    views: dict[int, tuple[Any, int, Any]] = field(default_factory=dict)

    def skipped(self) -> set[int]:
        """The copies a step's ``out=`` made unnecessary."""
        return {k for _, k, _ in self.views.values()}

    def freed(self, j: int) -> list[int]:
        """The symbols whose last use is step ``j`` (the replay's ``del`` after it)."""
        c = self.steps[j]
        return sorted(
            {n for n in (*c.reads, *c.writes) if self.last.get(n) == j and n not in self.protected}
        )

    def __str__(self) -> str:
        lines = ["in: " + ", ".join(f"t{n}: {self.meta[n]}" for n in self.inputs)]
        for n in sorted({n for c in self.steps for n in c.reads if n in self.folded}):
            lines.append(f"  const t{n}: {self.meta[n]} (folded)")
        for j, c in enumerate(self.steps):
            outs = ", ".join(f"t{n}: {self.meta[n]}" for n in syms(c.outs))
            args = ", ".join(
                [show(a) for a in c.args] + [f"{k}={show(v)}" for k, v in c.kwargs.items()]
            )
            line = f"{j:4d}  {outs + ' = ' if outs else ''}{c.name}({args})"
            if c.mutates is not None:
                line += f"  [writes t{c.mutates}]"
            r = self.reuse.get(j)
            if r is not None:
                line += f"  [into t{r.into} if free]"
            if j in self.views:
                k = self.views[j][1]
                line += f"  [into {show(self.steps[k].args[0])}[{show(self.steps[k].args[1])}]]"
            elif j in self.skipped():
                line += "  [written by its value's step]"
            dead = self.freed(j)
            if dead:
                line += "  free " + ", ".join(f"t{n}" for n in dead)
            lines.append(line)
        lines.append("out: " + ", ".join(show(t) for t in self.outputs))
        return "\n".join(lines)


def show(v: Any) -> str:
    """A template as the schedule prints it."""
    t = type(v)
    if t is Sym or t is Host:
        return repr(v)
    if t is tuple:
        return f"({show(v[0])},)" if len(v) == 1 else "(" + ", ".join(show(e) for e in v) + ")"
    if t is slice:
        parts = ["" if p is None else show(p) for p in (v.start, v.stop, v.step)]
        return ":".join(parts[:2] if v.step is None else parts)
    if t is list:
        return "[" + ", ".join(show(e) for e in v) + "]"
    if isinstance(v, np.dtype):
        return v.name
    if hasattr(v, "shape") and hasattr(v, "dtype"):  # an array the function closes over
        return f"<array {np.dtype(str(v.dtype).rsplit('.', 1)[-1]).name}{list(v.shape)}>"
    if v is Ellipsis:
        return "..."
    return repr(v)
