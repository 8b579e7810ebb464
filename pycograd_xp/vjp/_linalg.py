"""VJP rules of the ``linalg`` extension.

Holomorphic maps (inv, det, solve, matrix_power, outer, trace, diagonal, cross) use plain
transposes and serve complex inputs in the JAX convention. The decompositions of Hermitian or
general matrices (cholesky, eigh, eigvalsh, svd, svdvals, qr, pinv, spectral and nuclear norms)
are differentiated for real inputs; for complex inputs their rules raise NotImplementedError
instead of returning a wrong gradient.
"""

from __future__ import annotations

from .._primitive import defvjp, nondifferentiable
from ..ops._rules.vjp import expand_to, eye, is_complex, mT, sgn


def _real_only(ns, x, name):
    if is_complex(ns, x):
        raise NotImplementedError(
            f"linalg.{name}: the gradient is implemented for real inputs only; "
            "split the complex matrix into real and imaginary parts to differentiate it"
        )


def _eye_like(ns, x):
    return eye(ns, x, x.shape[-1], dtype=x.dtype)


def _inverse_gaps(ns, d):
    """F[..., i, j] = 1 / (d_j - d_i) off the diagonal (0 on it, and where d_i == d_j)."""
    gaps = d[..., None, :] - d[..., :, None]
    apart = gaps != 0
    return ns.where(apart, 1.0 / ns.where(apart, gaps, 1.0), 0.0)


def _inv(ns, g, out, x, /):
    return (-mT(ns, out) @ g @ mT(ns, out),)


def _det(ns, g, out, x, /):
    scale = (g * out)[..., None, None]
    return (scale * mT(ns, ns.linalg.inv(x)),)


def _slogdet(ns, g, out, x, /):
    g_sign, g_log = g
    sign = out[0]
    w = g_log
    if is_complex(ns, x):  # d sign = i Im(tr(x^-1 dx)) sign
        w = ns.astype(g_log, x.dtype) - 1j * ns.astype(ns.real(1j * g_sign * sign), x.dtype)
    return (ns.astype(w, x.dtype)[..., None, None] * mT(ns, ns.linalg.inv(x)),)


def _solve(ns, g, out, x1, x2, /):
    vector = x2.ndim == 1
    if vector:  # g is a stack of vectors: solve it as one-column matrices
        gb = ns.linalg.solve(mT(ns, x1), g[..., None])[..., 0]
    else:
        gb = ns.linalg.solve(mT(ns, x1), g)
    if vector:
        ga = -gb[..., :, None] * out[..., None, :]
    else:
        ga = -gb @ mT(ns, out)
    return ga, gb


def _matrix_power(ns, g, out, x, n, /):
    if n == 0:
        return ns.zeros_like(g), None
    a = x if n > 0 else ns.linalg.inv(x)
    m = abs(n)
    powers = [_eye_like(ns, a)]
    for _ in range(m - 1):
        powers.append(powers[-1] @ a)
    ct = sum((mT(ns, powers[k]) @ g @ mT(ns, powers[m - 1 - k]) for k in range(m)),
             start=ns.zeros_like(g))  # fmt: skip
    if n < 0:  # through a = inv(x)
        ct = -mT(ns, a) @ ct @ mT(ns, a)
    return ct, None


def _cholesky(ns, g, out, x, /, *, upper=False):
    _real_only(ns, x, "cholesky")
    L = mT(ns, out) if upper else out
    # Only the triangle carries the output: project the cotangent onto it first, so that a
    # NaN or inf there from a downstream rule (atan2 at 0/0) cannot leak into the gradient.
    gL = mT(ns, ns.triu(g)) if upper else ns.tril(g)
    # P = Phi(L^T gL), Phi = lower triangle with the diagonal halved; S = L^-T P L^-1
    P = mT(ns, L) @ gL
    P = ns.tril(P) - 0.5 * ns.tril(ns.triu(P))
    S = ns.linalg.solve(mT(ns, L), mT(ns, ns.linalg.solve(mT(ns, L), mT(ns, P))))
    return (0.5 * (S + mT(ns, S)),)


def _eigh(ns, g, out, x, /):
    _real_only(ns, x, "eigh")
    gw, gV = g
    w, V = out
    F = _inverse_gaps(ns, w)
    inner = F * (mT(ns, V) @ gV)
    n = w.shape[-1]
    inner = inner + eye(ns, gV, n, dtype=x.dtype) * gw[..., None, :]
    ct = V @ inner @ mT(ns, V)
    return (0.5 * (ct + mT(ns, ct)),)


