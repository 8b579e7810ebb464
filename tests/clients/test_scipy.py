"""SciPy's Array API support (SCIPY_ARRAY_API=1, set in conftest.py) on pycograd_xp arrays:
values against SciPy on NumPy, gradients against finite differences."""

from __future__ import annotations

import numpy as np
import pytest
from _clients_common import XF, Case, frozen, make_tests

from pycograd_xp.ops.special import UFUNCS as SPECIAL_ROWS

scipy = pytest.importorskip("scipy")
special = pytest.importorskip("scipy.special")
stats = pytest.importorskip("scipy.stats")
sfft = pytest.importorskip("scipy.fft")
integrate = pytest.importorskip("scipy.integrate")
differentiate = pytest.importorskip("scipy.differentiate")
signal = pytest.importorskip("scipy.signal")
vq = pytest.importorskip("scipy.cluster.vq")
ndimage = pytest.importorskip("scipy.ndimage")
linalg = pytest.importorskip("scipy.linalg")
optimize = pytest.importorskip("scipy.optimize")
interpolate = pytest.importorskip("scipy.interpolate")

R = np.random.default_rng(20240601)
A = R.standard_normal((4, 5))  # generic real matrix
V = R.standard_normal(7)  # generic vector
W = R.standard_normal(7)
P = R.uniform(0.5, 2.0, (4, 5))  # positive
PV = R.uniform(0.5, 2.0, 6)
QV = R.uniform(0.5, 2.0, 6)
U = R.uniform(0.1, 0.9, 6)  # in (0, 1)
X2 = R.standard_normal((9, 3))
IMG = R.standard_normal((6, 7))
frozen(globals())

# SciPy's fallback for functions without an Array API implementation: np.asarray(x), the NumPy
# function, xp.asarray(result). pycograd_xp refuses np.asarray on an array being differentiated
# (it would drop the gradient), so the value works and the gradient cannot.
NUMPY_FALLBACK = (
    "{} has no Array API implementation: SciPy converts the input with np.asarray "
    "and runs the NumPy code, which drops the gradient (pycograd_xp raises TypeError)"
)


# SciPy looks for xp.special.<name> before its NumPy fallback: namespace(numpy) serves the
# functions that have rows (ops/special.py) there, so only array_api_strict's arrays fall back.
SERVED = "; namespace(numpy) serves xp.special.{} from its row, so only array_api_strict's do"
# SciPy builds these from xp.special's own (scipy/special/_support_alternative_backends.py)
BUILT_FROM = {"stdtr": "betainc", "chdtrc": "gammaincc", "betaincc": "betainc"}
SERVED_BUILT = (
    "; SciPy builds it from xp.special.{}, which namespace(numpy) serves from its row, so only "
    "array_api_strict's do"
)


def _served(special_name: str) -> str:
    """What the reason adds where namespace(numpy) serves the function ('' where it does not)."""
    if special_name in SPECIAL_ROWS:
        return SERVED.format(special_name)
    base = BUILT_FROM.get(special_name)
    return SERVED_BUILT.format(base) if base in SPECIAL_ROWS else ""


def _fallback_backends(special_name: str) -> tuple[str, ...]:
    return ("array_api_strict",) if _served(special_name) else ("numpy", "array_api_strict")


def fallback(name: str) -> XF:
    short = name.rsplit(".", 1)[-1]
    reason = NUMPY_FALLBACK.format(name) + _served(short)
    return XF(reason, backends=_fallback_backends(short), raises=TypeError)


def pvalue(name: str, via: str) -> XF:
    """A statistic whose function always computes its p-value too, through a special function
    that SciPy runs in NumPy."""
    return XF(
        f"scipy.stats.{name} always computes the p-value as well, with scipy.special.{via}"
        ", which has no Array API implementation (NumPy fallback: np.asarray drops the "
        "gradient, pycograd_xp raises TypeError)" + _served(via),
        backends=_fallback_backends(via),
        raises=TypeError,
    )


def auto_method(name: str) -> XF:
    return XF(
        f"scipy.signal.{name} with method='auto' calls choose_conv_method, whose "
        "_numeric_arrays(kinds='ui') answers True for every non-NumPy namespace, so float "
        "input is taken for integers and int(xp.max(xp.abs(volume))) converts the data to "
        "a Python int (pycograd_xp raises TypeError on an array being differentiated)",
        raises=TypeError,
    )


