"""Elementwise functions: one row each, with the dtype category the standard asks of its inputs.

A row without an ``impl`` calls the backend function of the same name. The few rows with an
``impl`` honour special cases of the standard that some backends (NumPy) get wrong: each calls
the backend, and only for the dtypes concerned corrects the special cases with ``where``.
"""

from __future__ import annotations

from typing import Any

from .._primitive import binary, primitive, unary

_KINDS: dict[tuple[type, Any, str], bool] = {}


def _isdtype(bk: Any, dtype: Any, kind: str) -> bool:
    """``bk.isdtype(dtype, kind)``, remembered: array-api-compat's and array-api-strict's take
    about 1 us, more than tanh of a small array, and tanh is on the hot path of networks. The
    key leads with the dtype's type: array-api-strict's dtypes hash like NumPy's, and comparing
    the two warns."""
    key = (type(dtype), dtype, kind)
    try:
        return _KINDS[key]
    except KeyError:
        _KINDS[key] = answer = bk.isdtype(dtype, kind)
        return answer
    except TypeError:  # an unhashable dtype
        return bk.isdtype(dtype, kind)


def _floor_divide(bk: Any, x1: Any, x2: Any) -> Any:
    # NumPy returns NaN for inf // finite and -1 for 1 // -inf; the standard asks for
    # floor(x1 / x2) whenever an operand is infinite (+-inf, or a signed zero).
    out = bk.floor_divide(x1, x2)
    if not _isdtype(bk, out.dtype, "real floating"):
        return out
    a = bk.asarray(x1, dtype=out.dtype)
    b = bk.asarray(x2, dtype=out.dtype)
    return bk.where(bk.isinf(a) | bk.isinf(b), bk.floor(a / b), out)


def _expm1(bk: Any, x: Any) -> Any:
    # NumPy's complex expm1 gets the special cases at infinities and the sign of a zero result
    # wrong; exp(x) - 1 has them right there, and expm1 stays exact everywhere else.
    out = bk.expm1(x)
    if not _isdtype(bk, out.dtype, "complex floating"):
        return out
    return bk.where(bk.isfinite(x) & (x != 0), out, bk.exp(x) - 1)


def _tanh(bk: Any, x: Any) -> Any:
    # The standard asks tanh(+inf + bj) = 1 + 0j for finite b > 0, so (by tanh(conj(x)) =
    # conj(tanh(x)) and oddness) the zero imaginary part of tanh(+-inf + bj) takes the sign of b.
    # NumPy gives C99's 1 + 0j * sin(2b), whose zero follows sin(2b) instead: flip it back.
    out = bk.tanh(x)
    if not _isdtype(bk, out.dtype, "complex floating"):
        return out
    b = bk.imag(x)
    flipped = bk.signbit(bk.imag(out)) != bk.signbit(b)
    return bk.where(bk.isinf(bk.real(x)) & bk.isfinite(b) & flipped, bk.conj(out), out)


def _sign(bk: Any, x: Any) -> Any:
    # The standard asks 0 + 0j for a complex zero of any signs; array-api-strict divides x by
    # |x| (or 1) and keeps the signs (-0 - 0j gives -0 + 0j). It asks NaN + NaN j when a
    # component is NaN; NumPy's own complex sign (Cubed's) returns 1 + 0j for inf + NaN j.
    out = bk.sign(x)
    if not _isdtype(bk, out.dtype, "complex floating"):
        return out
    return bk.where(x == 0, 0j, bk.where(bk.isnan(x), complex("nan+nanj"), out))


for _name in ("abs", "negative", "positive", "square", "round", "conj", "real"):
    unary(_name, "numeric")
for _name in ("isfinite", "isinf", "isnan"):
    unary(_name, "numeric")
for _name in (
    "acos", "acosh", "asin", "asinh", "atan", "atanh", "cos", "cosh", "exp", "log", "log1p",
    "log2", "log10", "reciprocal", "sin", "sinh", "sqrt", "tan",
):  # fmt: skip
    unary(_name, "floating-point")
unary("expm1", "floating-point", _expm1)
unary("tanh", "floating-point", _tanh)
unary("sign", "numeric", _sign)
for _name in ("ceil", "floor", "trunc"):
    unary(_name, "real numeric")
unary("imag", "complex floating-point")
unary("signbit", "real floating-point")
unary("bitwise_invert", "integer or boolean")
unary("logical_not", "boolean")

for _name in ("add", "subtract", "multiply", "divide", "pow"):
    binary(_name, "numeric")
for _name in ("atan2", "copysign", "hypot", "logaddexp", "nextafter"):
    binary(_name, "real floating-point")
for _name in ("maximum", "minimum", "remainder", "greater", "greater_equal", "less", "less_equal"):
    binary(_name, "real numeric")
binary("floor_divide", "real numeric", _floor_divide)
for _name in ("equal", "not_equal"):
    binary(_name, "all")
for _name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
    binary(_name, "integer or boolean")
for _name in ("bitwise_left_shift", "bitwise_right_shift"):
    binary(_name, "integer")
for _name in ("logical_and", "logical_or", "logical_xor"):
    binary(_name, "boolean")


@primitive("real numeric")
def clip(bk: Any, x: Any, /, min: Any = None, max: Any = None) -> Any:
    return bk.clip(x, min=min, max=max)
