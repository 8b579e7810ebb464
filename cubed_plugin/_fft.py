"""The ``fft`` extension over Cubed: the transformed axes one chunk, one ``numpy.fft`` call per
block (:func:`cubed_plugin._blocks.core_apply`), lazily.

Memory: measured with tracemalloc on NumPy 2.4 (pocketfft), a transform allocates besides its
output at most 2.5 times ``16 bytes x`` the largest element count among the block's input,
output and intermediate shapes (complex64/float32 are computed in double precision and cast:
the worst case; complex128 along one axis allocates nothing more; ``fftn`` keeps one
intermediate per pair of axes; a real input to a complex transform is converted first). Each
block declares ``3 x 16 x`` that count as ``extra_projected_mem``.

``fftfreq``/``rfftfreq`` are lazy ``arange`` expressions; ``fftshift``/``ifftshift`` are
``roll`` (Cubed's, on regular chunks: :func:`cubed_plugin._standard.roll`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._blocks import Out, core_apply, implements, norm_axis

NORMS = ("backward", "ortho", "forward")


def _single(dtype: Any) -> bool:
    return np.dtype(dtype) in (np.dtype(np.float32), np.dtype(np.complex64))


def _complex(dtype: Any) -> Any:
    return np.dtype(np.complex64 if _single(dtype) else np.complex128)


def _real(dtype: Any) -> Any:
    return np.dtype(np.float32 if _single(dtype) else np.float64)


def _check(fname: str, norm: str, sizes: Sequence[int]) -> None:
    if norm not in NORMS:
        raise ValueError(f"norm must be one of {NORMS}, got {norm!r} ({fname})")
    for n in sizes:
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"invalid number of data points {n!r}; it must be >= 1 ({fname})")


def _temps(axes: tuple[int, ...], lengths: dict[int, int]):
    """3 x 16 bytes per element of the largest shape a transform over ``axes`` passes through:
    every transformed axis at the longest of its input, output and requested length."""

    def temps(ins: list, outs: list) -> int:
        (ishape, _), (oshape, _) = ins[0], outs[0]
        shape = [
            max(i, o, lengths.get(a, 0)) if a in axes else max(i, o)
            for a, (i, o) in enumerate(zip(ishape, oshape, strict=True))
        ]
        return 3 * 16 * math.prod(shape)

    return temps


def _apply(
    fname: str,
    func: Any,
    x: Any,
    axes: tuple[int, ...],
    out_shape: tuple[int, ...],
    dtype: Any,
    lengths: dict[int, int],
) -> Any:
    what = f"axis {axes[0]}" if len(axes) == 1 else "axes " + ", ".join(map(str, axes))
    return core_apply(
        fname,
        func,
        [x],
        [axes],
        [Out(out_shape, axes, dtype)],
        temps=_temps(axes, lengths),
        what=f"the transformed {what}",
    )


def _one_axis(kind: str, x: Any, n: int | None, axis: int, norm: str) -> Any:
    fname = f"fft.{kind}"
    axis = norm_axis(axis, x.ndim, fname)
    m = x.shape[axis]
    if kind in ("irfft", "hfft"):
        size = 2 * (m - 1) if n is None else n
        out_len, dtype = size, _real(x.dtype)
    elif kind in ("rfft", "ihfft"):
        size = m if n is None else n
        out_len, dtype = size // 2 + 1, _complex(x.dtype)
    else:
        size = m if n is None else n
        out_len, dtype = size, _complex(x.dtype)
    _check(fname, norm, [size])
    out_shape = x.shape[:axis] + (out_len,) + x.shape[axis + 1 :]
    func = functools.partial(getattr(np.fft, kind), n=size, axis=axis, norm=norm)
    return _apply(fname, func, x, (axis,), out_shape, dtype, {axis: size})


@implements("fft.fft")
def fft(x: Any, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Any:
    return _one_axis("fft", x, n, axis, norm)


@implements("fft.ifft")
def ifft(x: Any, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Any:
    return _one_axis("ifft", x, n, axis, norm)


@implements("fft.rfft")
def rfft(x: Any, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Any:
    return _one_axis("rfft", x, n, axis, norm)


@implements("fft.irfft")
def irfft(x: Any, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Any:
    return _one_axis("irfft", x, n, axis, norm)


@implements("fft.hfft")
def hfft(x: Any, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Any:
    return _one_axis("hfft", x, n, axis, norm)


@implements("fft.ihfft")
def ihfft(x: Any, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Any:
    return _one_axis("ihfft", x, n, axis, norm)


def _many_axes(kind: str, x: Any, s: Any, axes: Any, norm: str) -> Any:
    fname = f"fft.{kind}"
    if axes is None:
        axes = tuple(range(x.ndim)) if s is None else tuple(range(x.ndim - len(s), x.ndim))
    axes = tuple(norm_axis(a, x.ndim, fname) for a in axes)
    if len(set(axes)) != len(axes):
        raise ValueError(f"axes must be unique, got {axes} ({fname})")
    if s is not None and len(s) != len(axes):
        raise ValueError(f"s and axes must have the same length, got {s} and {axes} ({fname})")
    last = axes[-1] if axes else -1  # (no axis is -1: they are normalized)
    sizes = []
    for i, a in enumerate(axes):
        want = -1 if s is None else s[i]
        if want == -1:
            want = 2 * (x.shape[a] - 1) if (kind == "irfftn" and a == last) else x.shape[a]
        sizes.append(want)
    _check(fname, norm, sizes)
    if not axes:
        return x
    shape = list(x.shape)
    for a, n in zip(axes, sizes, strict=True):
        shape[a] = n
    if kind == "rfftn":
        shape[last] = sizes[-1] // 2 + 1
    dtype = _real(x.dtype) if kind == "irfftn" else _complex(x.dtype)
    func = functools.partial(getattr(np.fft, kind), s=tuple(sizes), axes=axes, norm=norm)
    return _apply(fname, func, x, axes, tuple(shape), dtype, dict(zip(axes, sizes, strict=True)))


@implements("fft.fftn")
def fftn(x: Any, /, *, s: Any = None, axes: Any = None, norm: str = "backward") -> Any:
    return _many_axes("fftn", x, s, axes, norm)


@implements("fft.ifftn")
def ifftn(x: Any, /, *, s: Any = None, axes: Any = None, norm: str = "backward") -> Any:
    return _many_axes("ifftn", x, s, axes, norm)


@implements("fft.rfftn")
def rfftn(x: Any, /, *, s: Any = None, axes: Any = None, norm: str = "backward") -> Any:
    return _many_axes("rfftn", x, s, axes, norm)


@implements("fft.irfftn")
def irfftn(x: Any, /, *, s: Any = None, axes: Any = None, norm: str = "backward") -> Any:
    return _many_axes("irfftn", x, s, axes, norm)


def _freq(fname: str, k: Any, n: int, d: float, dtype: Any) -> Any:
    import cubed

    if dtype is None:
        dtype = cubed.__array_namespace_info__().default_dtypes()["real floating"]
    # NumPy's formula (integers times 1 / (n d) in double precision), then the dtype asked for
    return cubed.astype(cubed.astype(k, cubed.float64) * (1.0 / (n * d)), dtype)


@implements("fft.fftfreq")
def fftfreq(n: int, /, *, d: float = 1.0, dtype: Any = None, device: Any = None) -> Any:
    import cubed

    _check("fft.fftfreq", "backward", [n])
    k = cubed.arange(n, dtype=cubed.int64, device=device)
    k = cubed.where(k < (n + 1) // 2, k, k - n)
    return _freq("fft.fftfreq", k, n, d, dtype)


@implements("fft.rfftfreq")
def rfftfreq(n: int, /, *, d: float = 1.0, dtype: Any = None, device: Any = None) -> Any:
    import cubed

    _check("fft.rfftfreq", "backward", [n])
    k = cubed.arange(n // 2 + 1, dtype=cubed.int64, device=device)
    return _freq("fft.rfftfreq", k, n, d, dtype)


def _shift(fname: str, x: Any, axes: Any, sign: int) -> Any:
    from ._standard import roll

    if axes is None:
        axes = tuple(range(x.ndim))
    elif isinstance(axes, int):
        axes = (axes,)
    axes = tuple(norm_axis(a, x.ndim, fname) for a in axes)
    if not axes:
        return x
    shift = tuple(sign * (x.shape[a] // 2) for a in axes)
    return roll(x, shift, axis=axes)


@implements("fft.fftshift")
def fftshift(x: Any, /, *, axes: Any = None) -> Any:
    return _shift("fft.fftshift", x, axes, 1)


@implements("fft.ifftshift")
def ifftshift(x: Any, /, *, axes: Any = None) -> Any:
    return _shift("fft.ifftshift", x, axes, -1)
