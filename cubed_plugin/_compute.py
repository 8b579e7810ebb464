"""The public way out of the namespace on Cubed: compute several of our lazy arrays in one plan,
look at the plan, and check its memory before running.

    loss, grads = pg.value_and_grad(f)(w, X, y)          # lazy, on namespace(cubed)
    loss_np, grads_np = cubed_plugin.compute(loss, grads)  # one plan, NumPy results

Every function here plans with ``cubed_plugin.steps.graph_fusion`` unless told otherwise: the
plan optimizer whose projected task memory holds for gradient graphs. Cubed's own optimizer
(``cubed.compute``'s default, ``optimize_function=None`` here) fuses a predecessor into an op
that reads several of its blocks and projects the task as if the predecessor ran once, and
reads every input block of a fused tree before evaluating it while projecting them one at a
time: measured task peaks went over its projections on gradient graphs (155.3 MB in a task
projected at 138.4 MB: a two-layer MLP's gradient). :func:`check` says so, op by op, when it is
given that optimizer.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from pycograd_xp import unwrap
from pycograd_xp.memory import MemoryLimitError, format_byte_pair, format_bytes
from pycograd_xp.tree import tree_flatten, tree_unflatten

from .memory import ReservedMemWarning, labelled_optimizer, part_of, sound_optimizer


class _Sound:
    """The default ``optimize_function``: ``cubed_plugin.steps.graph_fusion()``."""

    def __repr__(self) -> str:
        return "graph_fusion()"


SOUND = _Sound()


def _optimizer(optimize_function: Any) -> Any:
    if optimize_function is SOUND:
        return sound_optimizer()
    if getattr(optimize_function, "labelled", False):
        return optimize_function
    if optimize_function is None:
        from ._cubed_seam import multiple_inputs_optimize_dag

        return labelled_optimizer(multiple_inputs_optimize_dag, sound=False)
    # graph_fusion() marks its optimizer sound (its projections count what a task holds)
    return labelled_optimizer(optimize_function, sound=getattr(optimize_function, "sound", False))


def _cubed_arrays(trees: tuple) -> tuple[list[Any], Any]:
    leaves, td = tree_flatten(list(trees))
    return [unwrap(leaf) for leaf in leaves], td


def plan(*trees: Any, optimize_graph: bool = True, optimize_function: Any = SOUND) -> Any:
    """Cubed's plan (``cubed.plan``) of all the arrays in ``trees``, computed together.

    Parameters
    ----------
    *trees : pytree
        Lazy arrays (ours or Cubed's) in any pytrees.
    optimize_graph : bool, default True
        Let Cubed optimize the plan.
    optimize_function : optional
        The optimizer: ``graph_fusion()`` when not given, Cubed's own with None.

    Returns
    -------
    cubed plan
        The plan, as ``cubed.plan`` returns it.
    """
    import cubed

    arrays, _ = _cubed_arrays(trees)
    return cubed.plan(
        *arrays, optimize_graph=optimize_graph, optimize_function=_optimizer(optimize_function)
    )


def refuse(p: Any, where: str, advice: str | Callable[[], str] | None = None) -> None:
    """Raise :class:`MemoryLimitError` if a task of the plan ``p`` would exceed ``allowed_mem``,
    naming the largest such op, the part of the program it computes, both figures and the
    limit, and then ``advice`` (a function: called only then)."""
    from ._cubed_seam import op_nodes, plan_dag

    dag = plan_dag(p)
    over = [(name, op) for name, op in op_nodes(dag) if op.projected_mem > op.allowed_mem]
    if not over:
        return
    name, op = max(over, key=lambda o: o[1].projected_mem)
    need, have = format_byte_pair(op.projected_mem, op.allowed_mem)
    others = f" ({len(over) - 1} other ops over it too)" if len(over) > 1 else ""
    if callable(advice):
        advice = advice()
    advice = advice or (
        "use smaller chunks (cubed_plugin.memory.plan_rows(loss, ..., "
        "mode=...) chooses them for a gradient step) or a larger allowed_mem"
    )
    raise MemoryLimitError(
        f"{where}: {name} ({part_of(dag, name)}) needs {need} per task, over allowed_mem "
        f"{have} (of which reserved_mem {format_bytes(op.reserved_mem)}){others}; {advice}"
    )


def warn_reserved(
    spec: Any, executor: Any, where: str, *, compute_kwargs: dict | None = None, reads: Any = ()
) -> int | None:
    """Warn (:class:`~cubed_plugin.memory.ReservedMemWarning`) when ``spec.reserved_mem`` is
    below what a worker of ``executor`` measurably holds before any data
    (``cubed_plugin.worker_baseline``; with the client of the object store of ``reads``, the
    data its tasks read, loaded), or is 0 for an executor that cannot be measured. Returns
    the baseline (None when it cannot be measured)."""
    from ._executors import executor_of, worker_baseline

    ex = executor_of(executor, spec)
    name = getattr(ex, "name", type(ex).__name__)
    reserved = int(spec.reserved_mem or 0)
    try:
        base = worker_baseline(
            ex, work_dir=spec.work_dir, compute_kwargs=compute_kwargs, reads=reads
        )
    except RuntimeError as e:
        if reserved == 0:
            warnings.warn(
                f"{where}: reserved_mem is 0, so every task's projection leaves out "
                f"the memory its worker holds of its own, and it cannot be measured "
                f"here: {e}",
                ReservedMemWarning,
                stacklevel=3,
            )
        return None
    if reserved < base:
        have, need = format_byte_pair(reserved, base)
        warnings.warn(
            f"{where}: reserved_mem {have} is below the {need} a worker of the {name!r} "
            "executor measurably holds before any data (cubed_plugin.worker_baseline), so "
            "projections leave out memory the tasks use and a run can exceed allowed_mem "
            "unnoticed by the check; make the spec with cubed_plugin.make_spec("
            f"allowed_mem, executor=...) (it measures reserved_mem), or give reserved_mem >= "
            f"{need}",
            ReservedMemWarning,
            stacklevel=3,
        )
    return base


def unsound_tasks(trees: tuple, optimize_function: Any) -> list[tuple[str, str, int, int]]:
    """``(op, part, Cubed's projection, bound)`` for each task of the plan of ``trees`` made
    with ``optimize_function`` whose projection is below what it can hold as Cubed runs it
    (``cubed_plugin._fusion.project_fused``: every input block of a fused tree at once, a
    predecessor fused into an op reading several of its blocks once per block;
    ``cubed_plugin.steps.read_peak``: the buffers of reading a stored chunk)."""
    from ._cubed_seam import op_nodes, unoptimized_plan
    from ._fusion import project_fused
    from .steps import count_reads

    arrays, _ = _cubed_arrays(trees)
    before, optimized = unoptimized_plan(arrays, _optimizer(optimize_function))
    projected = {n: op.projected_mem for n, op in op_nodes(optimized)}
    bound = count_reads(project_fused(before, optimized.copy()))
    out = []
    for name, po in op_nodes(bound):
        if name in projected and po.projected_mem > projected[name]:
            out.append((name, part_of(optimized, name), projected[name], po.projected_mem))
    return out


def check(
    *trees: Any,
    optimize_function: Any = SOUND,
    executor: Any = None,
    compute_kwargs: dict | None = None,
) -> Any:
    """Raise :class:`MemoryLimitError`, before anything runs, if a task of the plan would exceed
    ``allowed_mem``; return the plan.

    The error names the op, the part of the program it computes, its projected memory and the
    limit. Warns (:class:`~cubed_plugin.memory.ReservedMemWarning`) when the Spec's
    ``reserved_mem`` is below what a worker of ``executor`` measurably holds.

    Parameters
    ----------
    *trees : pytree
        Lazy arrays (ours or Cubed's) in any pytrees, planned together.
    optimize_function : optional
        The one the computation will use (default ``graph_fusion()``, as :func:`compute`; None:
        Cubed's own, as ``cubed.compute``, whose projections can fall short on gradient graphs:
        each such task is warned of, with its projection and what it can hold).
    executor : optional
        The executor the computation will run on, or its name (None: Cubed's default).
    compute_kwargs : dict, optional
        What the computation will pass to ``cubed.compute`` (a Dask cluster's address).

    Returns
    -------
    CheckedPlan
        The plan (as :func:`plan`: its attributes are Cubed's plan's), printed as a summary.

    Raises
    ------
    MemoryLimitError
        If a task's projected memory exceeds ``allowed_mem``.
    """
    opt = _optimizer(optimize_function)
    p = plan(*trees, optimize_function=opt)
    specs = [a.spec for a in _cubed_arrays(trees)[0] if hasattr(a, "spec")]
    if specs:
        warn_reserved(specs[0], executor, "check", compute_kwargs=compute_kwargs)
    if not opt.sound:
        for name, part, cubeds, bound in unsound_tasks(trees, opt):
            low, high = format_byte_pair(cubeds, bound)
            warnings.warn(
                f"check: this optimizer's plan projects {name} ({part}) at {low} per task, but "
                f"as Cubed runs it the task can hold up to {high} (all input blocks of its "
                "fused tree at once, the buffers of reading a stored chunk); compute with "
                "cubed_plugin.compute, or give "
                "optimize_function=cubed_plugin.steps.graph_fusion() to cubed.compute, whose "
                "projections count them",
                stacklevel=2,
            )
    refuse(p, "check")
    return CheckedPlan(p, specs[0].allowed_mem if specs else None)


class CheckedPlan:
    """The plan :func:`check` passed: Cubed's plan (every attribute of it: ``num_tasks``,
    ``max_projected_mem``, ``visualize()``, ...), printed as what was checked."""

    def __init__(self, plan: Any, allowed_mem: int | None) -> None:
        self.plan, self.allowed_mem = plan, allowed_mem

    def __getattr__(self, name: str) -> Any:
        return getattr(self.plan, name)

    def __repr__(self) -> str:
        from pycograd_xp.memory import format_bytes

        allowed = "" if self.allowed_mem is None else " of allowed_mem "
        allowed += "" if self.allowed_mem is None else format_bytes(self.allowed_mem)
        return (
            f"<checked plan: {self.plan.num_tasks} tasks, largest task "
            f"{format_bytes(self.plan.max_projected_mem)}{allowed}, intermediate storage "
            f"{format_bytes(self.plan.total_intermediate_nbytes)}>"
        )


def compute(*trees: Any, executor: Any = None, callbacks: Any = None, **kwargs: Any) -> Any:
    """Compute every lazy array in ``trees`` in one Cubed plan, so shared inputs are read once.

    The plan is made with ``graph_fusion()`` unless ``optimize_function`` is given (None: Cubed's
    own optimizer).

    Parameters
    ----------
    *trees : pytree
        Our arrays or Cubed's, in any pytrees.
    executor : optional
        A Cubed executor or its name (:func:`~cubed_plugin.make_executor`).
    callbacks : optional
        Cubed callbacks (:class:`~cubed_plugin.train.Progress`,
        :class:`~cubed_plugin.train.MemoryRecorder`).
    **kwargs : Any
        Passed to ``cubed.compute`` (``optimize_function`` among them).

    Returns
    -------
    pytree or tuple of pytree
        The trees with NumPy arrays in place of the lazy ones (a single tree when one is given).
    """
    import cubed

    arrays, td = _cubed_arrays(trees)
    if isinstance(executor, str):
        from ._executors import executor_of

        executor = executor_of(executor, compute_kwargs=kwargs)
    kwargs["optimize_function"] = _optimizer(kwargs.get("optimize_function", SOUND))
    results = cubed.compute(*arrays, executor=executor, callbacks=callbacks, **kwargs)
    out = tree_unflatten(td, list(results))
    return out[0] if len(trees) == 1 else tuple(out)


def visualize(*trees: Any, filename: str = "cubed", format: str | None = None) -> Any:
    """Cubed's drawing of the plan of ``trees`` (needs graphviz).

    Parameters
    ----------
    *trees : pytree
        Lazy arrays in any pytrees.
    filename : str, default "cubed"
        The file written (without its suffix).
    format : str, optional
        The image format (Cubed's default when None).

    Returns
    -------
    object
        What ``cubed.visualize`` returns (an image object in a notebook).
    """
    return plan(*trees).visualize(filename=filename, format=format)
