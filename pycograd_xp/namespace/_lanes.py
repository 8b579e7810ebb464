"""The fast lanes of the eager interpreter (``namespace/_eager.py``): the commonest call of a row,
evaluated inline, in front of the row's generic function.

Four families of rows get a lane, by their signature
(:func:`pycograd_xp.namespace._eager.family`):

* **unary** ``f(x, /)``: the elementwise unary rows (``tanh``) and the general rows of one array
  and nothing else (``linalg.inv``);
* **binary** ``f(x1, x2, /)``: the elementwise binary rows (``add``, the operators; one side
  may be a Python scalar) and the general rows of two arrays and nothing else (``matmul``);
* **ternary** ``f(condition, x1, x2, /)``: the general rows of three arrays and nothing else
  (``where``);
* **one array and keywords** ``f(x, /, **kw)`` or ``f(x, a, /, **kw)``: a general row whose
  first parameter is its one array, then at most one plain positional value and keywords
  (``sum``, ``sort``, ``fft.fft``, ``reshape``, ``astype``).

A lane evaluates the commonest call, and only it, inline: this namespace's arrays of accepted
dtypes, no transform on the stack that takes calls (``STACK.redirect`` unset), the arguments
given as the signature binds them; it hands every other call, unchanged, to the row's generic
function. So the rows' functions cost no Python call beyond the backend's and the recording's,
and everything but the fast case (unwrapping, foreign arrays, lifting, handing over, binding,
errors) is written once.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from .._primitive import Primitive
from .._state import STACK
from ._array import SCALARS, Array
from ._signature import Params, check_axis, explain

# The default of the one-array lane's plain parameter: left out of the call (given by keyword,
# or missing), which the generic function then binds by the signature.
_ABSENT: Any = object()


class Lanes:
    """The fast lanes, a part of the eager interpreter
    (:class:`pycograd_xp.namespace._eager.Eager`, which provides the attributes below)."""

    Arr: Any
    bk: Any
    backend: Any
    mod: ModuleType
    wrap: Any
    accepted: Any
    call: Any
    impl: Any
    recorder: Any
    one_array_recorder: Any

    # -- the pieces every family closes over ---------------------------------------------------
    def new(self) -> Callable[[Any], Array]:
        """The fastest way to wrap one backend array (no checks)."""
        Arr, obj_new = self.Arr, object.__new__

        def new(data: Any) -> Array:
            a: Array = obj_new(Arr)
            a._data = data
            a._node = None
            return a

        if not self.backend.abstract:
            return new

        def new_traced(data: Any) -> Array:
            # compile's trace: what our namespace hands out (NumPy's 0-d results wrapped back
            # into 0-d arrays), as distinct from the raw results inside a first-order rule
            recorder = STACK.recorder
            if recorder is not None:
                recorder.wrapped(data)
            return new(data)

        return new_traced

    def unary(self, prim: Primitive, params: Params, slow: Callable[..., Any]) -> Any:
        """The fast lane of ``f(x, /)``: ``tanh``, ``linalg.inv``, ``nonzero``, ..."""
        Arr, accepted, fn, rec = self.Arr, self.accepted(prim), self.call(prim), self.recorder(prim)
        T, new, wrap, diff = self.backend.array_type, self.new(), self.wrap(), prim.vjp is not None

        def f(x: Any, /) -> Any:
            if (
                type(x) is not Arr
                or STACK.redirect is not None
                or ((d := x._data).dtype not in accepted)
            ):
                return slow(x)  # any other argument, or a transform that may take the call
            try:
                r = fn(d)
            except (ValueError, TypeError, IndexError) as e:
                raise explain(prim.name, e, (d,)) from e
            out = new(r) if type(r) is T else wrap(r)
            if x._node is not None and diff and STACK.grad_enabled:
                return rec(out, x)
            return out

        return f

    def binary(self, prim: Primitive, params: Params, slow: Callable[..., Any]) -> Any:
        """The fast lane of ``f(x1, x2, /)``: ``add``, ``multiply``, ``matmul``, ..."""
        Arr, accepted, fn, rec = self.Arr, self.accepted(prim), self.call(prim), self.recorder(prim)
        T, new, wrap, diff = self.backend.array_type, self.new(), self.wrap(), prim.vjp is not None
        scalars = SCALARS if prim.kind == "binary" else ()  # an elementwise row's x * 2.0

        def f(x1: Any, x2: Any, /) -> Any:
            if type(x1) is Arr and STACK.redirect is None and (d1 := x1._data).dtype in accepted:
                if type(x2) is Arr and (d2 := x2._data).dtype in accepted:
                    tracked = x1._node is not None or x2._node is not None
                elif isinstance(x2, scalars):
                    d2, tracked = x2, x1._node is not None
                else:
                    return slow(x1, x2)
            elif isinstance(x1, scalars) and type(x2) is Arr and STACK.redirect is None:
                if (d2 := x2._data).dtype not in accepted:
                    return slow(x1, x2)
                d1, tracked = x1, x2._node is not None
            else:  # any other argument, or a transform that may take the call
                return slow(x1, x2)
            try:
                r = fn(d1, d2)
            except (ValueError, TypeError, IndexError) as e:
                raise explain(prim.name, e, (d1, d2)) from e
            out = new(r) if type(r) is T else wrap(r)
            if tracked and diff and STACK.grad_enabled:
                return rec(out, x1, x2)
            return out

        return f

    def ternary(self, prim: Primitive, params: Params, slow: Callable[..., Any]) -> Any:
        """The fast lane of ``f(condition, x1, x2, /)``: ``where``, ``special.betainc``, ... (three
        arrays of this namespace; anything else goes the generic way)."""
        Arr, accepted, impl, bk = self.Arr, self.accepted(prim), self.impl(prim), self.bk
        T, new, wrap, diff = self.backend.array_type, self.new(), self.wrap(), prim.vjp is not None
        rec, checked = self.recorder(prim), prim.dtypes is not None

        # (named as the spec names where's: Python's own error for a missing one names them)
        def f(condition: Any, x1: Any, x2: Any, /) -> Any:
            if not (type(condition) is type(x1) is type(x2) is Arr) or STACK.redirect is not None:
                return slow(condition, x1, x2)
            d0, d1, d2 = condition._data, x1._data, x2._data
            if checked and not accepted.issuperset((d0.dtype, d1.dtype, d2.dtype)):
                return slow(condition, x1, x2)
            try:
                r = impl(bk, d0, d1, d2)
            except (ValueError, TypeError, IndexError) as e:
                raise explain(prim.name, e, (d0, d1, d2), {}) from e
            out = new(r) if type(r) is T else wrap(r)
            if (
                diff
                and STACK.grad_enabled
                and (condition._node is not None or x1._node is not None or x2._node is not None)
            ):
                return rec(out, condition, x1, x2)
            return out

        return f

    def one_array(self, prim: Primitive, params: Params, slow: Callable[..., Any]) -> Any:
        """The fast lane of ``f(x, /, **kw)`` and ``f(x, a, /, **kw)``, where only ``x`` holds an
        array (``a``, a plain value): ``sum``, ``sort``, ``fft.fft``, ``reshape``, ``astype``,
        ``expand_dims``, ..."""
        Arr, accepted, bk = self.Arr, self.accepted(prim), self.bk
        impl, rec = self.impl(prim), self.one_array_recorder(prim)
        T, new, wrap, diff = self.backend.array_type, self.new(), self.wrap(), prim.vjp is not None
        scalar, to_array = self.backend.scalar_type or (), self.backend.scalar_to_array
        kwdefaults, axis_check, bare = params.kwdefaults, prim.axis_check, len(params.names) == 1
        checked = prim.dtypes is not None  # (a row that checks none: no dtype looked up)
        axis_default = kwdefaults.get("axis")

        def f(x: Any, a: Any = _ABSENT, /, *more: Any, **kw: Any) -> Any:
            if (
                type(x) is not Arr
                or STACK.redirect is not None
                or (a is _ABSENT) is not bare  # a parameter by keyword, left out, or too many
                or more
                or (checked and (d := x._data).dtype not in accepted)
            ):
                return slow(*(x, a, *more)[: 1 if a is _ABSENT else None], **kw)
            if not checked:
                d = x._data
            if axis_check:  # the default axis too (sort's -1 on a 0-d array)
                axis = kw["axis"] if "axis" in kw else axis_default
                if axis is not None and (type(axis) is not int or not -d.ndim <= axis < d.ndim):
                    check_axis(prim.name, axis, d.ndim)  # a tuple, or an axis to refuse
            try:
                if bare:  # (a call without keywords is the cheaper call)
                    r = impl(bk, d, **kw) if kw else impl(bk, d)
                else:
                    r = impl(bk, d, a, **kw) if kw else impl(bk, d, a)
                if type(r) is T:
                    out = new(r)
                elif isinstance(r, scalar):  # a reduction's NumPy scalar: a 0-d array
                    out = new(to_array(r))
                else:
                    out = wrap(r)
            except (ValueError, TypeError, IndexError) as e:
                given = (x,) if bare else (x, a)
                params.refuse(given, kw)
                raise explain(prim.name, e, (d, *given[1:]), {**kwdefaults, **kw}) from e
            if x._node is not None and diff and STACK.grad_enabled:
                return rec(out, (x,) if bare else (x, a), {**kwdefaults, **kw})
            return out

        return f
