"""The public way out of the namespace on Cubed: compute several of our lazy arrays in one plan,
look at the plan, and check its memory before running.

    loss, grads = pg.value_and_grad(f)(w, X, y)          # lazy, on namespace(cubed)
    loss_np, grads_np = cubed_plugin.compute(loss, grads)  # one plan, NumPy results
"""

from __future__ import annotations

from typing import Any

from pycograd_xp import unwrap
from pycograd_xp.memory._project import MemoryLimitError, _fmt
from pycograd_xp.tree import tree_flatten, tree_unflatten


def _cubed_arrays(trees: tuple) -> tuple[list[Any], Any]:
    leaves, td = tree_flatten(list(trees))
    return [unwrap(leaf) for leaf in leaves], td


def plan(*trees: Any, optimize_graph: bool = True, optimize_function: Any = None) -> Any:
    """Cubed's plan (``cubed.plan``) of all the arrays in ``trees``, computed together."""
    import cubed

    arrays, _ = _cubed_arrays(trees)
    return cubed.plan(*arrays, optimize_graph=optimize_graph,
                      optimize_function=optimize_function)  # fmt: skip


def check(*trees: Any, optimize_function: Any = None) -> Any:
    """Raise :class:`MemoryLimitError`, before anything runs, if a task of the plan would
    exceed ``allowed_mem`` (naming the op, its projected memory and the limit); return the
    plan (made with ``optimize_function``, Cubed's default when None: give the one the
    computation will use)."""
    p = plan(*trees, optimize_function=optimize_function)
    for name, node in p.dag.nodes(data=True):
        op = node.get("primitive_op")
        if op is not None and op.projected_mem > op.allowed_mem:
            raise MemoryLimitError(
                f"{name} ({node.get('op_name', '?')}): projected task memory "
                f"{_fmt(op.projected_mem)} exceeds allowed_mem {_fmt(op.allowed_mem)} (including "
                f"reserved_mem {_fmt(op.reserved_mem)}); use smaller chunks "
                "(cubed_plugin.memory.plan_rows) or a larger allowed_mem"
            )
    return p


def compute(*trees: Any, executor: Any = None, callbacks: Any = None, **kwargs: Any) -> Any:
    """Compute every lazy array in ``trees`` (our arrays or Cubed's, in any pytrees) in one
    Cubed plan, so shared inputs are read once; return the trees with NumPy arrays in their
    place (a single tree when one is given). ``executor`` is a Cubed executor or its name."""
    import cubed

    arrays, td = _cubed_arrays(trees)
    if isinstance(executor, str):
        from cubed.runtime.create import create_executor

        executor = create_executor(executor)
    results = cubed.compute(*arrays, executor=executor, callbacks=callbacks, **kwargs)
    out = tree_unflatten(td, list(results))
    return out[0] if len(trees) == 1 else tuple(out)


def visualize(*trees: Any, filename: str = "cubed", format: str | None = None) -> Any:
    """Cubed's drawing of the plan of ``trees`` (needs graphviz)."""
    return plan(*trees).visualize(filename=filename, format=format)
