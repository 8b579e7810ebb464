"""``compile``: trace a function once per structure, then replay a flat schedule of backend calls.

The trace runs the function, and everything it calls (``value_and_grad``, the VJP rules, an
optimizer's update), through the real engine on the abstract backend of ``pycograd_xp.memory``:
arrays with a shape and a dtype and no data. Each call that reaches the abstract backend is one
standard function of one row (its shape rule gives the output's shape and dtype), and the
recorder notes it: which function, on which earlier results, with which constants. The result is
the exact sequence of backend calls the engine would make on real arrays of those shapes,
forward pass, backward pass and update, with every Python-level decision (which rule, which
cotangents to sum, which dtype casts) already taken. On a lazy backend (Cubed) the trace runs
on the backend's own lazy arrays instead, behind proxies (``pycograd_xp._proxy``): chunks and
Specs are then decided exactly as uncompiled, and building a lazy array computes nothing.

That sequence becomes the source of one Python function (like ``namedtuple``'s): one line per
backend call, calling the backend's own function directly, with ``del`` at each value's last use
(the liveness the memory model computes, over the order the engine executes), and, on backends
that write in place safely (NumPy, CuPy), elementwise results written into a dead operand's
buffer instead of a fresh one when nothing else holds that buffer. Calls that read no argument
(a loss's seed cotangent) are evaluated once, when the function is generated (constant folding,
:func:`_fold_constants`), and a 0-d result our namespace wraps back into an array (NumPy returns
scalars) is wrapped in the replay too, so the next call runs the same arithmetic. No wrapper
objects, no nodes, no topological sort, no dtype checks run at replay. The memory model projects
the replay's peak over the same schedule (``Trace.peak_bytes``).

Soundness: a trace never sees values. Whatever needs one while tracing (``bool()``/``float()``
of an array, an output shape that depends on data) raises :class:`TracingError` naming it, so a
schedule never bakes in a branch. Python numbers among the arguments stay dynamic
(``pycograd_xp._host``) unless their value is needed, in which case they become part of the
cache key. A function called with tracked arrays (inside ``grad``) runs uncompiled.

Arrays the function closes over are constants the replay reads, not values: on an eager
backend every call of the traced namespace moves to the recording one while tracing
(``REDIRECT.closed``, ``namespace._build.closed_call``), so ``data * 2.0`` on a closed-over
``data`` is recorded and recomputed by each replay from ``data``'s contents then, as the
function would; a write into such an array is refused (the replay could not repeat it). On a
lazy backend arrays never change and nothing needs recording.
"""

from __future__ import annotations

import builtins
import functools
import itertools
import linecache
import operator
import sys
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._abstract import (
    ABSTRACT,
    CALL_SLACK,
    CURRENT,
    DTYPE_NAMES,
    AbstractArray,
    matmul_into_shape,
)
from ._host import HostScalar, ValueNeededError
from ._primitive import REGISTRY
from ._proxy import Proxy, real
from ._tape import MODE, REDIRECT
from .memory._project import _overhead
from .namespace._array import Array, make
from .namespace._backend import _zero_bits
from .ops._rules.shapes import KEEP_VALUES
from .tree import _children, _dict_keys, tree_flatten, tree_unflatten

__all__ = ["Compiled", "TracingError", "compile"]


class TracingError(TypeError):
    """A compiled function needed an array's value (or a data-dependent shape) while tracing."""


# -- the trace ------------------------------------------------------------------------------------


class _Sym:
    """A reference, in a recorded call's arguments, to an earlier result (symbol ``n``)."""

    __slots__ = ("n",)

    def __init__(self, n: int) -> None:
        self.n = n


class _Host:
    """A reference to a host expression (a Python number computed at each call)."""

    __slots__ = ("n",)

    def __init__(self, n: int) -> None:
        self.n = n


@dataclass
class _Call:
    fn: tuple  # ("row", prim) | ("operator", prim, op) | ("inplace", fname) | ("index_add",)
    # | ("matmul_into",) | ("host_array", fn, dtype)
    args: tuple  # templates: _Sym, _Host, constants, tuples/lists of them
    kwargs: dict
    outs: Any  # _Sym, a tuple/list of _Sym (or None for a non-array output), or None
    mutates: int | None = None  # the symbol whose buffer the call writes in place
    reads: list[int] = field(default_factory=list)
    writes: list[int] = field(default_factory=list)
    transient: int = 0  # bytes the call allocates beyond its outputs (the row's memory rule)


@dataclass
class _Meta:
    shape: tuple[int, ...]
    dtype: Any
    owns: bool  # owns its memory (not a view)
    base: int | None = None  # a view's base symbol (None: owns its memory, or unknown)

    @property
    def nbytes(self) -> int:
        return _size(self.shape) * np.dtype(self.dtype).itemsize if self.owns else 0


# ``zeros_like(x)`` and kin read only ``x``'s shape and dtype: recorded as ``zeros(shape, ...)``
# each *_like row and the row that makes the same array from a shape (its replay needs only x's
# shape, so x may be freed earlier)
_FROM_SHAPE = {REGISTRY[f"{kind}_like"]: REGISTRY[kind] for kind in ("zeros", "ones", "empty",
                                                                      "full")}  # fmt: skip


