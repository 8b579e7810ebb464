"""The rest of NumPy's library on our arrays: ``pad``, ``interp``, ``gradient``,
``correlate``/``convolve``, polynomials, ``sinc``, ``trapezoid`` and
``lib.stride_tricks.sliding_window_view``."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._state import STACK
from ..namespace._array import Array
from ._convert import _PY_SCALARS, _array, _operand, _raw, _unsupported
from ._dispatch import FUNCTIONS, _implements
from .statistics import _values
from .ufuncs import _float_of

# padding


def _pairs(what: str, v: Any, ndim: int, as_index: bool) -> np.ndarray:
    """NumPy's ``_as_pairs``: ``v`` as ``ndim`` (before, after) pairs."""
    if isinstance(v, Array):
        v = _values(what, v)
    a = np.asarray(v)
    if as_index:
        a = np.around(a).astype(np.intp)
        if np.any(a < 0):
            raise ValueError(f"numpy.{what}(): index can't contain negative values")
    try:
        return np.broadcast_to(a, (ndim, 2))
    except ValueError as e:
        raise ValueError(
            f"numpy.{what}(): operands could not be broadcast to ({ndim}, 2): {e}"
        ) from None


_PAD_INDEX_MODES = frozenset({"edge", "reflect", "symmetric", "wrap"})
_PAD_STAT_MODES = frozenset({"maximum", "minimum", "mean", "median"})
_PAD_KEYWORDS = {
    "constant": {"constant_values"},
    "reflect": {"reflect_type"},
    "symmetric": {"reflect_type"},
    "linear_ramp": {"end_values"},
    **dict.fromkeys(_PAD_STAT_MODES, {"stat_length"}),
}


def _along(x: Any, ax: int, start: int, stop: int) -> Any:
    """``x[start:stop]`` along axis ``ax``."""
    return x[(slice(None),) * ax + (slice(start, stop),)]


def _pad_stat(ns: Any, region: Any, ax: int, mode: str) -> Any:
    """NumPy's statistic of a pad region along ``ax`` (kept as an axis of 1): integers get the
    mean and median rounded, as NumPy's ``pad`` does."""
    if mode == "maximum":
        return ns.max(region, axis=ax, keepdims=True)
    if mode == "minimum":
        return ns.min(region, axis=ax, keepdims=True)
    stat = FUNCTIONS["median"](ns, region, axis=ax, keepdims=True) if mode == "median" else None
    if stat is None:
        floating = ns.isdtype(region.dtype, ("real floating", "complex floating"))
        stat = ns.mean(
            region if floating else ns.astype(region, ns.float64), axis=ax, keepdims=True
        )
    if not ns.isdtype(region.dtype, ("real floating", "complex floating")):
        stat = ns.astype(ns.round(stat), region.dtype)
    return stat


def _pad_ramp(ns: Any, edge: Any, end: Any, width: int, ax: int, before: bool) -> Any:
    """NumPy's ``linspace(end, edge, width, endpoint=False)`` along ``ax`` (outermost first;
    reversed after the array): ``end + i (edge - end) / width``."""
    floating = ns.isdtype(edge.dtype, ("real floating", "complex floating"))
    e = edge if floating else ns.astype(edge, ns.float64)
    steps = np.arange(width, dtype=np.float64)
    shape = [1] * edge.ndim
    shape[ax] = width
    i = ns.asarray(np.reshape(steps if before else steps[::-1], shape), dtype=e.dtype)
    ramp = end + i * ((e - end) / width)
    return ramp if floating else ns.astype(ns.floor(ramp), edge.dtype)


