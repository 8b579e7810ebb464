"""A differential generator: random programs of 3 to 8 differentiable standard functions, run on
namespace(cubed) with random chunkings (and dtypes) and on namespace(numpy); the values and the
VJP of a random cotangent must agree (:func:`conformance.cubed_oracle.compare`).

Each program starts from one to three inputs (float64 or float32, 1 to 3 axes of 1 to 5) and
applies ops to the arrays made so far: elementwise functions on their smooth domain, binaries
with broadcasting, reductions along an axis, manipulations (permute, flip, reshape, stack,
concat, roll, negative-step and integer-array indexing, take and take_along_axis along axes
counted from either end, broadcast_to), scans, matmul, tensordot along negative axes and
where. Every input gets its own chunking: chunks of 1, chunks that do not divide the axis,
one chunk, or random ones. A fixed seed; ``PROGRAMS`` in the default run, ``SLOW_PROGRAMS`` with
``-m slow``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from conformance.cubed_oracle import compare

cubed = pytest.importorskip("cubed")

PROGRAMS = 10
SLOW_PROGRAMS = 1200
SEED = 39

Step = Callable[[Any, list], Any]  # (xp, arrays so far) -> a new array


@dataclass
class Program:
    args: list[np.ndarray]
    chunks: list[tuple[int, ...]]
    steps: list[tuple[str, Step]] = field(default_factory=list)

    def f(self, xp: Any) -> Callable[..., Any]:
        def run(*xs: Any) -> Any:
            pool = list(xs)
            for _, step in self.steps:
                pool.append(step(xp, pool))
            return pool[-1]

        return run

    def __str__(self) -> str:
        ins = ", ".join(
            f"{a.dtype}{a.shape} chunks {c}" for a, c in zip(self.args, self.chunks, strict=True)
        )
        return f"inputs {ins}: " + "; ".join(name for name, _ in self.steps)


UNARY = {
    "sin": lambda xp, x: xp.sin(x),
    "tanh": lambda xp, x: xp.tanh(x),
    "exp(tanh)": lambda xp, x: xp.exp(xp.tanh(x)),
    "square": lambda xp, x: xp.square(x),
    "sqrt(1+x^2)": lambda xp, x: xp.sqrt(1.0 + x * x),
    "log1p(x^2)": lambda xp, x: xp.log1p(x * x),
    "negative": lambda xp, x: -x,
}
BINARY = {
    "add": lambda xp, a, b: a + b,
    "subtract": lambda xp, a, b: a - b,
    "multiply": lambda xp, a, b: a * b,
    "divide": lambda xp, a, b: a / (1.5 + b * b),
    "maximum": lambda xp, a, b: xp.maximum(a, b),
    "where": lambda xp, a, b: xp.where(a > b, a * 2.0, b),
    "atan2": lambda xp, a, b: xp.atan2(a, 1.5 + b * b),
}
REDUCE = {
    "sum": lambda xp, x, ax: xp.sum(x, axis=ax),
    "mean": lambda xp, x, ax: xp.mean(x, axis=ax, keepdims=True),
    "max": lambda xp, x, ax: xp.max(x, axis=ax),
    "prod": lambda xp, x, ax: xp.prod(x, axis=ax),
    "var": lambda xp, x, ax: xp.var(x, axis=ax),
    "logsumexp": lambda xp, x, ax: xp.log(xp.sum(xp.exp(x), axis=ax)),
    "vector_norm": lambda xp, x, ax: xp.linalg.vector_norm(1.0 + x * x, axis=ax),
    "cumulative_sum": lambda xp, x, ax: xp.cumulative_sum(x, axis=ax),
    "cumulative_sum include_initial": lambda xp, x, ax: xp.cumulative_sum(
        x, axis=ax, include_initial=True
    ),
}


def _chunking(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[int, ...]:
    kind = rng.integers(4)
    if kind == 0:
        return tuple(1 for _ in shape)
    if kind == 1:
        return tuple(n // 2 + 1 if n > 2 else 1 for n in shape)
    if kind == 2:
        return tuple(max(n, 1) for n in shape)
    return tuple(int(rng.integers(1, n + 1)) for n in shape)


def _shape(rng: np.random.Generator) -> tuple[int, ...]:
    return tuple(int(n) for n in rng.integers(1, 6, size=rng.integers(1, 4)))


def _broadcastable(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts against ``shape``: a suffix, some axes of 1."""
    s = list(shape[int(rng.integers(len(shape) + 1)) :] if shape else [])
    return tuple(1 if rng.random() < 0.3 else n for n in s)


