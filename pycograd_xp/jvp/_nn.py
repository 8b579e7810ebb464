"""JVP rules of convolution and pooling: a convolution is bilinear in input and weight, plus
its bias (the tangent is the convolution with one factor replaced by its tangent, summed, the
bias's tangent added inside one of them), average pooling is linear, and
max pooling passes the tangent of each window's first maximum (the element its VJP picks), relu
the tangent where its output is positive."""

from __future__ import annotations

from .._primitive import defjvp
from ..namespace._nn import pad, window_slices
from ..ops._rules.jvp import call, linear_rows, plus
from ..ops.searching import select


def _conv(name):
    def rule(ns, t, out, x, w, b=None, /, **kwargs):
        tb = t[2] if len(t) > 2 else None  # the bias enters affinely: fused into one term
        tx = None if t[0] is None else call(ns, name, t[0], w, *(() if tb is None else (tb,)),
                                            **kwargs)  # fmt: skip
        tw = None if t[1] is None else call(ns, name, x, t[1], *(
            () if tb is None or tx is not None else (tb,)), **kwargs)  # fmt: skip
        if tx is None and tw is None:  # the bias's tangent alone, over the channel axis
            return ns.reshape(tb, (1, -1) + (1,) * (out.ndim - 2))
        return plus(tx, tw)

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


def _relu(ns, t, out, x, /):
    return select(ns, out > 0, t[0], 0)


defjvp("_conv1d", _conv("_conv1d"))
defjvp("_conv2d", _conv("_conv2d"))
defjvp("_max_pool2d", _max_pool)
linear_rows("_avg_pool2d")
defjvp("_relu", _relu)