@_implements("pad")
def _pad(ns: Any, array: Any, pad_width: Any, mode: Any = "constant", **kwargs: Any) -> Any:
    """Axis by axis, as NumPy's own ``pad`` (a later axis pads what the earlier ones padded):
    ``constant`` and ``empty`` (zeros) concatenate blocks of the constant; ``edge``,
    ``reflect``, ``symmetric`` and ``wrap`` gather along the axis with the index NumPy's own
    ``pad`` gives ``arange(n)`` (the gradient scatters back through the gather);
    ``maximum``, ``minimum``, ``mean`` and ``median`` concatenate the statistic of the first
    and last ``stat_length`` elements, and ``linear_ramp`` a ramp from ``end_values`` to the
    edge (the gradient flows through the statistic and the edge). A callable mode and
    ``reflect_type='odd'`` refuse."""
    x = _array(ns, array)
    if callable(mode) or mode not in _PAD_INDEX_MODES | _PAD_STAT_MODES | {
        "constant",
        "empty",
        "linear_ramp",
    }:
        name = getattr(mode, "__name__", mode)
        raise _unsupported(
            "pad",
            f"mode={name!r} (constant, edge, linear_ramp, maximum, mean, median, minimum, "
            "reflect, symmetric, wrap and empty are)",
        )
    extra = set(kwargs) - _PAD_KEYWORDS.get(mode, set())
    if extra:
        raise ValueError(f"numpy.pad(): unsupported keyword arguments for mode {mode!r}: {extra}")
    if kwargs.get("reflect_type", "even") != "even":
        raise _unsupported("pad", f"reflect_type={kwargs['reflect_type']!r} (only 'even')")
    widths = _pairs("pad", pad_width, x.ndim, True)
    if mode in ("constant", "empty"):
        values = _pairs("pad", kwargs.get("constant_values", 0), x.ndim, False)
    elif mode == "linear_ramp":
        values = _pairs("pad", kwargs.get("end_values", 0), x.ndim, False)
    elif mode in _PAD_STAT_MODES and kwargs.get("stat_length") is not None:
        lengths = _pairs("pad", kwargs["stat_length"], x.ndim, True)
    else:
        lengths = None
    for ax in range(x.ndim):
        before, after = int(widths[ax, 0]), int(widths[ax, 1])
        if before == 0 and after == 0:
            continue
        n = int(x.shape[ax])
        if mode in ("constant", "empty"):
            parts = []
            for width, v in ((before, values[ax, 0]), (after, values[ax, 1])):
                shape = list(x.shape)
                shape[ax] = width
                fill = np.asarray(v).astype(x.dtype).item()
                parts.append(ns.full(tuple(shape), fill, dtype=x.dtype))
            x = ns.concat([parts[0], x, parts[1]], axis=ax)
            continue
        if n == 0:
            raise ValueError(
                f"numpy.pad(): can't extend empty axis {ax} using modes other than "
                "'constant' or 'empty'"
            )
        if mode in _PAD_INDEX_MODES:
            idx = np.pad(np.arange(n), (before, after), mode=mode)
            x = ns.take(x, ns.asarray(idx), axis=ax)
            continue
        parts = []
        for side, width in ((0, before), (1, after)):
            shape = list(x.shape)
            shape[ax] = width
            if width == 0:
                parts.append(ns.zeros(tuple(shape), dtype=x.dtype))
            elif mode == "linear_ramp":
                edge = _along(x, ax, 0, 1) if side == 0 else _along(x, ax, n - 1, n)
                parts.append(_pad_ramp(ns, edge, float(values[ax, side]), width, ax, side == 0))
            else:
                k = n if lengths is None else min(int(lengths[ax, side]), n)
                if k == 0:
                    raise ValueError("numpy.pad(): stat_length of 0 yields no value for padding")
                region = _along(x, ax, 0, k) if side == 0 else _along(x, ax, n - k, n)
                stat = _pad_stat(ns, region, ax, mode)
                parts.append(ns.broadcast_to(stat, tuple(shape)))
        x = ns.concat([parts[0], x, parts[1]], axis=ax)
    return x


# interpolation, finite differences, convolution, polynomials


