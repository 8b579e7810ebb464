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


def _gelu_mlp():
    """A transformer's MLP (float32, GELU's input over PIECE_BYTES: its VJP goes by blocks):
    the step and its arguments."""
    r = np.random.default_rng(7)
    x = xp.asarray(r.standard_normal((8, 64, 256)).astype(np.float32))
    w1 = xp.asarray((r.standard_normal((256, 512)) / 16).astype(np.float32))
    w2 = xp.asarray((r.standard_normal((512, 256)) / 23).astype(np.float32))

    def loss(w1, w2, x):
        h = nn.gelu(x @ w1, approximate="tanh") @ w2
        return xp.sum(h * h)

    return pg.value_and_grad(loss, argnums=(0, 1)), (w1, w2, x)


def test_a_vjp_writes_into_the_cotangent_the_trace_finds_its_own():
    """GELU's VJP is handed its cotangent to write into (``owned``: the product's result,
    which nothing else holds) when compiled as when eager: the trace keeps no reference to
    the arrays it records (the tape's reference counts are the eager run's), and the replay
    checks that the buffer is its own before the writes (an ``own`` step). The same values
    bit for bit, no array of the layer's size for GELU's input cotangent (before: a new one
    per replay), and the projection still bounds the replay's peak."""
    import tracemalloc

    step, args = _gelu_mlp()
    f = pg.compile(step)
    _same(f(*args), step(*args))
    sched = str(f.schedule(*args))
    assert sched.count(" = own(") == 1, sched
    # the two products' results (forward, GELU's output cotangent), no third for GELU's VJP
    assert sched.count("empty((8, 64, 512)") == 2, sched
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        out = f(*args)
        measured = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    del out
    trace = f.traces[0]
    assert measured + trace.argument_bytes <= trace.peak_bytes, (measured, trace)


def test_the_replay_copies_a_cotangent_that_is_not_its_own():
    """Where the replay finds the claimed buffer shared or a view (it checks, as the eager
    tape does), it copies it before the VJP writes: the same values, the arguments intact."""
    step, args = _gelu_mlp()
    kept = [np.asarray(pg.unwrap(a)).copy() for a in args]
    f = pg.compile(step)
    want = step(*args)
    f(*args)
    plan = f._cached(args, {})
    glb = plan.replay.__globals__
    assert "_rc" in glb
    copied = []
    glb["_rc"] = lambda a: copied.append(a.shape) or -1  # every buffer found shared
    _same(f(*args), want)
    assert (8, 64, 512) in copied
    for a, k in zip(args, kept, strict=True):
        np.testing.assert_array_equal(np.asarray(pg.unwrap(a)), k)


def test_claims_no_write_follows_are_dropped():
    """A claim (the tape asked whether a cotangent was its own) is kept only where a write
    into that buffer follows before the next claim of it: the rule wrote into it."""
    from pycograd_xp._compile._ir import InplaceCall, Meta, OwnCall, Sym
    from pycograd_xp._compile._passes import drop_idle_claims
    from pycograd_xp._primitive import REGISTRY

    meta = [Meta((4,), np.float32, True), Meta((4,), np.float32, True)]
    meta.append(Meta((2,), np.float32, False, base=0))  # a view of t0

    def claim(n):
        return OwnCall(args=(Sym(n),), kwargs={}, outs=Sym(n), mutates=n, reads=[n], writes=[n])

    def write(n):
        return InplaceCall(
            prim=REGISTRY["add"], args=(Sym(n), 1.0), kwargs={}, outs=Sym(n), mutates=n
        )

    calls = [claim(0), claim(1), claim(0), write(2), claim(1)]
    kept = drop_idle_claims(calls, meta)
    assert kept == [calls[2], calls[3]]  # t0's second claim (written through its view)


