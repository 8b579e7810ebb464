"""Splittable random keys (JAX's model) and samplers that make arrays in any namespace.

A :class:`Key` is an immutable value: the same key always gives the same numbers, and ``split``
and ``fold_in`` derive new independent keys from it, so randomness is explicit, reproducible and
safe to use in parallel. Numbers come from NumPy's Philox generator seeded by the key's
``SeedSequence``; they are made on the host and handed to ``xp.asarray``, except on Cubed, where
each block is drawn lazily from its own key (the backend's ``block_sampler``, which
``cubed_plugin`` registers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ._exports import module_dir as _module_dir
from ._host import HostScalar

__all__ = [
    "Key",
    "bernoulli",
    "fold_in",
    "key",
    "normal",
    "permutation",
    "randint",
    "split",
    "uniform",
]


# dir() lists the public names only (what completion offers)
__dir__ = _module_dir(globals())


@dataclass(frozen=True)
class Key:
    """A random key: a seed and the path of splits and folds that led here.

    Parameters
    ----------
    data : tuple of int
        The seed, then two ints per split or fold (made by :func:`key`, :func:`split` and
        :func:`fold_in`, not by hand).
    """

    data: tuple[int, ...]

    def __repr__(self) -> str:
        return f"Key{self.data}"


def key(seed: int) -> Key:
    """The root key for a non-negative integer ``seed``.

    Parameters
    ----------
    seed : int
        A non-negative integer.

    Returns
    -------
    Key
        The root key.

    Raises
    ------
    ValueError
        If ``seed`` is not a non-negative int.

    Examples
    --------
    >>> from pycograd_xp import random
    >>> k1, k2 = random.split(random.key(0))
    >>> random.normal(k1, (2,)).shape
    (2,)
    """
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"key: seed must be a non-negative int, got {seed!r}")
    return Key((seed,))


def _check(k: Any, where: str) -> Key:
    if not isinstance(k, Key):
        raise TypeError(
            f"{where}: expected a pycograd_xp.random.Key (from key(seed)), got {type(k).__name__}"
        )
    return k


def split(k: Key, num: int = 2) -> tuple[Key, ...]:
    """``num`` new keys, independent of each other and of ``k``.

    Parameters
    ----------
    k : Key
        The key (the same key always gives the same numbers).
    num : int, default 2
        How many keys.

    Returns
    -------
    tuple of Key
        The new keys.
    """
    _check(k, "split")
    return tuple(Key((*k.data, 0, i)) for i in range(num))


def fold_in(k: Key, data: int) -> Key:
    """A new key from ``k`` and an integer (a step number, a device index, ...).

    Parameters
    ----------
    k : Key
        The key (the same key always gives the same numbers).
    data : int
        The integer folded in.

    Returns
    -------
    Key
        The new key.
    """
    _check(k, "fold_in")
    return Key((*k.data, 1, int(data)))


def _generator(k: Key) -> np.random.Generator:
    seq = np.random.SeedSequence(k.data[0], spawn_key=k.data[1:])
    return np.random.Generator(np.random.Philox(seq))


def _xp(xp: Any) -> Any:
    if xp is None:
        import pycograd_xp

        return pycograd_xp.namespace(np)
    return xp


def _float_dtype(xp: Any, dtype: Any) -> Any:
    return xp.float64 if dtype is None else dtype


def _make(
    k: Key, where: str, shape: tuple[int, ...], xp: Any, dtype: Any, chunks: Any, draw: Any
) -> Any:
    """Draw on the host, or block by block where the backend samples blocks lazily (Cubed):
    the block at offset ``i`` draws from ``fold_in(k, i)``."""
    _check(k, where)
    if any(isinstance(d, HostScalar) for d in k.data):  # a key compile replays with new values
        from ._compile._recorder import host_array

        return host_array(
            lambda *data: draw(_generator(Key(data)), shape), k.data, tuple(shape), dtype
        )
    sampler = getattr(getattr(xp, "_backend", None), "block_sampler", None)
    if sampler is not None:

        def draw_block(offset: int, block_shape: tuple[int, ...]) -> np.ndarray:
            return np.asarray(draw(_generator(fold_in(k, offset)), block_shape), dtype=dtype)

        return xp.asarray(sampler(xp._backend.xp, tuple(shape), chunks, dtype, draw_block))
    return xp.asarray(draw(_generator(k), shape), dtype=dtype)


def uniform(
    k: Key,
    shape: tuple[int, ...] = (),
    *,
    xp: Any = None,
    dtype: Any = None,
    minval: float = 0.0,
    maxval: float = 1.0,
    chunks: Any = None,
) -> Any:
    """Uniform floats in ``[minval, maxval)``.

    Parameters
    ----------
    k : Key
        The key (the same key always gives the same numbers).
    shape : tuple of int, default ()
        The array's shape.
    xp : namespace, optional
        The namespace to create the array in (None: pycograd_xp over NumPy).
    dtype : dtype, optional
        A real floating dtype of ``xp`` (None: float64).
    minval : float, default 0.0
        The lower bound.
    maxval : float, default 1.0
        The upper bound.
    chunks : optional
        On a chunked backend (Cubed): the chunks, each block drawn lazily from its own key
        (``fold_in(k, offset)``); ignored elsewhere.

    Returns
    -------
    Array
        Of ``shape``, in ``xp``.
    """
    xp = _xp(xp)
    return _make(
        k,
        "uniform",
        shape,
        xp,
        _float_dtype(xp, dtype),
        chunks,
        lambda g, s: g.uniform(minval, maxval, s),
    )


def normal(
    k: Key,
    shape: tuple[int, ...] = (),
    *,
    xp: Any = None,
    dtype: Any = None,
    mean: float = 0.0,
    std: float = 1.0,
    chunks: Any = None,
) -> Any:
    """Normal floats with ``mean`` and ``std``.

    Parameters
    ----------
    k : Key
        The key (the same key always gives the same numbers).
    shape : tuple of int, default ()
        The array's shape.
    xp : namespace, optional
        The namespace to create the array in (None: pycograd_xp over NumPy).
    dtype : dtype, optional
        A real floating dtype of ``xp`` (None: float64).
    mean : float, default 0.0
        The mean.
    std : float, default 1.0
        The standard deviation.
    chunks : optional
        On a chunked backend (Cubed): the chunks, each block drawn lazily from its own key
        (``fold_in(k, offset)``); ignored elsewhere.

    Returns
    -------
    Array
        Of ``shape``, in ``xp``.
    """
    xp = _xp(xp)
    return _make(
        k, "normal", shape, xp, _float_dtype(xp, dtype), chunks, lambda g, s: g.normal(mean, std, s)
    )


def bernoulli(
    k: Key, p: float, shape: tuple[int, ...] = (), *, xp: Any = None, chunks: Any = None
) -> Any:
    """Booleans, True with probability ``p``.

    Parameters
    ----------
    k : Key
        The key (the same key always gives the same numbers).
    p : float
        The probability of True, in [0, 1].
    shape : tuple of int, default ()
        The array's shape.
    xp : namespace, optional
        The namespace to create the array in (None: pycograd_xp over NumPy).
    chunks : optional
        On a chunked backend (Cubed): the chunks, each block drawn lazily from its own key
        (``fold_in(k, offset)``); ignored elsewhere.

    Returns
    -------
    Array
        Booleans of ``shape``, in ``xp``.

    Raises
    ------
    ValueError
        If ``p`` is not in [0, 1].
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"bernoulli: p must be in [0, 1], got {p!r}")
    xp = _xp(xp)
    return _make(k, "bernoulli", shape, xp, xp.bool, chunks, lambda g, s: g.random(s) < p)


