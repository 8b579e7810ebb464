"""Gradient transformations (optax's shape): the pair ``init``/``update``, the helpers they
share, the first-order optimizers and a stateful convenience for PyTorch-style loops."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import array_api_compat

from .._api import no_grad
from .._host import host
from ..memory._spec import Spec
from ..tree import tree_flatten, tree_leaves, tree_map, tree_unflatten
from . import _foreach
from ._schedules import Schedule, _schedule


class GradientTransformation(NamedTuple):
    """A gradient transformation: a pair of pure functions (optax's shape).

    ``state = tx.init(params)``; ``updates, state = tx.update(grads, state, params)``;
    ``params = apply_updates(params, updates)``.

    Attributes
    ----------
    init : callable
        ``init(params) -> state``. It also takes a pytree of ``memory.spec`` objects and returns
        the state as specs (and Python numbers), so a whole step projects before anything is
        allocated.
    update : callable
        ``update(grads, state, params) -> (updates, state)``.
    """

    init: Callable[[Any], Any]
    update: Callable[[Any, Any, Any], tuple[Any, Any]]


# -- helpers ------------------------------------------------------------------------------------
def _ns(x: Any) -> Any:
    return array_api_compat.array_namespace(x)


def _state_like(p: Any, fill: float = 0.0) -> Any:
    """A state leaf like parameter ``p``, filled with ``fill``; for a ``memory.spec``, a spec
    of the same shape, dtype and chunks (the state of a projected step)."""
    if isinstance(p, Spec):
        return Spec(p.shape, p.dtype, p.chunks)
    if not hasattr(p, "__array_namespace__"):
        raise TypeError(
            f"optim: init(params): a parameter leaf is a {type(p).__name__}, not an array; "
            "make the parameters arrays of a namespace (xp.asarray([1.0, 2.0]))"
        )
    xp = _ns(p)
    return xp.zeros_like(p) if fill == 0 else xp.full_like(p, fill)


def _zeros_like(tree: Any) -> Any:
    return tree_map(_state_like, tree)


def _leafwise(fn: Callable[..., tuple], *trees: Any) -> tuple[Any, ...]:
    """Apply ``fn`` to the leaves of ``trees`` (one structure) in one pass; ``fn`` returns a
    tuple, and each position of it becomes a tree of that structure."""
    leaves, td = tree_flatten(trees[0])
    others = []
    for t in trees[1:]:
        t_leaves, t_td = tree_flatten(t)
        if t_td != td:
            raise ValueError(
                "optim: update(grads, state, params): the gradients' structure "
                f"{td!r} differs from the state's or the parameters' {t_td!r}; the state "
                "must come from init() of parameters of the gradients' structure"
            )
        others.append(t_leaves)
    results = [fn(*xs) for xs in zip(leaves, *others, strict=True)]
    n = len(results[0]) if results else 0
    return tuple(tree_unflatten(td, [r[i] for r in results]) for i in range(n))


def apply_updates(params: Any, updates: Any) -> Any:
    """``params + updates`` leaf by leaf (new arrays; the old params are untouched).

    Parameters
    ----------
    params : pytree of Array
        The parameters.
    updates : pytree of Array
        The updates a transformation returned, of ``params``' structure.

    Returns
    -------
    pytree of Array
        The new parameters.
    """
    grp = _foreach.group(params, updates)
    if grp is not None:
        return grp.wrap(_foreach.add(grp))
    return tree_map(lambda p, u: p + u, params, updates)


def global_norm(tree: Any) -> Any:
    """The L2 norm of all leaves together.

    Parameters
    ----------
    tree : pytree of Array
        The arrays (gradients, say).

    Returns
    -------
    Array
        A 0-d array (lazy on lazy backends).
    """
    leaves = tree_leaves(tree)
    xp = _ns(leaves[0])
    total = xp.sum(leaves[0] * leaves[0])
    for leaf in leaves[1:]:
        total = total + xp.sum(leaf * leaf)
    return xp.sqrt(total)


def _masked(mask: Any, params: Any) -> Any:
    """A pytree of booleans like params (True: apply), from a pytree, a callable or None."""
    if mask is None:
        return tree_map(lambda p: True, params)
    return mask(params) if callable(mask) else mask


def _mask_leaves(mask: Any, params: Any, n: int) -> list[bool] | None:
    """:func:`_masked`'s booleans in leaf order, for the ``n`` parameters of a multi-tensor
    update; None where they are not ``n`` Python booleans (the per-parameter code then runs)."""
    if mask is None:
        return [True] * n
    on = tree_leaves(mask(params) if callable(mask) else mask)
    return on if len(on) == n and all(type(m) is bool for m in on) else None


# -- transformations ----------------------------------------------------------------------------
def chain(*transforms: GradientTransformation) -> GradientTransformation:
    """Apply ``transforms`` one after the other (e.g. clipping, then Adam).

    Parameters
    ----------
    *transforms : GradientTransformation
        The transformations, first applied first.

    Returns
    -------
    GradientTransformation
        ``init(params) -> state`` and ``update(grads, state, params) -> (updates, state)``.
    """

    def init(params: Any) -> tuple:
        return tuple(t.init(params) for t in transforms)

    def update(grads: Any, state: tuple, params: Any = None) -> tuple[Any, tuple]:
        new_state = []
        for t, s in zip(transforms, state, strict=True):
            grads, s = t.update(grads, s, params)
            new_state.append(s)
        return grads, tuple(new_state)

    return GradientTransformation(init, update)


def clip_by_global_norm(max_norm: float) -> GradientTransformation:
    """Scale all gradients by ``min(1, max_norm / global_norm)``.

    Parameters
    ----------
    max_norm : float
        The largest global L2 norm let through.

    Returns
    -------
    GradientTransformation
        ``init(params) -> state`` and ``update(grads, state, params) -> (updates, state)``.
    """

    def update(grads: Any, state: Any, params: Any = None) -> tuple[Any, Any]:
        norm = global_norm(grads)
        xp = _ns(norm)
        scale = xp.minimum(xp.ones_like(norm), max_norm / xp.maximum(norm, 1e-12))
        return tree_map(lambda g: g * scale, grads), state

    return GradientTransformation(lambda params: (), update)


def clip_by_value(lo: float, hi: float) -> GradientTransformation:
    """Clip every gradient element into ``[lo, hi]``.

    Parameters
    ----------
    lo, hi : float
        The bounds.

    Returns
    -------
    GradientTransformation
        ``init(params) -> state`` and ``update(grads, state, params) -> (updates, state)``.
    """

    def update(grads: Any, state: Any, params: Any = None) -> tuple[Any, Any]:
        return tree_map(lambda g: _ns(g).clip(g, lo, hi), grads), state

    return GradientTransformation(lambda params: (), update)


def sgd(
    lr: float | Schedule,
    momentum: float = 0.0,
    nesterov: bool = False,
    weight_decay: float = 0.0,
    mask: Any = None,
) -> GradientTransformation:
    """SGD, with heavy-ball or Nesterov momentum and L2 weight decay.

    ``v = momentum * v + g``; step ``-lr * v`` (Nesterov: ``-lr * (g + momentum * v)``). Weight
    decay is added to the gradient (``g + weight_decay * p``), where ``mask`` says.

    Parameters
    ----------
    lr : float or callable
        The learning rate, or a schedule: a function of the step count (``constant_schedule``,
        ``cosine_decay_schedule``, ...).
    momentum : float, default 0.0
        The momentum coefficient (0: plain SGD).
    nesterov : bool, default False
        Nesterov's momentum instead of heavy-ball.
    weight_decay : float, default 0.0
        The L2 penalty's coefficient.
    mask : pytree of bool or callable, optional
        Where weight decay applies: a pytree of booleans like ``params``, or a function of
        ``params`` returning one (None: everywhere).

    Returns
    -------
    GradientTransformation
        ``init(params) -> state`` and ``update(grads, state, params) -> (updates, state)``.

    Examples
    --------
    >>> import numpy, pycograd_xp as pg
    >>> from pycograd_xp import optim
    >>> xp = pg.namespace(numpy)
    >>> params = {"w": xp.asarray([1.0, -2.0])}
    >>> tx = optim.sgd(0.1, momentum=0.9)
    >>> state = tx.init(params)
    >>> grads = pg.grad(lambda p: xp.sum(p["w"] ** 2))(params)
    >>> updates, state = tx.update(grads, state, params)
    >>> optim.apply_updates(params, updates)["w"]
    pycograd_xp.numpy.Array([ 0.8, -1.6], dtype=float64)
    """
    schedule = _schedule(lr)

    def init(params: Any) -> dict:
        return {"count": 0, "velocity": _zeros_like(params) if momentum else None}

    def update(grads: Any, state: dict, params: Any = None) -> tuple[Any, dict]:
        fast = _sgd_foreach(grads, state, params)
        if fast is not None:
            return fast
        if weight_decay:
            on = _masked(mask, params)
            grads = tree_map(lambda g, p, m: g + weight_decay * p if m else g, grads, params, on)
        rate = host(schedule, state["count"])
        velocity = state["velocity"]
        if momentum:
            velocity = tree_map(lambda v, g: momentum * v + g, velocity, grads)
            step = (
                tree_map(lambda v, g: g + momentum * v, velocity, grads) if nesterov else velocity
            )
        else:
            step = grads
        return tree_map(lambda s: -rate * s, step), {
            "count": state["count"] + 1,
            "velocity": velocity,
        }

    def _sgd_foreach(grads: Any, state: dict, params: Any) -> tuple[Any, dict] | None:
        """The multi-tensor update (optim/_foreach.py), or None where it does not apply."""
        rate = host(schedule, state["count"])
        if not _foreach.numbers(rate, momentum, weight_decay) or (weight_decay and params is None):
            return None
        trees = [
            grads,
            *([params] if weight_decay else []),
            *([state["velocity"]] * bool(momentum)),
        ]
        grp = _foreach.group(*trees)
        if grp is None:
            return None
        on = _mask_leaves(mask, params, len(grp.data[0])) if weight_decay else []
        if on is None:
            return None
        updates, velocity = _foreach.sgd(grp, rate, momentum, nesterov, weight_decay, on)
        return grp.wrap(updates), {
            "count": state["count"] + 1,
            "velocity": grp.wrap(velocity) if velocity is not None else None,
        }

    return GradientTransformation(init, update)


def momentum(lr: float | Schedule, beta: float = 0.9) -> GradientTransformation:
    """SGD with heavy-ball momentum: ``sgd(lr, momentum=beta)``.

    Parameters
    ----------
    lr : float or callable
        The learning rate, or a schedule: a function of the step count (``constant_schedule``,
        ``cosine_decay_schedule``, ...).
    beta : float, default 0.9
        The momentum coefficient.

    Returns
    -------
    GradientTransformation
        ``init(params) -> state`` and ``update(grads, state, params) -> (updates, state)``.
    """
    return sgd(lr, momentum=beta)


def nesterov(lr: float | Schedule, beta: float = 0.9) -> GradientTransformation:
    """SGD with Nesterov momentum: ``sgd(lr, momentum=beta, nesterov=True)``.

    Parameters
    ----------
    lr : float or callable
        The learning rate, or a schedule: a function of the step count (``constant_schedule``,
        ``cosine_decay_schedule``, ...).
    beta : float, default 0.9
        The momentum coefficient.

    Returns
    -------
    GradientTransformation
        ``init(params) -> state`` and ``update(grads, state, params) -> (updates, state)``.
    """
    return sgd(lr, momentum=beta, nesterov=True)


def rmsprop(
    lr: float | Schedule, decay: float = 0.9, eps: float = 1e-8, momentum: float = 0.0
) -> GradientTransformation:
    """RMSprop: ``s = decay * s + (1 - decay) g^2``; step ``-lr g / (sqrt(s) + eps)``.

    With momentum: ``m = momentum * m + g / (sqrt(s) + eps)``, step ``-lr m``.

    Parameters
    ----------
    lr : float or callable
        The learning rate, or a schedule: a function of the step count (``constant_schedule``,
        ``cosine_decay_schedule``, ...).
    decay : float, default 0.9
        The decay of the squared-gradient average.
    eps : float, default 1e-8
        Added to the denominator.
    momentum : float, default 0.0
        The momentum coefficient (0: none).

    Returns
    -------
    GradientTransformation
        ``init(params) -> state`` and ``update(grads, state, params) -> (updates, state)``.
    """
    schedule = _schedule(lr)

    def init(params: Any) -> dict:
        return {
            "count": 0,
            "nu": _zeros_like(params),
            "mom": _zeros_like(params) if momentum else None,
        }

    def update(grads: Any, state: dict, params: Any = None) -> tuple[Any, dict]:
        rate = host(schedule, state["count"])
        grp = (
            _foreach.group(grads, state["nu"], *([state["mom"]] if momentum else []))
            if _foreach.numbers(rate, decay, eps, momentum)
            else None
        )
        if grp is not None:  # the multi-tensor update (optim/_foreach.py)
            updates, nu, mom = _foreach.rmsprop(grp, rate, decay, eps, momentum)
            return grp.wrap(updates), {
                "count": state["count"] + 1,
                "nu": grp.wrap(nu),
                "mom": grp.wrap(mom) if mom is not None else None,
            }
        nu = tree_map(lambda s, g: decay * s + (1 - decay) * g * g, state["nu"], grads)
        scaled = tree_map(lambda g, s: g / (_ns(s).sqrt(s) + eps), grads, nu)
        mom = state["mom"]
        if momentum:
            mom = tree_map(lambda m, u: momentum * m + u, mom, scaled)
            scaled = mom
        return tree_map(lambda u: -rate * u, scaled), {
            "count": state["count"] + 1,
            "nu": nu,
            "mom": mom,
        }

    return GradientTransformation(init, update)


def adagrad(
    lr: float | Schedule, eps: float = 1e-10, initial_accumulator: float = 0.0
) -> GradientTransformation:
    """Adagrad: ``a = a + g^2``; step ``-lr g / (sqrt(a) + eps)``.

    Parameters
    ----------
    lr : float or callable
        The learning rate, or a schedule: a function of the step count (``constant_schedule``,
        ``cosine_decay_schedule``, ...).
    eps : float, default 1e-10
        Added to the denominator.
    initial_accumulator : float, default 0.0
        The initial value of ``a``.

    Returns
    -------
    GradientTransformation
        ``init(params) -> state`` and ``update(grads, state, params) -> (updates, state)``.
    """
    schedule = _schedule(lr)

    def init(params: Any) -> dict:
        return {
            "count": 0,
            "sum_sq": tree_map(lambda p: _state_like(p, initial_accumulator), params),
        }

    def update(grads: Any, state: dict, params: Any = None) -> tuple[Any, dict]:
        rate = host(schedule, state["count"])
        grp = _foreach.group(grads, state["sum_sq"]) if _foreach.numbers(rate, eps) else None
        if grp is not None:  # the multi-tensor update (optim/_foreach.py)
            updates, acc = _foreach.adagrad(grp, rate, eps)
            return grp.wrap(updates), {"count": state["count"] + 1, "sum_sq": grp.wrap(acc)}
        acc = tree_map(lambda a, g: a + g * g, state["sum_sq"], grads)
        updates = tree_map(lambda g, a: -rate * g / (_ns(a).sqrt(a) + eps), grads, acc)
        return updates, {"count": state["count"] + 1, "sum_sq": acc}

    return GradientTransformation(init, update)


def adam(
    lr: float | Schedule,
    b1: float = 0.9,
    b2: float = 0.999,
    eps: float = 1e-8,
    weight_decay: float = 0.0,
    mask: Any = None,
) -> GradientTransformation:
    """Adam (Kingma & Ba), bias-corrected; with ``weight_decay`` it is AdamW.

    Weight decay is decoupled: ``-lr * weight_decay * p`` added to the step, where ``mask``
    says.

    Parameters
    ----------
    lr : float or callable
        The learning rate, or a schedule: a function of the step count (``constant_schedule``,
        ``cosine_decay_schedule``, ...).
    b1 : float, default 0.9
        The decay of the gradient's moving average.
    b2 : float, default 0.999
        The decay of the squared gradient's moving average.
    eps : float, default 1e-8
        Added to the denominator.
    weight_decay : float, default 0.0
        The decoupled weight decay's coefficient.
    mask : pytree of bool or callable, optional
        Where weight decay applies: a pytree of booleans like ``params``, or a function of
        ``params`` returning one (None: everywhere).

    Returns
    -------
    GradientTransformation
        ``init(params) -> state`` and ``update(grads, state, params) -> (updates, state)``.

    Examples
    --------
    >>> import numpy, pycograd_xp as pg
    >>> from pycograd_xp import optim
    >>> xp = pg.namespace(numpy)
    >>> params = {"w": xp.asarray([1.0, -2.0])}
    >>> tx = optim.adam(0.1)
    >>> state = tx.init(params)
    >>> for _ in range(3):
    ...     grads = pg.grad(lambda p: xp.sum(p["w"] ** 2))(params)
    ...     updates, state = tx.update(grads, state, params)
    ...     params = optim.apply_updates(params, updates)
    >>> params["w"]
    pycograd_xp.numpy.Array([ 0.7..., -1.7...], dtype=float64)
    """
    schedule = _schedule(lr)

    def init(params: Any) -> dict:
        return {"count": 0, "mu": _zeros_like(params), "nu": _zeros_like(params)}

    def update(grads: Any, state: dict, params: Any = None) -> tuple[Any, dict]:
        t = state["count"] + 1
        c1, c2 = 1 - b1**t, 1 - b2**t
        rate = host(schedule, state["count"])
        if weight_decay and params is None:
            raise ValueError("adamw: update() needs params for the weight decay")
        fast = (
            _foreach.group(grads, state["mu"], state["nu"], *([params] if weight_decay else []))
            if _foreach.numbers(rate, b1, b2, eps, c1, c2, weight_decay)
            else None
        )
        on = None
        if fast is not None:
            n = len(fast.data[0])
            on = _mask_leaves(mask, params, n) if weight_decay else [False] * n
        if fast is not None and on is not None:  # the multi-tensor update (optim/_foreach.py)
            updates, mu, nu = _foreach.adam(fast, rate, b1, b2, eps, c1, c2, weight_decay, on)
            return fast.wrap(updates), {"count": t, "mu": fast.wrap(mu), "nu": fast.wrap(nu)}
        decay = _masked(mask, params) if weight_decay else tree_map(lambda g: False, grads)
        ps = params if params is not None else grads

        def leaf(g: Any, m: Any, v: Any, p: Any, on: bool) -> tuple[Any, Any, Any]:
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * (g * g)
            u = (-rate / c1) * m / (_ns(v).sqrt(v / c2) + eps)
            if on:
                u = u - (rate * weight_decay) * p
            return u, m, v

        updates, mu, nu = _leafwise(leaf, grads, state["mu"], state["nu"], ps, decay)
        return updates, {"count": t, "mu": mu, "nu": nu}

    return GradientTransformation(init, update)


def adamw(
    lr: float | Schedule,
    b1: float = 0.9,
    b2: float = 0.999,
    eps: float = 1e-8,
    weight_decay: float = 1e-2,
    mask: Any = None,
) -> GradientTransformation:
    """AdamW: :func:`adam` with decoupled weight decay, 1e-2 by default.

    Parameters
    ----------
    lr : float or callable
        The learning rate, or a schedule: a function of the step count (``constant_schedule``,
        ``cosine_decay_schedule``, ...).
    b1 : float, default 0.9
        The decay of the gradient's moving average.
    b2 : float, default 0.999
        The decay of the squared gradient's moving average.
    eps : float, default 1e-8
        Added to the denominator.
    weight_decay : float, default 1e-2
        The decoupled weight decay's coefficient.
    mask : pytree of bool or callable, optional
        Where weight decay applies: a pytree of booleans like ``params``, or a function of
        ``params`` returning one (None: everywhere).

    Returns
    -------
    GradientTransformation
        ``init(params) -> state`` and ``update(grads, state, params) -> (updates, state)``.
    """
    return adam(lr, b1, b2, eps, weight_decay=weight_decay, mask=mask)


class Optimizer:
    """A transformation and its state, for PyTorch-style loops::

        opt = Optimizer(adam(1e-3), params)
        params = opt.step(params, grads)

    Parameters
    ----------
    transform : GradientTransformation
        The transformation (``adam(1e-3)``, ...).
    params : pytree of Array
        The initial parameters (``transform.init(params)`` is the state).
    """

    def __init__(self, transform: GradientTransformation, params: Any) -> None:
        self.transform = transform
        self.state = transform.init(params)

    def step(self, params: Any, grads: Any) -> Any:
        """One update, under ``no_grad``: the new parameters (the state is kept).

        Parameters
        ----------
        params : pytree of Array
            The current parameters.
        grads : pytree of Array
            Their gradients.

        Returns
        -------
        pytree of Array
            The updated parameters.
        """
        with no_grad():
            updates, self.state = self.transform.update(grads, self.state, params)
            return apply_updates(params, updates)
