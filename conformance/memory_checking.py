"""A checking namespace: every call projected from its arguments' specs and measured for real.

``checking_namespace(numpy)`` is a module with the names of ``pycograd_xp.namespace(numpy)``
(``linalg`` and ``fft`` included) whose functions, before they return, check their own call:

1. the call runs (its result is what is returned; an error propagates as it is, unchecked);
2. it is projected (``memory.project`` of the same call, taken as it is, from the arguments'
   shapes, dtypes and layouts: the machinery of ``tests/memory/test_conformance.py``);
3. it runs again under ``memory.measure`` (tracemalloc; the first run was its warm-up);
4. measured above projected raises :class:`OverProjectionError`, naming the function, its
   arguments' shapes and dtypes, the projected and the measured bytes.

Any suite that generates arguments, run on it, is a second oracle for the memory rules: the
official array-api-tests suite (``python -m conformance.run_official memory``) and the
hypothesis strategies of ``hypothesis.extra.array_api`` (``tests/memory/test_checking.py``).
A test that fails by :class:`OverProjectionError` names a rule to fix.

The operators (``x + y``, ``x[i]``) are not checked: the arrays are the plain namespace's, and
each operator is the row of its function (``__add__`` is ``add``), which is. Functions that
return no array (``isdtype``, ``result_type``, ``can_cast``, ``finfo``, ``iinfo``) pass
unchecked. A call whose projection raises although the call runs is counted as
``unprojected`` with its message (no failure: a refusal that names the way out is allowed).

Every check is tallied in :data:`TALLY`; with ``PYCOGRAD_MEMCHECK_REPORT`` set to a path, the
tally is written there as JSON when the process exits (``run_official`` reads it). With
``PYCOGRAD_MEMCHECK_RAISE=0`` an over is tallied and not raised (a survey of every over).
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import pycograd_xp as pg
from pycograd_xp import memory
from pycograd_xp.memory._report import OVERHEAD_FIXED
from pycograd_xp.namespace._array import Array
from pycograd_xp.tree import tree_flatten

# The sharp check's slack: Python objects a call makes beside its arrays (a result's header and
# wrapper, an index tuple) that the per-call allowance may not cover on its own
SHARP_SLACK = 2048
# The step's: its tape holds Python objects per op (nodes, closures, saved tuples) beyond the
# per-call allowance, the same at any size (take_along_axis's 14-call gradient step: 7.1 to
# 7.6 kB over it from 2,560 to 6,400 elements, 113 kB under at ten times the size); the step's
# rules are checked at scale too (the hypothesis check draws up to 50,000 elements), where a
# rule short by a copy shows as measured above projected
STEP_SHARP_SLACK = 12 * 1024
# functions of the standard that return no array: nothing to project
NO_ARRAY = frozenset({"isdtype", "result_type", "can_cast", "finfo", "iinfo"})


class OverProjectionError(AssertionError):
    """A call measured above its projection: a memory rule is short."""


@dataclass
class Tally:
    """What the checks saw: one ``(function, measured, projected, sharp excess)`` per checked
    call, the overs and the calls that could not be projected, each with its description."""

    checked: list[tuple[str, int, int, int]] = field(default_factory=list)
    over: list[str] = field(default_factory=list)
    unprojected: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"checked": self.checked, "over": self.over, "unprojected": self.unprojected}


TALLY = Tally()


def describe(args: tuple, kwargs: dict) -> str:
    """The arguments as shapes and dtypes (``float64[3, 4]``, ``F``-ordered or strided views
    marked), other values by their repr (shortened; a long list with its length)."""

    def one(a: Any) -> str:
        if isinstance(a, Array):
            data = a._data
            layout = ""
            flags = getattr(data, "flags", None)
            if flags is not None and not flags.c_contiguous:
                layout = " F" if flags.f_contiguous else f" strides={data.strides}"
            return f"{a.dtype}{list(a.shape)}{layout}"
        if isinstance(a, list | tuple) and any(isinstance(e, Array) for e in a):
            inner = ", ".join(one(e) for e in a)
            return f"({inner})" if isinstance(a, tuple) else f"[{inner}]"
        r = repr(a)
        if len(r) <= 60:
            return r
        if not isinstance(a, list | tuple):
            return r[:57] + "..."
        # a long list or tuple: its start, then how many items it has (and whether it nests),
        # so that a finding can be remade at its size
        nested = ", nested" if any(isinstance(e, list | tuple) for e in a) else ""
        return f"{r[:57]}... ({len(a)} items{nested})"

    parts = [one(a) for a in args] + [f"{k}={one(v)}" for k, v in kwargs.items()]
    return ", ".join(parts)


def _has_array(tree: Any) -> bool:
    return any(isinstance(leaf, Array) for leaf in tree_flatten(tree)[0])


def check_call(name: str, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """``fn(*args, **kwargs)``, checked as the module says; returns its result."""
    result = fn(*args, **kwargs)  # errors propagate unchecked; this run is the warm-up
    if not _has_array(result):
        return result

    def call(*a: Any, **k: Any) -> Any:
        return fn(*a, **k)

    call.__name__ = name
    try:
        with np.errstate(all="ignore"):
            p = memory.project(call, *args, argnums=(), **kwargs)
    except Exception as e:  # any refusal is tallied with its message
        why = str(e) if len(str(e)) <= 300 else str(e)[:297] + "..."
        TALLY.unprojected.append(f"{name}({describe(args, kwargs)}): {type(e).__name__}: {why}")
        return result
    with np.errstate(all="ignore"):
        m = memory.measure(call, *args, argnums=(), **kwargs)
        harness = memory.measure(_noop, *args, argnums=(), **kwargs).peak_bytes
    # the sharp check: the call's own bytes (the harness's, measured on a call that does
    # nothing, taken off) against the projection without its fixed allowance for Python
    excess = (m.peak_bytes - harness) - (p.traced_peak_bytes - p.argument_bytes - OVERHEAD_FIXED)
    TALLY.checked.append((name, m.peak_bytes, p.traced_peak_bytes, excess))
    what = None
    if m.peak_bytes > p.traced_peak_bytes:
        what = (
            f"{name}({describe(args, kwargs)}): measured {m.peak_bytes} bytes > projected "
            f"{p.traced_peak_bytes} ({m.peak_bytes / p.traced_peak_bytes:.2f}x)"
        )
    elif excess > SHARP_SLACK:
        what = (
            f"{name}({describe(args, kwargs)}): its own bytes, {m.peak_bytes - harness}, "
            f"exceed the projection without its fixed allowance for Python's objects by "
            f"{excess} (more than {SHARP_SLACK}): a rule short on small arrays is over on "
            f"large ones (measured {m.peak_bytes}, projected {p.traced_peak_bytes})"
        )
    if what is not None:
        TALLY.over.append(what)
        if os.environ.get("PYCOGRAD_MEMCHECK_RAISE", "1") != "0":
            raise OverProjectionError(f"{what}\n{p}")
    return result


def _noop(*a: Any, **k: Any) -> None:
    return None


def summed(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` made a loss: the sum of its floating outputs (their real parts where complex),
    None where it has none."""

    def loss(*args: Any, **kwargs: Any) -> Any:
        total = None
        for leaf in tree_flatten(fn(*args, **kwargs))[0]:
            if not isinstance(leaf, Array):
                continue
            ns = leaf.__array_namespace__()
            if not ns.isdtype(leaf.dtype, ("real floating", "complex floating")):
                continue
            part = ns.real(leaf) if ns.isdtype(leaf.dtype, "complex floating") else leaf
            total = ns.sum(part) if total is None else total + ns.sum(part)
        return total

    loss.__name__ = f"sum({getattr(fn, '__name__', 'f')})"
    return loss


