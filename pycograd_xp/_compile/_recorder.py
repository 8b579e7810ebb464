"""The recorder: what the abstract backend (or a lazy backend's proxies) reports while
``compile`` traces, noted as the IR's calls (:mod:`._ir`), and :func:`record`, which runs the
function under it."""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from .._abstract import (
    ABSTRACT,
    DTYPE_NAMES,
    AbstractArray,
    c_order,
    matmul_into_shape,
    transients,
)
from .._host import HostScalar, ValueNeededError
from .._primitive import REGISTRY
from .._state import STACK, Trace, push, restore
from ..namespace._array import Array, make
from ..ops._rules.shapes import KEEP_VALUES
from ..tree import tree_flatten, tree_unflatten
from ._ir import (
    SETITEM,
    HostArrayCall,
    IndexAddCall,
    InplaceCall,
    MatmulIntoCall,
    Meta,
    OwnCall,
    RowCall,
    Sym,
    size,
    syms,
)
from ._ir import Host as HostRef
from ._proxy import Proxy, real, recording


class TracingError(TypeError):
    """A compiled function needed an array's value (or a data-dependent shape) while tracing."""


# Each *_like row and the row that makes the same array from a shape: ``zeros_like(x)`` reads
# only ``x``'s shape and dtype, so it is recorded as ``zeros(shape, dtype=...)`` and ``x`` may be
# freed earlier.
_FROM_SHAPE = {
    REGISTRY["zeros_like"]: REGISTRY["zeros"],
    REGISTRY["ones_like"]: REGISTRY["ones"],
    REGISTRY["empty_like"]: REGISTRY["empty"],
    REGISTRY["full_like"]: REGISTRY["full"],
}

TRACED = (AbstractArray, Proxy)  # the array types a trace runs on


