"""``project``, ``measure`` and what they return."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import math
import re
import resource
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import _api
from .._abstract import ABSTRACT, DTYPE_NAMES, AbstractArray, Tracker, matmul_into_shape
from .._state import STACK, Abstract, OnBackward, interpreting
from ..namespace import namespace
from ..namespace._array import Array, make
from ..namespace._backend import register_adapter
from ..tree import tree_flatten, tree_map


class Spec:
    """An abstract argument: a shape and a dtype (and, for chunked backends, chunks).

    A leaf of pytrees (not a dataclass, which pytrees would open). Made by :func:`spec`.

    Parameters
    ----------
    shape : tuple of int
        The shape.
    dtype : dtype or str, default "float64"
        Stored as a NumPy dtype (any dtype :func:`spec` takes).
    chunks : optional
        The chunks, for a chunked backend (Cubed).
    """

    __slots__ = ("shape", "dtype", "chunks")

    def __init__(self, shape: tuple[int, ...], dtype: Any = "float64", chunks: Any = None):
        self.shape, self.dtype, self.chunks = shape, _np_dtype(dtype, "Spec"), chunks

    def __repr__(self) -> str:
        tail = f", chunks={self.chunks}" if self.chunks is not None else ""
        return f"spec({self.shape}, {self.dtype.name}{tail})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Spec) and (self.shape, self.dtype, self.chunks) == (
            other.shape,
            other.dtype,
            other.chunks,
        )

    __hash__ = None  # type: ignore[assignment]

    @property
    def nbytes(self) -> int:
        """The bytes an array of this shape and dtype owns."""
        return math.prod(self.shape) * self.dtype.itemsize


def spec(shape: Sequence[int] | int, dtype: Any = "float64", chunks: Any = None) -> Spec:
    """An abstract argument of ``shape`` and ``dtype`` for :func:`project`: nothing is allocated.

    Parameters
    ----------
    shape : int or sequence of int
        The shape (an int: one dimension).
    dtype : dtype, default "float64"
        Any dtype a user may hold: the namespace's own (``xp.float32``), NumPy's scalar types and
        dtypes (``np.float32``, ``np.dtype("float32")``), a name (``"float32"``), Python's
        ``float``, ``int``, ``complex`` and ``bool`` (float64, int64, complex128, bool), and the
        dtype objects of array-api-strict and Cubed; one of the standard's data types.
    chunks : optional
        The chunks, for a chunked backend (Cubed).

    Returns
    -------
    Spec
        The abstract argument.

    Raises
    ------
    ValueError
        If a dimension is negative.
    TypeError
        If ``dtype`` is not one of the standard's data types.
    """
    shape = (shape,) if isinstance(shape, int) else tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"spec: shape {shape} has a negative dimension")
    return Spec(shape, _np_dtype(dtype, "spec"), chunks)


def _dtype_name(dtype: Any) -> str:
    """The NumPy name of a dtype object of any backend (see :func:`spec`)."""
    try:
        return np.dtype(dtype).name  # NumPy's dtypes and scalar types, names, Python's types
    except (TypeError, ValueError):
        return str(dtype).rsplit(".", 1)[-1]  # array_api_strict.float32, torch.float32


def _np_dtype(dtype: Any, where: str) -> np.dtype:
    name = _dtype_name(dtype)
    if name not in DTYPE_NAMES:
        raise TypeError(
            f"{where}: {dtype!r} is not one of the standard's data types "
            f"({', '.join(DTYPE_NAMES)}); pass one as your namespace's dtype "
            "(xp.float32), a NumPy dtype or its name"
        )
    return np.dtype(name)


# Python's own objects live during a step beside the arrays' data: wrappers, tape nodes, frames,
# NumPy's array headers. tracemalloc counts them; the projection allows for them with a fixed
# part and a part per backend call (measured: docs/calibration.md#overhead).
OVERHEAD_FIXED = 24 * 1024
OVERHEAD_PER_CALL = 256


def _overhead(calls: int) -> int:
    """The allowance for ``calls`` backend calls; a call that returns several arrays counts once
    more for each output beyond its first (each holds a header and a wrapper as long as it
    lives: ``unstack``'s views; see :func:`_calls`)."""
    return OVERHEAD_FIXED + OVERHEAD_PER_CALL * calls


def _calls(rows: Sequence[Any]) -> int:
    """Calls to allow for (:func:`_overhead`): one per row, plus its outputs beyond the first."""
    return sum(max(1, len(r.outputs)) for r in rows)


class MemoryLimitError(ValueError):
    """A projected peak over the limit (raised before anything runs, by
    :meth:`Projection.check`)."""


@dataclass(frozen=True)
class Row:
    """One backend call of the projected step.

    Parameters
    ----------
    index : int
        Its position in the schedule.
    op : str
        The function called.
    phase : str
        ``"forward"``, ``"backward"`` or ``"update"`` (what runs after the backward pass: a
        step's optimizer update).
    outputs : list of (shape, dtype, bytes)
        Each output's shape, dtype name and the bytes it owns (0: a view).
    transient_bytes : int
        Allocated by the call beyond its outputs, while it runs.
    live_bytes : int
        Live right after the call.
    peak_bytes : int
        Live at the most, during the call.
    """

    index: int
    op: str
    phase: str  # "forward", "backward" or "update"
    outputs: list[tuple[tuple[int, ...], str, int]]  # (shape, dtype, bytes it owns: 0 = a view)
    transient_bytes: int  # allocated by the call beyond its outputs, while it runs
    live_bytes: int  # live right after the call
    peak_bytes: int  # live at the most, during the call


_UNITS = ("B", "kB", "MB", "GB", "TB", "PB")


def _sig3(v: float) -> int:
    """Decimals that show three significant figures of ``v`` (below 1000)."""
    v = abs(v)
    return 0 if v >= 99.95 else 1 if v >= 9.995 else 2


def _unit(n: float, decimals: int | None) -> int:
    """The unit ``n`` bytes read in: the largest whose figure does not round to 1000."""
    top = 999.5 if decimals is None else 1000 - 0.5 * 10.0**-decimals
    i = 0
    while i < len(_UNITS) - 1 and abs(n) >= top * 1000**i:
        i += 1
    return i


def format_bytes(n: float, *, decimals: int | None = None) -> str:
    """``n`` bytes in decimal units (kB = 1000 B, as Cubed's).

    Parameters
    ----------
    n : float
        A number of bytes.
    decimals : int, optional
        Fixed decimals ("152.3 MB", "1.0 MB" with ``decimals=1``); None: three significant
        figures ("152 MB", "1.23 GB", "60.0 MB").

    Returns
    -------
    str
        The figure and its unit; exact below 1 kB ("999 B").

    Examples
    --------
    >>> from pycograd_xp.memory import format_bytes
    >>> format_bytes(152_300_000), format_bytes(152_300_000, decimals=1), format_bytes(999)
    ('152 MB', '152.3 MB', '999 B')
    """
    i = _unit(n, decimals)
    if i == 0:
        return f"{n:.0f} B"
    v = n / 1000**i
    return f"{v:.{_sig3(v) if decimals is None else decimals}f} {_UNITS[i]}"


def format_byte_pair(a: float, b: float) -> tuple[str, str]:
    """``a`` and ``b`` as :func:`format_bytes` writes them, with more figures while they would read
    the same though they differ.

    In one unit (100.4 MB against 100 MB reads "100.4 MB" and "100.0 MB", never "100 MB" and
    "100 MB"); in bytes when only bytes tell them apart. For a figure compared with a limit in an
    error message.

    Parameters
    ----------
    a, b : float
        Two numbers of bytes.

    Returns
    -------
    tuple of str
        The two figures.
    """
    sa, sb = format_bytes(a), format_bytes(b)
    if sa != sb or a == b:
        return sa, sb
    i = _unit(max(abs(a), abs(b)), None)
    scale = 1000**i
    d = _sig3(max(abs(a), abs(b)) / scale)
    while 10**d < scale:
        d += 1
        sa, sb = f"{a / scale:.{d}f} {_UNITS[i]}", f"{b / scale:.{d}f} {_UNITS[i]}"
        if sa != sb:
            return sa, sb
    return f"{int(a):,} B", f"{int(b):,} B"


def _fmt(n: float) -> str:  # the report's columns: one decimal
    return format_bytes(n, decimals=1)


@contextlib.contextmanager
def before_backward(callback: Callable[[], None]) -> Iterator[None]:
    """Within the block, ``callback()`` is called as each backward pass begins.

    Each backward pass of ``grad``, ``value_and_grad`` or ``vjp``, after the forward pass built its
    graph: a planner tells the ops of the forward pass from those of the backward pass so.
    Restores the callback that was set before on exit.

    Parameters
    ----------
    callback : callable
        Called with no arguments.

    Yields
    ------
    None
        A context manager.
    """
    with interpreting(OnBackward(callback)):
        yield


_BYTE_UNITS = {
    "": 1,
    "b": 1,
    **{p + "b": 1000**i for i, p in enumerate("kmgtp", 1)},
    **{p: 1000**i for i, p in enumerate("kmgtp", 1)},
    **{p + "ib": 1024**i for i, p in enumerate("kmgtp", 1)},
    **{p + "i": 1024**i for i, p in enumerate("kmgtp", 1)},
}


def parse_bytes(limit: int | float | str) -> int:
    """``limit`` as bytes, read as Dask's ``parse_bytes`` reads it.

    Parameters
    ----------
    limit : int, float or str
        A number, or a string: a number (``"1e5"``, ``"1.5"``) and a unit, any case, with or
        without a space: ``"2GB"``, ``"512 MiB"``, ``"100kB"``, ``"100KB"``, ``"150mb"``,
        ``"5k"`` (kB = 1000 B, KiB = 1024 B; no unit: bytes).

    Returns
    -------
    int
        The bytes.

    Raises
    ------
    ValueError
        If the string cannot be read.
    """
    if isinstance(limit, int | float):
        return int(limit)
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]*)\s*", limit)
    scale = _BYTE_UNITS.get(m.group(2).lower()) if m else None
    if m is None or scale is None:
        raise ValueError(
            f"cannot read {limit!r} as a number of bytes: a number and a unit such as 2GB, "
            "512MiB, 100kB or 1e5 (no unit: bytes)"
        )
    return int(float(m.group(1)) * scale)


