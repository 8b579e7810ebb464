"""Penalties on the parameters of a :func:`~cubed_plugin.row_loss`, added by the driver.

A loss such as scikit-learn's ``LogisticRegression`` objective, ``C * sum of log-losses +
0.5 * ||w||^2``, is a row-separable sum plus a term that depends on the parameters only. Written
as one function it is not row-separable (each task would add the penalty once more), so it fell
to graph mode. Declared as ``row_loss(per_row, reduction="sum", penalty=l2(1.0, on=...))``, the
tasks of one-pass mode compute the rows' sums as for any row loss, and the driver adds the
penalty's value and gradient once per step, eagerly, with pycograd_xp on the parameters it holds
(:func:`cubed_plugin.steps.finish_sums`): one pass over the data per step still.

A penalty is any ``penalty(params) -> scalar`` written against the namespace of the parameters
(differentiated by pycograd_xp), or a :class:`Penalty`, which also says whether it is smooth:
``optim.lbfgs`` refuses a non-smooth one (:func:`l1`), whose line search and curvature pairs
assume a differentiable function.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pycograd_xp as pg

__all__ = ["Penalty", "l1", "l2"]


@dataclass(frozen=True)
class Penalty:
    """A penalty on the parameters: ``Penalty(fn, smooth=True, name="...")``.

    Parameters
    ----------
    fn : callable
        ``fn(params) -> scalar``, Array API code on the parameters' namespace.
    smooth : bool, default True
        Whether ``fn`` is differentiable everywhere (L-BFGS takes only smooth penalties).
    name : str, default "penalty"
        What messages call it.
    """

    fn: Callable[[Any], Any]
    smooth: bool = True
    name: str = "penalty"

    def __call__(self, params: Any) -> Any:
        return self.fn(params)


def _leaves(params: Any, on: Callable[[Any], Any] | None) -> list:
    picked = params if on is None else on(params)
    return pg.tree_flatten(picked)[0]


def _check_strength(fn: str, strength: float) -> float:
    if not isinstance(strength, (int, float)) or isinstance(strength, bool) or strength < 0:
        raise ValueError(f"penalties.{fn}: strength must be a number >= 0, got {strength!r}")
    return float(strength)


def l2(strength: float = 1.0, *, on: Callable[[Any], Any] | None = None) -> Penalty:
    """``strength / 2 * sum of squares`` of the parameters ``on(params)`` (all of them for
    None): weight decay, scikit-learn's ``0.5 * ||w||^2`` at strength 1.

    Parameters
    ----------
    strength : float, default 1.0
        The factor (``alpha`` in Ridge; ``1 / C`` against a mean loss).
    on : callable, optional
        Picks the penalised parameters from the tree, e.g. ``lambda p: p["w"]`` to leave an
        intercept out.

    Returns
    -------
    Penalty
        A smooth penalty.

    Examples
    --------
    >>> import numpy as np
    >>> from cubed_plugin.penalties import l2
    >>> float(l2(2.0, on=lambda p: p["w"])({"w": np.array([1.0, 2.0]), "b": np.array(5.0)}))
    5.0
    """
    s = _check_strength("l2", strength)

    def l2_penalty(params: Any) -> Any:
        leaves = _leaves(params, on)
        total = 0.0
        for leaf in leaves:
            xp = leaf.__array_namespace__()
            total = total + xp.sum(leaf * leaf)
        return (0.5 * s) * total

    return Penalty(l2_penalty, smooth=True, name=f"l2({strength})")


def l1(strength: float = 1.0, *, on: Callable[[Any], Any] | None = None) -> Penalty:
    """``strength * sum of absolute values`` of the parameters ``on(params)`` (all for None):
    the lasso's penalty. Not smooth at 0: its gradient there is 0 (a subgradient), fine for
    ``optim.sgd``/``optim.adam``; ``optim.lbfgs`` refuses it.

    Parameters
    ----------
    strength : float, default 1.0
        The factor (``alpha`` in Lasso against a mean loss).
    on : callable, optional
        Picks the penalised parameters from the tree.

    Returns
    -------
    Penalty
        A penalty marked non-smooth.
    """
    s = _check_strength("l1", strength)

    def l1_penalty(params: Any) -> Any:
        leaves = _leaves(params, on)
        total = 0.0
        for leaf in leaves:
            xp = leaf.__array_namespace__()
            total = total + xp.sum(xp.abs(leaf))
        return s * total

    return Penalty(l1_penalty, smooth=False, name=f"l1({strength})")


def smooth(penalty: Any) -> bool:
    """Whether ``penalty`` is declared smooth (a plain function is taken to be)."""
    return getattr(penalty, "smooth", True)
