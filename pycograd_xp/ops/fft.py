"""The ``fft`` extension.

Every transform (and shift) is linear: its JVP is the row applied to the tangents, and in the
JAX convention its cotangent map (VJP) is its transpose. The DFT matrix is symmetric, so
fft/ifft transpose to themselves (same norm); the real transforms add a real part or a conjugate
and the Hermitian weights (each interior bin of a half spectrum stands for two bins of the full
one). Batching: the rows transform trailing axes, so one-axis rows shift their axis, n-D rows
their axes (None: every axis of the example, or the last len(s)).

Shape rules as NumPy 2's pocketfft computes it (dtypes keep their precision: complex64 in,
complex64 out). No output is a view: every transform, ``fftshift``/``ifftshift`` (a roll) and
the frequency vectors are new arrays. What the calls allocate beyond their outputs
(``memory=``):

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
from typing import Any

import array_api_compat.numpy as npx
import numpy as np

from .._primitive import Array, primitive
from ._rules.batching import SHAPE_ONLY, fn, shift
from ._rules.jvp import linear
from ._rules.shapes import in_operands_order, native, new
from ._rules.vjp import made_like, zeros_beside

CFP, RFP = "complex floating-point", "real floating-point"

# -- kits shared by the rows below: VJP ----------------------------------------------------------

DUAL = {"backward": "forward", "ortho": "ortho", "forward": "backward"}


def _resize(ns, ct, axis, size):
    """Truncate or zero-pad ``ct`` along ``axis`` to ``size`` (undoing fft's ``n``)."""
    have = ct.shape[axis]
    if have == size:
        return ct
    if have > size:
        idx = [slice(None)] * ct.ndim
        idx[axis] = slice(0, size)
        return ct[tuple(idx)]
    return ns.concat([ct, zeros_beside(ns, ct, axis, size - have)], axis=axis)


def _axes_of(x, s, axes):
    if axes is None:
        axes = tuple(range(x.ndim)) if s is None else tuple(range(x.ndim - len(s), x.ndim))
    return tuple(a % x.ndim for a in axes)


def _hermitian_weights(ns, n, m, dtype, like):
    """2 for the interior bins of a length-m half spectrum of a length-n signal, 1 at DC and
    (n even) at Nyquist."""
    w = [1.0] + [2.0] * (m - 1)
    if n % 2 == 0 and m > 1:
        w[-1] = 1.0
    return ns.asarray(w, dtype=dtype, **made_like(ns, like))


def _c2c(name):
    def rule(ns, g, out, x, /, *, n=None, axis=-1, norm="backward"):
        ct = getattr(ns.fft, name)(g, axis=axis, norm=norm)
        return (_resize(ns, ct, axis % x.ndim, x.shape[axis]),)

    return rule


def _c2c_n(name):
    def rule(ns, g, out, x, /, *, s=None, axes=None, norm="backward"):
        axes = _axes_of(x, s, axes)
        ct = getattr(ns.fft, name)(g, axes=axes, norm=norm)
        for a in axes:
            ct = _resize(ns, ct, a, x.shape[a])
        return (ct,)

    return rule


def _shift_vjp(inverse_name):
    def rule(ns, g, out, x, /, *, axes=None):
        return (getattr(ns.fft, inverse_name)(g, axes=axes),)

    return rule


# -- kits shared by the rows below: batching -----------------------------------------------------


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


# -- kits shared by the rows below: shapes and memory --------------------------------------------
# pocketfft's choice of algorithm (pocketfft_hdronly.hpp), to size its buffers


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


# one 1-D transform

JVP = {"fft": True, "ifft": False, "rfft": True, "irfft": False}


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
    return shape[:axis] + (out_n,) + shape[axis + 1 :], np.dtype(out_dtype), n


def _step_memory(kind, shape, dtype, n, axis, norm):
    """Transient bytes of one 1-D transform: pocketfft's, and the double-precision copies of a
    single-precision call whose factor is 1."""
    out_shape, out_dtype, n = _call(kind, shape, dtype, n, axis)
    size, out_size = math.prod(shape), math.prod(out_shape)
    c = _complex(dtype).itemsize
    effective = norm if JVP[kind] else {"forward": "backward"}.get(norm, "other")
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


def _one_shape(kind):
    """The shape and memory rules of the 1-D transform ``kind``."""

    def rule(a, x, /, *, n=None, axis=-1, norm="backward"):
        shape, dtype, _ = _call(kind, x.shape, x.dtype, n, axis)
        return in_operands_order(shape, dtype, x)  # pocketfft's result keeps x's layout

    def memory(out, x, /, *, n=None, axis=-1, norm="backward"):
        return _step_memory(kind, x.shape, x.dtype, n, axis, norm)

    return rule, memory


# n-dimensional transforms: one axis at a time


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
        held = (math.prod(shape) * dtype.itemsize if i else 0) + math.prod(
            out_shape
        ) * out_dtype.itemsize
        most = max(most, held + _step_memory(kind, shape, dtype, n, ax, norm))
        shape, dtype = out_shape, out_dtype
    return shape, dtype, most - math.prod(shape) * dtype.itemsize


def _many_shape(name):
    """The shape and memory rules of the n-D transform ``name``."""

    def rule(a, x, /, *, s=None, axes=None, norm="backward"):
        shape, dtype, _ = _chain(name, x, s, axes, norm)
        return in_operands_order(shape, dtype, x)

    def memory(out, x, /, *, s=None, axes=None, norm="backward"):
        return _chain(name, x, s, axes, norm)[2]

    return rule, memory


# -- fft, ifft -----------------------------------------------------------------------------------


@primitive(CFP, scope="fft")
def fft(
    bk: Any, x: Array, /, *, n: int | None = None, axis: int = -1, norm: str = "backward"
) -> Any:
    return bk.fft.fft(x, n=n, axis=axis, norm=norm)


@primitive(CFP, scope="fft")
def ifft(
    bk: Any, x: Array, /, *, n: int | None = None, axis: int = -1, norm: str = "backward"
) -> Any:
    return bk.fft.ifft(x, n=n, axis=axis, norm=norm)


for _row in (fft, ifft):
    _row.defvjp(_c2c(_row.short_name))
    _row.defjvp(linear(_row))
    _row.defbatch(_one_axis(_row.name))
    _rule, _memory = _one_shape(_row.short_name)
    _row.defshape(_rule, memory=_memory)


# -- fftn, ifftn ---------------------------------------------------------------------------------


@primitive(CFP, scope="fft")
def fftn(bk: Any, x: Array, /, *, s: Any = None, axes: Any = None, norm: str = "backward") -> Any:
    return bk.fft.fftn(x, s=s, axes=axes, norm=norm)


@primitive(CFP, scope="fft")
def ifftn(bk: Any, x: Array, /, *, s: Any = None, axes: Any = None, norm: str = "backward") -> Any:
    return bk.fft.ifftn(x, s=s, axes=axes, norm=norm)


for _row in (fftn, ifftn):
    _row.defvjp(_c2c_n(_row.short_name))
    _row.defjvp(linear(_row))
    _row.defbatch(_n_axes(_row.name))
    _rule, _memory = _many_shape(_row.short_name)
    _row.defshape(_rule, memory=_memory)


# -- rfft ----------------------------------------------------------------------------------------


@primitive(RFP, scope="fft")
def rfft(
    bk: Any, x: Array, /, *, n: int | None = None, axis: int = -1, norm: str = "backward"
) -> Any:
    return bk.fft.rfft(x, n=n, axis=axis, norm=norm)


@rfft.defvjp
def _rfft_vjp(ns, g, out, x, /, *, n=None, axis=-1, norm="backward"):
    axis = axis % x.ndim
    size = x.shape[axis] if n is None else n
    full = ns.fft.fft(_resize(ns, g, axis, size), axis=axis, norm=norm)
    return (_resize(ns, ns.real(full), axis, x.shape[axis]),)


rfft.defjvp(linear(rfft))
rfft.defbatch(_one_axis(rfft.name))
_rule, _memory = _one_shape("rfft")
rfft.defshape(_rule, memory=_memory)


# -- irfft ---------------------------------------------------------------------------------------


@primitive(CFP, scope="fft")
def irfft(
    bk: Any, x: Array, /, *, n: int | None = None, axis: int = -1, norm: str = "backward"
) -> Any:
    return bk.fft.irfft(x, n=n, axis=axis, norm=norm)


@irfft.defvjp
def _irfft_vjp(ns, g, out, x, /, *, n=None, axis=-1, norm="backward"):
    axis = axis % x.ndim
    size = g.shape[axis]
    half = ns.fft.rfft(g, axis=axis, norm=DUAL[norm])
    w = _hermitian_weights(ns, size, half.shape[axis], g.dtype, g)
    shape = [1] * g.ndim
    shape[axis] = half.shape[axis]
    ct = ns.conj(half) * ns.reshape(w, tuple(shape))
    return (_resize(ns, ct, axis, x.shape[axis]),)


irfft.defjvp(linear(irfft))
irfft.defbatch(_one_axis(irfft.name))
_rule, _memory = _one_shape("irfft")
irfft.defshape(_rule, memory=_memory)


# -- rfftn ---------------------------------------------------------------------------------------


@primitive(RFP, scope="fft")
def rfftn(bk: Any, x: Array, /, *, s: Any = None, axes: Any = None, norm: str = "backward") -> Any:
    return bk.fft.rfftn(x, s=s, axes=axes, norm=norm)


@rfftn.defvjp
def rfftn_vjp(ns, g, out, x, /, *, s=None, axes=None, norm="backward"):
    axes = _axes_of(x, s, axes)
    sizes = [x.shape[a] if s is None else s[i] for i, a in enumerate(axes)]
    g = _resize(ns, g, axes[-1], sizes[-1])
    full = ns.fft.fftn(g, axes=axes, norm=norm)
    ct = ns.real(full)
    for a in axes:
        ct = _resize(ns, ct, a, x.shape[a])
    return (ct,)


rfftn.defjvp(linear(rfftn))
rfftn.defbatch(_n_axes(rfftn.name))
_rule, _memory = _many_shape("rfftn")
rfftn.defshape(_rule, memory=_memory)


# -- irfftn --------------------------------------------------------------------------------------


@primitive(CFP, scope="fft")
def irfftn(bk: Any, x: Array, /, *, s: Any = None, axes: Any = None, norm: str = "backward") -> Any:
    return bk.fft.irfftn(x, s=s, axes=axes, norm=norm)


@irfftn.defvjp
def irfftn_vjp(ns, g, out, x, /, *, s=None, axes=None, norm="backward"):
    # irfftn = irfft on the last axis after ifftn on the others
    axes = _axes_of(x, s, axes)
    last, others = axes[-1], axes[:-1]
    (ct,) = _irfft_vjp(ns, g, None, x, n=g.shape[last], axis=last, norm=norm)
    if others:
        ct = ns.fft.ifftn(ct, axes=others, norm=norm)
    for a in others:
        ct = _resize(ns, ct, a, x.shape[a])
    return (ct,)


irfftn.defjvp(linear(irfftn))
irfftn.defbatch(_n_axes(irfftn.name))
_rule, _memory = _many_shape("irfftn")
irfftn.defshape(_rule, memory=_memory)


# -- hfft ----------------------------------------------------------------------------------------


@primitive(CFP, scope="fft")
def hfft(
    bk: Any, x: Array, /, *, n: int | None = None, axis: int = -1, norm: str = "backward"
) -> Any:
    return bk.fft.hfft(x, n=n, axis=axis, norm=norm)


@hfft.defvjp
def hfft_vjp(ns, g, out, x, /, *, n=None, axis=-1, norm="backward"):
    # hfft(x) = irfft(conj(x)) with the dual norm
    (ct,) = _irfft_vjp(ns, g, None, x, n=n, axis=axis, norm=DUAL[norm])
    return (ns.conj(ct),)


hfft.defjvp(linear(hfft))
hfft.defbatch(_one_axis(hfft.name))


def _hfft_shape(a, x, /, *, n=None, axis=-1, norm="backward"):
    shape, dtype, _ = _call("irfft", x.shape, x.dtype, n, axis)
    return in_operands_order(shape, dtype, x)


def _hfft_memory(out, x, /, *, n=None, axis=-1, norm="backward"):
    # irfft(conj(x)) with the dual norm, which irfft swaps back: its factor is 1 for "backward"
    dual = {"backward": "forward", "forward": "backward"}.get(norm, norm)
    return x.size * x.dtype.itemsize + _step_memory("irfft", x.shape, x.dtype, n, axis, dual)


hfft.defshape(_hfft_shape, memory=_hfft_memory)


# -- ihfft ---------------------------------------------------------------------------------------


@primitive(RFP, scope="fft")
def ihfft(
    bk: Any, x: Array, /, *, n: int | None = None, axis: int = -1, norm: str = "backward"
) -> Any:
    return bk.fft.ihfft(x, n=n, axis=axis, norm=norm)


@ihfft.defvjp
def ihfft_vjp(ns, g, out, x, /, *, n=None, axis=-1, norm="backward"):
    # ihfft(x) = conj(rfft(x)) with the dual norm
    return _rfft_vjp(ns, ns.conj(g), None, x, n=n, axis=axis, norm=DUAL[norm])


ihfft.defjvp(linear(ihfft))
ihfft.defbatch(_one_axis(ihfft.name))


def _ihfft_shape(a, x, /, *, n=None, axis=-1, norm="backward"):
    shape, dtype, _ = _call("rfft", x.shape, x.dtype, n, axis)
    return in_operands_order(shape, dtype, x)


def _ihfft_memory(out, x, /, *, n=None, axis=-1, norm="backward"):
    # conj(rfft(x)) with the dual norm, conjugated in place
    dual = {"backward": "forward", "forward": "backward"}.get(norm, norm)
    return _step_memory("rfft", x.shape, x.dtype, n, axis, dual)


ihfft.defshape(_ihfft_shape, memory=_ihfft_memory)


# -- fftfreq, rfftfreq ---------------------------------------------------------------------------


@primitive(scope="fft")
def fftfreq(bk: Any, n: int, /, *, d: float = 1.0, dtype: Any = None, device: Any = None) -> Any:
    return bk.fft.fftfreq(n, d=d, dtype=dtype, device=device)


@primitive(scope="fft")
def rfftfreq(bk: Any, n: int, /, *, d: float = 1.0, dtype: Any = None, device: Any = None) -> Any:
    return bk.fft.rfftfreq(n, d=d, dtype=dtype, device=device)


def _freq_shape(name):
    """The shape and memory rules of the frequency vector ``name``."""
    ref = getattr(npx.fft, name)

    def rule(a, n, /, *, d=1.0, dtype=None, device=None):
        size = n if name == "fftfreq" else n // 2 + 1
        return new((size,), ref(1, d=d, dtype=dtype).dtype)

    def memory(out, n, /, *, d=1.0, dtype=None, device=None):
        # int64 index vectors (fftfreq: results, and its two halves; rfftfreq: one arange),
        # freed before a cast to ``dtype`` makes the output from the float64 result
        return (2 * n if name == "fftfreq" else n // 2 + 1) * 8

    return rule, memory


for _row in (fftfreq, rfftfreq):
    _row.nondifferentiable()
    _row.cannot_batch(SHAPE_ONLY)
    _rule, _memory = _freq_shape(_row.short_name)
    _row.defshape(_rule, memory=_memory)


# -- fftshift, ifftshift -------------------------------------------------------------------------


@primitive(scope="fft")
def fftshift(bk: Any, x: Array, /, *, axes: Any = None) -> Any:
    return bk.fft.fftshift(x, axes=axes)


@primitive(scope="fft")
def ifftshift(bk: Any, x: Array, /, *, axes: Any = None) -> Any:
    return bk.fft.ifftshift(x, axes=axes)


def _shift_shape(a, x, /, *, axes=None):
    return in_operands_order(x.shape, x.dtype, x)  # a roll: x's layout


for _row, _inverse in ((fftshift, ifftshift), (ifftshift, fftshift)):
    _row.defvjp(_shift_vjp(_inverse.short_name))
    _row.defjvp(linear(_row))
    _row.defbatch(_shift_axes(_row.name))
    _row.defshape(_shift_shape)
