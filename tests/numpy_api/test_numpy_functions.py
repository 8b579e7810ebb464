"""NumPy's functions on arrays of ``namespace(numpy)`` (``__array_function__``; the modules of
``pycograd_xp/numpy_api/`` by NumPy's grouping): every mapped function's values equal NumPy's
and its VJP passes the dot-product test (``tests/numpy_api/test_numpy_coverage.py`` keeps the
sweep complete); the NaN-ignoring reductions give NaNs a zero gradient."""

from __future__ import annotations

import numpy as np
import pytest
from _numpy_common import MASK, SPD, XP, S, U, _np, check_forward, check_grad, rng

import pycograd_xp as pg

# -- functions -------------------------------------------------------------------------------------


def _fcases():
    C = []

    def case(name, f, *args, grad=True, rtol32=2e-5, **kw):
        C.append(pytest.param(name, f, args, grad, rtol32, kw, id=f"{name}-{len(C)}"))

    x23, x234 = S(2, 3), S(2, 3, 4)
    for fname in ("sum", "prod", "mean", "max", "amax", "min", "amin", "ptp"):
        f = getattr(np, fname)
        for axis in (None, 0, -1, (0, 1)):
            if fname == "ptp" and isinstance(axis, tuple):
                continue
            for keepdims in (False, True):
                case(fname, lambda a, f=f, ax=axis, k=keepdims: f(a, axis=ax, keepdims=k), x23)
    case("sum", lambda a: np.sum(a, axis=1, dtype=np.float32), x23, grad=False)
    case("sum", lambda a: np.sum(a, initial=1.5, where=a > 0), x23)
    case("prod", lambda a: np.prod(a, axis=0, where=a > 0), x23)
    case("mean", lambda a, m=MASK: np.mean(a, axis=0, where=m), x23)
    case("max", lambda a: np.max(a, axis=1, initial=0.5), x23)
    for fname in ("std", "var"):
        f = getattr(np, fname)
        for axis in (None, 0, (0, 1)):
            for ddof in (0, 1):
                case(fname, lambda a, f=f, ax=axis, d=ddof: f(a, axis=ax, ddof=d), x23)
        case(fname, lambda a, f=f: f(a, axis=1, keepdims=True, where=a > -1.5), x23)
        case(fname, lambda a, f=f: f(a, correction=1), x23)
    case("all", lambda a: np.all(a > 0, axis=0), x23, grad=False)
    case("all", lambda a: np.all(a), x23, grad=False)
    case("any", lambda a: np.any(a > 1.0, axis=1, keepdims=True), x23, grad=False)
    case("average", lambda a: np.average(a, axis=1), x23)
    w3 = U(3)
    case("average", lambda a, w=w3: np.average(a, axis=1, weights=w), x23)
    case("average", lambda a, w: np.average(a, weights=w, returned=True), x23, U(2, 3))
    for fname in ("nansum", "nanprod", "nanmean", "nanmax", "nanmin", "nanstd", "nanvar"):
        f = getattr(np, fname)
        for axis in (None, 0, -1):
            case(fname, lambda a, f=f, ax=axis: f(a, axis=ax), x23)
        case(fname, lambda a, f=f: f(a, axis=0, keepdims=True), x23)
    case("nanstd", lambda a: np.nanstd(a, axis=1, ddof=1), x23)
    case("nanvar", lambda a: np.nanvar(a, ddof=1), x23)
    case("nanargmax", lambda a: np.nanargmax(a, axis=1), x23, grad=False)
    case("nanargmin", lambda a: np.nanargmin(a), x23, grad=False)
    for fname in ("cumsum", "cumprod", "nancumsum", "nancumprod"):
        f = getattr(np, fname)
        for axis in (None, 0, 1):
            case(fname, lambda a, f=f, ax=axis: f(a, axis=ax), x23)
    if hasattr(np, "cumulative_sum"):
        case("cumulative_sum", lambda a: np.cumulative_sum(a, axis=1, include_initial=True), x23)
        case("cumulative_prod", lambda a: np.cumulative_prod(a, axis=0), x23)
    case("diff", lambda a: np.diff(a), x23)
    e21 = S(2, 1)
    case("diff", lambda a, e=e21: np.diff(a, n=2, axis=-1, prepend=0.5, append=e), x23)
    case("diff", lambda a: np.diff(a, axis=0), x23)
    # elementwise functions that are not ufuncs
    case("clip", lambda a: np.clip(a, -1.0, 1.0), x23)
    case("clip", lambda a, lo: np.clip(a, lo, None), x23, S(3))
    case("clip", lambda a: np.clip(a, a_min=-0.5, a_max=np.full(3, 0.8)), x23)
    case("where", lambda a, b: np.where(a > 0, a, b), x23, S(2, 3))
    case("where", lambda a: np.where(a > 0, a, 0.0), x23)
    case("where", lambda a: np.where(a > 0), x23, grad=False)
    case("round", lambda a: np.round(a), x23, grad=False)
    case("round", lambda a: np.round(a, 1), x23, grad=False)
    case("around", lambda a: np.around(a, 2), x23, grad=False)
    case("fix", lambda a: np.fix(a), x23, grad=False)
    case("real", lambda a: np.real(a), x23)
    case("imag", lambda a: np.imag(a), x23, grad=False)
    case("real", lambda a: np.real(a * (1 + 2j)), x23)
    case("imag", lambda a: np.imag(a * (1 + 2j)), x23)
    case("angle", lambda a: np.angle(a * (1 + 2j) + 0.5j), x23)
    case("angle", lambda a: np.angle(a, deg=True), x23, grad=False)
    case("nan_to_num", lambda a: np.nan_to_num(np.log(a)), x23)
    # (forward only: the division's own gradient at the infinities is 0 / 0, as in JAX)
    f = lambda a: np.nan_to_num(np.divide(a, a > 0), posinf=9.0, neginf=-9.0)
    case("nan_to_num", f, x23, grad=False)
    case("isposinf", lambda a: np.isposinf(np.divide(a, a > 0)), x23, grad=False)
    case("isneginf", lambda a: np.isneginf(np.divide(a, a > 0)), x23, grad=False)
    case("copy", lambda a: np.copy(a), x23)
    # shapes
    case("reshape", lambda a: np.reshape(a, (3, 2)), x23)
    case("reshape", lambda a: np.reshape(a, -1), x23)
    case("reshape", lambda a: np.reshape(a, shape=(6, 1)), x23)
    case("ravel", lambda a: np.ravel(a), x234)
    case("transpose", lambda a: np.transpose(a), x234)
    case("transpose", lambda a: np.transpose(a, (1, 0, 2)), x234)
    if hasattr(np, "permute_dims"):
        case("permute_dims", lambda a: np.permute_dims(a, (2, 0, 1)), x234)
    if hasattr(np, "matrix_transpose"):
        case("matrix_transpose", lambda a: np.matrix_transpose(a), x234)
    case("linalg.matrix_transpose", lambda a: np.linalg.matrix_transpose(a), x234)
    case("swapaxes", lambda a: np.swapaxes(a, 0, 2), x234)
    case("moveaxis", lambda a: np.moveaxis(a, 0, -1), x234)
    case("moveaxis", lambda a: np.moveaxis(a, [0, 1], [2, 0]), x234)
    case("rollaxis", lambda a: np.rollaxis(a, 2), x234)
    case("rollaxis", lambda a: np.rollaxis(a, 0, 2), x234)
    case("expand_dims", lambda a: np.expand_dims(a, 1), x23)
    case("expand_dims", lambda a: np.expand_dims(a, (0, -1)), x23)
    case("squeeze", lambda a: np.squeeze(a), S(1, 3, 1))
    case("squeeze", lambda a: np.squeeze(a, axis=0), S(1, 3, 1))
    case("concatenate", lambda a, b: np.concatenate([a, b]), x23, S(1, 3))
    case("concatenate", lambda a, b: np.concatenate((a, b), axis=None), x23, S(4))
    case("concatenate", lambda a: np.concatenate([a, np.ones((2, 1))], axis=1), x23)
    if hasattr(np, "concat"):
        case("concat", lambda a, b: np.concat([a, b], axis=1), x23, S(2, 2))
    case("stack", lambda a, b: np.stack([a, b], axis=1), x23, S(2, 3))
    case("stack", lambda a: np.stack([a, a * 2]), x23)
    case("vstack", lambda a, b: np.vstack([a, b]), S(3), S(2, 3))
    case("row_stack", lambda a, b: np.vstack([a, b]), S(3), S(3))
    case("hstack", lambda a, b: np.hstack([a, b]), x23, S(2, 2))
    case("hstack", lambda a, b: np.hstack([a, b]), S(3), S(2))
    case("dstack", lambda a, b: np.dstack([a, b]), x23, S(2, 3))
    case("column_stack", lambda a, b: np.column_stack([a, b]), S(3), S(3, 2))
    for nd in (1, 2, 3):
        f = getattr(np, f"atleast_{nd}d")
        for sh in ((), (3,), (2, 3)):
            case(f"atleast_{nd}d", lambda a, f=f: f(a), S(*sh))
        case(f"atleast_{nd}d", lambda a, b, f=f: f(a, b), S(), S(2, 3))
    case("append", lambda a, b: np.append(a, b), x23, S(2))
    case("append", lambda a, b: np.append(a, b, axis=0), x23, S(1, 3))
    case("split", lambda a: np.split(a, 2, axis=1), S(2, 4))
    case("split", lambda a: np.split(a, [1, 3]), S(5))
    case("array_split", lambda a: np.array_split(a, 3), S(7))
    case("array_split", lambda a: np.array_split(a, [2, 10], axis=1), S(2, 5))
    case("hsplit", lambda a: np.hsplit(a, 2), S(2, 4))
    case("vsplit", lambda a: np.vsplit(a, [1]), S(3, 2))
    case("dsplit", lambda a: np.dsplit(a, 2), S(2, 2, 4))
    if hasattr(np, "unstack"):
        case("unstack", lambda a: np.unstack(a, axis=1), x23)
    case("flip", lambda a: np.flip(a), x23)
    case("flip", lambda a: np.flip(a, axis=1), x23)
    case("fliplr", lambda a: np.fliplr(a), x23)
    case("flipud", lambda a: np.flipud(a), x23)
    case("roll", lambda a: np.roll(a, 2), x23)
    case("roll", lambda a: np.roll(a, (1, -1), axis=(0, 1)), x23)
    case("tile", lambda a: np.tile(a, 2), x23)
    case("tile", lambda a: np.tile(a, (2, 1, 2)), x23)
    case("repeat", lambda a: np.repeat(a, 2), x23)
    case("repeat", lambda a: np.repeat(a, [1, 3], axis=0), x23)
    case("broadcast_to", lambda a: np.broadcast_to(a, (4, 3)), S(3))
    case("broadcast_arrays", lambda a, b: np.broadcast_arrays(a, b), S(3), S(2, 1))
    case("take", lambda a: np.take(a, [0, 2, 2]), x23)
    case("take", lambda a: np.take(a, np.array([[0, 1], [1, 1]]), axis=1), x23)
    case("take_along_axis", lambda a: np.take_along_axis(a, np.argsort(a, axis=1), 1), x23)
    case("diagonal", lambda a: np.diagonal(a), S(3, 3))
    case("diagonal", lambda a: np.diagonal(a, 1, 1, 2), x234)
    case("trace", lambda a: np.trace(a), S(3, 3))
    case("trace", lambda a: np.trace(a, -1, 0, 2), x234)
    case("tril", lambda a: np.tril(a), S(3, 3))
    case("triu", lambda a: np.triu(a, 1), S(3, 3))
    case("sort", lambda a: np.sort(a), x23)
    case("sort", lambda a: np.sort(a, axis=None), x23)
    case("sort", lambda a: np.sort(a, axis=0), x23)
    case("argsort", lambda a: np.argsort(a, axis=0), x23, grad=False)
    case("argmax", lambda a: np.argmax(a), x23, grad=False)
    case("argmax", lambda a: np.argmax(a, axis=1, keepdims=True), x23, grad=False)
    case("argmin", lambda a: np.argmin(a, axis=0), x23, grad=False)
    case("nonzero", lambda a: np.nonzero(a > 0), x23, grad=False)
    case("unique", lambda a: np.unique(np.round(a)), x23, grad=False)
    case("unique", lambda a: np.unique(a), x23)
    for fname in ("unique_values", "unique_counts", "unique_inverse", "unique_all"):
        if hasattr(np, fname):
            uf = getattr(np, fname)
            case(fname, lambda a, f=uf: f(a), S(5), grad=fname == "unique_values")
    case("zeros_like", lambda a: np.zeros_like(a), x23, grad=False)
    case("ones_like", lambda a: np.ones_like(a, dtype=np.float32), x23, grad=False)
    case("empty_like", lambda a: np.empty_like(a).shape and np.zeros_like(a), x23, grad=False)
    case("zeros_like", lambda a: np.zeros_like(a, shape=(4,)), x23, grad=False)
    case("full_like", lambda a: np.full_like(a, 2.5), x23, grad=False)
    case("full_like", lambda a: np.full_like(a, 7, shape=(2,)), x23, grad=False)
    case("meshgrid", lambda a, b: np.meshgrid(a, b), S(3), S(2))
    case("meshgrid", lambda a, b: np.meshgrid(a, b, indexing="ij"), S(3), S(2))
    # products
    case("dot", lambda a, b: np.dot(a, b), S(3), S(3))
    case("dot", lambda a, b: np.dot(a, b), x23, S(3, 4))
    case("dot", lambda a, b: np.dot(a, b), S(3), S(3, 2))
    case("dot", lambda a, b: np.dot(a, b), x234, S(4))
    case("dot", lambda a, b: np.dot(a, b), x234, S(3, 4, 2))
    case("dot", lambda a, b: np.dot(a, b), S(), x23)
    case("vdot", lambda a, b: np.vdot(a, b), x23, S(2, 3))
    case("vdot", lambda a, b: np.vdot(a * 1j + b, b), x23, S(2, 3))
    case("inner", lambda a, b: np.inner(a, b), x23, S(4, 3))
    case("inner", lambda a, b: np.inner(a, b), S(3), S(3))
    case("outer", lambda a, b: np.outer(a, b), x23, S(2))
    case("linalg.outer", lambda a, b: np.linalg.outer(a, b), S(3), S(2))
    case("tensordot", lambda a, b: np.tensordot(a, b), x234, S(3, 4))
    case("tensordot", lambda a, b: np.tensordot(a, b, axes=1), x23, S(3, 2))
    case("tensordot", lambda a, b: np.tensordot(a, b, axes=(1, 0)), x23, S(3, 2))
    case("tensordot", lambda a, b: np.tensordot(a, b, axes=([0, 2], [1, 0])), x234, S(4, 2))
    case("linalg.tensordot", lambda a, b: np.linalg.tensordot(a, b, axes=1), x23, S(3, 2))
    case("linalg.matmul", lambda a, b: np.linalg.matmul(a, b), x23, S(3, 2))
    case("linalg.vecdot", lambda a, b: np.linalg.vecdot(a, b), x23, S(3))
    case("cross", lambda a, b: np.cross(a, b), S(2, 3), S(3))
    case("cross", lambda a, b: np.cross(a, b, axis=0), S(3, 2), S(3, 2))
    case("linalg.cross", lambda a, b: np.linalg.cross(a, b), S(2, 3), S(2, 3))
    case("kron", lambda a, b: np.kron(a, b), x23, S(2, 2))
    case("kron", lambda a, b: np.kron(a, b), S(3), S(2))
    for spec, shapes in [
        ("ij,jk->ik", [(2, 3), (3, 4)]),
        ("ij,jk", [(2, 3), (3, 4)]),
        ("ii->", [(3, 3)]),
        ("ii", [(3, 3)]),
        ("ij->j", [(2, 3)]),
        ("i,j->ij", [(2,), (3,)]),
        ("...ij,...jk->...ik", [(2, 2, 3), (2, 3, 4)]),
        ("bi,bj,ij->b", [(4, 2), (4, 3), (2, 3)]),
        ("ijk,kj->i", [(2, 3, 4), (4, 3)]),
    ]:
        case("einsum", lambda *ops, s=spec: np.einsum(s, *ops), *[S(*sh) for sh in shapes])
    case("einsum", lambda a, b: np.einsum(a, [0, 1], b, [1, 2], [0, 2]), x23, S(3, 4))
    case("einsum", lambda a, b: np.einsum("ij,jk->ik", a, b, optimize=True), x23, S(3, 4))
    case("linalg.multi_dot", lambda a, b, c: np.linalg.multi_dot([a, b, c]), S(3), S(3, 4), S(4))
    case("linalg.multi_dot", lambda a, b: np.linalg.multi_dot([a, b]), x23, S(3, 2))
    # numpy.linalg
    sq, spd = S(3, 3) + 3 * np.eye(3), SPD(3)
    case("linalg.inv", lambda a: np.linalg.inv(a), sq)
    case("linalg.det", lambda a: np.linalg.det(a), sq)
    case("linalg.slogdet", lambda a: np.linalg.slogdet(a)[1], sq)
    case("linalg.solve", lambda a, b: np.linalg.solve(a, b), sq, S(3))
    case("linalg.solve", lambda a, b: np.linalg.solve(a, b), sq, S(3, 2))
    case(
        "linalg.cholesky",
        lambda a: np.linalg.cholesky(np.add(np.matmul(a, np.transpose(a)), 3 * np.eye(3))),
        sq,
        rtol32=1e-4,
    )
    case("linalg.qr", lambda a: np.linalg.qr(a), S(4, 3), rtol32=1e-4)
    case("linalg.qr", lambda a: np.linalg.qr(a, mode="r"), S(4, 3), rtol32=1e-4)
    case("linalg.svd", lambda a: np.linalg.svd(a, compute_uv=False), S(4, 3), rtol32=1e-4)
    case(
        "linalg.svd",
        lambda a: (lambda u, s, vh: (np.abs(u[:, :3]), s, np.abs(vh)))(
            *np.linalg.svd(a, full_matrices=False)
        ),
        S(4, 3),
        rtol32=1e-4,
    )
    case("linalg.svdvals", lambda a: np.linalg.svdvals(a), S(4, 3), rtol32=1e-4)
    case("linalg.eigh", lambda a: np.linalg.eigh(a)[0], spd, rtol32=1e-4)
    case("linalg.eigh", lambda a: np.abs(np.linalg.eigh(a, UPLO="U")[1]), S(3, 3) + 3 * spd)
    case("linalg.eigvalsh", lambda a: np.linalg.eigvalsh(a), S(3, 3) + spd, rtol32=1e-4)
    case("linalg.pinv", lambda a: np.linalg.pinv(a), S(4, 3), rtol32=1e-4)
    case("linalg.matrix_power", lambda a: np.linalg.matrix_power(a, 3), S(3, 3))
    case("linalg.matrix_rank", lambda a: np.linalg.matrix_rank(a), S(4, 3), grad=False)
    case("linalg.trace", lambda a: np.linalg.trace(a, offset=1), x234)
    case("linalg.diagonal", lambda a: np.linalg.diagonal(a), x234)
    case("linalg.matrix_norm", lambda a: np.linalg.matrix_norm(a, ord=1), S(3, 3))
    case("linalg.vector_norm", lambda a: np.linalg.vector_norm(a, axis=1, ord=3), x23)
    for ord_, axis, shape in [
        (None, None, (2, 3)),
        (None, None, (2, 3, 4)),
        (None, 1, (2, 3)),
        (1, None, (4,)),
        (np.inf, None, (4,)),
        (-np.inf, 0, (4, 2)),
        (3, -1, (2, 3)),
        (0, 1, (2, 3)),
        ("fro", None, (3, 3)),
        ("nuc", None, (3, 3)),
        (1, None, (3, 3)),
        (-1, (0, 1), (3, 3)),
        (np.inf, (1, 0), (3, 3)),
        (2, None, (3, 3)),
        (-2, (0, 2), (3, 2, 3)),
        (None, (0, 2), (3, 2, 3)),
    ]:
        for keep in (False, True):
            case(
                "linalg.norm",
                lambda a, o=ord_, ax=axis, k=keep: np.linalg.norm(a, o, ax, k),
                S(*shape),
                grad=ord_ != 0,
                rtol32=1e-4,
            )
    # numpy.fft
    for fname in ("fft", "ifft", "rfft", "hfft", "ihfft", "irfft"):
        f = getattr(np.fft, fname)
        for norm in (None, "ortho", "forward"):
            for n in (None, 6):
                case(f"fft.{fname}", lambda a, f=f, n=n, m=norm: f(a, n=n, norm=m), x23)
        case(f"fft.{fname}", lambda a, f=f: f(a, axis=0), S(4, 3))
    case("fft.fft", lambda a: np.fft.fft(a * (1 + 0.5j)), x23)
    for fname in ("fftn", "ifftn", "rfftn", "irfftn", "fft2", "ifft2", "rfft2", "irfft2"):
        f = getattr(np.fft, fname)
        case(f"fft.{fname}", lambda a, f=f: f(a), x234, rtol32=1e-4)
        case(
            f"fft.{fname}",
            lambda a, f=f: f(a, s=(4, 6), axes=(1, 2), norm="ortho"),
            x234,
            rtol32=1e-4,
        )
        case(f"fft.{fname}", lambda a, f=f: f(a, axes=(0, 2)), x234, rtol32=1e-4)
    case("fft.fftshift", lambda a: np.fft.fftshift(a), x23)
    case("fft.ifftshift", lambda a: np.fft.ifftshift(a, axes=1), x23)
    # order statistics (NumPy's method "linear"), covariance, padding, interpolation,
    # finite differences, convolution, polynomials
    for fname in ("quantile", "nanquantile", "percentile", "nanpercentile"):
        f, scale = getattr(np, fname), 100 if "percentile" in fname else 1
        for q in (0.3, 0.5, 1, [0.1, 0.9], np.array([[0.2], [0.75]])):
            qs = q * scale if not isinstance(q, list) else [v * scale for v in q]
            for axis in (None, 0, (0, 1)):
                case(fname, lambda a, f=f, q=qs, ax=axis: f(a, q, axis=ax), x23)
            case(fname, lambda a, f=f, q=qs: f(a, q, axis=-1, keepdims=True), x234)
    for method in (
        "inverted_cdf",
        "averaged_inverted_cdf",
        "closest_observation",
        "interpolated_inverted_cdf",
        "hazen",
        "weibull",
        "median_unbiased",
        "normal_unbiased",
        "lower",
        "higher",
        "midpoint",
        "nearest",
    ):
        for f in (np.quantile, np.percentile):
            qs = [0.1, 0.37, 0.5, 0.9] if f is np.quantile else [10, 37, 50, 90]
            case(
                f"{f.__name__}/{method}",
                lambda a, f=f, q=qs, m=method: f(a, q, axis=1, method=m),
                S(3, 5),
            )
    for fname in ("median", "nanmedian"):
        f = getattr(np, fname)
        for axis in (None, 0, 1, (0, 2)):
            for keepdims in (False, True):
                case(fname, lambda a, f=f, ax=axis, k=keepdims: f(a, axis=ax, keepdims=k), x234)
    ties = np.array([[1.0, 2.0, 2.0, 3.0], [0.5, 0.5, 0.5, -1.0]])
    # at ties (values only: finite differences are one-sided there; the gradient is below)
    case("median", lambda a: np.median(a, axis=1), ties, grad=False)
    case("quantile", lambda a: np.quantile(a, [0.25, 0.5], axis=1), ties, grad=False)
    x35 = S(3, 5)
    case("cov", lambda a: np.cov(a), x35)
    case("cov", lambda a: np.cov(a, rowvar=False), x35)
    case("cov", lambda a: np.cov(a, bias=True), x35)
    case("cov", lambda a: np.cov(a, ddof=2), x35)
    case("cov", lambda a, b: np.cov(a, b), x35, S(2, 5))
    case("cov", lambda a: np.cov(a[0]), x35)
    case("cov", lambda a: np.cov(a, aweights=[1, 2, 3, 1, 0.5]), x35)
    case("cov", lambda a: np.cov(a, fweights=[1, 2, 3, 1, 1], aweights=[1, 2, 3, 1, 0.5]), x35)
    case("corrcoef", lambda a: np.corrcoef(a), x35)
    case("corrcoef", lambda a, b: np.corrcoef(a, b, rowvar=False), S(5, 2), S(5, 3))
    case("corrcoef", lambda a: np.corrcoef(a[0], a[1]), x35)
    for mode in ("constant", "edge", "reflect", "symmetric", "wrap"):
        for width in (2, (1, 3), ((1, 2), (7, 0))):
            case("pad", lambda a, m=mode, w=width: np.pad(a, w, mode=m), x23)
    case("pad", lambda a: np.pad(a, 2, constant_values=(1.5, -2)), x23)
    case("pad", lambda a: np.pad(a, (3, 1), mode="reflect"), S(4))
    for mode, kw in (
        ("linear_ramp", {}),
        ("linear_ramp", {"end_values": ((-1.0, 2.0), (0.5, -3.0))}),
        ("maximum", {}),
        ("minimum", {"stat_length": 2}),
        ("mean", {}),
        ("mean", {"stat_length": ((1, 2), (3, 1))}),
        ("median", {}),
        ("median", {"stat_length": (2, 3)}),
    ):
        for width in (2, ((1, 2), (0, 3))):
            case("pad", lambda a, m=mode, w=width, k=kw: np.pad(a, w, mode=m, **k), S(3, 4))
    xs, fs = np.sort(rng.uniform(-2, 2, 6)), S(6)
    xq = rng.uniform(-3, 3, (2, 7))
    case("interp", lambda x, p, f: np.interp(x, p, f), xq, xs, fs)
    case("interp", lambda x, p, f: np.interp(x, p, f, left=-5.0, right=7.0), xq, xs, fs)
    case("interp", lambda x, f: np.interp(x, [-1.0, 0.0, 2.0], f), xq, S(3))
    nodes = np.array([-1.0, 0.0, 2.0])
    case("interp", lambda f, n=nodes: np.interp(np.array([-1.5, 0.0, 0.5, 2.0, 3.0]), n, f), S(3))
    for eo in (1, 2):
        case("gradient", lambda a, e=eo: np.gradient(a, edge_order=e), x35)
        case("gradient", lambda a, e=eo: np.gradient(a, 0.5, 2.0, edge_order=e), x35)
        case("gradient", lambda a, e=eo: np.gradient(a, 0.5, axis=1, edge_order=e), x35)
        case("gradient", lambda a, e=eo: np.gradient(a, 3.0, edge_order=e), S(6))
    for mode in ("full", "same", "valid"):
        for n1, n2 in ((7, 3), (3, 7), (4, 4), (2, 5), (6, 1)):
            for fname in ("convolve", "correlate"):
                f = getattr(np, fname)
                case(fname, lambda a, b, f=f, m=mode: f(a, b, mode=m), S(n1), S(n2))
    case("convolve", lambda a, b: np.convolve(a, b), S(5), S(3))
    case("correlate", lambda a, b: np.correlate(a, b), S(5), S(3))
    case("polyval", lambda p, x: np.polyval(p, x), S(4), x23)
    case("polyval", lambda p: np.polyval(p, 1.5), S(4))
    case("polyval", lambda x: np.polyval([1.0, -2.0, 0.5], x), x23)
    swv = np.lib.stride_tricks.sliding_window_view
    sw = "lib.stride_tricks.sliding_window_view"
    case(sw, lambda a, f=swv: f(a, 3), S(6))
    case(sw, lambda a, f=swv: f(a, 2, axis=0), x35)
    case(sw, lambda a, f=swv: f(a, (2, 3)), x35)
    case(sw, lambda a, f=swv: f(a, (2, 2), axis=(1, 1)), x35)
    case("sinc", lambda a: np.sinc(a), x23)
    case("sinc", lambda a: np.sinc(a * np.array([[0.0, 1.0, 1.0], [1.0, 0.0, 1.0]])), x23)
    case("trapezoid", lambda a: np.trapezoid(a), x23)
    case("trapezoid", lambda a: np.trapezoid(a, dx=0.5, axis=0), x23)
    case("trapezoid", lambda a, t: np.trapezoid(a, t), x23, np.sort(S(3)))
    case("trapezoid", lambda a, t: np.trapezoid(a, t, axis=0), S(4, 2), np.sort(S(4)))
    case("trapezoid", lambda a, t: np.trapezoid(a, t, axis=1), x23, np.sort(S(2, 3), axis=1))
    lstsq = np.linalg.lstsq

    def no_rank(r):  # (x, residuals, s): the rank is an int, compared in its own test
        return r[0], r[1], r[3]

    case("linalg.lstsq", lambda a, b: no_rank(lstsq(a, b)), S(5, 3), S(5), rtol32=1e-4)
    case("linalg.lstsq", lambda a, b: no_rank(lstsq(a, b)), S(5, 3), S(5, 2), rtol32=1e-4)
    case("linalg.lstsq", lambda a, b: no_rank(lstsq(a, b)), S(3, 5), S(3, 2), rtol32=1e-4)
    case("linalg.lstsq", lambda a, b: no_rank(lstsq(a, b, rcond=1e-3)), S(4, 4), S(4), rtol32=1e-4)
    # functions computed on the values (no gradient): NumPy's answer
    case("isclose", lambda a, b: np.isclose(a, b), x23, x23 + 1e-12, grad=False)
    case("count_nonzero", lambda a: np.count_nonzero(a > 0, axis=0), x23, grad=False)
    case("argwhere", lambda a: np.argwhere(a > 0), x23, grad=False)
    case("flatnonzero", lambda a: np.flatnonzero(a > 0), x23, grad=False)
    case("isin", lambda a: np.isin(np.round(a), [1.0, -1.0]), x23, grad=False)
    case("searchsorted", lambda a: np.searchsorted(np.arange(-2.0, 3.0), a), x23, grad=False)
    case("digitize", lambda a: np.digitize(a, np.arange(-2.0, 3.0)), x23, grad=False)
    case("iscomplex", lambda a: np.iscomplex(a), x23, grad=False)
    case("isreal", lambda a: np.isreal(a), x23, grad=False)
    return C


