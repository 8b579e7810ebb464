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

On NumPy and CuPy, outside any transform, ``sgd`` (momentum, Nesterov, weight decay),
``rmsprop``, ``adagrad``, ``adam``/``adamw`` and ``apply_updates`` are multi-tensor updates (as
PyTorch's ``foreach`` optimizers): the trees are flattened once and each state kind of all
parameters is updated in one pass over the backend's arrays, temporaries written in place. The
values are the per-parameter code's bit for bit, the memory at most its. The per-parameter code
(Array API calls leaf by leaf) runs everywhere else: on Cubed and array-api-strict, under
``compile``, ``vmap``, ``jvp``, ``debug_nans`` and ``memory.project`` (so the projection of a
step is that code's, an upper bound of the multi-tensor step), where the update itself is being
differentiated, and where a learning rate or hyperparameter is not a Python number.
"""

from __future__ import annotations

from .._exports import module_dir as _module_dir
from ._lbfgs import LBFGS, STOP_REASONS, LBFGSState, LineSearchInfo, lbfgs
from ._schedules import (
    Schedule,  # noqa: F401 - the type of a learning-rate schedule
    constant_schedule,
    cosine_decay_schedule,
    exponential_decay_schedule,
    linear_warmup,
    step_decay_schedule,
)
from ._transforms import (
    GradientTransformation,
    Optimizer,
    adagrad,
    adam,
    adamw,
    apply_updates,
    chain,
    clip_by_global_norm,
    clip_by_value,
    global_norm,
    momentum,
    nesterov,
    rmsprop,
    sgd,
)

__all__ = [
    "LBFGS",
    "STOP_REASONS",
    "GradientTransformation",
    "LBFGSState",
    "LineSearchInfo",
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
    "lbfgs",
    "linear_warmup",
    "momentum",
    "nesterov",
    "rmsprop",
    "sgd",
    "step_decay_schedule",
]


# dir() lists the public names only (what completion offers)
__dir__ = _module_dir(globals())