@dataclass
class Projection:
    """Projected memory of ``f`` and of its ``value_and_grad`` step (bytes, upper bounds).

    Or, for ``f`` taken as it is (``what`` is ``"as is"`` or ``"compiled replay"``, see
    :func:`project`), of one call of ``f``: then the forward figures are the call's own. Every
    figure counts everything live at that moment, the arguments included. ``str()`` of it is a
    table, one row per backend call.

    Parameters
    ----------
    forward_peak_bytes : int
        Evaluating ``f`` alone, no tape.
    peak_bytes : int
        The whole ``value_and_grad`` step (as is: the call).
    residual_bytes : int
        What the tape holds between the forward and the backward pass.
    argument_bytes : int
        The arguments (live throughout).
    overhead_bytes : int
        Allowed for Python's objects (included in the peaks above).
    traced_forward_peak_bytes, traced_peak_bytes : int
        The same peaks without what C libraries allocate by themselves (LAPACK and pocketfft
        workspaces): what tracemalloc can see, the scale of ``Measurement.peak_bytes``.
    peak_op : tuple of (str, str, int)
        (op, phase, row index) at the peak of the step.
    rows : list of Row
        The step, one row per backend call.
    forward_rows : list of Row
        ``f`` alone.
    what : str, default "value_and_grad"
        What was projected: ``"value_and_grad"``, ``"as is"``, ``"compiled replay"``.
    """

    forward_peak_bytes: int  # evaluating f alone, no tape
    peak_bytes: int  # the whole value_and_grad step (as is: the call)
    residual_bytes: int  # what the tape holds between the forward and the backward pass
    argument_bytes: int  # the arguments (live throughout)
    overhead_bytes: int  # allowed for Python's objects (included in the peaks above)
    # The same peaks without what C libraries allocate by themselves (LAPACK and pocketfft
    # workspaces): what tracemalloc can see, the scale of Measurement.peak_bytes.
    traced_forward_peak_bytes: int
    traced_peak_bytes: int
    peak_op: tuple[str, str, int]  # (op, phase, row index) at the peak of the step
    rows: list[Row] = field(repr=False)  # the step, one row per backend call
    forward_rows: list[Row] = field(repr=False)  # f alone
    what: str = "value_and_grad"  # what was projected: "value_and_grad", "as is", "compiled replay"

    def check(self, limit: int | float | str) -> Projection:
        """Raise :class:`MemoryLimitError` (before anything runs) if the step's projected peak
        exceeds ``limit``.

        Parameters
        ----------
        limit : int, float or str
            Bytes, or a string such as ``"2GB"`` (:func:`parse_bytes`).

        Returns
        -------
        Projection
            Self, for chaining.

        Raises
        ------
        MemoryLimitError
            Naming the op at the peak, the projected peak and the limit.
        """
        n = parse_bytes(limit)
        if self.peak_bytes > n:
            op, phase, i = self.peak_op
            raise MemoryLimitError(
                f"projected peak {_fmt(self.peak_bytes)} ({self.peak_bytes} bytes) at {op} "
                f"(row {i}, {phase}) exceeds the limit {_fmt(n)} ({n} bytes); reduce the batch, "
                "wrap segments in pycograd_xp.remat, or raise the limit"
            )
        return self

    def plot(
        self, path: str | None = None, measured: Measurement | None = None, title: str | None = None
    ) -> Any:
        """Live bytes over the op schedule, projected and measured, on one scale.

        One panel for ``f`` alone (no tape) and one for the ``value_and_grad`` step (its
        forward pass, which keeps the tape's residuals, and its backward pass, shaded), each
        with its projected peak and, when ``measured`` is given, its measured peak; ``f`` taken
        as it is draws one panel (the call). Needs matplotlib (the ``plot`` extra).

        Parameters
        ----------
        path : str, optional
            Where to save the figure (PNG, ...).
        measured : Measurement, optional
            Measured peaks to draw beside the projected ones.
        title : str, optional
            The title (default: the step, and where its peak happens).

        Returns
        -------
        matplotlib.figure.Figure
            The figure.

        Raises
        ------
        ImportError
            Without matplotlib.
        """
        try:
            import matplotlib

            if path is not None:
                matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError as e:
            raise ImportError(
                "Projection.plot needs matplotlib: pip install 'pycograd-xp[plot]'"
            ) from e
        both = self.what == "value_and_grad"
        panels = []
        if both:
            forward_measured = None if measured is None else measured.forward_peak_bytes
            panels.append(
                ("f alone, no tape", self.forward_rows, self.forward_peak_bytes, forward_measured)
            )
        panels.append(
            (
                "value_and_grad step" if both else "one call of f, as it is",
                self.rows,
                self.peak_bytes,
                None if measured is None else measured.peak_bytes,
            )
        )
        fig, axes = plt.subplots(
            len(panels), 1, figsize=(8, 3 + 2.5 * both), sharey=True, squeeze=False
        )
        for ax, (what, rows, peak, measured_peak) in zip(axes[:, 0], panels, strict=True):
            _plot_panel(ax, what, rows, peak, measured_peak)
        top = max(max([p[2], p[3] or 0, *(r.peak_bytes for r in p[1])]) for p in panels)
        axes[0, 0].set_ylim(0, top * 1e-6 * 1.05)  # one scale, from zero: the panels compare
        axes[-1, 0].set_xlabel("backend call")
        fig.suptitle(
            title or f"{panels[-1][0]}: peak at {self.peak_op[0]} ({self.peak_op[1]})",
            fontsize=10,
        )
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=120)
            plt.close(fig)
        return fig

    def as_dict(self) -> dict[str, Any]:
        """The projection as plain data (``dataclasses.asdict``), rows included.

        Returns
        -------
        dict
            Field name to value.
        """
        return dataclasses.asdict(self)

    def __str__(self) -> str:
        op, phase, i = self.peak_op
        alone = {
            "as is": "f as it is, no gradient added",
            "compiled replay": "f's compiled replay",
        }.get(self.what, f"forward alone {_fmt(self.forward_peak_bytes)}")
        at_row = (
            f"row {i}, {phase}: {_fmt(self.rows[i].peak_bytes)} in arrays + "
            f"{_fmt(self.overhead_bytes)} for Python's objects"
            if 0 <= i < len(self.rows)
            else f"{phase}"
        )
        head = [
            f"projected step: peak {_fmt(self.peak_bytes)} at {op} ({at_row}); {alone}; tape "
            f"holds {_fmt(self.residual_bytes)} between passes; arguments "
            f"{_fmt(self.argument_bytes)}",
            f"{'#':>4} {'phase':8} {'op':24} {'outputs':34} {'owns':>9} {'transient':>9} "
            f"{'live':>9} {'peak':>9}",
        ]
        lines = []
        for r in self.rows:
            outs = ", ".join(f"{d}{list(s)}" for s, d, _ in r.outputs) or "-"
            if len(outs) > 34:  # the first output and how many more, not a cut one
                more = f" +{len(r.outputs) - 1} more" if len(r.outputs) > 1 else ""
                s0, d0, _ = r.outputs[0]
                outs = f"{d0}{list(s0)}"[: 34 - len(more)] + more
            owned = sum(b for *_, b in r.outputs)
            mark = " <- peak" if r.index == i else ""
            lines.append(
                f"{r.index:>4} {r.phase:8} {r.op[:24]:24} {outs[:34]:34} "
                f"{_fmt(owned):>9} {_fmt(r.transient_bytes):>9} "
                f"{_fmt(r.live_bytes):>9} {_fmt(r.peak_bytes):>9}{mark}"
            )
        return "\n".join(head + lines)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))


