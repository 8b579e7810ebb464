"""``hessian`` of a 100-parameter function: log-sum-exp of an affine map plus a quadratic,
``f(t) = log(sum(exp(A t))) + t.Q t / 2`` with ``A`` of shape (50, 100), float64.

    python benchmarks/bench_hessian.py

Contenders side by side in one process, interleaved, medians and ratios against the
closed-form Hessian written in NumPy (``A^T (diag(p) - p p^T) A + Q`` with ``p = softmax(A t)``):

* ``pg.hessian``: forward over reverse as shipped, one batched pass (``vmap`` of ``jvp`` over
  the 100 basis tangents, through the recorded backward pass);
* ``pg.jacrev(pg.jacrev)``: reverse over reverse, the pullback of the gradient ``vmap``-ed;
* ``pg loop of 100 HVPs``: ``jvp`` of ``grad`` once per basis vector in a Python loop (what the
  Jacobians did before they were built on ``vmap``, and their fallback for unbatchable rows);
* NumPy central differences of the hand-written gradient (200 gradient evaluations);
* ``torch.func.hessian`` and JAX eager ``jax.hessian`` when installed (skipped otherwise).
"""

from __future__ import annotations

import _common  # pins threads before the contenders load
import numpy as np

import pycograd_xp as pg

N, M = 100, 50


def problem(seed: int = 0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, N)) / np.sqrt(N)
    q = rng.standard_normal((N, N)) / N
    return a, q @ q.T + np.eye(N), rng.standard_normal(N)


def f_of(m, a, q):
    def f(t):
        z = a @ t
        zmax = m.max(z)
        return zmax + m.log(m.sum(m.exp(z - zmax))) + 0.5 * m.sum(t * (q @ t))

    return f


def numpy_hessian(a, q, t):
    z = a @ t
    p = np.exp(z - z.max())
    p /= p.sum()
    return a.T @ ((np.diag(p) - np.outer(p, p)) @ a) + q


def numpy_fd_hessian(a, q, t, eps=1e-5):
    def grad(t):
        z = a @ t
        p = np.exp(z - z.max())
        return a.T @ (p / p.sum()) + q @ t

    cols = [(grad(t + eps * e) - grad(t - eps * e)) / (2 * eps) for e in np.eye(N)]
    return np.stack(cols, axis=1)


def main() -> None:
    a0, q0, t0 = problem()
    want = numpy_hessian(a0, q0, t0)
    xp = pg.namespace(np)
    a, q, t = xp.asarray(a0), xp.asarray(q0), xp.asarray(t0)
    f = f_of(xp, a, q)
    basis = [xp.asarray(e) for e in np.eye(N)]

    def loop():
        g = pg.grad(f)
        return [pg.jvp(g, (t,), (e,))[1] for e in basis]

    contenders = {
        "NumPy closed form": lambda: numpy_hessian(a0, q0, t0),
        "NumPy central differences": lambda: numpy_fd_hessian(a0, q0, t0),
        "pg.hessian (fwd over rev)": lambda: pg.hessian(f)(t),
        "pg.jacrev(pg.jacrev)": lambda: pg.jacrev(pg.jacrev(f))(t),
        "pg loop of 100 HVPs": loop,
    }
    np.testing.assert_allclose(np.asarray(pg.unwrap(pg.hessian(f)(t))), want, atol=1e-12)
    np.testing.assert_allclose(np.asarray(pg.unwrap(pg.jacrev(pg.jacrev(f))(t))), want, atol=1e-12)
    np.testing.assert_allclose(
        np.stack([np.asarray(pg.unwrap(c)) for c in loop()], 1), want, atol=1e-12
    )
    torch = _common.optional("torch")
    if torch is not None:
        from torch.func import hessian as t_hessian

        ta, tq, tt = (torch.from_numpy(v) for v in (a0, q0, t0))
        tf = f_of(torch, ta, tq)
        np.testing.assert_allclose(t_hessian(tf)(tt).numpy(), want, atol=1e-10)
        contenders["torch.func.hessian"] = lambda: t_hessian(tf)(tt)
    jax = _common.optional("jax")
    if jax is not None:
        import jax.numpy as jnp

        jf = f_of(jnp, jnp.asarray(a0), jnp.asarray(q0))
        jt = jnp.asarray(t0)
        np.testing.assert_allclose(np.asarray(jax.hessian(jf)(jt)), want, atol=1e-10)
        contenders["jax.hessian (eager)"] = lambda: jax.hessian(jf)(jt).block_until_ready()
    med = _common.interleaved(contenders, repeats=9, number=3)
    print(
        _common.table(
            f"hessian of a {N}-parameter log-sum-exp of an affine map plus a quadratic, float64",
            med,
            "NumPy closed form",
        )
    )
    h = med["pg.hessian (fwd over rev)"]
    print(
        f"pg.hessian / loop of HVPs = {h / med['pg loop of 100 HVPs']:.2f}; "
        f"pg.hessian / NumPy central differences = {h / med['NumPy central differences']:.2f}"
    )


if __name__ == "__main__":
    main()
