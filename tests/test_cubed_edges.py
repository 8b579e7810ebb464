"""namespace(cubed) at the edges its differential programs do not reach: strided slices of
one chunk, degrees of freedom used up, scans into a wider dtype, differences and repeats past an
axis, arrays with no element (forward and gradients). Each against namespace(numpy); each once
failed or gave other numbers (Cubed 0.27's own errors, passed through)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import pycograd_xp as pg
from pycograd_xp import nn

cubed = pytest.importorskip("cubed")
nxp = pg.namespace(np)


def chunked(cxp, a, chunks):
    return cxp.asarray(cubed.from_array(a, chunks=chunks))


def test_strided_slices_of_one_chunk(cxp):
    """Cubed 0.27 refuses y[0:8:2] of one chunk of 10 ("Chunks (10,) must be a multiple of
    array's chunks (4,)"), and average pooling with a stride over one chunk with it."""
    y = np.arange(10.0)
    for k in (slice(0, 8, 2), slice(0, 6, 3), slice(1, 9, 2), slice(8, 0, -3)):
        np.testing.assert_array_equal(np.asarray(chunked(cxp, y, 10)[k]), y[k])
    x = np.arange(42.0).reshape(6, 7)
    for key in ((slice(0, 4), slice(0, 5, 2)), (slice(0, 6, 2), slice(1, 4)), (1, slice(0, 5, 3))):
        np.testing.assert_array_equal(np.asarray(chunked(cxp, x, (6, 7))[key]), x[key])
    a = np.random.default_rng(0).standard_normal((2, 3, 6, 7))
    got = nn.avg_pool2d(chunked(cxp, a, a.shape), (3, 2), stride=(1, 2))
    want = nn.avg_pool2d(nxp.asarray(a), (3, 2), stride=(1, 2))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12)


def test_var_and_std_with_no_degree_of_freedom_left(cxp):
    """correction >= N: NumPy's sum of squares over max(N - correction, 0), inf (Cubed 0.27
    divided by the negative count: -40, and NaN for std)."""
    x = np.arange(10.0).reshape(5, 2)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        for f in ("var", "std"):
            for c in (5, 6):
                got = getattr(cxp, f)(chunked(cxp, x, (2, 1)), axis=0, correction=c)
                want = getattr(nxp, f)(nxp.asarray(x), axis=0, correction=c)
                np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_var_and_std_over_no_axis(cxp, dtype):
    """axis=(): each element its own sample, 0 where a degree of freedom is left, NaN where
    none is or the element is not finite (Cubed 0.27's combine step raised IndexError); and
    the gradients, as NumPy's."""
    x = np.array([[1.0, np.inf, 3.0], [np.nan, -2.0, 0.5]], dtype=dtype)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        for f in ("var", "std"):
            for c in (0, 0.5, 1, 2):
                for keepdims in (False, True):
                    kw = {"axis": (), "correction": c, "keepdims": keepdims}
                    got = np.asarray(getattr(cxp, f)(chunked(cxp, x, (1, 2)), **kw))
                    want = getattr(np, f)(x, axis=(), ddof=c, keepdims=keepdims)
                    assert got.dtype == want.dtype
                    np.testing.assert_array_equal(got, want)
    y = np.array([[1.0, 4.0, 3.0], [-1.0, -2.0, 0.5]])
    for f in ("var", "std"):
        g = pg.grad(lambda v, f=f: cxp.sum(getattr(cxp, f)(v, axis=()) * v))
        want = pg.grad(lambda v, f=f: nxp.sum(getattr(nxp, f)(v, axis=()) * v))(nxp.asarray(y))
        np.testing.assert_array_equal(np.asarray(g(chunked(cxp, y, 2))), np.asarray(want))