def _adapt_abstract(b: Any) -> Any:
    def index_add(size: int, flat_index: Any, values: Any) -> Any:
        if STACK.recorder is not None:  # compile: the replay calls the backend's own
            return STACK.recorder.index_add(size, flat_index, values)
        return ABSTRACT.zeros((size,), dtype=values.dtype)  # NumPy: zeros, then add.at in place

    def matmul_into(x1: Any, x2: Any, out: Any) -> Any:
        if STACK.recorder is not None:  # compile: the replay calls the backend's own
            return STACK.recorder.matmul_into(x1, x2, out)
        shape = matmul_into_shape(x1, x2)
        if shape != out.shape or np.result_type(x1.dtype, x2.dtype) != out.dtype:
            raise ValueError(
                f"matmul_into: the product of {x1.shape} and {x2.shape} is no "
                f"{out.shape} {out.dtype} array"
            )
        if STACK.tracker is not None:  # NumPy: straight into out, nothing allocated
            STACK.tracker.call("matmul_into", [], 0)
        return out

    # an abstract array owns its (modelled) memory when it is no view: the tape may then hand
    # a rule its cotangent to write into, as on NumPy, and the model counts no second array
    return dataclasses.replace(
        b,
        abstract=True,
        mutable=True,
        views_alias=True,
        ordered_writes=True,
        index_add=index_add,
        matmul_into=matmul_into,
        owns_buffer=lambda a: getattr(a, "base", 0) is None,
        # NumPy's ufuncs and functions in a function projected or compiled (np.exp(x)): the
        # rows, as on namespace(numpy), whose calls the abstract arrays stand for
        numpy_functions=True,
    )