class Recorder:
    """What the abstract backend reports while ``compile`` traces (see ``_abstract``)."""

    def __init__(self, backend: Any) -> None:
        # the target backend's dtype objects (by id: they live as long as its module) as NumPy's
        self.dtypes: dict[int, Any] = {
            id(getattr(backend.xp, n)): np.dtype(n) for n in DTYPE_NAMES if hasattr(backend.xp, n)
        }
        self.dtypes[0] = type(backend.xp.float64)  # (0 is no object's id)
        self.ex = (self.dtypes, backend.array_type)
        self.chunked = backend.chunked
        self.target = backend  # the backend replayed on (a GPU's rows differ: Backend.device)
        self.real_type = backend.array_type  # a lazy backend's arrays (proxied while tracing)
        self.owns = backend.owns_buffer is not None and not backend.lazy  # see claim
        self.by_real: dict[int, Proxy] = {}
        self.calls: list[Any] = []
        self.wrapped_syms: set[int] = set()  # results our namespace handed out (see wrapped)
        self.ids: dict[int, int] = {}  # id(AbstractArray) -> symbol
        # ids stay unique: an abstract array's entry goes when it dies (a weak reference's
        # callback, before its id can be reused), so the trace holds no reference to it and
        # the tape's reference counts are the eager run's (``owned``: claim); a proxy of a lazy
        # backend's array is kept alive until the trace ends
        self.refs: list[Any] = []
        self.meta: list[Meta] = []
        self.hosts: dict[int, int] = {}  # id(HostScalar) -> host expression index
        self.host_list: list[HostScalar] = []

    # symbols
    def new(self, a: AbstractArray | Proxy) -> int:
        n = len(self.meta)
        self._note(a, n)
        base = getattr(a, "base", None)
        known = None if base is None else self.ids.get(id(base))
        hidden = 0
        if known is None and type(base) is AbstractArray:
            # the call made ``base`` and hands out only views of it: the first view holds its
            # bytes (freed with the last view), the others are views of that one
            self._note(base, n)
            hidden = base.nbytes
        self.meta.append(Meta(a.shape, a.dtype, base is None, known, hidden))
        return n

    def _note(self, a: Any, n: int) -> None:
        key = id(a)
        self.ids[key] = n
        if type(a) is AbstractArray:
            self.refs.append(weakref.ref(a, functools.partial(_forget, self.ids, key, n)))
        else:
            self.refs.append(a)

    def claim(self, a: Any) -> bool:
        """Whether ``a``, an abstract array that is no view, owns its buffer, as the tape asks
        of a VJP's cotangent (``owned``: the rule may write into it): as the eager run would
        answer on a backend that tells (``owns_buffer``), with a step that makes sure of it in
        the replay, kept where a write into that buffer follows (``_passes.
        drop_idle_claims``); never elsewhere."""
        n = self.ids.get(id(a))
        if n is None or not self.owns or not self.meta[n].owns:
            return False
        self.calls.append(
            OwnCall(
                args=(Sym(n),),
                kwargs={},
                outs=Sym(n),
                mutates=n,
                reads=[n],
                writes=[n],
                transient=self.meta[n].nbytes,
            )
        )
        return True

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
            return Sym(n)
        if t is HostScalar:
            return HostRef(self.host(v))
        if t is tuple or t is list:
            return t(self.template(e, where, reads) for e in v)
        if t is slice and any(type(p) is HostScalar for p in (v.start, v.stop, v.step)):
            raise ValueNeededError(
                next(p for p in (v.start, v.stop, v.step) if type(p) is HostScalar),
                "use in a slice",
            )
        return v

    def _outs(self, out: Any) -> Any:
        if type(out) is AbstractArray or type(out) is Proxy:
            return Sym(self.new(out))
        if isinstance(out, tuple | list) and any(type(o) in TRACED for o in out):
            return tuple(Sym(self.new(o)) if type(o) in TRACED else None for o in out)
        return None

    def call_real(
        self, prim: Any, fn: Callable[..., Any], mod: Any, args: tuple, kwargs: dict
    ) -> Any:
        """A call of the recording namespace over a lazy backend (``._proxy``): the backend's
        own function on the real arrays, the outputs as proxies."""
        out = fn(*real(args), **real(kwargs))
        wrapped = self._proxies(out, mod)
        name = prim.name
        reads: list[int] = []
        targs = self.template(args, name, reads)
        tkw = {k: self.template(v, name, reads) for k, v in kwargs.items()}
        known = arrays(wrapped)
        if not known or all(id(o) in self.ids for o in known):
            return wrapped
        outs = self._outs(wrapped)
        self.calls.append(
            RowCall(prim=prim, args=targs, kwargs=tkw, outs=outs, reads=reads, writes=syms(outs))
        )
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
    def call(
        self,
        prim: Any,
        rule: Callable[..., Any],
        args: tuple,
        kwargs: dict,
        via: Callable[..., Any] | None = None,
    ) -> Any:
        """Record one call of ``prim`` (``via``: the Python operator that made it, which the
        replay then uses too)."""
        ex_args, ex_kwargs = examples(args, *self.ex), examples(kwargs, *self.ex)
        out = rule(ABSTRACT, *ex_args, **ex_kwargs)
        transient = transients(prim.memory, out, *ex_args, **ex_kwargs)[0]
        name = prim.name
        reads: list[int] = []
        targs = self.template(args, name, reads)
        tkw = {k: self.template(v, name, reads) for k, v in kwargs.items()}
        if prim is SETITEM:
            target = self.sym(args[0], name)
            self.calls.append(
                RowCall(prim=prim, args=targs, kwargs=tkw, outs=None, mutates=target, reads=reads)
            )
            return out
        known = arrays(out)
        if not known or all(id(o) in self.ids for o in known):
            return out  # metadata (a dtype, a bool), or an input returned as it is
        if prim in _FROM_SHAPE and not self.chunked:  # needs x's shape, not x: x may die earlier
            prim, reads = _FROM_SHAPE[prim], []
            targs = (out.shape, *targs[1:])
            tkw = {**tkw, "dtype": out.dtype}
        outs = self._outs(out)
        self.calls.append(
            RowCall(
                prim=prim,
                via=via,
                args=targs,
                kwargs=tkw,
                outs=outs,
                reads=reads,
                writes=syms(outs),
                transient=transient,
            )
        )
        return out

    def inplace(self, fname: str, x: AbstractArray, other: Any) -> AbstractArray:
        prim = REGISTRY[fname]
        ex_other = examples(other, *self.ex)
        cast(Callable[..., Any], prim.shape)(ABSTRACT, x, ex_other)  # validates
        # what the row's memory rule charges beyond its result (the result is x itself): NumPy's
        # buffers for strided or broadcast operands (up to 8192 elements each)
        transient = transients(prim.memory, x, x, ex_other)[0]
        reads: list[int] = []
        targs = self.template((x, other), fname, reads)
        n = self.sym(x, fname)
        self.calls.append(
            InplaceCall(
                prim=prim,
                args=targs,
                kwargs={},
                outs=Sym(n),
                mutates=n,
                reads=reads,
                writes=[n],
                transient=transient,
            )
        )
        return x

    def index_add(self, size: int, flat_index: Any, values: Any) -> AbstractArray:
        out = AbstractArray((size,), values.dtype)
        reads: list[int] = []
        targs = self.template((size, flat_index, values), "index_add", reads)
        outs = self._outs(out)
        self.calls.append(
            IndexAddCall(args=targs, kwargs={}, outs=outs, reads=reads, writes=syms(outs))
        )
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

    def matmul_into(
        self, x1: AbstractArray, x2: AbstractArray, out: AbstractArray
    ) -> AbstractArray:
        """A product written into ``out`` (a view of a buffer the trace made): replayed as
        the backend's ``matmul_into``, or a product and a write where it has none."""
        if matmul_into_shape(x1, x2) != out.shape:
            raise ValueError(
                f"matmul_into: the product of {x1.shape} and {x2.shape} is no {out.shape} array"
            )
        reads: list[int] = []
        targs = self.template((x1, x2, out), "matmul_into", reads)
        n = self.sym(out, "matmul_into")
        self.calls.append(
            MatmulIntoCall(args=targs, kwargs={}, outs=None, mutates=n, reads=reads, writes=[n])
        )
        return out

    def host_array(
        self, fn: Callable[..., Any], args: tuple, shape: tuple[int, ...], dtype: Any
    ) -> AbstractArray:
        """An array the replay makes on the host from host numbers: ``fn(*args)``, a NumPy
        array, handed to the backend's ``asarray(..., dtype=dtype)`` (random draws)."""
        out = AbstractArray(shape, np_dtype(dtype))
        reads: list[int] = []
        targs = self.template(args, "a host array", reads)
        outs = self._outs(out)
        self.calls.append(
            HostArrayCall(
                fn=fn, dtype=dtype, args=targs, kwargs={}, outs=outs, reads=reads, writes=syms(outs)
            )
        )
        return out

    def data_dependent(self, what: str) -> None:
        raise TracingError(
            f"compile: {what} gives an output whose shape depends on array values, which a "
            "compiled schedule cannot fix in advance; keep shapes static (xp.where(mask, x, 0) "
            "instead of x[mask], a fixed size instead of nonzero/unique), or call this part "
            "outside the compiled function"
        )


