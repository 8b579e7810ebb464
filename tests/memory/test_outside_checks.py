"""The cases an independent check found over their projection or unprojectable (issue 33), each
measured with ``memory.measure`` after one warm-up call against ``traced_peak_bytes``, and
within 2x of it; the functions that cannot be projected refuse naming the function and the way
out."""

from __future__ import annotations

import numpy as np
import pytest

import pycograd_xp as pg
from pycograd_xp import memory, optim

XP = pg.namespace(np)
RNG = np.random.default_rng(33)


def _sound(f, *args, argnums=()):
    f(*args)  # warm-up: first calls build caches that later calls reuse
    p = memory.project(f, *args, argnums=argnums)
    m = memory.measure(f, *args, argnums=argnums)
    assert m.peak_bytes <= p.traced_peak_bytes, (m.peak_bytes, p.traced_peak_bytes)
    assert m.peak_bytes >= 0.5 * p.traced_peak_bytes, (m.peak_bytes, p.traced_peak_bytes)
    if argnums != ():
        assert m.forward_peak_bytes <= p.traced_forward_peak_bytes
    return m.peak_bytes / p.traced_peak_bytes


@pytest.mark.parametrize("layout", ["C", "F"])
def test_tile_counts_numpys_stages(layout):
    """NumPy tiles one axis at a time: each stage holds its input and its output."""
    a = RNG.standard_normal((300, 300))
    a = np.asfortranarray(a) if layout == "F" else a
    _sound(lambda a: XP.sum(XP.tile(a, (2, 2, 2))), XP.asarray(a))
    _sound(lambda a: XP.sum(XP.tile(a, (3, 1))), XP.asarray(a))


@pytest.mark.parametrize("compiled", [False, True])
def test_descending_sort_keeps_its_copy_alive(compiled):
    """The replay's peak keeps the sorted copy a descending sort's flipped view points into;
    the sum of that reversed view buffers it."""

    def f(a):
        return XP.sum(XP.sort(a, descending=True))

    _sound(pg.compile(f) if compiled else f, XP.asarray(RNG.standard_normal((1000, 1000))))


@pytest.mark.parametrize("n", [-3, -1, 2, 5])
def test_matrix_power_counts_the_inverse_as_traced(n):
    """``inv``'s result in NumPy's ``matrix_power`` is an array NumPy allocates (traced), not
    LAPACK workspace."""
    _sound(lambda a: XP.linalg.matrix_power(a, n), XP.asarray(RNG.standard_normal((300, 300))))


@pytest.mark.parametrize("shape", [(300, 300), (300, 200), (200, 300)])
def test_pinv_counts_the_svd_factors_as_traced(shape):
    _sound(lambda a: XP.linalg.pinv(a), XP.asarray(RNG.standard_normal(shape)))


def test_lstsq_projects():
    """NumPy's ``lstsq`` projects: the residuals (whose shape depends on the rank) as for full
    rank; its step is measured against the projection too."""
    a = XP.asarray(RNG.standard_normal((300, 200)))
    y = XP.asarray(RNG.standard_normal(300))
    r = _sound(lambda a, y: XP.sum(np.linalg.lstsq(a, y)[0]), a, y, argnums=(0, 1))
    assert r > 0.9
    p = memory.project(lambda a, y: np.linalg.lstsq(a, y)[0], a, y, argnums=())
    m = memory.measure(lambda a, y: np.linalg.lstsq(a, y)[0], a, y, argnums=())
    assert m.peak_bytes <= p.traced_peak_bytes  # NumPy's own gelsd (nothing differentiated)


def test_lstsq_under_compile_names_the_data_dependent_shape():
    a, y = XP.asarray(RNG.standard_normal((30, 20))), XP.asarray(RNG.standard_normal(30))
    with pytest.raises(Exception, match=r"numpy.linalg.lstsq .*residuals"):
        pg.compile(lambda a, y: np.linalg.lstsq(a, y)[1])(a, y)


