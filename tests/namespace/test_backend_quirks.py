"""What CuPy does differently from NumPy (found by the first GPU run, tools/gpu_check.py), each
imitated on NumPy so that CI, which has no GPU, checks the namespace's answer to it."""

from __future__ import annotations

import dataclasses
import math
import types

import array_api_compat.numpy as npx
import numpy as np
import pytest

import pycograd_xp as pg
from pycograd_xp import memory
from pycograd_xp.namespace._backend import register_adapter


class _NoIndex:
    """A 0-d backend array without ``__index__`` (CuPy's ndarray has none)."""

    shape = ()

    def __init__(self, value):
        self.value = value

    def item(self):
        return self.value


def test_an_integer_0d_array_without_index_gives_its_value():
    xp = pg.namespace(np)
    x = xp.asarray(3)
    x._data = _NoIndex(3)
    assert x.__index__() == 3 and [10, 11, 12, 13][x] == 13
    x._data = _NoIndex(2.5)  # a float array is no index, as NumPy's
    with pytest.raises(TypeError):
        x.__index__()


@pytest.mark.parametrize(
    "name, call",
    [
        ("eig", lambda xp, a: xp.linalg.eig(a)),
        ("eigh", lambda xp, a: xp.linalg.eigh(a + a.mT)),
        ("svd", lambda xp, a: xp.linalg.svd(a)),
        ("qr", lambda xp, a: xp.linalg.qr(a)),
        ("slogdet", lambda xp, a: xp.linalg.slogdet(a)),
    ],
)
def test_decompositions_are_named_tuples_whatever_the_backend_returns(monkeypatch, name, call):
    """CuPy's linalg.eig returns a plain tuple; the standard wants a named tuple."""
    plain = getattr(npx.linalg, name)
    monkeypatch.setattr(npx.linalg, name, lambda *a, **k: tuple(plain(*a, **k)))
    xp = pg.namespace(np)
    out = call(xp, xp.asarray([[2.0, 1.0], [0.5, 3.0]]))
    assert type(out).__name__.endswith("Result") and out._fields


def test_qr_refuses_a_mode_outside_the_standard():
    xp = pg.namespace(np)
    with pytest.raises(ValueError, match="mode must be 'reduced' or 'complete'.*got 'r'"):
        xp.linalg.qr(xp.eye(3), mode="r")


@pytest.mark.parametrize("value", [-0.0, complex(-0.0, 1.0), complex(1.0, -0.0)])
def test_a_python_negative_zero_keeps_its_sign(monkeypatch, value):
    """CuPy's asarray of a Python -0.0 gives +0.0 (of a list, -0.0): imitated on NumPy."""
    real = npx.asarray

    def drops_the_sign(obj, /, **kw):
        if isinstance(obj, (float, complex)):
            obj = complex(obj.real + 0.0, obj.imag + 0.0) if isinstance(obj, complex) else obj + 0.0
        return real(obj, **kw)

    monkeypatch.setattr(npx, "asarray", drops_the_sign)
    xp = pg.namespace(np)
    got = complex(pg.unwrap(xp.asarray(value)))
    assert math.copysign(1, got.real) == math.copysign(1, value.real)
    assert math.copysign(1, got.imag) == math.copysign(1, complex(value).imag)
    assert xp.asarray(value).shape == ()


# -- CuPy's kernels at the standard's special values ----------------------------------------------
# CuPy 14.2 (tools/gpu_check.py): remainder of a finite number by an infinite one is NaN, of a
# zero by a negative number +0; complex log/log1p give NaN + NaN j at an infinite part beside a
# NaN, tanh at ±0 + inf j and ±0 + NaN j, acosh at ±0 + NaN j. Imitated over NumPy below; the
# rows correct a backend whose adapter names them (Backend.corrects, CuPy's).

INF, NAN = math.inf, math.nan
CORRECTS = frozenset({"remainder", "log", "log1p", "tanh", "acosh"})