def _eigvalsh(ns, g, out, x, /):
    _real_only(ns, x, "eigvalsh")
    _, V = ns.linalg.eigh(x)
    return ((V * g[..., None, :]) @ mT(ns, V),)


def _eigvals(ns, g, out, x, /):
    # dw = diag(V^-1 dx V): ct = V^-T diag(g) V^T (holomorphic, diagonalizable x)
    _, V = ns.linalg.eig(x)
    return (mT(ns, ns.linalg.inv(V)) @ (g[..., :, None] * mT(ns, V)),)


def _svd_ct(ns, x, U, s, Vh, gU, gs, gVh):
    """Cotangent of x = U diag(s) Vh (reduced) for real x."""
    V, gV = mT(ns, Vh), mT(ns, gVh) if gVh is not None else None
    k = s.shape[-1]
    eye_k = eye(ns, s, k, dtype=x.dtype)
    s2 = s * s
    F = _inverse_gaps(ns, s2)
    S = s[..., None, :] * eye_k
    ct = U @ (gs[..., None, :] * eye_k) @ Vh if gs is not None else 0
    if gU is not None:
        UtgU = mT(ns, U) @ gU
        J = F * (UtgU - mT(ns, UtgU))
        ct = ct + U @ (J @ S) @ Vh
        m = x.shape[-2]
        if m > k:
            proj = eye(ns, U, m, dtype=x.dtype) - U @ mT(ns, U)
            ct = ct + proj @ gU @ (Vh / s[..., :, None])
    if gV is not None:
        VtgV = mT(ns, V) @ gV
        K = F * (VtgV - mT(ns, VtgV))
        ct = ct + U @ (S @ K) @ Vh
        n = x.shape[-1]
        if n > k:
            proj = eye(ns, V, n, dtype=x.dtype) - V @ Vh
            ct = ct + (U / s[..., None, :]) @ mT(ns, gV) @ proj
    return ct


def _svd(ns, g, out, x, /, *, full_matrices=True):
    _real_only(ns, x, "svd")
    m, n = x.shape[-2], x.shape[-1]
    if full_matrices and m != n:
        raise NotImplementedError(
            "linalg.svd: the gradient with full_matrices=True is defined only for square "
            "matrices (the extra singular vectors are not unique); use full_matrices=False"
        )
    U, s, Vh = out
    return (_svd_ct(ns, x, U, s, Vh, *g),)


def _svdvals(ns, g, out, x, /):
    _real_only(ns, x, "svdvals")
    U, _, Vh = ns.linalg.svd(x, full_matrices=False)
    return ((U * g[..., None, :]) @ Vh,)


def _qr(ns, g, out, x, /, *, mode="reduced"):
    _real_only(ns, x, "qr")
    m, n = x.shape[-2], x.shape[-1]
    if m < n or (mode == "complete" and m != n):
        raise NotImplementedError(
            "linalg.qr: the gradient is implemented for reduced QR of tall or square matrices "
            f"(got shape (..., {m}, {n}) with mode={mode!r})"
        )
    Q, R = out
    gQ, gR = g[0], ns.triu(g[1])  # R is upper triangular: its structural zeros take no cotangent
    M = R @ mT(ns, gR) - mT(ns, gQ) @ Q
    low = ns.tril(M, k=-1)
    sym = low + mT(ns, low) + ns.tril(ns.triu(M))
    b = gQ + Q @ sym
    # ct = b R^-T, via a solve with R^T (lower triangular)
    return (mT(ns, ns.linalg.solve(R, mT(ns, b))),)


def _pinv(ns, g, out, x, /, *, rtol=None):
    _real_only(ns, x, "pinv")
    P = out
    m, n = x.shape[-2], x.shape[-1]
    left = eye(ns, P, m, dtype=x.dtype) - x @ P
    right = eye(ns, P, n, dtype=x.dtype) - P @ x
    gT = mT(ns, g)
    ct = -mT(ns, P) @ g @ mT(ns, P) + left @ gT @ P @ mT(ns, P) + mT(ns, P) @ P @ gT @ right
    return (ct,)


