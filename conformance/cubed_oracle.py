"""namespace(cubed) against namespace(numpy): the same values and VJPs for any chunking.

:func:`compare` runs a function of arrays on both namespaces, the Cubed inputs chunked by a
named strategy (:data:`CHUNKINGS`), pulls one random cotangent back through both, computes the
Cubed outputs and cotangents in one plan, and raises :class:`MismatchError` where a value or a
gradient differs (an exception of the namespace propagates). Used by
``conformance/test_cubed_conformance.py`` (every gradient-conformance case at four chunkings)
and ``conformance/test_cubed_differential.py`` (random programs).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import pycograd_xp as pg
from conformance.gradcheck import _like
from pycograd_xp.tree import tree_flatten, tree_unflatten


class MismatchError(AssertionError):
    """namespace(cubed) gave other numbers than namespace(numpy)."""


def _ones(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(1 for _ in shape)


def _uneven(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Chunks that do not divide the axis where one can (2 of 3, 3 of 4, ...)."""
    return tuple(n // 2 + 1 if n > 2 else 1 for n in shape)


def _one(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(max(n, 1) for n in shape)


def _along_last(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Chunks of 1 along the last axis (the one reductions and products usually contract),
    whole along the others."""
    return tuple(1 if i == len(shape) - 1 else max(n, 1) for i, n in enumerate(shape))


CHUNKINGS: dict[str, Callable[[tuple[int, ...]], tuple[int, ...]]] = {
    "ones": _ones,
    "uneven": _uneven,
    "one chunk": _one,
    "along last axis": _along_last,
}
NAMES = list(CHUNKINGS)


# At most this many blocks per input: the large cases (a 300 x 300 tanh, 40 x 1000 activations,
# convolutions) in chunks of 1 would be plans of 90,000 tasks; their chunks grow (doubling along
# the axis of most blocks, so still not dividing it) until they fit.
MAX_BLOCKS = 16


def chunks_for(shape: tuple[int, ...], chunking: str, i: int) -> tuple[int, ...]:
    """The chunks of operand ``i``: operands after the first take the next strategies in turn,
    so the operands of one call are chunked differently."""
    name = NAMES[(NAMES.index(chunking) + i) % len(NAMES)]
    chunks = list(CHUNKINGS[name](shape))
    while math.prod(-(-n // c) for n, c in zip(shape, chunks, strict=True)) > MAX_BLOCKS:
        a = max(range(len(shape)), key=lambda k: -(-shape[k] // chunks[k]))
        chunks[a] = min(2 * chunks[a] + 1, shape[a])
    return tuple(chunks)


def _leaves(tree: Any) -> list:
    return [x for x in tree_flatten(tree)[0] if isinstance(x, pg.Array)]


def compare(
    f: Callable[[Any], Callable[..., Any]],
    args: Sequence[np.ndarray],
    chunking: str,
    *,
    seed: int = 0,
    rtol: float = 1e-7,
    atol: float = 1e-10,
    spec: Any = None,
    chunks: Sequence[tuple[int, ...]] | None = None,
) -> None:
    """Values and the VJP of ``f(xp)`` at ``args`` on namespace(cubed) (inputs chunked by
    ``chunking``, or given one by one as ``chunks``) against namespace(numpy); raises
    :class:`MismatchError` naming what differs."""
    import cubed

    nxp, cxp = pg.namespace(np), pg.namespace(cubed)
    rng = np.random.default_rng(seed)
    with np.errstate(all="ignore"):
        out_n, pull_n = pg.vjp(f(nxp), *(nxp.asarray(a) for a in args))
        leaves_n, td = tree_flatten(out_n)
        us = [
            np.asarray(_like(rng, np.asarray(pg.unwrap(o)))) if isinstance(o, pg.Array) else o
            for o in leaves_n
        ]
        ct_n = pull_n(
            tree_unflatten(td, [nxp.asarray(u) if isinstance(u, np.ndarray) else u for u in us])
        )
        want = [np.asarray(pg.unwrap(x)) for x in _leaves(out_n) + _leaves(ct_n)]
    xs = [
        cxp.asarray(
            cubed.from_array(
                a, chunks=chunks[i] if chunks else chunks_for(a.shape, chunking, i), spec=spec
            )
        )
        for i, a in enumerate(args)
    ]
    out_c, pull_c = pg.vjp(f(cxp), *xs)
    leaves_c = tree_flatten(out_c)[0]
    if len(leaves_c) != len(leaves_n):
        raise MismatchError(f"{len(leaves_c)} outputs on Cubed, {len(leaves_n)} on NumPy")
    # each cotangent chunked as its output (cubed.asarray takes in-memory arrays of 1 MB at most)
    ct_c = pull_c(
        tree_unflatten(
            td,
            [
                cxp.asarray(cubed.from_array(u, chunks=pg.unwrap(o).chunks, spec=spec))
                if isinstance(u, np.ndarray) and isinstance(o, pg.Array)
                else u
                for u, o in zip(us, leaves_c, strict=True)
            ],
        )
    )
    arrays = _leaves(out_c) + _leaves(ct_c)
    if len(arrays) != len(want):
        raise MismatchError(f"{len(arrays)} arrays on Cubed, {len(want)} on NumPy")
    got = cubed.compute(*(pg.unwrap(x) for x in arrays)) if arrays else ()
    n_out = len(_leaves(out_n))
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        what = f"output {k}" if k < n_out else f"the cotangent of input {k - n_out}"
        g = np.asarray(g)
        if g.shape != w.shape or g.dtype != w.dtype:
            raise MismatchError(f"{what}: {g.dtype}{g.shape} on Cubed, {w.dtype}{w.shape} on NumPy")
        try:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
        except AssertionError as e:
            raise MismatchError(f"{what} ({chunking}): {e}") from None
