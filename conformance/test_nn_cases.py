"""The nn rows over random configurations (:mod:`conformance.nn_cases`), every way they compose:

- gradients against central differences (float64), and against JAX where it is installed
  (gradients, hessian-vector products, per-example gradients, float32 gradients);
- a hessian-vector product forward over reverse against reverse over reverse, per-example
  gradients (``vmap`` of ``grad``) and ``vmap`` at a random axis against a loop;
- ``compile`` of ``value_and_grad``, of the hessian-vector product and of per-example gradients
  against the same uncompiled (its first replay and a later one);
- ``namespace(cubed)`` with random chunkings against ``namespace(numpy)``: values and VJPs;
- ``memory.project``'s bound against ``memory.measure``'s peak: the forward pass, the
  ``value_and_grad`` step, and the compiled step.

A fixed seed per check; ``CASES`` in the default run, ``SLOW_CASES`` with ``-m slow``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import pycograd_xp as pg
from conformance.nn_cases import Case, cases
from pycograd_xp import memory

CASES = 40
SLOW_CASES = 600
XP = pg.namespace(np)


def _np(a):
    return np.asarray(pg.unwrap(a))


def _setup(case: Case, seed: int):
    """The loss ``sum(sin(row) * weights)`` of the case's arguments, its arguments as arrays,
    and one differentiable argument picked at random (its position)."""
    rng = np.random.default_rng(seed)
    out = _np(case.fn(*[XP.asarray(a) for a in case.args]))
    weights = rng.standard_normal(out.shape)
    i = case.diff[int(rng.integers(len(case.diff)))]

    def loss(*a):
        w = XP.asarray(weights.astype(np.dtype(a[0].dtype.name)))
        return XP.sum(XP.sin(case.fn(*a)) * w)

    return loss, [XP.asarray(a) for a in case.args], i, rng


def _partial(loss, args, i):
    """``loss`` as a function of argument ``i`` alone."""

    def f(t):
        return loss(*args[:i], t, *args[i + 1 :])

    return f


def _close(got, want, rtol=1e-9, atol=1e-11, what=""):
    got, want = _np(got), np.asarray(want)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=what)


def _params(count, seed, scale=1):
    return [pytest.param(c, id=f"{k}") for k, c in enumerate(cases(seed, count, scale))]


# -- gradients against central differences ----------------------------------------------------


def _central(f, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    g = np.zeros_like(x)
    for j in np.ndindex(x.shape):
        hi, lo = x.copy(), x.copy()
        hi[j] += h
        lo[j] -= h
        g[j] = (float(_np(f(XP.asarray(hi)))) - float(_np(f(XP.asarray(lo))))) / (2 * h)
    return g


def _check_central(case: Case, seed: int) -> None:
    loss, args, i, _ = _setup(case, seed)
    f = _partial(loss, args, i)
    g = pg.grad(f)(args[i])
    scale = max(1.0, float(np.abs(_np(g)).max()))
    try:
        _close(g, _central(f, case.args[i]), rtol=1e-5, atol=1e-6 * scale, what=f"{case}: {i}")
    except AssertionError:  # a kink within the step (max pooling's near-ties, relu near 0)?
        _close(g, _central(f, case.args[i], 1e-9), rtol=1e-4, atol=1e-5 * scale, what=str(case))


@pytest.mark.parametrize("case", _params(CASES, 101))
def test_gradients_agree_with_central_differences(case):
    _check_central(case, 0)


@pytest.mark.slow
def test_many_gradients_agree_with_central_differences():
    _all(lambda c, k: _check_central(c, k), cases(1101, SLOW_CASES))


def _all(check, items) -> None:
    failures = []
    for k, c in enumerate(items):
        try:
            check(c, k)
        except Exception as e:  # every kind counts
            failures.append(f"case {k} ({c}): {type(e).__name__}: {str(e)[:300]}")
    assert not failures, f"{len(failures)} of {len(items)}:\n" + "\n".join(failures)


# -- the transforms against each other ------------------------------------------------------------


def _check_transforms(case: Case, seed: int) -> None:
    loss, args, i, rng = _setup(case, seed)
    f = _partial(loss, args, i)
    v = XP.asarray(rng.standard_normal(case.args[i].shape))
    fwd_rev = pg.jvp(pg.grad(f), (args[i],), (v,))[1]
    rev_rev = pg.grad(lambda t: XP.sum(pg.grad(f)(t) * v))(args[i])
    _close(fwd_rev, _np(rev_rev), rtol=1e-8, atol=1e-10, what=f"{case}: hvp")
    # per-example gradients over a batch of perturbed first arguments, against a loop
    members = [case.args[0] + 0.3 * rng.standard_normal(case.args[0].shape) for _ in range(3)]

    def per(x0, t):  # the loss with argument i = t (x0 unused where i is the first)
        rest = [x0, *args[1:]]
        rest[i] = t
        return loss(*rest)

    axes = (0, None) if i else (0, 0)
    batch = XP.asarray(np.stack(members))
    target = batch if i == 0 else args[i]
    got = pg.vmap(pg.grad(per, argnums=1), in_axes=axes)(batch, target)
    loop = [
        _np(pg.grad(per, argnums=1)(XP.asarray(m), XP.asarray(m) if i == 0 else args[i]))
        for m in members
    ]
    _close(got, np.stack(loop), what=f"{case}: per-example")
    # vmap of the row at a random axis of argument i, and a random output axis
    ax = int(rng.integers(case.args[i].ndim + 1))
    stacked = np.stack([case.args[i], -case.args[i]], axis=ax)

    def row(t):
        return case.fn(*args[:i], t, *args[i + 1 :])

    out_ndim = _np(row(args[i])).ndim
    oax = int(rng.integers(out_ndim + 1))
    got = pg.vmap(row, in_axes=ax, out_axes=oax)(XP.asarray(stacked))
    loop = [_np(row(XP.asarray(np.take(stacked, k, axis=ax)))) for k in range(2)]
    _close(got, np.stack(loop, axis=oax), what=f"{case}: vmap")


@pytest.mark.parametrize("case", _params(CASES, 102))
def test_hvps_per_example_gradients_and_vmap_agree_with_their_loops(case):
    _check_transforms(case, 0)


@pytest.mark.slow
def test_many_transforms_agree():
    _all(_check_transforms, cases(1102, SLOW_CASES))


# -- compile ----------------------------------------------------------------------------------


def _check_compiled(case: Case, seed: int, dtype=np.float64) -> None:
    case = dataclasses.replace(case, args=[a.astype(dtype) for a in case.args])
    loss, args, i, rng = _setup(case, seed)
    tol = dict(rtol=2e-5, atol=2e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-13)
    v = rng.standard_normal(case.args[i].shape).astype(dtype)

    def hvp(*a):
        return pg.jvp(_partial(loss, list(a), i), (a[i],), (XP.asarray(v),))[1]

    def per_example(x0, *rest):
        axes = (0,) + (None,) * len(rest)
        return pg.vmap(pg.grad(loss, argnums=tuple(case.diff)), in_axes=axes)(x0, *rest)

    batch = np.stack([case.args[0], case.args[0] * 0.5])
    for f, f_args in (
        (pg.value_and_grad(loss, argnums=tuple(case.diff)), case.args),
        (hvp, case.args),
        (per_example, [batch, *case.args[1:]]),
    ):
        f_args = [XP.asarray(a) for a in f_args]
        c = pg.compile(f)
        want = pg.tree_leaves(f(*f_args))
        for call in range(2):  # the trace's replay, then a later one on fresh arrays
            got = pg.tree_leaves(c(*[XP.asarray(_np(a).copy()) for a in f_args]))
            for a, b in zip(got, want, strict=True):
                _close(a, _np(b), **tol, what=f"{case}: {getattr(f, '__name__', f)} call {call}")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("case", _params(CASES // 2, 103))
def test_compiled_steps_agree_with_uncompiled(case, dtype):
    _check_compiled(case, 0, dtype)


@pytest.mark.slow
def test_many_compiled_steps_agree():
    items = cases(1103, SLOW_CASES)
    _all(lambda c, k: _check_compiled(c, k, (np.float64, np.float32)[k % 2]), items)


# -- Cubed --------------------------------------------------------------------------------------


def _check_cubed(case: Case, seed: int) -> None:
    from conformance.cubed_oracle import compare

    rng = np.random.default_rng(seed)
    chunks = []
    for a in case.args:  # chunks of 1, one short of the axis, the whole axis, or random
        chunks.append(
            tuple(
                int(rng.choice([1, max(1, s - 1), s, int(rng.integers(1, s + 1))])) for s in a.shape
            )
        )
    float32 = bool(rng.random() < 0.3)
    args = [a.astype(np.float32) for a in case.args] if float32 else case.args
    tol = dict(rtol=2e-4, atol=1e-5) if float32 else dict(rtol=1e-9, atol=1e-11)
    compare(lambda xp: case.fn, args, "random", seed=seed, chunks=chunks, **tol)


@pytest.mark.parametrize("case", _params(8, 104))
def test_cubed_agrees_with_numpy_on_random_chunkings(case):
    pytest.importorskip("cubed")
    _check_cubed(case, 0)


@pytest.mark.slow
def test_many_cubed_cases_agree():
    pytest.importorskip("cubed")
    _all(_check_cubed, cases(1104, SLOW_CASES // 4))


# -- memory -----------------------------------------------------------------------------------


def _check_memory(case: Case, seed: int) -> None:
    if seed % 3 == 1:
        case = dataclasses.replace(case, args=[a.astype(np.float32) for a in case.args])
    loss, args, _, _ = _setup(case, seed)
    step = pg.compile(pg.value_and_grad(loss, argnums=tuple(case.diff)))
    runs = (("forward", loss, ()), ("step", loss, tuple(case.diff)), ("compiled", step, ()))
    for what, f, nums in runs:
        projected = memory.project(f, *args, argnums=nums).traced_peak_bytes
        measured = memory.measure(f, *args, argnums=nums).peak_bytes
        assert measured <= projected, f"{case}: {what} measured {measured} > {projected}"


@pytest.mark.parametrize("case", _params(CASES, 105, scale=8))
def test_the_projection_bounds_the_measured_peak(case):
    _check_memory(case, 0)


@pytest.mark.slow
def test_many_projections_bound_their_measured_peaks():
    _all(_check_memory, cases(1105, SLOW_CASES, scale=8))


# -- JAX, where installed -------------------------------------------------------------------


def _check_jax(case: Case, seed: int) -> None:
    import jax
    import jax.numpy as jnp

    loss, args, i, rng = _setup(case, seed)
    weights = rng.standard_normal(_np(case.fn(*args)).shape)

    def jloss(*a):
        return jnp.sum(jnp.sin(case.jax_fn(*a)) * weights)

    # (_setup's weights differ from these: the same loss on both sides below)
    def ploss(*a):
        return XP.sum(XP.sin(case.fn(*a)) * XP.asarray(weights.astype(np.dtype(a[0].dtype.name))))

    jargs = [jnp.asarray(a) for a in case.args]
    jf = lambda t: jloss(*jargs[:i], t, *jargs[i + 1 :])
    pf = _partial(ploss, args, i)
    g = np.asarray(jax.grad(jf)(jargs[i]))
    if not np.all(np.isfinite(g)):
        return
    scale = max(1.0, float(np.abs(g).max()))
    _close(pg.grad(pf)(args[i]), g, rtol=1e-8, atol=1e-10 * scale, what=f"{case}: grad")
    v = rng.standard_normal(case.args[i].shape)
    hv = np.asarray(jax.jvp(jax.grad(jf), (jargs[i],), (jnp.asarray(v),))[1])
    got = pg.jvp(pg.grad(pf), (args[i],), (XP.asarray(v),))[1]
    _close(got, hv, rtol=1e-8, atol=1e-10 * max(1.0, float(np.abs(hv).max())), what=f"{case}: hvp")
    args32 = [XP.asarray(a.astype(np.float32)) for a in case.args]
    g32 = _np(pg.grad(_partial(ploss, args32, i))(args32[i]))
    assert g32.dtype == np.float32
    _close(g32, g, rtol=2e-3, atol=2e-3 * scale, what=f"{case}: float32 grad")


@pytest.mark.slow
def test_many_cases_agree_with_jax():
    pytest.importorskip("jax")
    import jax

    jax.config.update("jax_enable_x64", True)
    _all(_check_jax, cases(1106, SLOW_CASES))
