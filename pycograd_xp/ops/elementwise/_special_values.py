"""The standard's special values where a backend's own kernels miss them.

A backend's adapter names the rows whose kernels miss some (``Backend.corrects``). The first GPU
run found CuPy 14's (tools/gpu_check.py, the official suite on ``namespace(cupy)``):

- ``remainder`` of a finite number by an infinite one is NaN there; the standard (as NumPy) says
  ``x1``, or ``x2`` where the signs differ. A zero result is +0 there where the standard gives it
  the divisor's sign.
- complex ``log`` and ``log1p`` give NaN + NaN j where one part is infinite and the other NaN
  (the standard, C99's Annex G: +inf + NaN j);
- complex ``tanh`` gives NaN + NaN j at ±0 + inf j and ±0 + NaN j (±0 + NaN j);
- complex ``acosh`` gives NaN + NaN j at ±0 + NaN j (NaN + πj/2).

Those rows' impls call the kernel, then, where :func:`corrected` says so, put the standard's
values in with ``where``; a namespace over any other backend does not run them (they are marked
``where_corrected``: ``namespace/_eager.py``'s ``runs_impl``). The corrections are made of
standard functions only, so they run on any backend, the abstract one included: a projection
for CuPy's arrays (whose abstract arrays stand for CuPy's, ``_abstract.modelled``) charges what
a correction allocates, and ``compile`` records its calls.
"""

from __future__ import annotations

import math
from typing import Any

from ..._abstract import modelled
from .._rules.dtypes import isdtype
from ..nn.windows import caps


def corrected(bk: Any, row: str) -> bool:
    """Whether backend namespace ``bk`` needs row ``row``'s special values put right; the
    abstract backend as the backend the running projection or trace stands for."""
    c = caps(bk)
    if c.abstract:
        target = modelled()
        return target is not None and row in target.corrects
    return row in c.corrects


def remainder(bk: Any, out: Any, x1: Any, x2: Any) -> Any:
    """``out = remainder(x1, x2)`` (real floating) with the standard's values by an infinity and
    the divisor's sign on a zero result."""
    a, b = bk.asarray(x1, dtype=out.dtype), bk.asarray(x2, dtype=out.dtype)
    by_infinity = bk.isinf(b) & bk.isfinite(a)
    differ = (a != 0) & ((a < 0) != (b < 0))
    out = bk.where(by_infinity, bk.where(differ, b, a), out)
    return bk.where(out == 0, bk.copysign(out, b), out)


def log(bk: Any, out: Any, x: Any) -> Any:
    """``out = log(x)`` or ``log1p(x)`` (complex): +inf + NaN j where one part of ``x`` is
    infinite and the other NaN."""
    re, im = bk.real(x), bk.imag(x)
    at = (bk.isinf(re) & bk.isnan(im)) | (bk.isnan(re) & bk.isinf(im))
    return bk.where(at, bk.asarray(complex(math.inf, math.nan), dtype=out.dtype), out)


def tanh(bk: Any, out: Any, x: Any) -> Any:
    """``out = tanh(x)`` (complex): ±0 + NaN j at ±0 + inf j and ±0 + NaN j."""
    re, im = bk.real(x), bk.imag(x)
    # re - (0 + NaN j): the real part keeps re's sign (-0 - 0 is -0); no Python -0.0 involved,
    # whose sign CuPy's conversion of a scalar drops
    zero_nan = bk.astype(re, out.dtype) - complex(0.0, math.nan)
    return bk.where((re == 0) & ~bk.isfinite(im), zero_nan, out)


def acosh(bk: Any, out: Any, x: Any) -> Any:
    """``out = acosh(x)`` (complex): NaN + πj/2 at ±0 + NaN j."""
    re, im = bk.real(x), bk.imag(x)
    value = bk.asarray(complex(math.nan, math.pi / 2), dtype=out.dtype)
    return bk.where((re == 0) & bk.isnan(im), value, out)


def complex_row(name: str, fix: Any) -> Any:
    """The impl of unary row ``name``: the backend's kernel, then ``fix`` for complex input on
    a backend that needs it."""

    def impl(bk: Any, x: Any) -> Any:
        out = getattr(bk, name)(x)
        if isdtype(bk, out.dtype, "complex floating") and corrected(bk, name):
            return fix(bk, out, x)
        return out

    impl.__name__ = f"_{name}"
    impl.where_corrected = True  # type: ignore[attr-defined]
    return impl


def remainder_row(bk: Any, x1: Any, x2: Any) -> Any:
    # the impl of ``remainder``: the backend's kernel, then :func:`remainder` for real floating
    # operands on a backend that needs it
    out = bk.remainder(x1, x2)
    if isdtype(bk, out.dtype, "real floating") and corrected(bk, "remainder"):
        return remainder(bk, out, x1, x2)
    return out


# Only where a backend names the row in ``Backend.corrects`` (and on the abstract backends, which
# ask the backend they stand for) does a namespace run these impls; every other backend calls
# its function of the row's name directly, at no cost (namespace/_eager.py: runs_impl).
remainder_row.where_corrected = True  # type: ignore[attr-defined]
