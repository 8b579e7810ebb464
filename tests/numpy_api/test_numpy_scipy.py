"""scipy's functions on arrays of ``namespace(numpy)``: scipy.special's ufuncs through the
registered table (``register_ufuncs``) and ``xp.special``, and what reaches the rows or refuses
with and without ``SCIPY_ARRAY_API``."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from _numpy_common import XP, U, _np, check_forward, check_grad

from pycograd_xp import numpy_api as protocols

# -- scipy.special through the lookup hook ---------------------------------------------------------


def test_foreign_ufuncs_dispatch_through_the_registered_table(monkeypatch):
    special = pytest.importorskip("scipy.special")
    w = XP.asarray(U(3))
    w.requires_grad_()
    with pytest.raises(
        TypeError, match=r"scipy\.special\.log1p\(\).*being differentiated.*stop_gradient"
    ):
        special.log1p(w)  # scipy's own ufunc, not NumPy's: no rule registered
    monkeypatch.setitem(protocols.FOREIGN_UFUNCS, "log1p", "log1p")
    check_forward(special.log1p, (U(3),))
    check_grad(special.log1p, (U(3),))
    with pytest.raises(ValueError, match="already mapped"):
        protocols.register_ufuncs({"log1p": "exp"})
    # undifferentiated: scipy's own answer, wrapped
    r = special.erf(XP.asarray([0.5]))
    assert type(r) is XP.Array
    np.testing.assert_allclose(_np(r), special.erf([0.5]))


_SCIPY_UFUNCS = """
import os, sys
import numpy as np, scipy.special as sc, pycograd_xp as pg
from conformance.gradcheck import check_vjp
from pycograd_xp.ops.special import UFUNCS
assert isinstance(sc.erf, np.ufunc), "scipy's array API mode is on"
xp = pg.namespace(np)
x = np.random.default_rng(0).uniform(0.2, 0.9, (2, 3))
# the incomplete functions differentiate in x only: their shape parameters are constants
SHAPES = {"gammainc": (1.5,), "gammaincc": (1.5,), "betainc": (1.5, 2.5)}
SHAPES.update(fdtr=(3.0, 10.0), fdtrc=(3.0, 10.0))
for name in UFUNCS:
    f = getattr(sc, name)
    if name in SHAPES:
        f = lambda v, f=f, c=SHAPES[name]: f(*c, v)  # noqa: E731
    args = (x, x + 1) if name not in SHAPES and f.nin == 2 else (x,)
    w = [xp.asarray(a) for a in args]
    for v in w:
        v.requires_grad_()
    r = f(*w)
    assert r.requires_grad, name
    np.testing.assert_allclose(np.asarray(pg.stop_gradient(r)), f(*args), rtol=1e-12)
    check_vjp(xp, f, *args)
assert type(sc.erf(xp.asarray(x))) is xp.Array  # not differentiated: scipy's own, wrapped
print("ok", len(UFUNCS))
"""


def test_scipy_special_ufuncs_reach_their_rows():
    """scipy.special's ufuncs (scipy without SCIPY_ARRAY_API=1, so a fresh process) on arrays
    being differentiated run the rows of ops/special.py: values and gradients."""
    pytest.importorskip("scipy.special")
    env = {k: v for k, v in os.environ.items() if k != "SCIPY_ARRAY_API"}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    out = subprocess.run(
        [sys.executable, "-c", _SCIPY_UFUNCS], capture_output=True, text=True, env=env, cwd=root
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.startswith("ok")


# -- scipy with and without SCIPY_ARRAY_API: what reaches the rows, what refuses ------------------

_SCIPY_MODES = """
import os, sys
import numpy as np, pytest, scipy.special as sc, scipy.stats as st, pycograd_xp as pg
from scipy._lib._array_api import SCIPY_ARRAY_API
from conformance.gradcheck import check_vjp
from pycograd_xp.ops.special import UFUNCS
assert bool(SCIPY_ARRAY_API) == (os.environ.get("SCIPY_ARRAY_API") == "1")
xp = pg.namespace(np)
rng = np.random.default_rng(0)
x, loc, scale = rng.uniform(0.5, 2, 5), rng.uniform(-0.3, 0.3, 5), rng.uniform(0.5, 1.5, 5)