def _matrix_norm(ns, g, out, x, /, *, keepdims=False, ord="fro"):
    ge = g if keepdims else g[..., None, None]
    oe = out if keepdims else out[..., None, None]
    if ord == "fro":
        safe = ns.where(oe == 0, 1.0, oe)
        return (ge * ns.where(oe == 0, 0.0, ns.abs(x) / safe) * sgn(ns, x),)
    if ord in (1, -1, float("inf"), -float("inf")):
        axis = -2 if ord in (1, -1) else -1  # 1-norms sum columns (over rows)
        sums = ns.sum(ns.abs(x), axis=axis, keepdims=True)
        hit = ns.astype(sums == oe, g.dtype)
        hit = hit / ns.sum(hit, axis=-1 if axis == -2 else -2, keepdims=True)
        return (ge * hit * sgn(ns, x),)
    _real_only(ns, x, f"matrix_norm(ord={ord!r})")
    U, s, Vh = ns.linalg.svd(x, full_matrices=False)
    if ord == "nuc":
        return (ge * (U @ Vh),)
    i = 0 if ord == 2 else -1  # singular values come in descending order
    return (ge * (U[..., :, i, None] @ Vh[..., i, None, :]),)


def _vector_norm(ns, g, out, x, /, *, axis=None, keepdims=False, ord=2):
    ge = expand_to(ns, g, x, axis, keepdims)
    oe = expand_to(ns, out, x, axis, keepdims)
    a = ns.abs(x)
    if ord == 0:
        return (ns.zeros_like(x),)
    if ord in (float("inf"), -float("inf")):
        hit = ns.astype(a == oe, ge.dtype)
        ties = ns.sum(hit, axis=axis, keepdims=True)
        return (ge * hit / ties * sgn(ns, x),)
    if ord == 1:
        return (ge * sgn(ns, x),)
    # |x|^(p-1) / ||x||^(p-1), zero where the norm is zero
    safe = ns.where(oe == 0, 1.0, oe)
    ratio = ns.where(oe == 0, 0.0, ns.pow(a / safe, ord - 1))
    return (ge * ratio * sgn(ns, x),)


def _trace(ns, g, out, x, /, *, offset=0, dtype=None):
    eye_mn = eye(ns, g, x.shape[-2], x.shape[-1], k=offset, dtype=g.dtype)
    return (g[..., None, None] * eye_mn,)


def _diagonal(ns, g, out, x, /, *, offset=0):
    m, n = x.shape[-2], x.shape[-1]
    length = g.shape[-1]
    rows = eye(ns, g, length, m, k=max(-offset, 0), dtype=g.dtype)  # row l + max(-k, 0)
    cols = eye(ns, g, length, n, k=max(offset, 0), dtype=g.dtype)  # col l + max(k, 0)
    return (mT(ns, rows) @ (g[..., :, None] * cols),)


def _cross(ns, g, out, x1, x2, /, *, axis=-1):
    return ns.linalg.cross(x2, g, axis=axis), ns.linalg.cross(g, x1, axis=axis)


def _outer(ns, g, out, x1, x2, /):
    return g @ x2, x1 @ g


def _eig(ns, g, out, x, /):
    raise NotImplementedError(
        "linalg.eig: the eigenvector gradient is not implemented (eigenvectors of a general "
        "matrix are defined only up to scale); linalg.eigvals is differentiable"
    )


defvjp("linalg.inv", _inv, saves=("out",))
defvjp("linalg.det", _det, saves=("x", "out"))
defvjp("linalg.slogdet", _slogdet, saves=("x", "out"))
defvjp("linalg.solve", _solve, saves=("x1", "out"))
defvjp("linalg.matrix_power", _matrix_power, saves=("x",))
defvjp("linalg.cholesky", _cholesky, saves=("out",))
defvjp("linalg.eigh", _eigh, saves=("out",))
defvjp("linalg.eigvalsh", _eigvalsh, saves=("x",))
defvjp("linalg.eigvals", _eigvals, saves=("x",))
defvjp("linalg.eig", _eig)
defvjp("linalg.svd", _svd, saves=("out",))
defvjp("linalg.svdvals", _svdvals, saves=("x",))
defvjp("linalg.qr", _qr, saves=("out",))
defvjp("linalg.pinv", _pinv, saves=("x", "out"))
defvjp("linalg.matrix_norm", _matrix_norm, saves=("x", "out"))
defvjp("linalg.vector_norm", _vector_norm, saves=("x", "out"))
defvjp("linalg.trace", _trace)
defvjp("linalg.diagonal", _diagonal)
defvjp("linalg.cross", _cross, saves=("x1", "x2"))
defvjp("linalg.outer", _outer, saves=("x1", "x2"))
nondifferentiable("linalg.matrix_rank")
