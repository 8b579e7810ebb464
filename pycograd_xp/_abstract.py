"""Abstract evaluation: an Array API backend whose arrays have a shape and a dtype and no data.

:data:`ABSTRACT` is a conforming namespace built from the primitive table: each function is its
row's shape rule (``Primitive.shape``). ``namespace(ABSTRACT)`` is then an ordinary differentiable
namespace: a user's function and the VJP rules run on it unchanged, through the same engine, so
the forward graph, the residuals the tape keeps and the backward graph are the real ones.

Memory follows from Python's own reference counting: an :class:`AbstractArray` is "allocated"
when it is made and "freed" when the last reference to it goes, exactly when the NumPy array it
stands for would be (the engine frees residuals and cotangents by dropping references). Views
(reshape, transpose, basic indexing, broadcasting) own no bytes and keep their base alive, as in
NumPy. A :class:`Tracker` adds it up: the live bytes, the peak, and one event per backend call
with the transients its row declares (``Primitive.memory``). Nothing proportional to the data is
ever allocated.
"""

from __future__ import annotations

import contextlib
import math
import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from ._host import NoValue
from ._primitive import DTYPE_NAMES, REGISTRY, namespace_module
from ._state import STACK
from .namespace._operators import BINARY_OPERATORS, COMPARISONS, install_backend_operators

# Every backend call allocates a little beside its outputs and its declared transients (the
# ufunc iterator, NumPy's small shape and stride arrays, compat wrappers' bookkeeping), freed
# when the call returns (measured: docs/calibration.md#call-slack).
CALL_SLACK = 8 * 1024


# Set while a memory rule is evaluated for the part of its transients tracemalloc sees: the
# rules' ``native`` terms (ops/_rules/shapes.py) count 0 then.
NATIVE_OFF = [False]


@contextlib.contextmanager
def _native_off() -> Iterator[None]:
    NATIVE_OFF[0] = True
    try:
        yield
    finally:
        NATIVE_OFF[0] = False


# NumPy's ufunc machinery iterates in chunks of this many elements: an operand that has to be
# broadcast, cast, or read in another order than the iteration's is copied through a buffer of
# that many elements (measured: docs/calibration.md#buffer-elements).
BUFFER_ELEMENTS = 8192


def measured_layouts(rule: Any) -> Any:
    """Mark a memory rule as measured on every layout and dtype mix it takes (its own terms
    count NumPy's copies and buffers for inputs not in C order or in another dtype): the
    conservative term of :func:`unmeasured` is then not added to it."""
    rule.layouts = True
    return rule


def _leaves(v: Any) -> list[AbstractArray]:
    if isinstance(v, AbstractArray):
        return [v]
    if isinstance(v, tuple | list):
        return [a for e in v for a in _leaves(e)]
    return []


def unmeasured(out: Any, *args: Any, **kwargs: Any) -> int:
    """Unknown means worst case: for a row whose memory rule was not measured on these layouts
    and dtypes (not marked :func:`measured_layouts`), one iteration buffer for each input NumPy
    cannot read in C order (transposed, reversed, strided, broadcast) and each floating input in
    another dtype than the result, in any call that computes a new array
    (docs/calibration.md#unknown-worst-case)."""
    outs = _outputs(out)
    if not any(o.nbytes for o in outs):
        return 0  # views: nothing is read
    dtype = outs[0].dtype
    total = 0
    for x in _leaves(args) + _leaves(list(kwargs.values())):
        zero_stride = x.base is not None and x.size > x.base.size
        other = x.dtype != dtype and x.dtype.kind in "fc"
        if x.ndim and x.size and (not x.contiguous or zero_stride or other):
            total += min(x.size, BUFFER_ELEMENTS) * max(x.dtype.itemsize, dtype.itemsize)
    return total


def transients(rule: Any, out: Any, *args: Any, **kwargs: Any) -> tuple[int, int]:
    """A memory rule's transients in all, and the part of them tracemalloc sees (the rule again
    with its native terms 0); the conservative term of :func:`unmeasured` added where the rule
    is not marked as measured on every layout."""
    extra = 0 if getattr(rule, "layouts", False) else unmeasured(out, *args, **kwargs)
    if rule is None:
        return extra, extra
    total = int(rule(out, *args, **kwargs))
    with _native_off():
        traced = int(rule(out, *args, **kwargs))
    return total + extra, min(traced, total) + extra


