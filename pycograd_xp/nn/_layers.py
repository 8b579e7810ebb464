"""Stochastic and lookup layers: dropout (an explicit key) and embedding."""

from __future__ import annotations

from typing import cast

from .. import random
from ..typing import Array
from ._common import _ns


# -- stochastic and lookup layers ---------------------------------------------------------------
def dropout(key: random.Key, x: Array, rate: float, training: bool = True) -> Array:
    """Zero each element with probability ``rate`` and scale the rest by ``1 / (1 - rate)``.

    Parameters
    ----------
    key : pycograd_xp.random.Key
        The randomness (split it per call).
    x : Array
        The input, of any shape (real floating point).
    rate : float
        The probability of zeroing, in [0, 1).
    training : bool, default True
        False returns ``x`` unchanged (as does ``rate == 0``).

    Returns
    -------
    Array
        Of ``x``'s shape and dtype.

    Raises
    ------
    ValueError
        If ``rate`` is not in [0, 1).
    """
    if not training or rate == 0.0:
        return x
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"dropout: rate must be in [0, 1), got {rate!r}")
    xp = _ns(x)
    keep = random.bernoulli(key, 1.0 - rate, cast(tuple[int, ...], x.shape), xp=xp)
    return xp.where(keep, x / (1.0 - rate), xp.zeros_like(x))


def embedding(ids: Array, table: Array) -> Array:
    """Rows of ``table`` for integer ``ids``.

    Parameters
    ----------
    ids : Array
        Integer indices into the rows of ``table``, of any shape.
    table : Array
        The embeddings, (V, D).

    Returns
    -------
    Array
        Shape ``ids.shape + (D,)``.

    Raises
    ------
    TypeError
        ``ids`` not integers, or ``table`` not 2-D (the arguments swapped, say).
    """
    xp = _ns(table)
    if not xp.isdtype(ids.dtype, "integral") or table.ndim != 2:
        raise TypeError(
            f"embedding(ids, table): ids must be integers and table (V, D), got "
            f"{getattr(ids.dtype, 'name', ids.dtype)} ids of shape {tuple(ids.shape)} and a "
            f"table of shape {tuple(table.shape)}"
            + ("; the arguments may be swapped" if xp.isdtype(table.dtype, "integral") else "")
        )
    rows = xp.take(table, xp.reshape(ids, (-1,)), axis=0)
    return xp.reshape(rows, (*ids.shape, table.shape[1]))
