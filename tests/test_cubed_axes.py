"""Every function that takes an axis, along each negative axis of a 3-D array, on
namespace(cubed) at four chunkings: NumPy's values and VJPs
(:func:`conformance.cubed_oracle.compare`).

Cubed 0.27 reads some negative axes as others, silently: ``take(x, i, axis=-1)`` took along
axis 0 (a result of the wrong shape), ``tensordot`` contracted the wrong axes, ``repeat`` built
a result of the wrong rank; ``argmax``/``argmin`` without an axis dropped ``keepdims`` and
refused chunkings whose flattening Cubed's reshape leaves irregular. The functions found wrong
run in the default run at every axis and chunking, the others at a fixed sample (all with
``-m slow``).
"""

from __future__ import annotations

import warnings
import zlib

import numpy as np
import pytest

from conformance.cubed_oracle import NAMES, compare

cubed = pytest.importorskip("cubed")


def _idx(xp, v):
    return xp.asarray(v)


def _sl(x, ax, k):
    return (slice(None),) * (x.ndim + ax) + (k,)


FUNCTIONS = {
    "take": lambda xp, x, ax: xp.take(x, _idx(xp, [2, 0, 1]), axis=ax),
    "take a permutation": lambda xp, x, ax: xp.take(
        x, _idx(xp, list(range(x.shape[ax]))[::-1]), axis=ax
    ),
    "take_along_axis": lambda xp, x, ax: xp.take_along_axis(x, xp.argsort(x, axis=ax), axis=ax),
    "tensordot": lambda xp, x, ax: xp.tensordot(x, xp.sin(x), axes=([ax], [ax])),
    "vecdot": lambda xp, x, ax: xp.vecdot(x, xp.sin(x), axis=ax),
    "linalg.vecdot": lambda xp, x, ax: xp.linalg.vecdot(x, xp.sin(x), axis=ax),
    "repeat": lambda xp, x, ax: xp.repeat(x, 2, axis=ax),
    "repeat an array": lambda xp, x, ax: xp.repeat(
        x, _idx(xp, [k % 3 for k in range(x.shape[ax])]), axis=ax
    ),
    "argmax without an axis": lambda xp, x, ax: xp.argmax(x, keepdims=ax == -1),
    "argmin without an axis": lambda xp, x, ax: xp.argmin(x, keepdims=ax == -2),
    "sum": lambda xp, x, ax: xp.sum(x, axis=(ax, 0) if ax != -3 else ax),
    "mean": lambda xp, x, ax: xp.mean(x, axis=ax, keepdims=True),
    "prod": lambda xp, x, ax: xp.prod(x, axis=ax),
    "var": lambda xp, x, ax: xp.var(x, axis=ax, correction=1),
    "max": lambda xp, x, ax: xp.max(x, axis=ax),
    "argmin": lambda xp, x, ax: xp.argmin(x, axis=ax, keepdims=True),
    "count_nonzero": lambda xp, x, ax: xp.count_nonzero(x > 0, axis=ax),
    "cumulative_sum": lambda xp, x, ax: xp.cumulative_sum(x, axis=ax, include_initial=True),
    "cumulative_prod": lambda xp, x, ax: xp.cumulative_prod(x, axis=ax),
    "sort": lambda xp, x, ax: xp.sort(x, axis=ax, descending=True),
    "flip": lambda xp, x, ax: xp.flip(x, axis=ax),
    "roll": lambda xp, x, ax: xp.roll(x, -2, axis=ax),
    "diff": lambda xp, x, ax: xp.diff(x, axis=ax, append=xp.ones_like(x)),
    "concat": lambda xp, x, ax: xp.concat([x, x * 2.0], axis=ax),
    "stack": lambda xp, x, ax: xp.stack([x, x * 2.0], axis=ax),
    "expand_dims and squeeze": lambda xp, x, ax: xp.squeeze(
        xp.expand_dims(x, axis=ax) * 2.0, axis=ax
    ),
    "moveaxis": lambda xp, x, ax: xp.moveaxis(x, ax, 0),
    "unstack": lambda xp, x, ax: xp.unstack(x, axis=ax)[1],
    "vector_norm": lambda xp, x, ax: xp.linalg.vector_norm(x, axis=ax, ord=3),
    "fft": lambda xp, x, ax: xp.real(xp.fft.fft(xp.astype(x, xp.complex128), axis=ax)),
    "fftshift": lambda xp, x, ax: xp.fft.fftshift(x, axes=ax),
    "integer-array index": lambda xp, x, ax: x[_sl(x, ax, _idx(xp, [1, 0, 1]))],
    "negative step": lambda xp, x, ax: x[_sl(x, ax, slice(None, None, -2))],
}
# the functions Cubed 0.27 got wrong here: every axis and chunking in the default run
FOUND = {"take", "tensordot", "repeat", "repeat an array", "argmax without an axis"}
SAMPLE = 12
AXES = (-1, -2, -3)


def _params() -> list:
    out = []
    for name in FUNCTIONS:
        for ax in AXES:
            for chunking in NAMES:
                pid = f"{name}-axis {ax}-{chunking}"
                fast = name in FOUND or zlib.crc32(pid.encode()) % SAMPLE == 0
                marks = () if fast else (pytest.mark.slow,)
                out.append(pytest.param(name, ax, chunking, id=pid, marks=marks))
    return out


@pytest.mark.parametrize("name, ax, chunking", _params())
def test_negative_axes_on_cubed_are_numpys(name, ax, chunking):
    a = np.random.default_rng(0).uniform(-1.5, 1.5, (3, 4, 5))
    fn = FUNCTIONS[name]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", DeprecationWarning)  # Cubed's own numpy.core import
        compare(lambda xp: lambda x: fn(xp, x, ax), [a], chunking)
