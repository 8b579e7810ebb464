"""Shared machinery of the client-library suite.

A :class:`Case` is a function ``f(xp, *arrays)`` written against the namespace ``xp`` of its
arrays (the library under test finds the namespace itself, from the arrays), plus float64 NumPy
inputs. ``check_value`` runs it on a pycograd_xp namespace and on plain NumPy and compares the
results; ``check_grad`` checks pycograd_xp's VJP of it with the project's dot-product test
against central finite differences (``conformance/gradcheck.py``), and that ``grad`` of a
scalar reduction of it returns tape-free gradients of the inputs' shapes.

Expected failures that belong to the client library are declared per case (``XF``) and applied
with ``pytest.mark.xfail(strict=True)``, for the backends they concern only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pycograd_xp
from conformance.gradcheck import check_vjp, to_numpy
from pycograd_xp.tree import tree_flatten

BACKENDS = ("numpy", "array_api_strict")


@dataclasses.dataclass(frozen=True)
class XF:
    """An expected failure caused by the client library (not by pycograd_xp)."""

    reason: str
    backends: tuple[str, ...] = BACKENDS
    raises: type[BaseException] | tuple[type[BaseException], ...] | None = None


@dataclasses.dataclass(frozen=True)
class Case:
    """``f(xp, *args)`` on float64 NumPy ``args``; ``grad``: whether it is differentiable in
    all of them; ``value_xfail``/``grad_xfail``: expected failures of the library."""

    f: Callable[..., Any]
    args: tuple[np.ndarray, ...]
    grad: bool = True
    value_xfail: XF | None = None
    grad_xfail: XF | None = None
    rtol: float = 1e-10
    atol: float = 1e-12
    grad_rtol: float = 1e-5
    grad_atol: float = 1e-7
    eps: float = 1e-6


def frozen(namespace: dict) -> None:
    """Make a module's NumPy inputs read-only, so that no case can change another's inputs."""
    for v in namespace.values():
        if isinstance(v, np.ndarray):
            v.setflags(write=False)


def backend_name(xp: Any) -> str:
    """'numpy' or 'array_api_strict' for pycograd_xp.namespace(numpy / array_api_strict)."""
    return xp.__name__.rsplit(".", 1)[-1]


def apply_xfail(request: pytest.FixtureRequest, xp: Any, xf: XF | None) -> None:
    if xf is not None and backend_name(xp) in xf.backends:
        request.applymarker(pytest.mark.xfail(reason=xf.reason, strict=True, raises=xf.raises))


def _leaves(out: Any) -> list:
    if hasattr(out, "_asdict") or isinstance(out, tuple | list | dict):
        return tree_flatten(out)[0]
    return [out]


def assert_matches(out: Any, ref: Any, *, rtol: float = 1e-10, atol: float = 1e-12) -> None:
    """``out`` (pycograd_xp arrays or Python scalars, in any pytree) equals ``ref`` (the same
    computed on NumPy): same structure, shapes, dtypes and values."""
    outs, refs = _leaves(out), _leaves(ref)
    assert len(outs) == len(refs), f"{len(outs)} outputs, NumPy gives {len(refs)}"
    for o, r in zip(outs, refs, strict=True):
        r = np.asarray(r)
        if isinstance(r, np.ndarray) and r.ndim > 0:
            assert isinstance(o, pycograd_xp.Array), (
                f"the library returned a {type(o).__name__}, not an array of the namespace"
            )
        if isinstance(o, pycograd_xp.Array):
            assert not o.requires_grad, "an output computed outside grad carries a tape node"
        a = to_numpy(o)
        assert a.shape == r.shape, f"shape {a.shape} != NumPy's {r.shape}"
        if r.dtype.kind in "fc" or a.dtype.kind in "fc":
            assert a.dtype == r.dtype, f"dtype {a.dtype} != NumPy's {r.dtype}"
            np.testing.assert_allclose(a, r, rtol=rtol, atol=atol, equal_nan=True)
        else:
            assert a.dtype.kind == r.dtype.kind, f"dtype {a.dtype} != NumPy's {r.dtype}"
            np.testing.assert_array_equal(a, r)


def run(xp: Any, f: Callable[..., Any], *args: np.ndarray) -> Any:
    """``f`` on ``xp`` copies of ``args`` (a library may write into its input in place)."""
    return f(xp, *[xp.asarray(np.array(a)) for a in args])


def reference(case: Case) -> Any:
    """The case on plain NumPy; skips when the installed library lacks the function."""
    try:
        return case.f(np, *[np.array(a) for a in case.args])
    except AttributeError as e:  # an older release of the library
        pytest.skip(f"not in the installed version: {e}")


def check_value(xp: Any, case: Case) -> None:
    ref = reference(case)
    out = run(xp, case.f, *case.args)
    assert_matches(out, ref, rtol=case.rtol, atol=case.atol)


def _scalar(xp: Any, out: Any) -> Any:
    """A real scalar depending on every floating output (for ``grad``)."""
    total = None
    for o in _leaves(out):
        if not isinstance(o, pycograd_xp.Array) or not xp.isdtype(
            o.dtype, ("real floating", "complex floating")
        ):
            continue
        if xp.isdtype(o.dtype, "complex floating"):
            o = xp.real(o) + 2 * xp.imag(o)
        s = xp.sum(xp.sin(o))
        total = s if total is None else total + s
    return total


def check_grad(xp: Any, case: Case) -> None:
    reference(case)
    n = len(case.args)

    def f(*a: Any) -> Any:
        out = case.f(xp, *a)
        return [
            o
            for o in _leaves(out)
            if isinstance(o, pycograd_xp.Array)
            and xp.isdtype(o.dtype, ("real floating", "complex floating"))
        ]

    with np.errstate(all="ignore"):
        check_vjp(
            xp,
            f,
            *[np.array(a) for a in case.args],
            eps=case.eps,
            rtol=case.grad_rtol,
            atol=case.grad_atol,
        )
    grads = pycograd_xp.grad(lambda *a: _scalar(xp, case.f(xp, *a)), argnums=tuple(range(n)))(
        *[xp.asarray(np.array(a)) for a in case.args]
    )
    for g, a in zip(grads, case.args, strict=True):
        assert isinstance(g, pycograd_xp.Array)
        assert not g.requires_grad, "a gradient returned by grad carries a tape node"
        assert tuple(g.shape) == a.shape and to_numpy(g).dtype == a.dtype
        assert np.all(np.isfinite(to_numpy(g)))


def grad_fd(
    xp: Any,
    f: Callable[..., Any],
    x: np.ndarray,
    *,
    eps: float = 1e-6,
    rtol: float = 1e-5,
    atol: float = 1e-7,
) -> np.ndarray:
    """``pycograd_xp.grad(f)(x)`` for a scalar ``f`` of one float64 array, compared elementwise
    with central differences of ``f`` under ``no_grad()``; returns the gradient."""
    g = pycograd_xp.grad(f)(xp.asarray(x.copy()))
    assert not g.requires_grad, "a gradient returned by grad carries a tape node"
    fd = np.empty_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        with pycograd_xp.no_grad():
            hi, lo = f(xp.asarray(x + e)), f(xp.asarray(x - e))
        fd[i] = (float(to_numpy(hi)) - float(to_numpy(lo))) / (2 * eps)
    np.testing.assert_allclose(to_numpy(g), fd, rtol=rtol, atol=atol)
    return to_numpy(g)


XFAIL_LIST = Path(__file__).resolve().parents[2] / "conformance" / "xfails" / "clients.txt"


def xfail_list() -> dict[str, str]:
    """conformance/xfails/clients.txt: test id -> reason."""
    out = {}
    for line in XFAIL_LIST.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            tid, _, reason = line.partition("  # ")
            out[tid.strip()] = reason.strip()
    return out


def case_xfails(module_file: str, cases: dict[str, Case]) -> dict[str, str]:
    """The xfail entries a module's case table implies (ids as pytest writes them)."""
    rel = Path(module_file).resolve().relative_to(XFAIL_LIST.parents[2]).as_posix()
    out = {}
    for name, case in cases.items():
        for backend in BACKENDS:
            vx = (
                case.value_xfail
                if case.value_xfail and backend in case.value_xfail.backends
                else None
            )
            if vx:
                out[f"{rel}::test_value[{backend}-{name}]"] = vx.reason
            gx = vx or (
                case.grad_xfail if case.grad_xfail and backend in case.grad_xfail.backends else None
            )
            if case.grad and gx:
                out[f"{rel}::test_grad[{backend}-{name}]"] = gx.reason
    return out


