"""Batching conformance: every batching rule checked over the gradient-conformance sweeps
(``grad_cases.cases()``) on namespace(numpy) and namespace(array_api_strict):

* ``vmap(f)`` over a batch of 3 different inputs equals ``[f(x_i) for each i]`` stacked, with
  every argument batched and with only the first batched (``in_axes=(0, None, ...)``), so the
  rules meet batched and unbatched operands side by side;
* ``vmap`` of the VJP (a batch of cotangents, one pullback each) equals the pullbacks one by one.

A coverage test fails when a row has neither a batching rule nor a declared reason it cannot
batch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import pycograd_xp
from conformance.grad_cases import params
from conformance.gradcheck import backend_or_skip, to_numpy
from pycograd_xp.ops import REGISTRY
from pycograd_xp.tree import tree_flatten

PARAMS = params()
SCALES = (1.0, 0.97, 1.02)  # three different examples, each inside the case's domain


def _examples(args: tuple) -> list[tuple]:
    return [tuple(a * s for a in args) for s in SCALES]


def _close(got: Any, want: list, what: str) -> None:
    g_leaves = tree_flatten(got)[0]
    w_leaves = [tree_flatten(w)[0] for w in want]
    assert len(g_leaves) == len(w_leaves[0]), what
    for i, g in enumerate(g_leaves):
        ref = np.stack([to_numpy(w[i]) for w in w_leaves])
        g = to_numpy(g)
        assert g.shape == ref.shape and g.dtype == ref.dtype, (
            f"{what}, output {i}: {g.shape} {g.dtype} vs {ref.shape} {ref.dtype}"
        )
        np.testing.assert_allclose(g, ref, rtol=1e-10, atol=1e-12, err_msg=f"{what}, output {i}")


@pytest.mark.parametrize("backend,name,case", PARAMS)
def test_vmap_matches_a_loop(backend: str, name: str, case: Any) -> None:
    xp = pycograd_xp.namespace(backend_or_skip(backend))
    f = case.f(xp)
    examples = [tuple(xp.asarray(a) for a in ex) for ex in _examples(case.args)]
    stacked = tuple(xp.stack([ex[k] for ex in examples]) for k in range(len(case.args)))
    prim = REGISTRY.get(name)
    if prim is not None and prim.unbatchable is not None:  # it says so, naming itself
        with pytest.raises(NotImplementedError, match=rf"vmap: {name}\(\) cannot be batched"):
            pycograd_xp.vmap(f)(*stacked)
        return
    with pycograd_xp.no_grad():
        want = [f(*ex) for ex in examples]
    _close(pycograd_xp.vmap(f)(*stacked), want, "all arguments batched")
    if len(case.args) > 1:  # the first batched, the others shared
        first = tuple(examples[0][1:])
        with pycograd_xp.no_grad():
            want = [f(ex[0], *first) for ex in examples]
        in_axes = (0,) + (None,) * (len(first))
        _close(
            pycograd_xp.vmap(f, in_axes=in_axes)(stacked[0], *first), want, "first argument batched"
        )


@pytest.mark.parametrize("backend,name,case", PARAMS)
def test_vmap_of_vjp(backend: str, name: str, case: Any) -> None:
    """A batch of cotangents through one pullback: the backward rules batched."""
    xp = pycograd_xp.namespace(backend_or_skip(backend))
    f = case.f(xp)
    primals = tuple(xp.asarray(a) for a in case.args)
    out, pull = pycograd_xp.vjp(f, *primals)
    rng = np.random.default_rng(0)
    out_leaves, out_td = tree_flatten(out)
    cts = []
    for o in out_leaves:
        o = to_numpy(o)
        r = rng.standard_normal((len(SCALES), *o.shape))
        if np.iscomplexobj(o):
            r = r + 1j * rng.standard_normal(r.shape)
        cts.append(xp.asarray(r.astype(o.dtype)))
    from pycograd_xp.tree import tree_unflatten

    if not all(np.issubdtype(to_numpy(o).dtype, np.inexact) for o in out_leaves):
        pytest.skip("an integer output has no cotangent")
    got = pycograd_xp.vmap(lambda c: pull(tree_unflatten(out_td, c)))(cts)
    want = [pull(tree_unflatten(out_td, [c[i, ...] for c in cts])) for i in range(len(SCALES))]
    _close(got, want, "vmap of the pullback")


def test_every_row_batches_or_says_why() -> None:
    missing = [n for n, p in REGISTRY.items() if p.batch is None and p.unbatchable is None]
    assert not missing, f"rows with neither a batching rule nor a reason: {missing}"
    both = [n for n, p in REGISTRY.items() if p.batch is not None and p.unbatchable is not None]
    assert not both


def test_an_unbatchable_row_names_itself() -> None:
    xp = pycograd_xp.namespace("numpy")
    x = xp.asarray(np.array([[0.0, 1.0], [2.0, 0.0]]))
    with pytest.raises(NotImplementedError, match=r"vmap: nonzero\(\) cannot be batched: its "):
        pycograd_xp.vmap(lambda r: xp.nonzero(r)[0])(x)


@pytest.mark.parametrize("backend,name,case", [p for p in PARAMS if p.values[0] == "numpy"])
def test_vmap_over_an_empty_batch(backend: str, name: str, case: Any) -> None:
    """A batch of no examples (JAX's vmap takes one): every output has a batch axis of 0 and
    an example's shape and dtype; so has the gradient of the sum, per example."""
    xp = pycograd_xp.namespace(backend_or_skip(backend))
    f = case.f(xp)
    prim = REGISTRY.get(name)
    if prim is not None and prim.unbatchable is not None:
        return
    example = tuple(xp.asarray(a) for a in case.args)
    empty = tuple(
        xp.asarray(np.zeros((0, *np.shape(a)), dtype=np.asarray(a).dtype)) for a in case.args
    )
    with pycograd_xp.no_grad():
        want = tree_flatten(f(*example))[0]
    got = tree_flatten(pycograd_xp.vmap(f)(*empty))[0]
    assert [(tuple(g.shape), g.dtype) for g in got] == [((0, *w.shape), w.dtype) for w in want]
    if len(want) != 1 or not xp.isdtype(want[0].dtype, ("real floating", "complex floating")):
        return
    if not all(xp.isdtype(a.dtype, ("real floating", "complex floating")) for a in example):
        return

    def total(*a):
        y = f(*a)
        return xp.sum(xp.real(y) if xp.isdtype(y.dtype, "complex floating") else y)

    grads = pycograd_xp.vmap(pycograd_xp.grad(total, argnums=tuple(range(len(example)))))(*empty)
    assert [(tuple(g.shape), g.dtype) for g in grads] == [((0, *a.shape), a.dtype) for a in example]