FCASES = _fcases()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name, f, args, grad, rtol32, kw", FCASES)
def test_function_values_equal_numpys(name, f, args, grad, rtol32, kw, dtype):
    rtol = 1e-10 if dtype == np.float64 else rtol32
    check_forward(f, args, dtype, rtol=rtol, atol=rtol, grad=grad)


@pytest.mark.parametrize("name, f, args, grad, rtol32, kw", FCASES)
def test_function_gradients_match_finite_differences(name, f, args, grad, rtol32, kw):
    if not grad:
        pytest.skip("no gradient")
    check_grad(f, args, **kw)


def test_order_statistics_at_ties_send_the_gradient_to_the_elements_used():
    """median and quantile sort, then interpolate between the two neighbours of NumPy's virtual
    index: the gradient goes to those elements (a tie's copies in their order), weighted as the
    interpolation weighs them."""
    x = XP.asarray(np.array([[3.0, 2.0, 2.0, 1.0], [0.5, 0.5, 0.5, -1.0]]))
    g = pg.grad(lambda a: XP.sum(np.median(a, axis=1)))(x)
    np.testing.assert_array_equal(_np(g), [[0.0, 0.5, 0.5, 0.0], [0.5, 0.5, 0.0, 0.0]])
    g = pg.grad(lambda a: np.quantile(a, 0.4))(XP.asarray(np.array([4.0, 1.0, 2.0, 3.0])))
    np.testing.assert_allclose(_np(g), [0.0, 0.0, 0.8, 0.2])  # index 1.2: 0.8 x[2] + 0.2 x[3]
    g = pg.grad(lambda a: np.nanmedian(a))(XP.asarray(np.array([4.0, np.nan, 1.0, 2.0])))
    np.testing.assert_array_equal(_np(g), [0.0, 0.0, 0.0, 1.0])


