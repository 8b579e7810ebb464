"""The operators of our arrays (``x + y``, ``x @ w``, ``x += 1``, ``-x``): each bound to its
namespace's function, so an operator and its function are one row; and those of the backend
array classes pycograd_xp builds itself (abstract, batched, compile's proxies)."""

from __future__ import annotations

import operator
from typing import Any

from .._primitive import REGISTRY
from .._state import STACK
from .._tape import is_saved, note_write
from ._array import SCALARS, Array
from ._eager import runs_impl
from ._writes import closed_write_error

BINARY_OPERATORS = {
    "add": "add",
    "sub": "subtract",
    "mul": "multiply",
    "truediv": "divide",
    "floordiv": "floor_divide",
    "mod": "remainder",
    "pow": "pow",
    "matmul": "matmul",
    "and": "bitwise_and",
    "or": "bitwise_or",
    "xor": "bitwise_xor",
    "lshift": "bitwise_left_shift",
    "rshift": "bitwise_right_shift",
}
COMPARISONS = {
    "lt": "less",
    "le": "less_equal",
    "gt": "greater",
    "ge": "greater_equal",
    "eq": "equal",
    "ne": "not_equal",
}
UNARY_OPERATORS = {"neg": "negative", "pos": "positive", "abs": "abs", "invert": "bitwise_invert"}


def install_backend_operators(cls: type, function: Any, inplace: Any) -> None:
    """Operators for a backend array class that pycograd_xp itself builds (the abstract and the
    batched backends): each calls ``function(self, fname)``, that backend's function of the
    standard's name; ``inplace(fname)`` makes the in-place operators."""

    def binary(fname: str, reflected: bool) -> Any:
        def op(self: Any, other: Any) -> Any:
            f = function(self, fname)
            return f(other, self) if reflected else f(self, other)

        return op

    for op, fname in BINARY_OPERATORS.items():
        setattr(cls, f"__{op}__", binary(fname, False))
        setattr(cls, f"__r{op}__", binary(fname, True))
        setattr(cls, f"__i{op}__", inplace(fname))
    for op, fname in COMPARISONS.items():
        setattr(cls, f"__{op}__", binary(fname, False))
    for op, fname in UNARY_OPERATORS.items():
        setattr(cls, f"__{op}__", lambda self, fname=fname: function(self, fname)(self))


def _operator(
    cls: type[Array], f: Any, name: str, reflected: bool = False, constants: tuple = ()
) -> Any:
    def op(self: Array, other: Any, /) -> Any:
        if type(other) is not cls and not isinstance(other, SCALARS):
            if isinstance(other, constants):  # NumPy's: its reflected operator calls the ufunc,
                return NotImplemented  # which hands the call to our __array_ufunc__
            if isinstance(other, Array):
                # vmap: the function lifts; an abstract array (memory.project, compile): the
                # function hands the call over to the abstract namespace
                if (
                    other._backend.level != self._backend.level
                    or other._backend.abstract
                    or self._backend.abstract
                ):
                    return f(other, self) if reflected else f(self, other)
                raise TypeError(
                    f"{name}: cannot mix arrays of {self._ns.__name__} and "
                    f"{other._ns.__name__}; convert one with the other's asarray"
                )
            if hasattr(other, "__array_namespace__") or hasattr(other, "__array__"):
                raise TypeError(
                    f"{name}: got a {type(other).__module__}.{type(other).__name__}, not an "
                    f"array of {self._ns.__name__}; convert it with "
                    f"{self._ns.__name__}.asarray(...) first"
                )
            return NotImplemented
        return f(other, self) if reflected else f(self, other)

    op.__name__ = name
    return op


def _inplace(
    cls: type[Array], f: Any, name: str, *, raw: bool = True, constants: tuple = ()
) -> Any:
    forward = _operator(cls, f, name, constants=constants)
    raw_inplace = getattr(operator, name.strip("_"))  # operator.isub for "__isub__", ...
    binary = getattr(operator, "__" + name.strip("_")[1:] + "__")  # operator.__sub__ for __isub__

    def op(self: Array, other: Any, /) -> Any:
        if STACK.closed is self._ns:  # compile is tracing: this array is closed over
            raise closed_write_error(name, self)
        # On a backend whose arrays are writable, write the buffer in place when no tape can see
        # it (under no_grad, as optimizer steps do; or nothing here is being differentiated
        # and the tape saved nothing of it); elsewhere compute the new value and rebind to it.
        if (
            (
                not STACK.grad_enabled
                or (
                    self._node is None
                    and getattr(other, "_node", None) is None
                    and not is_saved(self._backend, self._data)
                )
            )
            and self._backend.mutable
            and (
                type(other) is cls
                and other._data.dtype == self._data.dtype
                and other._data.shape == self._data.shape
                or isinstance(other, SCALARS)
            )
            and self._data.dtype in self._ns._floating
            and not (STACK.unwritable and id(self._backend.buffer(self._data)) in STACK.unwritable)
        ):
            if raw:
                self._data = raw_inplace(self._data, other._data if type(other) is cls else other)
            else:  # the namespace's function honours special cases the backend operator misses
                self._data[...] = forward(self, other)._data
            note_write(self._backend, self._data)
            return self
        new = forward(self, other)
        if new is NotImplemented:
            if not isinstance(other, constants):
                return new
            new = binary(self, other)  # x += ndarray: NumPy's reflected operator, then rebind
        return self._rebind(new, name)

    op.__name__ = name
    return op


def _unary_operator(f: Any, name: str) -> Any:
    def op(self: Array, /) -> Any:
        return f(self)

    op.__name__ = name
    return op


def install_operators(cls: type[Array], ns: Any, constants: tuple = ()) -> None:
    """Bind every operator of ``cls`` (one namespace's Array class) to that namespace's function.

    Binding per namespace, to the function object itself, keeps the operator as cheap as a call
    of the function. An operand of a type in ``constants`` (NumPy's arrays and scalars, for a
    namespace over NumPy) is left to its own reflected operator, which calls NumPy's ufunc,
    which hands the call to our ``__array_ufunc__``: ``x * mask`` is ``mask * x``, with NumPy's
    promotion, the NumPy operand a constant; other foreign arrays refuse.
    """
    for op, fname in BINARY_OPERATORS.items():
        f = getattr(ns, fname)
        setattr(cls, f"__{op}__", _operator(cls, f, f"__{op}__", constants=constants))
        setattr(
            cls,
            f"__r{op}__",
            _operator(cls, f, f"__r{op}__", reflected=True, constants=constants),
        )
        # A row with an impl honours special cases the backend misses (floor_divide; CuPy's
        # remainder): its in-place operator writes that result, not the backend operator's.
        raw = not runs_impl(REGISTRY[fname], cls._backend)
        setattr(cls, f"__i{op}__", _inplace(cls, f, f"__i{op}__", raw=raw, constants=constants))
    for op, fname in COMPARISONS.items():
        setattr(
            cls, f"__{op}__", _operator(cls, getattr(ns, fname), f"__{op}__", constants=constants)
        )
    for op, fname in UNARY_OPERATORS.items():
        setattr(cls, f"__{op}__", _unary_operator(getattr(ns, fname), f"__{op}__"))
    cls.__hash__ = None  # type: ignore[assignment]