@pytest.mark.parametrize(
    ("ufunc", "layout", "kwargs"),
    [
        (np.maximum, "C", {}),
        (np.maximum, "T", {"axis": 1}),
        (np.minimum, "reversed", {}),
        (np.maximum, "C", {"dtype": np.float32}),
        (np.logical_or, "C", {"axis": -1}),
        (np.bitwise_xor, "rows", {}),
    ],
)
def test_a_ufunc_accumulation_without_a_gradient_projects(ufunc, layout, kwargs):
    """``np.maximum.accumulate(x)`` with nothing differentiated: NumPy's own, projected from its
    output and a full copy of its operand (its buffers are at most that), within 2x."""
    a = RNG.standard_normal((300, 200))
    a = {"C": a, "T": a.T.copy().T, "reversed": a[::-1], "rows": np.repeat(a, 2, 0)[::2]}[layout]
    if ufunc is np.logical_or:
        a = a > 0
    elif ufunc is np.bitwise_xor:
        a = (a * 100).astype(np.int64)
    x = XP.asarray(a)
    r = _sound(lambda x: ufunc.accumulate(x, **kwargs), x)
    assert r > 0.5
    p = memory.project(lambda x: ufunc.accumulate(x, **kwargs), x, argnums=())
    want = ufunc.accumulate(a, **kwargs)
    assert p.rows[0].op == f"numpy.{ufunc.__name__}.accumulate"
    assert p.rows[0].outputs == [(want.shape, want.dtype.name, want.nbytes)]


def test_a_ufunc_accumulation_of_a_constant_projects_in_a_gradient_step():
    """In a step, of an argument that is not differentiated: its output is a constant."""
    w, x = (XP.asarray(RNG.standard_normal((300, 200))) for _ in range(2))
    assert _sound(lambda w, x: XP.sum(w * np.maximum.accumulate(x)), w, x, argnums=0) > 0.5


def test_a_ufunc_accumulation_with_a_gradient_refuses_naming_it_and_the_way_out():
    a = XP.asarray(RNG.standard_normal((30, 20)))
    with pytest.raises(TypeError, match=r"numpy.maximum.accumulate\(\) .* being differentiated"):
        memory.project(lambda a: XP.sum(np.maximum.accumulate(a)), a)
    with pytest.raises(TypeError, match=r"stop_gradient"):
        pg.grad(lambda a: XP.sum(np.maximum.accumulate(a)))(a)
    with pytest.raises(TypeError, match=r"cannot accumulate on a scalar"):
        memory.project(lambda a: np.maximum.accumulate(a), XP.asarray(1.0), argnums=())


def test_a_ufunc_method_without_a_rule_refuses_naming_it_and_the_way_out():
    a = XP.asarray(RNG.standard_normal((30, 20)))
    with pytest.raises(TypeError, match=r"numpy.maximum.reduceat\(\) cannot be traced") as e:
        memory.project(lambda a: np.maximum.reduceat(a, [0, 3]), a, argnums=())
    assert "pass its result in as an argument" in str(e.value)
    with pytest.raises(TypeError, match=r"numpy.maximum.accumulate\(\) cannot be traced"):
        pg.compile(lambda a: np.maximum.accumulate(a))(a)  # the replay needs a recorded call


def test_a_library_that_converts_its_arguments_refuses_naming_the_way_out():
    """scipy.special.logsumexp without SciPy's array API mode converts its argument with
    ``np.asarray``: a traced array refuses, naming the switch and the way out."""
    special = pytest.importorskip("scipy.special")
    from scipy._lib import _array_api

    if _array_api.SCIPY_ARRAY_API:  # read at SciPy's import: tests/clients set it on
        pytest.skip("SciPy's array API mode is on in this process: logsumexp does not convert")
    a = XP.asarray(RNG.standard_normal((30, 20)))
    with pytest.raises(TypeError, match=r"__array__: this array is traced") as e:
        memory.project(lambda a: special.logsumexp(a), a, argnums=())
    assert "pass its result in as an argument" in str(e.value)


def test_our_logsumexp_projects():
    _sound(lambda a: pg.special.logsumexp(a), XP.asarray(RNG.standard_normal((300, 200))))


@pytest.mark.parametrize("memory_size", [3, 10])
def test_an_lbfgs_step_projects_what_it_runs(memory_size):
    """An L-BFGS step decides on the loss's values (its line search): it projects from one
    evaluation and what the step holds beside it (state, direction, the line search's points);
    steps of one and of several evaluations are measured within it, and within 2x."""

    def loss(p):
        w = p["w"]
        return XP.sum(w**2 + 0.1 * w**4) + XP.sum((p["v"] - 1.0) ** 2)

    solver = optim.lbfgs(loss, memory_size=memory_size)
    params = {
        "w": XP.asarray(RNG.standard_normal(100_000)),
        "v": XP.asarray(RNG.standard_normal((300, 100))),
    }
    state = solver.init(params)
    evals = set()
    for _ in range(4):
        p = memory.project(solver.step, params, state, argnums=())
        m = memory.measure(solver.step, params, state, argnums=())
        assert 0.5 * p.traced_peak_bytes <= m.peak_bytes <= p.traced_peak_bytes
        params, state = solver.step(params, state)
        evals.add(state.last.evals)
    assert max(evals) > 1  # a step whose line search evaluated more than once was measured


