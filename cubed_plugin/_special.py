"""scipy.special's functions over Cubed: one scipy call per block, lazily (the ``special``
capability of Cubed's :class:`~pycograd_xp.namespace.Backend`, read by the rows of
``pycograd_xp/ops/special.py``).

Every function is elementwise, so any chunking works: :func:`~cubed_plugin._blocks.core_apply`
with no core axes keeps the inputs' chunks (two operands of different chunkings are rechunked
to one) and broadcasts them as the standard does. A Python-scalar operand becomes a 0-d array
of the other's dtype and Spec. The NumPy function per block is the NumPy backend's own
(:func:`pycograd_xp.namespace.numpy_special`: scipy.special's, ``polygamma`` in its input's
dtype), so values are NumPy's to the bit.

Memory: scipy's ufuncs allocate nothing besides their output but the iterator's buffers when an
operand is cast or broadcast (8192 elements each); blocks declare those as temporaries.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from pycograd_xp.namespace import numpy_special

from ._blocks import Out, core_apply

# NumPy's ufunc iterator buffers this many elements of an operand it casts or broadcasts.
_BUFFER = 8192


def lookup(name: str) -> Callable[..., Any] | None:
    """scipy.special's ``name`` over Cubed arrays, or None (no scipy, or no such function)."""
    f = numpy_special(name)
    if f is None:
        return None
    if name == "polygamma":
        return _polygamma
    return functools.partial(_blockwise, name, f)


def _temps(ins: list, outs: list) -> int:
    shape, dtype = outs[0]
    per = min(math.prod(shape), _BUFFER) * np.dtype(dtype).itemsize
    return per * len(ins)


def _blockwise(name: str, f: Callable[..., Any], *args: Any) -> Any:
    import cubed

    arrays = [a for a in args if hasattr(a, "chunks")]
    dtype = np.result_type(*(a.dtype for a in arrays))
    like = arrays[0]
    args = tuple(
        a if hasattr(a, "chunks") else cubed.asarray(a, dtype=dtype, spec=like.spec) for a in args
    )
    shape = tuple(np.broadcast_shapes(*(tuple(a.shape) for a in args)))
    return core_apply(
        f"special.{name}",
        f,
        list(args),
        [() for _ in args],
        [Out(shape, (), dtype)],
        temps=_temps,
        what="no axis",
    )


def _polygamma(n: int, x: Any) -> Any:
    f = numpy_special("polygamma")
    assert f is not None  # lookup found it
    return core_apply(
        "special.polygamma",
        functools.partial(f, n),
        [x],
        [()],
        [Out(tuple(x.shape), (), x.dtype)],
        temps=_temps,
        what="no axis",
    )