register_adapter("abstract", _adapt_abstract)


def abstract_namespace() -> Any:
    """The differentiable namespace over abstract arrays."""
    return namespace(ABSTRACT)


def _to_abstract(A: Any, leaf: Any) -> Any:
    if isinstance(leaf, Spec):
        return make(A.Array, AbstractArray(leaf.shape, _dtype_name(leaf.dtype)))
    if isinstance(leaf, Array):
        if leaf._backend.abstract:
            return leaf
        # a real array keeps its layout: a transposed or strided view is no C-ordered array
        # (NumPy copies it where a call needs one, and the rules count that copy)
        flags = getattr(leaf._data, "flags", None)
        contiguous = bool(getattr(flags, "c_contiguous", True))
        return make(
            A.Array, AbstractArray(leaf.shape, _dtype_name(leaf.dtype), contiguous=contiguous)
        )
    return leaf


def _rows(tracker: Tracker) -> list[Row]:
    return [
        Row(i, e.op, e.phase, e.outputs, e.transient, e.live, e.peak)
        for i, e in enumerate(tracker.events)
    ]


def _peak_op(tracker: Tracker) -> tuple[str, str, int]:
    i = tracker.peak_event
    if 0 <= i < len(tracker.events):
        e = tracker.events[i]
        return (e.op, e.phase, i)
    return ("arguments", "forward", -1)


