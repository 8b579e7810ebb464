"""The checking namespace (``conformance/memory_checking.py``) driven by hypothesis's own Array API
strategies (``hypothesis.extra.array_api``) for the standard's functions' signatures
(``checking_signatures.py``): a second oracle for the memory rules that CI can run without the
official suite (which needs a checkout: ``python -m conformance.run_official memory``).

Each function gets arrays of the dtypes its row takes, in shapes of up to three axes (0- and
1-long sides among them) and drawn layouts (Fortran order, transposed, reversed, strided,
broadcast), with the other arguments its signature has. Two modes: the call as it is, and
(where the row is differentiable) the ``value_and_grad`` step of the sum of its floating outputs
with respect to every floating argument. Every call is projected and measured; one measured
above its projection (or, as it is, short in its own bytes beyond the sharp check's slack)
fails naming the function and its arguments. A call the function refuses (a dtype, an axis out
of range) is rejected and drawn again. The default run takes a fixed sample of functions and
modes with a few examples each; ``-m slow`` takes every function in every mode.
"""

from __future__ import annotations

import random
import types
from typing import Any

import numpy as np
import pytest
from checking_signatures import SIGNATURES, XP, draw_call, function, row
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

import pycograd_xp as pg
from conformance.memory_checking import NO_ARRAY, TALLY, OverProjectionError, check_step
from pycograd_xp.namespace._array import make

PLAIN = pg.namespace(np)
MODES = ("as is", "step")
REFUSED = (
    TypeError,
    ValueError,
    IndexError,
    OverflowError,
    NotImplementedError,
    np.linalg.LinAlgError,
)


def _plain(name: str) -> Any:
    scope, _, short = name.rpartition(".")
    return getattr(getattr(PLAIN, scope) if scope else PLAIN, short)


# differentiable rows whose step refuses every drawn call
NO_STEP = {"linalg.eig": "its eigenvectors' gradient is not implemented (linalg.eigvals' is)"}


def _differentiable(name: str) -> bool:
    return not row(name).nondiff and name not in NO_STEP


def _run(name: str, examples: int, mode: str = "as is") -> None:
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
        args, kwargs = data.draw(st.composite(lambda draw: draw_call(draw, name))())
        try:
            with np.errstate(all="ignore"):
                if mode == "as is":
                    function(name)(*args, **kwargs)
                elif not check_step(name, _plain(name), args, kwargs):
                    reject()  # nothing floating to differentiate
        except OverProjectionError:
            raise
        except REFUSED:
            reject()  # the function refuses these arguments: drawn again

    check()
    assert len(TALLY.checked) > before, f"{name} ({mode}): no call was checked"


COMBOS = [(n, "as is") for n in sorted(SIGNATURES)] + [
    (n, "step") for n in sorted(SIGNATURES) if _differentiable(n)
]
SAMPLE = sorted(random.Random(33).sample(COMBOS, 24))


# the functions of the namespace that return no array of their own, or take none to check
UNDRAWN = {"Array", "from_dlpack", "broadcast_shapes"}


def test_the_signatures_cover_the_namespaces_functions():
    """Every function of the checking namespace that returns arrays (``linalg`` and ``fft``
    included) has a signature: a new function needs one."""
    names = set()
    for attr in dir(XP):
        value = getattr(XP, attr)
        if isinstance(value, types.ModuleType):
            names |= {
                f"{attr}.{a}"
                for a in dir(value)
                if not a.startswith("_") and _is_function(getattr(value, a))
            }
        elif _is_function(value) and not attr.startswith("_"):
            names.add(attr)
    missing = sorted(names - set(SIGNATURES) - UNDRAWN - NO_ARRAY)
    assert missing == [], f"functions with no signature: {missing}"


def _is_function(v: Any) -> bool:
    return isinstance(v, types.FunctionType) and not v.__name__.startswith("_")


@pytest.mark.parametrize(("name", "mode"), SAMPLE)
def test_a_sample_of_functions_is_never_over_its_projection(name, mode):
    _run(name, examples=3, mode=mode)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "mode"), COMBOS)
