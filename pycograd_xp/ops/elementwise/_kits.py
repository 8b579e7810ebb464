"""The kits the elementwise rows share: batching by broadcasting, shapes with the iterator's
buffers, a derivative written once (:func:`smooth_unary`, :func:`smooth_binary`)."""

from __future__ import annotations

from typing import Any

import array_api_compat.numpy as npx

from ..._primitive import binary, unary
from .._rules.batching import align, fn
from .._rules.jvp import plus
from .._rules.shapes import (
    broadcast,
    elementwise_out,
    is_array,
    measured_layouts,
    probe_dtype,
    ufunc_buffers,
)
from .._rules.vjp import is_scalar


def on_tangent(rule: Any) -> Any:
    """The JVP rule of a unary row from ``rule(ns, t, out, x)`` on its one tangent."""
    return lambda ns, t, out, x: rule(ns, t[0], out, x)


def _lin(t, f):
    return None if t is None else t * f


def broadcast_unary(row: Any) -> Any:
    """The batching rule of a unary row: the row itself on the batched operand."""
    name = row.name
    return lambda ns, dims, x: fn(ns, name)(x)


def broadcast_binary(row: Any) -> Any:
    """The batching rule of a binary row: the operands aligned, then broadcast."""
    name = row.name

    def rule(ns, dims, x1, x2):
        return fn(ns, name)(*align(ns, dims, x1, x2))

    return rule


def broadcast_shape(row: Any) -> Any:
    """The shape rule of an elementwise row: the broadcast shape, in NumPy's dtype for it."""
    ref = getattr(npx, row.name)

    def rule(a, *xs):
        shape = broadcast(*(x.shape for x in xs if is_array(x)))
        return elementwise_out(shape, probe_dtype(ref, *xs), *xs)

    return rule


@measured_layouts
def buffers(out, *xs, **kw):
    """The iterator's buffers for broadcast, cast or differently laid-out operands."""
    return ufunc_buffers(out, *xs, *kw.values())


def broadcasting(row: Any) -> Any:
    """Attach an elementwise row's batching (broadcast the batched operands, for its arity) and
    shape rules (the broadcast shape in NumPy's dtype, with the iterator's buffers)."""
    row.defbatch((broadcast_unary if row.kind == "unary" else broadcast_binary)(row))
    row.defshape(broadcast_shape(row), memory=buffers)
    return row


def smooth_unary(
    name: str, dtypes: str, times_derivative: Any, saves: tuple = ("x",), impl: Any = None
) -> Any:
    """A unary row whose derivative is written once (JAX's ``standard_unop``):
    ``times_derivative(ns, v, out, x)`` applies it to ``v``, the VJP with ``v`` the cotangent
    and the JVP with ``v`` the tangent: ``v * f'(x)`` for a holomorphic f (the same expression
    for complex arguments in JAX's convention above), and so for any row whose map is its own
    transpose under ``Re(ct * t)`` (``conj``); ``saves`` is what it reads. Batched and shaped
    by :func:`broadcasting`; ``impl``: the row's, where it is not the backend's function alone."""
    row = unary(name, dtypes, impl)
    row.defvjp(lambda ns, g, out, x: (times_derivative(ns, g, out, x),), saves=saves)
    row.defjvp(lambda ns, t, out, x: times_derivative(ns, t[0], out, x))
    return broadcasting(row)


def smooth_binary(name: str, dtypes: str, partials: Any, saves: tuple) -> Any:
    """A two-argument row whose partial derivatives are written once: ``partials(ns, out, x1,
    x2)`` gives ``(d1, d2)``, the derivative in each argument, which the VJP multiplies by the
    cotangent and the JVP by the tangents (a Python-scalar operand gets no cotangent; a None
    tangent no term); ``saves`` is what ``partials`` reads. Batched and shaped by
    :func:`broadcasting`."""
    row = binary(name, dtypes)

    @row.defvjp(saves=saves)
    def vjp(ns, g, out, x1, x2):
        d1, d2 = partials(ns, out, x1, x2)
        return (None if is_scalar(x1) else g * d1, None if is_scalar(x2) else g * d2)

    @row.defjvp
    def jvp(ns, t, out, x1, x2):
        d1, d2 = partials(ns, out, x1, x2)
        return plus(_lin(t[0], d1), _lin(t[1], d2))

    return broadcasting(row)
