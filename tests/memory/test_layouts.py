"""The abstract arrays' layout flags against NumPy's own: a basic index's view is contiguous
exactly where NumPy's is (``ops._rules.keys.one_block``), and ``concat``/``stack`` of slices
of arrays in C order give a result in C order, so that a reshape of it is a view, as in NumPy
(the CNN's weight gradient stacks nine shifted slices and reshapes them: the projection counted
a second copy, docs/calibration.md#joined-copies). Each tightening is checked against measured
peaks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pycograd_xp as pg
from pycograd_xp import memory
from pycograd_xp._abstract import ABSTRACT, AbstractArray
from pycograd_xp.ops._rules.keys import one_block

XP = pg.namespace(np)


@st.composite
def _basic_keys(draw):
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=4)))
    key = []
    for n in shape[: draw(st.integers(0, len(shape)))]:
        kind = draw(st.sampled_from(["int", "all", "slice"]))
        if kind == "int":
            key.append(draw(st.integers(-n, n - 1)))
        elif kind == "all":
            key.append(slice(None))
        else:
            key.append(
                slice(
                    draw(st.integers(-n - 1, n + 1)),
                    draw(st.integers(-n - 1, n + 1)),
                    draw(st.sampled_from([1, 1, 2, -1])),
                )
            )
    if draw(st.booleans()):
        key.insert(draw(st.integers(0, len(key))), None)
    return shape, tuple(key)


@settings(max_examples=400, deadline=None)
@given(_basic_keys())
def test_a_basic_index_is_contiguous_exactly_where_numpys_is(shape_key):
    shape, key = shape_key
    v = np.zeros(shape)[key]
    if v.size:
        assert one_block(shape, key) == v.flags.c_contiguous, (shape, key)
    a = AbstractArray(shape, "f8")[key]
    assert a.shape == v.shape
    assert a.ordered  # a basic index keeps the axes' order


def _reshaped_stack(parts):
    s = ABSTRACT.stack(parts, axis=2)
    return s, ABSTRACT.reshape(s, (s.shape[0], -1))


def test_a_stack_of_gapped_slices_is_in_c_order_and_reshapes_to_a_view():
    x = ABSTRACT.zeros((4, 3, 10, 10), dtype=ABSTRACT.float32)
    parts = [x[:, :, i : i + 8, j : j + 8] for i in range(3) for j in range(3)]
    assert not any(p.contiguous for p in parts) and all(p.ordered for p in parts)
    s, r = _reshaped_stack(parts)
    assert s.contiguous and r.base is s  # a view: NumPy's too
    real = np.stack([np.zeros((4, 3, 8, 8))] * 2, axis=2)
    assert real.flags.c_contiguous and np.shares_memory(real, real.reshape(4, -1))
    flipped = [ABSTRACT.flip(p, axis=2) for p in parts]
    assert _reshaped_stack(flipped)[0].contiguous


def test_a_stack_of_transposed_arrays_is_not_in_c_order():
    t = ABSTRACT.permute_dims(ABSTRACT.zeros((10, 10, 3, 4), dtype=ABSTRACT.float32), (3, 2, 1, 0))
    parts = [t[:, :, i : i + 8, :8] for i in range(3)]
    assert not any(p.ordered for p in parts)
    s, r = _reshaped_stack(parts)
    assert not s.contiguous and r.base is None  # a copy: NumPy lays the stack out transposed
    real = np.stack([np.zeros((10, 10, 3, 4)).T[:, :, :8, :8]] * 2, axis=2)
    assert not real.flags.c_contiguous


@pytest.mark.parametrize("layout", ["gapped", "flipped", "transposed", "mixed"])
def test_stacked_then_reshaped_measured_within_projected(layout):
    """The tightened projection still bounds the measured peak, and counts one copy where
    the inputs are slices of an array in C order (two where they are transposed)."""
    base = np.random.default_rng(0).standard_normal((16, 8, 40, 40))
    if layout == "transposed":
        base = np.ascontiguousarray(base.transpose(3, 2, 1, 0)).transpose(3, 2, 1, 0)

    def f(x):
        parts = [x[:, :, i : i + 38, j : j + 38] for i in range(3) for j in range(3)]
        if layout == "flipped":
            parts = [XP.flip(p, axis=-1) for p in parts]
        if layout == "mixed":
            parts[0] = XP.matrix_transpose(parts[0])
        s = XP.stack(parts, axis=2)
        return XP.sum(XP.reshape(s, (s.shape[0], -1)) ** 2)

    x = XP.asarray(base)
    p = memory.project(f, x)
    m = memory.measure(f, x)
    assert m.peak_bytes <= p.peak_bytes, (m, p)
    stacked = 16 * 8 * 9 * 38 * 38 * 8
    copies = 2 if layout in ("transposed", "mixed") else 1
    # the step's forward: the stack, (a second copy: the reshape), the square
    assert p.forward_peak_bytes - p.argument_bytes < (copies + 1) * stacked + 2**20, (layout, p)
    assert p.forward_peak_bytes - p.argument_bytes >= (copies + 1) * stacked, (layout, p)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(1, 4), min_size=1, max_size=4),
    st.randoms(use_true_random=False),
)
def test_a_reshape_that_only_adds_or_drops_unit_axes_is_a_view_whatever_the_layout(dims, r):
    """NumPy reshapes a permuted (or otherwise strided) array into a view when only axes of
    length 1 come or go; the model did too little (a copy: an array in C order for the model,
    a strided view for NumPy, which a compiled replay's next reshape without a copy then
    refused). Any permutation, any insertion or removal of unit axes."""
    shape = tuple(dims)
    perm = list(range(len(shape)))
    r.shuffle(perm)
    real = np.permute_dims(np.zeros(shape), perm)
    kept = [s for s in real.shape if s != 1]
    target = []
    for s in kept:
        target += [1] * r.randint(0, 1) + [s]
    target += [1] * r.randint(0, 1)
    a = ABSTRACT.permute_dims(ABSTRACT.zeros(shape, dtype=ABSTRACT.float64), tuple(perm))
    v = ABSTRACT.reshape(a, tuple(target))
    assert np.shares_memory(np.reshape(real, tuple(target), copy=None), real)
    assert v.base is not None and v.base is a.base  # a view, no bytes
    if not real.flags.c_contiguous:
        assert not v.contiguous  # still strided for what follows


# -- every row's claim of C order against NumPy's result ------------------------------------------
# A row whose result the model calls "in C order" where NumPy's is not (order K: a reduction, a
# transform, a normalisation of an array in Fortran order; einsum's iterator whatever the
# operands) lets the next call be projected too low: an elementwise op of it and an array in C
# order buffers it (measured 45 kB over after np.diff, 36 kB after einsum, in the step of
# np.einsum("ij,jk,ik->i", x, w, x) with x in Fortran order), a reshape of it copies.


def _abstract_outputs(f, args):
    """The abstract arrays ``f`` returns for arguments like ``args`` (their layouts kept)."""
    from pycograd_xp.memory._project import _tracked, abstract_namespace

    A, got = abstract_namespace(), []

    def call(*a):
        got.extend(leaf._data for leaf in pg.tree_leaves(f(A)(*a)) if hasattr(leaf, "_data"))

    _tracked(call, A, tuple(args), {})
    return got


def _claims_too_much(f, arrays):
    """Outputs of ``f`` on ``arrays`` the model calls in C order where NumPy's are not."""
    args = [XP.asarray(a) for a in arrays]
    with np.errstate(all="ignore"):
        real = [pg.unwrap(v) for v in pg.tree_leaves(f(XP)(*args)) if hasattr(v, "_data")]
    model = _abstract_outputs(f, args)
    assert len(model) == len(real)
    return [
        (r.shape, r.strides)
        for r, a in zip(real, model, strict=True)
        if isinstance(a, AbstractArray) and a.contiguous and r.size > 1 and not r.flags.c_contiguous
    ]


