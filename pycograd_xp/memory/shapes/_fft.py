"""Shape rules of the ``fft`` extension, as NumPy 2's pocketfft computes it (dtypes keep their
precision: complex64 in, complex64 out).

No output is a view: every transform, ``fftshift``/``ifftshift`` (a roll) and the frequency
vectors are new arrays. What the calls allocate beyond their outputs (``memory=``):

* pocketfft's plan (twiddle factors) and scratch lines, per call and independent of the number
  of lines transformed, allocated in C++ outside tracemalloc's view (counted through
  :func:`native`): for a length whose factors pocketfft handles directly, about 2 lines for
  one line at a time (3 with a buffer line for several) and up to ``1 + 2*vlen`` lines when it
  vectorizes over ``vlen`` lines (2 in double, 4 in single precision; only when there are that
  many lines and no zero-padding); for lengths with a large prime factor it switches to
  Bluestein's algorithm on a padded length ``n2 ~ 2n``, about ``4 n2`` complex values one line
  at a time and up to ``7 n2`` (double) / ``13 n2`` (single) vectorized. The constants are the
  peak resident set measured on lengths 35400..240240 (smooth and prime, single and double,
  last and first axis), rounded up;
* single precision with the factor 1 (the forward transform with norm="backward", the inverse
  with norm="forward"): NumPy picks the double loop, so the whole input is cast to double (a
  copy) and the output computed in double and cast back;
* ``hfft`` conjugates its input first (a copy); ``fftn``/``rfftn``/``irfftn`` transform one axis
  at a time, each intermediate alive while the next is made;
* ``fftfreq`` builds integer index vectors first (``2n`` int64), ``rfftfreq`` one (``n//2 + 1``).
"""

from __future__ import annotations

import math

import array_api_compat.numpy as npx
import numpy as np

from ..._primitive import defshape
from ...ops._rules.shapes import native, new

# -- pocketfft's choice of algorithm (pocketfft_hdronly.hpp), to size its buffers ---------------


def _largest_prime_factor(n):
    res = 1
    while n % 2 == 0:
        res, n = 2, n // 2
    f = 3
    while f * f <= n:
        while n % f == 0:
            res, n = f, n // f
        f += 2
    return n if n > 1 else res


def _cost_guess(n):
    ni, result = n, 0.0
    while n % 2 == 0:
        result, n = result + 2, n // 2
    f = 3
    while f * f <= n:
        while n % f == 0:
            result += f if f <= 5 else 1.1 * f
            n //= f
        f += 2
    if n > 1:
        result += n if n <= 5 else 1.1 * n
    return result * ni


def _good_size(n):
    """The smallest product of 2, 3, 5, 7 and 11 that is >= n."""
    if n <= 12:
        return n
    best = 2 * n
    f11 = 1
    while f11 < best:
        f7 = f11
        while f7 < best:
            f5 = f7
            while f5 < best:
                x = f5
                while x < n:
                    x *= 2
                while True:
                    if x < n:
                        x *= 3
                    elif x > n:
                        best = min(best, x)
                        if x & 1:
                            break
                        x >>= 1
                    else:
                        return n
                f5 *= 5
            f7 *= 7
        f11 *= 11
    return best


def _bluestein(n, real):
    """The padded length of Bluestein's algorithm if pocketfft uses it for length ``n``, else 0."""
    lpf = 0 if n < 50 else _largest_prime_factor(n)
    if lpf * lpf <= n:
        return 0
    n2 = _good_size(2 * n - 1)
    direct = (0.5 if real else 1.0) * _cost_guess(n)
    return n2 if 3 * _cost_guess(n2) < direct else 0