def _chunked_backend(args: Any, kwargs: dict, backend: Any) -> Any:
    """The chunked backend whose own plan projects this step (None: the eager model)."""
    found = None
    if backend is not None:
        module = (
            backend
            if hasattr(backend, "__array_api_version__")
            else importlib.import_module(type(backend).__module__.split(".")[0])
        )  # a backend's Spec
        found = namespace(module)._backend
    for leaf in tree_flatten((args, kwargs))[0]:
        if isinstance(leaf, Array) and leaf._backend.chunked:
            found = leaf._backend
    if found is None or not found.chunked:
        if any(
            isinstance(leaf, Spec) and leaf.chunks is not None
            for leaf in tree_flatten((args, kwargs))[0]
        ):
            raise ValueError(
                "project: specs with chunks need a chunked backend: pass "
                "backend=cubed (or a cubed.Spec)"
            )
        return None
    if found.projector is None:
        raise NotImplementedError(f"project: the {found.name} backend registers no projector")
    return found


# A function that differentiates inside (``train.make_step``'s steps) carries this attribute:
# ``project`` and ``measure`` then take it as it is by default (``argnums=()``).
AS_IS = "_pycograd_as_is"


def _name(f: Any) -> str:
    return getattr(f, "__name__", type(f).__name__)


def _compiled(f: Any) -> bool:
    """Whether ``f`` is a compiled function (``pycograd_xp.compile``): one that gives its replay
    plan. Asked of the object, so that memory, below compile, does not import it."""
    return callable(getattr(f, "replay_plan", None)) and callable(getattr(f, "source", None))


def _which(f: Any, argnums: int | Sequence[int] | None) -> int | tuple[int, ...]:
    """``argnums`` resolved: None is ``()`` for compiled functions and for functions that
    differentiate inside, ``0`` otherwise."""
    if argnums is None:
        return () if _compiled(f) or getattr(f, AS_IS, False) else 0
    return argnums if isinstance(argnums, int) else tuple(argnums)


def _check_loss(out: Any, where: str) -> None:
    """A ``value_and_grad`` step needs a scalar loss: say the way out before it fails."""
    if isinstance(out, Array) and out.shape == ():
        return  # value_and_grad itself checks the dtype
    if isinstance(out, Array):
        what = f"an array of shape {out.shape}"
    elif isinstance(out, tuple | list | dict):
        what = f"a {type(out).__name__} of {len(out)} items"
    else:
        what = f"a {type(out).__name__}"
    raise TypeError(
        f"{where}: the function returned {what}, not a scalar loss, so it has no "
        "value_and_grad step. To take the function as it is, forward only with no gradient "
        "added (a training step that differentiates inside, a function returning a pytree), "
        "pass argnums=(); for the gradient step of a loss, pass the loss function (returning "
        "a 0-d array)"
    )


def _forward_pass(f: Callable[..., Any], where: str) -> Callable[..., Any]:
    """``f`` alone, without a tape, its output checked to be a scalar loss."""

    def forward(*args: Any, **kwargs: Any) -> Any:
        with _api.no_grad():
            out = f(*args, **kwargs)
        _check_loss(out, where)
        return out

    return forward


def _tracked(
    call: Callable[..., Any], A: Any, args: tuple, kwargs: dict
) -> tuple[Tracker, int, int | None]:
    """Run ``call`` on abstract copies of ``args`` under a fresh tracker: the tracker, the
    arguments' bytes, and the bytes live when the first backward pass began (None: none did)."""
    t = Tracker()
    boundary: list[int] = []

    def mark() -> None:
        if not boundary:
            boundary.append(t.live)
        t.phase = "backward"

    def after() -> None:  # what runs after the backward pass: a step's optimizer update
        t.phase = "update"

    with interpreting(Abstract(A, t), OnBackward(mark, after)):
        a_args = tree_map(lambda leaf: _to_abstract(A, leaf), args)
        a_kwargs = tree_map(lambda leaf: _to_abstract(A, leaf), kwargs)
        argument_bytes = t.live
        result = call(*a_args, **a_kwargs)
        del result, a_args, a_kwargs
    return t, argument_bytes, boundary[0] if boundary else None