@_implements("interp")
def _interp(
    ns: Any, x: Any, xp: Any, fp: Any, left: Any = None, right: Any = None, period: Any = None
) -> Any:
    """NumPy's piecewise-linear interpolation (in float64, as NumPy computes it): the gradient
    flows to ``x`` (the slope), ``fp`` and ``xp`` through ``fp[j] + slope (x - xp[j])``. At a
    knot (not differentiable in x) the slope to its right, at the last knot the last
    interval's, as JAX's; 0 outside ``[xp[0], xp[-1]]`` (the constant ``left``/``right``)."""
    if period is not None:
        raise _unsupported("interp", "period=")
    f64 = ns.float64
    xs = ns.astype(_array(ns, x), f64)
    xq = ns.astype(_array(ns, xp), f64)
    fq = _array(ns, fp)
    if ns.isdtype(fq.dtype, "complex floating"):
        raise _unsupported("interp", "complex fp")
    fq = ns.astype(fq, f64)
    if xq.ndim != 1 or fq.ndim != 1:
        raise ValueError("numpy.interp(): xp and fp must be 1-D sequences")
    m = xq.shape[0]
    if fq.shape[0] != m:
        raise ValueError("numpy.interp(): fp and xp are not of the same length.")
    if m == 0:
        raise ValueError("numpy.interp(): array of sample points is empty")
    shape = tuple(xs.shape)
    xv = ns.reshape(xs, (-1,))
    lval = fq[0] if left is None else _operand(ns, left)
    rval = fq[m - 1] if right is None else _operand(ns, right)
    if m == 1:
        r = ns.broadcast_to(fq[0], tuple(xv.shape))
        last = fq[0] * ns.ones_like(xv)
    else:
        j = ns.searchsorted(_detach(xq), _detach(xv), side="right") - 1
        j = ns.clip(j, 0, m - 2)
        x0, x1 = ns.take(xq, j), ns.take(xq, j + 1)
        f0, f1 = ns.take(fq, j), ns.take(fq, j + 1)
        slope = (f1 - f0) / (x1 - x0)
        r = slope * (xv - x0) + f0
        # At a knot, where interp is not differentiable in x: the slope of the interval to
        # its right (at the last knot, the last interval's), as JAX's; the value exactly fp's
        # there (the product with x - xp is 0), and a duplicated knot's slope 0.
        knot = ns.where(x1 == x0, 0.0, slope)
        r = ns.where(xv == x0, f0 + knot * (xv - x0), r)
        last = fq[m - 1] + knot * (xv - xq[m - 1])
    r = ns.where(xv == xq[m - 1], last, r)
    r = ns.where(xv < xq[0], lval * ns.ones_like(xv), r)
    r = ns.where(xv > xq[m - 1], rval * ns.ones_like(xv), r)
    return ns.reshape(r, shape)


def _detach(a: Any) -> Any:
    """``a`` without its tape (an index computation: its value only)."""
    return a.detach() if isinstance(a, Array) and a._node is not None else a


@_implements("gradient")
def _gradient(ns: Any, f: Any, *varargs: Any, axis: Any = None, edge_order: int = 1) -> Any:
    """NumPy's second-order central differences inside, first- or second-order one-sided at
    the edges, with scalar spacings (one for all axes or one per axis)."""
    x = _array(ns, f)
    nd = x.ndim
    if axis is None:
        axes = tuple(range(nd))
    else:
        given = (axis,) if isinstance(axis, int | np.integer) else tuple(axis)
        axes = tuple(int(a) % nd for a in given)
    if len(varargs) == 0:
        dx: list[Any] = [1.0] * len(axes)
    elif len(varargs) == 1 and np.ndim(_raw(varargs[0])) == 0:
        dx = list(varargs) * len(axes)
    elif len(varargs) == len(axes):
        dx = list(varargs)
    else:
        raise TypeError("numpy.gradient(): invalid number of arguments")
    for d in dx:
        if np.ndim(_raw(d)) != 0:
            raise _unsupported("gradient", "coordinate arrays as spacing (scalar spacings are)")
    if edge_order > 2:
        raise ValueError("numpy.gradient(): 'edge_order' greater than 2 not supported")
    if not ns.isdtype(x.dtype, ("real floating", "complex floating")):
        x = ns.astype(x, ns.float64)
    outs = []
    for ax, h in zip(axes, dx, strict=True):
        h = h if type(h) in _PY_SCALARS else _array(ns, h)
        n = int(x.shape[ax])
        if n < edge_order + 1:
            raise ValueError(
                "numpy.gradient(): shape of array too small to calculate a numerical gradient, "
                "at least (edge_order + 1) elements are required."
            )

        def sl(start: Any, stop: Any = None, ax: int = ax) -> Any:
            key = [slice(None)] * nd
            key[ax] = slice(start, stop) if stop is not None or start is None else start
            return x[tuple(key)]

        def at(i: int, ax: int = ax) -> Any:
            key: list[Any] = [slice(None)] * nd
            key[ax] = slice(i, i + 1) if i != -1 else slice(-1, None)
            return x[tuple(key)]

        inner = (sl(2, n) - sl(0, n - 2)) / (2.0 * h)
        if edge_order == 1:
            first = (at(1) - at(0)) / h
            last = (at(-1) - at(n - 2)) / h
        else:
            first = (-1.5 / h) * at(0) + (2.0 / h) * at(1) + (-0.5 / h) * at(2)
            last = (0.5 / h) * at(n - 3) + (-2.0 / h) * at(n - 2) + (1.5 / h) * at(-1)
        outs.append(ns.concat([first, inner, last], axis=ax))
    return outs[0] if len(outs) == 1 else tuple(outs)