def numpy_inside(
    name: str, how: str = "converts its input with np.asarray and computes in NumPy"
) -> XF:
    return XF(
        f"{name} {how} (SciPy's Array API support for it is convert-to-NumPy-and-back), "
        "which drops the gradient: pycograd_xp raises TypeError",
        raises=TypeError,
    )


def sp(name: str, *args: np.ndarray, grad: bool = True, fb: bool = False, **kw) -> Case:
    """A scipy.special elementwise function of ``args``."""
    f = getattr(special, name)
    return Case(
        lambda xp, *a: f(*a, **kw),
        args,
        grad=grad,
        grad_xfail=fallback(f"scipy.special.{name}") if fb else None,
    )


def st(
    name: str,
    *args: np.ndarray | float,
    attr: str | None = None,
    grad: bool = True,
    grad_xfail: XF | None = None,
    value_xfail: XF | None = None,
    rtol: float = 1e-10,
    **kw,
) -> Case:
    """A scipy.stats function; ``attr``: the field of its result object to compare."""
    f = getattr(stats, name)
    arrays = tuple(a for a in args if isinstance(a, np.ndarray))  # the rest are constants

    def call(xp, *a):
        it = iter(a)
        res = f(*[next(it) if isinstance(b, np.ndarray) else b for b in args], **kw)
        return getattr(res, attr) if attr else res

    return Case(call, arrays, grad=grad, grad_xfail=grad_xfail, value_xfail=value_xfail, rtol=rtol)


