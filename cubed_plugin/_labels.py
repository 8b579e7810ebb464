"""Which part of the user's program built each Cubed op.

Cubed names an op by its own counter (``op-007``, different from one build to the next) and by
the Cubed function that made it. A refusal or a measured overrun is clearer naming the part of
the user's program instead (the node mark ``LABEL``, read by
:func:`cubed_plugin.memory.part_of`):

- ``"matmul in mlp_loss (backward of tanh)"``: made by the VJP rule of ``tanh`` while
  differentiating ``mlp_loss`` (the function given to ``grad``/``value_and_grad``/``vjp``);
- ``"tanh in mlp_loss (forward, model.py:12 in layer)"``: the forward call of ``xp.tanh``,
  and the innermost line of user code that made it, where Cubed's record of the call (its ten
  innermost frames) reaches it;
- ``"sum in the one-pass step of mlp_loss (...)"``: one-pass mode's ops;
- ``"rechunk (prepare.py:30 in load)"``: an op made by no row or rule (the user's own code
  with Cubed): Cubed's name for it and the line from Cubed's record (:func:`label_of`).

How, without patching Cubed or reading Python's frames: the engine brackets each row's forward
call and each VJP rule on Cubed with :class:`OpLabeller` (the backend's ``labeller``), which
reads Cubed's op counter before the call and, after it, labels the ops made since in the plans
of the arrays it made, from the part of the program running (the engine says which loss, rule
or row is running, ``pycograd_xp.namespace.parts_running``, once :func:`watch` asked it to).
The plugin's own steps label theirs with :func:`label_new`. Nothing else of a plan changes.
"""

from __future__ import annotations

import functools
import os
import sysconfig
from collections.abc import Callable
from typing import Any

from pycograd_xp.namespace import parts_running, watch_parts

# (Cubed's internals are imported by each function: importing this module, as the plugin's
# namespace does, imports no Cubed: ``python -m pycograd_xp.ops --matrix`` loads the plugin so)

__all__ = ["LABEL", "OpLabeller", "fn_name", "label_new", "label_of", "watch", "where_called"]

# the attribute of a Cubed op node holding its label
LABEL = "pycograd_xp_part"

_LIBRARY = ("cubed", "pycograd_xp", "cubed_plugin")
_LIB_PATHS = tuple(
    {sysconfig.get_path("stdlib"), sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    - {None}
)


@functools.cache
def watch() -> None:
    """From now on, every op a row or a rule makes on Cubed is labelled (the engine keeps the
    running parts: ``pycograd_xp.namespace.watch_parts``)."""
    watch_parts()


def fn_name(f: Any) -> str:
    """The name a label gives the function ``f`` (a loss; a ``RowLoss`` by its per-row one)."""
    name = getattr(f, "__name__", None) or getattr(getattr(f, "per_row", None), "__name__", None)
    return name or type(f).__name__


class OpLabeller:
    """The Cubed backend's ``labeller`` (:class:`pycograd_xp.namespace.Backend`): the engine
    calls :meth:`mark` before a row's forward call or a VJP rule and :meth:`label` after it,
    with the part running on :mod:`pycograd_xp._parts`'s stack."""

    @staticmethod
    def mark() -> int:
        """Cubed's op counter now."""
        from ._cubed_seam import op_counter

        return op_counter()

    @staticmethod
    def label(since: int, out: Any) -> None:
        """Label the ops made since ``since`` in the plans of the arrays ``out``."""
        label_new(since, out)


def label_new(since: int, out: Any, label: Callable[[str], str] | None = None) -> None:
    """Label the ops made since Cubed's op counter read ``since`` in the plans of the Cubed
    arrays ``out`` (an array or a tuple or list of them; anything else is passed over): with
    ``label(func)`` (``func``: the Cubed function that made the op) when given, else from the
    part of the program running. An op labelled already (by an inner call) keeps its label."""
    from ._cubed_seam import array_dag, node_func, node_mark, ops_since, set_node_mark

    outs = out if isinstance(out, tuple | list) else (out,)
    for x in outs:
        dag = array_dag(x)
        if dag is None:
            continue
        new = [op for op in ops_since(dag, since) if node_mark(dag, op, LABEL) is None]
        if label is None:
            # the user's line, where Cubed's record of one of the call's ops reaches it (the
            # ops made deeper inside Cubed have a record too short): the call's line for all
            wheres = {op: where_called(dag, op) for op in new}
            line = next((w for w in wheres.values() if w is not None), None)
        for op in new:
            func = node_func(dag, op).strip("_") or "?"
            if label is not None:
                text = label(func)
            else:
                text = describe(func, parts_running(), wheres[op] or line)
            set_node_mark(dag, op, LABEL, text)


def describe(func: str, parts: tuple[tuple[str, str], ...], where: str | None = None) -> str:
    """The label of an op made by Cubed's function ``func`` while ``parts`` run (outermost
    first; see :mod:`pycograd_xp._parts`), called from the user's line ``where``."""
    prim = rule = loss = None
    backward = False
    for kind, name in reversed(parts):  # innermost first, up to the innermost loss
        if kind == "loss":
            loss = name
            break
        if kind == "rule":
            rule = rule or name
        elif kind == "backward":
            backward = True
        elif kind == "row" and rule is None and not backward:
            prim = name  # the outermost row: the one the user called
    of = f" in {loss}" if loss else ""
    if rule is not None:
        return f"{func}{of} (backward of {rule})"
    if backward:
        return f"{func}{of} (backward: adding up cotangents)"
    if prim is not None:
        head = prim if func == prim else f"{func} of {prim}"
        return f"{head}{of} (forward{', ' + where if where else ''})"
    return f"{func}{of} ({where})" if where else f"{func}{of}"


def label_of(dag: Any, op: str) -> str:
    """The op's label, or for an op without one Cubed's name for it (the function that made it)
    and the user's line that called it where Cubed's record reaches it."""
    from ._cubed_seam import node_label, node_mark

    own = node_mark(dag, op, LABEL)
    if own is not None:
        return str(own)
    where = where_called(dag, op)
    return f"{node_label(dag, op)} ({where})" if where else node_label(dag, op)


def where_called(dag: Any, op: str) -> str | None:
    """The innermost line of the user's code among the frames Cubed recorded when it made the
    op ``op`` (``"model.py:12 in layer"``), or None when the record does not reach it."""
    from ._cubed_seam import node_stack

    for filename, line, function, module in node_stack(dag, op):
        library = (
            module.split(".")[0] in _LIBRARY
            or filename.startswith(_LIB_PATHS)
            or filename.startswith("<")
        )
        if not library:
            return f"{os.path.basename(filename)}:{line} in {function}"
    return None
