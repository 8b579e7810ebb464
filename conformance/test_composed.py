"""Composed-transform conformance: every row's gradient-conformance cases
(``grad_cases.cases()``) through the compositions of transforms a user writes, each checked
against an independent path to the same derivative, on namespace(numpy):

* ``hessian``: forward-over-reverse (``jacfwd(grad)``, ``hessian``) against
  reverse-over-reverse (``jacrev(grad)``), and ``jvp(grad)`` against ``grad(<grad, v>)`` in
  random directions; in the slow run also against central finite differences of the gradient
  along them. A fused row whose JVP ignored what it saved for its VJP passed
  every first-order check and failed here.
* ``vmap_grad``: ``vmap(grad)`` against a Python loop of ``grad``, each differentiated
  argument batched alone (``in_axes=None`` for the others) and all of them together.
* ``vmap_jvp``: ``vmap`` over a batch of tangents of ``jvp`` against a loop.
* ``compile_grad``: ``compile(value_and_grad)`` against the uncompiled step, traced and
  replayed.
* ``remat``: ``grad`` and ``jvp(grad)`` through ``remat`` against the plain gradient and
  Hessian-vector product.
* ``custom_vjp``: the row wrapped in a ``custom_vjp`` whose rule is its own pullback:
  ``grad``, ``vmap(grad)`` and the reverse-over-reverse Hessian-vector product through it.

Each composition differentiates the scalar ``s(args) = sum(Re(u * f(args)))`` over the
inexact outputs with a fixed random ``u``; the second-order ones take a complex argument as its
real and imaginary parts (a real function of real variables).
``test_every_row_has_every_composition`` fails when a row has a VJP rule but some composition
runs on none of its cases, unless the row declares why (unbatchable, or in
:data:`NO_SECOND_ORDER`, whose refusal is tested). The default run checks the first case of
every row (every composition); ``-m slow`` runs every case.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import pycograd_xp as pg
from conformance.grad_cases import Case, cases
from conformance.gradcheck import to_numpy
from pycograd_xp.ops import REGISTRY
from pycograd_xp.tree import tree_flatten

CASES = cases()
COMPOSITIONS = ("hessian", "vmap_grad", "vmap_jvp", "compile_grad", "remat", "custom_vjp")
SCALES = (1.0, 0.97, 1.02)  # three examples of a batch, each inside the case's domain
# Rows whose second derivative raises (NotImplementedError, never a wrong number), and why:
# ``test_second_order_refusals_are_loud`` checks that it raises.
NO_SECOND_ORDER = {
    "linalg.eigvals": "its VJP calls linalg.eig, whose eigenvector derivative is not implemented",
}
# Cases at which a row's second derivative raises (never a wrong number), and why.
SINGULAR_DET = (
    "det's second derivative at a singular matrix: its cofactor's derivative needs inv(x) "
    "(numpy.linalg.LinAlgError, 'Singular matrix')"
)
NO_SECOND_ORDER_CASES = {
    ("linalg.det", label): SINGULAR_DET
    for label in (
        "rank 2 of 3",
        "rank 1 of 3",
        "zero first column",
        "singular beside regular",
        "complex rank 1 of 2",
    )
}
VMAP = ("vmap_grad", "vmap_jvp")


def _second_order(name: str, case: Case) -> str | None:
    """Why the row's second derivative at this case raises (None: it is computed)."""
    return NO_SECOND_ORDER.get(name) or NO_SECOND_ORDER_CASES.get((name, case.label))


def _inexact(a: np.ndarray) -> bool:
    return np.issubdtype(np.asarray(a).dtype, np.inexact)


def _row_reason(name: str, composition: str) -> str | None:
    """Why no case of row ``name`` can run ``composition`` (None: they can), as the row
    declares it."""
    prim = REGISTRY.get(name)
    if composition in VMAP and prim is not None and prim.unbatchable is not None:
        return f"unbatchable: {prim.unbatchable}"
    if composition == "hessian" and name in NO_SECOND_ORDER:
        return NO_SECOND_ORDER[name]
    return None


def _skip_reason(name: str, case: Case, composition: str) -> str | None:
    """Why ``composition`` cannot run on ``case`` of row ``name`` (None: it can)."""
    diff = [a for a in case.args if _inexact(a)]
    if not diff:
        return "no floating-point argument"
    if composition == "hessian" and _second_order(name, case):
        return _second_order(name, case)
    return _row_reason(name, composition)