def _windows_index(start: int, count: int, width: int) -> Any:
    """The flat index of ``count`` windows of ``width`` consecutive positions, the first at
    ``start``: ``start + i + j`` for window i, offset j (a host array that an ``asarray`` of the
    namespace holds as it is). Copied from a strided view of one range, not added from two
    broadcast ones: NumPy buffers a broadcast add (measured 135 kB beyond a 127 kB index of
    388 windows of 41, where no projection sees host NumPy; the copy takes 4 kB)."""
    positions = np.arange(start, start + count + width - 1)
    return np.lib.stride_tricks.sliding_window_view(positions, width).reshape(-1)


def _correlate_full(ns: Any, long: Any, short: Any, start: int, length: int) -> Any:
    """``out[i] = sum_j long_padded[start + i + j] short[j]``, the rows ``start`` to
    ``start + length`` of the full correlation (``long`` padded with ``len(short) - 1`` zeros
    on each side): a gather into windows and one matmul."""
    k = int(short.shape[0])
    zeros = ns.zeros((k - 1,), dtype=long.dtype)
    padded = ns.concat([zeros, long, zeros], axis=0)
    idx = _windows_index(start, length, k)
    windows = ns.reshape(ns.take(padded, ns.asarray(idx)), (length, k))
    return ns.matmul(windows, short)


def _correlate_mode(ns: Any, what: str, a: Any, v: Any, mode: str) -> Any:
    x, y = _array(ns, a), _array(ns, v)
    if x.ndim != 1 or y.ndim != 1:
        raise ValueError(f"numpy.{what}(): object too deep for desired array")
    if x.shape[0] == 0:
        raise ValueError(f"numpy.{what}(): a cannot be empty")
    if y.shape[0] == 0:
        raise ValueError(f"numpy.{what}(): v cannot be empty")
    dt = np.result_type(x.dtype, y.dtype)
    x, y = ns.astype(x, dt), ns.astype(y, dt)
    swapped = x.shape[0] < y.shape[0]
    long, short = (y, x) if swapped else (x, y)
    n1, n = int(long.shape[0]), int(short.shape[0])
    if mode in ("valid", 0):
        start, length = n - 1, n1 - n + 1
    elif mode in ("same", 1):
        start, length = n - 1 - n // 2, n1
    elif mode in ("full", 2):
        start, length = 0, n1 + n - 1
    else:
        raise ValueError(f"numpy.{what}(): mode must be one of 'valid', 'same', or 'full'")
    r = _correlate_full(ns, long, short, start, length)
    return ns.flip(r, axis=0) if swapped else r


@_implements("correlate")
def _correlate(ns: Any, a: Any, v: Any, mode: str = "valid") -> Any:
    for e in (a, v):
        if isinstance(e, Array) and ns.isdtype(e.dtype, "complex floating"):
            raise _unsupported("correlate", "complex input")
    return _correlate_mode(ns, "correlate", a, v, mode)


@_implements("convolve")
def _convolve(ns: Any, a: Any, v: Any, mode: str = "full") -> Any:
    x, y = _array(ns, a), _array(ns, v)
    if x.ndim != 1 or y.ndim != 1:
        raise ValueError("numpy.convolve(): object too deep for desired array")
    if y.shape[0] > x.shape[0]:
        x, y = y, x
    if y.shape[0] == 0 or x.shape[0] == 0:
        raise ValueError("numpy.convolve(): a and v cannot be empty")
    return _correlate_mode(ns, "convolve", x, ns.flip(y, axis=0), mode)


