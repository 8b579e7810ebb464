"""scikit-learn's Array API dispatch (``config_context(array_api_dispatch=True)``) on pycograd_xp
arrays: estimators, preprocessing, metrics and pairwise kernels; values against scikit-learn on
NumPy, gradients against finite differences."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from _clients_common import XF, Case, apply_xfail, frozen, grad_fd, make_tests

import pycograd_xp

sklearn = pytest.importorskip("sklearn")
pytest.importorskip("scipy")
from sklearn import (  # noqa: E402
    decomposition,
    discriminant_analysis,
    kernel_approximation,
    linear_model,
    metrics,
    mixture,
    model_selection,
    naive_bayes,
    preprocessing,
)
from sklearn.metrics import pairwise  # noqa: E402
from sklearn.utils import extmath, multiclass  # noqa: E402

R = np.random.default_rng(20240604)
X = R.standard_normal((12, 3)) * np.array([1.0, 2.0, 0.5]) + np.array([0.3, -1.0, 2.0])
Y = R.standard_normal((5, 3))
XP = R.uniform(0.2, 2.0, (6, 3))  # positive, for the chi2 kernels
YP = R.uniform(0.2, 2.0, (4, 3))
W = R.standard_normal(3)
T = X @ np.array([1.5, -0.5, 2.0]) + 0.1 * R.standard_normal(12)  # a regression target
T2 = np.stack([T, R.standard_normal(12)], axis=1)
Y_TRUE = R.standard_normal(10)
Y_PRED = Y_TRUE + 0.3 * R.standard_normal(10)
Y_POS = R.uniform(0.5, 3.0, 10)
Y_POS_PRED = Y_POS * R.uniform(0.7, 1.3, 10)
LABELS = np.array([0, 1, 2, 1, 0, 2, 1, 0, 2, 1, 0, 2])  # three classes for X
BIN = np.array([0, 1, 1, 0, 1, 0, 0, 1, 1, 0])
PROBS = R.uniform(0.1, 0.9, 10)
PRED = np.array([0, 1, 0, 0, 1, 1, 0, 1, 1, 1])
frozen(globals())


def dispatch(f):
    """``f`` run with scikit-learn's Array API dispatch on."""

    @functools.wraps(f)
    def wrapped(*args):
        with sklearn.config_context(array_api_dispatch=True):
            return f(*args)

    return wrapped


def case(f, args, **kw) -> Case:
    return Case(dispatch(f), args, **kw)


def const(xp, a):
    """A constant (non-differentiated) input in the arrays' namespace."""
    return xp.asarray(a)


def _ridge(solver, fit_intercept=True):
    def f(xp, x, t):
        m = linear_model.Ridge(alpha=0.7, solver=solver, fit_intercept=fit_intercept).fit(x, t)
        return m.coef_, m.intercept_, m.predict(x[:4, :])

    return f


def _pca(solver, **kw):
    def f(xp, x):
        m = decomposition.PCA(n_components=2, svd_solver=solver, **kw)
        z = m.fit_transform(x)
        return z, m.components_, m.explained_variance_, m.mean_

    return f


def _lda(solver):
    def f(xp, x):
        m = discriminant_analysis.LinearDiscriminantAnalysis(solver=solver)
        m.fit(x, const(xp, LABELS))
        out = [m.predict_proba(x), m.decision_function(x), m.coef_]
        if solver != "lsqr":
            out.append(m.transform(x))
        return tuple(out)

    return f


def _scaler(cls, attrs=(), **kw):
    def f(xp, x):
        m = cls(**kw)
        z = m.fit_transform(x)
        return (z, m.inverse_transform(z * 0.5), *[getattr(m, a) for a in attrs])

    return f


def _metric(fn, *, const_true=False, **kw):
    """A regression metric: as a function of (y_true, y_pred), or of y_pred only."""
    if const_true:
        return lambda xp, yp: xp.asarray(fn(const(xp, Y_POS), yp, **kw))
    return lambda xp, yt, yp: xp.asarray(fn(yt, yp, **kw))