def randint(
    k: Key,
    shape: tuple[int, ...],
    low: int,
    high: int,
    *,
    xp: Any = None,
    dtype: Any = None,
    chunks: Any = None,
) -> Any:
    """Integers in ``[low, high)``.

    Parameters
    ----------
    k : Key
        The key (the same key always gives the same numbers).
    shape : tuple of int
        The array's shape.
    low : int
        The lower bound (included).
    high : int
        The upper bound (excluded).
    xp : namespace, optional
        The namespace to create the array in (None: pycograd_xp over NumPy).
    dtype : dtype, optional
        An integer dtype of ``xp`` (None: int64).
    chunks : optional
        On a chunked backend (Cubed): the chunks, each block drawn lazily from its own key
        (``fold_in(k, offset)``); ignored elsewhere.

    Returns
    -------
    Array
        Of ``shape``, in ``xp``.
    """
    xp = _xp(xp)
    return _make(
        k,
        "randint",
        shape,
        xp,
        xp.int64 if dtype is None else dtype,
        chunks,
        lambda g, s: g.integers(low, high, s),
    )


def permutation(k: Key, n: int, *, xp: Any = None) -> Any:
    """A random permutation of ``0 .. n-1``.

    Parameters
    ----------
    k : Key
        The key (the same key always gives the same numbers).
    n : int
        The length.
    xp : namespace, optional
        The namespace to create the array in (None: pycograd_xp over NumPy).

    Returns
    -------
    Array
        int64, of shape (n,).
    """
    xp = _xp(xp)
    return xp.asarray(_generator(_check(k, "permutation")).permutation(n))