def differentiable_args(args: tuple) -> tuple[int, ...]:
    """The positions of the arguments that hold a floating array (a list of them included)."""

    def floating(a: Any) -> bool:
        return isinstance(a, Array) and np.dtype(a.dtype).kind in "fc"

    return tuple(
        i for i, a in enumerate(args) if any(floating(leaf) for leaf in tree_flatten(a)[0])
    )


def check_step(name: str, fn: Callable[..., Any], args: tuple, kwargs: dict) -> bool:
    """The ``value_and_grad`` step of ``sum(fn(*args, **kwargs))`` with respect to every
    argument holding a floating array, checked as :func:`check_call` checks a call (its forward
    pass and its whole step, each against its projection, and the step's own bytes against the
    projection less its fixed allowance). False (nothing checked) where no argument or no output
    is floating; errors of the step propagate unchecked."""
    nums = differentiable_args(args)
    loss = summed(fn)
    if not nums or loss(*args, **kwargs) is None:
        return False
    pg.value_and_grad(loss, nums)(*args, **kwargs)  # the warm-up; errors propagate
    label = f"value_and_grad(sum({name}))"
    try:
        with np.errstate(all="ignore"):
            p = memory.project(loss, *args, argnums=nums, **kwargs)
    except Exception as e:
        why = str(e) if len(str(e)) <= 300 else str(e)[:297] + "..."
        TALLY.unprojected.append(f"{label}({describe(args, kwargs)}): {type(e).__name__}: {why}")
        return False
    with np.errstate(all="ignore"):
        m = memory.measure(loss, *args, argnums=nums, **kwargs)
        harness = memory.measure(_noop, *args, argnums=(), **kwargs).peak_bytes
    excess = (m.peak_bytes - harness) - (p.traced_peak_bytes - p.argument_bytes - OVERHEAD_FIXED)
    TALLY.checked.append((label, m.peak_bytes, p.traced_peak_bytes, excess))
    what = None
    for part, measured, projected in (
        ("forward pass", m.forward_peak_bytes, p.traced_forward_peak_bytes),
        ("step", m.peak_bytes, p.traced_peak_bytes),
    ):
        if measured > projected and what is None:
            what = (
                f"{label}({describe(args, kwargs)}), its {part}: measured {measured} bytes > "
                f"projected {projected} ({measured / projected:.2f}x)"
            )
    if what is None and excess > STEP_SHARP_SLACK:
        what = (
            f"{label}({describe(args, kwargs)}): its own bytes, {m.peak_bytes - harness}, "
            f"exceed the projection without its fixed allowance for Python's objects by "
            f"{excess} (more than {STEP_SHARP_SLACK}) (measured {m.peak_bytes}, projected "
            f"{p.traced_peak_bytes})"
        )
    if what is not None:
        TALLY.over.append(what)
        if os.environ.get("PYCOGRAD_MEMCHECK_RAISE", "1") != "0":
            raise OverProjectionError(f"{what}\n{p}")
    return True


