"""``astype`` passes cotangents through (the engine casts them back to the input's dtype and
takes the real part for a real input); the other data-type functions return no arrays."""

from __future__ import annotations

from .._primitive import defvjp, nondifferentiable

defvjp("astype", lambda ns, g, out, x, dtype, /, **kw: (g, None))
nondifferentiable("can_cast", "finfo", "iinfo", "isdtype", "result_type")