def test_scans_sum_in_the_wider_dtype(cxp):
    """cumulative_sum(x_f32, dtype=float64) sums in float64 (Cubed 0.27 summed in float32 and
    cast: off by 1e-7)."""
    x = np.random.default_rng(1).standard_normal(300).astype(np.float32)
    for f in ("cumulative_sum", "cumulative_prod"):
        got = getattr(cxp, f)(chunked(cxp, x * 0.01 + 1, 40), dtype=cxp.float64)
        want = getattr(np, f"cum{f.split('_')[1]}")((x * 0.01 + 1).astype(np.float64))
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-14)  # float32's: 1e-7


def test_diff_and_repeat_past_an_axis(cxp):
    x = np.arange(6.0)
    assert np.asarray(cxp.diff(chunked(cxp, x, 4), n=7)).shape == (0,)
    m = np.arange(30.0).reshape(5, 6)
    for chunks in ((2, 4), (5, 6)):
        assert np.asarray(cxp.repeat(chunked(cxp, m, chunks), 0, axis=1)).shape == (5, 0)


FORWARD = {
    "flip": lambda xp, a: xp.flip(a),
    "reshape": lambda xp, a: xp.reshape(a, (-1,)),
    "roll": lambda xp, a: xp.roll(a, 1),
    "roll axis 0": lambda xp, a: xp.roll(a, 1, axis=0),
    "diff": lambda xp, a: xp.diff(a, axis=0),
    "take": lambda xp, a: xp.take(a, xp.asarray([0, 0][: a.shape[-1]], dtype=xp.int64), axis=-1),
    "prod": lambda xp, a: xp.prod(a, axis=0),
    "cumulative_prod": lambda xp, a: xp.cumulative_prod(a, axis=-1, include_initial=True),
    "cumulative_sum": lambda xp, a: xp.cumulative_sum(a, axis=0, include_initial=True),
    "concat": lambda xp, a: xp.concat([a, a], axis=0),
    "stack": lambda xp, a: xp.stack([a, a]),
    "tile": lambda xp, a: xp.tile(a, (2, 2)),
    "softmax": lambda xp, a: nn.softmax(a, axis=-1),
    "log_softmax": lambda xp, a: nn.log_softmax(a, axis=0),
}


@pytest.mark.parametrize("name", list(FORWARD))
@pytest.mark.parametrize("shape", [(0, 4), (3, 0)])
def test_arrays_with_no_element_and_their_gradients(cxp, name, shape):
    """An operand with no element: the result's shape and dtype are NumPy's (Cubed 0.27 fails
    on many: a division by a chunk count of 0, "Chunks and shape must be of the same length"),
    and the gradient is zeros of the input's shape (a VJP of an empty output runs no rule)."""
    f = FORWARD[name]
    a = np.zeros(shape)
    want = f(nxp, nxp.asarray(a))
    got = f(cxp, chunked(cxp, a, (2, 2)))
    assert np.asarray(got).shape == tuple(want.shape) and got.dtype == want.dtype
    g = pg.grad(lambda t: cxp.sum(f(cxp, t)))(chunked(cxp, a, (2, 2)))
    assert np.asarray(g).shape == shape and not np.asarray(g).any()


def test_searchsorted_with_a_sorter(cxp):
    """Cubed 0.27 refuses ``sorter``: x1 is taken in the sorter's order first."""
    x1 = np.array([3.0, 1.0, 4.0, 1.5, 9.0, 2.6])
    order = np.argsort(x1)
    v = np.array([0.0, 1.2, 3.0, 10.0])
    for side in ("left", "right"):
        got = cxp.searchsorted(
            chunked(cxp, x1, 4), chunked(cxp, v, 3), side=side, sorter=chunked(cxp, order, 4)
        )
        np.testing.assert_array_equal(np.asarray(got), np.searchsorted(x1, v, side, order))