def leaf(a):
    w = xp.asarray(a)
    w.requires_grad_()
    return w

# scipy.special's functions with rows: values and gradients in both modes (without the
# variable: scipy's ufuncs reach __array_ufunc__; with it: scipy's wrappers find xp.special)
# the incomplete functions differentiate in x only: their shape parameters are constants
shapes = {"gammainc": (1.5,), "gammaincc": (1.5,), "betainc": (1.5, 2.5)}
shapes.update(fdtr=(3.0, 10.0), fdtrc=(3.0, 10.0))
for name in UFUNCS:
    f = getattr(sc, name)
    if name in shapes:
        f = lambda v, f=f, c=shapes[name]: f(*c, v)  # noqa: E731
    two = ("xlogy", "xlog1py", "rel_entr", "betaln", "kl_div", "huber", "boxcox", "boxcox1p")
    args = (x / 3, x / 3 + 1) if name in two else (x / 3,)
    r = f(*[leaf(a) for a in args])
    assert type(r) is xp.Array and r.requires_grad, name
    np.testing.assert_allclose(np.asarray(pg.stop_gradient(r)), f(*args), rtol=1e-12)
    check_vjp(xp, f, *args)

# scipy.stats distributions (rv_continuous and the new Normal/make_distribution classes) call
# np.asarray on their arguments and compute in NumPy: on arrays being differentiated that is
# refused (it would drop the gradient), in both modes; on stop_gradient arrays, scipy's value
dists = {
    "norm.logpdf": lambda x, l, s: st.norm.logpdf(x, l, s),
    "t.logpdf": lambda x, l, s: st.t.logpdf(x, 3.5, l, s),
    "gamma.logpdf": lambda x, l, s: st.gamma.logpdf(x, 2.5, l - 1, s),
    "Normal.logpdf": lambda x, l, s: st.Normal(mu=l, sigma=s).logpdf(x),
}
for name, f in dists.items():
    with pytest.raises(TypeError, match="being differentiated; converting it would drop"):
        f(leaf(x), leaf(loc), leaf(scale))
    v = f(*[pg.stop_gradient(leaf(a)) for a in (x, loc, scale)])
    np.testing.assert_allclose(np.asarray(v), f(x, loc, scale), rtol=1e-12)

# functions scipy writes with the array's namespace (only with the variable set)
generic = {
    "special.logsumexp": lambda a: sc.logsumexp(a * 2.0),
    "special.log_softmax": lambda a: sc.log_softmax(a),
    "stats.zscore": lambda a: st.zscore(a),
    "stats.skew": lambda a: st.skew(a),
}
for name, f in generic.items():
    if SCIPY_ARRAY_API:
        r = f(leaf(x))
        assert type(r) is xp.Array and r.requires_grad, name
        np.testing.assert_allclose(np.asarray(pg.stop_gradient(r)), f(x), rtol=1e-12)
        check_vjp(xp, f, x)
    else:  # the refusal says what the variable would change
        with pytest.raises(TypeError, match="being differentiated.*SCIPY_ARRAY_API=1 is set"):
            f(leaf(x))
# with the variable set, the distributions' refusal does not suggest it
with pytest.raises(TypeError, match="being differentiated") as refused:
    st.norm.logpdf(leaf(x))
assert ("SCIPY_ARRAY_API" in str(refused.value)) == (not SCIPY_ARRAY_API)
print("ok", SCIPY_ARRAY_API)
"""


@pytest.mark.parametrize("mode", ["unset", "1"])
def test_scipy_special_and_stats_in_both_array_api_modes(mode):
    """What SciPy does with our arrays under each SCIPY_ARRAY_API setting (a fresh process
    each: SciPy reads the variable once, and the client tests set it for the whole run)."""
    pytest.importorskip("scipy.stats")
    env = {k: v for k, v in os.environ.items() if k != "SCIPY_ARRAY_API"}
    if mode == "1":
        env["SCIPY_ARRAY_API"] = "1"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    out = subprocess.run(
        [sys.executable, "-c", _SCIPY_MODES], capture_output=True, text=True, env=env, cwd=root
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.startswith("ok")
