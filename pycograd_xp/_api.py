"""``grad`` and ``value_and_grad`` (JAX's names and semantics), grad mode (``no_grad``,
``enable_grad``) and ``stop_gradient``, all running :func:`pycograd_xp._tape.backward`; ``vjp``
is ``_vjp.py``'s, ``debug_nans`` ``_nans.py``'s, ``x.backward()`` ``namespace/_imperative.py``'s."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec, TypeVar

from . import _tape
from ._parts import WATCHED, enter, leave
from ._primitive import Primitive
from ._state import STACK, Block, Grad, GradMode, push, restore
from .namespace._array import Array, detach, make
from .tree import LEAF, tree_flatten, tree_map, tree_unflatten

__all__ = [
    "enable_grad",
    "grad",
    "no_grad",
    "stop_gradient",
    "value_and_grad",
]

P = ParamSpec("P")
T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

# The node each differentiated input gets inside a trace: identity onto the caller's value, so
# an outer trace (grad of grad) sees through it.
INPUT = Primitive(
    "input",
    "general",
    None,
    None,
    (),
    vjp=lambda ns, g, out, x: (g,),
    jvp=lambda ns, t, out, x: t[0],
)


class no_grad(Block):  # the name PyTorch users know
    """Record nothing inside this block (a context manager, also a decorator).

    Under it ``x[idx] = v`` writes a mutable backend array in place, and in-place operators keep
    a leaf a leaf (optimizer updates). Blocks nest; :class:`enable_grad` records again inside.

    Examples
    --------
    >>> import numpy, pycograd_xp as pg
    >>> xp = pg.namespace(numpy)
    >>> w = xp.asarray([1.0, 2.0]).requires_grad_()
    >>> with pg.no_grad():
    ...     y = w * 2
    >>> y.requires_grad
    False
    """

    _enabled = False

    def _frame(self) -> GradMode:
        return GradMode(self._enabled)


class enable_grad(no_grad):
    """Record again inside a :class:`no_grad` block (a context manager, also a decorator)."""

    _enabled = True


def stop_gradient(x: T) -> T:
    """The same values, with no gradient flowing through them (JAX's name; ``x.detach()``).

    Parameters
    ----------
    x : Array or pytree of Array
        An array, or a pytree of arrays; other leaves pass unchanged.

    Returns
    -------
    Array or pytree of Array
        New array objects sharing ``x``'s buffers, of the same structure, recorded nowhere.
    """
    return detach(x) if isinstance(x, Array) else tree_map(detach, x)


def _argnums(argnums: int | Sequence[int], nargs: int, where: str) -> tuple[int, ...]:
    if type(argnums) is int and -nargs <= argnums < nargs:  # (the common case: one in range)
        return (argnums % nargs,)
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for i in nums:
        if not isinstance(i, int) or not -nargs <= i < nargs:
            raise ValueError(
                f"{where}: argnums={argnums!r} does not name a positional argument of a call "
                f"with {nargs} positional argument(s)"
            )
    return tuple(i % nargs for i in nums)


class _Input:
    """A differentiated input as it was passed: its node on the tape, its value and its class.

    Captured before ``f`` runs, so whatever ``f`` does to its parameter (``x *= 2``,
    ``x[i] = v``, as array-api-extra's ``at`` does) the gradient is with respect to this value.
    """

    __slots__ = ("node", "data", "cls")

    def __init__(self, node: Any, data: Any, cls: type) -> None:
        self.node, self.data, self.cls = node, data, cls


def _track(a: Any, where: str, path: str | tuple[int, int | None]) -> tuple[Array, _Input]:
    """A fresh array object holding ``a``'s value, marked as a differentiated input. ``path``
    names it in errors: words, or ``(argument, leaf)`` (leaf None: the argument is one)."""
    if not isinstance(a, Array):
        raise TypeError(
            f"{where}: {_path(path)} is a {type(a).__name__}, not an array of a pycograd_xp "
            "namespace; convert it with xp.asarray(...) before differentiating"
        )
    if a._data.dtype not in a._ns._floating:
        raise TypeError(
            f"{where}: {_path(path)} has dtype {a._data.dtype}; only floating-point arrays can be "
            "differentiated (cast it with xp.astype(x, xp.float64), or pass it as a "
            "non-differentiated argument)"
        )
    top = STACK.batch
    if top is not None and a._backend.level < top._backend.level:  # inside vmap: that level
        a = top._make(top._backend.lift(a))
    parents = [(0, a._node)] if a._node is not None else []
    node = _tape.Node(
        INPUT, a._ns, (_tape.ShapeDtype(tuple(a._data.shape), a._data.dtype),), {}, None, parents
    )
    t = make(type(a), a._data, node)
    if STACK.jvp_hook is not None and parents:  # inside jvp: the input carries its tangent
        STACK.jvp_hook(node, t, (a,), {})
    return t, _Input(node, a._data, type(a))


def _path(path: str | tuple[int, int | None]) -> str:  # _track's path in words
    if isinstance(path, str):
        return path
    return f"argument {path[0]}" + (f" leaf {path[1]}" if path[1] is not None else "")


def _flatten(x: Any) -> tuple[list, Any]:
    """:func:`tree_flatten`, the common case (one array) without a call into the tree module."""
    return ([x], LEAF) if isinstance(x, Array) else tree_flatten(x)


def _unflatten(td: Any, leaves: list) -> Any:
    """:func:`tree_unflatten`, one leaf without a call into the tree module."""
    return leaves[0] if td is LEAF else tree_unflatten(td, leaves)


def _trace(
    f: Callable[..., Any], args: tuple, kwargs: dict, argnums: tuple[int, ...], where: str
) -> tuple[Any, list, list]:
    """Run ``f`` with the ``argnums`` arguments tracked.

    Returns (output, inputs, structures): per argnum, the list of :class:`_Input` of its leaves
    and its tree structure.
    """
    call_args = list(args)
    inputs, structures = [], []
    for i in argnums:
        leaves, td = _flatten(args[i])
        tracked, captured = [], []
        one = td is LEAF or td.kind == "leaf"
        for j, lf in enumerate(leaves):
            t, c = _track(lf, where, (i, None if one else j))
            tracked.append(t)
            captured.append(c)
        inputs.append(captured)
        structures.append(td)
        call_args[i] = _unflatten(td, tracked)
    with enable_grad():
        out = f(*call_args, **kwargs)
    return out, inputs, structures


def _nested(inputs: list) -> bool:
    """Whether an outer trace is running (then gradients must be differentiable themselves)."""
    if STACK.grad_depth > 1:
        return True
    for cs in inputs:  # (a loop, not a generator: a grad call asks once)
        for c in cs:
            if c.node.parents:
                return True
    return False


def _pull(
    out_leaves: list, cts: list, inputs: list, structures: list, *, retain: bool, create: bool
) -> list:
    """Backward from ``out_leaves`` with cotangents ``cts``; one gradient tree per argnum."""
    roots = [
        (o._node, c._data if not create else c)
        for o, c in zip(out_leaves, cts, strict=True)
        if isinstance(o, Array) and o._node is not None
    ]
    # A differentiable backward pass goes through the forward residuals again later: keep them.
    found = (
        _tape.backward(
            roots,
            targets=[c.node for cs in inputs for c in cs],
            retain_graph=retain or create,
            create_graph=create,
        )
        if roots
        else {}
    )
    grads = []
    for cs, td in zip(inputs, structures, strict=True):
        leaves = []
        for c in cs:
            g = found.get(id(c.node))
            if g is None:  # the output does not depend on this input
                g = c.cls._backend.xp.zeros_like(c.data)
            leaves.append(g if isinstance(g, Array) else make(c.cls, g))
        grads.append(_unflatten(td, leaves))
    return grads


def _finish(tree: Any, nested: bool) -> Any:
    """What a transform returns: as computed inside an outer trace, else without gradient."""
    return tree if nested else stop_gradient(tree)


def _check_out(out: Any, where: str, scalar: bool) -> None:
    leaves = _flatten(out)[0]
    for o in leaves:
        if not isinstance(o, Array):
            raise TypeError(
                f"{where}: the function returned a {type(o).__name__}; it must return arrays of "
                "a pycograd_xp namespace"
            )
    if scalar:
        if not isinstance(out, Array) or out.shape != ():
            what = f"shape {out.shape}" if isinstance(out, Array) else type(out).__name__
            raise TypeError(
                f"{where}: the function must return a scalar (shape ()) array, got {what}; "
                "reduce it (e.g. xp.sum) or use pycograd_xp.vjp with a cotangent"
            )
        if out._data.dtype not in out._ns._real_floating:
            raise TypeError(
                f"{where}: the output has dtype {out._data.dtype}; grad needs a real "
                "floating-point output (for complex outputs use pycograd_xp.vjp)"
            )


def value_and_grad(
    f: Callable[P, Any],
    argnums: int | Sequence[int] = 0,
    has_aux: bool = False,
    *,
    budget: int | float | str | None = None,
) -> Callable[P, tuple[Any, Any]]:
    """``f``'s value and its gradient with respect to the ``argnums`` arguments.

    Parameters
    ----------
    f : callable
        The function to differentiate. It must return a real floating-point scalar array
        (shape ``()``), or ``(scalar, aux)`` with ``has_aux``. Its arguments may be pytrees
        (dict, list, tuple, NamedTuple, dataclass) of floating-point arrays; keyword arguments
        are passed through, never differentiated.
    argnums : int or sequence of int, default 0
        The positional arguments to differentiate with respect to.
    has_aux : bool, default False
        Whether ``f`` returns a pair ``(output, aux)``; ``aux`` is returned beside the value,
        not differentiated.
    budget : int, float or str, optional
        Bytes (or ``"200 MB"``) the step's projected peak must fit: what the backward pass
        recomputes is chosen so, before it runs (``memory.within``); the same values.

    Returns
    -------
    callable
        A function of ``f``'s arguments returning ``(value, gradient)`` (``((value, aux),
        gradient)`` with ``has_aux``). The gradient has the structure of the differentiated
        argument (a tuple of them when ``argnums`` is a sequence); inputs the output does not
        depend on get zeros. Inside an outer transform (``grad`` of ``grad``) the results are
        themselves differentiable; otherwise they carry no gradient.

    Raises
    ------
    TypeError
        If an argument to differentiate is not a floating-point array of a pycograd_xp
        namespace, or ``f``'s output is not a real scalar array.
    ValueError
        If ``argnums`` names no positional argument of the call.

    Examples
    --------
    >>> import numpy, pycograd_xp as pg
    >>> xp = pg.namespace(numpy)
    >>> value, g = pg.value_and_grad(lambda x: xp.sum(x**2))(xp.asarray([1.0, 2.0]))
    >>> float(value), g
    (5.0, pycograd_xp.numpy.Array([2., 4.], dtype=float64))
    """
    return _value_and_grad(f, argnums, has_aux, "value_and_grad", budget)


# memory.within's function, set by pycograd_xp.memory (it builds on this module) on import
BUDGETED: list[Any] = [None]


def _value_and_grad(
    f: Callable[P, Any], argnums: int | Sequence[int], has_aux: bool, transform: str, budget: Any
) -> Callable[P, tuple[Any, Any]]:
    """:func:`value_and_grad`, its errors naming ``transform``: the function the user called
    (``grad`` or ``value_and_grad``); ``f`` under a memory schedule that fits ``budget``."""
    if budget is not None:
        f = BUDGETED[0](f, budget, argnums, has_aux=has_aux)

    @functools.wraps(f)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> tuple[Any, Any]:
        name = getattr(f, "__name__", "f")
        where = f"{transform}({name})"
        nums = _argnums(argnums, len(args), where)
        parts = enter("loss", name) if WATCHED[0] else None  # (a lazy backend's op labels)
        prev = push(Grad())
        try:
            res, inputs, structures = _trace(f, args, kwargs, nums, where)
            if has_aux:
                if not (isinstance(res, tuple) and len(res) == 2):
                    raise TypeError(
                        f"{where}: with has_aux=True the function must return a pair (output, aux)"
                    )
                out, aux = res
            else:
                out, aux = res, None
            _check_out(out, where, scalar=True)
            nested = _nested(inputs)
            if STACK.before_backward is not None:
                STACK.before_backward()
            one = make(type(out), out._backend.xp.ones_like(out._data))
            grads = _pull([out], [one], inputs, structures, retain=False, create=nested)
            if STACK.after_backward is not None:
                STACK.after_backward()
        finally:
            restore(prev)
            if parts is not None:
                leave(parts)
        g = grads[0] if isinstance(argnums, int) else tuple(grads)
        value = _finish(out, nested)
        if has_aux:
            return (value, _finish(aux, nested)), g
        return value, g

    return wrapped


def grad(
    f: Callable[P, Any],
    argnums: int | Sequence[int] = 0,
    has_aux: bool = False,
    *,
    budget: int | float | str | None = None,
) -> Callable[P, Any]:
    """The gradient of the real scalar function ``f`` (JAX's ``grad``).

    Parameters
    ----------
    f : callable
        The function to differentiate: it returns a real floating-point scalar array (or
        ``(scalar, aux)`` with ``has_aux``); its arguments may be pytrees of floating-point
        arrays (see :func:`value_and_grad`).
    argnums : int or sequence of int, default 0
        The positional arguments to differentiate with respect to.
    has_aux : bool, default False
        Whether ``f`` returns a pair ``(output, aux)``.
    budget : int, float or str, optional
        As :func:`value_and_grad`'s.

    Returns
    -------
    callable
        A function of ``f``'s arguments returning the gradient (the structure of the
        differentiated argument; a tuple of them when ``argnums`` is a sequence), or
        ``(gradient, aux)`` with ``has_aux``. ``grad`` of ``grad`` works (reverse over reverse).

    Raises
    ------
    TypeError
        As :func:`value_and_grad`: a non-floating input, a non-scalar or complex output.

    See Also
    --------
    value_and_grad : the value and the gradient in one pass.
    vjp : the pullback of a function with any output shape.

    Examples
    --------
    >>> import numpy, pycograd_xp as pg
    >>> xp = pg.namespace(numpy)
    >>> def loss(w, x, y):
    ...     return xp.mean((xp.tanh(x @ w) - y) ** 2)
    >>> w, x, y = xp.zeros(3), xp.ones((4, 3)), xp.ones(4)
    >>> pg.grad(loss)(w, x, y)
    pycograd_xp.numpy.Array([-2., -2., -2.], dtype=float64)
    >>> gw, gx = pg.grad(loss, argnums=(0, 1))(w, x, y)
    >>> gx.shape
    (4, 3)
    """
    vg = _value_and_grad(f, argnums, has_aux, "grad", budget)

    @functools.wraps(f)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> Any:
        (value, g) = vg(*args, **kwargs)
        return (g, value[1]) if has_aux else g

    return wrapped