def _cupy_like_remainder(x1, x2):
    out = np.remainder(x1, x2)
    if out.dtype.kind != "f":
        return out
    out = np.where(np.isinf(x2) & np.isfinite(x1), NAN, out)
    return np.where(out == 0, 0.0, out).astype(out.dtype)  # a zero result is +0


def _nan_where(f, at):
    def broken(x):
        out = f(x)
        if not np.iscomplexobj(x):
            return out
        return np.where(at(x.real, x.imag), complex(NAN, NAN), out).astype(out.dtype)

    return broken


def _inf_beside_nan(r, i):
    return (np.isinf(r) & np.isnan(i)) | (np.isnan(r) & np.isinf(i))


_CUPY_LIKE = {
    "remainder": _cupy_like_remainder,
    "log": _nan_where(np.log, _inf_beside_nan),
    "log1p": _nan_where(np.log1p, _inf_beside_nan),
    "tanh": _nan_where(np.tanh, lambda r, i: (r == 0) & ~np.isfinite(i)),
    "acosh": _nan_where(np.arccosh, lambda r, i: (r == 0) & np.isnan(i)),
}


class _CupyLike(types.ModuleType):
    """array-api-compat's NumPy with CuPy's five kernels: a conforming module of its own."""

    __array_api_version__ = npx.__array_api_version__

    def __getattr__(self, name):
        return getattr(npx, name)


_CUPY_LIKE_MODULE = _CupyLike("cupy_like")
for _name, _f in _CUPY_LIKE.items():
    setattr(_CUPY_LIKE_MODULE, _name, _f)
# its adapter names the rows to correct, as CuPy's does (namespace/_cupy.py)
register_adapter("cupy_like", lambda b: dataclasses.replace(b, corrects=CORRECTS))


def test_cupys_adapter_names_the_rows_this_imitation_corrects():
    from pycograd_xp.namespace import _cupy

    assert _cupy.CORRECTS == CORRECTS