def _params(sample: bool, backend: str = "numpy") -> list:
    out = []
    for name, cs in CASES.items():
        for i, case in enumerate(cs):
            if backend not in case.backends:
                continue
            for comp in COMPOSITIONS:
                if _skip_reason(name, case, comp) is not None:
                    continue
                first = not any(_skip_reason(name, c, comp) is None for c in cs[:i])
                if sample and not first:
                    continue
                marks = () if sample else (pytest.mark.slow,)
                out.append(
                    pytest.param(
                        backend,
                        name,
                        case,
                        comp,
                        id=f"{backend}-{comp}-{name}-{case.label}",
                        marks=marks,
                    )
                )
    return out


# -- the scalar of a case, and its derivatives ---------------------------------------------------


class Scalar:
    """``s(args) = sum(u * f(args))`` (real part) over the inexact outputs of a case's ``f`` on
    ``xp``; ``diff`` the positions of its floating-point arguments."""

    def __init__(self, xp: Any, case: Case, wrap: Any = None, name: str = "") -> None:
        self.xp, self.case, self.name = xp, case, name
        f = case.f(xp)
        self.f = wrap(f) if wrap is not None else f
        self.diff = tuple(i for i, a in enumerate(case.args) if _inexact(a))
        with pg.no_grad(), np.errstate(all="ignore"):
            out = f(*[xp.asarray(a) for a in case.args])
        rng = np.random.default_rng(11)
        self.u = []
        for o in tree_flatten(out)[0]:
            o = to_numpy(o)
            self.u.append(rng.standard_normal(o.shape) if _inexact(o) else None)

    def __call__(self, *args: Any) -> Any:
        xp = self.xp
        total = None
        leaves = tree_flatten(self.f(*args))[0]
        for u, o in zip(self.u, leaves, strict=True):
            if u is None:
                continue
            term = xp.sum(xp.real(xp.asarray(u) * o)) if u.ndim else xp.real(float(u) * o)
            total = term if total is None else total + term
        return total

    def args(self, scale: float = 1.0) -> list[Any]:
        return [
            self.xp.asarray(a * scale if i in self.diff else a)
            for i, a in enumerate(self.case.args)
        ]

    def flat(self) -> tuple[Any, np.ndarray]:
        """``(g, z)``: ``g(z)`` is ``s`` of the differentiated arguments packed in one real
        float64 vector ``z`` (a complex argument as its real parts, then its imaginary
        parts), the others fixed: a real function of real variables, whose Hessian is
        well defined for complex rows too."""
        xp, args = self.xp, self.case.args
        parts = []  # (position, shape, size, complex)
        chunks = []
        for i in self.diff:
            a = np.asarray(args[i])
            c = np.iscomplexobj(a)
            parts.append((i, a.shape, a.size, c))
            chunks += [np.ravel(a.real), np.ravel(a.imag)] if c else [np.ravel(a)]
        z = np.concatenate(chunks).astype(np.float64)
        fixed = [xp.asarray(a) for a in args]
        unit = xp.asarray(1j)

        def g(v: Any) -> Any:
            call = list(fixed)
            o = 0
            for i, shape, n, c in parts:
                a = v[o : o + n]
                if c:
                    a = xp.astype(a, xp.complex128) + unit * xp.astype(
                        v[o + n : o + 2 * n], xp.complex128
                    )
                    o += n
                call[i] = xp.reshape(a, shape)
                o += n
            return self(*call)

        return g, z


def _close(got: Any, want: Any, what: str, rtol: float = 1e-7, atol: float = 1e-9) -> None:
    g_leaves, w_leaves = tree_flatten(got)[0], tree_flatten(want)[0]
    assert len(g_leaves) == len(w_leaves), what
    for i, (g, w) in enumerate(zip(g_leaves, w_leaves, strict=True)):
        g, w = to_numpy(g), to_numpy(w)
        assert g.shape == w.shape, f"{what}, leaf {i}: shape {g.shape} vs {w.shape}"
        scale = max(1.0, float(np.max(np.abs(w), initial=0.0)))
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol * scale, err_msg=f"{what}, leaf {i}")


def _grad(s: Scalar) -> Any:
    return pg.grad(s, argnums=s.diff)


# -- the compositions ----------------------------------------------------------------------------


# Above this many variables the Hessians are compared through products with random vectors
# (forward-over-reverse against reverse-over-reverse), not as whole matrices.
WHOLE_HESSIAN = 200


def _hvp_reverse(g: Any, z: Any, v: Any) -> Any:
    """``H v`` by reverse-over-reverse: the gradient of ``<grad g(z), v>``."""
    xp = z.__array_namespace__()
    return pg.grad(lambda w: xp.sum(pg.grad(g)(w) * v))(z)


