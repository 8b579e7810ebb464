"""The public functions of the rows: closures of the eager interpreter's families (no source text
run by ``exec``): real source lines in tracebacks, the spec's signatures, Python's TypeErrors."""

from __future__ import annotations

import inspect
import linecache
import os
import traceback

import numpy as np
import pytest

import pycograd_xp
from pycograd_xp.namespace import REGISTRY

xp = pycograd_xp.namespace(np)
PACKAGE = os.path.dirname(os.path.abspath(pycograd_xp.__file__))


def _public(name: str):
    scope, _, short = name.rpartition(".")
    return getattr(getattr(xp, scope) if scope else xp, short)


def _x(*shape):
    return xp.asarray(np.arange(float(np.prod(shape))).reshape(shape))


# A failing backend call through a function of each signature shape.
FAILING = {
    "one array, keywords": lambda: xp.sum(_x(3), dtype="not a dtype"),
    "one array": lambda: xp.linalg.inv(_x(2, 3)),
    "an array and a plain value": lambda: xp.reshape(_x(3), (2, 2)),
    "two arrays": lambda: xp.matmul(_x(2, 3), _x(2, 3)),
    "three arrays": lambda: xp.where(_x(2) > 0, _x(3), _x(4)),
    "a list": lambda: xp.concat([_x(2, 3), _x(3, 2)], axis=1),
    "no array": lambda: xp.zeros((-1,)),
    "three positional": lambda: xp.linspace(0.0, 1.0, -1),
    "any other": lambda: xp.broadcast_arrays(_x(2), _x(3)),
}


def _frames(err: BaseException) -> list[traceback.FrameSummary]:
    frames, seen = [], set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        frames += traceback.extract_tb(err.__traceback__)
        err = err.__cause__ or err.__context__
    return frames


@pytest.mark.parametrize("shape", list(FAILING))
def test_a_failing_backend_call_shows_real_source_lines(shape):
    with pytest.raises((ValueError, TypeError)) as info:
        FAILING[shape]()
    assert "<pycograd_xp" not in "".join(traceback.format_exception(info.value))
    ours = [f for f in _frames(info.value) if f.filename.startswith(PACKAGE + os.sep)]
    assert ours, "no frame of pycograd_xp in the traceback"
    for f in ours:
        assert os.path.isfile(f.filename)
        assert linecache.getline(f.filename, f.lineno).strip(), (f.filename, f.lineno)
    wrappers = tuple(os.path.join("namespace", m) for m in ("_build.py", "_eager.py", "_lanes.py"))
    assert any(f.filename.endswith(wrappers) for f in ours)


def _plain(sig: inspect.Signature) -> str:
    """The signature without annotations, as the spec writes it."""
    params = [p.replace(annotation=p.empty) for p in sig.parameters.values()]
    return str(sig.replace(parameters=params, return_annotation=sig.empty))


# The spec's signatures of a sample of rows of every signature shape.
SPEC = {
    "sum": "(x, /, *, axis=None, dtype=None, keepdims=False)",
    "linalg.vector_norm": "(x, /, *, axis=None, keepdims=False, ord=2)",
    "fft.rfft": "(x, /, *, n=None, axis=-1, norm='backward')",
    "asarray": "(obj, /, *, dtype=None, device=None, copy=None)",
    "linalg.inv": "(x, /)",
    "matrix_transpose": "(x, /)",
    "reshape": "(x, /, shape, *, copy=None)",
    "astype": "(x, dtype, /, *, copy=True, device=None)",
    "expand_dims": "(x, /, axis)",
    "matmul": "(x1, x2, /)",
    "tensordot": "(x1, x2, /, *, axes=2)",
    "take": "(x, indices, /, *, axis=None)",
    "where": "(condition, x1, x2, /)",
    "concat": "(arrays, /, *, axis=0)",
    "stack": "(arrays, /, *, axis=0)",
    "zeros": "(shape, *, dtype=None, device=None)",
    "fft.fftfreq": "(n, /, *, d=1.0, dtype=None, device=None)",
    "clip": "(x, /, min=None, max=None)",
    "linspace": "(start, stop, /, num, *, dtype=None, device=None, endpoint=True)",
    "arange": "(start, /, stop=None, step=1, *, dtype=None, device=None)",
    "eye": "(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None)",
    "meshgrid": "(*arrays, indexing='xy')",
    "broadcast_arrays": "(*arrays)",
    "diff": "(x, /, *, axis=-1, n=1, prepend=None, append=None)",
    "moveaxis": "(x, source, destination, /)",
}