def test_layer_norms_vjp_writes_into_its_cotangent_compiled():
    """Layer norm's VJP is handed its output's cotangent to write into (``owned``, the flag of
    its first output: the product's VJP made it, nothing else holds it) when compiled as when
    eager: the replay claims it (an ``own`` step, finding it its own: no copy) and writes the
    input's cotangent there; the same values bit for bit."""
    r = np.random.default_rng(3)
    x = xp.asarray(r.standard_normal((4, 128, 256)).astype(np.float32))  # over PIECE_BYTES
    w = xp.asarray(r.standard_normal(256).astype(np.float32))
    c = xp.asarray(r.standard_normal((4, 128, 256)).astype(np.float32))
    step = pg.value_and_grad(lambda x, w: xp.sum(nn.layer_norm(x, w) * c), argnums=(0, 1))
    f = pg.compile(step)
    _same(f(x, w), step(x, w))
    sched = str(f.schedule(x, w))
    assert sched.count(" = own(") == 1, sched
    glb = f._cached((x, w), {}).replay.__globals__
    copied: list = []
    copies = [k for k, v in glb.items() if getattr(v, "keywords", None) == {"copy": True}]
    assert copies  # the own step's copy, patched to say when it runs
    for k in copies:
        glb[k] = lambda a, v=glb[k]: copied.append(a.shape) or v(a)
    _same(f(x, w), step(x, w))
    assert copied == []


# -- layouts the trace's model and NumPy see differently -----------------------------------------


def _mha_loss(heads, head_dim, batch, lq, lk):
    """Multi-head attention over a context, with biases, as a loss of all its arguments."""
    r = np.random.default_rng(heads * 100 + head_dim * 10 + lq)
    d = heads * head_dim
    names = ["wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo"]
    arrays = [r.standard_normal((batch, lq, d))]
    arrays += [r.standard_normal((d, d)) / d for _ in range(4)]
    arrays += [r.standard_normal(d) for _ in range(4)] + [r.standard_normal((batch, lk, d))]

    def loss(x, *a):
        *p, c = a
        params = dict(zip(names, p, strict=True))
        return xp.sum(xp.sin(nn.multi_head_attention(x, params, heads, context=c)))

    return loss, [xp.asarray(a.astype(np.float32)) for a in arrays]


@pytest.mark.parametrize(
    "heads, head_dim, batch, lq, lk",
    [(2, 1, 2, 3, 4), (1, 3, 1, 1, 2), (3, 1, 1, 2, 1), (2, 2, 2, 3, 3)],
)
def test_a_replay_reshapes_what_its_trace_reshaped_into_a_view(heads, head_dim, batch, lq, lk):
    """A linear layer's product folds a stack into one matrix where a reshape without a copy
    can (``ops.linear_algebra.stack_product``); the trace decides that on its model of the
    layouts. With heads of one feature, the heads' output came back from a permutation and a
    reshape that drops an axis of length 1: NumPy's reshape is a view whatever the strides,
    the model took it for a copy (so for an array in C order), and the replay of the
    hessian-vector product raised where the function did not. Now the model keeps the view;
    and a reshape the trace made without a copy replays with ``copy=None`` (the same values
    where the real layout still needs a copy)."""
    loss, args = _mha_loss(heads, head_dim, batch, lq, lk)
    nums = tuple(range(len(args)))
    step = pg.value_and_grad(loss, argnums=nums)
    v = np.random.default_rng(1).standard_normal(tuple(args[0].shape)).astype(np.float32)

    def hvp(*a):
        def g(t):
            return pg.grad(loss)(t, *a[1:])

        return pg.jvp(g, (a[0],), (xp.asarray(v),))[1]

    for f in (step, hvp):
        c = pg.compile(f)
        want = f(*args)
        for _ in range(2):
            got = c(*args)
            for u, w in zip(pg.tree_leaves(got), pg.tree_leaves(want), strict=True):
                np.testing.assert_allclose(
                    np.asarray(pg.unwrap(u)), np.asarray(pg.unwrap(w)), rtol=2e-5, atol=2e-6
                )


def test_a_reshape_made_without_a_copy_replays_allowing_one():
    from pycograd_xp._compile import _codegen
    from pycograd_xp._compile._ir import RowCall, Sym
    from pycograd_xp.ops import REGISTRY

    def call(prim, **kw):
        return RowCall(prim=REGISTRY[prim], args=(Sym(0), (6, 2)), kwargs=kw, outs=Sym(1))

    assert _codegen._replayed_kwargs(call("reshape", copy=False)) == {"copy": None}
    for c in (call("reshape", copy=True), call("reshape"), call("asarray", copy=False)):
        assert _codegen._replayed_kwargs(c) == c.kwargs
