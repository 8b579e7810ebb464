"""Initializers: normal, uniform, Glorot and He, from an explicit key."""

from __future__ import annotations

import math
from typing import Any

from .. import random
from ..typing import Array


# -- initializers -------------------------------------------------------------------------------
def _fans(shape: tuple[int, ...]) -> tuple[int, int]:
    if len(shape) == 2:  # linear (in, out)
        return shape[0], shape[1]
    receptive = math.prod(shape[2:])  # conv (O, C, *K)
    return shape[1] * receptive, shape[0] * receptive


def normal(
    key: random.Key, shape: tuple[int, ...], std: float = 1.0, *, xp: Any = None, dtype: Any = None
) -> Array:
    """Normal samples with mean 0 and standard deviation ``std``.

    Parameters
    ----------
    key : pycograd_xp.random.Key
        The randomness.
    shape : tuple of int
        The array's shape: (in, out) for a ``linear`` weight, (O, C, K...) for a kernel.
    std : float, default 1.0
        The standard deviation.
    xp : namespace, optional
        The namespace to create the array in (None: ``namespace(numpy)``).
    dtype : dtype, optional
        A real floating dtype (None: float64).

    Returns
    -------
    Array
        Of ``shape``.
    """
    return random.normal(key, shape, xp=xp, dtype=dtype, std=std)


def uniform(
    key: random.Key,
    shape: tuple[int, ...],
    low: float = -1.0,
    high: float = 1.0,
    *,
    xp: Any = None,
    dtype: Any = None,
) -> Array:
    """Uniform samples in ``[low, high)``.

    Parameters
    ----------
    key : pycograd_xp.random.Key
        The randomness.
    shape : tuple of int
        The array's shape: (in, out) for a ``linear`` weight, (O, C, K...) for a kernel.
    low : float, default -1.0
        The lower bound.
    high : float, default 1.0
        The upper bound.
    xp : namespace, optional
        The namespace to create the array in (None: ``namespace(numpy)``).
    dtype : dtype, optional
        A real floating dtype (None: float64).

    Returns
    -------
    Array
        Of ``shape``.
    """
    return random.uniform(key, shape, xp=xp, dtype=dtype, minval=low, maxval=high)


def glorot_uniform(
    key: random.Key, shape: tuple[int, ...], *, xp: Any = None, dtype: Any = None
) -> Array:
    """Glorot (Xavier) uniform initialization: ``U(-a, a)``, ``a = sqrt(6 / (fan_in + fan_out))``.

    Fans: (in, out) for a 2-D shape (a ``linear`` weight); ``C * K`` and ``O * K`` for a
    kernel (O, C, *K), K the product of its window's sizes.

    Parameters
    ----------
    key : pycograd_xp.random.Key
        The randomness.
    shape : tuple of int
        The array's shape: (in, out) for a ``linear`` weight, (O, C, K...) for a kernel.
    xp : namespace, optional
        The namespace to create the array in (None: ``namespace(numpy)``).
    dtype : dtype, optional
        A real floating dtype (None: float64).

    Returns
    -------
    Array
        Of ``shape``.
    """
    fan_in, fan_out = _fans(shape)
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    return uniform(key, shape, -limit, limit, xp=xp, dtype=dtype)


def glorot_normal(
    key: random.Key, shape: tuple[int, ...], *, xp: Any = None, dtype: Any = None
) -> Array:
    """Glorot (Xavier) normal initialization: standard deviation ``sqrt(2 / (fan_in + fan_out))``.

    Fans: (in, out) for a 2-D shape (a ``linear`` weight); ``C * K`` and ``O * K`` for a
    kernel (O, C, *K), K the product of its window's sizes.

    Parameters
    ----------
    key : pycograd_xp.random.Key
        The randomness.
    shape : tuple of int
        The array's shape: (in, out) for a ``linear`` weight, (O, C, K...) for a kernel.
    xp : namespace, optional
        The namespace to create the array in (None: ``namespace(numpy)``).
    dtype : dtype, optional
        A real floating dtype (None: float64).

    Returns
    -------
    Array
        Of ``shape``.
    """
    fan_in, fan_out = _fans(shape)
    return normal(key, shape, math.sqrt(2.0 / (fan_in + fan_out)), xp=xp, dtype=dtype)


def he_uniform(
    key: random.Key, shape: tuple[int, ...], *, xp: Any = None, dtype: Any = None
) -> Array:
    """He (Kaiming) uniform initialization: ``U(-a, a)``, ``a = sqrt(6 / fan_in)``.

    Fans: (in, out) for a 2-D shape (a ``linear`` weight); ``C * K`` and ``O * K`` for a
    kernel (O, C, *K), K the product of its window's sizes.

    Parameters
    ----------
    key : pycograd_xp.random.Key
        The randomness.
    shape : tuple of int
        The array's shape: (in, out) for a ``linear`` weight, (O, C, K...) for a kernel.
    xp : namespace, optional
        The namespace to create the array in (None: ``namespace(numpy)``).
    dtype : dtype, optional
        A real floating dtype (None: float64).

    Returns
    -------
    Array
        Of ``shape``.
    """
    limit = math.sqrt(6.0 / _fans(shape)[0])
    return uniform(key, shape, -limit, limit, xp=xp, dtype=dtype)


def he_normal(
    key: random.Key, shape: tuple[int, ...], *, xp: Any = None, dtype: Any = None
) -> Array:
    """He (Kaiming) normal initialization: standard deviation ``sqrt(2 / fan_in)``.

    Fans: (in, out) for a 2-D shape (a ``linear`` weight); ``C * K`` and ``O * K`` for a
    kernel (O, C, *K), K the product of its window's sizes.

    Parameters
    ----------
    key : pycograd_xp.random.Key
        The randomness.
    shape : tuple of int
        The array's shape: (in, out) for a ``linear`` weight, (O, C, K...) for a kernel.
    xp : namespace, optional
        The namespace to create the array in (None: ``namespace(numpy)``).
    dtype : dtype, optional
        A real floating dtype (None: float64).

    Returns
    -------
    Array
        Of ``shape``.
    """
    return normal(key, shape, math.sqrt(2.0 / _fans(shape)[0]), xp=xp, dtype=dtype)