def check_hessian(s: Scalar, finite_differences: bool) -> None:
    g, z = s.flat()
    xp = s.xp
    zx = xp.asarray(z)
    rng = np.random.default_rng(5)
    if z.size <= WHOLE_HESSIAN:
        h_rev = to_numpy(pg.jacrev(pg.grad(g))(zx))
        _close(pg.jacfwd(pg.grad(g))(zx), h_rev, "jacfwd(grad) against jacrev(grad)")
        _close(pg.hessian(g)(zx), h_rev, "hessian against jacrev(grad)")
    for k in range(2):
        v = rng.standard_normal(z.shape)
        vx = xp.asarray(v)
        want = to_numpy(_hvp_reverse(g, zx, vx))
        _, hv = pg.jvp(pg.grad(g), (zx,), (vx,))
        _close(hv, want, f"jvp(grad) against grad(<grad, v>), direction {k}")
        if finite_differences:  # the directional difference of the gradient
            fd = [_gradient_difference(xp, g, z, v, eps) for eps in (1e-5, 1e-6)]
            if not np.allclose(fd[0], fd[1], rtol=1e-2, atol=1e-4):
                continue  # the gradient has a kink here (max's ties): no second derivative
            _close(
                want,
                fd[0],
                f"H v against finite differences of the gradient, direction {k}",
                rtol=1e-4,
                atol=1e-6,
            )


def _gradient_difference(xp: Any, g: Any, z: np.ndarray, v: np.ndarray, eps: float) -> np.ndarray:
    plus, minus = (to_numpy(pg.grad(g)(xp.asarray(z + d * v))) for d in (eps, -eps))
    return (plus - minus) / (2 * eps)


def check_vmap_grad(s: Scalar) -> None:
    grad = _grad(s)
    examples = [s.args(c) for c in SCALES]
    base = examples[0]
    for batched in [(i,) for i in s.diff] + ([s.diff] if len(s.diff) > 1 else []):
        calls = [[ex[i] if i in batched else base[i] for i in range(len(base))] for ex in examples]
        want = [grad(*c) for c in calls]
        stacked = [
            s.xp.stack([c[i] for c in calls]) if i in batched else base[i] for i in range(len(base))
        ]
        in_axes = tuple(0 if i in batched else None for i in range(len(base)))
        got = pg.vmap(grad, in_axes=in_axes)(*stacked)
        for k, w in enumerate(want):
            _close(
                [leaf[k, ...] for leaf in tree_flatten(got)[0]],
                tree_flatten(w)[0],
                f"vmap(grad) with arguments {batched} batched, example {k}",
                rtol=1e-10,
                atol=1e-12,
            )


def check_vmap_jvp(s: Scalar) -> None:
    xp, args = s.xp, s.args()
    rng = np.random.default_rng(3)
    primals = [args[i] for i in s.diff]

    def f(*p: Any) -> Any:
        call = list(args)
        for i, a in zip(s.diff, p, strict=True):
            call[i] = a
        return s.f(*call)

    def draw(a: Any) -> np.ndarray:
        a = to_numpy(a)
        r = rng.standard_normal((len(SCALES), *a.shape))
        if np.iscomplexobj(a):
            r = r + 1j * rng.standard_normal(r.shape)
        return r.astype(a.dtype)

    tangents = [draw(p) for p in primals]
    got = pg.vmap(lambda *t: pg.jvp(f, primals, t)[1])(*[xp.asarray(t) for t in tangents])
    for k in range(len(SCALES)):
        want = pg.jvp(f, primals, [xp.asarray(t[k]) for t in tangents])[1]
        w_leaves = tree_flatten(want)[0]
        g_leaves = [leaf[k, ...] for leaf in tree_flatten(got)[0]]
        pairs = [(g, w) for g, w in zip(g_leaves, w_leaves, strict=True) if _inexact(to_numpy(w))]
        _close(
            [g for g, _ in pairs],
            [w for _, w in pairs],
            f"vmap(jvp), tangent {k}",
            rtol=1e-10,
            atol=1e-12,
        )


def check_compile_grad(s: Scalar) -> None:
    step = pg.value_and_grad(s, argnums=s.diff)
    compiled = pg.compile(step)
    for scale in (1.0, 0.98):  # the trace, then a replay on new values
        args = s.args(scale)
        try:
            got = compiled(*args)
        except pg.TracingError as e:
            assert "depends on array values" in str(e)
            return
        _close(got, step(*args), f"compile(value_and_grad) at scale {scale}", rtol=1e-12)


