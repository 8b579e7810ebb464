"""``scheduled``: a function run under a memory schedule chosen elsewhere (its ``drop`` and
``names``): what a budgeted step runs once its schedule is chosen, what each micro-batch runs
(:mod:`._batches`) and what ``cubed_plugin``'s one-pass tasks run in other processes."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .._schedule import Plan
from .._state import Remat, interpreting
from ._project import AS_IS


def scheduled(
    f: Callable[..., Any],
    drop: frozenset[int],
    names: tuple[str, ...] | None = None,
    logs: list | None = None,
) -> Callable[..., Any]:
    """``f`` run under the schedule that drops the nodes numbered ``drop`` (a fresh plan per
    call; ``logs``, when a list, gets each call's record of its nodes).

    What a :class:`~pycograd_xp.memory.Budgeted` step runs once its schedule is chosen, for a
    caller that chose the schedule elsewhere and kept only its ``drop`` and ``names`` (a task in
    another process: ``cubed_plugin``'s one-pass tasks).

    Parameters
    ----------
    f : callable
        The loss (or the function), differentiated by the caller as ``f`` would be.
    drop : frozenset of int
        A :class:`~pycograd_xp.memory.Schedule`'s ``drop``: the numbers of the nodes the
        backward pass makes again.
    names : tuple of str, optional
        A :class:`~pycograd_xp.memory.Schedule`'s ``names``: a run recording other rows stops
        dropping.
    logs : list, optional
        Gets each call's record of its nodes.

    Returns
    -------
    callable
        ``f`` under the schedule: the same values and gradients, bit for bit.
    """

    @functools.wraps(f)
    def g(*args: Any, **kwargs: Any) -> Any:
        plan = Plan(drop, names, log=[] if logs is not None else None)
        if logs is not None:
            logs.append(plan.log)
        with interpreting(Remat(plan)):
            return f(*args, **kwargs)

    if getattr(f, AS_IS, False):
        setattr(g, AS_IS, True)
    return g
