"""Elementwise functions: one row each, with the dtype category the standard asks of its inputs.

A row without an ``impl`` calls the backend function of the same name. The few rows with an
``impl`` honour special cases of the standard that some backends (NumPy) get wrong: each calls
the backend, and only for the dtypes concerned corrects the special cases with ``where``.

Derivatives are written by hand (these are the hot rows). Complex convention (JAX's): the
cotangent of a complex input pairs with its tangent through ``Re(ct * t)`` (no conjugate). For a
holomorphic f the VJP is ``g * f'(x)`` and the JVP ``t * f'(x)``, the same expressions as for
reals; non-holomorphic functions (abs, conj, real, imag, sign) say so. For a real loss L(z) the
gradient is ``dL/dx - i dL/dy``; PyTorch returns its conjugate. A Python-scalar operand never
gets a gradient nor a tangent (None): no term is computed for it. Broadcasting is not handled by
the rules: the engines reduce every cotangent to its input's shape and broadcast a tangent to
the output's shape.

Rows batch by broadcasting: batched operands get ones after the batch axis up to the common
rank, unbatched ones broadcast as they are. A shape rule gives the broadcast shape of the array
arguments and the dtype NumPy's own function gives (probed on one-element arrays); a result is
laid out in its operands' memory order, as NumPy's (order "K"): transposed in, transposed out.
``real``/``imag`` of complex input are views, as in NumPy; ``real`` of a real array is that
array. The transients are the iterator's buffers for broadcast, cast or differently laid-out
operands.
"""

from . import arithmetic, comparison, complex_parts, exponential, rounding, trigonometric

__all__ = ["arithmetic", "comparison", "complex_parts", "exponential", "rounding", "trigonometric"]