class _Recorder:
    """What the abstract backend reports while ``compile`` traces (see ``memory._abstract``)."""

    def __init__(self, backend: Any) -> None:
        # the target backend's dtype objects (by id: they live as long as its module) as NumPy's
        self.dtypes = {id(getattr(backend.xp, n)): np.dtype(n) for n in DTYPE_NAMES
                       if hasattr(backend.xp, n)}  # fmt: skip
        self.dtypes[0] = type(backend.xp.float64)  # (0 is no object's id)
        self.ex = (self.dtypes, backend.array_type)
        self.chunked = backend.chunked
        self.real_type = backend.array_type  # a lazy backend's arrays (proxied while tracing)
        self.by_real: dict[int, Proxy] = {}
        self.calls: list[_Call] = []
        self.wrapped_syms: set[int] = set()  # results our namespace handed out (see wrapped)
        self.ids: dict[int, int] = {}  # id(AbstractArray) -> symbol
        self.keep: list[Any] = []  # every array seen, alive until the trace ends (ids stay unique)
        self.meta: list[_Meta] = []
        self.hosts: dict[int, int] = {}  # id(HostScalar) -> host expression index
        self.host_list: list[HostScalar] = []

    # symbols
    def new(self, a: AbstractArray) -> int:
        n = len(self.meta)
        self.ids[id(a)] = n
        self.keep.append(a)
        base = getattr(a, "base", None)
        self.meta.append(_Meta(a.shape, a.dtype, base is None,
                               None if base is None else self.ids.get(id(base))))  # fmt: skip
        return n

    def sym(self, a: AbstractArray, where: str) -> int:
        n = self.ids.get(id(a))
        if n is None:
            raise TracingError(
                f"compile: {where} got an array that was made outside the traced calls (an "
                "abstract array from another trace or projection); pass arrays as arguments"
            )
        return n

    def host(self, h: HostScalar) -> int:
        n = self.hosts.get(id(h))
        if n is None:
            for a in h.args:
                if isinstance(a, HostScalar):
                    self.host(a)
            n = self.hosts[id(h)] = len(self.host_list)
            self.host_list.append(h)
        return n

    def template(self, v: Any, where: str, reads: list[int]) -> Any:
        t = type(v)
        if t is AbstractArray or t is Proxy:
            n = self.sym(v, where)
            reads.append(n)
            return _Sym(n)
        if t is HostScalar:
            return _Host(self.host(v))
        if t is tuple or t is list:
            return t(self.template(e, where, reads) for e in v)
        if t is slice and any(type(p) is HostScalar for p in (v.start, v.stop, v.step)):
            raise ValueNeededError(next(p for p in (v.start, v.stop, v.step)
                                        if type(p) is HostScalar), "use in a slice")  # fmt: skip
        return v

    def _outs(self, out: Any) -> Any:
        if type(out) is AbstractArray or type(out) is Proxy:
            return _Sym(self.new(out))
        if isinstance(out, tuple | list) and any(type(o) in _TRACED for o in out):
            return tuple(_Sym(self.new(o)) if type(o) in _TRACED else None for o in out)
        return None

    def call_real(self, prim: Any, fn: Callable[..., Any], mod: Any, args: tuple,
                  kwargs: dict) -> Any:  # fmt: skip
        """A call of the recording namespace over a lazy backend (``pycograd_xp._proxy``): the
        backend's own function on the real arrays, the outputs as proxies."""
        out = fn(*real(args), **real(kwargs))
        wrapped = self._proxies(out, mod)
        name = prim.name
        reads: list[int] = []
        targs = self.template(args, name, reads)
        tkw = {k: self.template(v, name, reads) for k, v in kwargs.items()}
        known = _arrays(wrapped)
        if not known or all(id(o) in self.ids for o in known):
            return wrapped
        outs = self._outs(wrapped)
        self.calls.append(_Call(("row", prim), targs, tkw, outs, None, reads, _syms(outs)))
        return wrapped

    def _proxies(self, out: Any, mod: Any) -> Any:
        t = type(out)
        if t is self.real_type:
            known = self.by_real.get(id(out))
            if known is not None:
                return known
            p = Proxy(out, mod)
            self.by_real[id(out)] = p
            return p
        if isinstance(out, tuple | list) and any(type(o) is self.real_type for o in out):
            items = [self._proxies(o, mod) for o in out]
            return t(*items) if hasattr(out, "_fields") else t(items)
        return out

    # what the abstract backend calls
    def call(self, prim: Any, rule: Callable[..., Any], args: tuple, kwargs: dict,
             via: Callable[..., Any] | None = None) -> Any:  # fmt: skip
        """Record one call of ``prim`` (``via``: the Python operator that made it, which the
        replay then uses too)."""
        ex_args, ex_kwargs = _examples(args, *self.ex), _examples(kwargs, *self.ex)
        out = rule(ABSTRACT, *ex_args, **ex_kwargs)
        transient = int(prim.memory(out, *ex_args, **ex_kwargs)) if prim.memory else 0
        name = prim.name
        reads: list[int] = []
        targs = self.template(args, name, reads)
        tkw = {k: self.template(v, name, reads) for k, v in kwargs.items()}
        if name == "__setitem__":
            target = self.sym(args[0], name)
            self.calls.append(_Call(("row", prim), targs, tkw, None, target, reads))
            return out
        known = _arrays(out)
        if not known or all(id(o) in self.ids for o in known):
            return out  # metadata (a dtype, a bool), or an input returned as it is
        if prim in _FROM_SHAPE and not self.chunked:  # needs x's shape, not x: x may die earlier
            prim, reads = _FROM_SHAPE[prim], []
            targs = (out.shape, *targs[1:])
            tkw = {**tkw, "dtype": out.dtype}
        outs = self._outs(out)
        fn = ("row", prim) if via is None else ("operator", prim, via)
        self.calls.append(_Call(fn, targs, tkw, outs, None, reads, _syms(outs), transient))
        return out

    def inplace(self, fname: str, x: AbstractArray, other: Any) -> AbstractArray:
        REGISTRY[fname].shape(ABSTRACT, x, _examples(other, *self.ex))  # validates them
        reads: list[int] = []
        targs = self.template((x, other), fname, reads)
        n = self.sym(x, fname)
        self.calls.append(_Call(("inplace", fname), targs, {}, _Sym(n), n, reads, [n]))
        return x

    def index_add(self, size: int, flat_index: Any, values: Any) -> AbstractArray:
        out = AbstractArray((size,), values.dtype)
        reads: list[int] = []
        targs = self.template((size, flat_index, values), "index_add", reads)
        outs = self._outs(out)
        self.calls.append(_Call(("index_add",), targs, {}, outs, None, reads, _syms(outs)))
        return out

    def wrapped(self, a: Any) -> None:
        """Our namespace handed out ``a``: uncompiled, a 0-d result of it is a 0-d array (NumPy
        returns a scalar, which the namespace wraps back), so the replay wraps it too."""
        n = self.ids.get(id(a))
        if n is not None:
            self.wrapped_syms.add(n)

    def rewraps(self, n: int) -> bool:
        """Whether the replay wraps symbol ``n`` back into a 0-d array (see wrapped)."""
        return n in self.wrapped_syms and self.meta[n].shape == ()

    def matmul_into(self, x1: AbstractArray, x2: AbstractArray, out: AbstractArray
                    ) -> AbstractArray:  # fmt: skip
        """A product written into ``out`` (a view of a buffer the trace made): replayed as
        the backend's ``matmul_into``, or a product and a write where it has none."""
        if matmul_into_shape(x1, x2) != out.shape:
            raise ValueError(f"matmul_into: the product of {x1.shape} and {x2.shape} is no "
                             f"{out.shape} array")  # fmt: skip
        reads: list[int] = []
        targs = self.template((x1, x2, out), "matmul_into", reads)
        n = self.sym(out, "matmul_into")
        self.calls.append(_Call(("matmul_into",), targs, {}, None, n, reads, [n]))
        return out

    def host_array(self, fn: Callable[..., Any], args: tuple, shape: tuple[int, ...],
                   dtype: Any) -> AbstractArray:  # fmt: skip
        """An array the replay makes on the host from host numbers: ``fn(*args)``, a NumPy
        array, handed to the backend's ``asarray(..., dtype=dtype)`` (random draws)."""
        out = AbstractArray(shape, _np_dtype(dtype))
        reads: list[int] = []
        targs = self.template(args, "a host array", reads)
        outs = self._outs(out)
        self.calls.append(_Call(("host_array", fn, dtype), targs, {}, outs, None, reads,
                                _syms(outs)))  # fmt: skip
        return out

    def data_dependent(self, what: str) -> None:
        raise TracingError(
            f"compile: {what} gives an output whose shape depends on array values, which a "
            "compiled schedule cannot fix in advance; keep shapes static (xp.where(mask, x, 0) "
            "instead of x[mask], a fixed size instead of nonzero/unique), or call this part "
            "outside the compiled function"
        )


