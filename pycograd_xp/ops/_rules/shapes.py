"""Helpers shared by the shape rules: making abstract outputs and views, broadcasting, reduced
shapes, and the output dtype of a backend function found by calling it on one-element arrays
(no data: a probe of the backend's own dtype rules, never of its values)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..._abstract import BUFFER_ELEMENTS as BUFFER_ELEMENTS  # the rules' import of it
from ..._abstract import NATIVE_OFF, AbstractArray
from ..._abstract import measured_layouts as measured_layouts
from ..._state import STACK
from .vjp import norm_axes


def is_array(x: Any) -> bool:
    return isinstance(x, AbstractArray)


def new(shape: Any, dtype: Any) -> AbstractArray:
    """A fresh array that owns its bytes."""
    return AbstractArray(shape, dtype)


def data_dependent(what: str) -> None:
    """An output's shape depends on values the abstract arrays do not have (only an upper
    bound is known): the projection goes on with the bound; a compile trace stops here."""
    recorder = STACK.recorder
    if recorder is not None:
        recorder.data_dependent(what)


# Constants from outside up to this many elements keep their values (see AbstractArray.value).
KEEP_VALUES = 1 << 16


def constant(data: Any) -> AbstractArray:
    """An abstract array for data given from outside (a NumPy array, or any array-like)."""
    data = np.asarray(data)
    return AbstractArray(data.shape, data.dtype, value=data if data.size <= KEEP_VALUES else None)


def as_abstract(x: Any) -> Any:
    """Arrays from outside (NumPy arrays in an index, saved on the tape) as abstract arrays."""
    if isinstance(x, AbstractArray) or not (hasattr(x, "shape") and hasattr(x, "dtype")):
        return x
    return constant(x)


def broadcast_view(x: Any) -> bool:
    """Whether ``x`` is a view with zero strides (it has more elements than the array it
    views: ``broadcast_to``, an expanded cotangent)."""
    return isinstance(x, AbstractArray) and x.base is not None and x.size > x.base.size


def elementwise_out(shape: Any, dtype: Any, *operands: Any) -> AbstractArray:
    """A new elementwise result: NumPy lays it out in the operands' memory order (order "K"),
    so a transposed operand of the full shape gives a transposed result, and so do operands
    that are all broadcast views (``g + g`` of an expanded cotangent: the zero-stride axis
    becomes the fastest). The abstract arrays know C order or not: either case makes the
    result "not C order"; a broadcast view beside an array in C order gives C order."""
    shape = tuple(shape)
    arrays = [x for x in operands if isinstance(x, AbstractArray)]
    full = [x for x in arrays if x.shape == shape]
    # an operand that broadcasts along its axes of length 1 counts too: NumPy orders the
    # result by every operand's strides (an F-ordered w viewed as (30, 1, 30, 1) times
    # another such view gave a product in neither C nor F order; np.kron's reshape copied it)
    strided = any(
        not x.contiguous and not broadcast_view(x) and math.prod(x.shape) > 1 for x in arrays
    )
    only_broadcast = bool(full) and all(broadcast_view(x) for x in full)
    return AbstractArray(shape, dtype, contiguous=not (strided or only_broadcast))


def long_axes(shape: Any) -> int:
    """How many axes of ``shape`` are longer than 1 (a new array with at most one is in C order
    whatever its strides: NumPy's flags ignore the others)."""
    return sum(1 for d in shape if d > 1)


def in_operands_order(shape: Any, dtype: Any, *operands: Any) -> AbstractArray:
    """A new result NumPy lays out in its operands' memory order (order "K") without
    broadcasting them (that is :func:`elementwise_out`): a transform, a pool, a difference, a
    roll, an activation or a normalisation of an array in Fortran order is in Fortran order,
    whatever the result's shape. The abstract arrays know C order or not: the result is
    in C order where every operand of more than one element is (or it has at most one axis
    longer than 1), else taken as not (tests/memory/test_layouts.py checks each row's claim
    against NumPy's result)."""
    shape = tuple(shape)
    c = long_axes(shape) <= 1 or all(
        x.contiguous for x in operands if isinstance(x, AbstractArray) and x.size > 1
    )
    return AbstractArray(shape, dtype, contiguous=c)


def not_in_c_order(shape: Any, dtype: Any) -> AbstractArray:
    """A new result NumPy lays out transposed whatever its operands' layout (``einsum``'s
    iterator, an inverse's transpose times a scale): not in C order unless it has at most one
    axis longer than 1."""
    shape = tuple(shape)
    return AbstractArray(shape, dtype, contiguous=long_axes(shape) <= 1)


def view(
    x: AbstractArray,
    shape: Any,
    dtype: Any = None,
    contiguous: bool = True,
    ordered: bool = False,
    transposed: bool = False,
) -> AbstractArray:
    """A view of ``x``'s memory (owns nothing, keeps ``x``'s buffer alive); ``ordered``: its
    axes keep ``x``'s stride order (a basic slice, a flip), so it is in C order if ``x`` is;
    ``transposed``: it swaps ``x``'s last two axes, so it is a matrix transpose of an array in
    C order if ``x`` is one."""
    return AbstractArray(
        shape,
        x.dtype if dtype is None else dtype,
        base=x,
        contiguous=contiguous and x.contiguous,
        ordered=ordered and x.ordered,
        transposed=transposed and x.contiguous,
    )


def broadcast(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(np.broadcast_shapes(*shapes))


def reduced(shape: tuple[int, ...], axis: Any, keepdims: bool) -> tuple[int, ...]:
    axes = norm_axes(axis, len(shape))
    if keepdims:
        return tuple(1 if i in axes else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in axes)


def tiny(x: Any) -> Any:
    """A one-element stand-in for ``x`` with its dtype and rank (Python values pass)."""
    if isinstance(x, AbstractArray):
        return np.ones((1,) * x.ndim, dtype=x.dtype)
    if isinstance(x, list | tuple):
        return type(x)(tiny(e) for e in x)
    return x


def _key(x: Any) -> Any:
    """What the dtype of a call can depend on in ``x``: an abstract array's rank and dtype, a
    Python value itself (its type and value: NumPy refuses an out-of-range integer)."""
    if isinstance(x, AbstractArray):
        return (x.ndim, x.dtype)
    if isinstance(x, list | tuple):
        return (type(x), tuple(_key(e) for e in x))
    return (type(x), x)


# probe_dtype's answers, by function and argument keys: a projection asks the same few
# thousand times (each backend call of each schedule memory.within tries)
_PROBED: dict[Any, np.dtype] = {}


def probe_dtype(fn: Any, *args: Any, **kwargs: Any) -> np.dtype:
    """The dtype ``fn`` (a NumPy-backend function) gives for arguments of these dtypes."""
    try:
        key: Any = (fn, _key(args), tuple((k, _key(v)) for k, v in kwargs.items()))
        found = _PROBED.get(key)
    except TypeError:  # an unhashable argument (a dtype object of another library, ...)
        key, found = None, None
    if found is not None:
        return found
    with np.errstate(all="ignore"):
        out = fn(*tiny(args), **{k: tiny(v) for k, v in kwargs.items()})
    dtype = np.dtype(out.dtype)
    if key is not None and len(_PROBED) < 65536:
        _PROBED[key] = dtype
    return dtype


def probe_dtypes(fn: Any, *args: Any, **kwargs: Any) -> list[np.dtype]:
    """The dtypes of the outputs of a function that returns a tuple of arrays."""
    with np.errstate(all="ignore"):
        out = fn(*tiny(args), **{k: tiny(v) for k, v in kwargs.items()})
    return [np.dtype(o.dtype) for o in out]


# Some backend calls allocate outside the heap Python and NumPy track (LAPACK workspaces,
# pocketfft's buffers and plans, the sort buffers and hash tables of C++ code): real memory that
# tracemalloc does not see. The rules count it through ``native`` so that the projection bounds
# the process's real peak; set COUNT_NATIVE to False to project on tracemalloc's scale only.
# ``native`` is for that workspace only: an array NumPy's Python code makes inside a function
# (``inv``'s result in ``matrix_power``, the SVD's factors in ``pinv``) is traced memory.
COUNT_NATIVE = True


def native(nbytes: float) -> int:
    """``nbytes`` allocated by C code outside Python's and NumPy's tracked heap (LAPACK and
    pocketfft workspaces, C++ sort buffers): part of the call's transients. Each rule is
    evaluated twice, once as it is and once with every ``native`` term 0
    (:func:`pycograd_xp._abstract.transients`): the second gives what tracemalloc alone will see
    (``Projection.traced_peak_bytes``), so a native term may stand anywhere in a rule's
    expression (inside a ``max`` too)."""
    if not COUNT_NATIVE or NATIVE_OFF[0]:
        return 0
    return int(nbytes)


def in_turn(traced: int, total: int) -> int:
    """The transients of a call whose tracked and native allocations peak at different
    moments (a Python copy, then a LAPACK workspace): ``total`` bytes at the most in all, and
    at the most ``traced`` of them seen by tracemalloc."""
    return traced + native(max(total, traced) - traced)


def size_bytes(*xs: Any) -> int:
    """The bytes of full copies of the arrays among ``xs`` (views count whole)."""
    return sum(math.prod(x.shape) * x.dtype.itemsize for x in xs if isinstance(x, AbstractArray))


def ufunc_buffers(out: Any, *operands: Any) -> int:
    """The bytes of the buffers NumPy's iterator allocates to compute ``out`` from
    ``operands`` (arrays and Python scalars).

    Measured on NumPy 2 (float64, 15,050 elements): an operand of another shape (broadcast) or
    dtype (cast; a 0-d array's dtype takes part in the promotion, NEP 50) costs one buffer; so
    does a view with zero strides (``broadcast_to``) or negative ones (``flip``), even alone; a
    transposed view costs one beside an operand in C order and none alone or beside its like; a
    strided slice costs none beside C order. The abstract arrays know only C order or not, so
    every view that is not in C order counts one buffer: never less than NumPy takes.

    The loop's dtype: the operands' promotion, Python scalars included (NEP 50: an int64 array
    compared with 2.5 loops in float64); an arithmetic result in another dtype (``divide`` of
    integers, ``sqrt`` of an integer array) loops in the result's dtype. An operand in another
    dtype than the loop's is cast through a buffer.
    """
    every = [x for x in operands if isinstance(x, AbstractArray)]
    arrays = [x for x in every if x.ndim > 0]
    if not arrays or not isinstance(out, AbstractArray):
        return 0
    scalars = [x for x in operands if type(x) in (bool, int, float, complex)]
    op = np.result_type(*(x.dtype for x in every), *scalars)
    loop = op if out.dtype.kind == "b" else out.dtype
    k = sum(1 for x in arrays if x.shape != out.shape or x.dtype != loop or not x.contiguous)
    # a result written into a view not in C order (an in-place operator on a strided slice, as a
    # compiled replay runs it) is written back through a buffer of its own: measured 64 kB for
    # a strided slice += an array in C order (8192 float32 each), 95 kB with a strided operand
    k += not out.contiguous
    return k * min(out.size, BUFFER_ELEMENTS) * max(loop.itemsize, op.itemsize)