@dataclass
class Event:
    """One backend call: the row, the phase, what it made, and memory around it."""

    op: str
    phase: str  # "forward" or "backward"
    outputs: list[tuple[tuple[int, ...], str, int]]  # (shape, dtype name, bytes owned)
    transient: int  # bytes the call allocates beyond its outputs while it runs
    live: int  # bytes live right after the call (outputs included, transients gone)
    peak: int  # the most bytes live during the call
    objects: int = 2  # Python objects' allowances per output (objects(), memory._report._calls)


@dataclass
class Tracker:
    """Live bytes of abstract arrays, their peak, and the event log."""

    live: int = 0
    peak: int = 0
    traced_peak: int = 0  # the peak without native transients (what tracemalloc can see)
    phase: str = "forward"
    prefix: str = ""  # before each op's name: "recompute " while a schedule makes one again
    events: list[Event] = field(default_factory=list)
    peak_event: int = -1  # index into events of the call at the peak (-1: before any call)
    # the Backend the projection models (its arguments' backend), where a rule's memory differs
    # from NumPy's there (Backend.device); None: NumPy
    target: Any = None

    def alloc(self, n: int) -> None:
        self.live += n
        if self.live > self.peak:
            self.peak, self.peak_event = self.live, len(self.events)
        if self.live > self.traced_peak:
            self.traced_peak = self.live

    def free(self, n: int) -> None:
        self.live -= n

    def call(
        self, op: str, outs: list[AbstractArray], transient: int, traced: int | None = None
    ) -> None:
        """One backend call: its outputs (already live), its transients in all and the part of
        them tracemalloc sees (``traced``; None: all of them)."""
        transient += CALL_SLACK
        during = self.live + transient
        if during > self.peak:
            self.peak, self.peak_event = during, len(self.events)
        seen = during if traced is None else self.live + traced + CALL_SLACK
        self.traced_peak = max(self.traced_peak, seen)
        self.events.append(
            Event(
                self.prefix + op,
                self.phase,
                [(o.shape, o.dtype.name, o.nbytes) for o in outs],
                transient,
                self.live,
                during,
                objects(),
            )
        )


def objects() -> int:
    """The Python objects an output of a call made now holds while it lives, in allowances of
    ``memory._report.OVERHEAD_PER_CALL`` bytes: three for its header, wrapper and tape node;
    three more for each running ``jvp`` (its tangent's wrapper and header, and the jvp's record
    of the pair), one more under a running ``vmap`` (the batched wrapper and its dims) and in a
    differentiable backward pass (a nested ``grad``: the rules' own nodes). Measured on
    programs of many small arrays in nine modes, from empty free lists: every mode's peak
    grows at least 25 B an allowance slower than this allows (docs/calibration.md#overhead).
    A compiled replay's plain arrays take two (``Event``'s and ``Row``'s default)."""
    return 3 + 3 * len(STACK.jvp) + (STACK.batch is not None) + (STACK.grad_depth > 1)


def modelled() -> Any:
    """The Backend the abstract arrays stand for: the arguments' in a running projection, the
    backend replayed on while ``compile`` traces; None: NumPy's model."""
    t = STACK.tracker if STACK.tracker is not None else STACK.recorder
    return None if t is None else t.target


def models_a_gpu() -> bool:
    """Whether the abstract arrays stand for a GPU's (``Backend.device``: CuPy's), where some
    rows run and allocate otherwise than on NumPy."""
    target = modelled()
    return target is not None and target.device