def check_remat(s: Scalar) -> None:
    plain = _grad(s)
    r = Scalar(s.xp, s.case, wrap=pg.remat, name=s.name)
    args = s.args()
    _close(_grad(r)(*args), plain(*args), "grad through remat", rtol=1e-12)
    if _second_order(s.name, s.case):
        return
    g, z = s.flat()
    gr, _ = r.flat()
    zx = s.xp.asarray(z)
    v = s.xp.asarray(np.random.default_rng(6).standard_normal(z.shape))
    _close(
        pg.jvp(pg.grad(gr), (zx,), (v,))[1],
        _hvp_reverse(g, zx, v),
        "jvp(grad) through remat against grad(<grad, v>)",
    )


def _own_rule(f: Any) -> Any:
    """``f`` as a ``custom_vjp`` whose rule is its own pullback (its inexact outputs)."""

    def leaves(*a: Any) -> tuple:
        return tuple(
            o
            for o in tree_flatten(f(*a))[0]
            if o.__array_namespace__().isdtype(o.dtype, ("real floating", "complex floating"))
        )

    c = pg.custom_vjp(leaves)

    def fwd(*a: Any) -> Any:
        return leaves(*a), a

    def bwd(res: Any, g: Any) -> Any:
        return pg.vjp(leaves, *res)[1](g)

    c.defvjp(fwd, bwd)
    return c


def check_custom_vjp(s: Scalar) -> None:
    c = Scalar(s.xp, s.case, wrap=_own_rule, name=s.name)
    c.u = [u for u in s.u if u is not None]
    args = s.args()
    _close(_grad(c)(*args), _grad(s)(*args), "grad through custom_vjp", rtol=1e-12)
    if len(s.diff) == 1 and _row_reason(s.name, "vmap_grad") is None:
        i = s.diff[0]
        examples = [c.args(k) for k in SCALES]
        got = pg.vmap(_grad(c), in_axes=tuple(0 if j == i else None for j in range(len(args))))(
            *[s.xp.stack([e[j] for e in examples]) if j == i else args[j] for j in range(len(args))]
        )
        for k, e in enumerate(examples):
            _close(
                [leaf[k, ...] for leaf in tree_flatten(got)[0]],
                tree_flatten(_grad(s)(*[e[j] if j == i else args[j] for j in range(len(args))]))[0],
                f"vmap(grad) through custom_vjp, example {k}",
                rtol=1e-10,
                atol=1e-12,
            )
    if _second_order(s.name, s.case):
        return
    g, z = s.flat()
    gc, _ = c.flat()
    zx = s.xp.asarray(z)
    v = s.xp.asarray(np.random.default_rng(6).standard_normal(z.shape))
    _close(
        _hvp_reverse(gc, zx, v),
        _hvp_reverse(g, zx, v),
        "grad(<grad, v>) through custom_vjp",
    )


def run(
    name: str,
    case: Case,
    composition: str,
    finite_differences: bool = False,
    backend: str = "numpy",
) -> None:
    xp = pg.namespace(backend)
    s = Scalar(xp, case, name=name)
    with np.errstate(all="ignore"):
        if composition == "hessian":
            check_hessian(s, finite_differences)
        else:
            globals()[f"check_{composition}"](s)


@pytest.mark.parametrize("backend, name, case, composition", _params(sample=True))
def test_composition(backend: str, name: str, case: Case, composition: str) -> None:
    run(name, case, composition, backend=backend)


@pytest.mark.parametrize(
    "backend, name, case, composition",
    _params(sample=False) + _params(sample=False, backend="array_api_strict"),
)
def test_composition_every_case(backend: str, name: str, case: Case, composition: str) -> None:
    run(name, case, composition, finite_differences=composition == "hessian", backend=backend)


def test_every_row_has_every_composition() -> None:
    missing = []
    for name, prim in REGISTRY.items():
        if prim.vjp is None or name == "linalg.eig":
            continue
        for comp in COMPOSITIONS:
            if _row_reason(name, comp) is not None:
                continue
            if not any(_skip_reason(name, c, comp) is None for c in CASES.get(name, [])):
                missing.append((name, comp))
    assert not missing, f"rows with a composition no case runs (nor a declared reason): {missing}"


@pytest.mark.parametrize(
    "name, label",
    [(n, CASES[n][0].label) for n in sorted(NO_SECOND_ORDER)] + sorted(NO_SECOND_ORDER_CASES),
)
def test_second_order_refusals_are_loud(name: str, label: str) -> None:
    case = next(c for c in CASES[name] if c.label == label)
    s = Scalar(pg.namespace("numpy"), case, name=name)
    g, z = s.flat()
    with pytest.raises((NotImplementedError, np.linalg.LinAlgError)):
        pg.hessian(g)(s.xp.asarray(z))