def _forget(ids: dict[int, int], key: int, n: int, _: Any) -> None:
    if ids.get(key) == n:  # (not a later array's entry under the same id)
        del ids[key]


def arrays(out: Any) -> list[Any]:
    if type(out) in TRACED:
        return [out]
    if isinstance(out, tuple | list):
        return [o for o in out if type(o) in TRACED]
    return []


def examples(v: Any, dtypes: dict[int, np.dtype], array_type: type) -> Any:
    """``v`` as the shape rules take it: each host scalar replaced by its example (a Python
    number), each dtype of the target backend by NumPy's (the abstract backend's), each array
    of the target backend (a constant the function closes over) by an abstract one."""
    t = type(v)
    if t is HostScalar:
        return v.example
    if t is tuple or t is list:
        return t(examples(e, dtypes, array_type) for e in v)
    if t is dict:
        return {k: examples(e, dtypes, array_type) for k, e in v.items()}
    if t is array_type and t is not np.ndarray:
        dtype = np_dtype(v.dtype)
        try:  # small constants keep their values (a mask's selected count, see constant())
            value = np.asarray(v) if size(v.shape) <= KEEP_VALUES else None
        except Exception:  # a device array
            value = None
        return AbstractArray(v.shape, dtype, value=value)
    d = dtypes.get(id(v))
    if d is None and t is dtypes.get(0) and t is not type:  # equal, not the module's own
        d = np_dtype(v)
    return v if d is None else d