def test_searchsorted_on_another_spec_leaves_its_operands_spec_alone(monkeypatch, tmp_path):
    """Cubed 0.27's searchsorted plans only on its default Spec: the plugin plans on second
    handles of the operands' nodes relabelled with it, never on the caller's arrays (it
    relabelled those and back, which another thread planning with them could observe)."""
    import cubed
    import cubed.array_api as ca

    from cubed_plugin._standard import searchsorted

    spec = cubed.Spec(str(tmp_path), allowed_mem="200MB", reserved_mem="10MB")
    x1 = ca.asarray(np.array([1.0, 3.0, 5.0, 7.0]), chunks=2, spec=spec)
    x2 = ca.asarray(np.array([0.0, 4.0, 8.0]), chunks=2, spec=spec)
    seen = []
    plan = cubed.searchsorted

    def spy(a, v, **kw):
        seen.append((x1.spec, x2.spec))
        return plan(a, v, **kw)

    monkeypatch.setattr(cubed, "searchsorted", spy)
    out = searchsorted(x1, x2, side="right")
    assert seen == [(spec, spec)] and x1.spec is spec and x2.spec is spec and out.spec is spec
    np.testing.assert_array_equal(np.asarray(out.compute()), [0, 2, 4])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint8])
def test_clip_with_one_bound_and_tile_with_no_repetition(cxp, dtype):
    """Cubed 0.27 calls NumPy's clip without ``a_max`` for a lower bound alone (NumPy 2 refuses
    it when the plan runs), and its tile skips a repetition of 0 (``tile(x, (0, 1))`` gave x)."""
    a = (np.arange(12) % 5).astype(dtype).reshape(3, 4)
    x = chunked(cxp, a, (2, 3))
    for lo, hi in ((2, None), (None, 3), (1, 3), (None, None)):
        got, want = np.asarray(cxp.clip(x, min=lo, max=hi)), np.clip(a, lo, hi)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    for reps in ((0, 1), (2, 0), (0,), (1, 0, 2), (2,), (2, 1, 1), (1, 1)):
        got, want = np.asarray(cxp.tile(x, reps)), np.tile(a, reps)
        assert got.shape == want.shape, reps
        np.testing.assert_array_equal(got, want)
    if dtype == np.float64:  # and their gradients
        v = np.array([-1.0, np.inf, 0.2, 0.7])
        g = pg.grad(lambda y: cxp.sum(cxp.clip(y, min=0.3) * cxp.tile(y, (1,))))
        want_g = pg.grad(lambda y: nxp.sum(nxp.clip(y, min=0.3) * y))(nxp.asarray(v))
        np.testing.assert_array_equal(np.asarray(g(chunked(cxp, v, 3))), np.asarray(want_g))
        z = pg.grad(lambda y: cxp.sum(cxp.tile(y, (0, 2))))(x)
        np.testing.assert_array_equal(np.asarray(z), np.zeros((3, 4)))
    with pytest.raises(ValueError, match="tile: repetitions must not be negative"):
        cxp.tile(x, (-1, 1))


def test_basic_keys_that_select_no_element(cxp):
    """Cubed 0.27 fails where a key of ints and slices selects nothing from an array that has
    elements ("Chunks do not add up to shape" for x[0, 3:] of 3 x 3; "Chunks and shape must be
    of the same length" for x[2, :, 5::3] of 3 x 7 x 3); values and gradients as NumPy's."""
    a = np.arange(63.0).reshape(3, 7, 3)
    x = chunked(cxp, a, (2, 6, 1))
    keys = [
        (0, 3, slice(3, None)),
        (2, slice(None), slice(5, None, 3)),
        (slice(None), slice(7, None)),
        (slice(2, 0), 0),
        (slice(None, None, -1), slice(0, 0), None),
        (Ellipsis, slice(4, 4)),
        (-1, slice(3, 3), 1),
    ]
    for k in keys:
        got = np.asarray(x[k])
        assert got.shape == a[k].shape, k
        g = pg.grad(lambda y, k=k: cxp.sum(y[k] ** 2) + cxp.sum(y))(x)
        np.testing.assert_array_equal(np.asarray(g), np.ones(a.shape))
    np.testing.assert_array_equal(np.asarray(chunked(cxp, a[0, :3], 2)[0, 3:]), np.zeros(0))
    with pytest.raises(IndexError, match="index 5 is out of bounds for axis 0 with size 3"):
        x[5, 0:0]