def _layout_cases():
    from test_conformance import CASES

    return [pytest.param(c, id=f"{c.row}-{c.label}") for c in CASES]


@pytest.mark.parametrize("case", _layout_cases())
def test_a_row_claims_c_order_only_where_numpys_result_is_in_c_order(case):
    """Every memory case of every row (tests/memory/test_conformance.py), its arguments in each
    layout that conformance measures: where the model says the result is in C order, NumPy's
    is."""
    from test_conformance import _layout

    wrong = []
    for lay in ("C", "F", "T", "reversed", "rows", "broadcast"):
        arrays = [_layout(a, lay, j == 0) for j, a in enumerate(case.args)]
        if lay != "C" and all(a.flags.c_contiguous for a in arrays):
            continue
        try:
            with np.errstate(all="ignore"):
                case.f(XP)(*[XP.asarray(a) for a in arrays])
        except Exception:
            continue  # the row refuses this layout's arguments (a broadcast view written into)
        wrong += [(lay, *w) for w in _claims_too_much(case.f, arrays)]
    assert not wrong, f"{case.row} [{case.label}]: C order claimed for {wrong}"


def _along(name, axis, keepdims):
    """A reduction, a scan or a reordering of a 3-d array along ``axis`` (a 2-d result in
    whichever order NumPy lays it out: the cases' 2-d arguments reduce to one axis)."""

    def f(ns):
        def g(x):
            if name in ("any", "all"):
                return getattr(ns, name)(x > 0, axis=axis, keepdims=keepdims)
            if name in ("argmax", "argmin", "cumulative_sum", "sort", "argsort", "roll"):
                if name == "roll":
                    return ns.roll(x, 1, axis=axis)
                if name in ("argmax", "argmin"):
                    return getattr(ns, name)(x, axis=axis, keepdims=keepdims)
                if name == "cumulative_sum":
                    return ns.cumulative_sum(x, axis=axis, include_initial=True)
                return getattr(ns, name)(x, axis=axis)
            if name == "logsumexp":
                return ns.log(ns.sum(ns.exp(x), axis=axis, keepdims=keepdims))
            return getattr(ns, name)(x, axis=axis, keepdims=keepdims)

        return g

    return f