def _checked(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)  # the signature (inspect follows __wrapped__) and the docstring
    def f(*args: Any, **kwargs: Any) -> Any:
        return check_call(name, fn, args, kwargs)

    return f


def _wrap_module(ns: types.ModuleType, name: str, prefix: str) -> types.ModuleType:
    m = types.ModuleType(name, ns.__doc__)
    for attr in dir(ns):
        if attr.startswith("_") and attr not in ("__array_api_version__",):
            continue
        value = getattr(ns, attr)
        if isinstance(value, types.ModuleType):
            value = _wrap_module(value, f"{name}.{attr}", f"{prefix}{attr}.")
        elif isinstance(value, types.FunctionType) and attr not in NO_ARRAY:
            value = _checked(prefix + attr, value)
        setattr(m, attr, value)
    if hasattr(ns, "__array_namespace_info__"):
        m.__array_namespace_info__ = ns.__array_namespace_info__  # type: ignore[attr-defined]
    m.__getattr__ = lambda attr: getattr(ns, attr)  # type: ignore[method-assign]
    return m


@functools.cache
def checking_namespace(backend: Any = np) -> types.ModuleType:
    """``pycograd_xp.namespace(backend)`` with every function that returns arrays checked
    against its projection (one module per backend, named ``pycograd_xp.memcheck.<name>``).

    Parameters
    ----------
    backend : module, default numpy
        An eager backend the projection models (NumPy).

    Returns
    -------
    module
        The checking namespace.
    """
    ns = pg.namespace(backend)
    return _wrap_module(ns, f"pycograd_xp.memcheck.{backend.__name__}", "")


def _write_report() -> None:
    path = os.environ.get("PYCOGRAD_MEMCHECK_REPORT")
    if path:
        with open(path, "w") as fh:
            json.dump(TALLY.as_dict(), fh)


atexit.register(_write_report)
