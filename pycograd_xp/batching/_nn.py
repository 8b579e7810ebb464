"""Convolution and pooling batch as one call, never one per example: a batched input folds its
batch axis into N; a batched weight folds it into the groups (each example's kernels see only
its own channels), so per-example weights cost one grouped convolution. A shared bias goes
into the call; a per-example one (or one beside per-example weights) is added after it.
Pooling works on the trailing axes, so a batched input is just one more leading axis; relu is
elementwise."""

from __future__ import annotations

from .._primitive import defbatch


def _conv(name):
    def rule(ns, dims, x, w, bias=None, /, *, stride, padding, dilation, groups):
        f = getattr(ns, name)
        kw = dict(stride=stride, padding=padding, dilation=dilation)
        bx, bw = dims[0], dims[1]
        bb = len(dims) > 2 and bool(dims[2])
        if bias is not None and (bb or bw):  # a per-example bias: added after, per example
            y = rule(ns, (bx, bw), x, w, stride=stride, padding=padding, dilation=dilation,
                     groups=groups) if bx or bw else f(x, w, groups=groups, **kw)[None, ...]
            k = y.ndim - 3  # spatial axes of (B, N, O, *S)
            return y + ns.reshape(bias, (bias.shape[0] if bb else 1, 1, -1) + (1,) * k)
        fused = () if bias is None else (bias,)  # one bias for every example: inside the row
        if not bw:  # (B, N, C, *S) as (B*N, C, *S)
            b, n = x.shape[0], x.shape[1]
            y = f(ns.reshape(x, (b * n, *x.shape[2:])), w, *fused, groups=groups, **kw)
            return ns.reshape(y, (b, n, *y.shape[1:]))
        k = w.ndim - 3  # spatial axes
        b, o, cg, kernel = w.shape[0], w.shape[1], w.shape[2], tuple(w.shape[3:])
        og = o // groups
        # kernels ordered (group, example, out channel): one group per (group, example)
        wg = ns.permute_dims(ns.reshape(w, (b, groups, og, cg, *kernel)),
                             (1, 0, 2, 3, *range(4, 4 + k)))  # fmt: skip
        wg = ns.reshape(wg, (groups * b * og, cg, *kernel))
        if bx:  # input channels ordered (group, example, channel) likewise
            n, spatial = x.shape[1], tuple(x.shape[3:])
            xg = ns.permute_dims(ns.reshape(x, (b, n, groups, cg, *spatial)),
                                 (1, 2, 0, 3, *range(4, 4 + k)))  # fmt: skip
            y = f(ns.reshape(xg, (n, groups * b * cg, *spatial)), wg, groups=groups * b, **kw)
        else:  # every example's kernels read the same channels of the shared input
            n = x.shape[0]
            y = f(x, wg, groups=groups, **kw)
        out = tuple(y.shape[2:])
        y = ns.permute_dims(ns.reshape(y, (n, groups, b, og, *out)), (2, 0, 1, 3, *range(4, 4 + k)))
        return ns.reshape(y, (b, n, o, *out))

    return rule


def _pool(name):
    def rule(ns, dims, x, /, **kwargs):
        return getattr(ns, name)(x, **kwargs)

    return rule


defbatch("_conv1d", _conv("_conv1d"))
defbatch("_conv2d", _conv("_conv2d"))
defbatch("_max_pool2d", _pool("_max_pool2d"))
defbatch("_avg_pool2d", _pool("_avg_pool2d"))
defbatch("_relu", lambda ns, dims, x, /: ns._relu(x))
