"""Complex parts (real, imag, conj): their rows and rules.

The conventions all elementwise rows share are in ``__init__.py``."""

from __future__ import annotations

from ..._primitive import unary
from .._rules.shapes import (
    view,
)
from .._rules.vjp import is_complex, to_complex
from ._kits import (
    broadcast_unary,
    on_tangent,
    smooth_unary,
)

# -- conj ----------------------------------------------------------------------------------------

conj = smooth_unary("conj", "numeric", lambda ns, v, out, x: ns.conj(v), saves=())


# -- imag ----------------------------------------------------------------------------------------

imag = unary("imag", "complex floating-point")
# imag(x) = Re(-i x): the cotangent of x is -i g.
imag.defvjp(lambda ns, g, out, x: (to_complex(ns, g) * (-1j),), saves=())
imag.defjvp(on_tangent(lambda ns, t, out, x: ns.imag(t) if is_complex(ns, t) else ns.zeros_like(t)))
imag.defbatch(broadcast_unary(imag))


@imag.defshape
def imag_shape(a, x, /):
    return view(x, x.shape, dtype=x.dtype.type(0).imag.dtype, contiguous=False)


# -- real ----------------------------------------------------------------------------------------

real = unary("real", "numeric")
# real: the cotangent is real and becomes the real part of a complex input's cotangent.
real.defvjp(lambda ns, g, out, x: (g,), saves=())
real.defjvp(on_tangent(lambda ns, t, out, x: ns.real(t) if is_complex(ns, t) else t))
real.defbatch(broadcast_unary(real))


@real.defshape
def real_shape(a, x, /):
    if x.dtype.kind != "c":
        return x
    return view(x, x.shape, dtype=x.dtype.type(0).real.dtype, contiguous=False)
