"""``remat(f)``: rematerialization (JAX's name; PyTorch calls it activation checkpointing).

The wrapped segment runs without a tape on the forward pass and is recorded as one node that
saves only the segment's array inputs. Its VJP rule runs the segment again, this time under
``vjp``, and pulls the cotangent back through the fresh graph, which is freed as soon as it
has. Memory between the passes drops to the segment's inputs; the price is one more forward of
the segment. The rule is Array-API code like every other, so it works on every backend (lazily
on Cubed), composes with higher-order gradients, and ``pycograd_xp.memory`` sees the recompute.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from . import _api, _vjp
from ._forward import transposed_rule
from ._primitive import Primitive
from ._state import STACK, unwritable
from .namespace import of as namespace_of
from .namespace._array import Array, ours
from .namespace._record import record
from .tree import tree_flatten, tree_unflatten

_ARGS = inspect.Signature([inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL)])


def remat(f: Callable[..., Any]) -> Callable[..., Any]:
    """``f``, recomputed during backward instead of keeping its intermediates (JAX's ``remat``;
    PyTorch's activation checkpointing).

    The wrapped segment runs without a tape on the forward pass and is recorded as one node saving
    only its array inputs; backward runs it again under ``vjp``. Gradients are identical to
    ``f``'s; memory between the passes drops to the segment's inputs, for one more forward of the
    segment (``pycograd_xp.memory.project`` sees both).

    Parameters
    ----------
    f : callable
        The segment: arrays, pytrees of them and other values in, an array or a tuple of arrays
        out.

    Returns
    -------
    callable
        A function of ``f``'s positional arguments computing ``f``.

    Raises
    ------
    TypeError
        At the call, when ``f`` returns something other than an array or a tuple of arrays.

    Examples
    --------
    >>> import numpy, pycograd_xp as pg
    >>> xp = pg.namespace(numpy)
    >>> block = pg.remat(lambda w, x: xp.tanh(x @ w))
    >>> w, x = xp.ones((3, 2)), xp.ones((4, 3))
    >>> g1 = pg.grad(lambda w: xp.sum(block(w, x)))(w)
    >>> g2 = pg.grad(lambda w: xp.sum(xp.tanh(x @ w)))(w)
    >>> bool(xp.all(g1 == g2))
    True
    """
    name = f"remat({getattr(f, '__name__', 'f')})"

    def rule(ops: Any, g: Any, out: Any, *args: Any, structure: Any) -> tuple[Any, ...]:
        # args: the leaves of f's arguments (pytrees: a dict of parameters), in order
        ns = namespace_of(ops)
        raw = ops is not ns  # first order: backend arrays in and out
        arrays = [ours(ns, a) for a in args] if raw else list(args)
        picks = [i for i, a in enumerate(arrays) if isinstance(a, Array)]

        def segment(*xs: Any) -> Any:
            call = list(arrays)
            for i, x in zip(picks, xs, strict=True):
                call[i] = x
            out = f(*tree_unflatten(structure, call))
            # several outputs as a plain tuple, the cotangent's structure (a named tuple's too)
            return tuple(out) if isinstance(out, tuple | list) else out

        if raw:  # first order: the segment's own backward records nothing (its residuals go as
            # it goes), whatever transforms run around it (vjp's would record it, a nested one)
            grads = _first_order(segment, [arrays[i] for i in picks], ns, g)
        else:
            with _api.enable_grad():
                _, pull = _vjp.vjp(segment, *[arrays[i] for i in picks])
                grads = pull(tuple(g) if isinstance(g, list) else g)
        cts: list[Any] = [None] * len(args)
        for i, gi in zip(picks, grads, strict=True):
            cts[i] = gi._data if raw else gi
        return tuple(cts)

    prim = Primitive(
        name, "general", None, None, (), signature=_ARGS, vjp=rule, saves=frozenset({"args"})
    )
    prim.jvp = transposed_rule(prim)  # forward mode: the segment's VJP, transposed

    @functools.wraps(f)
    def wrapped(*args: Any) -> Any:
        # the node's inputs are the leaves of the arguments: an array inside a dict or a list
        # of parameters is differentiated as one given alone
        leaves, structure = tree_flatten(args)
        tracked = [a for a in leaves if isinstance(a, Array) and a._node is not None]
        if not tracked or not STACK.grad_enabled:
            return f(*args)
        ns = tracked[0]._ns
        # f runs untaped on new untracked arrays over the arguments' buffers, which it may not
        # write in place: the node saves the arguments for the recompute, and the caller keeps
        # them (a write copies, as it would on the tape: the same values as f's own)
        fresh = [a._ns._make(a._data) if isinstance(a, Array) else a for a in leaves]
        buffers = [a._backend.buffer(a._data) for a in leaves if isinstance(a, Array)]
        with _api.no_grad(), unwritable(buffers):
            out = f(*tree_unflatten(structure, fresh))
        if isinstance(out, list):
            out = tuple(out)
        if not (
            isinstance(out, Array)
            or (isinstance(out, tuple) and all(isinstance(o, Array) for o in out))
        ):
            raise TypeError(
                f"{name}: the function must return an array or a tuple of arrays, "
                f"got {type(out).__name__}"
            )
        return record(prim, ns, out, tuple(leaves), {"structure": structure})

    return wrapped


def _first_order(segment: Any, xs: list, ns: Any, g: Any) -> tuple:
    """The segment's VJP at ``xs`` for the backend cotangent(s) ``g``: its forward taped, its
    backward run on backend arrays (no graph recorded), each residual freed as it is used."""
    with _api.enable_grad():
        out, inputs, structures = _api._trace(
            segment, tuple(xs), {}, tuple(range(len(xs))), "remat"
        )
    outs = list(out) if isinstance(out, tuple) else [out]
    cts = [ours(ns, c) for c in (g if isinstance(g, list) else [g])]
    return tuple(_api._pull(outs, cts, inputs, structures, retain=False, create=False))