def make_tests(cases: dict[str, Case], module_file: str) -> tuple[Callable[..., None], ...]:
    """The parametrized tests of a module's case table: values, gradients of the
    differentiable cases, and that conformance/xfails/clients.txt lists its expected failures.
    """

    @pytest.mark.parametrize("name", list(cases))
    def test_value(xp: Any, name: str, request: pytest.FixtureRequest) -> None:
        case = cases[name]
        apply_xfail(request, xp, case.value_xfail)
        check_value(xp, case)

    @pytest.mark.parametrize("name", [n for n, c in cases.items() if c.grad])
    def test_grad(xp: Any, name: str, request: pytest.FixtureRequest) -> None:
        case = cases[name]
        vx = case.value_xfail
        apply_xfail(request, xp, vx if vx and backend_name(xp) in vx.backends else case.grad_xfail)
        check_grad(xp, case)

    def test_xfail_list_is_current() -> None:
        rel = Path(module_file).resolve().relative_to(XFAIL_LIST.parents[2]).as_posix()
        listed = {
            k: v
            for k, v in xfail_list().items()
            if k.startswith((f"{rel}::test_value[", f"{rel}::test_grad["))
        }
        assert listed == case_xfails(module_file, cases)

    return test_value, test_grad, test_xfail_list_is_current
