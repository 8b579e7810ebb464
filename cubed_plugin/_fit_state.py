"""The state of a :func:`~cubed_plugin._fit.fit` run and its checkpoint: the run's start (or
its resumption from a checkpoint, refused in one line when the checkpoint holds another run),
and what a checkpoint holds (the parameters, the optimizer's state, the step, the key, the
history, early stopping's best parameters). :class:`cubed_plugin._storage.Checkpoints` writes it
atomically, in a local directory or at a URL (``pycograd_xp.checkpoint``'s format).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import pycograd_xp as pg
from pycograd_xp import optim, random

from ._storage import Checkpoints
from ._validation import Validation


def _ckpt(directory: str | None, spec: Any = None) -> Checkpoints | None:
    """``checkpoint_dir``'s checkpoints (a local directory or a URL, opened with the spec's
    ``storage_options``), None without one."""
    if directory is None:
        return None
    return Checkpoints(directory, getattr(spec, "storage_options", None))


@dataclass
class _RunState:
    """What a run of :func:`~cubed_plugin._fit.fit` has so far: what a checkpoint holds
    (:func:`_saved`)."""

    params: Any  # our NumPy-backed arrays
    opt_state: Any
    step: int
    key: random.Key
    history: dict[str, list[float]]
    resumed: bool = False
    best: Any = None  # early stopping's best parameters so far (None: not kept)
    stopped: bool = False  # early stopping ended the run

    def save(self, path: Checkpoints | None) -> None:
        if path is not None:
            path.save(
                _saved(self.params, self.opt_state, self.step, self.key, self.history, self.best)
            )


def _start(
    optimizer: Any,
    host: Any,
    key: random.Key,
    path: Checkpoints | None,
    log: Callable[[str], None] | None,
    validate: Validation | None = None,
) -> _RunState:
    """The run's start: the parameters ``host`` on our NumPy namespace, the optimizer's state
    and an empty history; or, when ``path`` holds a checkpoint, the run it saved."""
    xp = pg.namespace(np)
    p = pg.tree_map(xp.asarray, host)
    lbfgs = isinstance(optimizer, optim.LBFGS)
    # L-BFGS: a state of the right structure, computed from nothing (its first pass comes later)
    state = (
        optimizer.init(p, value=0.0, grad=pg.tree_map(xp.zeros_like, p))
        if lbfgs
        else optimizer.init(p)
    )
    history: dict[str, list[float]] = {"loss": [], "seconds": []}
    if lbfgs:
        history.update(passes=[], initial_loss=[])
    best = None
    if validate is not None:
        history.update({k: [] for k in ["val_step", *validate.keys()]})
        if validate.early is not None and validate.early.restore_best:
            best = p  # (replaced, never updated in place)
    if path is None or not path.exists():
        return _RunState(p, state, 0, key, history, best=best)
    p, state, step, key, history, best = _resume(path, p, state, key, history, best)
    if log:
        log(f"resumed from {path} at step {step}")
    run = _RunState(p, state, step, key, history, resumed=True, best=best)
    if validate is not None and validate.early is not None:  # a run that had stopped stays so
        _, since = validate.early.status(history[validate.early.monitor])
        run.stopped = since >= validate.early.patience
    return run


def _saved(p: Any, state: Any, step: int, key: random.Key, history: dict, best: Any = None) -> dict:
    """What a checkpoint of :func:`~cubed_plugin._fit.fit` holds: the training state and the
    history so far (a resumed run returns the whole run's history, as an uninterrupted one
    does), and early stopping's best parameters when it keeps them."""
    saved = {
        "params": p,
        "opt_state": state,
        "step": step,
        "key": np.asarray(key.data),
        "history": {k: np.asarray(v, dtype=np.float64) for k, v in history.items()},
    }
    if best is not None:
        saved["best"] = best
    return saved


def _difference(e: Exception) -> str:
    """What ``checkpoint.load``'s refusal ``e`` says differs, without its advice to the caller
    of ``load`` (``fit``'s user passed no ``like`` tree)."""
    said = str(e).partition("): ")[2].removesuffix("; load it with a `like` tree of the same kind")
    return (
        said.replace("only the file has", "only the checkpoint has")
        .replace("only `like` has", "only this run has")
        .replace("in `like`", "in this run")
    )


def _resume(
    path: Checkpoints, p: Any, state: Any, key: random.Key, history: dict, best: Any = None
) -> tuple:
    """``(params, opt_state, step, key, history, best)`` from the checkpoint at ``path``,
    refused in one line naming the directory when it holds another run's state (another model,
    optimizer, dtype or validation). A checkpoint written before histories were kept resumes
    with the history of the new steps only."""
    like = _saved(p, state, 0, key, history, best)
    way_out = "give another checkpoint_dir, or delete that checkpoint to start afresh"
    try:
        saved = path.load(like)
    except Exception as e:  # told apart below, re-raised in one line
        if not str(e).startswith("checkpoint.load("):
            raise ValueError(
                f"fit: {str(path)!r} in checkpoint_dir is not a checkpoint fit can read "
                f"({type(e).__name__}: {e}); {way_out}"
            ) from e
        del like["history"]
        try:
            saved = path.load(like)  # a checkpoint without the history
        except ValueError:
            raise ValueError(
                f"fit: checkpoint_dir {path.directory!r} holds the state of another run "
                f"(another model, optimizer or dtype: {_difference(e)}); "
                f"{way_out}"
            ) from None
        saved["history"] = history
    restored = {
        k: [int(v) if k in ("passes", "val_step") else float(v) for v in np.asarray(a)]
        for k, a in saved["history"].items()
    }
    return (
        saved["params"],
        saved["opt_state"],
        int(saved["step"]),
        random.Key(tuple(int(k) for k in np.asarray(saved["key"]))),
        restored,
        saved.get("best"),
    )