_TRACED = (AbstractArray, Proxy)  # the array types a trace runs on


def _arrays(out: Any) -> list[Any]:
    if type(out) in _TRACED:
        return [out]
    if isinstance(out, tuple | list):
        return [o for o in out if type(o) in _TRACED]
    return []


def _syms(outs: Any) -> list[int]:
    if type(outs) is _Sym:
        return [outs.n]
    if isinstance(outs, tuple):
        return [o.n for o in outs if o is not None]
    return []


def _examples(v: Any, dtypes: dict[int, np.dtype], array_type: type) -> Any:
    """``v`` as the shape rules take it: each host scalar replaced by its example (a Python
    number), each dtype of the target backend by NumPy's (the abstract backend's), each array
    of the target backend (a constant the function closes over) by an abstract one."""
    t = type(v)
    if t is HostScalar:
        return v.example
    if t is tuple or t is list:
        return t(_examples(e, dtypes, array_type) for e in v)
    if t is dict:
        return {k: _examples(e, dtypes, array_type) for k, e in v.items()}
    if t is array_type and t is not np.ndarray:
        dtype = _np_dtype(v.dtype)
        try:  # small constants keep their values (a mask's selected count, see constant())
            value = np.asarray(v) if _size(v.shape) <= KEEP_VALUES else None
        except Exception:  # a device array
            value = None
        return AbstractArray(v.shape, dtype, value=value)
    d = dtypes.get(id(v))
    if d is None and t is dtypes.get(0) and t is not type:  # equal, not the module's own
        d = _np_dtype(v)
    return v if d is None else d


