"""Random array programs for the memory projection's soundness test.

``program(seed)`` draws a small differentiable program: arguments of mixed dtypes (float32
beside float64, an integer array, complex values inside) and layouts (C-ordered, transposed,
strided slices of larger arrays), and a chain of 3 to 8 steps, each one of the menu below, over
the standard's differentiable functions (elementwise, broadcasting, reductions, matmul and
tensordot with transposed operands, sorting, cumulative sums, indexing and setitem, concat and
stack, casts, linear solves, decompositions and FFTs). Every value keeps the program's working
shape ``(n, m)`` between steps, so any step can follow any other; inside a step, operands are
transposed, strided, cast or broadcast.

The values are irrelevant to memory (NaNs are fine: nothing branches on them); shapes, dtypes
and layouts are what the test exercises. Each program's loss is the sum of the real part of its
last value, and its gradient is taken with respect to every floating-point argument.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

FLOATS = ("float32", "float64")


@dataclass
class Program:
    seed: int
    label: str  # the steps, for a failure's message
    loss: Callable[..., Any]
    args: tuple[Any, ...]
    argnums: tuple[int, ...]


def _layout(rng: np.random.Generator, a: np.ndarray) -> tuple[np.ndarray, str]:
    """``a``'s values in a random layout: C order, a transposed copy seen through ``.T``, or a
    strided slice of a larger array."""
    kind = rng.choice(["c", "c", "t", "s"]) if a.ndim == 2 else rng.choice(["c", "s"])
    if kind == "t":
        return np.ascontiguousarray(a.T).T, "T"
    if kind == "s":
        big = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
        big[..., ::2] = a
        return big[..., ::2], "strided"
    return a, ""


def program(seed: int, xp: Any, only: list[int] | None = None) -> Program:
    """A random program on the namespace ``xp`` (NumPy-backed), drawn by ``seed``; ``only``
    keeps the steps at those positions (to narrow a failure down)."""
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(100, 500)), 2 * int(rng.integers(16, 80))
    dx, dw, db = (str(rng.choice(FLOATS)) for _ in range(3))
    X, tx = _layout(rng, rng.standard_normal((n, m)).astype(dx))
    W, tw = _layout(rng, (rng.standard_normal((m, m)) / m).astype(dw))
    b, tb = _layout(rng, rng.standard_normal(m).astype(db))
    K = rng.integers(0, 5, (n, m)).astype(str(rng.choice(["int32", "int64", "uint8"])))
    idx = rng.integers(0, n, int(rng.integers(2, n)))
    steps = [int(s) for s in rng.integers(0, len(STEPS), int(rng.integers(3, 9)))]
    consts = [float(c) for c in rng.uniform(0.1, 2.0, len(steps))]
    if only is not None:
        steps, consts = [steps[i] for i in only], [consts[i] for i in only]
    label = (
        f"seed={seed} n={n} m={m} X:{dx}{tx} W:{dw}{tw} b:{db}{tb} K:{K.dtype} steps="
        + ",".join(STEPS[s].__name__ for s in steps)
    )

    def loss(X, W, b, K):
        env = {"X": X, "W": W, "b": b, "K": K, "idx": xp.asarray(idx), "xp": xp}
        v = X
        for s, c in zip(steps, consts, strict=True):
            v = STEPS[s](xp, v, env, c)
        if xp.isdtype(v.dtype, "complex floating"):
            v = xp.real(v)
        return xp.sum(v)

    args = tuple(xp.asarray(a) for a in (X, W, b, K))
    return Program(seed, label, loss, args, (0, 1, 2))


# -- the menu: each step maps a value of shape (n, m) to a value of shape (n, m) ----------------


def unary(xp, v, env, c):
    f = [
        xp.exp,
        xp.tanh,
        xp.sin,
        xp.cos,
        xp.square,
        xp.abs,
        xp.negative,
        xp.expm1,
        xp.sinh,
        lambda x: xp.log1p(xp.abs(x)),
        lambda x: xp.sqrt(xp.abs(x) + 1.0),
        lambda x: 1.0 / (1.0 + xp.exp(-x)),
    ][int(c * 1000) % 12]
    return f(v)


def binary_params(xp, v, env, c):
    """With the bias row (broadcast) and the data (another dtype, maybe another layout)."""
    b, X = env["b"], env["X"]
    k = int(c * 1000) % 6
    if k == 0:
        return v * b + X
    if k == 1:
        return xp.maximum(v, X) - b
    if k == 2:
        return xp.atan2(v, X + 3.0)
    if k == 3:
        return xp.hypot(v, b)
    if k == 4:
        return xp.logaddexp(v, X) / (b * b + 1.0)
    return xp.pow(xp.abs(v) + 1.0, b)


def scalars(xp, v, env, c):
    """Python scalars and 0-d arrays of the other float dtype."""
    other = "float32" if v.dtype == xp.float64 else "float64"
    return (v * c + 1.5) / xp.asarray(c + 1.0, dtype=getattr(xp, other))


def with_integers(xp, v, env, c):
    """An integer array promoted into the float computation."""
    return v * env["K"] + xp.astype(env["K"][:, :1], v.dtype)


def cast(xp, v, env, c):
    other = xp.float32 if v.dtype == xp.float64 else xp.float64
    return xp.astype(xp.sin(v), other) * env["X"]


def through_complex(xp, v, env, c):
    z = xp.astype(v, xp.complex64 if v.dtype == xp.float32 else xp.complex128)
    z = z * (1.0 + 0.5j) + env["X"]
    return xp.abs(xp.exp(z * 0.1)) + xp.real(z * xp.conj(z))


def matmul(xp, v, env, c):
    return v @ env["W"] + env["b"]


def matmul_transposed(xp, v, env, c):
    """Products whose operands are transposed views, of mixed dtypes."""
    g = env["X"].T @ v  # (m, m)
    return v @ (g * 1e-3) - xp.tanh(env["W"].T @ v.T).T


def tensordot(xp, v, env, c):
    return xp.tensordot(v, env["W"], axes=1) + xp.tensordot(env["X"], env["W"].T, axes=((1,), (0,)))


def vecdot(xp, v, env, c):
    return v * xp.vecdot(v, env["X"], axis=-1)[:, None]


def reduce_keep(xp, v, env, c):
    k = int(c * 1000) % 7
    axis = int(c * 100) % 2
    if k == 0:
        r = xp.sum(v, axis=axis, keepdims=True)
    elif k == 1:
        r = xp.mean(v, axis=axis, keepdims=True)
    elif k == 2:
        r = xp.std(v, axis=axis, keepdims=True, correction=1)
    elif k == 3:
        r = xp.var(v, axis=axis, keepdims=True)
    elif k == 4:
        r = xp.max(v, axis=axis, keepdims=True)
    elif k == 5:
        r = xp.linalg.vector_norm(v, axis=axis, keepdims=True)
    else:
        r = xp.prod(xp.tanh(v) * 0.5 + 1.0, axis=axis, keepdims=True)
    return v - r * env["X"]


def softmax(xp, v, env, c):
    e = xp.exp(v - xp.max(v, axis=-1, keepdims=True))
    return e / xp.sum(e, axis=-1, keepdims=True)


def sort(xp, v, env, c):
    axis = int(c * 100) % 2
    return xp.sort(v, axis=axis, descending=bool(int(c * 10) % 2)) * env["X"]


def take_sorted(xp, v, env, c):
    order = xp.argsort(env["X"], axis=-1)
    return xp.take_along_axis(v, order, axis=-1) + v


def cumulative(xp, v, env, c):
    if int(c * 100) % 2:
        return xp.cumulative_sum(v, axis=1) * 0.01
    return xp.cumulative_prod(xp.tanh(v) * 0.1 + 1.0, axis=0)


def strided(xp, v, env, c):
    """Strided slices (non-contiguous operands) put back together."""
    even, odd = v[:, ::2], v[:, 1::2]
    return xp.concat([xp.sin(odd) * even, even - odd], axis=1)


def transposed_chain(xp, v, env, c):
    """Elementwise work on transposed views, the result transposed back."""
    t = xp.tanh(v.T) * env["X"].T
    return xp.flip(t, axis=0).T


def stack_reduce(xp, v, env, c):
    s = xp.stack([v, env["X"] * c, xp.cos(v)], axis=0)
    return xp.sum(s * s, axis=0)


def gather(xp, v, env, c):
    rows = xp.take(v, env["idx"], axis=0)  # (k, m)
    return v + xp.sum(rows, axis=0)


def setitem(xp, v, env, c):
    y = v * 1.0
    y[::3] = xp.sin(v[::3])
    y[env["idx"][:2]] = env["X"][:2] * c
    return y


def where_clip(xp, v, env, c):
    return xp.where(v > env["X"], xp.clip(v, -c, c), v * env["X"])


def roll_reshape(xp, v, env, c):
    n, m = v.shape
    return xp.reshape(xp.roll(xp.reshape(v, (n * m,)), 7), (n, m)) + xp.reshape(
        xp.permute_dims(xp.reshape(v, (n, m // 2, 2)), (0, 2, 1)), (n, m)
    )


def inplace(xp, v, env, c):
    y = v + 0.0
    y += env["X"]
    y *= xp.astype(env["b"], y.dtype)
    return y


def linalg_solve(xp, v, env, c):
    """A linear solve with a matrix of the weights' dtype, right-hand sides transposed."""
    W = env["W"]
    A = W @ W.T + W.shape[0] * xp.eye(W.shape[0], dtype=W.dtype)
    return xp.linalg.solve(A, v.T).T