def _pocketfft(n, lines, complex_itemsize, real, vectorized):
    """Bytes of pocketfft's plan and scratch for ``lines`` transforms of length ``n``: one line
    at a time (and a buffer line when there are several), or ``vlen`` at a time."""
    single = complex_itemsize == 8
    n2 = _bluestein(n, real)
    line = n * (complex_itemsize // 2 if real else complex_itemsize)
    if n2:
        if vectorized:
            return native((13.25 if single else 7.75) * n2 * complex_itemsize)
        return native(4.5 * n2 * complex_itemsize + (line if lines > 1 else 0))
    if vectorized:
        return native((9.25 if single else 5.25) * line)
    return native((3 if lines > 1 else 2) * line)


# -- one 1-D transform ---------------------------------------------------------------------------
FORWARD = {"fft": True, "ifft": False, "rfft": True, "irfft": False}


def _complex(dtype):
    return np.result_type(dtype, np.complex64)


def _call(kind, shape, dtype, n, axis):
    """(output shape, output dtype, transform length) of ``kind`` on an array ``shape``."""
    axis = axis % len(shape)
    m = shape[axis]
    if kind == "irfft":
        n = 2 * (m - 1) if n is None else n
        out_n, out_dtype = n, np.dtype(dtype).type(0).real.dtype
    elif kind == "rfft":
        n = m if n is None else n
        out_n, out_dtype = n // 2 + 1, _complex(dtype)
    else:
        n = m if n is None else n
        out_n, out_dtype = n, _complex(dtype)
    if n < 1:
        raise ValueError(f"Invalid number of FFT data points ({n}) specified.")
    return shape[:axis] + (out_n,) + shape[axis + 1:], np.dtype(out_dtype), n


def _step_memory(kind, shape, dtype, n, axis, norm):
    """Transient bytes of one 1-D transform: pocketfft's, and the double-precision copies of a
    single-precision call whose factor is 1."""
    out_shape, out_dtype, n = _call(kind, shape, dtype, n, axis)
    size, out_size = math.prod(shape), math.prod(out_shape)
    c = _complex(dtype).itemsize
    effective = norm if FORWARD[kind] else {"forward": "backward"}.get(norm, "other")
    cast = 0
    if c == 8 and effective in ("backward", None):
        c = 16
        cast = size * 2 * np.dtype(dtype).itemsize + out_size * 2 * out_dtype.itemsize
    axis = axis % len(shape)
    lines = max(out_size // out_shape[axis] if out_size else 0, 1)
    # NumPy vectorizes over vlen lines when there are that many and no zero-padding
    needed = n // 2 + 1 if kind == "irfft" else n
    vectorized = lines >= (4 if c == 8 else 2) and shape[axis] >= needed
    return _pocketfft(n, lines, c, kind in ("rfft", "irfft"), vectorized) + cast


def _one(kind):
    def rule(a, x, /, *, n=None, axis=-1, norm="backward"):
        shape, dtype, _ = _call(kind, x.shape, x.dtype, n, axis)
        return new(shape, dtype)

    def memory(out, x, /, *, n=None, axis=-1, norm="backward"):
        return _step_memory(kind, x.shape, x.dtype, n, axis, norm)

    return rule, memory


def _hfft(a, x, /, *, n=None, axis=-1, norm="backward"):
    shape, dtype, _ = _call("irfft", x.shape, x.dtype, n, axis)
    return new(shape, dtype)


def _hfft_memory(out, x, /, *, n=None, axis=-1, norm="backward"):
    # irfft(conj(x)) with the dual norm, which irfft swaps back: its factor is 1 for "backward"
    dual = {"backward": "forward", "forward": "backward"}.get(norm, norm)
    return x.size * x.dtype.itemsize + _step_memory("irfft", x.shape, x.dtype, n, axis, dual)


def _ihfft(a, x, /, *, n=None, axis=-1, norm="backward"):
    shape, dtype, _ = _call("rfft", x.shape, x.dtype, n, axis)
    return new(shape, dtype)


def _ihfft_memory(out, x, /, *, n=None, axis=-1, norm="backward"):
    # conj(rfft(x)) with the dual norm, conjugated in place
    dual = {"backward": "forward", "forward": "backward"}.get(norm, norm)
    return _step_memory("rfft", x.shape, x.dtype, n, axis, dual)


# -- n-dimensional transforms: one axis at a time ------------------------------------------------
def _cook(x, s, axes, inverse_real):
    """numpy.fft's ``_cook_nd_args``: the length and axis of each 1-D transform."""
    shapeless = s is None
    if s is None:
        s = list(x.shape) if axes is None else [x.shape[ax] for ax in axes]
    s = list(s)
    if axes is None:
        axes = list(range(-len(s), 0))
    axes = [ax % x.ndim for ax in axes]
    if len(s) != len(axes):
        raise ValueError("Shape and axes have different lengths.")
    if inverse_real and shapeless:
        s[-1] = (x.shape[axes[-1]] - 1) * 2
    return [x.shape[ax] if n == -1 else n for n, ax in zip(s, axes, strict=True)], axes


def _steps(name, x, s, axes):
    """The 1-D transforms NumPy runs for ``name``, in order: (kind, n, axis)."""
    kind = {"fftn": "fft", "ifftn": "ifft", "rfftn": "fft", "irfftn": "ifft"}[name]
    s, axes = _cook(x, s, axes, name == "irfftn")
    steps = [(kind, n, ax) for n, ax in zip(s, axes, strict=True)]
    if name in ("fftn", "ifftn"):
        return steps[::-1]
    if name == "rfftn":
        return [("rfft", s[-1], axes[-1])] + steps[-2::-1]
    return steps[:-1] + [("irfft", s[-1], axes[-1])]


def _chain(name, x, s, axes, norm):
    """The output shape and dtype, and the most bytes beyond the output: the most any step
    holds (its input unless it is ``x``, its output, its own transients) less the output."""
    shape, dtype = x.shape, x.dtype
    most = 0
    for i, (kind, n, ax) in enumerate(_steps(name, x, s, axes)):
        out_shape, out_dtype, _ = _call(kind, shape, dtype, n, ax)
        held = (math.prod(shape) * dtype.itemsize if i else 0) + \
            math.prod(out_shape) * out_dtype.itemsize
        most = max(most, held + _step_memory(kind, shape, dtype, n, ax, norm))
        shape, dtype = out_shape, out_dtype
    return shape, dtype, most - math.prod(shape) * dtype.itemsize


def _many(name):
    def rule(a, x, /, *, s=None, axes=None, norm="backward"):
        shape, dtype, _ = _chain(name, x, s, axes, norm)
        return new(shape, dtype)

    def memory(out, x, /, *, s=None, axes=None, norm="backward"):
        return _chain(name, x, s, axes, norm)[2]

    return rule, memory


# -- frequencies and shifts ----------------------------------------------------------------------
def _freq(name):
    ref = getattr(npx.fft, name)

    def rule(a, n, /, *, d=1.0, dtype=None, device=None):
        size = n if name == "fftfreq" else n // 2 + 1
        return new((size,), ref(1, d=d, dtype=dtype).dtype)

    def memory(out, n, /, *, d=1.0, dtype=None, device=None):
        # int64 index vectors (fftfreq: results, and its two halves; rfftfreq: one arange),
        # freed before a cast to ``dtype`` makes the output from the float64 result
        return (2 * n if name == "fftfreq" else n // 2 + 1) * 8

    return rule, memory


def _shift(a, x, /, *, axes=None):
    return new(x.shape, x.dtype)


for _name, _make in [("fft", _one), ("ifft", _one), ("rfft", _one), ("irfft", _one),
                     ("fftn", _many), ("ifftn", _many), ("rfftn", _many), ("irfftn", _many),
                     ("fftfreq", _freq), ("rfftfreq", _freq)]:  # fmt: skip
    _rule, _memory = _make(_name)
    defshape(f"fft.{_name}", _rule, memory=_memory)
defshape("fft.hfft", _hfft, memory=_hfft_memory)
defshape("fft.ihfft", _ihfft, memory=_ihfft_memory)
defshape("fft.fftshift", _shift)
defshape("fft.ifftshift", _shift)