# -- the replay: one generated Python function per trace -------------------------------------------

# Elementwise rows with an in-place operator of the standard (the result may go into a dead
# operand's buffer), and the commutative ones (either operand's buffer will do).
_INPLACE = {"add": operator.iadd, "subtract": operator.isub, "multiply": operator.imul,
            "divide": operator.itruediv}  # fmt: skip
_COMMUTATIVE = frozenset({"add", "multiply"})
_OPERATOR_INPLACE = {"add": operator.iadd, "subtract": operator.isub,
                     "multiply": operator.imul, "divide": operator.itruediv,
                     "floor_divide": operator.ifloordiv, "remainder": operator.imod,
                     "pow": operator.ipow, "bitwise_and": operator.iand,
                     "bitwise_or": operator.ior, "bitwise_xor": operator.ixor,
                     "bitwise_left_shift": operator.ilshift,
                     "bitwise_right_shift": operator.irshift}  # fmt: skip
# Results at least this large are written into a dead operand's buffer (smaller ones gain
# nothing: the check would cost more than the allocation it saves).
ELIDE_MIN_BYTES = 8 * 1024


def _matmul_into(matmul: Callable[..., Any], x1: Any, x2: Any, out: Any) -> Any:
    out[...] = matmul(x1, x2)  # a backend with no matmul_into capability: a product, a write
    return out


def _probe_refcount() -> int:
    # What sys.getrefcount reports for an object held by one local variable only (it differs
    # between Python versions), measured the way generated code asks.
    ns: dict[str, Any] = {"rc": sys.getrefcount}
    exec("def probe():\n    t = [0]\n    return rc(t)\n", ns)  # noqa: S102
    return ns["probe"]()


_SOLE = _probe_refcount()
_FILES = itertools.count()  # each replay function's source gets its own name for tracebacks


def _backend_function(fn: tuple, backend: Any) -> Callable[..., Any]:
    kind = fn[0]
    if kind == "operator":
        return fn[2]
    if kind == "inplace":
        return _OPERATOR_INPLACE[fn[1]]
    if kind == "host_array":
        return functools.partial(_host_array, backend.xp.asarray, fn[1], fn[2])
    if kind == "matmul_into":
        if backend.matmul_into is not None:
            return backend.matmul_into
        return functools.partial(_matmul_into, backend.xp.matmul)
    if kind == "index_add":
        if backend.index_add is not None:
            return backend.index_add
        from .ops._rules.vjp import index_add

        return functools.partial(index_add, backend.xp)
    prim = fn[1]
    if prim.name == "__getitem__":
        return operator.getitem
    if prim.name == "__setitem__":
        return operator.setitem
    if prim.name == "where" and backend.select is not None:  # the same values, faster
        return backend.select
    mod = getattr(backend.xp, prim.scope) if prim.scope else backend.xp
    f = getattr(mod, prim.short_name, None)
    if f is None and prim.impl is not None:  # a row beyond the standard (conv2d): its impl
        return functools.partial(prim.impl, backend.xp)
    if f is None:
        raise NotImplementedError(f"compile: the {backend.name} backend has no {prim.name}")
    return f


def _host_array(asarray: Callable[..., Any], fn: Callable[..., Any], dtype: Any,
                *args: Any) -> Any:  # fmt: skip
    return asarray(fn(*args), dtype=dtype)


def host_array(fn: Callable[..., Any], args: tuple, shape: tuple[int, ...], dtype: Any) -> Any:
    """While ``compile`` traces: an array of the abstract namespace that each replay makes as
    ``asarray(fn(*args), dtype=dtype)`` from the host numbers ``args`` (host scalars and
    constants); ``fn`` returns a NumPy array of ``shape``. How ``pycograd_xp.random`` draws
    from a key that is an argument of the compiled function."""
    from .memory._project import abstract_namespace

    rec = CURRENT.recorder
    if rec is None:
        raise RuntimeError("host_array: only while pycograd_xp.compile traces")
    if rec.by_real is not None and rec.chunked:
        raise NotImplementedError(
            "compile on a chunked backend: a random key among the arguments (draws made on the "
            "host for each call) is not supported; pass the key as a static argument "
            "(static_argnums) or draw outside the compiled function"
        )
    return make(abstract_namespace().Array, rec.host_array(fn, args, shape, dtype))


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
        if t is _Sym:
            return f"t{v.n}"
        if t is _Host:
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


