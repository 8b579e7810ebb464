"""The tanh MLP with softmax cross-entropy that the step benchmarks train, written once: as array
code for any namespace-like module, and as hand-written NumPy backprop (the baseline)."""

from __future__ import annotations

import numpy as np


def init(sizes, batch, dtype, seed=0):
    """Parameters [W1, b1, W2, b2, ...] for layer widths ``sizes``, a batch and one-hot labels."""
    rng = np.random.default_rng(seed)
    params = []
    for i, o in zip(sizes[:-1], sizes[1:], strict=True):
        params += [(rng.standard_normal((i, o)) / np.sqrt(i)).astype(dtype), np.zeros(o, dtype)]
    x = rng.standard_normal((batch, sizes[0])).astype(dtype)
    y = np.eye(sizes[-1], dtype=dtype)[rng.integers(0, sizes[-1], batch)]
    return params, x, y


def loss_fn(m, params, x, y):
    """Mean cross-entropy; ``m`` is any module with tanh/max/exp/log/sum."""
    h = x
    for i in range(0, len(params) - 2, 2):
        h = m.tanh(h @ params[i] + params[i + 1])
    logits = h @ params[-2] + params[-1]
    z = logits - m.max(logits, axis=1, keepdims=True)
    logp = z - m.log(m.sum(m.exp(z), axis=1, keepdims=True))
    return -m.sum(y * logp) / x.shape[0]


def torch_module():
    """PyTorch's functions under the names ``loss_fn`` uses (imports torch)."""
    import torch

    class T:
        tanh, exp, log = torch.tanh, torch.exp, torch.log

        @staticmethod
        def max(a, axis, keepdims):
            return torch.amax(a, dim=axis, keepdim=keepdims)

        @staticmethod
        def sum(a, axis=None, keepdims=False):
            return torch.sum(a) if axis is None else torch.sum(a, dim=axis, keepdim=keepdims)

    return T


def numpy_step(params, x, y, lr):
    """One SGD step by hand: forward keeping the activations, backward freeing them as it goes,
    each parameter updated in place as soon as its gradient exists."""
    hs, h = [x], x
    for i in range(0, len(params) - 2, 2):
        h = np.tanh(h @ params[i] + params[i + 1])
        hs.append(h)
    logits = h @ params[-2] + params[-1]
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    g = (p - y) / x.shape[0]
    del p, logits, h
    for i in range(len(params) - 2, -1, -2):
        h = hs.pop()
        gw, gb = h.T @ g, g.sum(axis=0)
        if i:
            g = g @ params[i].T
            g *= 1 - h * h
        del h
        params[i] -= lr * gw
        params[i + 1] -= lr * gb
        del gw, gb


def numpy_tape_floor_step(params, x, y, lr):
    """The operations reverse mode does for :func:`loss_fn`, written out in NumPy with no tape:
    every forward op of ``loss_fn`` (its log-softmax and its sum over ``y * logp``, where
    :func:`numpy_step` fuses the softmax's gradient into ``p - y``), each rule's cotangents as
    the rows compute them (the max's ties shared, the reductions' cotangents broadcast views),
    and the update after the whole backward pass, as an autodiff library's caller writes it. The
    floor an eager tape could reach on this model: what is left above it is the tape's own
    work."""
    hs, h = [x], x
    for i in range(0, len(params) - 2, 2):
        h = np.tanh(h @ params[i] + params[i + 1])
        hs.append(h)
    logits = h @ params[-2] + params[-1]
    m = logits.max(axis=1, keepdims=True)
    z = logits - m
    e = np.exp(z)
    s = e.sum(axis=1, keepdims=True)
    logp = z - np.log(s)
    _ = -(y * logp).sum() / x.shape[0]  # the loss, as loss_fn returns it
    g_logp = np.broadcast_to(np.asarray(-1.0 / x.shape[0], logp.dtype), logp.shape) * y
    g_s = -g_logp.sum(axis=1, keepdims=True) / s
    g_z = g_logp + np.broadcast_to(g_s, e.shape) * e
    hit = (logits == m).astype(logits.dtype)
    g = g_z + hit * (-g_z.sum(axis=1, keepdims=True) / hit.sum(axis=1, keepdims=True))
    del m, z, e, s, logp, g_logp, g_s, g_z, hit, logits
    grads = [None] * len(params)
    for i in range(len(params) - 2, -1, -2):
        h = hs.pop()
        grads[i], grads[i + 1] = h.T @ g, g.sum(axis=0)
        if i:
            g = g @ params[i].T
            t = h * h
            t *= g
            g -= t  # tanh's rule: g - out^2 g, into g (only the pass holds it)
        del h
    for p, gp in zip(params, grads, strict=True):
        p -= lr * gp


def numpy_contenders(params, x, y, lr):
    """One-step closures for the contenders that compute with NumPy: hand-written backprop,
    reverse mode's own operations without a tape (:func:`numpy_tape_floor_step`), pycograd_xp
    over NumPy and (if installed) HIPS autograd, each on its own copy of params."""
    import pycograd_xp as pg

    out = {}
    p_np = [p.copy() for p in params]
    out["numpy by hand"] = lambda: numpy_step(p_np, x, y, lr)
    p_floor = [p.copy() for p in params]
    out["numpy, reverse mode's ops"] = lambda: numpy_tape_floor_step(p_floor, x, y, lr)

    xp = pg.namespace(np)
    p_pg = [xp.asarray(p.copy()) for p in params]
    xa, ya = xp.asarray(x), xp.asarray(y)
    vg = pg.value_and_grad(lambda p: loss_fn(xp, p, xa, ya))

    def pg_step():
        _, grads = vg(p_pg)
        with pg.no_grad():
            for p, g in zip(p_pg, grads, strict=True):
                p -= lr * g

    out["pycograd_xp (numpy)"] = pg_step

    def sgd_step(p, x, y):  # the same step as one function, for pycograd_xp.compile
        _, grads = pg.value_and_grad(lambda q: loss_fn(xp, q, x, y))(p)
        with pg.no_grad():
            for q, g in zip(p, grads, strict=True):
                q -= lr * g  # in place, as by hand

    p_c = [xp.asarray(p.copy()) for p in params]
    compiled = pg.compile(sgd_step)
    out["pycograd_xp compiled"] = lambda: compiled(p_c, xa, ya)
    try:
        import autograd
        import autograd.numpy as anp
    except ImportError:
        print("  (autograd not installed: pip install -e '.[bench]')")
        return out
    p_ag = [p.copy() for p in params]
    g_ag = autograd.grad(lambda p: loss_fn(anp, p, x, y))

    def ag_step():
        for p, g in zip(p_ag, g_ag(p_ag), strict=True):
            p -= lr * g

    out["HIPS autograd"] = ag_step
    return out