@pytest.mark.parametrize("name", list(SPEC))
def test_signature_is_the_spec_signature(name):
    assert _plain(inspect.signature(_public(name))) == SPEC[name]


def test_every_general_row_shows_its_row_signature():
    for name, prim in REGISTRY.items():
        if prim.kind == "general":
            assert inspect.signature(_public(name)) == prim.signature, name


# Reference functions with the spec signatures: a wrong call of a public function raises the
# TypeError Python raises for the same call of its reference.
def sum(x, /, *, axis=None, dtype=None, keepdims=False): ...
def inv(x, /): ...
def reshape(x, /, shape, *, copy=None): ...
def astype(x, dtype, /, *, copy=True, device=None): ...
def matmul(x1, x2, /): ...
def tensordot(x1, x2, /, *, axes=2): ...
def where(condition, x1, x2, /): ...
def concat(arrays, /, *, axis=0): ...
def zeros(shape, *, dtype=None, device=None): ...
def clip(x, /, min=None, max=None): ...
def arange(start, /, stop=None, step=1, *, dtype=None, device=None): ...
def meshgrid(*arrays, indexing="xy"): ...


A = _x(2, 3)
WRONG = [
    (sum, xp.sum, (), {}),
    (sum, xp.sum, (A, 0), {}),
    (sum, xp.sum, (A,), {"axes": 0}),
    (sum, xp.sum, (A,), {"x": A}),
    (inv, xp.linalg.inv, (), {}),
    (inv, xp.linalg.inv, (A, A), {}),
    (inv, xp.linalg.inv, (A,), {"upper": True}),
    (reshape, xp.reshape, (A,), {}),
    (reshape, xp.reshape, (A, (6,), None), {}),
    (reshape, xp.reshape, (A, (6,)), {"shape": (6,)}),
    (reshape, xp.reshape, (A, (6,)), {"order": "C"}),
    (astype, xp.astype, (A,), {"dtype": xp.float32}),
    (matmul, xp.matmul, (A,), {}),
    (matmul, xp.matmul, (A, A, A), {}),
    (matmul, xp.matmul, (A, A), {"out": A}),
    (tensordot, xp.tensordot, (A, A), {"axis": 1}),
    (where, xp.where, (A, A), {}),
    (where, xp.where, (A, A, A, A), {}),
    (concat, xp.concat, (), {}),
    (concat, xp.concat, ([A], [A]), {}),
    (concat, xp.concat, ([A],), {"axes": 0}),
    (zeros, xp.zeros, (), {}),
    (zeros, xp.zeros, ((2,), xp.float64), {}),
    (zeros, xp.zeros, ((2,),), {"dtyp": xp.float64}),
    (clip, xp.clip, (A, 0), {"min": 1}),
    (clip, xp.clip, (A, 0, 1, 2), {}),
    (arange, xp.arange, (1, 2, 3, 4), {}),
    (arange, xp.arange, (), {"start": 1}),
    (meshgrid, xp.meshgrid, (A,), {"index": "ij"}),
]


@pytest.mark.parametrize(
    "ref, f, args, kwargs", WRONG, ids=[f"{r.__name__}-{i}" for i, (r, *_) in enumerate(WRONG)]
)
def test_a_wrong_call_raises_pythons_type_error(ref, f, args, kwargs):
    with pytest.raises(TypeError) as expected:
        ref(*args, **kwargs)
    with pytest.raises(TypeError) as got:
        f(*args, **kwargs)
    assert str(got.value) == str(expected.value)


@pytest.mark.parametrize("f", [xp.sort, xp.argsort, xp.unstack, xp.flip, xp.sum])
def test_the_axis_is_checked_by_default_and_when_given(f):
    if f is xp.flip or f is xp.sum:  # default axis None: every axis
        f(xp.asarray(1.0))
    else:  # a default axis (sort's -1) out of range for a 0-d array
        with pytest.raises(pycograd_xp.AxisError, match=rf"{f.__name__}\(\): axis"):
            f(xp.asarray(1.0))
    with pytest.raises(pycograd_xp.AxisError, match=rf"{f.__name__}\(\): axis 2 is out of range"):
        f(_x(2, 3), axis=2)


