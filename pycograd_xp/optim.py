"""Optimizers as gradient transformations (optax's shape), plus a small stateful convenience.

A transformation is a pair of pure functions::

    state = tx.init(params)
    updates, state = tx.update(grads, state, params)
    params = apply_updates(params, updates)        # params + updates, leaf by leaf

Params, grads and updates are pytrees of arrays of any pycograd_xp namespace; every step is
Array API code (lazy on Cubed: nothing converts an array to a Python number). ``init`` also takes
a pytree of ``memory.spec`` objects and returns the state as specs (and Python numbers), so a
whole training step projects before anything is allocated (``memory.project``). Learning rates
may be numbers or schedules (functions of the step count). ``Optimizer`` wraps a transformation
and its state for PyTorch-style use: ``params = opt.step(params, grads)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import array_api_compat

from ._api import no_grad
from ._host import host
from .memory._project import Spec
from .tree import tree_flatten, tree_leaves, tree_map, tree_unflatten

Schedule = Callable[[int], float]

__all__ = [
    "GradientTransformation",
    "Optimizer",
    "adagrad",
    "adam",
    "adamw",
    "apply_updates",
    "chain",
    "clip_by_global_norm",
    "clip_by_value",
    "constant_schedule",
    "cosine_decay_schedule",
    "exponential_decay_schedule",
    "global_norm",
    "linear_warmup",
    "momentum",
    "nesterov",
    "rmsprop",
    "sgd",
    "step_decay_schedule",
]


class GradientTransformation(NamedTuple):
    init: Callable[[Any], Any]
    update: Callable[[Any, Any, Any], tuple[Any, Any]]


# -- schedules ----------------------------------------------------------------------------------
def constant_schedule(value: float) -> Schedule:
    return lambda step: value


def step_decay_schedule(init: float, step_size: int, gamma: float = 0.1) -> Schedule:
    """``init * gamma ** (step // step_size)``."""
    return lambda step: init * gamma ** (step // step_size)


def exponential_decay_schedule(init: float, decay_rate: float, decay_steps: int) -> Schedule:
    """``init * decay_rate ** (step / decay_steps)``."""
    return lambda step: init * decay_rate ** (step / decay_steps)


def cosine_decay_schedule(init: float, decay_steps: int, alpha: float = 0.0) -> Schedule:
    """Cosine from ``init`` down to ``alpha * init`` over ``decay_steps``, then flat."""

    def schedule(step: int) -> float:
        t = min(step, decay_steps) / decay_steps
        return init * ((1 - alpha) * 0.5 * (1 + math.cos(math.pi * t)) + alpha)

    return schedule


def linear_warmup(peak: float, warmup_steps: int, then: Schedule | None = None) -> Schedule:
    """Linear from 0 to ``peak`` over ``warmup_steps``, then ``then(step - warmup_steps)``
    (constant ``peak`` if None)."""
    after = then or constant_schedule(peak)
    return lambda step: (
        peak * step / warmup_steps if step < warmup_steps else after(step - warmup_steps)
    )


def _schedule(lr: float | Schedule) -> Schedule:
    return lr if callable(lr) else constant_schedule(lr)


# -- helpers ------------------------------------------------------------------------------------
def _ns(x: Any) -> Any:
    return array_api_compat.array_namespace(x)


def _state_like(p: Any, fill: float = 0.0) -> Any:
    """A state leaf like parameter ``p``, filled with ``fill``; for a ``memory.spec``, a spec
    of the same shape, dtype and chunks (the state of a projected step)."""
    if isinstance(p, Spec):
        return Spec(p.shape, p.dtype, p.chunks)
    xp = _ns(p)
    return xp.zeros_like(p) if fill == 0 else xp.full_like(p, fill)


def _zeros_like(tree: Any) -> Any:
    return tree_map(_state_like, tree)


def _leafwise(fn: Callable[..., tuple], *trees: Any) -> tuple[Any, ...]:
    """Apply ``fn`` to the leaves of ``trees`` (one structure) in one pass; ``fn`` returns a
    tuple, and each position of it becomes a tree of that structure."""
    leaves, td = tree_flatten(trees[0])
    others = [tree_flatten(t)[0] for t in trees[1:]]
    results = [fn(*xs) for xs in zip(leaves, *others, strict=True)]
    n = len(results[0]) if results else 0
    return tuple(tree_unflatten(td, [r[i] for r in results]) for i in range(n))


def apply_updates(params: Any, updates: Any) -> Any:
    """``params + updates`` leaf by leaf (new arrays; the old params are untouched)."""
    return tree_map(lambda p, u: p + u, params, updates)


def global_norm(tree: Any) -> Any:
    """The L2 norm of all leaves together, as a 0-d array (lazy on lazy backends)."""
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


# -- transformations ----------------------------------------------------------------------------
def chain(*transforms: GradientTransformation) -> GradientTransformation:
    """Apply ``transforms`` one after the other (e.g. clipping, then Adam)."""

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
    """Scale all gradients by ``min(1, max_norm / global_norm)``."""

    def update(grads: Any, state: Any, params: Any = None) -> tuple[Any, Any]:
        norm = global_norm(grads)
        xp = _ns(norm)
        scale = xp.minimum(xp.ones_like(norm), max_norm / xp.maximum(norm, 1e-12))
        return tree_map(lambda g: g * scale, grads), state

    return GradientTransformation(lambda params: (), update)


def clip_by_value(lo: float, hi: float) -> GradientTransformation:
    """Clip every gradient element into ``[lo, hi]``."""

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
    """SGD, with heavy-ball or Nesterov momentum and L2 weight decay (added to the gradient,
    where ``mask`` says; ``mask`` is a pytree of booleans like params or a function of params).

    ``v = momentum * v + g``; step ``-lr * v`` (Nesterov: ``-lr * (g + momentum * v)``).
    """
    schedule = _schedule(lr)

    def init(params: Any) -> dict:
        return {"count": 0, "velocity": _zeros_like(params) if momentum else None}

    def update(grads: Any, state: dict, params: Any = None) -> tuple[Any, dict]:
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

    return GradientTransformation(init, update)


def momentum(lr: float | Schedule, beta: float = 0.9) -> GradientTransformation:
    return sgd(lr, momentum=beta)


def nesterov(lr: float | Schedule, beta: float = 0.9) -> GradientTransformation:
    return sgd(lr, momentum=beta, nesterov=True)


def rmsprop(
    lr: float | Schedule, decay: float = 0.9, eps: float = 1e-8, momentum: float = 0.0
) -> GradientTransformation:
    """``s = decay * s + (1 - decay) g^2``; step ``-lr g / (sqrt(s) + eps)`` (with momentum:
    ``m = momentum * m + g / (sqrt(s) + eps)``, step ``-lr m``)."""
    schedule = _schedule(lr)

    def init(params: Any) -> dict:
        return {
            "count": 0,
            "nu": _zeros_like(params),
            "mom": _zeros_like(params) if momentum else None,
        }

    def update(grads: Any, state: dict, params: Any = None) -> tuple[Any, dict]:
        nu = tree_map(lambda s, g: decay * s + (1 - decay) * g * g, state["nu"], grads)
        scaled = tree_map(lambda g, s: g / (_ns(s).sqrt(s) + eps), grads, nu)
        mom = state["mom"]
        if momentum:
            mom = tree_map(lambda m, u: momentum * m + u, mom, scaled)
            scaled = mom
        rate = host(schedule, state["count"])
        return tree_map(lambda u: -rate * u, scaled), {
            "count": state["count"] + 1,
            "nu": nu,
            "mom": mom,
        }

    return GradientTransformation(init, update)


def adagrad(
    lr: float | Schedule, eps: float = 1e-10, initial_accumulator: float = 0.0
) -> GradientTransformation:
    """``a = a + g^2``; step ``-lr g / (sqrt(a) + eps)``."""
    schedule = _schedule(lr)

    def init(params: Any) -> dict:
        return {
            "count": 0,
            "sum_sq": tree_map(lambda p: _state_like(p, initial_accumulator), params),
        }

    def update(grads: Any, state: dict, params: Any = None) -> tuple[Any, dict]:
        acc = tree_map(lambda a, g: a + g * g, state["sum_sq"], grads)
        rate = host(schedule, state["count"])
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
    """Adam (Kingma & Ba), bias-corrected; with ``weight_decay`` it is AdamW (decoupled:
    ``-lr * weight_decay * p`` added to the step, where ``mask`` says)."""
    schedule = _schedule(lr)

    def init(params: Any) -> dict:
        return {"count": 0, "mu": _zeros_like(params), "nu": _zeros_like(params)}

    def update(grads: Any, state: dict, params: Any = None) -> tuple[Any, dict]:
        t = state["count"] + 1
        c1, c2 = 1 - b1**t, 1 - b2**t
        rate = host(schedule, state["count"])
        if weight_decay and params is None:
            raise ValueError("adamw: update() needs params for the weight decay")
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
    return adam(lr, b1, b2, eps, weight_decay=weight_decay, mask=mask)


class Optimizer:
    """A transformation and its state, for PyTorch-style loops::

    opt = Optimizer(adam(1e-3), params)
    params = opt.step(params, grads)
    """

    def __init__(self, transform: GradientTransformation, params: Any) -> None:
        self.transform = transform
        self.state = transform.init(params)

    def step(self, params: Any, grads: Any) -> Any:
        with no_grad():
            updates, self.state = self.transform.update(grads, self.state, params)
            return apply_updates(params, updates)
