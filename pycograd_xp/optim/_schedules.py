"""Learning-rate schedules: functions of the step count (optax's)."""

from __future__ import annotations

import math
from collections.abc import Callable

Schedule = Callable[[int], float]


def constant_schedule(value: float) -> Schedule:
    """The constant learning rate ``value``.

    Parameters
    ----------
    value : float
        The learning rate.

    Returns
    -------
    callable
        The schedule: a function of the step count (an int) returning the learning rate.
    """
    return lambda step: value


def step_decay_schedule(init: float, step_size: int, gamma: float = 0.1) -> Schedule:
    """``init * gamma ** (step // step_size)``.

    Parameters
    ----------
    init : float
        The initial learning rate.
    step_size : int
        Steps between decays.
    gamma : float, default 0.1
        The factor of each decay.

    Returns
    -------
    callable
        The schedule: a function of the step count (an int) returning the learning rate.
    """
    return lambda step: init * gamma ** (step // step_size)


def exponential_decay_schedule(init: float, decay_rate: float, decay_steps: int) -> Schedule:
    """``init * decay_rate ** (step / decay_steps)``.

    Parameters
    ----------
    init : float
        The initial learning rate.
    decay_rate : float
        The factor per ``decay_steps`` steps.
    decay_steps : int
        The steps over which the rate is multiplied by ``decay_rate``.

    Returns
    -------
    callable
        The schedule: a function of the step count (an int) returning the learning rate.
    """
    return lambda step: init * decay_rate ** (step / decay_steps)


def cosine_decay_schedule(init: float, decay_steps: int, alpha: float = 0.0) -> Schedule:
    """Cosine from ``init`` down to ``alpha * init`` over ``decay_steps``, then flat.

    Parameters
    ----------
    init : float
        The initial learning rate.
    decay_steps : int
        The length of the decay.
    alpha : float, default 0.0
        The final rate, as a fraction of ``init``.

    Returns
    -------
    callable
        The schedule: a function of the step count (an int) returning the learning rate.
    """

    def schedule(step: int) -> float:
        t = min(step, decay_steps) / decay_steps
        return init * ((1 - alpha) * 0.5 * (1 + math.cos(math.pi * t)) + alpha)

    return schedule


def linear_warmup(peak: float, warmup_steps: int, then: Schedule | None = None) -> Schedule:
    """Linear from 0 to ``peak`` over ``warmup_steps``, then ``then(step - warmup_steps)``.

    Parameters
    ----------
    peak : float
        The rate at the end of the warmup.
    warmup_steps : int
        The length of the warmup.
    then : callable, optional
        The schedule after it, counted from its end (None: constant ``peak``).

    Returns
    -------
    callable
        The schedule: a function of the step count (an int) returning the learning rate.
    """
    after = then or constant_schedule(peak)
    return lambda step: (
        peak * step / warmup_steps if step < warmup_steps else after(step - warmup_steps)
    )


def _schedule(lr: float | Schedule) -> Schedule:
    return lr if callable(lr) else constant_schedule(lr)
