"""The command's models and data (``python -m cubed_plugin``): synthetic rows made in Zarr chunk by
chunk, logistic regression and a one-layer tanh MLP as row losses (with an L2 penalty), their
accuracy, and their initial parameters. ``cubed_plugin.train`` exports them for scripts."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .steps import row_loss

__all__ = ["accuracy", "init_params", "logreg_loss", "mlp_loss", "penalised", "synthetic"]


def synthetic(
    path: str, rows: int, features: int, chunk_rows: int, model: str, seed: int = 0
) -> None:
    """Write synthetic data to Zarr chunk by chunk (it never exists whole in memory).

    Parameters
    ----------
    path : str
        The directory: ``X.zarr`` (rows, features) and ``y.zarr`` (rows,) are written in it.
    rows : int
        The rows.
    features : int
        The features.
    chunk_rows : int
        Rows per chunk.
    model : {"logreg", "mlp"}
        The model whose labels are drawn.
    seed : int, default 0
        The random seed.
    """
    import zarr

    rng = np.random.default_rng(seed)
    w = rng.standard_normal(features) / math.sqrt(features)
    zx = zarr.open_array(
        f"{path}/X.zarr",
        mode="w",
        shape=(rows, features),
        dtype="f8",
        chunks=(chunk_rows, features),
    )
    zy = zarr.open_array(
        f"{path}/y.zarr", mode="w", shape=(rows,), dtype="f8", chunks=(chunk_rows,)
    )
    for start in range(0, rows, chunk_rows):
        stop = min(start + chunk_rows, rows)
        x = rng.standard_normal((stop - start, features))
        z = x @ w if model == "logreg" else np.tanh(x @ w) * 2.0
        zx[start:stop] = x
        zy[start:stop] = (z + 0.3 * rng.standard_normal(stop - start) > 0).astype("f8")


@row_loss
def logreg_loss(p: Any, X: Any, y: Any) -> Any:
    """Logistic regression's per-row loss (a :func:`~cubed_plugin.row_loss`): ``softplus(z) - y z``
    for ``z = X @ w + b``, computed stably.

    Parameters
    ----------
    p : dict
        ``{"w": (features,), "b": ()}``.
    X : Array
        Rows of features, (rows, features).
    y : Array
        Labels in {0, 1}, (rows,): bool, integer or real.

    Returns
    -------
    Array
        One loss per row, (rows,).
    """
    return _softplus_minus(X.__array_namespace__(), _logreg_logit(p, X), y)


@row_loss
def mlp_loss(p: Any, X: Any, y: Any) -> Any:
    """A one-hidden-layer tanh MLP's per-row logistic loss (a :func:`~cubed_plugin.row_loss`).

    Parameters
    ----------
    p : dict
        ``{"W1": (features, hidden), "b1": (hidden,), "w2": (hidden,), "b2": ()}``.
    X : Array
        Rows of features, (rows, features).
    y : Array
        Labels in {0, 1}, (rows,): bool, integer or real.

    Returns
    -------
    Array
        One loss per row, (rows,).
    """
    return _softplus_minus(X.__array_namespace__(), _mlp_logit(p, X), y)


# the weights of each model (its other parameters are biases)
WEIGHTS = {"logreg": ("w",), "mlp": ("W1", "w2")}


def penalised(loss: Any, model: str, alpha: float) -> Any:
    """``loss`` with ``--l2``'s penalty on the model's weights (``loss`` itself at 0)."""
    if alpha == 0:
        return loss
    import dataclasses

    from .penalties import l2

    names = WEIGHTS[model]
    return dataclasses.replace(loss, penalty=l2(alpha, on=lambda p: [p[k] for k in names]))


def accuracy(p: Any, X: Any, y: Any) -> Any:
    """Whether each row's label is predicted (the logit's sign against the label in {0, 1}),
    for both CLI models: the command's validation metric (``fit(metrics=...)``).

    Parameters
    ----------
    p : dict
        Either model's parameters (:func:`init_params`).
    X : Array
        Rows of features, (rows, features).
    y : Array
        Labels in {0, 1}, (rows,): bool, integer or real.

    Returns
    -------
    Array
        One bool per row, (rows,).
    """
    z = _mlp_logit(p, X) if "W1" in p else _logreg_logit(p, X)
    return (z > 0) == (y > 0.5) if y.dtype != X.__array_namespace__().bool else (z > 0) == y


def _logreg_logit(p: Any, X: Any) -> Any:
    return X @ p["w"] + p["b"]


def _mlp_logit(p: Any, X: Any) -> Any:
    return X.__array_namespace__().tanh(X @ p["W1"] + p["b1"]) @ p["w2"] + p["b2"]


def _softplus_minus(xp: Any, z: Any, y: Any) -> Any:
    """``softplus(z) - y z``, the logistic loss of the logit ``z`` at the label ``y`` (bool,
    integer or real labels in {0, 1}: the standard multiplies no bool, so bool labels take
    ``z``'s dtype first)."""
    if y.dtype == xp.bool:
        y = xp.astype(y, z.dtype)
    return xp.log(1.0 + xp.exp(-xp.abs(z))) + xp.maximum(z, 0.0) - y * z


def init_params(
    model: str, features: int, hidden: int = 32, seed: int = 0, dtype: Any = np.float64
) -> dict:
    """The CLI models' starting parameters.

    Logistic regression: zeros; the MLP: scaled normal weights, zero biases.

    Parameters
    ----------
    model : {"logreg", "mlp"}
        The model.
    features : int
        The input features.
    hidden : int, default 32
        The MLP's hidden units.
    seed : int, default 0
        The random seed.
    dtype : dtype, default numpy.float64
        The data's dtype, so that training stays in it.

    Returns
    -------
    dict of str to numpy.ndarray
        The parameters.
    """
    rng = np.random.default_rng(seed)
    if model == "logreg":
        p = {"w": np.zeros(features), "b": np.zeros(())}
    else:
        p = {
            "W1": rng.standard_normal((features, hidden)) / math.sqrt(features),
            "b1": np.zeros(hidden),
            "w2": rng.standard_normal(hidden) / math.sqrt(hidden),
            "b2": np.zeros(()),
        }
    return {k: v.astype(dtype) for k, v in p.items()}