def test_gathers_by_constant_indices_read_them_without_computing(cxp):
    """Cubed 0.27 computes a Cubed index array to plan a gather by it (a plan run of its own).
    An index made from a NumPy array is held in memory: its values are read where they are,
    for one index array, several (one flat index, in NumPy), a 0-d one, negative entries, take
    and repeat's counts. Values and gradients as NumPy's, and nothing computed while planning
    (but repeat's gradient, which gathers at the counts' cumulative sums, computed)."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((6, 5, 4))
    x = chunked(cxp, a, (4, 2, 3))
    i, j = np.array([5, 0, -1, 2, 2]), np.array([[1], [-2]])
    cases = [
        (lambda m, y: y[m.asarray(i)], lambda y: y[i]),
        (lambda m, y: y[:, m.asarray(j)], lambda y: y[:, j]),
        (lambda m, y: y[m.asarray(i), :, m.asarray(j)], lambda y: y[i, :, j]),
        (lambda m, y: y[m.asarray(i[:2]), m.asarray(j[:, 0])], lambda y: y[i[:2], j[:, 0]]),
        (lambda m, y: y[1, m.asarray(np.asarray(-2))], lambda y: y[1, -2]),
        (lambda m, y: m.take(y, m.asarray(i[1:]), axis=-1), lambda y: np.take(y, i[1:], axis=-1)),
        (lambda m, y: m.take(y, m.asarray(np.arange(5)), axis=1), lambda y: y),
        (
            lambda m, y: m.repeat(y, m.asarray(np.array([0, 2, 1, 3])), axis=2),
            lambda y: np.repeat(y, [0, 2, 1, 3], axis=2),
        ),
    ]
    for k, (f, ref) in enumerate(cases):
        with cubed.raise_if_computes():  # planning only: no index is computed
            y = f(cxp, x)
            if k < len(cases) - 1:  # (repeat's VJP gathers at the counts' cumulative sums)
                g = pg.grad(lambda y, f=f: cxp.sum(f(cxp, y) ** 2))(x)
        if k == len(cases) - 1:
            g = pg.grad(lambda y, f=f: cxp.sum(f(cxp, y) ** 2))(x)
        np.testing.assert_array_equal(np.asarray(y), ref(a), err_msg=str(k))
        want = pg.grad(lambda y, f=f: nxp.sum(f(nxp, y) ** 2))(nxp.asarray(a))
        np.testing.assert_allclose(np.asarray(g), np.asarray(want), rtol=1e-13, err_msg=str(k))


def test_projection_of_a_gather_by_computed_indices_says_why_it_cannot():
    """memory.project builds the plan and runs nothing; Cubed 0.27 must compute a gather's
    computed indices to plan it. Constant indices project; computed ones (here the order of
    a sort, and the second-order gradient through a constant gather, whose segment sum sorts)
    get an error that says so and the way out, not Cubed's bare "'compute' was called"."""
    from pycograd_xp import memory

    xp = pg.namespace(cubed)
    spec = cubed.Spec(allowed_mem="200MB")
    X = xp.asarray(
        cubed.from_array(np.random.default_rng(0).random((40, 6)), chunks=(10, 6), spec=spec)
    )
    idx = xp.asarray(np.array([3, 1, 7, 30]))

    def constant(X):
        return xp.sum(xp.take(X, idx, axis=0) ** 2)

    p = memory.project(constant, X)
    assert p.max_task_bytes > 0 and {r.phase for r in p.rows} == {"forward", "backward"}

    def computed(X):
        return xp.sum(xp.take(X, xp.argsort(X[:, 0])[:3], axis=0) ** 2)

    for f in (computed, pg.grad(constant)):
        with pytest.raises(
            ValueError,
            match=r"memory\.project\(\): building the plan needed "
            r"values Cubed must compute first.*gather.*constants",
        ):
            memory.project(f, X)


