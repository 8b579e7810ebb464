"""A small training loop: value_and_grad, an optimizer update, metrics per epoch, a tqdm progress
bar, logging, and an optional loss-curve plot (matplotlib, optional).

    step = make_step(loss_fn, optim.adam(1e-3))          # loss_fn(params, *batch) -> scalar
    params, opt_state, history = fit(step, params, opt_state, batches, epochs=10)
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Iterable
from typing import Any, cast

from ._api import no_grad, value_and_grad
from ._exports import module_dir as _module_dir
from ._nans import debug_nans
from .memory._batches import MicroBatched
from .memory._budget import Budgeted
from .memory._project import AS_IS
from .optim import GradientTransformation, apply_updates

__all__ = ["fit", "make_step", "plot_history"]


# dir() lists the public names only (what completion offers)
__dir__ = _module_dir(globals())

Step = Callable[[Any, Any, tuple], tuple[Any, Any, dict[str, Any]]]


def make_step(
    loss_fn: Callable[..., Any],
    tx: GradientTransformation,
    has_aux: bool = False,
    *,
    budget: int | float | str | None = None,
) -> Step:
    """``step(params, opt_state, batch) -> (params, opt_state, metrics)`` for ``loss_fn(params,
    *batch)``.

    ``memory.project(step, params, opt_state, batch)`` projects the whole step as it is
    (forward, backward, the optimizer's update and its state), from specs too:
    ``opt_state = tx.init(param_specs)``; so does it for ``pycograd_xp.compile(step)``.

    Parameters
    ----------
    loss_fn : callable
        ``loss_fn(params, *batch)`` returning a scalar loss (``(loss, {name: value})`` with
        ``has_aux``).
    tx : GradientTransformation
        The optimizer (``optim.adam(1e-3)``, ...).
    has_aux : bool, default False
        Whether ``loss_fn`` returns ``(loss, metrics)``.
    budget : int, float or str, optional
        Bytes (or ``"200 MB"``) the whole step may take at its peak, the optimizer's update and
        state included: what the tape keeps and the backward pass recomputes is chosen to fit,
        for each new signature of arguments, before the step runs (``memory.within``); the
        values are the same bit for bit. ``step.schedule(params, opt_state, batch)`` shows the
        choice.
        A loss declared a mean or sum over its batch's rows (``memory.batch_mean(loss_fn)``)
        may run in micro-batches, the gradients added before the update, when no recompute
        schedule fits (the values then agree to rounding, not bit for bit).
    Returns
    -------
    callable
        The step; its ``metrics`` holds ``"loss"`` (and the aux metrics).
    """
    micro = None
    if isinstance(loss_fn, MicroBatched):  # memory.batch_mean(loss_fn): micro-batches allowed
        if has_aux:
            raise NotImplementedError(
                f"make_step: {loss_fn!r} with has_aux: aux metrics are not added up over "
                "micro-batches; return the loss alone, or leave it undeclared"
            )
        mb = loss_fn
        micro = (mb, lambda args: mb.rows((args[0], *args[2])))
    vg = value_and_grad(loss_fn, has_aux=has_aux)

    def step(params: Any, opt_state: Any, batch: tuple) -> tuple[Any, Any, dict[str, Any]]:
        try:
            value, grads = vg(params, *batch)
        except TypeError as e:
            _check_arity(loss_fn, params, batch, e)
            raise
        loss, aux = value if has_aux else (value, {})
        with no_grad():
            updates, opt_state = tx.update(grads, opt_state, params)
            params = apply_updates(params, updates)
        return params, opt_state, {"loss": loss, **aux}

    setattr(step, AS_IS, True)  # it differentiates inside: memory.project takes it as it is
    if budget is not None:
        return cast(Step, Budgeted(step, budget, argnums=(), micro=micro))
    return step


def _check_arity(loss_fn: Callable[..., Any], params: Any, batch: tuple, error: TypeError) -> None:
    """Raise a TypeError that says why when ``loss_fn(params, *batch)`` cannot be called with
    this batch at all (``error``, from the call, is then its cause); return otherwise."""
    import inspect

    try:
        inspect.signature(loss_fn).bind(params, *batch)
    except TypeError as bind_error:
        name = getattr(loss_fn, "__name__", repr(loss_fn))
        raise TypeError(
            f"make_step: {name}(params, *batch) cannot take a batch of {len(batch)} arrays "
            f"({bind_error}); a pycograd_xp.data.Batches with drop_last=False appends a mask "
            "(1 for real rows, 0 for padding) as the batch's last item: take it as the loss's "
            "last argument and weight the rows, sum(per_row * mask) / sum(mask)"
        ) from error
    except ValueError:  # no signature to read (a builtin): the call's own error stands
        pass


def fit(
    step: Step,
    params: Any,
    opt_state: Any,
    batches: Iterable[tuple],
    *,
    epochs: int,
    progress: bool = True,
    log: Callable[[str], None] | None = print,
    on_epoch_end: Callable[[int, Any, dict[str, float]], dict[str, float] | None] | None = None,
    nan: str = "warn",
) -> tuple[Any, Any, dict[str, list[float]]]:
    """Run ``epochs`` passes of ``step`` over ``batches``.

    Parameters
    ----------
    step : callable
        A step :func:`make_step` made (or compiled).
    params : pytree of Array
        The initial parameters.
    opt_state : pytree
        The optimizer's initial state (``tx.init(params)``).
    batches : iterable of tuple
        Re-iterable each epoch (a :class:`pycograd_xp.data.Batches`).
    epochs : int
        Passes over ``batches``.
    progress : bool, default True
        Show a tqdm progress bar.
    log : callable or None, default print
        Called with a line per epoch (None: silent).
    on_epoch_end : callable, optional
        ``on_epoch_end(epoch, params, metrics)`` may return extra metrics (e.g. a test accuracy)
        to record and log.
    nan : {"warn", "raise", "debug", "ignore"}, default "warn"
        What a step whose loss is NaN or infinite does: warn once (a ``RuntimeWarning`` naming
        the epoch and the step), raise ``FloatingPointError`` there (the parameters are those
        before the step: nothing after it ran), or nothing. ``"debug"`` runs each step inside
        :class:`pycograd_xp.debug_nans`: the first op that makes a NaN raises, named (each op
        then reads its output: slower).

    Returns
    -------
    params : pytree of Array
        The final parameters.
    opt_state : pytree
        The final optimizer state.
    history : dict of str to list of float
        ``{metric: [per-epoch mean]}``, plus ``"epoch_seconds"``.

    Raises
    ------
    TypeError
        If an optimizer is given where its state or the batches go (``cubed_plugin.fit``'s
        order, ``fit(loss, params, data, tx)``).
    ValueError
        If an epoch gets no batch from ``batches`` (empty, or a generator spent by an earlier
        epoch), or ``nan`` is not one of its values.
    FloatingPointError
        With ``nan="raise"``, at the first step whose loss is not finite.
    """
    if nan not in ("warn", "raise", "debug", "ignore"):
        raise ValueError(f"fit: nan must be 'warn', 'raise', 'debug' or 'ignore', got {nan!r}")
    warned = nan == "ignore"
    if nan == "debug":
        step = debug_nans()(step)
        nan = "raise"

    for got, where in ((opt_state, "opt_state"), (batches, "batches")):
        if isinstance(got, GradientTransformation):
            raise TypeError(
                f"fit: {where} is an optimizer; this fit takes a step and the optimizer's state: "
                "step = make_step(loss, tx); fit(step, params, tx.init(params), batches, "
                "epochs=...) (cubed_plugin.fit is the one that takes (loss, params, data, tx))"
            )

    history: dict[str, list[float]] = {}
    for epoch in range(epochs):
        sums: dict[str, float] = {}
        count = 0
        t0 = time.perf_counter()
        bar = _bar(batches, f"epoch {epoch + 1}/{epochs}", progress)
        for batch in bar:
            new_params, new_state, metrics = step(params, opt_state, batch)
            count += 1
            loss = float(metrics["loss"])
            if not warned and not math.isfinite(loss):
                where = f"fit: the loss is {loss} at step {count} of epoch {epoch + 1}"
                if nan == "raise":
                    raise FloatingPointError(
                        f"{where}; the parameters before that step are intact. Look for the "
                        "batch's NaN or infinite values, a learning rate too large, or a log of "
                        "0 (nan='warn' only warns)"
                    )
                warnings.warn(
                    f"{where} (later steps are not reported); fit(..., nan='raise') stops there",
                    RuntimeWarning,
                    stacklevel=2,
                )
                warned = True
            params, opt_state = new_params, new_state
            for k, v in metrics.items():
                sums[k] = sums.get(k, 0.0) + (loss if k == "loss" else float(v))
            bar.set_postfix(loss=f"{sums['loss'] / count:.4f}")
        if count == 0:
            raise ValueError(
                f"fit: batches gave no batch in epoch {epoch + 1}; give a re-iterable with "
                "batches (a pycograd_xp.data.Batches; a generator is spent after one epoch)"
            )
        summary = {k: v / count for k, v in sums.items()}
        summary["epoch_seconds"] = time.perf_counter() - t0
        if on_epoch_end is not None:
            summary.update(on_epoch_end(epoch, params, summary) or {})
        for k, v in summary.items():
            history.setdefault(k, []).append(v)
        if log is not None:
            log(
                f"epoch {epoch + 1}/{epochs}  "
                + "  ".join(f"{k} {v:.4g}" for k, v in summary.items())
            )
    return params, opt_state, history


class _NoBar:
    """The batches, and a progress bar's ``set_postfix`` that does nothing."""

    def __init__(self, batches: Iterable[tuple]) -> None:
        self.batches = batches

    def __iter__(self) -> Any:
        return iter(self.batches)

    def set_postfix(self, **kwargs: Any) -> None:
        pass


def _bar(batches: Iterable[tuple], desc: str, progress: bool) -> Any:
    """A tqdm bar over ``batches``, or none: without ``progress`` tqdm.auto is not imported (in a
    notebook without ipywidgets its import alone warns)."""
    if not progress:
        return _NoBar(batches)
    from tqdm.auto import tqdm

    return tqdm(batches, desc=desc, leave=False)


def plot_history(
    history: dict[str, list[float]], path: str, keys: Iterable[str] = ("loss",)
) -> None:
    """Save a plot of the per-epoch ``keys`` of ``history`` to ``path`` (needs matplotlib).

    Parameters
    ----------
    history : dict of str to list of float
        What :func:`fit` returned.
    path : str
        The image file.
    keys : iterable of str, default ("loss",)
        The metrics drawn.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ImportError("plot_history needs matplotlib: pip install 'pycograd-xp[plot]'") from e
    fig, ax = plt.subplots(figsize=(6, 4))
    for k in keys:
        ax.plot(range(1, len(history[k]) + 1), history[k], marker="o", label=k)
    ax.set_xlabel("epoch")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