def _mse_of_w(xp, w):
    """The brief's example: mean_squared_error(y, f(w)) for a linear model f."""
    return xp.asarray(metrics.mean_squared_error(const(xp, T), const(xp, X) @ w))


def _gmm(init, cov):
    def f(xp, x):
        m = mixture.GaussianMixture(
            2, covariance_type=cov, init_params=init, random_state=0, max_iter=3, tol=0.0
        )
        m.fit(x)
        return m.means_, m.covariances_, m.weights_

    return f


def _kernel(fn, **kw):
    return lambda xp, a, b: fn(a, b, **kw)


# -- expected failures that belong to scikit-learn ---------------------------------------------

PY_FLOAT = (
    "sklearn.metrics.{} returns float(...) of its result (a Python float, by design); "
    "float() of an array being differentiated raises TypeError in pycograd_xp"
)


def returns_float(name: str) -> XF:
    return XF(PY_FLOAT.format(name), raises=TypeError)


def LBFGS(name: str) -> XF:
    return XF(
        f"sklearn.linear_model.{name}(solver='lbfgs') fits with scipy.optimize.minimize "
        "(L-BFGS-B), which runs in NumPy and takes float() of the loss: pycograd_xp "
        "raises TypeError on an array being differentiated",
        raises=TypeError,
    )


RIDGE_SVD_ONLY = XF(
    "sklearn.linear_model.Ridge under Array API dispatch supports only "
    "solver='svd' (_ridge_regression raises ValueError for 'cholesky')",
    raises=ValueError,
)
LDA_SVD_ONLY = XF(
    "sklearn LinearDiscriminantAnalysis supports the Array API only with "
    "solver='svd': _class_cov for 'lsqr'/'eigen' is NumPy code (np.unique(y), "
    "then X[y == <NumPy scalar>, :], np.zeros)",
    raises=(TypeError, ValueError, IndexError),
)
SCALER_NAN = XF(
    "sklearn.utils.extmath._incremental_mean_and_var (StandardScaler.fit) computes "
    "last_sum / last_over_new_count = 0/0 = nan for a first fit and overwrites it "
    "with updated_unnormalized_variance[zeros] = ...; reverse mode carries the zero "
    "cotangent through the nan (0 * nan = nan), as JAX and PyTorch would"
)


