"""Shape rules of the non-differentiable rows, checked against the real backend.

The gradient-conformance sweeps (test_rows.py) cover the differentiable rows; here every row
declared non-differentiable (comparisons, bitwise and logical functions, rounding, argmax/argmin,
argsort, searching and counting, isin, creation functions, the dtype functions, matrix_rank,
fftfreq/rfftfreq...) runs once on the NumPy-backed namespace and once on the abstract one, and the
outputs must have the same shapes and dtypes (the same values, for answers that are not arrays:
dtypes, finfo/iinfo, booleans, shapes). Data-dependent shapes (nonzero, unique_*) are compared on
arguments whose values the abstract side knows (constants), or on data where the upper bound is
the exact answer (every element nonzero, every value distinct). A few differentiable rows whose
shapes depend on values or dtypes (astype, sign, unique_* with known constants) ride along.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import pycograd_xp as pg
from pycograd_xp._abstract import AbstractArray, Tracker
from pycograd_xp._state import Abstract, interpreting
from pycograd_xp.memory._project import abstract_namespace
from pycograd_xp.namespace._array import make
from pycograd_xp.ops import REGISTRY

XP = pg.namespace(np)
A = abstract_namespace()
RNG = np.random.default_rng(7)


@dataclass
class Case:
    row: str  # the row the case exercises
    label: str
    f: Callable[[Any], Callable[..., Any]]  # f(ns) -> function of the arrays
    args: tuple[np.ndarray, ...] = ()
    known: bool = False  # the abstract arguments carry their values (constants)


def _data(shape, dtype, nonzero=False):
    dt = np.dtype(dtype)
    if dt.kind == "b":
        a = RNG.integers(0, 2, shape).astype(bool)
        return np.ones(shape, bool) if nonzero else a
    if dt.kind in "iu":
        lo = 1 if nonzero else (0 if dt.kind == "u" else -3)
        return RNG.integers(lo, 4, shape).astype(dt)
    a = RNG.uniform(-3, 3, shape)
    if dt.kind == "c":
        a = a + 1j * RNG.uniform(-3, 3, shape)
    if nonzero:
        a = np.where(a == 0, 1, a)
    return np.asarray(a.astype(dt))


SHAPES = [(), (3,), (2, 3)]
PAIRS = [((2, 3), (2, 3)), ((2, 3), (3,)), ((1, 3), (2, 1)), ((), (2, 3))]
UNARY = {
    "round": ["int8", "float32", "float64", "complex128"],
    "ceil": ["int16", "uint8", "float32", "float64"],
    "floor": ["int32", "float32", "float64"],
    "trunc": ["int64", "float32", "float64"],
    "sign": ["int8", "float32", "float64", "complex128"],
    "isfinite": ["int8", "float32", "complex128"],
    "isinf": ["uint16", "float64", "complex64"],
    "isnan": ["int64", "float32", "complex128"],
    "signbit": ["float32", "float64"],
    "bitwise_invert": ["bool", "int8", "uint32", "int64"],
    "logical_not": ["bool"],
}
BINARY = {
    "greater": ["int8/int32", "float32/float64", "uint8/int16"],
    "greater_equal": ["int64/int64", "float32/float32"],
    "less": ["uint16/uint16", "float64/float32"],
    "less_equal": ["int8/uint8", "float64/float64"],
    "equal": ["bool/bool", "int32/int64", "complex64/complex128"],
    "not_equal": ["bool/bool", "float32/float64", "complex128/complex128"],
    "floor_divide": ["int8/int8", "int16/int32", "float32/float64"],
    "bitwise_and": ["bool/bool", "int8/int16", "uint8/uint32"],
    "bitwise_or": ["bool/bool", "int64/int64", "uint16/uint8"],
    "bitwise_xor": ["bool/bool", "int32/int8"],
    "bitwise_left_shift": ["int8/int8", "uint16/uint8", "int64/int32"],
    "bitwise_right_shift": ["int32/int32", "uint8/uint64"],
    "logical_and": ["bool/bool"],
    "logical_or": ["bool/bool"],
    "logical_xor": ["bool/bool"],
}
SCALARS = {
    "greater": 1,
    "less": 2.5,
    "equal": 1,
    "floor_divide": 2,
    "bitwise_and": 3,
    "bitwise_left_shift": 1,
    "logical_or": True,
}


def _elementwise_cases():
    out = []
    for name, dtypes in UNARY.items():
        out += [
            Case(name, f"{dt} {s}", lambda ns, n=name: getattr(ns, n), (_data(s, dt),))
            for dt in dtypes
            for s in SHAPES
        ]
    for name, combos in BINARY.items():
        for combo in combos:
            d1, d2 = combo.split("/")
            shift = "shift" in name
            out += [
                Case(
                    name,
                    f"{combo} {s1} {s2}",
                    lambda ns, n=name: getattr(ns, n),
                    (
                        _data(s1, d1, nonzero=True),
                        np.abs(_data(s2, d2, nonzero=True))
                        if shift
                        else _data(s2, d2, nonzero=True),
                    ),
                )
                for s1, s2 in PAIRS
            ]
    for name, scalar in SCALARS.items():
        dt = "bool" if isinstance(scalar, bool) else ("int16" if name != "less" else "float32")
        out.append(
            Case(
                name,
                f"{dt} and {scalar!r}",
                lambda ns, n=name, v=scalar: lambda x: getattr(ns, n)(x, v),
                (_data((2, 3), dt, nonzero=True),),
            )
        )
        out.append(
            Case(
                name,
                f"{scalar!r} and {dt}",
                lambda ns, n=name, v=scalar: lambda x: getattr(ns, n)(v, x),
                (_data((3,), dt, nonzero=True),),
            )
        )
    return out


def _creation_cases():
    c = []
    for args, kw in [
        ((5,), {}),
        ((2, 11, 3), {}),
        ((0, 1, 0.1), {}),
        ((1.5,), {}),
        ((10, 0, -3), {}),
        ((5,), {"dtype": "float32"}),
        ((3, 3), {}),
        ((-2.5, 4, 0.5), {"dtype": "float64"}),
        ((0, -1), {}),
        ((0.5, 3), {}),
        ((1, 2, 0.3), {}),
        ((5,), {"dtype": "uint8"}),
    ]:
        c.append(
            Case(
                "arange",
                f"{args} {kw}",
                lambda ns, a=args, k=kw: (
                    lambda: ns.arange(*a, **{n: getattr(ns, v) for n, v in k.items()})
                ),
            )
        )
    for name in ("empty", "zeros", "ones"):
        for shape, dt in [((2, 3), None), (4, "int8"), ((), "complex64"), ((0, 2), "bool")]:
            c.append(
                Case(
                    name,
                    f"{shape} {dt}",
                    lambda ns, n=name, s=shape, d=dt: (
                        lambda: getattr(ns, n)(s, **({"dtype": getattr(ns, d)} if d else {}))
                    ),
                )
            )
    for name in ("empty_like", "zeros_like", "ones_like"):
        for dt in (None, "int16", "float32"):
            c.append(
                Case(
                    name,
                    f"{dt}",
                    lambda ns, n=name, d=dt: (
                        lambda x: getattr(ns, n)(x, **({"dtype": getattr(ns, d)} if d else {}))
                    ),
                    (_data((2, 3), "float64"),),
                )
            )
    for fill, dt in [
        (True, None),
        (3, None),
        (2.5, None),
        (1j, None),
        (7, "uint8"),
        (1.0, "float32"),
    ]:
        c.append(
            Case(
                "full",
                f"{fill!r} {dt}",
                lambda ns, v=fill, d=dt: (
                    lambda: ns.full((2, 3), v, **({"dtype": getattr(ns, d)} if d else {}))
                ),
            )
        )
        c.append(
            Case(
                "full_like",
                f"{fill!r} {dt}",
                lambda ns, v=fill, d=dt: (
                    lambda x: ns.full_like(x, v, **({"dtype": getattr(ns, d)} if d else {}))
                ),
                (_data((3,), "float64"),),
            )
        )
    for args, kw in [
        ((3,), {}),
        ((3, 4), {"k": 1}),
        ((4, 2), {"k": -1, "dtype": "int32"}),
        ((2,), {"dtype": "bool"}),
        ((2, 3), {"k": 5}),
        ((0,), {}),
    ]:
        c.append(
            Case(
                "eye",
                f"{args} {kw}",
                lambda ns, a=args, k=kw: (
                    lambda: ns.eye(
                        *a, **{n: (getattr(ns, v) if n == "dtype" else v) for n, v in k.items()}
                    )
                ),
            )
        )
    for args, kw in [
        ((0, 1), {"num": 5}),
        ((0, 1), {"num": 4, "endpoint": False}),
        ((0, 1j), {"num": 3}),
        ((1, 2), {"num": 6, "dtype": "float32"}),
        ((0, 1), {"num": 0}),
        ((2, 3), {"num": 1}),
    ]:
        c.append(
            Case(
                "linspace",
                f"{args} {kw}",
                lambda ns, a=args, k=kw: (
                    lambda: ns.linspace(
                        *a, **{n: (getattr(ns, v) if n == "dtype" else v) for n, v in k.items()}
                    )
                ),
            )
        )
    c.append(Case("from_dlpack", "float32", lambda ns: ns.from_dlpack, (_data((2, 3), "float32"),)))
    return c


def _dtype_cases():
    c = []
    for a, b in [
        ("int8", "int16"),
        ("int16", "int8"),
        ("uint8", "int16"),
        ("float64", "float32"),
        ("int32", "float64"),
        ("bool", "int8"),
        ("float32", "complex64"),
    ]:
        c.append(
            Case(
                "can_cast",
                f"{a} -> {b}",
                lambda ns, a=a, b=b: lambda: ns.can_cast(getattr(ns, a), getattr(ns, b)),
            )
        )
    c.append(
        Case(
            "can_cast",
            "array -> float32",
            lambda ns: lambda x: ns.can_cast(x, ns.float32),
            (_data((3,), "int8"),),
        )
    )
    for dt in ("float32", "float64", "complex64", "complex128"):
        c.append(Case("finfo", dt, lambda ns, d=dt: lambda: ns.finfo(getattr(ns, d))))
    c.append(Case("finfo", "array", lambda ns: lambda x: ns.finfo(x), (_data((2,), "float32"),)))
    for dt in ("int8", "uint16", "int32", "uint64", "int64"):
        c.append(Case("iinfo", dt, lambda ns, d=dt: lambda: ns.iinfo(getattr(ns, d))))
    c.append(Case("iinfo", "array", lambda ns: lambda x: ns.iinfo(x), (_data((2,), "int16"),)))
    for dt, kind in [
        ("float32", "real floating"),
        ("int8", ("integral", "bool")),
        ("complex64", "numeric"),
        ("uint8", "signed integer"),
        ("bool", "bool"),
    ]:
        c.append(
            Case(
                "isdtype",
                f"{dt} {kind}",
                lambda ns, d=dt, k=kind: lambda: ns.isdtype(getattr(ns, d), k),
            )
        )
    c.append(Case("result_type", "dtypes", lambda ns: lambda: ns.result_type(ns.int8, ns.uint8)))
    c.append(
        Case(
            "result_type",
            "array and scalar",
            lambda ns: lambda x: ns.result_type(x, 1.0),
            (_data((3,), "int16"),),
        )
    )
    c.append(
        Case(
            "result_type",
            "arrays",
            lambda ns: lambda x, y: ns.result_type(x, y),
            (_data((3,), "float32"), _data((2, 1), "int64")),
        )
    )
    for shapes in [((2, 1), (3,)), ((), (4, 1)), ((5, 1, 2), (3, 1))]:
        c.append(
            Case(
                "broadcast_shapes",
                f"{shapes}",
                lambda ns, s=shapes: lambda: ns.broadcast_shapes(*s),
            )
        )
    for dt, copy in [
        ("int8", True),
        ("float32", True),
        ("float64", False),
        ("bool", True),
        ("complex128", True),
    ]:
        c.append(
            Case(
                "astype",
                f"-> {dt} copy={copy}",
                lambda ns, d=dt, cp=copy: lambda x: ns.astype(x, getattr(ns, d), copy=cp),
                (_data((2, 3), "float64"),),
            )
        )
    return c


def _searching_cases():
    c = []
    for name in ("argmax", "argmin"):
        for shape, axis, keep in [
            ((2, 3), None, False),
            ((2, 3), 0, True),
            ((2, 3), -1, False),
            ((), None, False),
            ((4,), 0, True),
        ]:
            c.append(
                Case(
                    name,
                    f"{shape} {axis} {keep}",
                    lambda ns, n=name, ax=axis, k=keep: (
                        lambda x: getattr(ns, n)(x, axis=ax, keepdims=k)
                    ),
                    (_data(shape, "float32"),),
                )
            )
    for shape, axis, keep in [
        ((2, 3), None, False),
        ((2, 3), None, True),
        ((2, 3), 1, False),
        ((2, 3, 4), (0, 2), True),
        ((3,), 0, False),
    ]:
        c.append(
            Case(
                "count_nonzero",
                f"{shape} {axis} {keep}",
                lambda ns, ax=axis, k=keep: lambda x: ns.count_nonzero(x, axis=ax, keepdims=k),
                (_data(shape, "int8"),),
            )
        )
    for known in (np.array([0, 3, 0, 1]), np.array([[0, 2, 0], [1, 0, 0]], "float32")):
        c.append(
            Case("nonzero", f"{known.shape} known", lambda ns: ns.nonzero, (known,), known=True)
        )  # data-dependent: exact on known values
    for shape in [(3,), (2, 3)]:  # ... and the bound when every element is nonzero
        c.append(
            Case(
                "nonzero",
                f"{shape} all nonzero",
                lambda ns: ns.nonzero,
                (_data(shape, "float64", nonzero=True),),
            )
        )
    for side in ("left", "right"):
        c.append(
            Case(
                "searchsorted",
                side,
                lambda ns, s=side: lambda a, v: ns.searchsorted(a, v, side=s),
                (np.sort(_data((6,), "float64")), _data((2, 3), "float64")),
            )
        )
    c.append(
        Case(
            "searchsorted",
            "sorter",
            lambda ns: lambda a, v, p: ns.searchsorted(a, v, sorter=p),
            (_data((5,), "int32"), _data((4,), "int32"), RNG.permutation(5)),
        )
    )
    for name in ("all", "any"):
        for dt, axis, keep in [
            ("bool", None, False),
            ("float32", 0, True),
            ("int8", (0, 1), False),
            ("bool", -1, True),
        ]:
            c.append(
                Case(
                    name,
                    f"{dt} {axis} {keep}",
                    lambda ns, n=name, ax=axis, k=keep: (
                        lambda x: getattr(ns, n)(x, axis=ax, keepdims=k)
                    ),
                    (_data((2, 3), dt),),
                )
            )
    return c


def _set_sorting_cases():
    c = []
    for invert in (False, True):
        c.append(
            Case(
                "isin",
                f"int invert={invert}",
                lambda ns, i=invert: lambda a, b: ns.isin(a, b, invert=i),
                (_data((2, 3), "int32"), _data((4,), "int64")),
            )
        )
    c.append(
        Case(
            "isin",
            "float, known test values",
            lambda ns: lambda a, b: ns.isin(a, b),
            (_data((3, 2), "float64"), _data((2,), "float64")),
            known=True,
        )
    )
    const = np.array([[3, 1, 3], [2, 1, 3]])
    for name in ("unique_values", "unique_counts", "unique_inverse", "unique_all"):
        c.append(
            Case(name, "known constant", lambda ns, n=name: getattr(ns, n), (const,), known=True)
        )
        c.append(
            Case(name, "known in f", lambda ns, n=name: lambda: getattr(ns, n)(ns.asarray(const)))
        )
        c.append(
            Case(
                name,
                "distinct values (the bound)",
                lambda ns, n=name: getattr(ns, n),
                (RNG.permutation(6).reshape(2, 3).astype("float32"),),
            )
        )
    for dt in ("int8", "uint16", "float32", "float64"):
        for axis, desc, stable in [(-1, False, True), (0, True, True), (-1, True, False)]:
            c.append(
                Case(
                    "argsort",
                    f"{dt} {axis} {desc} {stable}",
                    lambda ns, ax=axis, d=desc, s=stable: (
                        lambda x: ns.argsort(x, axis=ax, descending=d, stable=s)
                    ),
                    (_data((3, 4), dt),),
                )
            )
    return c


def _extension_cases():
    c = []
    for name in ("fftfreq", "rfftfreq"):
        for n, kw in [(8, {}), (7, {"d": 0.5}), (5, {"dtype": "float32"}), (1, {})]:
            c.append(
                Case(
                    f"fft.{name}",
                    f"{n} {kw}",
                    lambda ns, nm=name, n=n, k=kw: (
                        lambda: getattr(ns.fft, nm)(
                            n, **{a: (getattr(ns, v) if a == "dtype" else v) for a, v in k.items()}
                        )
                    ),
                )
            )
    for shape, rtol in [
        ((3, 3), None),
        ((2, 4, 3), None),
        ((3, 5), 0.1),
        ((2, 3, 3), "array"),
        ((3, 3), "array"),
    ]:
        c.append(
            Case(
                "linalg.matrix_rank",
                f"{shape} rtol={rtol}",
                lambda ns, r=rtol: (
                    lambda x: ns.linalg.matrix_rank(
                        x, rtol=ns.asarray([0.1, 0.2]) if r == "array" else r
                    )
                ),
                (_data(shape, "float64"),),
            )
        )
    c.append(
        Case(
            "linalg.matrix_rank",
            "float32",
            lambda ns: ns.linalg.matrix_rank,
            (_data((3, 3), "float32"),),
        )
    )
    return c


CASES = (
    _elementwise_cases()
    + _creation_cases()
    + _dtype_cases()
    + _searching_cases()
    + _set_sorting_cases()
    + _extension_cases()
)
NONDIFF = sorted(name for name, prim in REGISTRY.items() if prim.nondiff)


def test_every_nondifferentiable_row_has_cases():
    covered = {c.row for c in CASES}
    assert [n for n in NONDIFF if n not in covered] == []


def _abstract(a: np.ndarray, known: bool):
    return make(A.Array, AbstractArray(a.shape, a.dtype, value=a if known else None))


def _describe(obj) -> Any:
    """Shapes and dtypes of arrays, values of everything else, through tuples."""
    if isinstance(obj, tuple | list):
        return (
            type(obj).__name__ if hasattr(obj, "_fields") else "tuple",
            [_describe(o) for o in obj],
        )
    if hasattr(obj, "__array_namespace__"):
        return ("array", tuple(obj.shape), _dtype_name(obj.dtype))
    if hasattr(obj, "bits"):  # finfo / iinfo
        fields = ("bits", "eps", "max", "min", "smallest_normal", "dtype")
        return {
            f: (_dtype_name(getattr(obj, f)) if f == "dtype" else getattr(obj, f))
            for f in fields
            if hasattr(obj, f)
        }
    if hasattr(obj, "itemsize") or isinstance(obj, type):
        return ("dtype", _dtype_name(obj))
    return obj


def _dtype_name(dtype) -> str:
    return np.dtype(getattr(dtype, "name", None) or str(dtype).rsplit(".", 1)[-1]).name


@pytest.mark.parametrize("case", CASES, ids=[f"{c.row}-{c.label}" for c in CASES])
def test_shape_rules_match_the_backend(case):
    with np.errstate(all="ignore"):
        real = case.f(XP)(*[XP.asarray(a) for a in case.args])
        tracker = Tracker()
        with interpreting(Abstract(None, tracker)):
            abstract = case.f(A)(*[_abstract(a, case.known) for a in case.args])
    if isinstance(pg.unwrap(abstract), AbstractArray | tuple | list):
        assert case.row in {e.op for e in tracker.events}, f"{case.row} was not called"
    else:  # a query (finfo, isdtype, ...) allocates nothing: no event, no row in the table
        assert case.row not in {e.op for e in tracker.events}
    assert _describe(abstract) == _describe(real)