CASES: dict[str, Case] = {
    # -- scipy.special: Array API implementations -----------------------------------------
    "special.logsumexp": sp("logsumexp", A),
    "special.logsumexp-axis": sp("logsumexp", A, axis=1),
    "special.logsumexp-b": Case(lambda xp, a, b: special.logsumexp(a, axis=0, b=b), (A, P)),
    "special.logsumexp-keepdims": sp("logsumexp", A, axis=(0, 1), keepdims=True),
    "special.softmax": sp("softmax", A, axis=1),
    "special.softmax-all": sp("softmax", A),
    "special.log_softmax": sp("log_softmax", A, axis=0),
    "special.xlogy": sp("xlogy", PV, QV),
    "special.rel_entr": sp("rel_entr", PV, QV),
    # -- scipy.special: NumPy fallbacks (values only) --------------------------------------
    "special.erf": sp("erf", V, fb=True),
    "special.erfc": sp("erfc", V, fb=True),
    "special.expit": sp("expit", V, fb=True),
    "special.logit": sp("logit", U, fb=True),
    "special.entr": sp("entr", PV, fb=True),
    "special.xlog1py": sp("xlog1py", PV, QV, fb=True),
    "special.kl_div": sp("kl_div", PV, QV, fb=True),
    "special.gammaln": sp("gammaln", PV, fb=True),
    "special.digamma": sp("digamma", PV, fb=True),
    "special.ndtr": sp("ndtr", V, fb=True),
    "special.log_ndtr": sp("log_ndtr", V, fb=True),
    "special.ndtri": sp("ndtri", U, fb=True),
    "special.i0": sp("i0", V, fb=True),
    "special.sinc": sp("sinc", V, fb=True),
    "special.boxcox": Case(
        lambda xp, x: special.boxcox(x, 0.5), (PV,), grad_xfail=fallback("scipy.special.boxcox")
    ),
    "special.huber": Case(
        lambda xp, x: special.huber(1.0, x), (V,), grad_xfail=fallback("scipy.special.huber")
    ),
    # -- scipy.stats ---------------------------------------------------------------------
    "stats.moment": st("moment", A, order=3, axis=1),
    "stats.moment-center": st("moment", V, order=2, center=0.5),
    "stats.skew": st("skew", A, axis=1),
    "stats.skew-unbiased": st("skew", V, bias=False),
    "stats.kurtosis": st("kurtosis", A, axis=0),
    "stats.kurtosis-pearson": st("kurtosis", V, fisher=False, bias=False),
    "stats.zscore": st("zscore", A, axis=1),
    "stats.zscore-ddof": st("zscore", V, ddof=1),
    "stats.zmap": Case(lambda xp, a, b: stats.zmap(a, b), (V, W)),
    "stats.gzscore": st("gzscore", PV),
    "stats.describe": Case(lambda xp, a: stats.describe(a, axis=1)[2:], (A,)),
    "stats.describe-minmax": Case(lambda xp, a: stats.describe(a).minmax, (V,)),
    "stats.variation": st("variation", P, axis=1),
    "stats.variation-ddof": st("variation", PV, ddof=1),
    "stats.gmean": st("gmean", P, axis=0),
    "stats.gmean-weights": Case(lambda xp, a, w: stats.gmean(a, weights=w), (PV, QV)),
    "stats.hmean": st("hmean", P, axis=1),
    "stats.pmean": st("pmean", PV, 2.5),
    "stats.pmean-negative": st("pmean", P, -1.5, axis=1),
    "stats.entropy": st(
        "entropy",
        PV,
        grad_xfail=XF(
            "scipy.stats.entropy(pk) without qk uses scipy.special.entr, which has no Array API "
            "implementation (NumPy fallback: np.asarray drops the gradient)"
            + SERVED.format("entr"),
            backends=_fallback_backends("entr"),
            raises=TypeError,
        ),
    ),
    "stats.entropy-qk": Case(lambda xp, p, q: stats.entropy(p, q, base=2), (PV, QV)),
    "stats.differential_entropy": st("differential_entropy", R.standard_normal(20)),
    "stats.pearsonr": st(
        "pearsonr", V, W, attr="statistic", grad_xfail=pvalue("pearsonr", "betaincc")
    ),
    "stats.pearsonr-pvalue": st("pearsonr", V, W, attr="pvalue", grad=False),
    "stats.sem": st("sem", A, axis=1),
    "stats.tmean": st("tmean", V),
    "stats.tvar": st("tvar", V),
    "stats.tstd": st("tstd", V),
    "stats.tsem": st("tsem", V),
    "stats.tmin": st("tmin", V),
    "stats.tmax": st("tmax", V),
    "stats.trim_mean": st("trim_mean", V, 0.2),
    "stats.kstat": st("kstat", V, 3),
    "stats.kstatvar": st("kstatvar", V),
    "stats.circmean": st("circmean", V),
    "stats.circvar": st("circvar", V),
    "stats.circstd": st("circstd", V),
    "stats.iqr": st("iqr", V),
    "stats.median_abs_deviation": st("median_abs_deviation", V),
    "stats.quantile": Case(lambda xp, a: stats.quantile(a, xp.asarray([0.25, 0.5, 0.8])), (V,)),
    "stats.boxcox_llf": st("boxcox_llf", 0.5, PV),
    "stats.yeojohnson_llf": st("yeojohnson_llf", 0.5, V),
    "stats.ttest_1samp": st(
        "ttest_1samp", V, 0.3, attr="statistic", grad_xfail=pvalue("ttest_1samp", "stdtr")
    ),
    "stats.ttest_ind": st(
        "ttest_ind", V, W, attr="statistic", grad_xfail=pvalue("ttest_ind", "stdtr")
    ),
    "stats.ttest_rel": st(
        "ttest_rel", V, W, attr="statistic", grad_xfail=pvalue("ttest_rel", "stdtr")
    ),
    "stats.ttest_ind-pvalue": st("ttest_ind", V, W, attr="pvalue", grad=False),
    "stats.chisquare": st(
        "chisquare", PV, attr="statistic", grad_xfail=pvalue("chisquare", "chdtrc")
    ),
    "stats.power_divergence": Case(
        lambda xp, f, e: (
            stats.power_divergence(f, e * (xp.sum(f) / xp.sum(e)), lambda_="cressie-read").statistic
        ),
        (PV, QV),
        grad_xfail=pvalue("power_divergence", "chdtrc"),
    ),
    "stats.f_oneway": st(
        "f_oneway", V, W, attr="statistic", grad_xfail=pvalue("f_oneway", "fdtrc")
    ),
    "stats.jarque_bera": st(
        "jarque_bera", V, attr="statistic", grad_xfail=pvalue("jarque_bera", "chdtrc")
    ),
    "stats.skewtest": st(
        "skewtest", R.standard_normal(12), attr="statistic", grad_xfail=pvalue("skewtest", "ndtr")
    ),
    "stats.lmoment": st("lmoment", V, order=2),
    "stats.gstd": st("gstd", PV),
    "stats.rankdata": st("rankdata", V, grad=False),
    "stats.mode": Case(
        lambda xp, a: stats.mode(a).mode, (np.array([1.0, 2.0, 2.0, 3.0, 1.0, 2.0]),), grad=False
    ),
    "stats.directional_stats": st("directional_stats", X2, attr="mean_direction"),
    "stats.spearmanrho": st("spearmanrho", V, W, attr="statistic"),
    "stats.chatterjeexi": st("chatterjeexi", V, W, attr="statistic", grad=False),
    "stats.false_discovery_control": Case(
        lambda xp, p: stats.false_discovery_control(p / 3), (PV,)
    ),
    "stats.sigmaclip": Case(lambda xp, a: stats.sigmaclip(a, 1.5, 1.5)[1:], (V,)),
    "stats.tmin-limit": st("tmin", V, -0.5),
    "stats.combine_pvalues": Case(
        lambda xp, p: stats.combine_pvalues(p / 3).statistic,
        (PV,),
        grad_xfail=pvalue("combine_pvalues", "chdtrc"),
    ),
    "stats.ttest_ind_from_stats": Case(
        lambda xp, m: stats.ttest_ind_from_stats(m, 1.0, 10, 0.0, 1.2, 12).statistic,
        (np.asarray(0.4),),
        grad_xfail=pvalue("ttest_ind_from_stats", "stdtr"),
    ),
    "stats.bartlett": st(
        "bartlett", V, W, attr="statistic", grad_xfail=pvalue("bartlett", "chdtrc")
    ),
    "stats.levene": st("levene", V, W, attr="statistic", grad_xfail=pvalue("levene", "fdtrc")),
    "stats.Normal.logpdf": Case(
        lambda xp, x: stats.Normal(mu=0.3, sigma=1.4).logpdf(x),
        (V,),
        value_xfail=XF(
            "scipy.stats.Normal(...).logpdf (the new distribution "
            "infrastructure) converts x with np.asarray, computes in "
            "NumPy and returns a NumPy ndarray, not the input's "
            "namespace (under grad: TypeError)",
            raises=(AssertionError, TypeError),
        ),
    ),
    # -- scipy.fft -----------------------------------------------------------------------
    "fft.fft": Case(lambda xp, a: sfft.fft(a), (V,)),
    "fft.ifft": Case(lambda xp, a: sfft.ifft(a, n=9), (V,)),
    "fft.rfft": Case(lambda xp, a: sfft.rfft(a, axis=0), (A,)),
    "fft.irfft": Case(lambda xp, a, b: sfft.irfft(sfft.rfft(a) * b), (V, PV[:4])),
    "fft.fft2": Case(lambda xp, a: sfft.fft2(a, norm="ortho"), (A,)),
    "fft.fftn": Case(lambda xp, a: sfft.fftn(a), (A,)),
    "fft.ifftn": Case(lambda xp, a: sfft.ifftn(a, axes=(1,)), (A,)),
    "fft.rfftn": Case(lambda xp, a: sfft.rfftn(a), (A,)),
    "fft.irfftn": Case(lambda xp, a: sfft.irfftn(sfft.rfftn(a), s=A.shape), (A,)),
    "fft.hfft": Case(lambda xp, a: sfft.hfft(a), (V,)),
    "fft.ihfft": Case(lambda xp, a: sfft.ihfft(a), (V,)),
    "fft.fftshift": Case(lambda xp, a: sfft.fftshift(a), (A,)),
    "fft.ifftshift": Case(lambda xp, a: sfft.ifftshift(a, axes=0), (A,)),
    "fft.fftfreq": Case(lambda xp: sfft.fftfreq(8, d=0.5, xp=xp), (), grad=False),
    "fft.rfftfreq": Case(lambda xp: sfft.rfftfreq(9, xp=xp), (), grad=False),
    "fft.dct": Case(lambda xp, a: sfft.dct(a), (V,), grad_xfail=numpy_inside("scipy.fft.dct")),
    "fft.idct": Case(
        lambda xp, a: sfft.idct(a, type=3), (V,), grad_xfail=numpy_inside("scipy.fft.idct")
    ),
    "fft.dst": Case(
        lambda xp, a: sfft.dst(a, norm="ortho"), (V,), grad_xfail=numpy_inside("scipy.fft.dst")
    ),
    "fft.dctn": Case(lambda xp, a: sfft.dctn(a), (A,), grad_xfail=numpy_inside("scipy.fft.dctn")),
    # -- scipy.integrate -----------------------------------------------------------------
    "integrate.trapezoid": Case(lambda xp, y: integrate.trapezoid(y, dx=0.5, axis=1), (A,)),
    "integrate.trapezoid-x": Case(
        lambda xp, y, x: integrate.trapezoid(y, x=xp.cumulative_sum(x)), (V, R.uniform(0.5, 1.5, 7))
    ),
    "integrate.cumulative_trapezoid": Case(
        lambda xp, y: integrate.cumulative_trapezoid(y, dx=0.3, initial=0), (V,)
    ),
    "integrate.cumulative_simpson": Case(
        lambda xp, y: integrate.cumulative_simpson(y, dx=0.3), (V,)
    ),
    "integrate.simpson": Case(
        lambda xp, y: integrate.simpson(y, dx=0.5),
        (V,),
        grad_xfail=numpy_inside("scipy.integrate.simpson (not Array API enabled)"),
    ),
    "integrate.romb": Case(lambda xp, y: integrate.romb(y, dx=0.25), (R.standard_normal(9),)),
    # -- scipy.signal ----------------------------------------------------------------------
    "signal.convolve": Case(
        lambda xp, a, b: signal.convolve(a, b), (V, PV[:3]), grad_xfail=auto_method("convolve")
    ),
    "signal.convolve-fft": Case(lambda xp, a, b: signal.convolve(a, b, method="fft"), (V, PV[:3])),
    "signal.correlate": Case(
        lambda xp, a, b: signal.correlate(a, b, mode="same"),
        (V, PV[:3]),
        grad_xfail=auto_method("correlate"),
    ),
    "signal.fftconvolve": Case(lambda xp, a, b: signal.fftconvolve(a, b), (V, PV[:3])),
    "signal.oaconvolve": Case(lambda xp, a, b: signal.oaconvolve(a, b), (V, PV[:3])),
    "signal.convolve2d": Case(
        lambda xp, a, b: signal.convolve2d(a, b, mode="same"),
        (IMG, P[:2, :2]),
        grad_xfail=numpy_inside("scipy.signal.convolve2d"),
    ),
    "signal.lfilter": Case(
        lambda xp, x: signal.lfilter(xp.asarray([0.5, 0.25]), xp.asarray([1.0, -0.3]), x),
        (V,),
        grad_xfail=numpy_inside("scipy.signal.lfilter"),
    ),
    "signal.detrend": Case(
        lambda xp, x: signal.detrend(x), (V,), grad_xfail=numpy_inside("scipy.signal.detrend")
    ),
    "signal.hilbert": Case(lambda xp, x: signal.hilbert(x), (V,)),
    "signal.savgol_filter": Case(
        lambda xp, x: signal.savgol_filter(x, 5, 2),
        (V,),
        grad_xfail=numpy_inside(
            "scipy.signal.savgol_filter",
            "filters with scipy.ndimage.convolve1d, which converts to NumPy",
        ),
    ),
    "signal.windows.hann": Case(lambda xp: signal.windows.hann(8, xp=xp), (), grad=False),
    "signal.get_window": Case(lambda xp: signal.get_window("hamming", 8, xp=xp), (), grad=False),
    "signal.windows.kaiser": Case(lambda xp: signal.windows.kaiser(9, 2.5, xp=xp), (), grad=False),
    # -- scipy.differentiate ---------------------------------------------------------------
    "differentiate.derivative": Case(
        lambda xp, x: differentiate.derivative(lambda t: t**3 - t, x).df,
        (V,),
        rtol=1e-8,
        value_xfail=XF(
            "scipy.differentiate.derivative calls xp.full(shape, fill_value) with a 0-d array "
            "as fill_value; the standard takes a Python scalar and array-api-strict raises "
            "TypeError",
            backends=("array_api_strict",),
            raises=TypeError,
        ),
    ),
    # -- scipy.cluster.vq ------------------------------------------------------------------
    "cluster.vq.whiten": Case(lambda xp, a: vq.whiten(a), (X2,)),
    "cluster.vq.vq": Case(lambda xp, a, c: vq.vq(a, c)[1], (X2, X2[:2]), grad=False),
    "cluster.vq.kmeans2": Case(
        lambda xp, a: vq.kmeans2(a, 2, rng=1, minit="points")[0],
        (X2,),
        grad_xfail=numpy_inside("scipy.cluster.vq.kmeans2"),
    ),
    # -- scipy.ndimage ---------------------------------------------------------------------
    "ndimage.gaussian_filter": Case(
        lambda xp, a: ndimage.gaussian_filter(a, 1.0),
        (IMG,),
        grad_xfail=numpy_inside("scipy.ndimage.gaussian_filter"),
    ),
    "ndimage.uniform_filter": Case(
        lambda xp, a: ndimage.uniform_filter(a, 3),
        (IMG,),
        grad_xfail=numpy_inside("scipy.ndimage.uniform_filter"),
    ),
    "ndimage.sobel": Case(
        lambda xp, a: ndimage.sobel(a), (IMG,), grad_xfail=numpy_inside("scipy.ndimage.sobel")
    ),
    "ndimage.zoom": Case(
        lambda xp, a: ndimage.zoom(a, 1.5, order=1),
        (IMG,),
        grad_xfail=numpy_inside("scipy.ndimage.zoom"),
    ),
    # -- scipy.linalg / scipy.optimize / scipy.interpolate -----------------------------------
    "linalg.block_diag": Case(lambda xp, a, b: linalg.block_diag(a, b), (A, P[:2, :3])),
    "linalg.orthogonal_procrustes": Case(
        lambda xp, a, b: linalg.orthogonal_procrustes(a, b)[0], (X2, X2 + 0.1 * X2[::-1])
    ),
    "optimize.rosen": Case(lambda xp, x: optimize.rosen(x), (V,)),
    "optimize.rosen_der": Case(lambda xp, x: optimize.rosen_der(x), (V,)),
    "interpolate.CubicSpline": Case(
        lambda xp, y: interpolate.CubicSpline(xp.arange(7.0), y)(xp.asarray([0.5, 2.2, 5.9])),
        (V,),
        grad_xfail=numpy_inside(
            "scipy.interpolate.CubicSpline",
            "prepares its input with the NumPy namespace (prepare_input(..., xp=np_compat))",
        ),
    ),
}