def _replay(f: Any, A: Any, args: tuple, kwargs: dict) -> Projection:
    """A compiled function as it is: the peak ``compile`` projects for the replay it generates
    for arguments of these shapes (``Trace.peak_bytes``), one row per replayed backend call."""
    forward: list[set[int]] = []  # the calls recorded before the first backward pass began

    ended: list[set[int]] = []  # the calls recorded before the first backward pass ended

    def mark() -> None:
        if not forward and STACK.recorder is not None:
            forward.append({id(c) for c in STACK.recorder.calls})

    def after() -> None:
        if not ended and STACK.recorder is not None:
            ended.append({id(c) for c in STACK.recorder.calls})

    def phase(c: Any) -> str:
        if not forward or id(c) in forward[0]:
            return "forward"
        return "backward" if not ended or id(c) in ended[0] else "update"

    events: list[tuple] = []
    with interpreting(Abstract(A), OnBackward(mark, after)):
        a_args = tree_map(lambda leaf: _to_abstract(A, leaf), args)
        a_kwargs = tree_map(lambda leaf: _to_abstract(A, leaf), kwargs)
        plan = f.replay_plan(a_args, a_kwargs, events)
    rows = [
        Row(i, name, phase(c), outs, transient, live, peak)
        for i, (c, name, outs, transient, live, peak) in enumerate(events)
    ]
    top = max(range(len(rows)), key=lambda i: rows[i].peak_bytes, default=-1)
    peak_op = (
        (rows[top].op, rows[top].phase, top)
        if top >= 0 and rows[top].peak_bytes > plan.argument_bytes
        else ("arguments", "forward", -1)
    )
    first = next((r.index for r in rows if r.phase == "backward"), None)
    held = rows[first - 1].live_bytes if first else plan.argument_bytes  # first: None or a row
    overhead = _overhead(_calls(rows))
    return Projection(
        forward_peak_bytes=plan.peak_bytes,
        peak_bytes=plan.peak_bytes,
        residual_bytes=held - plan.argument_bytes,
        argument_bytes=plan.argument_bytes,
        overhead_bytes=overhead,
        traced_forward_peak_bytes=plan.peak_bytes,
        traced_peak_bytes=plan.peak_bytes,
        peak_op=peak_op,
        rows=rows,
        forward_rows=rows,
        what="compiled replay",
    )