def _generate(rec: _Recorder, inputs: list[int], host_inputs: list[HostScalar],
              out_templates: list[Any], backend: Any,
              events: list | None = None) -> tuple[Callable, str, int, int, int]:  # fmt: skip
    calls = rec.calls
    needed: set[int] = {t.n for t in out_templates if type(t) is _Sym}
    needed_hosts: set[int] = {t.n for t in out_templates if type(t) is _Host}
    keep = [False] * len(calls)
    for j in range(len(calls) - 1, -1, -1):  # dead code: calls none of whose results is used
        c = calls[j]
        if c.mutates is not None or any(w in needed for w in c.writes):
            keep[j] = True
            needed.update(c.reads)
            _collect_hosts((c.args, c.kwargs), needed_hosts)
    live = [c for c, k in zip(calls, keep, strict=True) if k]
    for n in range(len(rec.host_list) - 1, -1, -1):  # and what those host numbers need
        if n in needed_hosts:
            needed_hosts.update(rec.hosts[id(a)] for a in rec.host_list[n].args
                                if isinstance(a, HostScalar))  # fmt: skip
    protected_outs = {t.n for t in out_templates if type(t) is _Sym}
    folded = _fold_constants(rec, live, set(inputs), protected_outs, backend)
    live = [c for c in live if not (c.writes and all(n in folded for n in c.writes))]
    last: dict[int, int] = {}
    for j, c in enumerate(live):
        for n in c.reads:
            last[n] = j
        for n in c.writes:
            last.setdefault(n, j)
            last[n] = max(last[n], j)
    # the folded constants live as long as the replay: never freed, never written in place
    protected = set(inputs) | protected_outs | set(folded)
    peak = _projected_peak(rec, live, last, [*inputs, *folded], protected, events)
    src = _Source(backend)
    src.globals["_rc"] = sys.getrefcount
    params = [f"t{n}" for n in inputs] + [f"h{rec.hosts[id(h)]}" for h in host_inputs]
    lines = [f"def replay({', '.join(params)}):"]
    for n in sorted({n for c in live for n in c.reads if n in folded}):  # constants, bound once
        lines.append(f"    t{n} = {src.bind(folded[n], 'c')}")
    for n, h in enumerate(rec.host_list):  # the host expressions, in order
        if h.op is not None and n in needed_hosts:
            args = ", ".join(src.const(_Host(rec.hosts[id(a)]) if isinstance(a, HostScalar) else a)
                             for a in h.args)  # fmt: skip
            lines.append(f"    h{n} = {src.bind(h.op, 'op')}({args})")
    elide = backend.owns_buffer is not None
    # NumPy hands back a scalar from a 0-d operation. Uncompiled, our namespace wraps it back
    # into a 0-d array (a rule's raw operations keep it a scalar); the next operation then runs
    # NumPy's ufunc loop, not its scalar arithmetic, whose complex products round differently
    # (measured: up to 4 ulp). The replay wraps exactly what the namespace wrapped.
    to_array = (src.bind(backend.scalar_to_array, "a")
                if backend.scalar_to_array is not None else None)  # fmt: skip
    elided = 0
    for j, c in enumerate(live):
        f = src.bind(_backend_function(c.fn, backend), "f")
        args = ", ".join(src.const(a) for a in c.args)
        kw = "".join(f", {k}={src.const(v)}" for k, v in c.kwargs.items())
        call = f"{f}({args}{kw})" if args else f"{f}({kw[2:]})"
        if to_array is not None and type(c.outs) is _Sym and rec.rewraps(c.outs.n):
            call = f"{to_array}({call})"
        lhs = _lhs(c.outs)
        line = f"    {lhs} = {call}" if lhs else f"    {call}"
        if elide and c.fn[0] in ("row", "operator") and not kw:
            fast = _elision(c, j, rec, last, protected, src, backend)
            if fast is not None:
                line = f"    {lhs} = {fast} else {call}"
                elided += 1
        lines.append(line)
        dead = sorted({n for n in (*c.reads, *c.writes) if last.get(n) == j and n not in protected})
        if dead:
            lines.append("    del " + ", ".join(f"t{n}" for n in dead))
    lines.append("    return (" + "".join(src.const(t) + ", " for t in out_templates) + ")")
    source = "\n".join(lines) + "\n"
    glb = src.globals
    filename = f"<pycograd_xp.compile replay {next(_FILES)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(builtins.compile(source, filename, "exec"), glb)  # noqa: S102
    replay = glb["replay"]
    weakref.finalize(replay, linecache.cache.pop, filename, None)  # evicted: source goes too
    return replay, source, len(live), elided, peak


# compile evaluates once, when it generates the replay, the calls that read no argument (a
# loss's seed cotangent: ones, a division, expand_dims, broadcast_to), each result owning at
# most this many bytes: the replay binds the results instead of calling the backend again.
FOLD_MAX_BYTES = 64 * 1024


def _fold_constants(rec: _Recorder, live: list[_Call], inputs: set[int], outputs: set[int],
                    backend: Any) -> dict[int, Any]:  # fmt: skip
    """Constant folding: the values of the symbols that depend on no argument and no host
    number, made by pure calls (rows and operators, no write into a buffer), into buffers the
    replay never writes, and that are no output of the function (a caller may write into an
    output). A lazy backend folds nothing: its arrays belong to one computation."""
    if backend.lazy:
        return {}
    meta = rec.meta

    def owner(n: int) -> int:
        return n if meta[n].owns or meta[n].base is None else meta[n].base

    # buffers written in place, and those an output (or a view the caller gets) lives in
    written = {owner(c.mutates) for c in live if c.mutates is not None}
    written |= {owner(n) for n in outputs}
    arrays = backend.array_type  # a closed-over array: read afresh by each replay, never folded
    values: dict[int, Any] = {}
    to_array = backend.scalar_to_array
    for c in live:
        if (c.fn[0] not in ("row", "operator") or c.mutates is not None or not c.writes
                or c.fn[1].name == "__setitem__" or _has_host((c.args, c.kwargs), arrays)
                or any(n not in values for n in c.reads)
                or any(n in inputs or owner(n) in written
                       or meta[n].nbytes > FOLD_MAX_BYTES for n in c.writes)):  # fmt: skip
            continue
        try:
            f = _backend_function(c.fn, backend)
            args = _evaluate(c.args, values, backend.xp)
            kwargs = {k: _evaluate(v, values, backend.xp) for k, v in c.kwargs.items()}
            result = f(*args, **kwargs)
        except Exception:  # noqa: BLE001  (never worse than not folding: the replay calls it)
            continue
        outs = [(c.outs, result)] if type(c.outs) is _Sym else list(zip(c.outs, result,
                                                                          strict=True))  # fmt: skip
        for sym, v in outs:
            if sym is None:
                continue
            if to_array is not None and rec.rewraps(sym.n):
                v = to_array(v)
            values[sym.n] = v
    return values


