"""Losses: cross-entropy (a fused row), binary cross-entropy with logits, mean squared error."""

from __future__ import annotations

import numpy as np

from ..typing import Array
from ._activations import softplus
from ._common import _check_target, _ns, _reduce, _row


# -- losses -------------------------------------------------------------------------------------
def cross_entropy(
    logits: Array,
    labels: Array,
    reduction: str = "mean",
    *,
    ignore_index: int | None = None,
    label_smoothing: float = 0.0,
) -> Array:
    """Softmax cross-entropy over the last axis.

    One row (``xp._cross_entropy``) whose VJP keeps the logits, the labels and each row's
    normaliser: never the log-probabilities or a one-hot.

    Parameters
    ----------
    logits : Array
        Unnormalized scores, (..., classes).
    labels : Array
        Integer class indices (shape ``logits.shape[:-1]``) or class probabilities / one-hot
        (shape ``logits.shape``, or 1 along any of its axes). Class indices given as floats
        (shape ``logits.shape[:-1]``) are refused, not read as probabilities: cast them to
        integers. A negative index counts from the last class (-1 is the last), as in
        NumPy and JAX; PyTorch refuses them. An index outside ``-classes .. classes - 1`` is
        refused (IndexError), unless it is ``ignore_index``.
    reduction : {'mean', 'sum', 'none'}, default 'mean'
        How the per-element (per-row) losses are reduced; 'none' keeps them.
    ignore_index : int, optional
        A class index that contributes no loss and no gradient (PyTorch's ``ignore_index``,
        whose default -100 marks padding): its rows' losses are 0, and ``'mean'`` divides by
        the number of the other rows (NaN where every row is ignored, as PyTorch's). Only with
        integer labels. None (the default): every label is a class.
    label_smoothing : float, default 0.0
        ``eps`` in [0, 1]: the target is ``(1 - eps)`` times the labels' distribution plus
        ``eps`` spread evenly over the classes (PyTorch's ``label_smoothing``), that is
        ``(1 - eps) * loss + eps * (logsumexp(logits) - mean(logits))`` per row, from the same
        row: still no one-hot and no log-probabilities kept.

    Returns
    -------
    Array
        A scalar (``'mean'``, ``'sum'``), or the unreduced losses (``'none'``).

    Raises
    ------
    IndexError
        A class index out of range (where the values can be read: not on a lazy backend).
    ValueError
        ``label_smoothing`` outside [0, 1], or ``ignore_index`` with probabilities.
    """
    xp = _ns(logits)
    eps = float(label_smoothing)
    if not 0.0 <= eps <= 1.0:
        raise ValueError(f"cross_entropy(): label_smoothing must be in [0, 1], got {eps}")
    if reduction not in ("mean", "sum", "none"):
        _reduce(logits, reduction, "cross_entropy")  # raises, naming the choices
    keep = None
    if ignore_index is not None:
        if not isinstance(ignore_index, int | np.integer) or isinstance(ignore_index, bool):
            raise TypeError(
                f"cross_entropy(): ignore_index must be an int, got {type(ignore_index).__name__}"
            )
        if not xp.isdtype(labels.dtype, "integral"):
            raise ValueError(
                "cross_entropy(): ignore_index applies to integer class indices, not to "
                f"probabilities ({getattr(labels.dtype, 'name', labels.dtype)} labels); give "
                "an ignored row zero probabilities, or weight the 'none' losses"
            )
        keep = labels != int(ignore_index)
        labels = xp.where(keep, labels, xp.zeros_like(labels))  # any class: its loss is dropped
    if keep is None and not eps and reduction == "mean":  # the mean in the row: one node
        return _row(xp, "_cross_entropy")(logits, labels, mean=True)[0]
    loss, lse = _row(xp, "_cross_entropy")(logits, labels)
    if eps:
        loss = (1.0 - eps) * loss + eps * (lse - xp.mean(logits, axis=-1))
    if keep is None:
        return _reduce(loss, reduction, "cross_entropy")
    loss = xp.where(keep, loss, xp.zeros_like(loss))
    if reduction != "mean":
        return _reduce(loss, reduction, "cross_entropy")
    count = xp.sum(xp.astype(xp.broadcast_to(keep, tuple(loss.shape)), loss.dtype))
    return xp.sum(loss) / count


def binary_cross_entropy_with_logits(
    logits: Array, targets: Array, reduction: str = "mean"
) -> Array:
    """``-[y log sigmoid(x) + (1-y) log(1 - sigmoid(x))]`` as ``softplus(x) - x y`` (stable).

    Parameters
    ----------
    logits : Array
        The scores ``x``.
    targets : Array
        The targets ``y`` in [0, 1], of ``logits``' shape or broadcasting to it: real,
        integer, or bool (taken in the logits' dtype: the standard multiplies no bool).
    reduction : {'mean', 'sum', 'none'}, default 'mean'
        How the per-element (per-row) losses are reduced; 'none' keeps them.

    Returns
    -------
    Array
        A scalar (``'mean'``, ``'sum'``), or the unreduced losses (``'none'``).

    Raises
    ------
    ValueError
        If ``targets`` does not broadcast to ``logits``' shape (targets (n, 1) against logits
        (n,) would broadcast to an (n, n) matrix, a wrong loss).
    """
    _check_target(
        "binary_cross_entropy_with_logits",
        logits,
        targets,
        "the targets' shape",
        "the logits' shape",
    )
    xp = _ns(logits)
    if getattr(targets, "dtype", None) == xp.bool:
        targets = xp.astype(xp.asarray(targets), logits.dtype)
    return _reduce(
        softplus(logits) - logits * targets, reduction, "binary_cross_entropy_with_logits"
    )


def mse(pred: Array, target: Array, reduction: str = "mean") -> Array:
    """Mean squared error: ``(pred - target) ** 2``, reduced.

    Parameters
    ----------
    pred : Array
        The predictions.
    target : Array
        The targets, of ``pred``'s shape or broadcasting to it.
    reduction : {'mean', 'sum', 'none'}, default 'mean'
        How the per-element (per-row) losses are reduced; 'none' keeps them.

    Returns
    -------
    Array
        A scalar (``'mean'``, ``'sum'``), or the unreduced losses (``'none'``).

    Raises
    ------
    ValueError
        If ``target`` does not broadcast to ``pred``'s shape (a target (n, 1) against
        predictions (n,) would broadcast to an (n, n) matrix, a wrong loss).
    """
    _check_target("mse", pred, target, "the target's shape", "the predictions' shape")
    d = pred - target
    return _reduce(d * d, reduction, "mse")
