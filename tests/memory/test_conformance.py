"""Memory conformance generated from the op table: every row, layout, dtype and mode.

Each row of the table (``python -m pycograd_xp.ops --matrix``) runs its cases: the
gradient-conformance cases (``conformance/grad_cases.py``) of the differentiable rows and the
shape cases of the others (``test_rows_nondiff.py``), scaled up from their tiny shapes to tens
of thousands of elements (square matrices as block diagonals, so solves and factorizations stay
well posed), and measured against the projection (``traced_peak_bytes``, after a warm-up call):

- layouts: C order, Fortran order, the last two axes transposed, reversed along the first
  axis, every other row of a larger array, a zero-stride broadcast along the first axis, and
  an empty first argument (0-d arguments are among the cases' own shapes);
- dtypes: float64, float32, a float32/float64 mix, complex128, complex64, int64 and bool where
  the row takes them (a row that refuses a dtype is skipped, and counted);
- modes: the function as it is, its ``value_and_grad`` step, ``jvp``, ``vmap(grad)`` over a
  batch of two, and the ``compile`` replay.

The default run measures a fixed-seed sample of the combinations; ``-m slow`` runs each case in
every layout, every dtype and every mode. Measured above projected fails, and a row without
memory cases fails the coverage test.
"""

from __future__ import annotations

import functools
import random
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from test_rows_nondiff import CASES as NONDIFF_CASES

import pycograd_xp as pg
from conformance.grad_cases import cases
from pycograd_xp import memory
from pycograd_xp.ops import REGISTRY

XP = pg.namespace(np)
LAYOUTS = ("C", "F", "T", "reversed", "rows", "broadcast", "empty")
DTYPES = ("float64", "float32", "mixed", "complex128", "complex64", "int64", "bool")
MODES = ("as is", "step", "jvp", "vmap(grad)", "compile")
TARGET = 30_000  # elements of a case's largest argument once scaled
SAMPLE = 700  # combinations measured in the default run


@dataclass(frozen=True)
class MemCase:
    row: str
    label: str
    f: Callable[[Any], Callable[..., Any]]  # f(ns) -> the function of the arrays
    args: tuple[np.ndarray, ...]


def _mem_cases() -> list[MemCase]:
    out = [
        MemCase(name, c.label, c.f, tuple(np.asarray(a) for a in c.args))
        for name, cs in cases().items()
        for c in cs
        if "numpy" in c.backends
    ]
    out += [
        MemCase(c.row, c.label, c.f, tuple(np.asarray(a) for a in c.args))
        for c in NONDIFF_CASES
        if c.args and not c.known
    ]
    # rows whose gradient cases run elsewhere (eig's complex eigenvectors: their phase is free)
    rng = np.random.default_rng(33)
    out += [
        MemCase("linalg.eig", "(4, 4)", lambda ns: ns.linalg.eig, (rng.standard_normal((4, 4)),))
    ]
    return out


CASES = _mem_cases()


def test_every_row_has_memory_cases():
    """A new row needs memory cases (gradient-conformance or shape cases with array
    arguments); rows that take no array (creation from a shape, dtype queries) are listed."""
    covered = {c.row for c in CASES}
    no_array = {
        n
        for n, p in REGISTRY.items()
        if n in {c.row for c in NONDIFF_CASES if not c.args or c.known}
    }
    missing = sorted(set(REGISTRY) - covered - no_array)
    assert missing == [], f"rows without memory cases: {missing}"


# -- the arguments: scaled, laid out, cast ---------------------------------------------------------


def _scale(a: np.ndarray, k: int) -> np.ndarray:
    """``a`` with every axis longer than 1 made ``k`` times longer: square matrices as block
    diagonals (invertible, positive definite where ``a`` is), everything else tiled."""
    if k == 1 or a.ndim == 0:
        return a
    reps = [k if d > 1 else 1 for d in a.shape]
    if a.ndim >= 2 and a.shape[-1] == a.shape[-2] > 1:
        eye = np.eye(k, dtype=a.dtype)
        block = np.einsum("ij,...kl->...ikjl", eye, a).reshape(
            *a.shape[:-2], k * a.shape[-2], k * a.shape[-1]
        )
        return np.tile(block, reps[:-2] + [1, 1])
    return np.tile(a, reps)