def _has_host(v: Any, arrays: type) -> bool:
    """Whether a template holds a host number or an array of the backend (one the function
    closes over, which the caller may write between calls)."""
    t = type(v)
    if t is _Host or isinstance(v, arrays):
        return True
    if t is tuple or t is list:
        return any(_has_host(e, arrays) for e in v)
    if t is dict:
        return any(_has_host(e, arrays) for e in v.values())
    return t is slice and any(type(p) is _Host for p in (v.start, v.stop, v.step))


def _evaluate(v: Any, values: dict[int, Any], xp: Any) -> Any:
    """A template's value with the folded symbols' values (the replay's ``src.const``)."""
    t = type(v)
    if t is _Sym:
        return values[v.n]
    if t is tuple or t is list:
        return t(_evaluate(e, values, xp) for e in v)
    if isinstance(v, np.dtype):
        return getattr(xp, v.name)
    return v


def _projected_peak(rec: _Recorder, live: list[_Call], last: dict[int, int], inputs: list[int],
                    protected: set[int], events: list | None = None) -> int:  # fmt: skip
    """The replay's peak bytes by the memory model: the arguments, each call's new outputs
    and its transients (the rows' memory rules), each buffer freed when its owner and every
    view of it are dead (the ``del`` lines). Writes into dead buffers are counted as fresh
    allocations (the guard may refuse them): an upper bound. ``events`` (memory.project's
    rows) gets per call ``(call, name, outputs, transient, live after, peak during)``."""
    meta = rec.meta
    owner = {n: (n if m.owns else m.base) for n, m in enumerate(meta)}
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
    current = sum(meta[n].nbytes for n in set(inputs))
    peak = current
    for j, c in enumerate(live):
        new = 0 if c.mutates is not None else sum(meta[n].nbytes for n in c.writes)
        peak = max(peak, current + new + c.transient + CALL_SLACK)
        if events is not None:
            outs = [(meta[n].shape, np.dtype(meta[n].dtype).name,
                     0 if c.mutates is not None else meta[n].nbytes) for n in c.writes]
            name = c.fn[1] if c.fn[0] == "inplace" else \
                c.fn[1].name if c.fn[0] in ("row", "operator") else c.fn[0]  # fmt: skip
            events.append((c, name, outs, c.transient + CALL_SLACK,
                           current + new - frees.get(j, 0),
                           current + new + c.transient + CALL_SLACK))  # fmt: skip
        current += new - frees.get(j, 0)
    return peak + _overhead(len(live))


def _elision(c: _Call, j: int, rec: _Recorder, last: dict[int, int], protected: set[int],
             src: _Source, backend: Any) -> str | None:  # fmt: skip
    """The guarded in-place form of call ``c`` (``cond and result`` text), or None."""
    prim = c.fn[1]
    if type(c.outs) is not _Sym:
        return None
    out = rec.meta[c.outs.n]
    if out.dtype.itemsize * _size(out.shape) < ELIDE_MIN_BYTES:
        return None

    def dead_operand(a: Any) -> int | None:
        if type(a) is not _Sym or a.n in protected or last.get(a.n) != j:
            return None
        m = rec.meta[a.n]
        return a.n if m.owns and m.shape == out.shape and m.dtype == out.dtype else None

    name = prim.name
    if prim.kind == "binary" and name in _INPLACE:
        x1, x2 = c.args
        n = dead_operand(x1)
        if n is None and name in _COMMUTATIVE:
            n = dead_operand(x2)
            x1, x2 = x2, x1
        if n is None:
            return None
        iop = src.bind(_INPLACE[name], "op")
        return (f"{iop}(t{n}, {src.const(x2)}) if _rc(t{n}) == {_SOLE} and "
                f"{src.bind(backend.owns_buffer, 'own')}(t{n})")
    if name == "where" and backend.select is not None and len(c.args) == 3 and not c.kwargs:
        # where(c, x, 0) into x's dead buffer (a VJP's mask: relu's), as the eager rule writes
        # an owned cotangent; the select capability takes out= (NumPy's blend, in place)
        cond, x1, x2 = c.args
        n = dead_operand(x1)
        if n is None or not _zero_bits(x2):
            return None
        sel = src.bind(backend.select, "f")
        return (f"{sel}({src.const(cond)}, t{n}, {src.const(x2)}, out=t{n}) if _rc(t{n}) == "
                f"{_SOLE} and {src.bind(backend.owns_buffer, 'own')}(t{n})")
    if prim.kind == "unary" and backend.takes_out is not None:
        f = _backend_function(c.fn, backend)
        if not backend.takes_out(f):
            return None
        n = dead_operand(c.args[0])
        if n is None:
            return None
        return (f"{src.bind(f, 'f')}(t{n}, out=t{n}) if _rc(t{n}) == {_SOLE} and "
                f"{src.bind(backend.owns_buffer, 'own')}(t{n})")
    return None


