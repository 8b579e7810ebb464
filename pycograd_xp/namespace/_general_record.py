"""The recorder of a general row called by a fast lane (``matmul``, ``_relu``): :func:`record`
with what the row saves looked up once, beside ``_record.py`` (which a grad through an
elementwise row reads: this module only a grad through a general one)."""

from __future__ import annotations

from typing import Any

from .._state import STACK
from .._tape import Node, ShapeDtype
from ._record import _save, record


def general_recorder(prim: Any, ns: Any, floating: frozenset, chunked: bool, Arr: Any) -> Any:
    """:func:`record` for one general row of one namespace called positionally with arrays of
    it (a fast lane's call: ``matmul``, ``_relu``): ``rec(out, *args)``. What the row saves
    is looked up once here; anything else (a list, a number or another namespace's array
    among the arguments, several outputs, ``debug_nans``) is :func:`record`'s, as is every
    call on a batched or abstract namespace (made with ``record`` itself then)."""
    saves, names = prim.saves, prim.arg_names
    save = [n in saves for n in names] or [False]  # (the last name stands for any beyond)
    last = len(save) - 1
    save_out = "out" in saves
    new_node = Node

    def rec(out: Any, *args: Any) -> Any:
        if type(out) is not Arr or STACK.debug_nans:
            return record(prim, ns, out, args, {})
        parents = []
        for i, a in enumerate(args):
            if type(a) is not Arr:
                return record(prim, ns, out, args, {})
            if (p := a._node) is not None and a._data.dtype in floating:
                parents.append((i, p))
        if not parents or out._data.dtype not in floating:
            return out
        saved: dict = {}
        kept = []
        for i, a in enumerate(args):
            if save[i if i < last else last]:
                kept.append(_save(a, i, saved))
            else:
                d = a._data
                kept.append(ShapeDtype(d.shape, d.dtype, d.chunks if chunked else None))
        node = new_node(prim, ns, tuple(kept), {}, None, parents, saved or None)
        out._node = node
        if save_out:
            node.out = out._data
        if STACK.jvp_hook is not None:  # running jvps: the output's tangent
            STACK.jvp_hook(node, out, args, {})
        return out

    return rec
