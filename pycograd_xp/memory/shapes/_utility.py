"""Shape rules of ``all``, ``any`` and ``diff``."""

from __future__ import annotations

from ..._primitive import defshape
from ...ops._rules.shapes import is_array, new, reduced, size_bytes


def _truth(a, x, /, *, axis=None, keepdims=False):
    return new(reduced(x.shape, axis, keepdims), "bool")


def _diff(a, x, /, *, axis=-1, n=1, prepend=None, append=None, **_):
    shape = list(x.shape)
    ax = axis % x.ndim
    for end in (prepend, append):
        if is_array(end):
            shape[ax] += end.shape[ax] if end.ndim else 1
    shape[ax] = max(shape[ax] - n, 0)
    return new(shape, x.dtype)


def _diff_memory(out, x, /, *, axis=-1, n=1, prepend=None, append=None, **_):
    # NumPy concatenates prepend/append first, and each of the n differences is a new array
    joined = size_bytes(x, prepend, append) if is_array(prepend) or is_array(append) else 0
    return joined + (n - 1) * size_bytes(x)


defshape("all", _truth)
defshape("any", _truth)
defshape("diff", _diff, memory=_diff_memory)