def test_functions_with_unsupported_options_refuse_clearly():
    w = XP.asarray(S(2, 3))
    w.requires_grad_()

    def ramp(vector, width, axis, kwargs):  # NumPy's callable mode: it writes in place
        vector[: width[0]] = 0.0

    with pytest.raises(TypeError, match=r"numpy\.pad\(\): mode='ramp'.*stop_gradient"):
        np.pad(w, 1, mode=ramp)
    with pytest.raises(ValueError, match=r"numpy\.pad\(\): stat_length of 0"):
        np.pad(w, 1, mode="mean", stat_length=0)
    with pytest.raises(ValueError, match=r"numpy\.pad\(\): unsupported keyword.*'end_values'"):
        np.pad(w, 1, mode="mean", end_values=1.0)
    with pytest.raises(TypeError, match=r"numpy\.pad\(\): reflect_type='odd'"):
        np.pad(w, 1, mode="reflect", reflect_type="odd")
    with pytest.raises(TypeError, match=r"numpy\.nanquantile\(\): method='nearest'"):
        np.nanquantile(w, 0.5, method="nearest")
    with pytest.raises(ValueError, match=r"numpy\.quantile\(\): method='closest'"):
        np.quantile(w, 0.5, method="closest")
    with pytest.raises(TypeError, match=r"numpy\.gradient\(\): coordinate arrays"):
        np.gradient(w, [0.0, 1.0], [0.0, 1.0, 3.0])
    with pytest.raises(TypeError, match=r"numpy\.interp\(\): period="):
        np.interp(w, [0.0, 1.0], [1.0, 2.0], period=2.0)
    with pytest.raises(ValueError, match=r"range \[0, 1\]"):
        np.quantile(w, 1.5)


