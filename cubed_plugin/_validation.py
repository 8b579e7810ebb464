"""``fit``'s validation pass and early stopping.

Once per epoch (and after the last step; after every L-BFGS step), ``fit`` evaluates the loss
and the metrics on the validation data at the current parameters, without gradients, in one
read of that data (:func:`cubed_plugin._evaluate.row_sums`: every task computes every row
function's sum over its chunk), its plan checked against ``allowed_mem`` before it runs and its
measured task memory against the projections after, as a training step's. The figures go into
the history (``"val_loss"``, ``"val_<metric>"``, and ``"val_step"``: the step each was taken
after) and the log. :class:`EarlyStopping` ends the run when the monitored figure has not
improved for ``patience`` evaluations and, by default, returns the best parameters seen.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import pycograd_xp as pg

from .steps import RowLoss

__all__ = ["EarlyStopping"]


@dataclass(frozen=True)
class EarlyStopping:
    """Stop :func:`~cubed_plugin.fit` when a validation figure stops improving (Keras'
    ``EarlyStopping``, scikit-learn's ``n_iter_no_change``).

    Parameters
    ----------
    patience : int, default 5
        Evaluations (epochs) without improvement after which the run ends.
    monitor : str, default "val_loss"
        The history's key watched: ``"val_loss"`` or ``"val_<metric>"``.
    mode : {"min", "max"}, default "min"
        Whether lower or higher is better ("max" for an accuracy).
    min_delta : float, default 0.0
        The least change that counts as an improvement.
    restore_best : bool, default True
        Return the parameters of the best evaluation (kept, and checkpointed, as the run goes),
        not the last ones.

    Examples
    --------
    >>> from cubed_plugin import EarlyStopping
    >>> EarlyStopping(patience=3, monitor="val_accuracy", mode="max")
    EarlyStopping(patience=3, monitor='val_accuracy', mode='max', min_delta=0.0, restore_best=True)
    """

    patience: int = 5
    monitor: str = "val_loss"
    mode: str = "min"
    min_delta: float = 0.0
    restore_best: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.patience, int) or isinstance(self.patience, bool):
            raise TypeError(f"EarlyStopping: patience must be an int, got {self.patience!r}")
        if self.patience < 1:
            raise ValueError(f"EarlyStopping: patience must be at least 1, got {self.patience}")
        if self.mode not in ("min", "max"):
            raise ValueError(f"EarlyStopping: mode must be 'min' or 'max', got {self.mode!r}")
        if not self.min_delta >= 0:
            raise ValueError(f"EarlyStopping: min_delta must be >= 0, got {self.min_delta!r}")

    def better(self, value: float, best: float | None) -> bool:
        """Whether ``value`` improves on ``best`` by more than ``min_delta``.

        Parameters
        ----------
        value : float
            A new figure (NaN never improves).
        best : float or None
            The best so far (None: nothing yet).

        Returns
        -------
        bool
            True when ``value`` is the new best.
        """
        if math.isnan(value):
            return False
        if best is None:
            return True
        return (
            value < best - self.min_delta if self.mode == "min" else value > best + self.min_delta
        )

    def status(self, values: Sequence[float]) -> tuple[int | None, int]:
        """Where the best of ``values`` is and how many evaluations came after it (what a run's
        history says, so that a resumed run goes on counting where it stopped).

        Parameters
        ----------
        values : sequence of float
            The monitored figure, one per evaluation.

        Returns
        -------
        best : int or None
            The index of the best value (None: none yet, or all NaN).
        since : int
            Evaluations after it (all of them when there is no best).
        """
        best, at = None, None
        for i, v in enumerate(values):
            if self.better(v, best):
                best, at = v, i
        since = len(values) - 1 - at if at is not None else len(values)
        return at, since


def early_stopping_of(value: Any) -> EarlyStopping | None:
    """``fit``'s ``early_stopping`` argument: None, an :class:`EarlyStopping`, or an int (its
    patience)."""
    if value is None or isinstance(value, EarlyStopping):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return EarlyStopping(patience=value)
    raise TypeError(
        f"fit: early_stopping must be an int (the patience) or a cubed_plugin.EarlyStopping, "
        f"got {value!r}"
    )


def check_validation(
    loss: Callable[..., Any],
    validation: Sequence[Any] | None,
    metrics: Mapping[str, Callable[..., Any]] | None,
    early: EarlyStopping | None,
    n_data: int,
) -> tuple | None:
    """Refuse inconsistent validation arguments of ``fit`` before anything runs; the
    validation data as Cubed arrays (None: none)."""
    metrics = dict(metrics or {})
    if validation is None:
        if metrics or early is not None:
            what = "metrics=" if metrics else "early_stopping="
            raise ValueError(
                f"fit: {what} needs validation data (validation=(X_val, y_val)): the figures "
                "are computed on it once per epoch"
            )
        return None
    if isinstance(validation, Mapping) or not isinstance(validation, Sequence):
        raise TypeError(
            "fit: validation must be a sequence of Cubed arrays like data, e.g. "
            f"validation=(X_val, y_val), got {type(validation).__name__}"
        )
    val = tuple(pg.unwrap(x) for x in validation)
    if len(val) != n_data:
        raise ValueError(
            f"fit: validation has {len(val)} arrays and data {n_data}; give the same arguments "
            "of the loss, e.g. data=(X, y) and validation=(X_val, y_val)"
        )
    for name, m in metrics.items():
        if not isinstance(name, str) or not callable(m):
            raise TypeError(
                "fit: metrics must map names to per-row functions metric(params, *rows) -> one "
                f"value per row, got {name!r}: {m!r}"
            )
    if early is not None:
        known = ["val_loss", *(f"val_{n}" for n in metrics)]
        if early.monitor not in known:
            raise ValueError(
                f"fit: early_stopping monitors {early.monitor!r}, which this run does not "
                f"compute; it computes {', '.join(repr(k) for k in known)}"
            )
    return val


class Validation:
    """The validation pass of one ``fit`` run: the lazy figures at given parameters, computed
    through ``evaluate`` (the run's executor, callbacks, budget check and measured-memory
    check, given by ``fit``'s stepper)."""

    def __init__(
        self,
        loss: Callable[..., Any],
        metrics: Mapping[str, Callable[..., Any]] | None,
        data: tuple,
        early: EarlyStopping | None,
    ) -> None:
        self.loss = loss
        self.metrics = dict(metrics or {})
        self.data = data
        self.early = early
        self.rows = int(data[0].shape[0])
        # the row functions evaluated in one read: the loss's per-row form, then the metrics
        self.row_fns: list[tuple[str, Callable[..., Any], str]] = []
        if isinstance(loss, RowLoss):
            self.row_fns.append(("val_loss", loss.per_row, loss.reduction))
        for name, m in self.metrics.items():
            if isinstance(m, RowLoss):
                self.row_fns.append((f"val_{name}", m.per_row, m.reduction))
            else:
                self.row_fns.append((f"val_{name}", m, "mean"))

    def keys(self) -> list[str]:
        return ["val_loss", *(f"val_{n}" for n in self.metrics)]

    def targets(self, host_p: Any, spec: Any) -> tuple[list, Callable[[list], dict[str, float]]]:
        """The lazy arrays of one evaluation at ``host_p`` and the function turning their
        computed values into the figures by name."""
        from ._evaluate import row_sums

        targets: list[Any] = []
        if self.row_fns:
            fns = [f for _, f, _ in self.row_fns]
            targets.append(
                row_sums(fns, host_p, self.data, where="fit(validation=...)", loss=self.loss)
            )
        graph = not isinstance(self.loss, RowLoss)
        if graph:  # a loss that is not per row: its own graph on namespace(cubed)
            targets.append(graph_value(self.loss, host_p, self.data, spec))

        def finish(values: list) -> dict[str, float]:
            out: dict[str, float] = {}
            if self.row_fns:
                sums = np.asarray(values[0], dtype=np.float64)
                for (name, _, reduction), s in zip(self.row_fns, sums, strict=True):
                    out[name] = float(s) / self.rows if reduction == "mean" else float(s)
            if graph:
                out["val_loss"] = float(np.asarray(values[-1]))
            elif (penalty := getattr(self.loss, "penalty", None)) is not None:  # the whole value
                p = pg.tree_map(lambda a: pg.namespace(np).asarray(np.asarray(a)), host_p)
                out["val_loss"] += float(np.asarray(pg.unwrap(penalty(p))))
            return {k: out[k] for k in self.keys()}

        return targets, finish


def graph_value(loss: Callable[..., Any], params: Any, data: tuple, spec: Any) -> Any:
    """Lazy ``loss(params, *data)`` on namespace(cubed), nothing differentiated (a loss that is
    not a ``row_loss``: its validation value is its own graph)."""
    import cubed

    from .steps import ParameterStore

    xp = pg.namespace(cubed)
    store = ParameterStore(spec)
    p = pg.tree_map(lambda a: xp.asarray(store.put(np.asarray(a))), params)
    return loss(p, *(xp.asarray(x) for x in data))


def after_evaluation(
    stepper: Any,
    validation: Validation,
    log: Callable[[str], None] | None,
    run: Any,
) -> None:
    """The validation after the run's current step: the figures in the history and the log;
    with early stopping, the best parameters kept and ``run.stopped`` set when the monitored
    figure has not improved for ``patience`` evaluations."""
    host_p = pg.tree_map(lambda a: np.asarray(pg.unwrap(a)), run.params)
    figures = stepper.validate(validation, host_p, run.step)
    run.history["val_step"].append(run.step)
    for k, v in figures.items():
        run.history[k].append(v)
    if log:
        log(
            f"validation after step {run.step}: "
            + "  ".join(f"{k} {v:.6g}" for k, v in figures.items())
        )
    early = validation.early
    if early is None:
        return
    at, since = early.status(run.history[early.monitor])
    if since == 0 and early.restore_best:
        run.best = run.params  # the run replaces its parameters each step, never in place
    if since >= early.patience:
        run.stopped = True
        if log:
            best = run.history[early.monitor][at] if at is not None else math.nan
            at_step = run.history["val_step"][at] if at is not None else None
            log(
                f"early stopping after step {run.step}: {early.monitor} has not improved for "
                f"{since} evaluations (best {best:.6g}"
                + (f" after step {at_step})" if at_step is not None else ")")
            )


def returned(
    run: Any, early: EarlyStopping | None, log: Callable[[str], None] | None
) -> tuple[Any, int | None]:
    """(the parameters ``fit`` returns, early stopping's best step): the last parameters, or,
    with ``restore_best``, those after the best evaluation of the monitored figure."""
    values = run.history.get(early.monitor) if early is not None else None
    if early is None or not values:
        return run.params, None
    at, _ = early.status(values)
    if at is None:  # every evaluation NaN
        return run.params, None
    best_step = int(run.history["val_step"][at])
    if not early.restore_best or run.best is None:
        return run.params, best_step
    if log and best_step != run.step:
        log(f"fit: the parameters returned are step {best_step}'s (the best {early.monitor})")
    return run.best, best_step