def test_star_args_with_keywords():
    a, b = _x(2), _x(3)
    assert [g.shape for g in xp.meshgrid(a, b, indexing="ij")] == [(2, 3), (2, 3)]
    assert [g.shape for g in xp.meshgrid(a, b)] == [(3, 2), (3, 2)]
    assert xp.broadcast_shapes((2, 1), (1, 3)) == (2, 3)


PAIRS = [  # the same call, a parameter given by position, then by name
    (lambda v: xp.reshape(v, (3, 2)), lambda v: xp.reshape(v, shape=(3, 2))),
    (lambda v: xp.expand_dims(v, 0), lambda v: xp.expand_dims(v, axis=0)),
    (lambda v: xp.clip(v, None, 2.0), lambda v: xp.clip(v, max=2.0)),
    (lambda v: xp.broadcast_to(v, (2, 2, 3)), lambda v: xp.broadcast_to(v, shape=(2, 2, 3))),
    (lambda v: xp.clip(v, 0.5), lambda v: xp.clip(v, min=0.5)),
]


@pytest.mark.parametrize("pair", range(len(PAIRS)))
def test_a_parameter_by_position_or_by_name_is_the_same_call(pair):
    x = _x(2, 3) * 0.5
    grads = [pycograd_xp.grad(lambda v, c=c: xp.sum(c(v) * c(v)))(x) for c in PAIRS[pair]]
    np.testing.assert_array_equal(np.asarray(grads[0]), np.asarray(grads[1]))
    assert float(xp.sum(grads[0] * grads[0])) > 0


@pytest.fixture
def parts_watched():
    """:mod:`pycograd_xp._parts` keeping the parts for one test (as cubed_plugin asks it)."""
    from pycograd_xp import _parts

    was = _parts.WATCHED[0]
    _parts.WATCHED[0] = True
    yield
    _parts.WATCHED[0] = was


def test_a_backends_labeller_is_told_each_row_and_rule_with_the_part_running(parts_watched):
    """A backend with a ``labeller`` (cubed_plugin's names Cubed's ops so) gets ``mark()``
    before each row's forward call and each VJP rule, and ``label(mark, arrays)`` after it with
    the backend arrays the call made, while :mod:`pycograd_xp._parts` says which loss, row or
    rule is running; without a labeller nothing of it runs."""
    import dataclasses

    from pycograd_xp import _parts
    from pycograd_xp.namespace import build

    calls = []

    class Recorder:
        @staticmethod
        def mark():
            calls.append(("mark", _parts.current()))
            return len(calls)

        @staticmethod
        def label(mark, made):
            made = made if isinstance(made, list | tuple) else [made]  # (slogdet's: a tuple)
            assert all(isinstance(m, np.ndarray | np.generic) or m is None for m in made), made
            calls.append(("label", _parts.current(), mark))

    backend = dataclasses.replace(xp._backend, name="numpy_labelled", labeller=Recorder)
    ns = build(backend)

    def loss(v):
        return ns.sum(ns.tanh(v))

    g = pycograd_xp.grad(loss)(ns.asarray([0.5, -1.0]))
    np.testing.assert_allclose(np.asarray(g), 1 - np.tanh([0.5, -1.0]) ** 2)
    parts = [p for kind, p, *_ in calls if kind == "label"]
    assert parts == [
        (("row", "asarray"),),  # the argument, made before grad's call
        (("loss", "loss"), ("row", "tanh")),
        (("loss", "loss"), ("row", "sum")),
        (("loss", "loss"), ("backward", ""), ("rule", "sum")),
        (("loss", "loss"), ("backward", ""), ("rule", "tanh")),
    ], parts
    marks = [c for c in calls if c[0] == "mark"]
    assert [m[1] for m in marks] == parts  # each mark in the same part as its label
    assert _parts.current() == ()  # left as it was found
    # a backward through a multi-output row (its outputs' parts gathered between rules)
    a = ns.asarray([[2.0, 0.5], [0.5, 1.0]])
    calls.clear()

    def logdet(m):
        return ns.linalg.slogdet(m)[1]

    pycograd_xp.grad(logdet)(a)
    backward = (("loss", "logdet"), ("backward", ""))
    assert (*backward, ("rule", "linalg.slogdet")) in [c[1] for c in calls], calls
    assert all(c[1][:2] == backward for c in calls if len(c[1]) > 2), calls
    assert _parts.current() == ()
    leaf = ns.asarray([[2.0, 0.5], [0.5, 1.0]])
    leaf.requires_grad_()
    logdet(leaf).backward()  # PyTorch's way: the tape's backward pass alone
    assert _parts.current() == ()
    # an error inside grad leaves the stack as it was
    calls.clear()
    with pytest.raises(TypeError):
        pycograd_xp.grad(lambda v: ns.sum(ns.tanh(v)))(ns.asarray([1, 2]))
    assert _parts.current() == ()
    # a namespace without a labeller tells nothing
    calls.clear()
    pycograd_xp.grad(lambda v: xp.sum(xp.tanh(v)))(xp.asarray([0.5]))
    assert calls == []


