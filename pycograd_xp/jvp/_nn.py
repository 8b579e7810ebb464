"""JVP rules of convolution and pooling: a convolution is bilinear (the tangent is the
convolution with one factor replaced by its tangent, summed), average pooling is linear, and
max pooling passes the tangent of each window's first maximum (the element its VJP picks)."""

from __future__ import annotations

from ..namespace._nn import pad, window_slices
from ..namespace._ops import defjvp
from ._helpers import call, linear, plus


def _conv(name):
    def rule(ns, t, out, x, w, /, **kwargs):
        return plus(None if t[0] is None else call(ns, name, t[0], w, **kwargs),
                    None if t[1] is None else call(ns, name, x, t[1], **kwargs))  # fmt: skip

    return rule


def _max_pool(ns, t, out, x, /, *, kernel, stride, padding):
    n = len(kernel)
    size = tuple(out.shape[out.ndim - n:])
    xs = window_slices(pad(ns, x, padding, ns.finfo(x.dtype).min), kernel, stride, (1,) * n, size)
    ts = window_slices(pad(ns, t[0], padding), kernel, stride, (1,) * n, size)
    chosen = ts[-1]
    for xk, tk in zip(reversed(xs[:-1]), reversed(ts[:-1]), strict=True):  # the first wins
        chosen = ns.where(xk == out, tk, chosen)
    return chosen


defjvp("_conv1d", _conv("_conv1d"))
defjvp("_conv2d", _conv("_conv2d"))
defjvp("_max_pool2d", _max_pool)
linear("_avg_pool2d")
