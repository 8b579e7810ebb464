"""``vjp`` (JAX's): a function's value and its pullback, the map from an output cotangent to the
input cotangents, for outputs of any shape. Built on ``grad``'s trace and backward pass
(``_api.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, overload

from ._api import _check_out, _finish, _nested, _pull, _trace
from ._parts import WATCHED, enter, leave
from ._state import STACK, Grad, push, restore
from .namespace._array import Array
from .tree import same_structure, tree_flatten

__all__ = ["vjp"]


@overload
def vjp(
    f: Callable[..., Any], *primals: Any, has_aux: Literal[False] = False
) -> tuple[Any, Callable[[Any], tuple[Any, ...]]]: ...
@overload
def vjp(
    f: Callable[..., Any], *primals: Any, has_aux: Literal[True]
) -> tuple[Any, Callable[[Any], tuple[Any, ...]], Any]: ...
@overload
def vjp(f: Callable[..., Any], *primals: Any, has_aux: bool) -> tuple[Any, ...]: ...
def vjp(f: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple[Any, ...]:
    """``f(*primals)`` and its pullback: the map from an output cotangent to input cotangents.

    Parameters
    ----------
    f : callable
        The function, of ``len(primals)`` positional arguments; its output may have any shape
        and be a pytree of arrays, real or complex (``(output, aux)`` with ``has_aux``).
    *primals : Array or pytree of Array
        The point to differentiate at: floating-point arrays, or pytrees of them.
    has_aux : bool, default False
        Whether ``f`` returns a pair ``(output, aux)``.

    Returns
    -------
    out : Array or pytree of Array
        ``f(*primals)``.
    vjp_fn : callable
        ``vjp_fn(cotangent)``, with a cotangent of ``out``'s structure and shapes (arrays of
        its namespace), returns the tuple of input cotangents, one per primal (zeros where
        ``out`` does not depend on it). It may be called several times: the graph is kept while
        it lives.
    aux : object
        With ``has_aux`` only: the ``aux`` ``f`` returned.

    Raises
    ------
    TypeError
        If a primal is not a floating-point array of a pycograd_xp namespace, ``f`` returns
        something else than arrays, or a cotangent is not an array of the output's namespace.
    ValueError
        If a cotangent's structure or shape differs from the output's.

    Examples
    --------
    >>> import numpy, pycograd_xp as pg
    >>> xp = pg.namespace(numpy)
    >>> out, pull = pg.vjp(xp.sin, xp.asarray([0.0, 1.0]))
    >>> pull(xp.ones(2))
    (pycograd_xp.numpy.Array([1.        , 0.54030231], dtype=float64),)
    """
    name = getattr(f, "__name__", "f")
    where = f"vjp({name})"
    parts = enter("loss", name) if WATCHED[0] else None  # (a lazy backend's op labels)
    prev = push(Grad())
    try:
        res, inputs, structures = _trace(f, primals, {}, tuple(range(len(primals))), where)
        nested = _nested(inputs)
    finally:
        restore(prev)
        if parts is not None:
            leave(parts)
    out, aux = res if has_aux else (res, None)
    _check_out(out, where, scalar=False)
    out_leaves, out_td = tree_flatten(out)

    def vjp_fn(cotangent: Any) -> tuple[Any, ...]:
        ct_leaves, ct_td = tree_flatten(cotangent)
        if not same_structure(ct_td, out_td):
            raise ValueError(
                f"{where}: the cotangent's structure {ct_td!r} differs from the output's {out_td!r}"
            )
        for o, c in zip(out_leaves, ct_leaves, strict=True):
            if not isinstance(c, Array) or (
                type(c) is not type(o) and c._backend.level <= o._backend.level
            ):
                raise TypeError(f"{where}: each cotangent must be an array of {o._ns.__name__}")
            if c.shape != o.shape:
                raise ValueError(
                    f"{where}: a cotangent has shape {c.shape}, but the output has shape {o.shape}"
                )
        parts = enter("loss", name) if WATCHED[0] else None
        prev = push(Grad())
        try:
            # a cotangent batched by vmap: the rules run on the namespace, which hands each
            # call to the batched level
            create = (
                nested
                or STACK.grad_depth > 1
                or any(
                    c._node is not None or c._backend.level > o._backend.level
                    for c, o in zip(ct_leaves, out_leaves, strict=True)
                )
            )
            return tuple(
                _pull(out_leaves, ct_leaves, inputs, structures, retain=True, create=create)
            )
        finally:
            restore(prev)
            if parts is not None:
                leave(parts)

    value = _finish(out, nested)
    return (value, vjp_fn, _finish(aux, nested)) if has_aux else (value, vjp_fn)