def test_the_row_says_which_arguments_hold_arrays():
    """``Primitive.arrays`` comes from the impl's annotations (``Array``, ``Arrays``), not from
    parameter names: a plain value named like an array stays plain, and the other way round."""
    assert REGISTRY["clip"].arrays == {"x", "min", "max"}
    assert REGISTRY["reshape"].arrays == {"x"}
    assert REGISTRY["concat"].arrays == REGISTRY["concat"].lists == {"arrays"}
    assert REGISTRY["_einsum"].arrays == {"operands"}  # not the subscripts
    assert REGISTRY["can_cast"].arrays == {"from_"}  # ``to`` is a dtype
    assert REGISTRY["broadcast_shapes"].arrays == frozenset()  # *shapes: tuples
    assert REGISTRY["tanh"].arrays == {"x"} and REGISTRY["add"].arrays == {"x1", "x2"}


def test_each_family_picks_the_rows_of_its_signature():
    from pycograd_xp.namespace._eager import family
    from pycograd_xp.namespace._signature import Params

    expect = {
        "tanh": "unary",
        "linalg.inv": "unary",
        "add": "binary",
        "matmul": "binary",
        "where": "ternary",
        "sum": "one_array",
        "reshape": "one_array",
        "astype": "one_array",
        "concat": "generic",
        "clip": "generic",
        "zeros": "generic",
        "moveaxis": "generic",
        "take": "generic",
    }
    assert {n: family(REGISTRY[n], Params(REGISTRY[n])) for n in expect} == expect


B = _x(2, 3) * 0.25
# calls of every fast lane: the common ones (evaluated by the lane) and others (handed to the
# generic function); a lane and its row's generic function answer each the same
LANE_CALLS = [
    ("tanh", (B,), {}),
    ("tanh", (0.5,), {}),
    ("tanh", (xp.asarray([1, 2]),), {}),  # an integer array: the row's dtype error
    ("add", (B, B), {}),
    ("add", (B, 2.0), {}),
    ("add", (2.0, B), {}),
    ("add", (B, _x(4)), {}),  # shapes that do not broadcast: the backend's error, restated
    ("add", (1.0, 2.0), {}),
    ("add", (B, np.ones(3)), {}),
    ("matmul", (B, B.T), {}),
    ("matmul", (B, B), {}),
    ("where", (B > 0.5, B, -B), {}),
    ("where", (B > 0.5, B, 0.0), {}),
    ("sum", (B,), {"axis": 0}),
    ("sum", (B,), {"axis": 2}),
    ("sum", (B, 0), {}),
    ("reshape", (B, (3, 2)), {}),
    ("reshape", (B,), {"shape": (6,)}),
    ("reshape", (B, (4,)), {}),
    ("astype", (B, xp.float32), {}),
]


def _outcome(f, args, kwargs):
    try:
        r = f(*args, **kwargs)
    except Exception as e:  # the error, as the caller sees it
        return type(e), str(e)
    return np.asarray(r).dtype, np.asarray(r).tolist()