def _size(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _lhs(outs: Any) -> str:
    if type(outs) is _Sym:
        return f"t{outs.n}"
    if isinstance(outs, tuple):
        return ", ".join(f"t{o.n}" if o is not None else "_" for o in outs) + ","
    return ""


def _collect_hosts(v: Any, into: set[int]) -> None:
    t = type(v)
    if t is _Host:
        into.add(v.n)
    elif t is tuple or t is list:
        for e in v:
            _collect_hosts(e, into)
    elif t is dict:
        for e in v.values():
            _collect_hosts(e, into)


# -- compile --------------------------------------------------------------------------------------


class _TraceState(threading.local):
    depth = 0


_TRACING = _TraceState()


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

    def __init__(self, f: Callable[..., Any], static_argnums: Sequence[int],
                 static_argnames: Sequence[str], max_traces: int,
                 on_trace: Callable[[Trace], None] | None) -> None:  # fmt: skip
        self.f = f
        self.static_argnums = frozenset(static_argnums)
        self.static_argnames = frozenset(static_argnames)
        self.max_traces = max_traces
        self.on_trace = on_trace
        self._cache: OrderedDict[Any, _Plan] = OrderedDict()
        self._static_scalars: dict[Any, frozenset[int]] = {}  # per structure: numbers made static
        self.traces: list[Trace] = []
        self.fallbacks = 0  # calls run uncompiled (tracked arrays: inside grad, jvp or vmap)
        functools.update_wrapper(self, f)

    def __repr__(self) -> str:
        return f"<compiled {getattr(self.f, '__name__', self.f)!r}: {len(self._cache)} traces>"

    def source(self, *args: Any, **kwargs: Any) -> str:
        """The generated replay function for these arguments (tracing if needed)."""
        key, leaves, sig, ns = self._key(args, kwargs)
        plan = self._cache.get(key)
        return (plan if plan is not None else self._plan(key, leaves, sig, ns, args, kwargs)[0]
                ).source  # fmt: skip

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
        results = plan.replay(*[leaves[i]._data for i in plan.array_inputs],
                              *[leaves[i] for i in plan.scalar_inputs])  # fmt: skip
        return plan.rebuild(_outputs(plan, results))

    # the cache key: structure, shapes and dtypes, static values, namespace
    def _key(self, args: tuple, kwargs: dict) -> tuple[Any, list, Any, Any]:
        leaves: list[Any] = []
        sig = _signature((args, kwargs), leaves)
        parts: list[Any] = [sig]
        ns = None
        static_pos = self._static_positions(args, kwargs, sig)
        grad_on = MODE.enabled
        for i, leaf in enumerate(leaves):
            t = type(leaf)
            if isinstance(leaf, Array):
                if (leaf._node is not None and grad_on) or leaf._backend.abstract or \
                        leaf._backend.level or _TRACING.depth:  # fmt: skip
                    return None, leaves, sig, ns
                if ns is None:
                    ns = leaf._ns
                elif leaf._ns is not ns:
                    raise TypeError(f"compile: arguments mix arrays of {ns.__name__} and "
                                    f"{leaf._ns.__name__}")  # fmt: skip
                d = leaf._data
                parts.append((d.shape, d.dtype) if not leaf._backend.chunked else
                             (d.shape, d.dtype, d.chunks, id(d.spec)))  # fmt: skip
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
                parts.append(("static", t, leaf))
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

    def _plan(self, key: Any, leaves: list, sig: Any, ns: Any, args: tuple,
              kwargs: dict) -> tuple[_Plan, Any]:  # fmt: skip
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
        trace = Trace(reason, plan.calls, plan.elided,
                      tuple(sorted(self._static_scalars.get(sig, ()))), plan.peak_bytes,
                      plan.argument_bytes)  # fmt: skip
        self.traces.append(trace)
        if self.on_trace is not None:
            self.on_trace(trace)
        return plan, key

    def replay_plan(self, args: tuple, kwargs: dict, events: list | None = None) -> _Plan:
        """The plan a call with arguments of these shapes, dtypes and static values replays,
        traced afresh and not cached: how ``memory.project`` reaches the replay's projected
        peak (``peak_bytes``, as ``Trace.peak_bytes``). Array leaves may be abstract (made from
        ``memory.spec``); the replay's target is NumPy's model. ``events``: see
        :func:`_projected_peak`."""
        leaves: list[Any] = []
        sig = _signature((args, kwargs), leaves)
        td = tree_flatten((args, kwargs))[1]
        while True:  # as _plan: numbers whose value the trace needs become static
            static = self._static_positions(args, kwargs, sig)
            try:
                return _trace(self.f, leaves, td, None, static, events)
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


def _rebuilder(td: Any) -> Callable[[list], Any]:
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
            return "{" + ", ".join(f"{bind(k)}: {v}" for k, v in zip(d.meta, kids,
                                                                     strict=True)) + "}"
        cls, names, statics = d.meta
        fields = ", ".join(f"{n}={v}" for n, v in zip(names, kids, strict=True))
        return f"{bind(cls)}({fields}{''.join(f', {n}={bind(v)}' for n, v in statics)})"

    exec(f"def rebuild(L):\n    return {expr(td)}\n", glb)  # noqa: S102
    return glb["rebuild"]


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


def _trace(f: Callable[..., Any], leaves: list, td: Any, ns: Any,
           static: frozenset[int], events: list | None = None) -> _Plan:  # fmt: skip
    from . import namespace as _namespace
    from ._proxy import recording
    from .memory._project import abstract_namespace

    if ns is None:
        import numpy

        ns = _namespace(numpy)
    lazy = ns._backend.lazy
    A = recording(ns._backend) if lazy else abstract_namespace()
    rec = _Recorder(ns._backend)
    a_leaves: list[Any] = []
    array_inputs: list[int] = []
    scalar_inputs: list[int] = []
    input_syms: list[int] = []
    host_inputs: list[HostScalar] = []
    for i, leaf in enumerate(leaves):
        t = type(leaf)
        if isinstance(leaf, Array):
            if lazy:  # the real lazy array, proxied
                a = rec.by_real[id(leaf._data)] = Proxy(leaf._data, A._backend.xp)
            else:
                a = AbstractArray(leaf._data.shape, _np_dtype(leaf._data.dtype))
            input_syms.append(rec.new(a))
            array_inputs.append(i)
            a_leaves.append(make(A.Array, a))
        elif (t is int or t is float) and i not in static:
            h = HostScalar(None, (), leaf, index=i, name=f"leaf {i}")
            rec.host(h)
            host_inputs.append(h)
            scalar_inputs.append(i)
            a_leaves.append(h)
        else:
            a_leaves.append(leaf)
    # host inputs are named by leaf position: renumber the expression table so h<i> is input i
    args, kwargs = tree_unflatten(td, a_leaves)
    prev = CURRENT.recorder, CURRENT.tracker, REDIRECT.ns, REDIRECT.closed
    # on an eager backend, calls on arrays the function closes over are recorded too (each
    # replay reads them afresh); a lazy backend's arrays never change, nothing to record
    CURRENT.recorder, CURRENT.tracker, REDIRECT.ns = rec, None, A
    REDIRECT.closed = None if lazy else ns
    _TRACING.depth += 1
    try:
        out = f(*args, **kwargs)
    except TypeError as e:
        if isinstance(e, TracingError | ValueNeededError) or "have no value" not in str(e):
            raise
        how = str(e).split(" of an array")[0]
        raise TracingError(
            f"compile({getattr(f, '__name__', 'f')}): {how} of an array while tracing. A "
            "compiled function is traced once for all values, so it cannot branch on an "
            "array's value or turn one into a Python number: use xp.where(condition, a, b) "
            "for a branch, pass a Python number (or a static_argnums argument) instead of an "
            "array, or call this part outside the compiled function"
        ) from e
    finally:
        _TRACING.depth -= 1
        CURRENT.recorder, CURRENT.tracker, REDIRECT.ns, REDIRECT.closed = prev
    out_leaves, out_def = tree_flatten(out)
    templates: list[Any] = []
    outs: list[tuple[str, Any]] = []
    for leaf in out_leaves:
        d = leaf._data if isinstance(leaf, Array) and leaf._backend.abstract else leaf
        if type(d) in _TRACED:
            outs.append(("array", len(templates)))
            templates.append(_Sym(rec.sym(d, "the output")))
        elif type(d) is HostScalar:
            outs.append(("host", len(templates)))
            templates.append(_Host(rec.host(d)))
        else:
            outs.append(("const", leaf))
    replay, source, calls, elided, peak = _generate(rec, input_syms, host_inputs, templates,
                                                    ns._backend, events)  # fmt: skip
    arguments = sum(rec.meta[n].nbytes for n in set(input_syms))
    return _Plan(replay, source, array_inputs, scalar_inputs, _rebuilder(out_def), outs, ns,
                 calls, elided, peak, arguments)  # fmt: skip


def _np_dtype(dtype: Any) -> np.dtype:
    """The NumPy dtype of any backend's dtype object (array-api-strict's are not NumPy's)."""
    try:
        return np.dtype(dtype)
    except TypeError:
        return np.dtype(str(dtype).rsplit(".", 1)[-1])


def compile(f: Callable[..., Any] | None = None, *, static_argnums: int | Sequence[int] = (),  # noqa: A001
            static_argnames: str | Sequence[str] = (), max_traces: int = 64,
            on_trace: Callable[[Trace], None] | None = None) -> Any:  # fmt: skip
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
    """
    if f is None:
        return functools.partial(compile, static_argnums=static_argnums,
                                 static_argnames=static_argnames, max_traces=max_traces,
                                 on_trace=on_trace)  # fmt: skip
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)
    if isinstance(static_argnames, str):
        static_argnames = (static_argnames,)
    return Compiled(f, static_argnums, static_argnames, max_traces, on_trace)
