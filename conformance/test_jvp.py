"""Forward-mode conformance: every JVP rule checked over the gradient-conformance sweeps
(``grad_cases.cases()``) in float64, on namespace(numpy) and namespace(array_api_strict):

* ``jvp(f, x, v)`` equals the directional central difference ``(f(x + e v) - f(x - e v)) / 2e``
  element by element, for random ``v``;
* and agrees with the VJP by the dot-product identity ``Re<u, J v> = Re<J^T u, v>``.

A coverage test fails when a differentiable row (one with a VJP rule) has no forward-mode path.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import pycograd_xp
from conformance.grad_cases import params
from conformance.gradcheck import _like, backend_or_skip, to_numpy
from pycograd_xp.ops import REGISTRY
from pycograd_xp.tree import tree_flatten, tree_unflatten

PARAMS = params()


def check_jvp(
    xp: Any,
    f: Any,
    *args: np.ndarray,
    eps: float = 1e-6,
    rtol: float = 1e-5,
    atol: float = 1e-7,
    seed: int = 0,
) -> None:
    rng = np.random.default_rng(seed)
    v = [_like(rng, a) for a in args]
    primals = tuple(xp.asarray(a) for a in args)
    out, t_out = pycograd_xp.jvp(f, primals, tuple(xp.asarray(vi) for vi in v))
    out_leaves, out_td = tree_flatten(out)
    t_leaves = tree_flatten(t_out)[0]
    with pycograd_xp.no_grad():
        plus, minus = (
            tree_flatten(f(*[xp.asarray(a + s * eps * vi) for a, vi in zip(args, v, strict=True)]))[
                0
            ]
            for s in (1, -1)
        )
    for i, (o, t, p, m) in enumerate(zip(out_leaves, t_leaves, plus, minus, strict=True)):
        t, o = to_numpy(t), to_numpy(o)
        assert t.shape == o.shape and t.dtype == o.dtype, (
            f"output {i}: tangent {t.shape} {t.dtype}, output {o.shape} {o.dtype}"
        )
        if not np.issubdtype(o.dtype, np.inexact):
            continue
        fd = (to_numpy(p) - to_numpy(m)) / (2 * eps)
        scale = max(1.0, float(np.max(np.abs(fd), initial=0.0)))
        np.testing.assert_allclose(
            t,
            fd,
            rtol=rtol,
            atol=atol * scale + rtol * scale,
            err_msg=f"JVP of output {i} vs finite differences",
        )
    # the dot-product identity against the VJP
    u = [_like(rng, to_numpy(o)) for o in out_leaves]
    _, pull = pycograd_xp.vjp(f, *primals)
    cts = pull(tree_unflatten(out_td, [xp.asarray(ui) for ui in u]))
    lhs = sum(
        float(np.real(np.sum(ui * to_numpy(t))))
        for ui, t in zip(u, t_leaves, strict=True)
        if np.issubdtype(to_numpy(t).dtype, np.inexact)
    )
    rhs = sum(float(np.real(np.sum(to_numpy(c) * vi))) for c, vi in zip(cts, v, strict=True))
    scale = max(1.0, abs(lhs), abs(rhs))
    assert abs(lhs - rhs) <= 1e-9 * scale, f"<u, J v> = {lhs!r} but <J^T u, v> = {rhs!r}"


@pytest.mark.parametrize("backend, name, case", PARAMS)
def test_jvp_matches_finite_differences(backend, name, case):
    xp = pycograd_xp.namespace(backend_or_skip(backend))
    with np.errstate(all="ignore"):
        check_jvp(xp, case.f(xp), *case.args)


def test_every_differentiable_row_has_a_forward_mode_path():
    missing = [n for n, p in REGISTRY.items() if p.vjp is not None and p.jvp is None]
    assert missing == [], f"differentiable rows without a JVP rule: {missing}"