@pytest.mark.parametrize("name, args, kwargs", LANE_CALLS)
def test_a_fast_lane_answers_as_its_generic_function(name, args, kwargs):
    f = _public(name)
    assert f._generic is not f, name  # the row has a lane
    assert _outcome(f, args, kwargs) == _outcome(f._generic, args, kwargs)


@pytest.mark.parametrize("name", ["tanh", "add", "matmul", "where", "sum", "reshape"])
def test_a_fast_lane_records_as_its_generic_function(name):
    args = {
        "tanh": (B,),
        "add": (B, B * B),
        "matmul": (B, B.T),
        "where": (B > 0.5, B, B * B),
        "sum": (B,),
        "reshape": (B, (6,)),
    }[name]
    f = _public(name)
    grads = [
        np.asarray(
            pycograd_xp.grad(lambda v, g=g: xp.sum(g(*(v if a is B else a for a in args)) ** 2))(B)
        )
        for g in (f, f._generic)
    ]
    np.testing.assert_array_equal(grads[0], grads[1])
    assert np.abs(grads[0]).sum() > 0


def _kept(v):
    """What a node keeps for one argument, comparable across two nodes: a backend array by
    identity, a shape-and-dtype record by its fields, anything else as it is."""
    if isinstance(v, np.ndarray):
        return ("array", id(v))
    if type(v).__name__ == "ShapeDtype":
        return ("spec", tuple(v.shape), v.dtype, v.chunks)
    return v


@pytest.mark.parametrize(
    "name, args, kwargs",
    [
        ("matmul", (B, B.T), {}),
        ("matmul", ("C", B), {}),  # an untracked operand: saved, its buffer protected
        ("_relu", (B,), {}),
        ("sum", (B,), {"axis": 0}),
        ("mean", (B,), {}),
        ("reshape", (B, (6,)), {}),
        ("permute_dims", (B, (1, 0)), {}),
    ],
)
def test_a_fast_lane_keeps_on_the_tape_what_its_generic_function_keeps(name, args, kwargs):
    """The lanes' recorders (general rows: namespace/_record.general_recorder and
    one_array_recorder) make the node record() makes: the same row, parents, saved arrays,
    shapes kept for the others, keywords and output."""
    f = _public(name)
    assert f._generic is not f, name
    constant = _x(3, 2)
    seen = []

    def loss(v):
        call = tuple(v if a is B else constant if isinstance(a, str) else a for a in args)
        outs = [g(*call, **kwargs) for g in (f, f._generic)]
        lane, generic = (o._node for o in outs)
        seen.append(lane.prim.name)
        assert lane.prim is generic.prim and lane.kind == generic.kind
        assert [(p, id(n)) for p, n in lane.parents] == [(p, id(n)) for p, n in generic.parents]
        assert [_kept(a) for a in lane.args] == [_kept(a) for a in generic.args]
        assert {k: _kept(a) for k, a in lane.kwargs.items()} == {
            k: _kept(a) for k, a in generic.kwargs.items()
        }
        assert (lane.saved or {}).keys() == (generic.saved or {}).keys()
        assert all(lane.saved[k] is generic.saved[k] for k in lane.saved or {})
        assert (lane.out is None) == (generic.out is None)
        return xp.sum(outs[0] * outs[1])

    g = pycograd_xp.grad(loss)(B)
    assert seen == [name] and np.all(np.isfinite(np.asarray(g)))


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: xp.sin(1), TypeError, r"sin\(\): got an array of dtype int64"),
        (lambda: xp.tanh("a"), TypeError, r"tanh\(\): expected an array, got str"),
        (lambda: xp.add(B, "a"), TypeError, r"add\(\): expected an array or a Python scalar"),
        (lambda: xp.add(1.0, 2.0), TypeError, r"add\(\): at least one argument must be an array"),
        (lambda: xp.matmul(B, np.ones((3, 2))), TypeError, r"matmul\(\): got a numpy.ndarray"),
        (lambda: xp.where(B > 0, B, np.ones(3)), TypeError, r"where\(\): got a numpy.ndarray"),
    ],
)
def test_the_generic_function_keeps_each_kind_of_rows_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()