CASES: dict[str, Case] = {
    # -- linear models -------------------------------------------------------------------
    "Ridge-svd": case(_ridge("svd"), (X, T)),
    "Ridge-svd-multitarget": case(_ridge("svd"), (X, T2)),
    "Ridge-cholesky": case(_ridge("cholesky"), (X, T), value_xfail=RIDGE_SVD_ONLY),
    "Ridge-svd-nointercept": case(_ridge("svd", fit_intercept=False), (X, T2)),
    "RidgeCV": case(
        lambda xp, x, t: linear_model.RidgeCV(alphas=(0.1, 1.0, 10.0)).fit(x, t).coef_, (X, T)
    ),
    "RidgeClassifier": case(
        lambda xp, x: (
            linear_model.RidgeClassifier(solver="svd")
            .fit(x, const(xp, LABELS))
            .decision_function(x)
        ),
        (X,),
    ),
    # -- decomposition / discriminant analysis / naive Bayes / kernel approximation --------
    "PCA-full": case(_pca("full"), (X,)),
    "PCA-full-whiten": case(_pca("full", whiten=True), (X,)),
    "PCA-covariance_eigh": case(_pca("covariance_eigh"), (X,)),
    "LinearDiscriminantAnalysis-svd": case(_lda("svd"), (X,)),
    "LinearDiscriminantAnalysis-lsqr": case(_lda("lsqr"), (X,), value_xfail=LDA_SVD_ONLY),
    "LinearDiscriminantAnalysis-eigen": case(_lda("eigen"), (X,), value_xfail=LDA_SVD_ONLY),
    "GaussianNB": case(
        lambda xp, x: naive_bayes.GaussianNB().fit(x, const(xp, LABELS)).predict_proba(x), (X,)
    ),
    "Nystroem": case(
        lambda xp, x: kernel_approximation.Nystroem(
            gamma=0.3, n_components=6, random_state=0
        ).fit_transform(x),
        (X,),
    ),
    # -- preprocessing -------------------------------------------------------------------
    "StandardScaler": case(
        _scaler(preprocessing.StandardScaler, ("mean_", "scale_", "var_")),
        (X,),
        grad_xfail=SCALER_NAN,
    ),
    "StandardScaler-nomean": case(
        _scaler(preprocessing.StandardScaler, ("scale_",), with_mean=False),
        (X,),
        grad_xfail=SCALER_NAN,
    ),
    "MinMaxScaler": case(
        _scaler(preprocessing.MinMaxScaler, ("data_min_", "scale_"), feature_range=(-1, 2)), (X,)
    ),
    "MaxAbsScaler": case(_scaler(preprocessing.MaxAbsScaler, ("max_abs_",)), (X,)),
    "Normalizer": case(lambda xp, x: preprocessing.Normalizer().fit_transform(x), (X,)),
    "normalize-l1": case(lambda xp, x: preprocessing.normalize(x, norm="l1"), (X,)),
    "normalize-max": case(lambda xp, x: preprocessing.normalize(x, norm="max", axis=0), (X,)),
    "Binarizer": case(
        lambda xp, x: preprocessing.Binarizer(threshold=0.2).fit_transform(x), (X,), grad=False
    ),
    "PolynomialFeatures": case(
        lambda xp, x: preprocessing.PolynomialFeatures(2).fit_transform(x), (X,)
    ),
    "KernelCenterer": case(
        lambda xp, x: preprocessing.KernelCenterer().fit_transform(x @ x.T), (X,)
    ),
    "LabelEncoder": case(
        lambda xp, y: preprocessing.LabelEncoder().fit_transform(y),
        (np.array([3.0, 1.0, 3.0, 7.0, 1.0]),),
        grad=False,
    ),
    "LabelEncoder-inverse": case(
        lambda xp: (
            preprocessing.LabelEncoder()
            .fit(const(xp, [5, 2, 9]))
            .inverse_transform(const(xp, [2, 0, 1, 1]))
        ),
        (),
        grad=False,
    ),
    "label_binarize": case(
        lambda xp: preprocessing.label_binarize(const(xp, [1, 3, 2, 3]), classes=[1, 2, 3]),
        (),
        grad=False,
    ),
    # -- regression metrics ----------------------------------------------------------------
    "mean_squared_error": case(
        _metric(metrics.mean_squared_error),
        (Y_TRUE, Y_PRED),
        grad_xfail=returns_float("mean_squared_error"),
    ),
    "mean_squared_error-of-w": case(
        _mse_of_w, (W,), grad_xfail=returns_float("mean_squared_error")
    ),
    "mean_squared_error-multioutput": case(
        _metric(metrics.mean_squared_error, multioutput="raw_values"), (T2, T2[::-1])
    ),
    "root_mean_squared_error": case(
        _metric(metrics.root_mean_squared_error),
        (Y_TRUE, Y_PRED),
        grad_xfail=returns_float("root_mean_squared_error"),
    ),
    "mean_absolute_error": case(
        _metric(metrics.mean_absolute_error),
        (Y_TRUE, Y_PRED),
        grad_xfail=returns_float("mean_absolute_error"),
    ),
    "r2_score": case(
        _metric(metrics.r2_score), (Y_TRUE, Y_PRED), grad_xfail=returns_float("r2_score")
    ),
    "r2_score-multioutput": case(
        _metric(metrics.r2_score, multioutput="raw_values"), (T2, T2[::-1])
    ),
    "explained_variance_score": case(
        _metric(metrics.explained_variance_score),
        (Y_TRUE, Y_PRED),
        grad_xfail=returns_float("explained_variance_score"),
    ),
    "mean_pinball_loss": case(
        _metric(metrics.mean_pinball_loss, alpha=0.3),
        (Y_TRUE, Y_PRED),
        grad_xfail=returns_float("mean_pinball_loss"),
    ),
    "mean_absolute_percentage_error": case(
        _metric(metrics.mean_absolute_percentage_error),
        (Y_POS, Y_POS_PRED),
        grad_xfail=returns_float("mean_absolute_percentage_error"),
    ),
    "mean_squared_log_error": case(
        _metric(metrics.mean_squared_log_error, const_true=True),
        (Y_POS_PRED,),
        grad_xfail=returns_float("mean_squared_log_error"),
    ),
    "max_error": case(
        _metric(metrics.max_error), (Y_TRUE, Y_PRED), grad_xfail=returns_float("max_error")
    ),
    "median_absolute_error": case(
        _metric(metrics.median_absolute_error),
        (Y_TRUE, Y_PRED),
        grad_xfail=XF(
            "sklearn.metrics.median_absolute_error takes the median "
            "with sklearn.utils._array_api._median, which moves the "
            "data to NumPy (numpy.median) for namespaces without a "
            "median (it is not in the standard): pycograd_xp raises "
            "TypeError",
            raises=TypeError,
        ),
    ),
    "mean_tweedie_deviance": case(
        _metric(metrics.mean_tweedie_deviance, power=1.5),
        (Y_POS, Y_POS_PRED),
        grad_xfail=returns_float("mean_tweedie_deviance"),
    ),
    "d2_tweedie_score": case(
        _metric(metrics.d2_tweedie_score, power=1.5),
        (Y_POS, Y_POS_PRED),
        grad_xfail=returns_float("d2_tweedie_score"),
    ),
    # -- classification metrics --------------------------------------------------------------
    "accuracy_score": case(
        lambda xp: xp.asarray(metrics.accuracy_score(const(xp, BIN), const(xp, PRED))),
        (),
        grad=False,
    ),
    "zero_one_loss": case(
        lambda xp: xp.asarray(
            metrics.zero_one_loss(const(xp, BIN), const(xp, PRED), normalize=False)
        ),
        (),
        grad=False,
    ),
    "hamming_loss": case(
        lambda xp: xp.asarray(metrics.hamming_loss(const(xp, BIN), const(xp, PRED))), (), grad=False
    ),
    "balanced_accuracy_score": case(
        lambda xp: xp.asarray(metrics.balanced_accuracy_score(const(xp, BIN), const(xp, PRED))),
        (),
        grad=False,
        value_xfail=XF(
            "sklearn.metrics.balanced_accuracy_score divides the integer confusion matrix "
            "(xp.linalg.diagonal(C) / xp.sum(C, axis=1)); the standard's divide takes floating "
            "dtypes only and array-api-strict raises TypeError",
            backends=("array_api_strict",),
            raises=TypeError,
        ),
    ),
    "confusion_matrix": case(
        lambda xp: metrics.confusion_matrix(const(xp, BIN), const(xp, PRED)), (), grad=False
    ),
    "precision_recall_fscore_support": case(
        lambda xp: metrics.precision_recall_fscore_support(const(xp, BIN), const(xp, PRED))[:3],
        (),
        grad=False,
    ),
    "jaccard_score": case(
        lambda xp: xp.asarray(metrics.jaccard_score(const(xp, BIN), const(xp, PRED))),
        (),
        grad=False,
    ),
    "cohen_kappa_score": case(
        lambda xp: xp.asarray(metrics.cohen_kappa_score(const(xp, BIN), const(xp, PRED))),
        (),
        grad=False,
    ),
    "log_loss": case(
        lambda xp, p: xp.asarray(metrics.log_loss(const(xp, BIN), p)),
        (PROBS,),
        grad_xfail=returns_float("log_loss"),
    ),
    "brier_score_loss": case(
        lambda xp, p: xp.asarray(metrics.brier_score_loss(const(xp, BIN), p)),
        (PROBS,),
        grad_xfail=returns_float("brier_score_loss"),
    ),
    "d2_log_loss_score": case(
        lambda xp, p: xp.asarray(metrics.d2_log_loss_score(const(xp, BIN), p)),
        (PROBS,),
        grad_xfail=returns_float("d2_log_loss_score"),
    ),
    "roc_curve": case(
        lambda xp, p: metrics.roc_curve(const(xp, BIN), p),
        (PROBS,),
        grad=False,
        value_xfail=XF(
            "sklearn.metrics.roc_curve(drop_intermediate=True) calls "
            "xp.diff(fps, 2) with n positional; the standard's diff takes n "
            "keyword-only (diff(x, /, *, axis=-1, n=1, ...))",
            raises=TypeError,
        ),
    ),
    "roc_curve-all": case(
        lambda xp, p: metrics.roc_curve(const(xp, BIN), p, drop_intermediate=False),
        (PROBS,),
        grad=False,
    ),
    "average_precision_score": case(
        lambda xp, p: xp.asarray(metrics.average_precision_score(const(xp, BIN), p)),
        (PROBS,),
        grad=False,
    ),
    "calinski_harabasz_score": case(
        lambda xp, x: xp.asarray(metrics.calinski_harabasz_score(x, const(xp, LABELS))),
        (X,),
        grad_xfail=returns_float("calinski_harabasz_score"),
    ),
    "davies_bouldin_score": case(
        lambda xp, x: xp.asarray(metrics.davies_bouldin_score(x, const(xp, LABELS))),
        (X,),
        grad_xfail=returns_float("davies_bouldin_score"),
    ),
    # -- pairwise kernels and distances --------------------------------------------------
    "euclidean_distances": case(_kernel(pairwise.euclidean_distances), (X, Y)),
    "euclidean_distances-squared": case(
        _kernel(pairwise.euclidean_distances, squared=True), (X, Y)
    ),
    "euclidean_distances-self": case(lambda xp, x: xp.sum(pairwise.euclidean_distances(x)), (Y,)),
    "rbf_kernel": case(_kernel(pairwise.rbf_kernel, gamma=0.4), (X, Y)),
    "rbf_kernel-sum": case(lambda xp, x: xp.sum(pairwise.rbf_kernel(x)), (X,)),
    "laplacian_kernel": case(_kernel(pairwise.laplacian_kernel, gamma=0.4), (X, Y)),
    "polynomial_kernel": case(_kernel(pairwise.polynomial_kernel, degree=3, coef0=0.5), (X, Y)),
    "linear_kernel": case(_kernel(pairwise.linear_kernel), (X, Y)),
    "sigmoid_kernel": case(_kernel(pairwise.sigmoid_kernel, gamma=0.2, coef0=0.1), (X, Y)),
    "cosine_similarity": case(_kernel(pairwise.cosine_similarity), (X, Y)),
    "cosine_distances": case(_kernel(pairwise.cosine_distances), (X, Y)),
    "additive_chi2_kernel": case(_kernel(pairwise.additive_chi2_kernel), (XP, YP)),
    "chi2_kernel": case(_kernel(pairwise.chi2_kernel, gamma=0.5), (XP, YP)),
    "manhattan_distances": case(_kernel(pairwise.manhattan_distances), (X, Y)),
    "paired_euclidean_distances": case(
        lambda xp, a, b: pairwise.paired_euclidean_distances(a, b), (X[:5], Y)
    ),
    "paired_manhattan_distances": case(
        lambda xp, a, b: pairwise.paired_manhattan_distances(a, b), (X[:5], Y)
    ),
    "pairwise_distances": case(
        lambda xp, a, b: pairwise.pairwise_distances(a, b, metric="euclidean"), (X, Y)
    ),
    "pairwise_kernels": case(
        lambda xp, a, b: pairwise.pairwise_kernels(a, b, metric="rbf", gamma=0.3), (X, Y)
    ),
    "pairwise_distances_argmin": case(
        lambda xp, a, b: pairwise.pairwise_distances_argmin(a, b),
        (X, Y),
        grad=False,
        value_xfail=XF(
            "sklearn.metrics.pairwise._check_chunk_size requires hasattr(result, '__iter__'); "
            "__iter__ is not part of the standard's array object and pycograd_xp arrays have "
            "none (array-api-strict's have one, for 1-D arrays)",
            raises=TypeError,
        ),
    ),
    # -- iterative estimators -----------------------------------------------------------
    "GaussianMixture-full": case(_gmm("random", "full"), (X,)),
    "GaussianMixture-diag": case(_gmm("random", "diag"), (X,)),
    "GaussianMixture-tied": case(_gmm("random", "tied"), (X,)),
    "GaussianMixture-random_from_data": case(_gmm("random_from_data", "diag"), (X,)),
    "LogisticRegression-lbfgs": case(
        lambda xp, x: linear_model.LogisticRegression(C=0.5).fit(x, const(xp, LABELS)).coef_,
        (X,),
        grad_xfail=LBFGS("LogisticRegression"),
    ),
    "PoissonRegressor": case(
        lambda xp, x: (
            linear_model.PoissonRegressor(alpha=0.1)
            .fit(x, const(xp, np.arange(12.0) % 4 + 0.5))
            .coef_
        ),
        (X,),
        grad_xfail=LBFGS("PoissonRegressor"),
    ),
    # -- utilities -----------------------------------------------------------------------
    "train_test_split": case(
        lambda xp, x: tuple(model_selection.train_test_split(x, test_size=0.25, random_state=1)),
        (X,),
    ),
    "unique_labels": case(lambda xp: multiclass.unique_labels(const(xp, LABELS)), (), grad=False),
    "extmath.softmax": case(lambda xp, x: extmath.softmax(x * 1.0), (X,)),
    "extmath.row_norms": case(lambda xp, x: extmath.row_norms(x), (X,)),
    "extmath.svd_flip": case(
        lambda xp, x: extmath.svd_flip(
            *pycograd_xp.tree_leaves(xp.linalg.svd(x, full_matrices=False))[::2]
        )[0],
        (X,),
    ),
}