def np_dtype(dtype: Any) -> np.dtype:
    """The NumPy dtype of any backend's dtype object (array-api-strict's are not NumPy's)."""
    try:
        return np.dtype(dtype)
    except TypeError:
        return np.dtype(str(dtype).rsplit(".", 1)[-1])


def host_array(fn: Callable[..., Any], args: tuple, shape: tuple[int, ...], dtype: Any) -> Any:
    """While ``compile`` traces: an array of the abstract namespace that each replay makes as
    ``asarray(fn(*args), dtype=dtype)`` from the host numbers ``args`` (host scalars and
    constants); ``fn`` returns a NumPy array of ``shape``. How ``pycograd_xp.random`` draws
    from a key that is an argument of the compiled function."""
    from ..memory._project import abstract_namespace

    rec = STACK.recorder
    if rec is None:
        raise RuntimeError("host_array: only while pycograd_xp.compile traces")
    if rec.by_real is not None and rec.chunked:
        raise NotImplementedError(
            "compile on a chunked backend: a random key among the arguments (draws made on the "
            "host for each call) is not supported; pass the key as a static argument "
            "(static_argnums) or draw outside the compiled function"
        )
    return make(abstract_namespace().Array, rec.host_array(fn, args, shape, dtype))


@dataclass
class Recording:
    """A traced function: the recorder's calls, and how the replay is called and returns."""

    rec: Recorder
    array_inputs: list[int]  # leaf positions of the array arguments
    scalar_inputs: list[int]  # leaf positions of the dynamic Python numbers
    input_syms: list[int]  # their symbols
    host_inputs: list[HostScalar]  # the dynamic numbers' host expressions
    templates: list[Any]  # the results' templates (Sym or Host)
    outs: list[tuple[str, Any]]  # per output leaf: ("array", i) | ("host", i) | ("const", v)
    out_def: Any  # the output's tree structure


def record(
    f: Callable[..., Any], leaves: list, td: Any, ns: Any, static: frozenset[int]
) -> Recording:
    """Run ``f`` on the tree ``td`` of ``leaves`` (arrays of namespace ``ns`` become abstract
    arrays, or proxies on a lazy backend; numbers not in ``static`` become host inputs) with
    every backend call recorded."""
    from ..memory._project import abstract_namespace

    lazy = ns._backend.lazy
    A = recording(ns._backend) if lazy else abstract_namespace()
    rec = Recorder(ns._backend)
    a_leaves: list[Any] = []
    array_inputs: list[int] = []
    scalar_inputs: list[int] = []
    input_syms: list[int] = []
    host_inputs: list[HostScalar] = []
    for i, leaf in enumerate(leaves):
        t = type(leaf)
        if isinstance(leaf, Array):
            a: AbstractArray | Proxy
            if lazy:  # the real lazy array, proxied
                a = rec.by_real[id(leaf._data)] = Proxy(leaf._data, A._backend.xp)
            else:  # with the argument's layout: NumPy copies one not in C order where a call
                # needs one, and the rules count that copy (memory.project's _to_abstract)
                a = AbstractArray(
                    leaf._data.shape, np_dtype(leaf._data.dtype), contiguous=c_order(leaf._data)
                )
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
    args, kwargs = tree_unflatten(td, a_leaves)
    # on an eager backend, calls on arrays the function closes over are recorded too (each
    # replay reads them afresh); a lazy backend's arrays never change, nothing to record
    prev = push(Trace(A, rec, None if lazy else ns))
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
        restore(prev)
    out_leaves, out_def = tree_flatten(out)
    templates: list[Any] = []
    outs: list[tuple[str, Any]] = []
    for leaf in out_leaves:
        d = leaf._data if isinstance(leaf, Array) and leaf._backend.abstract else leaf
        if type(d) in TRACED:
            outs.append(("array", len(templates)))
            templates.append(Sym(rec.sym(d, "the output")))
        elif type(d) is HostScalar:
            outs.append(("host", len(templates)))
            templates.append(HostRef(rec.host(d)))
        else:
            outs.append(("const", leaf))
    return Recording(
        rec, array_inputs, scalar_inputs, input_syms, host_inputs, templates, outs, out_def
    )