def _prod(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


class AbstractArray(NoValue):
    """An array with a shape and a dtype (a NumPy dtype) and no data.

    What :func:`pycograd_xp.memory.project` runs a function on (its namespace is ``ABSTRACT``).

    Parameters
    ----------
    shape : tuple of int
        The shape.
    dtype : dtype
        Anything ``numpy.dtype`` takes.
    base : AbstractArray, optional
        The array that owns the memory of a view (None: this array owns ``nbytes``).
    contiguous : bool, default True
        Whether a reshape of it can be a view.
    ordered : bool, optional
        Whether its strides fall in C order (by size, a flip's negative strides included),
        gaps allowed: a slice of an array in C order is. NumPy's ``concatenate`` and ``stack``
        lay out their result in their inputs' stride order, so inputs all ``ordered`` give a
        result in C order. Default: ``contiguous`` (what is not known to be in C order is
        taken as not).
    transposed : bool, default False
        Whether it is the matrix transpose of an array in C order (its last two axes swapped:
        BLAS reads it as it is, where another layout is copied first).
    value : optional
        The data of a small constant given from outside (an index array, a mask), so that
        functions whose output shape depends on data (boolean masks, ``nonzero``, ``unique_*``)
        still get exact shapes; for anything computed it is None, and such shapes are upper
        bounds.
    """

    __slots__ = (
        "shape",
        "dtype",
        "nbytes",
        "base",
        "contiguous",
        "ordered",
        "transposed",
        "value",
        "_tracker",
        "__weakref__",
    )
    base: AbstractArray | None

    def __init__(
        self,
        shape: Any,
        dtype: Any,
        *,
        base: AbstractArray | None = None,
        contiguous: bool = True,
        ordered: bool | None = None,
        transposed: bool = False,
        value: Any = None,
    ) -> None:
        self.shape = tuple(int(s) for s in shape)
        if any(s < 0 for s in self.shape):
            raise ValueError(f"negative dimensions are not allowed: {self.shape}")
        self.dtype = np.dtype(dtype)
        self.base = base.base if base is not None and base.base is not None else base
        self.contiguous = contiguous
        self.ordered = contiguous if ordered is None else contiguous or ordered
        self.transposed = transposed
        self.value = value
        self.nbytes = 0 if base is not None else _prod(self.shape) * self.dtype.itemsize
        t = self._tracker = STACK.tracker if self.nbytes else None
        if t is not None:
            t.alloc(self.nbytes)

    def __del__(self) -> None:
        t = getattr(self, "_tracker", None)  # None also when __init__ refused the shape
        if t is not None:
            t.free(self.nbytes)

    # -- the standard's attributes ---------------------------------------------------------------
    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """The number of elements."""
        return _prod(self.shape)

    @property
    def device(self) -> str:
        """``"cpu"``: abstract arrays model the host's memory."""
        return "cpu"

    @property
    def T(self) -> AbstractArray:
        """The transpose (an abstract view)."""
        return ABSTRACT.permute_dims(self, tuple(reversed(range(self.ndim))))

    @property
    def mT(self) -> AbstractArray:
        """The transpose of the last two dimensions."""
        return ABSTRACT.matrix_transpose(self)

    def __array_namespace__(self, /, *, api_version: str | None = None) -> ModuleType:
        return ABSTRACT

    def __repr__(self) -> str:
        return f"AbstractArray(shape={self.shape}, dtype={self.dtype.name})"

    def __getitem__(self, key: Any) -> AbstractArray:
        return ABSTRACT.__getitem__(self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        ABSTRACT.__setitem__(self, key, value)

    __hash__ = None  # type: ignore[assignment]


def _inplace(fname: str) -> Callable[..., Any]:
    def op(self: AbstractArray, other: Any) -> Any:
        if STACK.recorder is not None:  # compile: the write itself is replayed
            return STACK.recorder.inplace(fname, self, other)
        new = getattr(ABSTRACT, fname)(self, other)  # the temporary NumPy avoids: an upper bound
        del new
        return self

    return op


# The Python operator behind each function an operator calls: on a backend's own arrays ``a * b``
# is not always ``multiply(a, b)`` (NumPy's 0-d results are scalars, whose operators use their
# own arithmetic), so a compile trace records the operator, and its replay calls that.
PYTHON_OPERATORS = {
    **{
        f: getattr(operator, op.rstrip("_") + ("_" if op in ("and", "or") else ""))
        for op, f in BINARY_OPERATORS.items()
    },
    **{f: getattr(operator, op) for op, f in COMPARISONS.items()},
    "negative": operator.neg,
    "positive": operator.pos,
    "abs": operator.abs,
    "bitwise_invert": operator.invert,
}


def _by_operator(self: AbstractArray, fname: str) -> Callable[..., Any]:
    if STACK.recorder is None:
        return getattr(ABSTRACT, fname)
    prim = REGISTRY[fname]
    return lambda *args: STACK.recorder.call(
        prim, prim.shape, args, {}, via=PYTHON_OPERATORS[fname]
    )


install_backend_operators(AbstractArray, _by_operator, _inplace)


def _outputs(r: Any) -> list[AbstractArray]:
    if isinstance(r, AbstractArray):
        return [r]
    if isinstance(r, tuple | list):
        return [o for e in r for o in _outputs(e)]
    return []


def _function(prim: Any) -> Callable[..., Any]:
    """The abstract backend's function for one row: its shape rule (read when called: the rules
    attach to the rows after this module is built), accounted."""
    name = prim.name

    def f(*args: Any, **kwargs: Any) -> Any:
        rule = prim.shape
        if rule is None:
            raise NotImplementedError(f"{name}: no shape rule, so it cannot be projected")
        if STACK.recorder is not None:  # compile: the call is recorded for the replay
            return STACK.recorder.call(prim, rule, args, kwargs)
        out = rule(ABSTRACT, *args, **kwargs)
        t = STACK.tracker
        if t is not None and (
            isinstance(out, AbstractArray | tuple | list) or (out is None and prim.memory)
        ):
            # (a query whose answer is no array, ``isdtype``'s bool, allocates nothing: no row;
            # a write in place, ``__setitem__``'s, makes no array but has its transients)
            transient, traced = transients(prim.memory, out, *args, **kwargs)
            t.call(name, _outputs(out), transient, traced)
        return out

    f.__name__ = f.__qualname__ = prim.short_name
    return f


def matmul_into_shape(x1: Any, x2: Any) -> tuple[int, ...]:
    """The shape of ``matmul(x1, x2)`` for operands of two or more axes; a clear error where
    they do not match."""
    if x1.ndim < 2 or x2.ndim < 2 or x1.shape[-1] != x2.shape[-2]:
        raise ValueError(
            f"matmul_into: operands {x1.shape} and {x2.shape} do not match: "
            "expected (..., n, k) and (..., k, m)"
        )
    return np.broadcast_shapes(x1.shape[:-2], x2.shape[:-2]) + (x1.shape[-2], x2.shape[-1])


class _Info:
    def capabilities(self) -> dict[str, Any]:
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": 64}

    def default_device(self) -> str:
        return "cpu"

    def default_dtypes(self, *, device: Any = None) -> dict[str, Any]:
        return {
            "real floating": np.dtype("float64"),
            "complex floating": np.dtype("complex128"),
            "integral": np.dtype("int64"),
            "indexing": np.dtype("int64"),
        }

    def dtypes(self, *, device: Any = None, kind: Any = None) -> dict[str, Any]:
        names: tuple[str, ...] | list[str] = DTYPE_NAMES
        if kind is not None:
            names = [n for n in names if ABSTRACT.isdtype(np.dtype(n), kind)]
        return {n: np.dtype(n) for n in names}

    def devices(self) -> list[str]:
        return ["cpu"]


ABSTRACT = ModuleType("abstract", "Arrays with a shape and a dtype, no data (pycograd_xp.memory).")


def populate() -> None:
    """Give :data:`ABSTRACT` one function per row of the table (``pycograd_xp.ops`` calls this
    once every row is declared)."""
    namespace_module(ABSTRACT, _function, _function)
    info = _Info()
    ABSTRACT.__dict__.update(
        {n: np.dtype(n) for n in DTYPE_NAMES},
        __array_api_version__="2025.12",
        __array_namespace_info__=lambda: info,
        e=math.e,
        inf=math.inf,
        nan=math.nan,
        pi=math.pi,
        newaxis=None,
        Array=AbstractArray,
    )


def c_order(d: Any) -> bool:
    """Whether the array ``d`` (a backend's, or an abstract one) is in C order: what the
    projection and compile's trace give an argument (NumPy copies one not in C order where a
    call needs one, and the rules count that copy)."""
    if isinstance(d, AbstractArray):
        return d.contiguous
    flags = getattr(d, "flags", None)
    return bool(getattr(flags, "c_contiguous", True))