_ALONG = [
    (name, axis, keepdims)
    for name in ("sum", "prod", "max", "mean", "var", "any", "count_nonzero", "logsumexp")
    for axis in (0, 1, 2, (0, 2))
    for keepdims in (False, True)
] + [
    (name, axis, False)
    for name in ("argmax", "cumulative_sum", "sort", "argsort", "roll")
    for axis in (0, 1, 2)
]


@pytest.mark.parametrize(("name", "axis", "keepdims"), _ALONG)
def test_a_reduction_of_a_3d_array_claims_c_order_only_where_numpys_is(name, axis, keepdims):
    base = np.random.default_rng(0).standard_normal((3, 4, 5))
    from test_conformance import _layout

    for lay in ("C", "F", "T", "reversed", "rows", "broadcast"):
        wrong = _claims_too_much(_along(name, axis, keepdims), [_layout(base, lay, True)])
        assert not wrong, (name, axis, keepdims, lay, wrong)


@pytest.mark.parametrize(
    "make",
    [
        lambda x: XP.sum(x, axis=0),
        lambda x: np.diff(x, axis=1),
        lambda x: np.einsum("ijk->jk", x),
        lambda x: XP.fft.rfft(x, axis=0),
        lambda x: XP.cumulative_sum(x, axis=1, include_initial=True),
        lambda x: pg.nn.layer_norm(x, axis=-1),
        lambda x: pg.nn.relu(x),
    ],
    ids=["sum", "diff", "einsum", "rfft", "cumulative_sum", "layer_norm", "relu"],
)
def test_a_result_in_fortran_order_beside_one_in_c_order_is_within_its_projection(make):
    """What the claims are for: the result of such a row, added to an array in C order of its
    shape (NumPy buffers the one not in C order), as it is and as a gradient step."""
    rng = np.random.default_rng(1)
    x = XP.asarray(np.asfortranarray(rng.standard_normal((40, 50, 60))))
    shape = make(x).shape
    c = XP.asarray(rng.standard_normal(shape))

    def f(x, c):
        return XP.sum(XP.real(make(x) + c) ** 2)

    for argnums in ((), (0, 1)):
        p = memory.project(f, x, c, argnums=argnums)
        f(x, c) if argnums == () else pg.value_and_grad(f, argnums)(x, c)  # warm-up
        m = memory.measure(f, x, c, argnums=argnums)
        assert m.peak_bytes <= p.traced_peak_bytes, (argnums, m, p)