@_implements("polyval")
def _polyval(ns: Any, p: Any, x: Any) -> Any:
    """Horner's rule, as NumPy: ``y = y * x + p[i]`` from ``zeros_like(x)``."""
    coeffs = _array(ns, p)
    xv = _array(ns, x)
    y = ns.zeros_like(xv)
    for i in range(int(coeffs.shape[0])):
        y = y * xv + coeffs[i]
    return y


@_implements("sinc")
def _sinc(ns: Any, x: Any) -> Any:
    """``sin(pi x) / (pi x)`` and 1 at 0, as NumPy; the division never sees 0, so the gradient
    at 0 is the limit, 0."""
    v = _float_of(ns, _array(ns, x))
    zero = v == 0
    y = math.pi * ns.where(zero, 1.0, v)
    return ns.where(zero, 1.0, ns.sin(y) / y)


@_implements("trapezoid")
def _trapezoid(ns: Any, y: Any, x: Any = None, dx: Any = 1.0, axis: int = -1) -> Any:
    """NumPy's trapezoidal rule: ``sum(d * (y[1:] + y[:-1]) / 2)`` along ``axis``, ``d`` the
    spacing (``dx``, or the differences of ``x``: 1-D along ``axis``, or of ``y``'s shape)."""
    v = _float_of(ns, _array(ns, y))
    axis = axis + v.ndim if axis < 0 else axis
    if x is None:
        d = dx if type(dx) in _PY_SCALARS else _array(ns, dx)
    else:
        xs = _array(ns, x)
        if xs.ndim == 1:
            d = ns.reshape(ns.diff(xs), tuple(-1 if i == axis else 1 for i in range(v.ndim)))
        else:
            d = ns.diff(xs, axis=axis)
    n = v.ndim
    upper = tuple(slice(1, None) if i == axis else slice(None) for i in range(n))
    lower = tuple(slice(None, -1) if i == axis else slice(None) for i in range(n))
    return ns.sum(d * (v[upper] + v[lower]) / 2.0, axis=axis)


@_implements("lib.stride_tricks.sliding_window_view")
def _sliding_window_view(
    ns: Any,
    x: Any,
    window_shape: Any,
    axis: Any = None,
    *,
    subok: bool = False,
    writeable: bool = False,
) -> Any:
    """NumPy's windows (a view there, a gather here: the gradient of overlapping windows adds
    up); the window axes are appended in the order of ``axis``."""
    if writeable:
        raise _unsupported(
            "lib.stride_tricks.sliding_window_view", "writeable=True (the windows are a copy)"
        )
    out = _array(ns, x)
    nd = out.ndim
    shape = (int(window_shape),) if np.ndim(window_shape) == 0 else tuple(window_shape)
    if axis is None:
        if len(shape) != nd:
            raise ValueError(
                f"numpy.lib.stride_tricks.sliding_window_view(): since axis is None, "
                f"window_shape must have the same length as x.ndim ({nd})"
            )
        axes: tuple[int, ...] = tuple(range(nd))
    else:
        axes = (int(axis),) if np.ndim(axis) == 0 else tuple(int(a) for a in axis)
        if len(axes) != len(shape):
            raise ValueError(
                "numpy.lib.stride_tricks.sliding_window_view(): must provide matching length "
                "window_shape and axis"
            )
    # projected with nothing differentiated, NumPy makes the windows itself (a strided view,
    # see array_function): a view of the same shape stands for it (a slice of ``x``, broadcast
    # along each window axis), which owns no bytes and which a reduction buffers, as NumPy's
    view = out._backend.abstract and not out._backend.level and out._node is None
    view = view and STACK.closed is None and STACK.recorder is None
    for ax, w in zip(axes, shape, strict=True):
        ax %= nd
        n = int(out.shape[ax])
        if w < 0 or w > n:
            raise ValueError(
                "numpy.lib.stride_tricks.sliding_window_view(): window shape cannot be larger "
                "than input array shape"
            )
        if view:
            part = out[tuple(slice(0, n - w + 1) if i == ax else slice(None) for i in range(nd))]
            out = ns.broadcast_to(part[..., None], (*part.shape, w))
            continue
        t = ns.take(out, ns.asarray(_windows_index(0, n - w + 1, w)), axis=ax)
        t = ns.reshape(t, (*out.shape[:ax], n - w + 1, w, *out.shape[ax + 1 :]))
        out = ns.moveaxis(t, ax + 1, -1)
    return out