def test_value_functions_answer_as_numpy():
    """Functions whose result carries no gradient compare the values: NumPy's Python answers."""
    w = XP.asarray(S(2, 3))
    w.requires_grad_()
    v = _np(w)
    assert np.allclose(w, w + 1e-12) is True
    assert np.allclose(w, v + 1.0) is False
    assert np.array_equal(w, v) is True
    assert np.array_equiv(w, v[None]) is True
    assert np.shape(w) == (2, 3) and np.ndim(w) == 2 and np.size(w) == 6
    assert np.result_type(w, np.float32) == np.float64
    assert np.iscomplexobj(w) is False and np.isrealobj(w) is True
    assert np.can_cast(w, np.float32) is False
    assert np.min_scalar_type(w[0, 0] * 0 + 1) == np.min_scalar_type(1.0)


def test_what_an_array_is_needs_no_values():
    """shape, ndim, size, result_type: from the shape and dtype, inside vmap too."""

    def f(r):
        assert np.shape(r) == (4,) and np.ndim(r) == 1 and np.size(r) == 4
        assert np.result_type(r, 1.0) == np.float64 and not np.iscomplexobj(r)
        assert np.isrealobj(r) and np.size(np.ones((2, 3)) * 1.0) == 6
        return np.sum(r)

    a = S(3, 4)
    np.testing.assert_allclose(_np(pg.vmap(f)(XP.asarray(a))), a.sum(axis=1))
    with pytest.raises(TypeError, match=r"numpy\.allclose\(\).*vmap is batching"):
        pg.vmap(lambda r: XP.asarray(float(np.allclose(r, r))))(XP.asarray(a))