# -- found by the official suite through the checking namespace (conformance/memory_checking.py)


@pytest.mark.parametrize(
    "obj",
    [
        [float(i) for i in range(100_000)],
        [[float(i)] * 10 for i in range(20_000)],
        [[[1] * 10] * 10 for _ in range(2_000)],
        [XP.asarray(float(i)) for i in range(20_000)],
    ],
    ids=["flat", "nested", "nested3", "0-d arrays"],
)
def test_asarray_of_python_values_projects_its_array_and_nested_conversion(obj):
    """``xp.asarray(list)`` inside a projected function made an array the projection did not
    see (0 B projected for 8 MB); NumPy's conversion of nested lists holds 32 bytes a list."""
    _sound(lambda o: XP.asarray(o), obj)


def test_asarray_of_a_list_of_traced_arrays_projects():
    a, b = XP.asarray(RNG.standard_normal(100_000)), XP.asarray(RNG.standard_normal(100_000))
    _sound(lambda a, b: XP.asarray([a, b, a]), a, b)
    x = XP.asarray(RNG.standard_normal(3))
    p = memory.project(lambda x: XP.asarray([[x[0], x[1]], [x[2], 1.0]]), x, argnums=())
    assert p.rows[-1].outputs[0][:2] == ((2, 2), "float64")


def test_asarray_of_a_list_holding_differentiated_arrays_refuses():
    """It dropped their gradient silently (0); the way out is stack."""
    x = XP.asarray(RNG.standard_normal(3))
    with pytest.raises(TypeError, match=r"asarray\(\): .*being differentiated.*xp.stack"):
        pg.grad(lambda x: XP.sum(XP.asarray([x[0], x[1]]) ** 2))(x)


def test_searchsorted_of_a_python_scalar_projects():
    a = XP.asarray(np.arange(100_000.0))
    _sound(lambda a: XP.searchsorted(a, 3.5), a)


@pytest.mark.parametrize("fn", ["var", "std"])
@pytest.mark.parametrize(("shape", "axis"), [((100_000, 7), -1), ((7, 100_000), 0)])
def test_var_over_a_short_axis_counts_the_mean_and_its_quotient(fn, shape, axis):
    """NumPy's ``_var`` holds the mean (kept dims) and its quotient, two result-sized arrays:
    over a short axis they were 6-8% over the projection."""
    a = XP.asarray(RNG.standard_normal(shape))
    _sound(lambda a: getattr(XP, fn)(a, axis=axis), a)


def test_sliding_window_sum_projects_numpys_view_not_a_copy():
    """The issue's loose example: 142 MB projected for 3.95 MB measured, as the projection
    gathered the windows that NumPy takes as a strided view when nothing is differentiated.
    Differentiated, the windows are gathered (the gradient of overlapping windows adds up)."""
    from numpy.lib.stride_tricks import sliding_window_view

    a = XP.asarray(RNG.standard_normal((500, 500)))
    r = _sound(lambda a: np.sum(sliding_window_view(a, (8, 8)), axis=(-1, -2)), a)
    assert r > 0.9
    _sound(lambda a: XP.sum(np.var(sliding_window_view(a, 7, axis=1), axis=-1)), a, argnums=0)
    _sound(lambda a: np.max(sliding_window_view(a, (3, 3)), axis=(-1, -2)), a)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("n", "k"), [(388, 41), (294, 37), (1500, 59), (2000, 9)])
def test_convolve_and_correlate_count_their_windows_index(n, k, dtype):
    """NumPy's convolve and correlate gather windows through a host index of n x k positions;
    it was made by a broadcast add that NumPy buffers (135 kB beyond a 127 kB index, which no
    projection sees): 12 % over on a float32 signal of 388 against 41 taps, where the index
    outweighs the signal. Now copied from a strided view (4 kB)."""
    x = XP.asarray(RNG.standard_normal((n, 3)).astype(dtype))
    w = XP.asarray(RNG.standard_normal(k).astype(dtype))
    for mode in ("same", "full", "valid"):
        _sound(lambda x, w, mode=mode: XP.sum(np.convolve(x[:, 0], w, mode=mode) ** 2), x, w)
        _sound(lambda x, w, mode=mode: XP.sum(np.correlate(x[:, 1], w, mode=mode) ** 2), x, w)
    _sound(
        lambda x, w: XP.sum(np.convolve(x[:, 0], w) ** 2), x, w, argnums=(0, 1)
    )  # the gradient step
    from numpy.lib.stride_tricks import sliding_window_view

    _sound(lambda x: XP.sum(sliding_window_view(x[:, 0], k) * 2.0), x, argnums=0)
