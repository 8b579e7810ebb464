"""The gradient-conformance cases: for every differentiable function of the standard, calls swept
over shapes (scalar, (3,), (2, 3), (1, 3), broadcasting pairs), axes (None, 0, -1, tuples),
keepdims, correction and the other options, real and complex, each with inputs drawn from the
function's smooth domain.

``cases()`` returns ``{function name: [Case, ...]}``; ``conformance/test_gradients.py`` runs
the dot-product test on each, and checks that every differentiable row has cases.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

SHAPES = [(), (3,), (2, 3), (1, 3)]
PAIRS = [((2, 3), (2, 3)), ((2, 3), (3,)), ((1, 3), (2, 1)), ((), (2, 3)), ((3,), ())]
AXES_2D = [None, 0, -1, (0, 1)]


@dataclass
class Case:
    label: str
    f: Callable[..., Any]  # f(xp) -> the function of arrays to differentiate
    args: tuple[np.ndarray, ...]
    backends: tuple[str, ...] = ("numpy", "array_api_strict")


# array-api-strict refuses index kinds outside the standard (integer arrays beside slices,
# integer-array assignment); those cases run on NumPy only.
NUMPY_ONLY = ("numpy",)
_rng = np.random.default_rng(1234)


def arr(shape, lo=-2.0, hi=2.0, cplx=False, away=0.0):
    """Random float64 (or complex128) values in [lo, hi], at least ``away`` from 0."""
    a = _rng.uniform(lo, hi, shape)
    if away:
        a = np.sign(a + (a == 0)) * (away + np.abs(a))
    if cplx:
        a = a + 1j * _rng.uniform(lo, hi, shape)
    return np.asarray(a)


def spd(n, batch=()):
    a = _rng.standard_normal((*batch, n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


UNARY_DOMAINS = {
    "abs": dict(away=0.2),
    "acos": dict(lo=-0.8, hi=0.8),
    "acosh": dict(lo=1.2, hi=3.0),
    "asin": dict(lo=-0.8, hi=0.8),
    "asinh": {},
    "atan": {},
    "atanh": dict(lo=-0.8, hi=0.8),
    "cos": {},
    "cosh": {},
    "exp": {},
    "expm1": {},
    "log": dict(lo=0.5, hi=2.0),
    "log1p": dict(lo=-0.5, hi=2.0),
    "log2": dict(lo=0.5, hi=2.0),
    "log10": dict(lo=0.5, hi=2.0),
    "reciprocal": dict(away=0.5),
    "sin": {},
    "sinh": {},
    "sqrt": dict(lo=0.5, hi=2.0),
    "tan": dict(lo=-1.2, hi=1.2),
    "tanh": {},
    "square": {},
    "negative": {},
    "positive": {},
    "conj": {},
    "real": {},
    "sign": dict(away=0.2),
}
# Holomorphic (or explicitly complex-aware) rules checked on complex inputs too.
COMPLEX_UNARY = {
    "abs": dict(away=0.3),
    "exp": {},
    "expm1": {},
    "log": dict(lo=0.5, hi=2.0),
    "log1p": dict(lo=0.2, hi=2.0),
    "sin": {},
    "cos": {},
    "tan": dict(lo=-0.5, hi=0.5),
    "sinh": {},
    "cosh": {},
    "tanh": dict(lo=-0.5, hi=0.5),
    "sqrt": dict(lo=0.5, hi=2.0),
    "square": {},
    "reciprocal": dict(away=0.5),
    "conj": {},
    "real": {},
    "imag": {},
    "sign": dict(away=0.3),
    "negative": {},
    "asin": dict(lo=-0.5, hi=0.5),
    "acos": dict(lo=-0.5, hi=0.5),
    "atan": dict(lo=-0.5, hi=0.5),
    "asinh": dict(lo=-0.5, hi=0.5),
    "atanh": dict(lo=-0.5, hi=0.5),
    "acosh": dict(lo=1.5, hi=3.0),
    "log2": dict(lo=0.5, hi=2.0),
    "log10": dict(lo=0.5, hi=2.0),
}
BINARY_DOMAINS = {
    "add": ({}, {}),
    "subtract": ({}, {}),
    "multiply": ({}, {}),
    "divide": ({}, dict(away=0.5)),
    "pow": (dict(lo=0.5, hi=2.0), {}),
    "atan2": ({}, dict(away=0.3)),
    "hypot": (dict(away=0.2), {}),
    "logaddexp": ({}, {}),
    "maximum": ({}, {}),
    "minimum": ({}, {}),
    "copysign": (dict(away=0.2), dict(away=0.2)),
    "nextafter": ({}, {}),
    "remainder": ({}, dict(lo=0.7, hi=1.3)),
}
COMPLEX_BINARY = {"add", "subtract", "multiply", "divide", "pow"}


def _call(name):
    scope, _, short = name.rpartition(".")

    def get(xp):
        return getattr(getattr(xp, scope) if scope else xp, short)

    return get


def _unary_cases(out):
    for name, dom in UNARY_DOMAINS.items():
        for shape in SHAPES:
            out.setdefault(name, []).append(
                Case(f"{shape}", lambda xp, n=name: _call(n)(xp), (arr(shape, **dom),))
            )
    for name, dom in COMPLEX_UNARY.items():
        for shape in [(), (2, 3)]:
            out.setdefault(name, []).append(
                Case(
                    f"complex {shape}",
                    lambda xp, n=name: _call(n)(xp),
                    (arr(shape, cplx=True, **dom),),
                )
            )


def _large_cases(out):
    # Rules that switch to a lower-memory form on large arrays
    out["tanh"].append(Case("large (300, 300)", lambda xp: xp.tanh, (arr((300, 300)),)))


def _binary_cases(out):
    for name, (d1, d2) in BINARY_DOMAINS.items():
        for s1, s2 in PAIRS:
            out.setdefault(name, []).append(
                Case(f"{s1} {s2}", lambda xp, n=name: _call(n)(xp), (arr(s1, **d1), arr(s2, **d2)))
            )
        out[name].append(
            Case(
                "array op scalar",
                lambda xp, n=name: lambda x: _call(n)(xp)(x, 1.5),
                (arr((2, 3), **d1),),
            )
        )
        out[name].append(
            Case(
                "scalar op array",
                lambda xp, n=name: lambda x: _call(n)(xp)(1.5, x),
                (arr((2, 3), **d2),),
            )
        )
        if name in COMPLEX_BINARY:
            out[name].append(
                Case(
                    "complex",
                    lambda xp, n=name: _call(n)(xp),
                    (arr((2, 3), cplx=True, **d1), arr((3,), cplx=True, **d2)),
                )
            )
    out["multiply"].append(Case("x * x", lambda xp: lambda x: x * x, (arr((2, 3)),)))  # one term
    out["multiply"].append(
        Case("x * x complex", lambda xp: lambda x: x * x, (arr((3,), cplx=True),))
    )
    out["clip"] = [
        Case("scalars", lambda xp: lambda x: xp.clip(x, -1.0, 1.0), (arr((2, 3)),)),
        Case(
            "arrays",
            lambda xp: lambda x, lo, hi: xp.clip(x, lo, hi),
            (arr((2, 3)), arr((3,), -1.5, -0.5), arr((2, 1), 0.5, 1.5)),
        ),
        Case("max only", lambda xp: lambda x, hi: xp.clip(x, max=hi), (arr((2, 3)), arr((2, 3)))),
    ]


def _reduction_cases(out):
    for name in ("sum", "mean", "prod", "max", "min", "var", "std"):
        for axis in AXES_2D:
            for keepdims in (False, True):
                corrections = (0.0, 1.0) if name in ("var", "std") else (None,)
                for c in corrections:
                    kw = {"axis": axis, "keepdims": keepdims}
                    if c is not None:
                        kw["correction"] = c
                    out.setdefault(name, []).append(
                        Case(
                            f"{kw}",
                            lambda xp, n=name, kw=kw: lambda x: getattr(xp, n)(x, **kw),
                            (arr((2, 3), 0.5, 2.0),),
                        )
                    )
        for shape in ((), (3,), (1, 3)):
            out[name].append(
                Case(f"{shape}", lambda xp, n=name: getattr(xp, n), (arr(shape, 0.5, 2.0),))
            )
    prod_zero = np.array([[1.5, 0.0, -2.0], [0.0, 0.0, 3.0]])
    for axis in (None, 0, 1):
        out["prod"].append(
            Case(
                f"zeros axis={axis}", lambda xp, a=axis: lambda x: xp.prod(x, axis=a), (prod_zero,)
            )
        )
    for name in ("sum", "mean", "prod"):
        out[name].append(
            Case(
                "complex",
                lambda xp, n=name: lambda x: getattr(xp, n)(x, axis=0),
                (arr((2, 3), cplx=True),),
            )
        )
    ties = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, -1.0]])
    for name in ("max", "min"):
        out[name].append(
            Case(
                "ties",
                lambda xp, n=name: lambda x: getattr(xp, n)(x, axis=1) + 0 * xp.sum(x),
                (ties,),
            )
        )
    for name in ("cumulative_sum", "cumulative_prod"):
        for axis in (0, 1, -1):
            for inc in (False, True):
                out.setdefault(name, []).append(
                    Case(
                        f"axis={axis} include_initial={inc}",
                        lambda xp, n=name, a=axis, i=inc: (
                            lambda x: getattr(xp, n)(x, axis=a, include_initial=i)
                        ),
                        (arr((2, 3), 0.5, 2.0),),
                    )
                )
        out[name].append(Case("1-D", lambda xp, n=name: getattr(xp, n), (arr((4,), 0.5, 2.0),)))
        for inc in (False, True):  # (outside the standard) one element, as NumPy scans a 0-d x
            out[name].append(
                Case(
                    f"0-D include_initial={inc}",
                    lambda xp, n=name, i=inc: lambda x: getattr(xp, n)(x, include_initial=i),
                    (np.asarray(0.7),),
                )
            )
        out[name].append(
            Case(
                "complex",
                lambda xp, n=name: lambda x: getattr(xp, n)(x, axis=1),
                (arr((2, 3), cplx=True),),
            )
        )
    zeros = np.array([[2.0, 0.0, 3.0, 0.0, 1.5], [0.0, 1.2, 2.0, 1.1, 0.7]])
    for inc in (False, True):
        out["cumulative_prod"].append(
            Case(
                f"zeros include_initial={inc}",
                lambda xp, i=inc: lambda x: xp.cumulative_prod(x, axis=1, include_initial=i),
                (zeros,),
            )
        )


def _manipulation_cases(out):
    a23, a3 = arr((2, 3)), arr((3,))
    out["broadcast_to"] = [
        Case("(3,)->(2,3)", lambda xp: lambda x: xp.broadcast_to(x, (2, 3)), (a3,)),
        Case("(1,3)->(4,2,3)", lambda xp: lambda x: xp.broadcast_to(x, (4, 2, 3)), (arr((1, 3)),)),
    ]
    out["broadcast_arrays"] = [
        Case("pair", lambda xp: xp.broadcast_arrays, (arr((2, 1)), arr((3,))))
    ]
    out["concat"] = [
        Case("axis 0", lambda xp: lambda a, b: xp.concat([a, b]), (a23, arr((1, 3)))),
        Case("axis -1", lambda xp: lambda a, b: xp.concat([a, b], axis=-1), (a23, arr((2, 2)))),
        Case("axis None", lambda xp: lambda a, b: xp.concat([a, b], axis=None), (a23, a3)),
    ]
    out["stack"] = [
        Case(
            f"axis {ax}",
            lambda xp, ax=ax: lambda a, b: xp.stack([a, b], axis=ax),
            (a23, arr((2, 3))),
        )
        for ax in (0, 1, -1)
    ]
    out["unstack"] = [
        Case(f"axis {ax}", lambda xp, ax=ax: lambda x: xp.unstack(x, axis=ax), (a23,))
        for ax in (0, -1)
    ]
    out["expand_dims"] = [
        Case(f"axis {ax}", lambda xp, ax=ax: lambda x: xp.expand_dims(x, axis=ax), (a23,))
        for ax in (0, -1, 1)
    ]
    out["squeeze"] = [Case("axis 0", lambda xp: lambda x: xp.squeeze(x, axis=0), (arr((1, 3)),))]
    out["reshape"] = [
        Case(f"{s}", lambda xp, s=s: lambda x: xp.reshape(x, s), (a23,))
        for s in [(3, 2), (-1,), (1, 6)]
    ]
    out["flip"] = [
        Case(f"axis {ax}", lambda xp, ax=ax: lambda x: xp.flip(x, axis=ax), (a23,))
        for ax in (None, 0, -1, (0, 1))
    ]
    out["moveaxis"] = [Case("0->-1", lambda xp: lambda x: xp.moveaxis(x, 0, -1), (arr((2, 3, 4)),))]
    out["permute_dims"] = [
        Case("(2,0,1)", lambda xp: lambda x: xp.permute_dims(x, (2, 0, 1)), (arr((2, 3, 4)),))
    ]
    out["matrix_transpose"] = [Case("batch", lambda xp: xp.matrix_transpose, (arr((2, 3, 4)),))]
    out["repeat"] = [
        Case("int axis 1", lambda xp: lambda x: xp.repeat(x, 2, axis=1), (a23,)),
        Case("int axis None", lambda xp: lambda x: xp.repeat(x, 3), (a23,)),
        Case(
            "array axis 0", lambda xp: lambda x: xp.repeat(x, xp.asarray([2, 0, 3]), axis=0), (a3,)
        ),
        Case(  # one count broadcast over the elements
            "length-1 array axis 0",
            lambda xp: lambda x: xp.repeat(x, xp.asarray([2]), axis=0),
            (a23,),
        ),
        Case(
            "length-1 array axis None",
            lambda xp: lambda x: xp.repeat(x, xp.asarray([3])),
            (a23,),
        ),
    ]
    out["roll"] = [
        Case(f"{sh} {ax}", lambda xp, sh=sh, ax=ax: lambda x: xp.roll(x, sh, axis=ax), (a23,))
        for sh, ax in [(1, None), (1, 0), (-2, 1), ((1, 2), (0, 1))]
    ]
    out["tile"] = [
        Case(f"{r}", lambda xp, r=r: lambda x: xp.tile(x, r), (a23,))
        for r in [(2, 1), (2,), (2, 1, 3)]
    ]
    out["where"] = [
        Case(
            "pair",
            lambda xp: (
                lambda a, b: xp.where(
                    xp.asarray(np.array([[True, False, True], [False, False, True]])), a, b
                )
            ),
            (a23, arr((3,))),
        )
    ]
    out["where"].append(Case("scalar", lambda xp: lambda a: xp.where(a > 0, a, 0.0), (a23,)))
    out["sort"] = [
        Case(
            f"axis {ax} desc {d}",
            lambda xp, ax=ax, d=d: lambda x: xp.sort(x, axis=ax, descending=d),
            (a23,),
        )
        for ax in (0, -1)
        for d in (False, True)
    ]
    # distinct values (where it is differentiable), in 1-D and 2-D; integer outputs carry none
    for name, pick in [
        ("unique_values", lambda r: r),
        ("unique_all", lambda r: r.values),
        ("unique_counts", lambda r: r.values),
        ("unique_inverse", lambda r: r.values),
    ]:
        out[name] = [
            Case(label, lambda xp, n=name, p=pick: lambda x: p(getattr(xp, n)(x)), (a,))
            for label, a in [("1-D", arr((5,))), ("2-D", a23)]
        ]
    out["diff"] = [
        Case("n=1", lambda xp: xp.diff, (a23,)),
        Case("n=2 axis 0", lambda xp: lambda x: xp.diff(x, axis=0, n=2), (arr((4, 3)),)),
        Case(
            "prepend/append",
            lambda xp: lambda x, p, q: xp.diff(x, prepend=p, append=q),
            (a23, arr((2, 1)), arr((2, 2))),
        ),
        Case(  # x itself, the ends left out (NumPy's, JAX's)
            "n=0 prepend/append",
            lambda xp: lambda x, p, q: xp.diff(x, n=0, prepend=p, append=q),
            (a23, arr((2, 1)), arr((2, 2))),
        ),
    ]
    out["astype"] = [
        Case(
            "to complex",
            lambda xp: lambda x: xp.abs(xp.astype(x, xp.complex128) * (1 + 2j)),
            (a23,),
        )
    ]
    out["asarray"] = [Case("identity", lambda xp: lambda x: xp.asarray(x) * 2, (a23,))]
    out["tril"] = [
        Case("k=0", lambda xp: xp.tril, (arr((3, 3)),)),
        Case("k=1", lambda xp: lambda x: xp.tril(x, k=1), (a23,)),
    ]
    out["triu"] = [Case("k=-1", lambda xp: lambda x: xp.triu(x, k=-1), (a23,))]
    out["meshgrid"] = [
        Case(
            f"{ix}",
            lambda xp, ix=ix: lambda a, b: xp.meshgrid(a, b, indexing=ix),
            (arr((2,)), arr((3,))),
        )
        for ix in ("xy", "ij")
    ]


def _indexing_cases(out):
    a = arr((3, 4))
    idx = np.array([2, 0, 2, 1])

    def getitem(key_fn):
        return lambda xp: lambda x: x[key_fn(xp)]

    out["__getitem__"] = [
        Case("basic", getitem(lambda xp: (slice(None, None, -1), slice(1, 3))), (a,)),
        Case("int and ellipsis", getitem(lambda xp: (1, ...)), (a,)),
        Case("newaxis", getitem(lambda xp: (None, 0, slice(None))), (a,), NUMPY_ONLY),
        Case("int array dup", getitem(lambda xp: (xp.asarray(idx), slice(None))), (a,), NUMPY_ONLY),
        Case(
            "two int arrays", getitem(lambda xp: (xp.asarray(idx[:3]), xp.asarray([3, 3, 0]))), (a,)
        ),
        Case("mask", getitem(lambda xp: xp.asarray(a > 0)), (a,)),
    ]

    def setitem(key_fn):
        def f(xp):
            def g(x, v):
                y = x * 1.0
                y[key_fn(xp)] = v
                return y

            return g

        return f

    out["__setitem__"] = [
        Case("slice", setitem(lambda xp: (slice(0, 2), 1)), (a, arr((2,)))),
        Case("broadcast value", setitem(lambda xp: (slice(None), slice(1, 3))), (a, arr((2,)))),
        Case("mask scalar-shaped value", setitem(lambda xp: xp.asarray(a > 0)), (a, arr(()))),
        Case(
            "int array",
            setitem(lambda xp: (xp.asarray([2, 0]), slice(None))),
            (a, arr((2, 4))),
            NUMPY_ONLY,
        ),
    ]
    out["take"] = [
        Case(
            f"axis {ax}",
            lambda xp, ax=ax: (
                lambda x: xp.take(x, xp.asarray(idx[:3] if ax == 0 else idx), axis=ax)
            ),
            (a,),
        )
        for ax in (0, 1)
    ]
    out["take"].append(
        Case("1-D", lambda xp: lambda x: xp.take(x, xp.asarray([1, 1, 0])), (arr((3,)),))
    )
    ind = np.array([[0, 0, 2, 1], [1, 1, 1, 0], [3, 3, 2, 2]])
    out["take_along_axis"] = [
        Case("axis -1", lambda xp: lambda x: xp.take_along_axis(x, xp.asarray(ind), axis=-1), (a,)),
        Case(
            "axis 0",
            lambda xp: lambda x: xp.take_along_axis(x, xp.asarray(ind[:2, :] % 3), axis=0),
            (a,),
        ),
    ]


def _linear_algebra_cases(out):
    out["matmul"] = [
        Case(f"{s1} {s2}", lambda xp: xp.matmul, (arr(s1), arr(s2)))
        for s1, s2 in [
            ((2, 3), (3, 4)),
            ((3,), (3, 2)),
            ((2, 3), (3,)),
            ((3,), (3,)),
            ((2, 2, 3), (3, 4)),
            ((1, 2, 3), (5, 3, 2)),
        ]
    ]
    out["matmul"].append(
        Case("complex", lambda xp: xp.matmul, (arr((2, 3), cplx=True), arr((3, 2), cplx=True)))
    )
    out["tensordot"] = [
        Case(
            f"axes={ax}",
            lambda xp, ax=ax: lambda a, b: xp.tensordot(a, b, axes=ax),
            (arr(s1), arr(s2)),
        )
        for ax, s1, s2 in [
            (1, (2, 3), (3, 4)),
            (2, (2, 3, 4), (3, 4, 5)),
            (0, (2,), (3,)),
            (((0, 2), (1, 0)), (3, 2, 4), (4, 3)),
        ]
    ]
    # NumPy's spelling with ints for the axis lists: the forward took it, while the VJP, batching
    # and shape rules each read axes their own way and two of them did not
    out["tensordot"].append(
        Case(
            "axes=(1, 0)",
            lambda xp: lambda a, b: xp.tensordot(a, b, axes=(1, 0)),
            (arr((2, 3)), arr((3, 4))),
            NUMPY_ONLY,
        )
    )
    out["vecdot"] = [
        Case(
            f"axis {ax}",
            lambda xp, ax=ax: lambda a, b: xp.vecdot(a, b, axis=ax),
            (arr((2, 3)), arr((3,)) if ax == -1 else arr((2, 1))),
        )
        for ax in (-1, -2)
    ]
    out["vecdot"].append(
        Case("complex", lambda xp: xp.vecdot, (arr((2, 3), cplx=True), arr((2, 3), cplx=True)))
    )
    out["vecdot"].append(  # a non-negative axis (NumPy's; the standard's are negative)
        Case(
            "axis 0",
            lambda xp: lambda a, b: xp.vecdot(a, b, axis=0),
            (arr((3, 2)), arr((3, 2))),
            NUMPY_ONLY,
        )
    )


def _einsum_cases(out):
    """NumPy's einsum (the row behind numpy.einsum on our arrays): products, traces and
    diagonals (repeated subscripts), ellipses broadcasting a size-1 axis, the implicit output, a
    subscript summed in one operand alone, a 0-d operand, three operands, complex."""
    specs = [
        ("ij,jk->ik", (2, 3), (3, 4)),
        ("ij,jk", (2, 3), (3, 4)),
        ("ii->", (3, 3)),
        ("ii->i", (3, 3)),
        ("iij->ji", (3, 3, 2)),
        ("i,j->ij", (2,), (3,)),
        ("i,i", (3,), (3,)),
        ("ij->ji", (2, 3)),
        ("ij->", (2, 3)),
        ("ijk,j->i", (2, 3, 4), (3,)),
        ("...ij,...jk->...ik", (2, 2, 3), (1, 3, 4)),
        ("ij,jk,kl->il", (2, 3), (3, 4), (4, 2)),
        (",ij->ij", (), (2, 3)),
        ("bij,bj->bi", (2, 3, 4), (2, 4)),
    ]
    out["_einsum"] = [
        Case(
            spec,
            lambda xp, spec=spec: lambda *ops: xp._einsum(spec, *ops),
            tuple(arr(sh) for sh in shapes),
        )
        for spec, *shapes in specs
    ]
    out["_einsum"].append(
        Case(
            "complex",
            lambda xp: lambda a, b: xp._einsum("ij,jk->ik", a, b),
            (arr((2, 3), cplx=True), arr((3, 2), cplx=True)),
        )
    )


# singular 3 x 3 matrices whose LU has its zero pivot last, and first
_RANK_2 = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
_ZERO_COLUMN = np.array([[0.0, 1.0, 2.0], [0.0, 3.0, 4.0], [0.0, 5.0, 7.0]])


def _linalg_cases(out):
    L = "linalg."
    sq = arr((3, 3)) + 3 * np.eye(3)
    out[L + "inv"] = [
        Case("3x3", lambda xp: xp.linalg.inv, (sq,)),
        Case("batch", lambda xp: xp.linalg.inv, (arr((2, 3, 3)) + 3 * np.eye(3),)),
        Case("complex", lambda xp: xp.linalg.inv, (arr((2, 2), cplx=True) + 3 * np.eye(2),)),
    ]
    out[L + "det"] = [
        Case("3x3", lambda xp: xp.linalg.det, (sq,)),
        Case("complex", lambda xp: xp.linalg.det, (arr((2, 2), cplx=True) + 2 * np.eye(2),)),
        # singular matrices: det is a polynomial, its gradient the cofactor matrix
        Case("rank 2 of 3", lambda xp: xp.linalg.det, (_RANK_2,)),
        Case("zero first column", lambda xp: xp.linalg.det, (_ZERO_COLUMN,)),
        Case(
            "rank 1 of 3", lambda xp: xp.linalg.det, (np.outer([1.0, 2.0, -1.0], [2.0, -1.0, 0.5]),)
        ),
        Case("singular beside regular", lambda xp: xp.linalg.det, (np.stack([_RANK_2, sq]),)),
        Case(
            "complex rank 1 of 2",
            lambda xp: xp.linalg.det,
            (np.array([[1 + 1j, 2 - 1j], [2 + 2j, 4 - 2j]]),),
        ),
    ]
    out["_cofactor"] = [
        Case("3x3", lambda xp: xp._cofactor, (sq,)),
        Case("batch", lambda xp: xp._cofactor, (np.stack([sq, sq.T + np.eye(3)]),)),
        Case("complex", lambda xp: xp._cofactor, (sq + 0.5j * sq.T,)),
    ]
    out[L + "slogdet"] = [
        Case("real", lambda xp: xp.linalg.slogdet, (sq,)),
        Case(
            "negative det",
            lambda xp: xp.linalg.slogdet,
            (np.diag([-1.0, 2.0, 3.0]) + 0.1 * arr((3, 3)),),
        ),
        Case("complex", lambda xp: xp.linalg.slogdet, (arr((2, 2), cplx=True) + 2 * np.eye(2),)),
    ]
    out[L + "solve"] = [
        Case("matrix rhs", lambda xp: xp.linalg.solve, (sq, arr((3, 2)))),
        Case("vector rhs", lambda xp: xp.linalg.solve, (sq, arr((3,)))),
        Case("batch", lambda xp: xp.linalg.solve, (arr((2, 3, 3)) + 3 * np.eye(3), arr((2, 3, 1)))),
    ]
    out[L + "matrix_power"] = [
        Case(f"n={n}", lambda xp, n=n: lambda x: xp.linalg.matrix_power(x, n), (sq / 3,))
        for n in (0, 1, 3, -2)
    ]
    out[L + "cholesky"] = [
        Case(
            f"upper={u}",
            lambda xp, u=u: lambda a: xp.linalg.cholesky(a @ a.mT + 3 * xp.eye(3), upper=u),
            (arr((3, 3)),),
        )
        for u in (False, True)
    ]
    out[L + "eigh"] = [
        Case(
            "sym",
            lambda xp: lambda a: (lambda w, v: (w, v * v))(*xp.linalg.eigh(a + a.mT)),
            (arr((3, 3)),),
        )
    ]
    out[L + "eigvalsh"] = [
        Case("sym", lambda xp: lambda a: xp.linalg.eigvalsh(a + a.mT), (arr((3, 3)),))
    ]
    out[L + "eigvals"] = [
        Case("spd, order-free", lambda xp: lambda a: xp.sum(xp.linalg.eigvals(a) ** 2), (spd(3),))
    ]
    for shape, fm in [((4, 3), False), ((3, 4), False), ((3, 3), True)]:
        out.setdefault(L + "svd", []).append(
            Case(
                f"{shape} full={fm}",
                lambda xp, fm=fm: (
                    lambda a: (lambda u, s, vh: (u * u, s, vh * vh))(
                        *xp.linalg.svd(a, full_matrices=fm)
                    )
                ),
                (arr(shape),),
            )
        )
    out[L + "svdvals"] = [
        Case(f"{s}", lambda xp: xp.linalg.svdvals, (arr(s),)) for s in [(4, 3), (3, 4)]
    ]
    out[L + "qr"] = [Case(f"{s}", lambda xp: xp.linalg.qr, (arr(s),)) for s in [(4, 3), (3, 3)]]
    out[L + "pinv"] = [Case(f"{s}", lambda xp: xp.linalg.pinv, (arr(s),)) for s in [(4, 3), (3, 4)]]
    out[L + "matrix_norm"] = [
        Case(
            f"ord={o} keepdims={k}",
            lambda xp, o=o, k=k: lambda x: xp.linalg.matrix_norm(x, ord=o, keepdims=k),
            (arr((3, 4)),),
        )
        for o in ("fro", "nuc", 2, -2, 1, -1, float("inf"), -float("inf"))
        for k in (False, True)
    ]
    out[L + "matrix_norm"].append(
        Case("fro complex", lambda xp: xp.linalg.matrix_norm, (arr((2, 3), cplx=True),))
    )
    out[L + "vector_norm"] = [
        Case(
            f"ord={o} axis={ax} keepdims={k}",
            lambda xp, o=o, ax=ax, k=k: (
                lambda x: xp.linalg.vector_norm(x, ord=o, axis=ax, keepdims=k)
            ),
            (arr((2, 3)),),
        )
        for o in (2, 1, 3, 0.5, float("inf"), -float("inf"))
        for ax in (None, 0, -1, (0, 1))
        for k in (False, True)
    ]
    out[L + "vector_norm"].append(
        Case("complex", lambda xp: xp.linalg.vector_norm, (arr((2, 3), cplx=True),))
    )
    out[L + "trace"] = [
        Case(
            f"offset={k}", lambda xp, k=k: lambda x: xp.linalg.trace(x, offset=k), (arr((2, 3, 4)),)
        )
        for k in (0, 1, -1)
    ]
    out[L + "diagonal"] = [
        Case(
            f"offset={k}",
            lambda xp, k=k: lambda x: xp.linalg.diagonal(x, offset=k),
            (arr((2, 3, 4)),),
        )
        for k in (0, 2, -1)
    ]
    out[L + "cross"] = [
        Case("3-vectors", lambda xp: xp.linalg.cross, (arr((2, 3)), arr((3,)))),
        Case(
            "axis -2",
            lambda xp: lambda a, b: xp.linalg.cross(a, b, axis=-2),
            (arr((3, 2)), arr((3, 2))),
        ),
        Case(
            "axis 0",
            lambda xp: lambda a, b: xp.linalg.cross(a, b, axis=0),
            (arr((3, 2)), arr((3, 2))),
            NUMPY_ONLY,
        ),
    ]
    out[L + "outer"] = [
        Case("real", lambda xp: xp.linalg.outer, (arr((3,)), arr((2,)))),
        Case("complex", lambda xp: xp.linalg.outer, (arr((3,), cplx=True), arr((2,), cplx=True))),
    ]
    # wide QR (m < n: complete is reduced), drawn last so the cases above keep their values
    out[L + "qr"] += [Case(f"{s}", lambda xp: xp.linalg.qr, (arr(s),)) for s in [(3, 4), (2, 5)]]
    out[L + "qr"] += [
        Case(f"{s} complete", lambda xp: lambda a: xp.linalg.qr(a, mode="complete"), (arr(s),))
        for s in [(3, 3), (3, 5)]
    ]
    out[L + "qr"].append(Case("stack (2, 3, 4)", lambda xp: xp.linalg.qr, (arr((2, 3, 4)),)))


def _fft_cases(out):
    F = "fft."
    for name in ("fft", "ifft"):
        out[F + name] = [
            Case(
                f"n={n} norm={nm}",
                lambda xp, name=name, n=n, nm=nm: lambda x: getattr(xp.fft, name)(x, n=n, norm=nm),
                (arr((2, 5), cplx=True),),
            )
            for n in (None, 3, 8)
            for nm in ("backward", "ortho", "forward")
        ]
    for name in ("fftn", "ifftn"):
        out[F + name] = [
            Case(
                f"s={s} axes={ax}",
                lambda xp, name=name, s=s, ax=ax: (
                    lambda x: getattr(xp.fft, name)(x, s=s, axes=ax, norm="ortho")
                ),
                (arr((2, 3, 4), cplx=True),),
            )
            for s, ax in [(None, None), ((3, 2), (0, 2)), (None, (1,))]
        ]
    out[F + "rfft"] = [
        Case(
            f"n={n} norm={nm}",
            lambda xp, n=n, nm=nm: lambda x: xp.fft.rfft(x, n=n, norm=nm),
            (arr((2, 6)),),
        )
        for n in (None, 4, 9)
        for nm in ("backward", "ortho", "forward")
    ]
    out[F + "irfft"] = [
        Case(
            f"n={n} norm={nm}",
            lambda xp, n=n, nm=nm: lambda x: xp.fft.irfft(x, n=n, norm=nm),
            (arr((2, 4), cplx=True),),
        )
        for n in (None, 5, 7, 4)
        for nm in ("backward", "ortho", "forward")
    ]
    out[F + "hfft"] = [
        Case(
            f"n={n} norm={nm}",
            lambda xp, n=n, nm=nm: lambda x: xp.fft.hfft(x, n=n, norm=nm),
            (arr((2, 4), cplx=True),),
        )
        for n in (None, 5)
        for nm in ("backward", "ortho")
    ]
    out[F + "ihfft"] = [
        Case(
            f"n={n} norm={nm}",
            lambda xp, n=n, nm=nm: lambda x: xp.fft.ihfft(x, n=n, norm=nm),
            (arr((2, 6)),),
        )
        for n in (None, 5)
        for nm in ("backward", "forward")
    ]
    out[F + "rfftn"] = [
        Case(
            f"s={s} axes={ax}",
            lambda xp, s=s, ax=ax: lambda x: xp.fft.rfftn(x, s=s, axes=ax),
            (arr((2, 3, 4)),),
        )
        for s, ax in [(None, None), ((3, 6), (0, 2))]
    ]
    out[F + "irfftn"] = [
        Case(
            f"s={s} axes={ax}",
            lambda xp, s=s, ax=ax: lambda x: xp.fft.irfftn(x, s=s, axes=ax),
            (arr((2, 3, 3), cplx=True),),
        )
        for s, ax in [(None, None), ((3, 5), (1, 2)), ((2, 4), (0, 2))]
    ]
    for name in ("fftshift", "ifftshift"):
        out[F + name] = [
            Case(
                f"axes={ax}",
                lambda xp, name=name, ax=ax: lambda x: getattr(xp.fft, name)(x, axes=ax),
                (arr((3, 4)),),
            )
            for ax in (None, 0, (0, 1))
        ]


def _nn_cases(out):
    """The convolution, pooling and relu rows, through their public face (pycograd_xp.nn)."""
    from pycograd_xp import nn

    conv2d = [  # x shape, w shape, stride, padding, dilation, groups
        ((2, 3, 5, 6), (4, 3, 3, 2), 1, 0, 1, 1),
        ((1, 2, 7, 6), (3, 2, 3, 3), 2, 1, 1, 1),
        ((2, 2, 7, 7), (2, 2, 2, 3), (2, 3), (2, 1), (2, 1), 1),
        ((1, 4, 5, 5), (6, 2, 3, 3), 1, 1, 1, 2),
        ((1, 1, 4, 4), (2, 1, 1, 1), 3, 0, 1, 1),
        ((1, 2, 4, 4), (9, 2, 3, 3), 1, 0, 1, 1),  # more channels than positions: one 2-D
        ((2, 3, 4, 19), (2, 3, 2, 3), 1, 0, 1, 1),  # product for w; rows of 17: narrow columns
    ]
    out["_conv2d"] = [
        Case(
            f"x{xs} w{ws} s={s} p={p} d={d} g={g}",
            lambda xp, s=s, p=p, d=d, g=g: (
                lambda x, w: nn.conv2d(x, w, stride=s, padding=p, dilation=d, groups=g)
            ),
            (arr(xs), arr(ws)),
        )
        for xs, ws, s, p, d, g in conv2d
    ]
    out["_conv2d"].append(
        Case(
            "with bias",
            lambda xp: lambda x, w, b: nn.conv2d(x, w, b, padding=1),
            (arr((2, 2, 4, 4)), arr((3, 2, 3, 3)), arr((3,))),
        )
    )
    conv1d = [
        ((2, 3, 7), (4, 3, 3), 1, 0, 1, 1),
        ((1, 2, 9), (2, 2, 2), 2, 2, 3, 1),
        ((2, 4, 6), (4, 1, 3), 1, 1, 1, 4),
    ]
    out["_conv1d"] = [
        Case(
            f"x{xs} w{ws} s={s} p={p} d={d} g={g}",
            lambda xp, s=s, p=p, d=d, g=g: (
                lambda x, w: nn.conv1d(x, w, stride=s, padding=p, dilation=d, groups=g)
            ),
            (arr(xs), arr(ws)),
        )
        for xs, ws, s, p, d, g in conv1d
    ]
    pools = [
        ((2, 3, 6, 6), 2, None, 0),
        ((1, 2, 7, 5), 3, 2, 1),
        ((2, 1, 5, 6), (2, 3), 1, 0),
        ((1, 2, 5, 5), 2, (1, 2), (1, 0)),
    ]
    for how in ("max", "avg"):
        f = getattr(nn, f"{how}_pool2d")
        out[f"_{how}_pool2d"] = [
            Case(
                f"x{xs} k={k} s={s} p={p}",
                lambda xp, f=f, k=k, s=s, p=p: lambda x: f(x, k, s, p),
                (arr(xs),),
            )
            for xs, k, s, p in pools
        ]
    out["_conv2d"].append(
        Case(
            "bias in the product, s=2",
            lambda xp: lambda x, w, b: nn.conv2d(x, w, b, stride=2),
            (arr((2, 3, 7, 7)), arr((4, 3, 3, 3)), arr((4,))),
        )
    )
    out["_conv2d"].append(
        Case(
            "bias s=2 p=1 g=2",
            lambda xp: lambda x, w, b: nn.conv2d(x, w, b, stride=2, padding=1, groups=2),
            (arr((2, 4, 5, 5)), arr((6, 2, 3, 3)), arr((6,))),
        )
    )
    out["_conv1d"].append(
        Case(
            "bias",
            lambda xp: lambda x, w, b: nn.conv1d(x, w, b, padding=1),
            (arr((2, 3, 7)), arr((4, 3, 3)), arr((4,))),
        )
    )
    out["_relu"] = [
        Case(f"x{xs}", lambda xp: nn.relu, (arr(xs, away=0.05),))
        for xs in ((3, 4), (2, 3, 5, 5), ())
    ]
    out["_linear"] = [
        Case(f"x{xs} w{ws}", lambda xp: nn.linear, (arr(xs), arr(ws), arr(ws[1:])))
        for xs, ws in (
            ((4, 3), (3, 5)),
            ((3,), (3, 2)),  # one example: no axis to sum the bias's cotangent over
            ((2, 3, 4), (4, 3)),  # a stack: one product over its rows
            ((0, 3), (3, 2)),  # no example
            ((4, 1), (1, 1)),
        )
    ]
    _transformer_cases(out)


def _transformer_cases(out):
    """The fused rows of transformers (activations, normalisations, cross-entropy, attention),
    through pycograd_xp.nn; a case over more than ``ops.nn.pieces.PIECE_BYTES`` for each row that
    works block by block."""
    from pycograd_xp import nn

    big = (40, 1000)  # 320 kB of float64: blocks
    for row, f, where in (
        ("_gelu_tanh", nn.gelu, ("numpy", "array_api_strict")),
        ("_gelu", lambda x: nn.gelu(x, approximate=False), NUMPY_ONLY),  # erf: scipy's
        ("_sigmoid", nn.sigmoid, ("numpy", "array_api_strict")),
        ("_silu", nn.silu, ("numpy", "array_api_strict")),
        ("_softplus", nn.softplus, ("numpy", "array_api_strict")),
    ):
        out[row] = [
            Case(f"x{xs}", lambda xp, f=f: f, (arr(xs, -4.0, 4.0),), where)
            for xs in ((3, 4), (2, 3, 5), (), big)
        ]
        out[row].append(Case("far", lambda xp, f=f: f, (arr((2, 3), -40.0, 40.0),), where))
    out["_layer_norm"] = [
        Case("(4, 6) w b", lambda xp: nn.layer_norm, (arr((4, 6)), arr((6,)), arr((6,)))),
        Case("(2, 3, 5)", lambda xp: nn.layer_norm, (arr((2, 3, 5)),)),
        Case("(5,) w", lambda xp: nn.layer_norm, (arr((5,)), arr((5,)))),
        Case(
            "axis (-2, -1) w",
            lambda xp: lambda x, w: nn.layer_norm(x, w, axis=(-2, -1)),
            (arr((2, 3, 5)), arr((3, 5))),
        ),
        Case(
            "axis 0 w b broadcast",
            lambda xp: lambda x, w, b: nn.layer_norm(x, w, b, axis=0),
            (arr((4, 3)), arr((4, 1)), arr((3,))),
        ),
        Case(
            "blocks w b",
            lambda xp: lambda x, w, b: nn.layer_norm(x, w, b, eps=1e-3),
            (arr((80, 500)), arr((500,)), arr((500,))),
        ),
        Case("blocks (3, 40, 300)", lambda xp: nn.layer_norm, (arr((3, 40, 300)),)),
    ]
    out["_rms_norm"] = [
        Case("(4, 6) w", lambda xp: nn.rms_norm, (arr((4, 6)), arr((6,)))),
        Case("(2, 3, 5)", lambda xp: nn.rms_norm, (arr((2, 3, 5)),)),
        Case(
            "axis 0 w broadcast",
            lambda xp: lambda x, w: nn.rms_norm(x, w, axis=0),
            (arr((4, 3)), arr((4, 1))),
        ),
        Case("blocks w", lambda xp: nn.rms_norm, (arr((80, 500)), arr((500,)))),
    ]
    labels = _rng.integers(0, 4, (5,))
    probs = _rng.dirichlet(np.ones(4), (5,))
    out["_cross_entropy"] = [
        Case(
            "integer labels",
            lambda xp: lambda z: nn.cross_entropy(z, xp.asarray(labels)),
            (arr((5, 4)),),
        ),
        Case(
            "integer labels, none",
            lambda xp: lambda z: nn.cross_entropy(z, xp.asarray(labels[:3]), reduction="none"),
            (arr((2, 3, 4)),),
        ),
        Case("probabilities", lambda xp: nn.cross_entropy, (arr((5, 4)), probs)),
        Case(
            "probabilities, sum, large",
            lambda xp: lambda z, p: nn.cross_entropy(z, p, reduction="sum"),
            (arr((5, 4), 300.0, 320.0), probs),
        ),
        Case(
            "blocks, integer labels",
            lambda xp: lambda z: nn.cross_entropy(z, xp.asarray(np.arange(120) % 300)),
            (arr((120, 300)),),
        ),
        Case(
            "blocks, probabilities",
            lambda xp: nn.cross_entropy,
            (arr((120, 300)), arr((120, 300), 0.0, 1.0)),
        ),
    ]
    causal_mask = np.tril(np.ones((3, 5), bool))
    mask = _rng.random((2, 1, 3, 5)) > 0.4
    mask[0, 0, 1] = False  # a row masked whole
    out["_attention"] = [
        Case(
            "(2, 3, 4) (2, 5, 4)",
            lambda xp: nn.scaled_dot_product_attention,
            (arr((2, 3, 4)), arr((2, 5, 4)), arr((2, 5, 4))),
        ),
        Case(
            "mask",
            lambda xp: (
                lambda q, k, v: nn.scaled_dot_product_attention(q, k, v, xp.asarray(causal_mask))
            ),
            (arr((2, 3, 4)), arr((2, 5, 4)), arr((2, 5, 3))),
        ),
        Case(
            "causal, self",
            lambda xp: lambda q: nn.scaled_dot_product_attention(q, q, q, is_causal=True),
            (arr((2, 4, 4)),),
        ),
        Case(
            "heads, mask with a row masked whole, scale",
            lambda xp: lambda q, k, v: xp._attention(q, k, v, xp.asarray(mask), scale=0.7)[0],
            (arr((2, 3, 2, 4)), arr((2, 5, 2, 4)), arr((2, 5, 2, 3))),
        ),
        Case(
            "heads, causal and mask",
            lambda xp: lambda q, k, v: xp._attention(q, k, v, xp.asarray(mask), is_causal=True)[0],
            (arr((2, 3, 2, 4)), arr((2, 5, 2, 4)), arr((2, 5, 2, 3))),
        ),
        Case(
            "heads, causal, query blocks",
            lambda xp: lambda q, k, v: xp._attention(q, k, v, is_causal=True)[0],
            (arr((1, 80, 2, 3)), arr((1, 80, 2, 3)), arr((1, 80, 2, 2))),
        ),
        Case(
            "additive mask, causal",
            lambda xp: lambda q, k, v, m: nn.scaled_dot_product_attention(q, k, v, m, True),
            (arr((2, 3, 4)), arr((2, 5, 4)), arr((2, 5, 3)), arr((3, 5))),
        ),
        Case(
            "heads, additive mask broadcast",
            lambda xp: lambda q, k, v, m: xp._attention(q, k, v, m, scale=0.7)[0],
            (arr((2, 3, 2, 4)), arr((2, 5, 2, 4)), arr((2, 5, 2, 3)), arr((2, 1, 1, 5))),
        ),
        Case(
            "broadcast batch",
            lambda xp: lambda q, k, v: xp._attention(q, k, v)[0],
            (arr((2, 3, 1, 4)), arr((5, 1, 4)), arr((1, 5, 1, 4))),
        ),
    ]


# The special rows (pycograd_xp.special): public name, the smooth domain its cases draw from, and
# whether array-api-strict has it (composed of standard functions there; the others need scipy).
SPECIAL_UNARY = {
    "_erf": ("erf", {}, False),
    "_erfc": ("erfc", {}, False),
    "_erfinv": ("erfinv", dict(lo=-0.8, hi=0.8), False),
    "_expit": ("expit", dict(lo=-4.0, hi=4.0), True),
    "_logit": ("logit", dict(lo=0.1, hi=0.9), True),
    "_log_expit": ("log_expit", dict(lo=-4.0, hi=4.0), True),
    "_gammaln": ("gammaln", dict(lo=0.5, hi=4.0), False),
    "_digamma": ("digamma", dict(lo=0.5, hi=4.0), False),
    "_ndtr": ("ndtr", {}, False),
    "_log_ndtr": ("log_ndtr", dict(lo=-4.0, hi=3.0), False),
    "_ndtri": ("ndtri", dict(lo=0.1, hi=0.9), False),
    "_i0": ("i0", {}, False),
    "_i0e": ("i0e", dict(away=0.2), False),  # exp(-|x|): a kink at 0
    "_i1": ("i1", {}, False),
    "_i1e": ("i1e", dict(away=0.2), False),
}


def _special_cases(out):
    """The special rows, through their public face (pycograd_xp.special)."""
    from pycograd_xp import special

    def where(strict):
        return ("numpy", "array_api_strict") if strict else NUMPY_ONLY

    for row, (name, dom, strict) in SPECIAL_UNARY.items():
        f = getattr(special, name)
        out[row] = [
            Case(f"{shape}", lambda xp, f=f: f, (arr(shape, **dom),), where(strict))
            for shape in SHAPES
        ]
    # far from the origin, where the stable forms matter
    for row, lo, hi in (
        ("_log_ndtr", -40.0, -20.0),
        ("_expit", -40.0, 40.0),
        ("_log_expit", -40.0, 40.0),
        ("_gammaln", 20.0, 60.0),
        ("_i0e", 20.0, 60.0),
        ("_i1e", -60.0, -20.0),
        ("_logit", 0.001, 0.01),
    ):
        name, _, strict = SPECIAL_UNARY[row]
        f = getattr(special, name)
        out[row].append(
            Case(f"[{lo}, {hi}]", lambda xp, f=f: f, (arr((2, 3), lo, hi),), where(strict))
        )
    # the limit 1/2 of i1' and i1e' at 0
    at_zero = np.array([0.0, 0.7, -1.3])
    out["_i1"].append(Case("at 0", lambda xp: special.i1, (at_zero,), NUMPY_ONLY))
    out["_i1e"].append(Case("at 0", lambda xp: special.i1e, (at_zero,), NUMPY_ONLY))
    out["_polygamma"] = [
        Case(
            f"n={n} {shape}",
            lambda xp, n=n: lambda x: special.polygamma(n, x),
            (arr(shape, 0.5, 4.0),),
            NUMPY_ONLY,
        )
        for n in (0, 1, 2, 3)
        for shape in ((), (2, 3))
    ]
    for row, name, dom in (
        ("_xlogy", "xlogy", dict(lo=0.5, hi=2.0)),
        ("_xlog1py", "xlog1py", dict(lo=-0.5, hi=2.0)),
    ):
        f = getattr(special, name)
        out[row] = [
            Case(f"{s1} {s2}", lambda xp, f=f: f, (arr(s1), arr(s2, **dom))) for s1, s2 in PAIRS
        ]
        out[row] += [
            Case("array, scalar", lambda xp, f=f: lambda x: f(x, 1.5), (arr((2, 3)),)),
            Case("scalar, array", lambda xp, f=f: lambda y: f(1.5, y), (arr((2, 3), **dom),)),
            Case("0, array", lambda xp, f=f: lambda y: f(0.0, y) + y, (arr((2, 3), **dom),)),
            # x == 0 differentiated where y > 0: smooth there, d/dx = log(one + y)
            Case(
                "x at 0", lambda xp, f=f: f, (np.array([0.0, 0.5, 0.0]), np.array([0.7, 1.3, 2.0]))
            ),
        ]
    for name in ("softmax", "log_softmax"):
        f = getattr(special, name)
        out["_" + name] = [
            Case(
                f"{shape} axis={axis}",
                lambda xp, f=f, axis=axis: lambda x: f(x, axis=axis),
                (arr(shape, -3.0, 3.0),),
            )
            for shape, axes in (((), (None,)), ((3,), (None, 0, -1)), ((2, 3), AXES_2D))
            for axis in axes
        ]
        out["_" + name].append(
            Case("large", lambda xp, f=f: lambda x: f(x, axis=-1), (arr((2, 3), 300.0, 320.0),))
        )
    out["_logsumexp"] = [
        Case(
            f"{shape} axis={axis} keepdims={keepdims}",
            lambda xp, axis=axis, keepdims=keepdims: (
                lambda x: special.logsumexp(x, axis=axis, keepdims=keepdims)
            ),
            (arr(shape, -3.0, 3.0),),
        )
        for shape, axes in (((), (None,)), ((3,), (None, 0, -1)), ((2, 3), AXES_2D))
        for axis in axes
        for keepdims in (False, True)
    ]
    out["_logsumexp"] += [
        Case(
            "large", lambda xp: lambda x: special.logsumexp(x, axis=1), (arr((2, 3), 300.0, 320.0),)
        ),
        Case(
            "ties",
            lambda xp: lambda x: special.logsumexp(x, axis=1),
            (np.array([[1.0, 2.0, 2.0], [0.5, -1.0, 0.5]]),),
        ),
        Case(
            "(2, 3, 4) axis=(0, 2)",
            lambda xp: lambda x: special.logsumexp(x, axis=(0, 2)),
            (arr((2, 3, 4)),),
        ),
    ]
    # drawn last so the cases above keep their values
    out["_entr"] = [
        Case(f"{shape}", lambda xp: special.entr, (arr(shape, 0.2, 3.0),)) for shape in SHAPES
    ]
    for row, name, strict in (("_rel_entr", "rel_entr", True), ("_betaln", "betaln", False)):
        f = getattr(special, name)
        where_ = ("numpy", "array_api_strict") if strict else NUMPY_ONLY
        out[row] = [
            Case(f"{s1} {s2}", lambda xp, f=f: f, (arr(s1, 0.2, 3.0), arr(s2, 0.2, 3.0)), where_)
            for s1, s2 in PAIRS
        ]
        out[row] += [
            Case(
                "array, scalar",
                lambda xp, f=f: lambda x: f(x, 1.5),
                (arr((2, 3), 0.2, 3.0),),
                where_,
            ),
            Case(
                "scalar, array",
                lambda xp, f=f: lambda y: f(1.5, y),
                (arr((2, 3), 0.2, 3.0),),
                where_,
            ),
        ]
    # kl_div as rel_entr; huber across its kink: r within and beyond delta
    out["_kl_div"] = [
        Case(f"{s1} {s2}", lambda xp: special.kl_div, (arr(s1, 0.2, 3.0), arr(s2, 0.2, 3.0)))
        for s1, s2 in PAIRS
    ]
    out["_kl_div"].append(
        Case("0, array", lambda xp: lambda y: special.kl_div(0.0, y), (arr((2, 3), 0.2, 3.0),))
    )
    out["_huber"] = [
        Case(f"{s1} {s2}", lambda xp: special.huber, (arr(s1, 0.5, 1.5), arr(s2, -3.0, 3.0)))
        for s1, s2 in PAIRS
    ]
    out["_huber"].append(
        Case("delta 1.0", lambda xp: lambda r: special.huber(1.0, r), (arr((2, 3), -3.0, 3.0),))
    )
    # boxcox and boxcox1p in x and lmbda, lmbda 0 and near it included (the series of its
    # derivative)
    for row, name in (("_boxcox", "boxcox"), ("_boxcox1p", "boxcox1p")):
        f = getattr(special, name)
        out[row] = [
            Case(f"{s1} {s2}", lambda xp, f=f: f, (arr(s1, 0.3, 3.0), arr(s2, -1.0, 1.0)))
            for s1, s2 in PAIRS
        ]
        out[row].append(
            Case(
                "lmbda at and near 0",
                lambda xp, f=f: f,
                (arr((4,), 0.3, 3.0), np.array([0.0, 1e-7, -2e-4, 0.6])),
            )
        )
    # the incomplete functions, in x (their shape parameters are constants: no gradient)
    for row, name, dom in (
        ("_gammainc", "gammainc", dict(lo=0.2, hi=4.0)),
        ("_gammaincc", "gammaincc", dict(lo=0.2, hi=4.0)),
        ("_betainc", "betainc", dict(lo=0.05, hi=0.95)),
        ("_fdtr", "fdtr", dict(lo=0.2, hi=4.0)),
        ("_fdtrc", "fdtrc", dict(lo=0.2, hi=4.0)),
    ):
        f = getattr(special, name)
        shape_params = {"gammainc": (1.5,), "gammaincc": (1.5,)}.get(name, (1.5, 2.5))
        out[row] = [
            Case(
                f"{shape} scalar parameters",
                lambda xp, f=f, c=shape_params: lambda x: f(*c, x),
                (arr(shape, **dom),),
                NUMPY_ONLY,
            )
            for shape in SHAPES
        ]
        params = [arr((2, 1), 0.5, 3.0) for _ in shape_params]  # constant arrays, broadcast
        out[row].append(
            Case(
                "array parameters",
                lambda xp, f=f, c=params: lambda x: f(*(xp.asarray(p) for p in c), x),
                (arr((3,), **dom),),
                NUMPY_ONLY,
            )
        )
    # rel_entr outside x > 0, y > 0: 0 or inf, derivatives 0 (x = 0 as xlogy's, and JAX's)
    out["_rel_entr"].append(
        Case(
            "0, array",
            lambda xp: lambda y: special.rel_entr(0.0, y) + y,
            (arr((2, 3), 0.2, 3.0),),
        )
    )


def cases() -> dict[str, list[Case]]:
    """Every case, with the same values on every call: each group draws from a generator seeded
    by its own name, so a case added to one group moves no other group's values (and no suite
    sees other values than another because it called this later)."""
    global _rng
    out: dict[str, list[Case]] = {}
    for build in (
        _unary_cases,
        _large_cases,
        _binary_cases,
        _reduction_cases,
        _manipulation_cases,
        _indexing_cases,
        _linear_algebra_cases,
        _einsum_cases,
        _linalg_cases,
        _fft_cases,
        _nn_cases,
        _special_cases,
    ):
        _rng = np.random.default_rng(zlib.crc32(build.__name__.encode()))
        build(out)
    return out


# More backends for every case that runs on NumPy, named in this variable (comma-separated,
# e.g. "cupy": tools/gpu_check.py runs the suites so on a GPU; their tests skip cleanly where a
# backend is not installed or, for CuPy, where no CUDA device answers)
EXTRA_BACKENDS = "PYCOGRAD_CONFORMANCE_BACKENDS"


def params() -> list:
    """``pytest.param(backend, name, case)`` for every case on every backend it runs on: what
    the gradient, JVP and batching suites parametrize over (with ``EXTRA_BACKENDS``' too)."""
    import os

    import pytest

    extra = [b for b in os.environ.get(EXTRA_BACKENDS, "").split(",") if b.strip()]
    return [
        pytest.param(backend, name, case, id=f"{backend}-{name}-{case.label}")
        for name, cs in cases().items()
        for case in cs
        for backend in (
            *case.backends,
            *(b.strip() for b in extra if "numpy" in case.backends and b not in case.backends),
        )
    ]