def generate(rng: np.random.Generator) -> Program:
    dtype = np.float64 if rng.random() < 0.7 else np.float32
    first = _shape(rng)
    shapes = [first] + [
        _broadcastable(rng, first) if rng.random() < 0.5 else first
        for _ in range(int(rng.integers(0, 3)))
    ]
    args = [rng.uniform(-1.5, 1.5, s).astype(dtype) for s in shapes]
    prog = Program(args, [_chunking(rng, a.shape) for a in args])
    pool = [a for a in args]  # NumPy values, to know the shapes
    nxp = np
    for _ in range(int(rng.integers(3, 9))):
        name, step = _step(rng, pool)
        with np.errstate(all="ignore"):
            pool.append(np.asarray(step(nxp, pool)))
        prog.steps.append((name, step))
    return prog


def _pick(rng: np.random.Generator, pool: list) -> int:
    # prefer recent arrays: programs chain
    return len(pool) - 1 - int(min(rng.geometric(0.5) - 1, len(pool) - 1))


def _step(rng: np.random.Generator, pool: list) -> tuple[str, Step]:  # a table
    i = _pick(rng, pool)
    x = pool[i]
    nd = x.ndim
    kinds = ["unary", "binary", "binary"] + (["reduce", "manip", "manip", "index"] if nd else [])
    if nd >= 2 or (nd == 1 and x.shape[0] > 1):
        kinds.append("matmul")
    kind = kinds[int(rng.integers(len(kinds)))]
    if kind == "unary":
        name = list(UNARY)[int(rng.integers(len(UNARY)))]
        return f"{name}(#{i})", lambda xp, p, f=UNARY[name]: f(xp, p[i])
    if kind == "binary":
        others = [j for j, a in enumerate(pool) if _broadcasts(a.shape, x.shape)] or [i]
        j = others[int(rng.integers(len(others)))]
        name = list(BINARY)[int(rng.integers(len(BINARY)))]
        return f"{name}(#{i}, #{j})", lambda xp, p, f=BINARY[name]: f(xp, p[i], p[j])
    if kind == "reduce":
        name = list(REDUCE)[int(rng.integers(len(REDUCE)))]
        ax = int(rng.integers(-nd, nd))
        return f"{name}(#{i}, axis={ax})", lambda xp, p, f=REDUCE[name]: f(xp, p[i], ax)
    if kind == "matmul":
        if nd == 1:
            return f"vecdot(#{i}, #{i})", lambda xp, p: xp.vecdot(p[i], xp.sin(p[i]))
        if nd > 3 or rng.random() < 0.5:  # tensordot's result has 2 * nd - 2 axes
            return f"#{i} @ #{i}.mT", lambda xp, p: p[i] @ xp.matrix_transpose(xp.tanh(p[i]))
        tax = -int(rng.integers(1, nd + 1))
        return f"tensordot(#{i}, tanh(#{i}), axes=([{tax}], [{tax}]))", lambda xp, p: xp.tensordot(
            p[i], xp.tanh(p[i]), axes=([tax], [tax])
        )
    if kind == "index":
        ax = int(rng.integers(nd))
        n = x.shape[ax]
        choice = int(rng.integers(6))
        neg = ax - nd if rng.random() < 0.5 else ax  # the same axis, counted from the end
        if choice == 0:
            key = tuple(
                slice(None, None, -int(rng.integers(1, 3))) if a == ax else slice(None)
                for a in range(nd)
            )
            return f"#{i}[{key}]", lambda xp, p: p[i][key]
        if choice == 1:
            idx = [int(k) for k in rng.permutation(n)]
            return f"take(#{i}, {idx}, axis={neg})", lambda xp, p: xp.take(
                p[i], xp.asarray(idx), axis=neg
            )
        if choice == 2:
            idx = [int(k) for k in rng.integers(0, n, size=int(rng.integers(1, 5)))]
            return f"take(#{i}, {idx}, axis={neg})", lambda xp, p: xp.take(
                p[i], xp.asarray(idx), axis=neg
            )
        if choice == 4:
            idx = [int(k) for k in rng.integers(0, n, size=int(rng.integers(1, n + 2)))]
            key = (slice(None),) * ax + (idx,)
            return f"#{i}[{key}]", lambda xp, p: p[i][(slice(None),) * ax + (xp.asarray(idx),)]
        if choice == 5:
            return (
                f"take_along_axis(#{i}, argsort(sin(#{i})), axis={neg})",
                lambda xp, p: xp.take_along_axis(
                    p[i], xp.argsort(xp.sin(p[i]), axis=neg), axis=neg
                ),
            )
        lo = int(rng.integers(n))
        key = (slice(None),) * ax + (slice(lo, None),)
        return f"#{i}[{key}]", lambda xp, p: p[i][key]
    # manipulations (those adding an axis only below 4 axes)
    choice = int(rng.integers(8 if nd < 4 else 3))
    if choice == 0:
        perm = tuple(int(a) for a in rng.permutation(nd))
        return f"permute_dims(#{i}, {perm})", lambda xp, p: xp.permute_dims(p[i], perm)
    if choice == 1:
        ax = int(rng.integers(nd))
        return f"flip(#{i}, axis={ax})", lambda xp, p: xp.flip(p[i], axis=ax)
    if choice == 2:
        shape = _reshape_target(rng, x.shape)
        return f"reshape(#{i}, {shape})", lambda xp, p: xp.reshape(p[i], shape)
    if choice == 3:
        same = [j for j, a in enumerate(pool) if a.shape == x.shape]
        j = same[int(rng.integers(len(same)))]
        ax = int(rng.integers(-nd - 1, nd + 1))
        return f"stack([#{i}, #{j}], axis={ax})", lambda xp, p: xp.stack([p[i], p[j]], axis=ax)
    if choice == 4:
        ax = int(rng.integers(nd))
        like = [
            j
            for j, a in enumerate(pool)
            if a.ndim == nd and all(a.shape[k] == x.shape[k] for k in range(nd) if k != ax)
        ]
        j = like[int(rng.integers(len(like)))]
        return f"concat([#{i}, #{j}, #{i}], axis={ax})", lambda xp, p: xp.concat(
            [p[i], p[j], p[i]], axis=ax
        )
    if choice == 5:
        ax = int(rng.integers(nd))
        shift = int(rng.integers(-3, 4))
        rax = None if rng.random() < 0.3 else ax - nd if rng.random() < 0.5 else ax
        return f"roll(#{i}, {shift}, axis={rax})", lambda xp, p: xp.roll(p[i], shift, axis=rax)
    if choice == 6:
        shape = (int(rng.integers(1, 4)),) + tuple(x.shape)
        return f"broadcast_to(#{i}, {shape})", lambda xp, p: xp.broadcast_to(p[i], shape)
    ax = int(rng.integers(-nd - 1, nd + 1))
    return f"expand_dims(#{i}, axis={ax})", lambda xp, p: xp.expand_dims(p[i], axis=ax)


