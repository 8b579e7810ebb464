"""pycograd_xp.compile writes an elementwise result that is only copied into a view of another
buffer straight into that view (``f(a, b, out=buf[idx])``, ``_compile._passes.into_views``):
the same values as uncompiled, and no such write where the index is not a view, where an
operand lives in the buffer written, or where a step between reads that buffer."""

from __future__ import annotations

import numpy as np
import pytest

import pycograd_xp as pg
from pycograd_xp import memory, nn

xp = pg.namespace(np)
rng = np.random.default_rng(0)
X = xp.asarray(rng.standard_normal((6, 40)))
Y = xp.asarray(rng.standard_normal((6, 40)))


def _blocks(x, y):
    out = xp.empty((6, 40), dtype=x.dtype)
    for i in range(0, 6, 2):
        out[i : i + 2, ...] = x[i : i + 2, ...] * y[i : i + 2, ...]
    out[:, 3] = xp.exp(x[:, 3])  # a strided view
    return out


def _advanced(x, y):
    out = xp.zeros((6, 40), dtype=x.dtype)
    out[xp.asarray([0, 2, 4]), ...] = x[:3, ...] * y[:3, ...]  # an index array: a copy
    return out


def _overlap(x, y):
    out = xp.ones((6, 40), dtype=x.dtype) + x
    out[:3, ...] = out[3:, ...] * y[:3, ...]  # an operand in the buffer written
    return out


def _read_between(x, y):
    out = xp.ones((6, 40), dtype=x.dtype) + y
    t = x[:3, ...] * 2.0
    s = out[:3, ...] + 1.0  # reads the region before the copy
    out[:3, ...] = t
    return out, s


def _same(a, b):
    for u, v in zip(pg.tree_flatten(a)[0], pg.tree_flatten(b)[0], strict=True):
        np.testing.assert_array_equal(np.asarray(pg.unwrap(u)), np.asarray(pg.unwrap(v)))


def test_result_written_into_the_view():
    f = pg.compile(_blocks)
    _same(f(X, Y), _blocks(X, Y))
    src = f.source(X, Y)
    assert src.count("out=") == 4, src  # the three blocks and the column
    assert str(f.schedule(X, Y)).count("[written by its value's step]") == 4


@pytest.mark.parametrize("fn", [_advanced, _overlap, _read_between])
def test_no_write_into_a_view_where_it_would_differ(fn):
    f = pg.compile(fn)
    _same(f(X, Y), fn(X, Y))
    assert "written by its value's step" not in str(f.schedule(X, Y))


def test_layer_norm_and_gelu_backward_write_their_blocks():
    """The blocks of layer norm's and GELU's input cotangents go straight into it (their rows'
    VJPs on the trace's abstract arrays copy each block in), gradients as uncompiled, and the
    projected peak still bounds the measured one."""
    x = xp.asarray(rng.standard_normal((4, 128, 256)).astype(np.float32))  # over PIECE_BYTES
    w = xp.asarray(np.ones(256, np.float32))

    def loss(x, w):
        h = nn.gelu(nn.layer_norm(x, w), approximate="tanh")
        return xp.sum(h * h)

    step = pg.value_and_grad(loss, argnums=(0, 1))
    f = pg.compile(step)
    want, got = step(x, w), f(x, w)
    np.testing.assert_allclose(float(got[0]), float(want[0]), rtol=1e-6)
    for a, b in zip(got[1], want[1], strict=True):
        np.testing.assert_allclose(np.asarray(pg.unwrap(a)), np.asarray(pg.unwrap(b)), 1e-5, 1e-5)
    # two blocks of each cotangent
    assert str(f.schedule(x, w)).count("[written by its value's step]") == 4
    assert memory.measure(loss, x, w).peak_bytes <= memory.project(loss, x, w).traced_peak_bytes


def test_binary_rows_write_into_a_dead_operand():
    """A binary row with no in-place operator (minimum), or whose dead operand is the second
    (``1 / e``), writes into that operand's buffer through the function's out= when nothing
    else holds it: the same values."""

    def f(x, y):
        u = x * 3.0
        m = xp.minimum(u, y)  # u dead after
        e = xp.exp(y) + 1.0
        return 1.0 / e + m  # e dead after

    x, y = (xp.asarray(rng.standard_normal((64, 40))) for _ in range(2))  # over ELIDE_MIN_BYTES
    g = pg.compile(f)
    _same(g(x, y), f(x, y))
    src = g.source(x, y)
    assert "minimum" in str(g.schedule(x, y))
    assert src.count(", out=t") >= 2, src
