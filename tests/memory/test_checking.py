"""The checking namespace (``conformance/memory_checking.py``) driven by hypothesis's own Array API
strategies (``hypothesis.extra.array_api``) for the standard's functions' signatures: a second
oracle for the memory rules that CI can run without the official suite (which needs a
checkout: ``python -m conformance.run_official memory``).

Each function gets arrays of the dtypes its row takes, in shapes of up to three axes, with the
other arguments its signature has (axes, keepdims, shifts, a second broadcastable operand).
Every call is projected and measured; one measured above its projection, or short in its own
bytes beyond the sharp check's slack, fails naming the function and its arguments. A call the
function refuses (a dtype, an axis out of range) is rejected and drawn again. The default run
takes a fixed sample of functions with a few examples each; ``-m slow`` takes every function.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st
from hypothesis.extra.array_api import make_strategies_namespace

from conformance.memory_checking import TALLY, OverProjectionError, checking_namespace
from pycograd_xp.ops import REGISTRY

XP = checking_namespace(np)
XPS = make_strategies_namespace(XP, api_version="2024.12")
SHAPES = XPS.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=12)

DTYPES = {
    "all": XPS.scalar_dtypes(),
    None: XPS.scalar_dtypes(),
    "boolean": XPS.boolean_dtypes(),
    "complex floating-point": XPS.complex_dtypes(),
    "floating-point": XPS.floating_dtypes() | XPS.complex_dtypes(),
    "integer": XPS.integer_dtypes() | XPS.unsigned_integer_dtypes(),
    "integer or boolean": XPS.integer_dtypes() | XPS.boolean_dtypes(),
    "numeric": XPS.numeric_dtypes(),
    "real floating-point": XPS.floating_dtypes(),
    "real numeric": XPS.real_dtypes(),
}


def _dtypes(name: str) -> st.SearchStrategy:
    return DTYPES[REGISTRY[name].dtypes]


def _array(draw: Any, name: str, shape: Any = SHAPES, dtype: Any = None) -> Any:
    return draw(XPS.arrays(dtype=dtype if dtype is not None else _dtypes(name), shape=shape))


def _axis(draw: Any, x: Any, none: bool = True) -> Any:
    choices = list(range(-x.ndim, x.ndim)) + ([None] if none else [])
    return draw(st.sampled_from(choices)) if choices else None


# -- the signatures: name -> draw(name) gives (args, kwargs) --------------------------------------


def _unary(draw: Any, name: str) -> tuple[tuple, dict]:
    return (_array(draw, name),), {}


def _binary(draw: Any, name: str) -> tuple[tuple, dict]:
    shapes = draw(XPS.mutually_broadcastable_shapes(2, max_dims=3, max_side=12))
    dtype = draw(_dtypes(name))
    return (
        _array(draw, name, shapes.input_shapes[0], dtype),
        _array(draw, name, shapes.input_shapes[1], dtype),
    ), {}


def _reduction(draw: Any, name: str) -> tuple[tuple, dict]:
    x = _array(draw, name)
    return (x,), {"axis": _axis(draw, x), "keepdims": draw(st.booleans())}


def _along(draw: Any, name: str) -> tuple[tuple, dict]:
    x = _array(draw, name, XPS.array_shapes(min_dims=1, max_dims=3, max_side=12))
    return (x,), {"axis": _axis(draw, x, none=False)}


def _argreduction(draw: Any, name: str) -> tuple[tuple, dict]:
    x = _array(draw, name, XPS.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=12))
    return (x,), {"axis": _axis(draw, x), "keepdims": draw(st.booleans())}


def _matrices(draw: Any, name: str, square: bool = True) -> tuple[tuple, dict]:
    n = draw(st.integers(1, 8))
    m = n if square else draw(st.integers(1, 8))
    batch = draw(st.sampled_from([(), (2,)]))
    dtype = draw(_dtypes(name))
    # finite and bounded: well-posed solves, and LAPACK's complex SVD (zgesdd) loops forever
    # on a non-finite element (the bounds of a real dtype do not reach a complex one's parts)
    kind = np.dtype(dtype).kind
    elements = (
        {"min_value": -4, "max_value": 4, "allow_nan": False}
        if kind == "f"
        else st.complex_numbers(
            max_magnitude=4,
            allow_nan=False,
            allow_infinity=False,
            width=8 * np.dtype(dtype).itemsize,
        )
        if kind == "c"
        else None
    )
    x = draw(XPS.arrays(dtype=dtype, shape=(*batch, n, m), elements=elements))
    if name == "linalg.matrix_power":
        return (x, draw(st.integers(-2, 3))), {}
    return (x,), {}


def _special(draw: Any, name: str) -> tuple[tuple, dict]:
    """The functions whose other arguments are of their own."""
    x = _array(draw, name)
    if name in ("flip",):
        return (x,), {"axis": _axis(draw, x)}
    if name == "roll":
        return (x,), {"shift": draw(st.integers(-5, 5)), "axis": _axis(draw, x)}
    if name == "expand_dims":
        return (x,), {"axis": draw(st.integers(-x.ndim - 1, x.ndim))}
    if name == "reshape":
        return (x, (-1,)), {}
    if name == "permute_dims":
        return (x, tuple(draw(st.permutations(range(x.ndim))))), {}
    if name == "moveaxis":
        return (x, _axis(draw, x, none=False), _axis(draw, x, none=False)), {}
    if name == "tile":
        return (x, tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=3)))), {}
    if name == "repeat":
        return (x, draw(st.integers(0, 3))), {"axis": _axis(draw, x)}
    if name == "astype":
        return (x, draw(XPS.scalar_dtypes())), {}
    if name == "clip":
        return (x,), {"min": draw(st.sampled_from([None, 0])), "max": draw(st.just(None))}
    if name in ("concat", "stack"):
        return ([x, x],), {"axis": _axis(draw, x, none=name == "concat")}
    if name == "broadcast_to":
        return (x, (2, *x.shape)), {}
    if name in ("zeros_like", "ones_like", "empty_like"):
        return (x,), {}
    if name == "full_like":
        return (x, 1), {}
    if name in ("matrix_transpose", "tril", "triu"):
        return _matrices(draw, name, square=False)
    if name in ("matmul", "vecdot", "tensordot"):
        (a,), _ = _matrices(draw, name, square=True)
        return (a, a), {} if name != "vecdot" else {"axis": -1}
    if name in ("nonzero",):
        return (x,), {}
    if name == "where":
        return (x != 0, x, x), {}
    if name == "take":
        y = _array(draw, name, XPS.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=8))
        axis = _axis(draw, y, none=False)
        return (y, XP.asarray([0, y.shape[axis] - 1])), {"axis": axis}
    if name == "diff":
        y = _array(draw, name, XPS.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=8))
        return (y,), {"axis": _axis(draw, y, none=False)}
    if name == "searchsorted":
        y = XP.sort(_array(draw, name, XPS.array_shapes(min_dims=1, max_dims=1, max_side=12)))
        return (y, _array(draw, name, dtype=y.dtype)), {}
    return (x,), {}


UNARY = [n for n, p in REGISTRY.items() if p.kind == "unary"]
BINARY = [n for n, p in REGISTRY.items() if p.kind == "binary"]
SIGNATURES: dict[str, Callable[[Any, str], tuple[tuple, dict]]] = {
    **dict.fromkeys(UNARY, _unary),
    **dict.fromkeys(BINARY, _binary),
    **dict.fromkeys(["sum", "prod", "mean", "max", "min", "std", "var", "all", "any"], _reduction),
    **dict.fromkeys(["count_nonzero"], _reduction),
    **dict.fromkeys(["argmax", "argmin"], _argreduction),
    **dict.fromkeys(["cumulative_sum", "cumulative_prod", "sort", "argsort"], _along),
    **dict.fromkeys(["unique_all", "unique_counts", "unique_inverse", "unique_values"], _unary),
    **dict.fromkeys(
        ["linalg.inv", "linalg.det", "linalg.slogdet", "linalg.matrix_power", "linalg.trace"],
        _matrices,
    ),
    **dict.fromkeys(
        ["linalg.svdvals", "linalg.qr", "linalg.pinv", "linalg.matrix_rank"], _matrices
    ),
    **dict.fromkeys(
        [
            "flip",
            "roll",
            "expand_dims",
            "reshape",
            "permute_dims",
            "moveaxis",
            "tile",
            "repeat",
            "astype",
            "clip",
            "concat",
            "stack",
            "broadcast_to",
            "zeros_like",
            "ones_like",
            "empty_like",
            "full_like",
            "matrix_transpose",
            "tril",
            "triu",
            "matmul",
            "vecdot",
            "tensordot",
            "nonzero",
            "where",
            "take",
            "diff",
            "searchsorted",
        ],
        _special,
    ),
}


def _function(name: str) -> Callable[..., Any]:
    scope, _, short = name.rpartition(".")
    return getattr(getattr(XP, scope) if scope else XP, short)


def _run(name: str, examples: int) -> None:
    draw_args = SIGNATURES[name]
    before = len(TALLY.checked)

    @settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.data())
    def check(data: Any) -> None:
        args, kwargs = data.draw(st.composite(lambda draw: draw_args(draw, name))())
        try:
            with np.errstate(all="ignore"):
                _function(name)(*args, **kwargs)
        except OverProjectionError:
            raise
        except (TypeError, ValueError, IndexError, NotImplementedError, np.linalg.LinAlgError):
            reject()  # the function refuses these arguments: drawn again

    check()
    assert len(TALLY.checked) > before, f"{name}: no call was checked"


SAMPLE = sorted(random.Random(33).sample(sorted(SIGNATURES), 24))


def test_the_signatures_cover_the_standards_elementwise_functions():
    assert set(UNARY) | set(BINARY) <= set(SIGNATURES)


@pytest.mark.parametrize("name", SAMPLE)
def test_a_sample_of_functions_is_never_over_its_projection(name):
    _run(name, examples=5)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_every_function_is_never_over_its_projection(name):
    _run(name, examples=40)


def test_a_call_over_its_projection_fails_naming_it():
    """The check can fail: an array plain NumPy makes inside a call is not in its projection."""
    from conformance.memory_checking import check_call

    x = XP.asarray(np.ones(3))
    with pytest.raises(OverProjectionError, match=r"hidden\(float64\[3\]\): measured \d+ bytes > "):
        check_call("hidden", lambda a: (np.ones(1_000_000), a)[1] + 1, (x,), {})