def test_empty_results_beside_constants_keep_the_users_spec():
    """A call on an empty array of a user's Spec and a constant made without one (Cubed's
    default Spec) is answered without Cubed where Cubed fails on no elements; that answer is
    on the Spec the operands meet on, the user's, whichever comes first: on the default one,
    computing it with the gradients raised "Arrays must have same spec"."""
    import tempfile

    import cubed_plugin

    xp = pg.namespace(cubed)
    spec = cubed.Spec(work_dir=tempfile.mkdtemp(), allowed_mem="300MB", reserved_mem="0")
    x = xp.asarray(cubed.from_array(np.zeros((0, 3)), chunks=(1, 2), spec=spec))
    c = xp.asarray(np.ones((0, 3)))
    m = xp.asarray(np.zeros((0, 3), dtype=bool))
    calls = {
        "where first": lambda x: xp.where(m, xp.abs(x), 0.0),
        "where second": lambda x: xp.where(m, 0.0, xp.sin(x)),
        "multiply": lambda x: c * x,
        "concat": lambda x: xp.concat([c, x], axis=0),
        "rms_norm": lambda x: nn.rms_norm(x, weight=xp.asarray(np.ones(3))),
        "matmul": lambda x: xp.asarray(np.ones((2, 0))) @ x,
    }
    for name, f in calls.items():
        assert pg.unwrap(f(x)).spec == spec, name
        v, g = pg.value_and_grad(lambda x, f=f: xp.sum(f(x) * 2.0))(x)
        assert pg.unwrap(v).spec == spec, name
        got_v, got_g = cubed_plugin.compute(v, g)
        assert float(got_v) == 0.0 and got_g.shape == (0, 3), name


def test_keys_with_index_arrays_that_select_no_element(cxp):
    """Cubed 0.27 fails on an empty result beside an index array ("Chunks and shape must be of
    the same length": x[3:-4:3, idx] of 2 rows); values and gradients as NumPy's, held or
    computed indices, and an index into an empty axis refused as NumPy refuses it."""
    a = np.arange(14.0).reshape(2, 7)
    x = chunked(cxp, a, (1, 3))
    e = chunked(cxp, np.zeros((0, 3)), (1, 1))
    i, j = np.array([-5, -1, -1]), np.array([[-2]])
    cases = [
        (x, a, lambda m: (slice(3, -4, 3), m.asarray(i))),
        (x, a, lambda m: (m.asarray(np.zeros(0, dtype=np.int64)),)),
        (x, a, lambda m: (m.asarray(np.array([1, 0])), slice(4, 4))),
        (x, a, lambda m: (slice(None), m.asarray(np.zeros((2, 0), dtype=np.int64)))),
        (e, np.zeros((0, 3)), lambda m: (slice(None, None, -3), m.asarray(j))),
        # an index array computed (Cubed computes it to plan the gather)
        (e, np.zeros((0, 3)), lambda m: (slice(None), m.asarray(np.array([0, 2, 2])) + 0)),
    ]
    for k, (y, ref, key) in enumerate(cases):
        got = y[key(cxp)]
        want = ref[tuple(np.asarray(v) if hasattr(v, "shape") else v for v in key(np))]
        np.testing.assert_array_equal(np.asarray(got), want, err_msg=str(k))
        g = pg.grad(lambda y, key=key: cxp.sum(y[key(cxp)] ** 2) + cxp.sum(y))(y)
        np.testing.assert_array_equal(np.asarray(g), np.ones(ref.shape), err_msg=str(k))
    with pytest.raises(IndexError, match="out of bounds"):
        e[cxp.asarray(np.array([0]))]