def project(
    f: Callable[..., Any],
    *args: Any,
    argnums: int | Sequence[int] | None = None,
    backend: Any = None,
    **kwargs: Any,
) -> Projection:
    """Project the memory of ``f(*args, **kwargs)`` and of its ``value_and_grad`` step, without
    running it.

    ``f`` runs on abstract arrays (a function that takes its namespace from a module-level ``xp``
    works too: the calls move to the abstract namespace). The model is NumPy's (the eager
    default): which calls make views, which allocate, and the transients each row declares;
    where a row's rule is not measured for an input's layout or dtype mix, it charges the
    conservative term (docs/calibration.md#unknown-worst-case).

    Not seen: arrays made by plain NumPy (or any other library) inside ``f``, from Python values
    rather than through the namespace, are not in the projection. Make them outside ``f`` and
    pass them in as arguments, or make them with the namespace (``xp.ones``). A call that needs
    values (a NumPy function with no rule, a library that converts its argument) refuses,
    naming the function and that way out; an ``optim.lbfgs`` step projects from one evaluation
    and what the step holds beside it.

    Parameters
    ----------
    f : callable
        The function: a loss, or (``argnums=()``) anything.
    *args : Array, Spec, or pytree of them
        Arrays of any pycograd_xp namespace, :func:`spec` objects, other values (Python numbers:
        a step count in an optimizer's state), or pytrees of them; only their shapes and dtypes
        are read.
    argnums : int, sequence of int, or None, default None
        What is projected:

        - an int or a sequence of ints: ``f`` (a loss: it must return a 0-d array) alone, and its
          ``value_and_grad(f, argnums)`` step (``peak_bytes``);
        - ``()``: ``f`` as it is, with no gradient added, as ``jax.jit(f).lower(...)`` would see
          it: a whole training step that differentiates inside, or any function returning a
          pytree. ``peak_bytes`` is the peak of one call, its results and arguments included (an
          optimizer's state among them: Adam's two moments). For a compiled function
          (``pycograd_xp.compile``) it is the peak of the replay ``compile`` generates for
          arguments of these shapes (``Trace.peak_bytes``, freed at last use), one row per
          replayed backend call;
        - None: ``()`` for compiled functions and for the steps ``pycograd_xp.train.make_step``
          makes, ``0`` otherwise. So, with ``tx = optim.adam(lr)``::

              memory.project(make_step(loss, tx), param_specs, tx.init(param_specs), batch_specs)
    backend : optional
        ``cubed`` or a ``cubed.Spec``, to project chunked specs on a chunked backend.
    **kwargs : Any
        Keyword arguments of ``f`` (likewise abstract).

    Returns
    -------
    Projection
        The projected peaks, the tape between the passes, the op at the peak and every row. On a
        chunked backend (Cubed arrays among ``args``, or ``backend=cubed`` / a ``cubed.Spec`` with
        chunked specs) the step is projected per task in the backend's own terms and a
        ``cubed_plugin.memory.ChunkedProjection`` is returned.

    Raises
    ------
    NotImplementedError
        For ``argnums=()`` on a chunked backend (only a gradient step is projected there).

    See Also
    --------
    measure : the same figures, measured on a real run.

    Examples
    --------
    >>> import numpy, pycograd_xp as pg
    >>> from pycograd_xp import memory
    >>> xp = pg.namespace(numpy)
    >>> def loss(w, x):
    ...     return xp.mean(xp.tanh(x @ w) ** 2)
    >>> p = memory.project(loss, memory.spec((512, 256)), memory.spec((1024, 512)))
    >>> p.argument_bytes
    5242880
    >>> p.peak_bytes > p.forward_peak_bytes > p.argument_bytes
    True
    >>> p.check("1GB").peak_op[1] in ("forward", "backward")
    True
    """
    where = f"memory.project({_name(f)})"
    # a method that projects itself from what it runs (optim.lbfgs's step: its line search
    # decides on values)
    hook, owner = getattr(f, "projects_as", None), getattr(f, "__self__", None)
    if hook is not None and owner is not None:
        return hook(owner, *args, **kwargs)
    nums = _which(f, argnums)
    chunked = _chunked_backend(args, kwargs, backend)
    if chunked is not None:
        if nums == ():
            raise NotImplementedError(
                f"{where}: on a chunked backend only a gradient step is projected; project "
                "the loss (argnums=0, its chunked specs) and add the optimizer's state, which "
                "stays in memory, to the parameters' bytes"
            )
        return chunked.projector(f, *args, argnums=nums, backend=backend, **kwargs)
    A = abstract_namespace()
    if nums == () and _compiled(f):
        return _replay(f, A, args, kwargs)
    if nums == ():
        step, argument_bytes, boundary = _tracked(f, A, args, kwargs)
        fwd = step
    else:
        fwd = _tracked(_forward_pass(f, where), A, args, kwargs)[0]
        step, argument_bytes, boundary = _tracked(_api.value_and_grad(f, nums), A, args, kwargs)
    overhead = _overhead(_calls(step.events))
    if boundary is None:
        boundary = argument_bytes if nums == () else step.live
    return Projection(
        forward_peak_bytes=fwd.peak + _overhead(_calls(fwd.events)),
        peak_bytes=step.peak + overhead,
        residual_bytes=boundary - argument_bytes,
        argument_bytes=argument_bytes,
        overhead_bytes=overhead,
        traced_forward_peak_bytes=fwd.traced_peak + _overhead(_calls(fwd.events)),
        traced_peak_bytes=step.traced_peak + overhead,
        peak_op=_peak_op(step),
        rows=_rows(step),
        forward_rows=_rows(fwd),
        what="value_and_grad" if nums != () else "as is",
    )


@dataclass(frozen=True)
class Measurement:
    """Measured peaks of ``f`` and of its ``value_and_grad`` step, on the scale of
    :class:`Projection` (bytes live at the most, the arguments included).

    The peaks are tracemalloc's (every allocation NumPy and Python make: compare them with
    ``Projection.traced_*``). Beside them, the growth of the process's resident set (Linux: its
    peak is reset through ``/proc/self/clear_refs``), what users see: it also holds what C
    libraries allocate by themselves and what the allocator keeps, and moves with page faults.

    Parameters
    ----------
    forward_peak_bytes : int
        ``f`` alone.
    peak_bytes : int
        The whole step (as is: the call).
    argument_bytes : int
        The arguments.
    resident_forward_peak_bytes : int or None
        ``f`` alone, by resident-set growth (None: not on Linux).
    resident_peak_bytes : int or None
        The step, likewise.
    minor_page_faults : int
        During the step (allocator churn shows here, not in tracemalloc).
    """

    forward_peak_bytes: int
    peak_bytes: int
    argument_bytes: int
    resident_forward_peak_bytes: int | None  # by resident-set growth (None: not on Linux)
    resident_peak_bytes: int | None
    minor_page_faults: int  # during the step (allocator churn shows here, not in tracemalloc)