test_value, test_grad, test_xfail_list_is_current = make_tests(CASES, __file__)


def test_scipy_array_api_is_on():
    from scipy._lib._array_api import SCIPY_ARRAY_API

    assert SCIPY_ARRAY_API, "SCIPY_ARRAY_API was not set before SciPy was imported"


@pytest.mark.parametrize("name", ["pearsonr", "f_oneway"])
def test_jvp_through_scipy_stats_matches_the_gradient(name):
    """Forward mode through scipy.stats' Array API code: a first-order rule's NumPy scalar
    (np.float64 of a 0-d operation) reached the derived JVP, which crashed on it."""
    import pycograd_xp as pg

    xp = pg.namespace("numpy")
    f = getattr(stats, name)
    w = xp.asarray(W)
    v = np.random.default_rng(2).standard_normal(V.shape)
    stat = lambda x: f(x, w).statistic
    _, t = pg.jvp(stat, (xp.asarray(V),), (xp.asarray(v),))
    g = pg.grad(stat)(xp.asarray(V))
    np.testing.assert_allclose(float(t), float(xp.sum(g * xp.asarray(v))), rtol=1e-12)


def test_chdtrc_with_a_python_float_degrees_of_freedom():
    """SciPy's chdtrc calls xp.isnan on its first argument as given (here a Python float)."""
    import pycograd_xp as pg

    xp = pg.namespace("numpy")
    x = xp.asarray(PV)
    np.testing.assert_allclose(
        np.asarray(pg.unwrap(special.chdtrc(3.0, x))), special.chdtrc(3.0, PV), rtol=1e-14
    )
    g = pg.grad(lambda x: xp.sum(special.chdtrc(3.0, x)))(x)
    np.testing.assert_allclose(np.asarray(pg.unwrap(g)), -stats.chi2.pdf(PV, 3.0), rtol=1e-12)