def _same(got, want):
    """The same values bit for bit, signed zeros included (any NaN for a NaN)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    pairs = [(got.real, want.real), (got.imag, want.imag)] if got.dtype.kind == "c" else []
    for g, w in pairs or [(got, want)]:
        assert np.array_equal(np.isnan(g), np.isnan(w)), (got, want)
        ok = ~np.isnan(w)
        assert np.array_equal(g[ok], w[ok]), (got, want)
        assert np.array_equal(np.signbit(g[ok]), np.signbit(w[ok])), (got, want)


def _differs(got, want):
    try:
        _same(got, want)
    except AssertionError:
        return True
    return False


_REALS = [0.0, -0.0, 1.5, -1.5, 2.0, -2.0, 3e30, 1e-40, INF, -INF, NAN]
_PARTS = [0.0, -0.0, 1.0, -2.5, INF, -INF, NAN]


def _grid(dtype):
    """Every pair of special parts: complex numbers (``dtype`` complex) or real pairs."""
    if np.dtype(dtype).kind == "f":
        return tuple(np.asarray(v, dtype=dtype) for v in np.meshgrid(_REALS, _REALS))
    re, im = np.meshgrid(_PARTS, _PARTS)
    z = np.empty(re.shape, dtype)
    z.real, z.imag = re, im
    return (z,)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_remainder_is_corrected_over_cupys_kernel(dtype):
    xp = pg.namespace(_CUPY_LIKE_MODULE)
    a, b = _grid(dtype)
    with np.errstate(all="ignore"):
        want = np.remainder(a, b)
        assert _differs(_cupy_like_remainder(a, b), want)  # the imitation is CuPy's
        _same(pg.unwrap(xp.remainder(xp.asarray(a), xp.asarray(b))), want)
        _same(pg.unwrap(xp.asarray(a) % xp.asarray(b)), want)
        _same(pg.unwrap(xp.asarray(a) % -INF), np.remainder(a, dtype(-INF)))
        _same(pg.unwrap(1.5 % xp.asarray(b)), np.remainder(dtype(1.5), b))
        x = xp.asarray(a)
        x %= xp.asarray(b)  # in place: nothing differentiated
        _same(pg.unwrap(x), want)
        ints = np.arange(-6, 6).reshape(3, 4)
        _same(pg.unwrap(xp.remainder(xp.asarray(ints), 4)), np.remainder(ints, 4))


@pytest.mark.parametrize("name", ["log", "log1p", "tanh", "acosh"])
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128, np.float64])
def test_complex_functions_are_corrected_over_cupys_kernels(name, dtype):
    xp = pg.namespace(_CUPY_LIKE_MODULE)
    z = _grid(dtype)[0]
    with np.errstate(all="ignore"):
        # namespace(numpy)'s: NumPy's kernel, which has these values right
        want = pg.unwrap(getattr(pg.namespace(np), name)(pg.namespace(np).asarray(z)))
        if np.dtype(dtype).kind == "c":
            assert _differs(_CUPY_LIKE[name](z), want)
        _same(pg.unwrap(getattr(xp, name)(xp.asarray(z))), want)


def test_corrections_hold_compiled_batched_and_differentiated():
    xp = pg.namespace(_CUPY_LIKE_MODULE)
    a, b = _grid(np.float64)
    (z,) = _grid(np.complex128)
    with np.errstate(all="ignore"):
        f = pg.compile(lambda a, b, z: (a % b, xp.log(z), xp.tanh(z), xp.acosh(z)))
        nx = pg.namespace(np)
        zs = nx.asarray(z)
        wants = (np.remainder(a, b), *(pg.unwrap(g(zs)) for g in (nx.log, nx.tanh, nx.acosh)))
        for got, want in zip(f(xp.asarray(a), xp.asarray(b), xp.asarray(z)), wants, strict=True):
            _same(pg.unwrap(got), want)
        _same(pg.unwrap(pg.vmap(xp.remainder)(xp.asarray(a), xp.asarray(b))), np.remainder(a, b))
    x = xp.asarray([1.0, -1.0, 5.0, 6.5])
    assert np.array_equal(pg.unwrap(pg.grad(lambda x: xp.sum(x % 4.0))(x)), np.ones(4))


def test_the_projection_charges_a_correction():
    """A projection for the arrays of a backend that corrects a row charges the correction's
    temporaries, and holds over them; NumPy's, which needs none, charges none."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 500, 400))
    projected = {}
    for backend in (np, _CUPY_LIKE_MODULE):
        xp = pg.namespace(backend)
        args = (xp.asarray(a), xp.asarray(b))
        p = memory.project(xp.remainder, *args, argnums=())
        m = memory.measure(xp.remainder, *args, argnums=())
        assert m.peak_bytes <= p.peak_bytes
        projected[backend.__name__] = p.peak_bytes
    assert projected["cupy_like"] >= projected["numpy"] + a.nbytes


def test_only_a_backend_that_needs_a_correction_runs_it():
    """NumPy's kernels have these values right: its namespace calls them directly (no cost a
    call); the imitation of CuPy and the abstract backend (projections, traces) run the
    corrections."""
    from pycograd_xp._abstract import ABSTRACT
    from pycograd_xp.namespace import REGISTRY
    from pycograd_xp.namespace._backend import capabilities
    from pycograd_xp.namespace._eager import runs_impl

    numpy_backend = pg.namespace(np)._backend
    for name in sorted(CORRECTS):
        row = REGISTRY[name]
        assert runs_impl(row, pg.namespace(_CUPY_LIKE_MODULE)._backend)
        assert runs_impl(row, capabilities(ABSTRACT))
        assert runs_impl(row, numpy_backend) == (name == "tanh")  # tanh: NumPy's own fix