# -- NaN-ignoring reductions: zero gradient at NaN ------------------------------------------------

NANS = np.array([[1.0, np.nan, 2.0], [np.nan, np.nan, np.nan], [0.5, -1.5, np.nan]])


@pytest.mark.parametrize(
    "f",
    [
        lambda a: np.nansum(a, axis=1),
        lambda a: np.nanmean(a, axis=0),
        lambda a: np.nanmean(a),
        lambda a: np.nanvar(a, axis=0),
        lambda a: np.nanstd(a),
        lambda a: np.nanmax(a, axis=0),
        lambda a: np.nanmin(a),
        lambda a: np.nanprod(a, axis=1),
        lambda a: np.nancumsum(a, axis=1),
        lambda a: np.nanmedian(a, axis=1),
        lambda a: np.nanmedian(a, axis=0),
        lambda a: np.nanquantile(a, [0.3, 0.5], axis=1),
        lambda a: np.nanpercentile(a, 70.0),
    ],
)
def test_nan_reductions_ignore_nans_and_give_them_zero_gradient(f):
    check_forward(f, (NANS,))
    x = XP.asarray(NANS)
    g = pg.grad(lambda a: XP.sum(XP.where(XP.isnan(f(a)), 0.0, f(a))))(x)
    g = _np(g)
    assert np.all(np.isfinite(g))
    assert np.all(g[np.isnan(NANS)] == 0.0)
    check_grad(lambda a: np.nan_to_num(f(a)), (NANS,))