def _broadcasts(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    try:
        np.broadcast_shapes(a, b)
    except ValueError:
        return False
    return len(np.broadcast_shapes(a, b)) <= 5


def _reshape_target(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[int, ...]:
    size = math.prod(shape)
    divisors = [d for d in range(1, size + 1) if size % d == 0]
    d = divisors[int(rng.integers(len(divisors)))]
    return (-1,) if rng.random() < 0.3 else (d, size // d)


def _tolerance(prog: Program) -> dict[str, float]:
    if any(a.dtype == np.float32 for a in prog.args):
        return {"rtol": 2e-4, "atol": 2e-4}
    return {"rtol": 1e-9, "atol": 1e-11}


@functools.cache
def _programs(count: int) -> list[Program]:
    rng = np.random.default_rng(SEED)
    return [generate(rng) for _ in range(count)]


def check(prog: Program, seed: int = 0) -> None:
    compare(prog.f, prog.args, "random", seed=seed, chunks=prog.chunks, **_tolerance(prog))


@pytest.mark.parametrize("k", range(PROGRAMS))
def test_random_programs_agree_with_numpy(k):
    prog = _programs(PROGRAMS)[k]
    check(prog, seed=k)


@pytest.mark.slow
def test_many_random_programs_agree_with_numpy():
    failures = []
    for k, prog in enumerate(_programs(SLOW_PROGRAMS)):
        try:
            check(prog, seed=k)
        except Exception as e:  # every kind counts: a refusal is a failure of a standard op here
            failures.append(f"program {k} ({prog}): {type(e).__name__}: {str(e)[:300]}")
    assert not failures, f"{len(failures)} of {SLOW_PROGRAMS} programs:\n" + "\n".join(failures)
