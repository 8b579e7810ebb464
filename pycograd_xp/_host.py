"""Python numbers that change from call to call of a compiled function (``pycograd_xp.compile``).

While ``compile`` traces a function, each ``int``/``float`` leaf of its arguments (an optimizer's
step count, a learning rate) is a :class:`HostScalar`: arithmetic on it records a host
expression (``count + 1``, ``0.9 ** t``, ``-rate / c1``) that the replay evaluates again with the
new numbers, and an array operation given one takes it as the Python scalar it stands for (the
standard's weak scalar typing is unchanged). Anything that needs its value while tracing
(``float()``, ``int()``, ``bool()``, a comparison, ``math.*``) raises :class:`ValueNeededError`;
``compile`` then makes that argument static (part of the cache key) and traces again.

:func:`host` applies a plain Python function to numbers that may be host scalars (learning-rate
schedules do: ``host(schedule, count)``).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any


class ValueNeededError(TypeError):
    """The value of a host scalar was needed while tracing (``compile`` makes it static)."""

    def __init__(self, scalar: HostScalar, how: str) -> None:
        self.scalar, self.how = scalar, how
        super().__init__(
            f"compile: {how} of the Python number argument {scalar.name} while tracing; "
            "compile makes such arguments static (one trace per value)"
        )


class NoValue:
    """What a trace runs on (abstract arrays, compile's proxies, host scalars): anything that
    needs a value refuses through :meth:`_no_value` (arrays: a TypeError naming the conversion,
    which compile restates as a TracingError; host scalars: :class:`ValueNeededError`)."""

    __slots__ = ()
    TRACED_BY = "pycograd_xp.memory.project, pycograd_xp.compile"

    def _no_value(self, how: str) -> Any:
        raise TypeError(
            f"{how} of an array while tracing ({self.TRACED_BY}): a traced "
            "function's arrays have no value, so it cannot branch on array values "
            "(use xp.where)"
        )

    def __bool__(self) -> bool:
        return self._no_value("bool()")

    def __float__(self) -> float:
        return self._no_value("float()")

    def __int__(self) -> int:
        return self._no_value("int()")

    def __index__(self) -> int:
        return self._no_value("use as an index (__index__)")

    def __complex__(self) -> complex:
        return self._no_value("complex()")


class HostScalar(NoValue):
    """A Python number computed on the host at each call: an argument, or an expression of them.

    ``op`` is None for an argument (``index``: its position among the scalar arguments), else
    the Python function (``operator.add``, a schedule) applied to ``args`` (host scalars or
    plain values). ``example`` is the value while tracing (its type gives weak typing).
    """

    __slots__ = ("op", "args", "example", "index", "name")
    name: str
    __array_ufunc__ = None  # a backend's ufunc given one raises instead of making object arrays

    def __init__(
        self,
        op: Callable[..., Any] | None,
        args: tuple,
        example: Any,
        index: int = -1,
        name: str = "",
    ) -> None:
        self.op, self.args, self.example, self.index = op, args, example, index
        self.name = name or (args[0].name if args and isinstance(args[0], HostScalar) else "?")

    def __repr__(self) -> str:
        return f"HostScalar({self.name}, example={self.example!r})"

    def apply(self, fn: Callable[..., Any], *others: Any) -> HostScalar:
        return _apply(fn, (self, *others))

    def _no_value(self, how: str) -> Any:  # compile makes the argument static and retraces
        raise ValueNeededError(self, how)

    def __round__(self, ndigits: Any = None) -> Any:
        return self._no_value("round()")

    def __hash__(self) -> int:
        return self._no_value("hashing")

    def __eq__(self, other: object) -> bool:
        return self._no_value("a comparison")

    __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __eq__


def _example(a: Any) -> Any:
    return a.example if isinstance(a, HostScalar) else a


def _apply(fn: Callable[..., Any], args: tuple) -> HostScalar:
    return HostScalar(fn, args, fn(*[_example(a) for a in args]))


def host(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` now, or, when an argument is a host scalar, a host scalar that the replay
    of a compiled function computes with the numbers of each call."""
    if any(isinstance(a, HostScalar) for a in args):
        return _apply(fn, args)
    return fn(*args)


def _binary(fn: Callable[[Any, Any], Any]) -> tuple[Callable, Callable]:
    def op(self: HostScalar, other: Any) -> Any:
        if isinstance(other, HostScalar | int | float | complex):
            return _apply(fn, (self, other))
        return NotImplemented  # an array: its reflected operator takes the Python scalar

    def rop(self: HostScalar, other: Any) -> Any:
        if isinstance(other, int | float | complex):
            return _apply(fn, (other, self))
        return NotImplemented

    return op, rop


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow"):
    _op, _rop = _binary(getattr(operator, _name))
    setattr(HostScalar, f"__{_name}__", _op)
    setattr(HostScalar, f"__r{_name}__", _rop)


def _unary(fn: Callable[[Any], Any]) -> Callable[[HostScalar], HostScalar]:
    return lambda self: _apply(fn, (self,))


for _name in ("neg", "pos", "abs"):
    setattr(HostScalar, f"__{_name}__", _unary(getattr(operator, _name)))
del _name, _op, _rop