def test_repeat_take_and_diff_with_no_element(cxp):
    """An empty result's shape can depend on values: repeat's counts (held or computed) gave
    (0, 0) for NumPy's (4, 0) from a (2, 0) array (its stand-ins were zeros). diff with an
    empty prepend or append, or n=0 (NumPy returns x unread), and take from or by nothing
    raised Cubed 0.27's chunking errors. Shapes, values and gradients as NumPy's."""
    cases = [
        ((2, 0), lambda m, x: m.repeat(x, m.asarray(np.array([2])), axis=0)),
        ((2, 0), lambda m, x: m.repeat(x, m.asarray(np.array([1, 3])), axis=0)),
        ((2, 0), lambda m, x: m.repeat(x, m.asarray(np.array([1, 3])) + 0, axis=0)),  # computed
        ((0, 3), lambda m, x: m.repeat(x, m.asarray(np.array([2, 0, 1])), axis=1)),
        ((2, 3), lambda m, x: m.diff(x, prepend=m.zeros((2, 0)), append=m.ones((2, 2)))),
        ((2, 0), lambda m, x: m.diff(x, prepend=m.ones((2, 1)), append=m.ones((2, 2)))),
        ((2, 3), lambda m, x: m.diff(x, n=0, prepend=m.ones((0, 1)))),
        ((2, 0), lambda m, x: m.take(x, m.asarray(np.array([1, 1, 0])), axis=0)),
        ((2, 3), lambda m, x: m.take(x, m.asarray(np.zeros(0, dtype=np.int64)), axis=1)),
    ]
    rng = np.random.default_rng(0)
    for k, (shape, f) in enumerate(cases):
        a = rng.standard_normal(shape)
        x = chunked(cxp, a, tuple(max(1, n // 2) for n in shape))
        want = f(nxp, nxp.asarray(a))
        got = f(cxp, x)
        assert got.shape == want.shape, (k, got.shape, want.shape)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), err_msg=str(k))
        g = pg.grad(lambda y, f=f: cxp.sum(f(cxp, y) ** 2) + cxp.sum(y))(x)
        gw = pg.grad(lambda y, f=f: nxp.sum(f(nxp, y) ** 2) + nxp.sum(y))(nxp.asarray(a))
        np.testing.assert_allclose(np.asarray(g), np.asarray(gw), rtol=1e-13, err_msg=str(k))
    with pytest.raises(IndexError, match="empty"):
        cxp.take(chunked(cxp, np.zeros((0, 3)), (1, 1)), cxp.asarray(np.array([0])), axis=0)


def test_derivatives_through_products_and_broadcasts_with_no_element(cxp):
    """A rule's own operators on Cubed arrays with an empty axis fail in Cubed 0.27's rechunk
    ("Invalid chunk_limits (4, 0)": the VJP of (4, 0) @ (0,), the JVP of a maximum broadcast
    against an empty array). Where no derivative can flow (every input it flows to, or the
    output, holds no element), the answer is zeros of the shapes: as NumPy's."""
    rng = np.random.default_rng(0)
    a, b = np.zeros((4, 0)), np.zeros((0,))
    c, e = rng.standard_normal((1, 1, 5, 5)), np.zeros((0, 1, 1, 5))

    def product(m, a, b):
        return nn.layer_norm(a @ b, axis=-1)

    def broadcast(m, c, e):
        return m.maximum(c, m.exp(e))

    for f, args, chunks in (
        (product, (a, b), ((7, 1), (1,))),
        (broadcast, (c, e), ((1, 1, 3, 3), (1, 1, 1, 4))),
    ):
        xs = [chunked(cxp, v, ch) for v, ch in zip(args, chunks, strict=True)]
        ns_ = [nxp.asarray(v) for v in args]
        out, pull = pg.vjp(lambda *x, f=f: f(cxp, *x), *xs)
        want_out, want_pull = pg.vjp(lambda *x, f=f: f(nxp, *x), *ns_)
        ct = rng.standard_normal(tuple(want_out.shape))
        for g, w in zip(pull(cxp.asarray(ct)), want_pull(nxp.asarray(ct)), strict=True):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w))
        ts = [rng.standard_normal(v.shape) for v in args]
        _, t = pg.jvp(lambda *x, f=f: f(cxp, *x), tuple(xs), tuple(cxp.asarray(v) for v in ts))
        _, tw = pg.jvp(lambda *x, f=f: f(nxp, *x), tuple(ns_), tuple(nxp.asarray(v) for v in ts))
        np.testing.assert_allclose(np.asarray(t), np.asarray(tw))