def test_every_function_is_never_over_its_projection(name, mode):
    _run(name, examples=25, mode=mode)


def _found(shape: tuple[int, ...], dtype: str, layout: str = "C") -> Any:
    a = (np.arange(int(np.prod(shape))) % 7).reshape(shape).astype(dtype)
    return XP.asarray(a) if layout == "C" else make(type(XP.asarray(a)), a.T.copy().T)


# calls the hypothesis check found over their projections, kept in the default run
FOUND = [
    # NumPy's accumulate casts its whole input first (measured 1.46x the projection)
    ("cumulative_sum", ((192, 192), "int8"), None, {"axis": 0}),
    ("cumulative_prod", ((192, 192), "int8", "T"), None, {"axis": 1}),
    ("cumulative_sum", ((192, 192), "float32"), None, {"axis": 1, "dtype": np.float64}),
    ("cumulative_sum", ((192, 192), "float64"), None, {"axis": 0, "dtype": np.float32}),
    # cross along another axis than the last: NumPy's ufuncs buffer the strided components
    ("linalg.cross", ((64, 64, 3, 2), "float64"), ((3, 2), "float64"), {"axis": -2}),
    ("linalg.cross", ((1, 3, 2), "complex128"), ((20, 20, 3, 2), "complex128"), {"axis": -2}),
    ("linalg.cross", ((64, 64, 3, 2), "int32", "T"), ((3, 2), "int32"), {"axis": -2}),
    # NumPy's search copies values not in C order (Fortran order: 1.07x)
    ("searchsorted", ((16,), "float64"), ((16, 48, 20), "float64", "T"), {}),
    ("searchsorted", ((16,), "float64"), ((160, 48), "float32"), {}),
    # np.tri's mask is an outer comparison of two aranges through cast buffers (34.8 kB)
    ("tril", ((128, 96), "bool"), None, {"k": -3}),
    ("triu", ((128, 96), "int8"), None, {"k": -3}),
]


@pytest.mark.parametrize(("name", "first", "second", "kwargs"), FOUND)
def test_calls_found_over_stay_within(name, first, second, kwargs):
    args = tuple(_found(*a) for a in (first, second) if a is not None)
    before = len(TALLY.checked)
    function(name)(*args, **kwargs)
    if np.dtype(first[1]).kind in "fc":
        check_step(name, _plain(name), args, kwargs)
    assert any(c[0] == name for c in TALLY.checked[before:])


def test_a_call_over_its_projection_fails_naming_it():
    """The check can fail: an array plain NumPy makes inside a call is not in its projection."""
    from conformance.memory_checking import check_call

    x = XP.asarray(np.ones(3))
    with pytest.raises(OverProjectionError, match=r"hidden\(float64\[3\]\): measured \d+ bytes > "):
        check_call("hidden", lambda a: (np.ones(1_000_000), a)[1] + 1, (x,), {})


def test_a_step_over_its_projection_fails_naming_it():
    """Likewise the gradient mode: a step whose backward pass makes a hidden array."""
    from conformance.memory_checking import check_step

    @pg.custom_vjp
    def hidden(a):
        return a * 2

    def fwd(a):
        return a * 2, None

    def bwd(res, g):
        np.ones(1_000_000)
        return (g * 2,)

    hidden.defvjp(fwd, bwd)
    x = PLAIN.asarray(np.ones(3))
    with pytest.raises(OverProjectionError, match=r"value_and_grad\(sum\(hidden\)\)"):
        check_step("hidden", hidden, (x,), {})


def test_a_finding_names_a_long_lists_length():
    """A call over its projection is reported with its arguments; a long list's repr is cut
    short, so its length (and whether it nests) is said, and the call can be remade."""
    from conformance.memory_checking import describe

    long = [complex(i, -i) for i in range(142)]
    text = describe((long,), {"dtype": "complex128"})
    assert text.endswith("... (142 items), dtype='complex128'") and text.startswith("[0j, (1-1j)")
    assert describe(([[1.0] * 3] * 40,), {}).endswith("(40 items, nested)")
    assert describe(([1.0, 2.0], "x" * 80), {}) == "[1.0, 2.0], '" + "x" * 56 + "..."