def _factor(args: tuple[np.ndarray, ...]) -> int:
    arrays = [a for a in args if a.ndim and a.size > 1]
    if not arrays:
        return 1
    big = max(arrays, key=lambda a: a.size)
    n = sum(1 for d in big.shape if d > 1)
    return max(1, round((TARGET / big.size) ** (1 / max(n, 1))))


def _layout(a: np.ndarray, how: str, first: bool) -> np.ndarray:
    if how == "F" and a.ndim >= 2:
        return np.asfortranarray(a)
    if how == "T" and a.ndim >= 2:
        return np.swapaxes(np.ascontiguousarray(np.swapaxes(a, -1, -2)), -1, -2)
    if how == "reversed" and a.ndim >= 1:
        return np.flip(np.flip(a, 0).copy(), 0)
    if how == "rows" and a.ndim >= 1:
        return np.repeat(a, 2, axis=0)[::2]
    if how == "broadcast" and a.ndim >= 1 and a.shape[0] > 1:
        return np.broadcast_to(a[:1], a.shape)
    if how == "empty" and first and a.ndim >= 1:
        return a[:0]
    return a


def _cast(args: list[np.ndarray], how: str) -> list[np.ndarray]:
    floats = [i for i, a in enumerate(args) if a.dtype.kind in "fc"]
    out = list(args)
    for j, i in enumerate(floats):
        a = out[i]
        if how == "float32" or (how == "mixed" and j == 0):
            out[i] = a.astype(np.complex64 if a.dtype.kind == "c" else np.float32)
        elif how in ("complex128", "complex64"):
            out[i] = (a + 0.25j * a[::-1].reshape(a.shape) if a.ndim else a + 0.25j).astype(how)
        elif how == "int64":
            out[i] = np.round(a.real).astype(np.int64)
        elif how == "bool":
            out[i] = a.real > 0
    return out


SECONDS = 0.1  # a scaled case's call at most (einsum's three-operand loop is quartic)
LIMIT = 64_000_000  # projected bytes at most of a scaled case as it is (an outer product of
# two scaled vectors would otherwise hold billions of elements)


@functools.cache
def _scaled(i: int) -> tuple[np.ndarray, ...]:
    """Case ``i``'s arguments scaled up, as far as its projection stays under ``LIMIT`` (as they
    are where the row refuses larger ones: a function that fixes its shapes)."""
    c = CASES[i]
    k = _factor(c.args)
    while k > 1:
        big = tuple(_scale(a, k) for a in c.args)
        f, args = c.f(XP), [XP.asarray(a) for a in big]
        floats = tuple(j for j, a in enumerate(big) if a.dtype.kind in "fc")
        try:
            with np.errstate(all="ignore"):
                peak = memory.project(f, *args, argnums=()).peak_bytes
                if floats and c.row not in _NONDIFF:
                    step = memory.project(_scalar(f), *args, argnums=floats)
                    peak = max(peak, step.peak_bytes)
                if peak <= LIMIT:
                    start = time.perf_counter()
                    f(*args)
                    if time.perf_counter() - start < SECONDS:
                        return big
        except Exception:
            return c.args
        k //= 2
    return c.args


# -- the modes -----------------------------------------------------------------------------------


def _scalar(f):
    def g(*args):
        total = None
        for leaf in pg.tree_leaves(f(*args)):
            ns = leaf.__array_namespace__()
            if not ns.isdtype(leaf.dtype, ("real floating", "complex floating")):
                continue
            part = ns.real(leaf) if ns.isdtype(leaf.dtype, "complex floating") else leaf
            total = ns.sum(part) if total is None else total + ns.sum(part)
        return total

    return g


def _program(c: MemCase, arrays: list[np.ndarray], mode: str):
    """(function, arguments, argnums) of ``c`` in ``mode``; None where the mode does not apply
    (nothing floating to differentiate)."""
    fn = c.f(XP)
    floats = [i for i, a in enumerate(arrays) if a.dtype.kind in "fc"]
    args = [XP.asarray(a) for a in arrays]
    if mode == "as is":
        return fn, args, ()
    if mode == "compile":
        return pg.compile(fn), args, ()
    if not floats or c.row in _NONDIFF:
        return None
    f = _scalar(fn)
    if mode == "step":
        return f, args, tuple(floats)
    n = len(args)

    def at(fl, rest):
        full = list(rest)
        for i, v in zip(floats, fl, strict=True):
            full[i] = v
        return full

    if mode == "jvp":

        def with_tangents(*a):
            primals, tangents = a[:n], a[n:]
            return pg.jvp(
                lambda *fl: f(*at(fl, primals)), [primals[i] for i in floats], list(tangents)
            )

        tangents = [XP.asarray(np.ones_like(arrays[i])) for i in floats]
        return with_tangents, [*args, *tangents], ()
    # vmap(grad): a batch of two along a new first axis of every floating argument
    batched = [
        XP.asarray(np.stack([a, a])) if i in floats else XP.asarray(a) for i, a in enumerate(arrays)
    ]
    axes = tuple(0 if i in floats else None for i in range(n))
    return pg.vmap(pg.grad(f, argnums=tuple(floats)), in_axes=axes), batched, ()


