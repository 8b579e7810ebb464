"""FFT rows transform trailing axes: one-axis rows shift their axis, n-D rows their axes (None:
every axis of the example, or the last len(s))."""

from __future__ import annotations

from .._primitive import defbatch
from ..ops._rules.batching import fn, shift


def _one_axis(name):
    def rule(ns, dims, x, /, *, axis=-1, **kw):
        return fn(ns, name)(x, axis=shift(axis, x.ndim - 1), **kw)

    return rule


def _n_axes(name):
    def rule(ns, dims, x, /, *, s=None, axes=None, **kw):
        nd = x.ndim - 1
        if axes is None:
            axes = tuple(range(-len(s), 0)) if s is not None else tuple(range(nd))
        return fn(ns, name)(x, s=s, axes=shift(tuple(axes), nd), **kw)

    return rule


def _shift_axes(name):
    def rule(ns, dims, x, /, *, axes=None):
        nd = x.ndim - 1
        axes = tuple(range(nd)) if axes is None else axes
        return fn(ns, name)(x, axes=shift(axes, nd))

    return rule


for _n in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft"):
    defbatch(f"fft.{_n}", _one_axis(f"fft.{_n}"))
for _n in ("fftn", "ifftn", "rfftn", "irfftn"):
    defbatch(f"fft.{_n}", _n_axes(f"fft.{_n}"))
for _n in ("fftshift", "ifftshift"):
    defbatch(f"fft.{_n}", _shift_axes(f"fft.{_n}"))
