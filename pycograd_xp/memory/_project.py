"""``project``: ``f`` and its gradient step run on abstract arrays through the same rows and
tape as a real step, every array's lifetime followed."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from .. import _api
from .._abstract import ABSTRACT, AbstractArray, Tracker, c_order, matmul_into_shape
from .._state import STACK, Abstract, OnBackward, interpreting
from ..namespace import namespace
from ..namespace._array import Array, make
from ..namespace._backend import register_adapter
from ..tree import tree_flatten, tree_map
from ._report import Projection, Row, _calls, _overhead
from ._spec import Spec, _dtype_name


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

    def owns_buffer(a: Any) -> bool:
        if getattr(a, "base", 0) is not None:
            return False
        if STACK.recorder is not None:  # compile: as the target backend, made sure of
            return bool(STACK.recorder.claim(a))
        return True

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
        owns_buffer=owns_buffer,
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
        contiguous = c_order(leaf._data)
        return make(
            A.Array, AbstractArray(leaf.shape, _dtype_name(leaf.dtype), contiguous=contiguous)
        )
    return leaf


def _modelled(tree: Any) -> Any:
    """The first real array in ``tree``, whose backend the projection models, or None (specs
    alone: NumPy's model)."""
    for leaf in tree_flatten(tree)[0]:
        if isinstance(leaf, Array) and not leaf._backend.abstract:
            return leaf
    return None


def _modelled_backend(tree: Any) -> Any:
    """The Backend of the first real array in ``tree`` (see :func:`_modelled`), or None."""
    leaf = _modelled(tree)
    return None if leaf is None else leaf._backend


def _rows(tracker: Tracker) -> list[Row]:
    return [
        Row(i, e.op, e.phase, e.outputs, e.transient, e.live, e.peak, e.objects)
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
    t = Tracker(target=_modelled_backend((args, kwargs)))
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
        leaf = _modelled((args, kwargs))  # the replay generated for the arguments' backend
        plan = f.replay_plan(a_args, a_kwargs, events, None if leaf is None else leaf._ns)
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
        Arrays of any pycograd_xp namespace, :func:`~pycograd_xp.memory.spec` objects, other
        values (Python numbers: a step count in an optimizer's state), or pytrees of them; only
        their shapes and dtypes are read.
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


def step_peak(
    f: Callable[..., Any], args: tuple, kwargs: dict, nums: int | tuple[int, ...]
) -> tuple[int, tuple[str, str, int]]:
    """The projected peak of ``f``'s step (as :func:`project`'s ``peak_bytes``) and its op,
    without the forward pass alone nor the rows: what a search over schedules compares
    (``memory.within``). Eager backends only."""
    A = abstract_namespace()
    call = f if nums == () else _api.value_and_grad(f, nums)
    step = _tracked(call, A, args, kwargs)[0]
    return step.peak + _overhead(_calls(step.events)), _peak_op(step)
