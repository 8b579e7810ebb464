"""The dot-product test of a VJP against central finite differences (float64).

For ``f`` at ``x`` (a tuple of arrays) and random ``u`` (shaped like the output) and ``v``
(shaped like the inputs)::

    sum_i Re(<vjp(u)_i, v_i>)  ==  d/dt Re(<u, f(x + t v)>) at t = 0

with ``<a, b> = sum(a * b)`` (no conjugate: the JAX convention for complex numbers). The right
side is a central difference ``(phi(eps) - phi(-eps)) / 2 eps``. This checks the VJP in every
direction at once, up to the randomness of u and v, and works for complex inputs and outputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import pycograd_xp
from pycograd_xp.tree import tree_flatten


def to_numpy(x: Any) -> np.ndarray:
    """A NumPy copy of ``x`` (ours or a backend's array), a device array (CuPy) copied to the
    host."""
    x = pycograd_xp.unwrap(x) if isinstance(x, pycograd_xp.Array) else x
    get = getattr(x, "get", None)  # CuPy's device-to-host copy (np.asarray refuses one)
    return np.asarray(get() if callable(get) and not isinstance(x, np.ndarray) else x)


def backend_or_skip(name: str) -> Any:
    """The backend module ``name`` (``numpy``, ``array_api_strict``, ``cupy``, ...): the test
    skips where it is not installed, and CuPy's where no CUDA device answers."""
    import pytest

    if name != "cupy":
        return pytest.importorskip(name)
    try:
        import cupy
    except ImportError as e:  # absent, or installed without the CUDA libraries it loads
        said = [line for line in str(e).splitlines() if any(c.isalpha() for c in line)]
        pytest.skip(f"CuPy does not import: {said[0] if said else repr(e)}")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device")
    except Exception:  # CuPy installed without a usable driver or device
        pytest.skip("no CUDA device")
    return cupy


def _like(rng: np.random.Generator, a: np.ndarray) -> np.ndarray:
    r = rng.standard_normal(a.shape)
    if np.iscomplexobj(a):
        r = r + 1j * rng.standard_normal(a.shape)
    return r.astype(a.dtype)


def check_vjp(
    xp: Any,
    f: Callable[..., Any],
    *args: np.ndarray,
    eps: float = 1e-6,
    rtol: float = 1e-5,
    atol: float = 1e-7,
    seed: int = 0,
) -> None:
    """Assert that pycograd_xp's VJP of ``f`` (written against ``xp``) matches finite
    differences at ``args`` (NumPy float64/complex128 arrays)."""
    rng = np.random.default_rng(seed)
    primals = [xp.asarray(a) for a in args]
    out, pullback = pycograd_xp.vjp(f, *primals)
    out_leaves, out_td = tree_flatten(out)
    u = [_like(rng, to_numpy(o)) for o in out_leaves]
    cts = pullback(pycograd_xp.tree_unflatten(out_td, [xp.asarray(ui) for ui in u]))
    v = [_like(rng, a) for a in args]
    lhs = sum(np.real(np.sum(to_numpy(c) * vi)) for c, vi in zip(cts, v, strict=True))

    def phi(t: float) -> float:
        with pycograd_xp.no_grad():
            res = f(*[xp.asarray(a + t * vi) for a, vi in zip(args, v, strict=True)])
        leaves = tree_flatten(res)[0]
        pairs = zip(u, leaves, strict=True)
        return float(sum(np.real(np.sum(ui * to_numpy(o))) for ui, o in pairs))

    fd = (phi(eps) - phi(-eps)) / (2 * eps)
    scale = max(1.0, abs(fd), abs(lhs))
    assert abs(lhs - fd) <= atol + rtol * scale, (
        f"VJP mismatch: <vjp(u), v> = {lhs!r}, finite difference = {fd!r}"
    )
    for c, a in zip(cts, args, strict=True):
        assert tuple(c.shape) == a.shape, f"cotangent shape {c.shape} != input shape {a.shape}"
