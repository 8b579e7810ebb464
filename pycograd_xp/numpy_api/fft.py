"""``numpy.fft`` on our arrays (NumPy casts real input of the complex transforms to complex)."""

from __future__ import annotations

from typing import Any

from ._convert import Composition, _array, _finish
from ._dispatch import FUNCTIONS, _function

# numpy.fft


def _norm_mode(norm: Any) -> str:
    return "backward" if norm is None else norm


# The standard's transforms of complex input (NumPy casts real input to complex for them).
_COMPLEX_IN = frozenset({"fft", "ifft", "fftn", "ifftn", "irfft", "irfftn", "hfft"})


def _fft_input(ns: Any, a: Any, fname: str) -> Any:
    """``a`` in the dtype the standard's ``fname`` takes: complex for the complex transforms,
    real floating for the others (NumPy takes any numbers and casts)."""
    x = _array(ns, a)
    single = x.dtype in (ns.float32, ns.complex64)
    if fname in _COMPLEX_IN:
        if not ns.isdtype(x.dtype, "complex floating"):
            x = ns.astype(x, ns.complex64 if single else ns.complex128)
    elif not ns.isdtype(x.dtype, "real floating"):
        if ns.isdtype(x.dtype, "complex floating"):
            raise TypeError(f"numpy.fft.{fname}(): takes real input, got {x.dtype}")
        x = ns.astype(x, ns.float64)
    return x


def _fft1(fname: str) -> Composition:
    def f(ns: Any, a: Any, n: Any = None, axis: int = -1, norm: Any = None, out: Any = None) -> Any:
        x = _fft_input(ns, a, fname)
        r = _function(ns, f"fft.{fname}")(x, n=n, axis=axis, norm=_norm_mode(norm))
        return _finish(ns, r, out, f"fft.{fname}")

    return f


for _name in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft"):
    FUNCTIONS[f"fft.{_name}"] = _fft1(_name)


def _fftn(fname: str, default_axes: Any = None) -> Composition:
    def f(
        ns: Any, a: Any, s: Any = None, axes: Any = default_axes, norm: Any = None, out: Any = None
    ) -> Any:
        x = _fft_input(ns, a, fname)
        if axes is not None:
            axes = tuple(axes)
        if s is not None:
            s = tuple(int(v) for v in s)
            if axes is None:
                axes = tuple(range(-len(s), 0))
        r = _function(ns, f"fft.{fname}")(x, s=s, axes=axes, norm=_norm_mode(norm))
        return _finish(ns, r, out, f"fft.{fname}")

    return f


for _name in ("fftn", "ifftn", "rfftn", "irfftn"):
    FUNCTIONS[f"fft.{_name}"] = _fftn(_name)
    FUNCTIONS[f"fft.{_name[:-1]}2"] = _fftn(_name, (-2, -1))


def _fftshift(fname: str) -> Composition:
    def f(ns: Any, x: Any, axes: Any = None) -> Any:
        if isinstance(axes, list):
            axes = tuple(axes)
        return _function(ns, f"fft.{fname}")(_array(ns, x), axes=axes)

    return f


FUNCTIONS["fft.fftshift"] = _fftshift("fftshift")
FUNCTIONS["fft.ifftshift"] = _fftshift("ifftshift")
