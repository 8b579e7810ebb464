"""A general row's signature, read once: how its public function binds a call and the TypeErrors
Python raises for a wrong one (:class:`Params`), and the errors a call's arguments get (a dtype
the row does not take, an axis out of range, the backend's own error restated with the
function's name and what it was called with: :func:`explain`).
"""

from __future__ import annotations

import inspect
from typing import Any

from .._primitive import Primitive


class AxisError(ValueError, IndexError):
    """An axis argument outside ``[-ndim, ndim)``."""


# A dtype of each category, to suggest in an error.
_EXAMPLE_DTYPE: dict[str | None, str] = {
    "complex floating-point": "complex128",
    "integer": "int64",
    "integer or boolean": "int64",
    "boolean": "bool",
}


def dtype_error(fname: str, dtype: Any, category: str | None) -> TypeError:
    example = _EXAMPLE_DTYPE.get(category, "float64")
    return TypeError(
        f"{fname}(): got an array of dtype {dtype}, but this function takes {category} dtypes; "
        f"convert first, e.g. xp.astype(x, xp.{example})"
    )


def _describe(value: Any) -> str:
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"{getattr(value.dtype, 'name', value.dtype)}{tuple(value.shape)}"
    if type(value) is list or type(value) is tuple:
        inner = ", ".join(_describe(v) for v in value)
        return f"[{inner}]" if type(value) is list else f"({inner}{',' if len(value) == 1 else ''})"
    return repr(value)


def explain(fname: str, err: Exception, args: tuple, kwargs: dict | None = None) -> Exception:
    """The backend's error ``err`` from ``fname``, restated with the function's name and what it
    was called with (shapes and dtypes), as the same exception type when it can be."""
    if str(err).startswith((f"{fname}(", f"{fname.lstrip('_')}(")):
        return err  # already names the function, or the public one a private row serves
    called = [_describe(a) for a in args] + [
        f"{k}={_describe(v)}" for k, v in (kwargs or {}).items()
    ]
    msg = f"{fname}(): {err} (called with {', '.join(called)})"
    try:
        new = type(err)(msg)
    except Exception:  # an exception type that takes other arguments: keep the original
        return err
    new.__cause__ = err
    return new


_P = inspect.Parameter


_POSITIONAL = (_P.POSITIONAL_ONLY, _P.POSITIONAL_OR_KEYWORD)


class Params:
    """A row's spec signature, read once: its positional parameters (``names``, their
    ``defaults``, the positional-only ones), its ``*args`` (``var_name``), its keyword-only
    parameters and their defaults (``kwdefaults``); how a call binds (:meth:`bind`) and the
    TypeError Python raises for a wrong one (:meth:`error`)."""

    empty = _P.empty  # the default of a required parameter

    def __init__(self, prim: Primitive) -> None:
        self.fname = prim.short_name  # as Python's own errors name a function
        if prim.signature is None:  # an elementwise row: (x, /) or (x1, x2, /)
            params = [_P(n, _P.POSITIONAL_ONLY) for n in prim.arg_names]
        else:
            params = list(prim.signature.parameters.values())
        positional = [p for p in params if p.kind in _POSITIONAL]
        self.names = tuple(p.name for p in positional)
        self.defaults = tuple(p.default for p in positional)  # _P.empty: required
        self.posonly = frozenset(p.name for p in positional if p.kind is _P.POSITIONAL_ONLY)
        self.var_name = next((p.name for p in params if p.kind is _P.VAR_POSITIONAL), None)
        self.var = self.var_name is not None
        self.kwdefaults = {p.name: p.default for p in params if p.kind is _P.KEYWORD_ONLY}
        self.keywords = frozenset(self.kwdefaults)
        self.by_name = frozenset(self.names) - self.posonly | self.keywords

    def bind(self, args: tuple, kw: dict) -> tuple[tuple, dict]:
        """``args``/``kw`` as the signature binds them: every positional parameter's value in
        order (then the ``*args``), and every keyword-only one's, defaults filled in. A call
        the signature refuses raises the TypeError Python raises for it."""
        n, names = len(args), self.names
        if not kw and (n == len(names) or (self.var and n > len(names))):
            return args, dict(self.kwdefaults)
        if (n > len(names) and not self.var) or (kw and not kw.keys() <= self.by_name):
            raise self.error(args, kw)
        if kw and any(name in kw for name in names[:n]):
            raise self.error(args, kw)
        left = zip(names[n:], self.defaults[n:], strict=True)
        values = args[: len(names)] + tuple(kw[k] if k in kw else d for k, d in left)
        kwargs = {k: kw.get(k, d) for k, d in self.kwdefaults.items()}
        if any(v is _P.empty for v in values) or any(v is _P.empty for v in kwargs.values()):
            raise self.error(args, kw)
        return values + args[len(names) :], kwargs

    def refuse(self, args: tuple, kw: dict) -> None:
        """Raise Python's TypeError if the signature takes no keyword of these names (a
        fixed-arity closure passes the keywords given straight to the backend call, and asks
        here when that call fails)."""
        if kw and not kw.keys() <= self.keywords:
            raise self.error(args, kw) from None

    def error(self, args: tuple, kw: dict) -> TypeError:
        """The TypeError Python raises for a call of the signature with ``args``/``kw``."""
        f, names, n = self.fname, self.names, len(args)
        unknown = [k for k in kw if k not in self.by_name and k not in self.posonly]
        if unknown:
            return TypeError(f"{f}() got an unexpected keyword argument {unknown[0]!r}")
        if n > len(names) and not self.var:
            least = sum(d is _P.empty for d in self.defaults)
            takes = f"from {least} to {len(names)}" if least < len(names) else f"{len(names)}"
            s = "" if takes == "1" else "s"
            was = "was" if n == 1 else "were"
            return TypeError(f"{f}() takes {takes} positional argument{s} but {n} {was} given")
        passed = ", ".join(repr(k) for k in kw if k in self.posonly)
        if passed:
            return TypeError(
                f"{f}() got some positional-only arguments passed as keyword arguments: {passed}"
            )
        twice = [k for k in names[:n] if k in kw]
        if twice:
            return TypeError(f"{f}() got multiple values for argument {twice[0]!r}")
        kind = "positional"
        required = [k for k, d in zip(names, self.defaults, strict=True) if d is _P.empty]
        missing = [k for k in required[n:] if k not in kw]
        if not missing:
            kind = "keyword-only"
            missing = [k for k, d in self.kwdefaults.items() if k not in kw and d is _P.empty]
        q = [repr(k) for k in missing]
        listed = " and ".join(q) if len(q) < 3 else f"{', '.join(q[:-1])}, and {q[-1]}"
        s = "" if len(q) == 1 else "s"
        return TypeError(f"{f}() missing {len(q)} required {kind} argument{s}: {listed}")


def check_axis(fname: str, axis: Any, ndim: int) -> None:
    for a in axis if isinstance(axis, tuple) else (axis,):
        if not isinstance(a, int) or isinstance(a, bool):
            raise TypeError(f"{fname}(): axis must be an int or a tuple of ints, got {axis!r}")
        if not -ndim <= a < ndim:
            raise AxisError(
                f"{fname}(): axis {a} is out of range for an array of {ndim} dimensions; "
                f"use an axis in [{-ndim}, {ndim - 1}]"
            )