def _plot_panel(ax: Any, what: str, rows: list[Row], peak: int, measured_peak: int | None) -> None:
    """One panel of :meth:`Projection.plot`: ``rows``' live bytes, its peaks, every label
    naming ``what`` it is about."""
    mb = 1e-6
    x = [r.index for r in rows]
    ax.step(
        x, [r.live_bytes * mb for r in rows], where="post", color="black", label="projected live"
    )
    ax.plot(
        x,
        [r.peak_bytes * mb for r in rows],
        ".",
        color="gray",
        markersize=3,
        label="projected during each call",
    )
    first = x[0] if x else 0
    start = 0
    for phase, color in (
        ("forward", "tab:blue"),
        ("backward", "tab:orange"),
        ("update", "tab:olive"),
    ):
        end = start
        while end < len(rows) and rows[end].phase == phase:
            end += 1
        if end > start:  # the phases come in this order, each a run of rows
            ax.axvspan(first + start - 0.5, first + end - 0.5, color=color, alpha=0.08, label=phase)
        start = end
    ax.axhline(peak * mb, color="tab:red", lw=1, label=f"projected peak of {what} {_fmt(peak)}")
    if measured_peak is not None:
        ax.axhline(
            measured_peak * mb,
            color="tab:green",
            lw=1,
            ls="--",
            label=f"measured peak of {what} {_fmt(measured_peak)}",
        )
    ax.set_ylabel("MB live")
    ax.set_title(what, fontsize=9, loc="left")
    ax.legend(fontsize=7, loc="lower right", ncols=2)


def _nbytes(tree: Any) -> int:
    return sum(int(leaf._data.nbytes) for leaf in tree_flatten(tree)[0] if isinstance(leaf, Array))


def _status(field: str) -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _reset_resident_peak() -> int | None:
    """Reset the resident-set peak (VmHWM) to the current size; return that size."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        return None
    return _status("VmRSS")


def _resident_growth(start: int | None) -> int:
    peak = _status("VmHWM") if start is not None else None
    return 0 if peak is None or start is None else max(0, peak - start)


def _measured(run: Callable[[], Any]) -> tuple[int, int | None, int]:
    """Run ``run()`` under tracemalloc (already started): its traced peak above what was live
    before, its resident-set growth (None: not on Linux) and the minor page faults."""
    base = tracemalloc.get_traced_memory()[0]
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    tracemalloc.reset_peak()
    rss = _reset_resident_peak()
    result = run()
    growth = _resident_growth(rss) if rss is not None else None
    traced = tracemalloc.get_traced_memory()[1] - base
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    del result
    return traced, growth, faults


def measure(
    f: Callable[..., Any], *args: Any, argnums: int | Sequence[int] | None = None, **kwargs: Any
) -> Measurement:
    """Run ``f`` and its ``value_and_grad`` step on the real arrays ``args`` and measure their peak
    bytes, arguments included.

    Measured with tracemalloc, and resident-set growth where the platform tells it; on a device
    backend, its own allocator (CuPy's memory pool). Taken as it is, ``f`` runs once and its
    forward peak is its peak; a compiled function is traced before it is measured, so the figures
    are the replay's. tracemalloc and the resident set are the whole process's: another thread
    that allocates meanwhile (a Dask LocalCluster's event loop, which
    ``cubed_plugin.fit(executor="dask")`` keeps for the process) adds its bytes to the figures.

    Parameters
    ----------
    f : callable
        The function, as for :func:`project`.
    *args : Array or pytree of Array
        The real arguments.
    argnums : int, sequence of int, or None, default None
        As in :func:`project`, the same default (``()``: ``f`` as it is).
    **kwargs : Any
        Keyword arguments of ``f``.

    Returns
    -------
    Measurement
        The measured peaks.
    """
    where = f"memory.measure({_name(f)})"
    nums = _which(f, argnums)
    argument_bytes = _nbytes(args) + _nbytes(kwargs)
    if nums == ():
        if _compiled(f):
            f.source(*args, **kwargs)  # type: ignore[attr-defined]  # traces, does not run
        runs = [lambda: f(*args, **kwargs)]
    else:
        runs = [
            lambda: _forward_pass(f, where)(*args, **kwargs),
            lambda: _api.value_and_grad(f, nums)(*args, **kwargs),
        ]
    device = next(
        (
            leaf._backend.device_peak
            for leaf in tree_flatten((args, kwargs))[0]
            if isinstance(leaf, Array) and leaf._backend.device_peak
        ),
        None,
    )
    if device is not None:  # a device backend measures with its own allocator (CuPy's pool)
        peaks = [device(run) + argument_bytes for run in runs]
        return Measurement(peaks[0], peaks[-1], argument_bytes, None, None, 0)
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    try:
        measured = [_measured(run) for run in runs]
    finally:
        if not was_tracing:
            tracemalloc.stop()
    (forward, forward_rss, _), (step, step_rss, faults) = measured[0], measured[-1]
    return Measurement(
        forward + argument_bytes,
        step + argument_bytes,
        argument_bytes,
        forward_rss + argument_bytes if forward_rss is not None else None,
        step_rss + argument_bytes if step_rss is not None else None,
        faults,
    )