_NONDIFF = {n for n, p in REGISTRY.items() if p.nondiff}


# -- one combination -----------------------------------------------------------------------------


def _combo(i: int, layout: str, dtype: str, mode: str) -> tuple[str, float] | None:
    """Measure case ``i`` in one layout, dtype and mode: (what, measured/projected), or None
    where it does not apply or the row refuses those arguments. Fails when measured is over."""
    c = CASES[i]
    arrays = _cast([_layout(a, layout, j == 0) for j, a in enumerate(_scaled(i))], dtype)
    if layout != "C" and all(a.flags.c_contiguous and a.size for a in arrays):
        return None  # the layout changed nothing (0-d or 1-element arguments)
    built = _program(c, arrays, mode)
    if built is None:
        return None
    f, args, nums = built
    with np.errstate(all="ignore"):
        try:
            p = memory.project(f, *args, argnums=nums)
            if p.peak_bytes > LIMIT:  # a cast that materializes a broadcast: too large to run
                return None
            (pg.value_and_grad(f, nums) if nums != () else f)(*args)  # warm-up
        except Exception:  # the row refuses these arguments (a dtype, an empty matrix)
            return None
        m = memory.measure(f, *args, argnums=nums)
    what = f"{c.row} [{c.label}] layout={layout} dtype={dtype} mode={mode}"
    assert m.peak_bytes <= p.traced_peak_bytes, (
        f"{what}: measured {m.peak_bytes} > projected {p.traced_peak_bytes}\n{p}"
    )
    if nums != ():
        assert m.forward_peak_bytes <= p.traced_forward_peak_bytes, (
            f"{what}: forward measured {m.forward_peak_bytes} > {p.traced_forward_peak_bytes}"
        )
    return what, m.peak_bytes / p.traced_peak_bytes


def _all_combos() -> list[tuple[int, str, str, str]]:
    """Each case in every layout (float64, its step and compiled: a compiled replay once took
    every argument as C-ordered, 1.45x over for a transposed one), every dtype (C order, as it
    is and its step) and every mode (C order, float64)."""
    out = set()
    for i in range(len(CASES)):
        out |= {(i, lay, "float64", mode) for lay in LAYOUTS for mode in ("step", "compile")}
        out |= {(i, "C", dt, mode) for dt in DTYPES for mode in ("as is", "step")}
        out |= {(i, "C", "float64", mode) for mode in MODES}
    return sorted(out)


ALL = _all_combos()


def _sample() -> list[tuple[int, str, str, str]]:
    rng = random.Random(33)
    return sorted(rng.sample(ALL, SAMPLE))


def _id(combo) -> str:
    i, lay, dt, mode = combo
    return f"{CASES[i].row}-{zlib.crc32(CASES[i].label.encode()):08x}-{lay}-{dt}-{mode}"


RATIOS: dict[str, list[float]] = {}


@pytest.mark.parametrize("combo", _sample(), ids=_id)
def test_a_sample_is_never_over_its_projection(combo):
    r = _combo(*combo)
    if r is not None:
        RATIOS.setdefault(combo[3], []).append(r[1])


@pytest.mark.slow
@pytest.mark.parametrize("combo", ALL, ids=_id)
def test_every_row_layout_dtype_and_mode_is_never_over_its_projection(combo):
    _combo(*combo)


def test_the_sample_measured_something():
    """Most of the sample applies (it is not all refused or skipped). Runs after it."""
    n = sum(len(v) for v in RATIOS.values())
    if n == 0:
        pytest.skip("run with the sample's test")
    assert n >= SAMPLE // 2, {k: len(v) for k, v in RATIOS.items()}
    assert set(RATIOS) == set(MODES), set(RATIOS)