def linalg_spectral(xp, v, env, c):
    """Decompositions of the weights (LAPACK workspaces, single-precision widening)."""
    W = env["W"]
    k = int(c * 1000) % 4
    if k == 0:
        return v @ xp.linalg.eigh(W + W.T)[1]
    if k == 1:
        return v * xp.linalg.svdvals(W)
    if k == 2:
        return v @ xp.linalg.qr(W)[0]
    return v @ xp.linalg.inv(W + W.shape[0] * xp.eye(W.shape[0], dtype=W.dtype))


def fft(xp, v, env, c):
    axis = int(c * 100) % 2
    z = xp.astype(v, xp.complex64 if v.dtype == xp.float32 else xp.complex128)
    z = xp.fft.fft(z, axis=axis) * (0.5 + 0.1j)
    return xp.real(xp.fft.ifft(z, axis=axis)) + xp.fft.irfft(xp.fft.rfft(v), n=v.shape[1])


STEPS = [
    unary,
    binary_params,
    scalars,
    with_integers,
    cast,
    through_complex,
    matmul,
    matmul_transposed,
    tensordot,
    vecdot,
    reduce_keep,
    softmax,
    sort,
    take_sorted,
    cumulative,
    strided,
    transposed_chain,
    stack_reduce,
    gather,
    setitem,
    where_clip,
    roll_reshape,
    inplace,
    linalg_solve,
    linalg_spectral,
    fft,
]
