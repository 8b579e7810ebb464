"""Every gradient-conformance case again with arrays of no elements: each case's inputs with one
axis made 0 long, and with every axis of that length made 0 in every input. Where the
forward pass runs, the VJP runs too, gives each input's shape, and gives zeros where no
output element exists. (A VJP that reshaped with -1, indexed a first element or divided by a
length failed so, where the forward pass had run.) A documented refusal (NotImplementedError)
passes."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import pycograd_xp as pg
from conformance.grad_cases import cases
from conformance.gradcheck import backend_or_skip


def _variants(args: tuple) -> list[tuple[tuple[int, ...], ...]]:
    shapes = [np.shape(a) for a in args]
    out: set[tuple[tuple[int, ...], ...]] = set()
    for i, s in enumerate(shapes):
        for j, n in enumerate(s):
            alone = list(shapes)
            alone[i] = s[:j] + (0,) + s[j + 1 :]
            out.add(tuple(alone))
            out.add(tuple(tuple(0 if d == n else d for d in t) for t in shapes))
    return sorted(out - {tuple(shapes)})


def _cases() -> list:
    return [
        pytest.param(name, case, id=f"{name}-{case.label}")
        for name, cs in cases().items()
        for case in cs
        if any(np.ndim(a) for a in case.args)
    ]


@pytest.mark.parametrize("backend", ["numpy", "array_api_strict"])
@pytest.mark.parametrize("name, case", _cases())
def test_vjp_over_arrays_of_no_elements(backend, name, case):
    if backend not in case.backends:
        pytest.skip(f"{name} [{case.label}] runs on {case.backends} only")
    xp = pg.namespace(backend_or_skip(backend))
    fn = case.f(xp)
    rng = np.random.default_rng(0)
    for shapes in _variants(case.args):
        raw = [
            np.zeros(s, np.asarray(a).dtype) if np.shape(a) != s else np.asarray(a)
            for a, s in zip(case.args, shapes, strict=True)
        ]
        xs = [xp.asarray(a) for a in raw]
        diff = [k for k, a in enumerate(raw) if a.dtype.kind in "fc"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                fn(*xs)
            except Exception:
                continue  # the forward pass refuses these shapes: nothing to differentiate

            def f(*d, xs=xs, diff=diff):
                return fn(*[d[diff.index(k)] if k in diff else x for k, x in enumerate(xs)])

            try:
                outs, pull = pg.vjp(f, *[xs[k] for k in diff])
            except NotImplementedError:
                continue
            parts = list(outs) if isinstance(outs, tuple) else [outs]
            cts = [
                xp.asarray(rng.standard_normal(o.shape).astype(np.asarray(o).dtype))
                if xp.isdtype(o.dtype, ("real floating", "complex floating"))
                else xp.zeros(o.shape)
                for o in parts
            ]
            if hasattr(outs, "_fields"):
                ct = type(outs)(*cts)
            else:
                ct = tuple(cts) if isinstance(outs, tuple) else cts[0]
            try:
                grads = pull(ct)
            except NotImplementedError:
                continue
        empty_out = sum(int(np.prod(o.shape)) for o in parts) == 0
        for k, g in zip(diff, grads, strict=True):
            where = f"{name} [{case.label}] with shapes {shapes}, input {k}"
            assert tuple(g.shape) == raw[k].shape, where
            if empty_out:
                assert not np.any(np.asarray(pg.unwrap(g))), f"{where}: a gradient from nothing"