test_value, test_grad, test_xfail_list_is_current = make_tests(CASES, __file__)


def test_dispatch_keeps_the_namespace(xp):
    """With dispatch on, scikit-learn returns the input's namespace, not NumPy."""
    with sklearn.config_context(array_api_dispatch=True):
        z = preprocessing.StandardScaler().fit_transform(xp.asarray(X))
        from sklearn.utils._array_api import get_namespace

        ns, is_array_api = get_namespace(xp.asarray(X))
    assert isinstance(z, pycograd_xp.Array)
    assert ns is xp and is_array_api


@pytest.mark.parametrize("what", ["StandardScaler", "Ridge-y", "PCA", "rbf_kernel"])
def test_brief_gradients(xp, what, request):
    """The gradients the brief asks for, checked entry by entry against central differences."""
    if what == "StandardScaler":
        apply_xfail(request, xp, SCALER_NAN)

    def f(a):
        with sklearn.config_context(array_api_dispatch=True):
            if what == "StandardScaler":
                return xp.sum(
                    preprocessing.StandardScaler().fit_transform(a) ** 2
                    * xp.asarray(np.arange(36.0).reshape(12, 3) / 36)
                )
            if what == "Ridge-y":
                m = linear_model.Ridge(alpha=0.5, solver="svd").fit(xp.asarray(X), a)
                return xp.sum(m.coef_ * xp.asarray([1.0, -2.0, 0.5]))
            if what == "PCA":
                z = decomposition.PCA(n_components=2, svd_solver="full").fit_transform(a)
                return xp.sum(z[:, 0] ** 3) + xp.sum(z[:, 1] ** 3)
            return xp.sum(pairwise.rbf_kernel(a, gamma=0.3))

    grad_fd(xp, f, T if what == "Ridge-y" else X)
