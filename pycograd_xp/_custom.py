"""``custom_vjp`` and ``custom_jvp`` (JAX's decorator shapes): user-given derivatives.

A decorated function becomes a row of its own, built at call time like ``remat``'s: the
function runs untraced, and one node is recorded for it whose VJP (``custom_vjp``) or JVP
(``custom_jvp``) is the user's rule. Rules are written against the arrays they get (arrays of
our namespace, so they are Array-API code and differentiable again for higher order).

* ``@custom_vjp def f(*args)``; ``f.defvjp(fwd, bwd)`` with ``fwd(*args) -> (out, residuals)``
  and ``bwd(residuals, g) -> one cotangent per argument`` (None for no gradient). ``jvp`` of
  it raises, as in JAX.
* ``@custom_jvp def f(*args)``; ``f.defjvp(rule)`` with ``rule(primals, tangents) ->
  (out, tangent_out)``; reverse mode (``grad``/``vjp``) transposes the rule (it must be linear
  in the tangents, as JAX requires), so both modes come from one rule.

Arguments are arrays or Python values (passed through); outputs an array or a tuple of arrays.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from . import _api, _tape
from ._primitive import Primitive
from ._state import STACK, CustomRule, interpreting
from .namespace import of as namespace_of
from .namespace._array import Array, make, ours
from .namespace._record import record

__all__ = ["custom_jvp", "custom_vjp"]

_ARGS = inspect.Signature([inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL)])


def _ours(ops: Any, a: Any) -> Any:
    """``a`` as arrays of our namespace (rules get raw arrays in a first-order pass)."""
    return ours(namespace_of(ops), a)


def _back(ops: Any, a: Any) -> Any:
    """What a rule returns to the engine: raw arrays on a raw namespace."""
    if a is None or ops is namespace_of(ops):
        return a
    if type(a) is list or type(a) is tuple:
        return type(a)(_back(ops, e) for e in a)
    return a._data if isinstance(a, Array) else a


def _fresh(out: Any) -> Any:
    """New array objects holding ``out``'s values (the node recorded for the call goes on them,
    never on an argument returned as is)."""
    if isinstance(out, tuple):
        return tuple(make(type(o), o._data) for o in out)
    return make(type(out), out._data)


def _tracked(args: tuple) -> list:
    return [a for a in args if isinstance(a, Array) and a._node is not None]


def _check_out(out: Any, where: str) -> Any:
    if isinstance(out, list):
        out = tuple(out)
    if not (
        isinstance(out, Array)
        or (isinstance(out, tuple) and out and all(isinstance(o, Array) for o in out))
    ):
        raise TypeError(
            f"{where}: the function must return an array or a tuple of arrays, "
            f"got {type(out).__name__}"
        )
    return out


class custom_vjp:  # JAX's name
    """``fun`` with a user-given VJP: ``f.defvjp(fwd, bwd)`` (JAX's decorator shape).

    The decorated function becomes a row of its own: it runs untraced, and one node is recorded
    whose VJP is ``bwd``. ``fwd`` and ``bwd`` get arrays of our namespace (Array-API code,
    differentiable again for higher order). ``jvp`` of it raises, as in JAX: use
    :class:`custom_jvp` for a rule that serves both modes.

    Parameters
    ----------
    fun : callable
        The function: arrays or Python values (passed through) in, an array or a tuple of arrays
        out.

    Examples
    --------
    A gradient clip:

    >>> import numpy, pycograd_xp as pg
    >>> xp = pg.namespace(numpy)
    >>> @pg.custom_vjp
    ... def clip_gradient(x):
    ...     return x
    >>> clip_gradient.defvjp(lambda x: (x, None), lambda res, g: (xp.clip(g, -1.0, 1.0),))
    >>> pg.grad(lambda x: xp.sum(3.0 * clip_gradient(x)))(xp.asarray([1.0, 2.0]))
    pycograd_xp.numpy.Array([1., 1.], dtype=float64)
    """

    def __init__(self, fun: Callable[..., Any]) -> None:
        functools.update_wrapper(self, fun, updated=())  # not fun.__dict__: see compile
        self.fun = fun
        self.fwd: Callable[..., Any] | None = None
        self.bwd: Callable[..., Any] | None = None
        self.name = f"custom_vjp({getattr(fun, '__name__', 'f')})"

    def defvjp(self, fwd: Callable[..., Any], bwd: Callable[..., Any]) -> None:
        """Set the rule.

        Parameters
        ----------
        fwd : callable
            ``fwd(*args) -> (out, residuals)``: the function's value and what ``bwd`` needs.
        bwd : callable
            ``bwd(residuals, g) -> cotangents``: one cotangent per argument of the function
            (None for no gradient), ``g`` of the output's structure.
        """
        self.fwd, self.bwd = fwd, bwd

    def __call__(self, *args: Any) -> Any:
        if not _tracked(args) or not STACK.grad_enabled or id(self) in STACK.custom:
            return self.fun(*args)
        if self.fwd is None:
            raise TypeError(f"{self.name}: no rule; call f.defvjp(fwd, bwd) first")
        ns = _tracked(args)[0]._ns
        with interpreting(CustomRule(self)):
            res = self.fwd(*args)  # recorded: residuals that depend on args stay differentiable
        if not (isinstance(res, tuple) and len(res) == 2):
            raise TypeError(f"{self.name}: fwd must return a pair (out, residuals)")
        out, residuals = _fresh(_check_out(res[0], self.name)), res[1]
        bwd, name, nargs, me = self.bwd, self.name, len(args), self
        assert bwd is not None  # defvjp sets fwd and bwd together

        def vjp_rule(ops: Any, g: Any, o: Any, *a: Any) -> tuple:
            with interpreting(CustomRule(me)):
                ct = tuple(_ours(ops, g)) if isinstance(g, list) else _ours(ops, g)
                cts = bwd(residuals, ct)
            if not isinstance(cts, tuple | list) or len(cts) != nargs:
                raise TypeError(
                    f"{name}: bwd must return a tuple of {nargs} cotangent(s), one "
                    f"per argument of f"
                )
            return tuple(_back(ops, c) for c in cts)

        def jvp_rule(*_: Any, **__: Any) -> Any:
            raise TypeError(
                f"{name}: can't apply forward-mode autodiff (jvp) to a custom_vjp "
                "function; use custom_jvp for a rule that serves both modes"
            )

        prim = Primitive(
            name, "general", None, None, (), signature=_ARGS, vjp=vjp_rule, jvp=jvp_rule
        )
        return record(prim, ns, out, args, {})


class custom_jvp:  # JAX's name
    """``fun`` with a user-given JVP: ``f.defjvp(rule)`` (JAX's decorator shape).

    Reverse mode (``grad``/``vjp``) transposes the rule (it must be linear in the tangents, as JAX
    requires), so both modes come from one rule; higher order works through it.

    Parameters
    ----------
    fun : callable
        The function: arrays or Python values (passed through) in, an array or a tuple of arrays
        out.

    Examples
    --------
    A stable ``log(1 + exp(x))``:

    >>> import numpy, pycograd_xp as pg
    >>> xp = pg.namespace(numpy)
    >>> @pg.custom_jvp
    ... def softplus(x):
    ...     return xp.logaddexp(x, 0.0)
    >>> @softplus.defjvp
    ... def _(primals, tangents):
    ...     (x,), (t,) = primals, tangents
    ...     return softplus(x), t / (1.0 + xp.exp(-x))
    >>> pg.grad(lambda x: xp.sum(softplus(x)))(xp.asarray([0.0, 1000.0]))
    pycograd_xp.numpy.Array([0.5, 1. ], dtype=float64)
    """

    def __init__(self, fun: Callable[..., Any]) -> None:
        functools.update_wrapper(self, fun, updated=())  # not fun.__dict__: see compile
        self.fun = fun
        self.rule: Callable[..., Any] | None = None
        self.name = f"custom_jvp({getattr(fun, '__name__', 'f')})"

    def defjvp(self, rule: Callable[..., Any]) -> Callable[..., Any]:
        """Set the rule (usable as a decorator).

        Parameters
        ----------
        rule : callable
            ``rule(primals, tangents) -> (out, tangent_out)``, ``primals`` and ``tangents``
            tuples of the arguments and their tangents (a zero array where an argument has
            none).

        Returns
        -------
        callable
            ``rule``.
        """
        self.rule = rule
        return rule

    def __call__(self, *args: Any) -> Any:
        if not _tracked(args) or not STACK.grad_enabled or id(self) in STACK.custom:
            return self.fun(*args)
        if self.rule is None:
            raise TypeError(f"{self.name}: no rule; call f.defjvp(rule) first")
        ns = _tracked(args)[0]._ns
        with _api.no_grad():
            out = _fresh(_check_out(self.fun(*args), self.name))
        rule, name, me = self.rule, self.name, self

        def jvp_rule(ops: Any, tangents: tuple, o: Any, *a: Any) -> Any:
            a = _ours(ops, a)
            ts = tuple(
                ns.zeros_like(x) if t is None and isinstance(x, Array) else _ours(ops, t)
                for x, t in zip(a, tangents, strict=True)
            )
            with interpreting(CustomRule(me)):
                res = rule(a, ts)
            if not (isinstance(res, tuple) and len(res) == 2):
                raise TypeError(f"{name}: the jvp rule must return a pair (out, tangent_out)")
            t_out = res[1]
            return _back(ops, tuple(t_out) if isinstance(t_out, list) else t_out)

        def vjp_rule(ops: Any, g: Any, o: Any, *a: Any) -> tuple:
            return _transpose_jvp(jvp_rule, ops, g, o, a)

        prim = Primitive(
            name,
            "general",
            None,
            None,
            (),
            signature=_ARGS,
            vjp=vjp_rule,
            jvp=jvp_rule,
            saves=frozenset({"args", "out"}),
        )
        return record(prim, ns, out, args, {})


def _transpose_jvp(jvp_rule: Callable[..., Any], ops: Any, g: Any, o: Any, a: tuple) -> tuple:
    """Reverse mode from a JVP rule linear in its tangents: record the rule with the tangents
    tracked, then pull ``g`` back through that recording to the tangents."""
    ns = namespace_of(ops)
    nested = ops is ns
    a = _ours(ops, a)
    with _api.enable_grad():
        ts: list[Any] = []
        handles: list[Any] = []
        for x in a:
            if isinstance(x, Array) and x._data.dtype in ns._floating:
                t, inp = _api._track(ns.zeros_like(x), "custom_jvp", "a tangent")
                ts.append(t)
                handles.append(inp.node)
            else:
                ts.append(None)
                handles.append(None)
        t_out = jvp_rule(ns, tuple(ts), _ours(ops, o), *a)
        outs = list(t_out) if isinstance(t_out, tuple) else [t_out]
        gs = list(g) if isinstance(g, list) else [g]
        roots = []
        for to, gi in zip(outs, gs, strict=True):
            if to is None or gi is None or to._node is None:
                continue
            if to.shape != gi.shape:
                to = ns.broadcast_to(to, tuple(gi.shape))
            roots.append((to._node, gi))
        found = _tape.backward(  # no roots: nothing found
            roots,
            targets=[h for h in handles if h is not None],
            create_graph=nested,
            retain_graph=nested,
        )
    return tuple(found.get(id(h)) if h is not None else None for h in handles)
