"""The signatures ``test_checking.py`` draws: for each function of the standard (``linalg`` and
``fft`` included), ``SIGNATURES[name](draw, name) -> (args, kwargs)``.

Arrays come from ``hypothesis.extra.array_api`` in the dtypes the row takes (float32 beside
float64, the complex dtypes where taken), in shapes of up to three axes with 0- and 1-long
sides, and in a drawn layout: C order, Fortran order, the last two axes transposed, reversed
along the first axis, every other row of a larger array, or a zero-stride broadcast (the
values kept where a function needs them: a solve's matrix stays invertible). Matrices are
finite and bounded (LAPACK's complex SVD loops forever on an infinite element) and, where the
function needs it, well posed (``solve``, ``inv``: diagonally dominant; ``cholesky``, ``eigh``:
Hermitian positive definite).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra.array_api import make_strategies_namespace

from conformance.memory_checking import checking_namespace
from pycograd_xp.namespace._array import make
from pycograd_xp.ops import REGISTRY

XP = checking_namespace(np)
XPS = make_strategies_namespace(XP, api_version="2024.12")
SHAPES = XPS.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=12)
ARRAY = type(XP.asarray(0.0))

DTYPES = {
    "all": XPS.scalar_dtypes(),
    None: XPS.scalar_dtypes(),
    "boolean": XPS.boolean_dtypes(),
    "complex floating-point": XPS.complex_dtypes(),
    "floating-point": XPS.floating_dtypes() | XPS.complex_dtypes(),
    "integer": XPS.integer_dtypes() | XPS.unsigned_integer_dtypes(),
    "integer or boolean": XPS.integer_dtypes() | XPS.boolean_dtypes(),
    "numeric": XPS.numeric_dtypes(),
    "real floating-point": XPS.floating_dtypes(),
    "real numeric": XPS.real_dtypes(),
}
LAYOUTS = ("C", "C", "F", "T", "reversed", "rows", "broadcast")


def row(name: str) -> Any:
    """The row of ``name`` (``linalg.matmul`` is ``matmul``'s)."""
    return REGISTRY.get(name) or REGISTRY[name.removeprefix("linalg.")]


def _dtypes(name: str) -> st.SearchStrategy:
    return DTYPES[row(name).dtypes]


def _laid_out(a: np.ndarray, how: str) -> np.ndarray:
    """``a``'s values in layout ``how`` (a view where the layout is one); a layout the array
    cannot take (a transpose of a vector) leaves it C-ordered."""
    if how == "F" and a.ndim >= 2:
        return np.asfortranarray(a)
    if how == "T" and a.ndim >= 2:
        return np.swapaxes(np.ascontiguousarray(np.swapaxes(a, -1, -2)), -1, -2)
    if how == "reversed" and a.ndim >= 1:
        return np.flip(np.flip(a, 0).copy(), 0)
    if how == "rows" and a.ndim >= 1:
        return np.repeat(a, 2, axis=0)[::2]
    if how == "broadcast" and a.ndim >= 1 and a.shape[0] > 1:
        return np.broadcast_to(a[:1], a.shape)
    return a


def _view(draw: Any, x: Any, keep_values: bool = False) -> Any:
    """``x`` in a drawn layout (``keep_values``: none that changes the values, a broadcast)."""
    how = draw(st.sampled_from(LAYOUTS[:-1] if keep_values else LAYOUTS))
    return make(ARRAY, _laid_out(x._data, how))


# Every side longer than 1 is multiplied by one factor drawn for the whole call (so that the
# arguments stay broadcastable, and matrices conformable): 1 gives hypothesis's small arrays,
# the others arrays of tens of thousands of elements, where a rule short by a copy shows beyond
# the projection's allowances for Python's objects (24 kB, and 8 kB a call).
SCALES = (1, 1, 4, 16)
MAX_ELEMENTS = 50_000
_SCALE = [1]


def draw_call(draw: Any, name: str) -> tuple[tuple, dict]:
    """``name``'s arguments, at a drawn scale."""
    _SCALE[0] = draw(st.sampled_from(SCALES))
    return SIGNATURES[name](draw, name)


def big(shape: tuple[int, ...]) -> tuple[int, ...]:
    """``shape`` at the call's scale (as it is where that would exceed ``MAX_ELEMENTS``)."""
    k = _SCALE[0]
    scaled = tuple(d * k if d > 1 else d for d in shape)
    return scaled if int(np.prod(scaled)) <= MAX_ELEMENTS else tuple(shape)


def _n(n: int) -> int:
    """A matrix side at the call's scale."""
    return n * _SCALE[0] if n > 1 and (n * _SCALE[0]) ** 2 <= MAX_ELEMENTS else n


def _array(
    draw: Any, name: str, shape: Any = SHAPES, dtype: Any = None, scale: bool = True, **kw: Any
) -> Any:
    if isinstance(shape, st.SearchStrategy):
        shape = draw(shape)
    shape = big(shape) if scale else tuple(shape)
    x = draw(XPS.arrays(dtype=dtype if dtype is not None else _dtypes(name), shape=shape, **kw))
    return _view(draw, x)


def _axis(draw: Any, x: Any, none: bool = True) -> Any:
    choices = list(range(-x.ndim, x.ndim)) + ([None] if none else [])
    return draw(st.sampled_from(choices)) if choices else None


def _bounded(dtype: Any) -> Any:
    """Finite, bounded elements of ``dtype`` (None: hypothesis's own)."""
    kind = np.dtype(dtype).kind
    if kind == "f":
        return {"min_value": -4, "max_value": 4, "allow_nan": False}
    if kind == "c":
        return st.complex_numbers(
            max_magnitude=4,
            allow_nan=False,
            allow_infinity=False,
            width=8 * np.dtype(dtype).itemsize,
        )
    return None


# -- elementwise, reductions, manipulation ---------------------------------------------------------


def _unary(draw: Any, name: str) -> tuple[tuple, dict]:
    return (_array(draw, name),), {}


def _binary(draw: Any, name: str) -> tuple[tuple, dict]:
    shapes = draw(XPS.mutually_broadcastable_shapes(2, max_dims=3, max_side=12))
    dtype = draw(_dtypes(name))
    return (
        _array(draw, name, shapes.input_shapes[0], dtype),
        _array(draw, name, shapes.input_shapes[1], dtype),
    ), {}


def _reduction(draw: Any, name: str) -> tuple[tuple, dict]:
    x = _array(draw, name)
    return (x,), {"axis": _axis(draw, x), "keepdims": draw(st.booleans())}


def _along(draw: Any, name: str) -> tuple[tuple, dict]:
    x = _array(draw, name, XPS.array_shapes(min_dims=1, max_dims=3, max_side=12))
    return (x,), {"axis": _axis(draw, x, none=False)}


def _cumulative(draw: Any, name: str) -> tuple[tuple, dict]:
    x = _array(draw, name, XPS.array_shapes(min_dims=1, max_dims=3, max_side=12))
    kwargs: dict[str, Any] = {
        "axis": _axis(draw, x, none=x.ndim == 1),
        "include_initial": draw(st.booleans()),
    }
    if draw(st.booleans()):
        kwargs["dtype"] = draw(_dtypes(name))
    return (x,), kwargs


def _argreduction(draw: Any, name: str) -> tuple[tuple, dict]:
    x = _array(draw, name, XPS.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=12))
    return (x,), {"axis": _axis(draw, x), "keepdims": draw(st.booleans())}


def _unstack(draw: Any, name: str) -> tuple[tuple, dict]:
    x = _array(draw, name, XPS.array_shapes(min_dims=1, max_dims=3, max_side=8))
    return (x,), {"axis": _axis(draw, x, none=False)}


def _squeeze(draw: Any, name: str) -> tuple[tuple, dict]:
    shape = draw(XPS.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=8))
    ones = draw(st.lists(st.integers(0, len(shape)), min_size=1, max_size=2, unique=True))
    for i in sorted(ones):
        shape = (*shape[:i], 1, *shape[i:])
    x = _array(draw, name, shape)
    axes = tuple(i for i, d in enumerate(x.shape) if d == 1)
    return (x, axes if len(axes) > 1 and draw(st.booleans()) else axes[0]), {}


def _take_along_axis(draw: Any, name: str) -> tuple[tuple, dict]:
    x = _array(draw, name, XPS.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=8))
    axis = _axis(draw, x, none=False)
    n = x.shape[axis]
    shape = list(x.shape)
    shape[axis] = draw(st.integers(0, 10))
    idx = draw(
        XPS.arrays(
            dtype=XP.int64, shape=tuple(shape), elements={"min_value": -n, "max_value": n - 1}
        )
    )
    return (x, _view(draw, idx)), {"axis": axis}


def _meshgrid(draw: Any, name: str) -> tuple[tuple, dict]:
    dtype = draw(_dtypes(name))
    k = draw(st.integers(1, 3))
    sizes = [draw(st.integers(0, 10)) for _ in range(k)]
    if int(np.prod([big((d,))[0] for d in sizes])) <= MAX_ELEMENTS:
        sizes = [big((d,))[0] for d in sizes]
    vectors = [_array(draw, name, (d,), dtype, scale=False) for d in sizes]
    return tuple(vectors), {"indexing": draw(st.sampled_from(["xy", "ij"]))}


def _broadcast_arrays(draw: Any, name: str) -> tuple[tuple, dict]:
    k = draw(st.integers(1, 3))
    shapes = draw(XPS.mutually_broadcastable_shapes(k, max_dims=3, max_side=8))
    dtype = draw(_dtypes(name))
    return tuple(_array(draw, name, s, dtype) for s in shapes.input_shapes), {}


def _isin(draw: Any, name: str) -> tuple[tuple, dict]:
    dtype = draw(XPS.real_dtypes())
    x1 = _array(draw, name, dtype=dtype)
    x2 = _array(draw, name, dtype=dtype)
    return (x1, x2), {"invert": draw(st.booleans())}


def _searchsorted(draw: Any, name: str) -> tuple[tuple, dict]:
    dtype = draw(XPS.real_dtypes())
    y = _array(draw, name, XPS.array_shapes(min_dims=1, max_dims=1, max_side=12), dtype)
    kwargs: dict[str, Any] = {"side": draw(st.sampled_from(["left", "right"]))}
    if draw(st.booleans()):
        kwargs["sorter"] = make(ARRAY, np.argsort(y._data, kind="stable"))
    else:
        y = make(ARRAY, np.sort(y._data))
    return (y, _array(draw, name, dtype=dtype)), kwargs


def _diff(draw: Any, name: str) -> tuple[tuple, dict]:
    x = _array(draw, name, XPS.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=8))
    axis = _axis(draw, x, none=False)
    kwargs: dict[str, Any] = {"axis": axis, "n": draw(st.integers(0, 3))}
    for side in ("prepend", "append"):
        if draw(st.booleans()):
            shape = list(x.shape)
            shape[axis] = draw(st.integers(0, 3))
            kwargs[side] = _array(draw, name, tuple(shape), x.dtype, scale=False)
    return (x,), kwargs


def _special(draw: Any, name: str) -> tuple[tuple, dict]:
    """The functions whose other arguments are of their own."""
    x = _array(draw, name)
    if name in ("flip",):
        return (x,), {"axis": _axis(draw, x)}
    if name == "roll":
        return (x,), {"shift": draw(st.integers(-5, 5)), "axis": _axis(draw, x)}
    if name == "expand_dims":
        return (x,), {"axis": draw(st.integers(-x.ndim - 1, x.ndim))}
    if name == "reshape":
        return (x, (-1,)), {}
    if name == "permute_dims":
        return (x, tuple(draw(st.permutations(range(x.ndim))))), {}
    if name == "moveaxis":
        return (x, _axis(draw, x, none=False), _axis(draw, x, none=False)), {}
    if name == "tile":
        return (x, tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=3)))), {}
    if name == "repeat":
        return (x, draw(st.integers(0, 3))), {"axis": _axis(draw, x)}
    if name == "astype":
        return (x, draw(XPS.scalar_dtypes())), {}
    if name == "clip":
        return (x,), {"min": draw(st.sampled_from([None, 0])), "max": draw(st.just(None))}
    if name in ("concat", "stack"):
        return ([x, x],), {"axis": _axis(draw, x, none=name == "concat")}
    if name == "broadcast_to":
        return (x, (2, *x.shape)), {}
    if name in ("nonzero",):
        return (x,), {}
    if name == "where":
        return (x != 0, x, x), {}
    if name == "take":
        y = _array(draw, name, XPS.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=8))
        axis = _axis(draw, y, none=False)
        return (y, XP.asarray([0, y.shape[axis] - 1])), {"axis": axis}
    return (x,), {}


# -- creation --------------------------------------------------------------------------------------

CREATION_SHAPES = st.lists(st.integers(0, 12), min_size=0, max_size=3).map(tuple)


def _creation(draw: Any, name: str) -> tuple[tuple, dict]:
    shape = draw(CREATION_SHAPES.map(big) | st.integers(0, 40).map(lambda n: big((n,))[0]))
    kwargs: dict[str, Any] = {}
    if draw(st.booleans()):
        kwargs["dtype"] = draw(XPS.scalar_dtypes())
    if name == "full":
        fill = draw(st.sampled_from([0, 1, True, 2.5, 1 + 1j]))
        return (shape, fill), kwargs
    return (shape,), kwargs


def _like(draw: Any, name: str) -> tuple[tuple, dict]:
    x = _array(draw, name, dtype=XPS.scalar_dtypes())
    kwargs: dict[str, Any] = {}
    if draw(st.booleans()):
        kwargs["dtype"] = draw(XPS.scalar_dtypes())
    if name == "full_like":
        return (x, draw(st.sampled_from([0, 1, True]))), kwargs
    return (x,), kwargs


def _asarray(draw: Any, name: str) -> tuple[tuple, dict]:
    x = _array(draw, name, dtype=XPS.scalar_dtypes())
    obj = draw(st.sampled_from([x, x._data.tolist(), x._data]))
    kwargs: dict[str, Any] = {"copy": draw(st.sampled_from([None, True, False]))}
    if draw(st.booleans()):
        kwargs["dtype"] = draw(XPS.scalar_dtypes())
    return (obj,), kwargs


def _eye(draw: Any, name: str) -> tuple[tuple, dict]:
    n = _n(draw(st.integers(0, 24)))
    args = (n,) if draw(st.booleans()) else (n, _n(draw(st.integers(0, 24))))
    kwargs: dict[str, Any] = {"k": draw(st.integers(-5, 5))}
    if draw(st.booleans()):
        kwargs["dtype"] = draw(XPS.scalar_dtypes())
    return args, kwargs


def _arange(draw: Any, name: str) -> tuple[tuple, dict]:
    ints = draw(st.booleans())
    num = st.integers(-50, 50) if ints else st.floats(-50, 50, allow_nan=False)
    start, stop = draw(num), draw(num)
    step = draw(
        st.integers(1, 7).map(lambda s: s if stop >= start else -s)
        if ints
        else st.floats(0.25, 7).map(lambda s: s if stop >= start else -s)
    )
    kwargs: dict[str, Any] = {}
    if draw(st.booleans()):
        kwargs["dtype"] = draw(XPS.real_dtypes())
    if draw(st.booleans()):
        return (stop,), kwargs
    return (start, stop, step), kwargs


def _linspace(draw: Any, name: str) -> tuple[tuple, dict]:
    start = draw(st.floats(-50, 50, allow_nan=False) | st.integers(-50, 50))
    stop = draw(st.floats(-50, 50, allow_nan=False) | st.integers(-50, 50))
    kwargs: dict[str, Any] = {"endpoint": draw(st.booleans())}
    if draw(st.booleans()):
        kwargs["dtype"] = draw(XPS.floating_dtypes() | XPS.complex_dtypes())
    return (start, stop, big((draw(st.integers(0, 40)),))[0]), kwargs


def _triangle(draw: Any, name: str) -> tuple[tuple, dict]:
    shape = draw(XPS.array_shapes(min_dims=2, max_dims=3, min_side=0, max_side=8))
    return (_array(draw, name, shape),), {"k": draw(st.integers(-3, 3))}


# -- linear algebra --------------------------------------------------------------------------------


def _matrix(
    draw: Any, name: str, rows: int, cols: int, dtype: Any = None, keep_values: bool = False
) -> Any:
    batch = draw(st.sampled_from([(), (), (2,), (1, 2)]))
    dtype = dtype if dtype is not None else draw(_dtypes(name))
    shape = (*batch, _n(rows), _n(cols))
    x = draw(XPS.arrays(dtype=dtype, shape=shape, elements=_bounded(dtype)))
    return _view(draw, x, keep_values)


def _well_posed(x: Any, how: str) -> Any:
    """``x`` made invertible (``"invertible"``: diagonally dominant) or Hermitian positive
    definite (``"definite"``), in its layout; values only (the layout is re-drawn by the
    caller)."""
    a = x._data
    n = a.shape[-1]
    eye = np.eye(n, dtype=a.dtype)
    if how == "definite":
        a = a @ np.conj(np.swapaxes(a, -1, -2)) + n * eye
    else:
        a = a + (4 * n + 1) * eye
    return make(ARRAY, a.astype(x._data.dtype))


def _linalg(draw: Any, name: str) -> tuple[tuple, dict]:
    n = draw(st.integers(0, 8))
    m = draw(st.integers(0, 8))
    short = name.removeprefix("linalg.")
    if short in ("inv", "det", "slogdet", "matrix_power", "eig", "eigvals"):
        x = _matrix(draw, name, n, n, keep_values=True)
        if short in ("inv",) or (short == "matrix_power" and draw(st.booleans())):
            x = _view(draw, _well_posed(x, "invertible"), keep_values=True)
        if short == "matrix_power":
            return (x, draw(st.integers(-2, 3))), {}
        return (x,), {}
    if short in ("cholesky", "eigh", "eigvalsh"):
        x = _view(draw, _well_posed(_matrix(draw, name, n, n), "definite"), keep_values=True)
        return (x,), {"upper": draw(st.booleans())} if short == "cholesky" else {}
    if short == "solve":
        a = _view(draw, _well_posed(_matrix(draw, name, n, n), "invertible"), keep_values=True)
        n = a.shape[-1]
        b_shape = (*a.shape[:-2], n, _n(m)) if draw(st.booleans()) or a.ndim > 2 else (n,)
        b = _array(draw, name, b_shape, a.dtype, scale=False, elements=_bounded(a.dtype))
        return (a, b), {}
    if short in ("svd", "svdvals", "pinv", "matrix_rank", "qr", "matrix_transpose", "diagonal"):
        x = _matrix(draw, name, n, m)
        if short == "svd":
            return (x,), {"full_matrices": draw(st.booleans())}
        if short == "qr":
            return (x,), {"mode": draw(st.sampled_from(["reduced", "complete"]))}
        if short in ("pinv", "matrix_rank") and draw(st.booleans()):
            return (x,), {"rtol": draw(st.sampled_from([1e-3, 0.5]))}
        if short == "diagonal":
            return (x,), {"offset": draw(st.integers(-3, 3))}
        return (x,), {}
    if short == "trace":
        x = _matrix(draw, name, n, m)
        kwargs: dict[str, Any] = {"offset": draw(st.integers(-3, 3))}
        if draw(st.booleans()):
            kwargs["dtype"] = draw(XPS.numeric_dtypes())
        return (x,), kwargs
    if short == "matrix_norm":
        x = _matrix(draw, name, n, m)
        ord_ = draw(st.sampled_from(["fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf]))
        return (x,), {"ord": ord_, "keepdims": draw(st.booleans())}
    if short == "vector_norm":
        x = _array(draw, name)
        axis = draw(st.sampled_from([None, _axis(draw, x)] + ([(0, -1)] if x.ndim >= 2 else [])))
        ord_ = draw(st.sampled_from([2, 1, np.inf, -np.inf, 0, 3, -1, 0.5]))
        return (x,), {"axis": axis, "keepdims": draw(st.booleans()), "ord": ord_}
    if short == "cross":
        shapes = draw(XPS.mutually_broadcastable_shapes(2, max_dims=2, max_side=5))
        tail = draw(st.sampled_from([(), (2,)]))
        dtype = draw(_dtypes(name))
        a, b = (
            _array(draw, name, (*big(s), 3, *tail), dtype, scale=False) for s in shapes.input_shapes
        )
        return (a, b), {"axis": -1 - len(tail)}
    if short in ("matmul", "tensordot", "vecdot", "outer"):
        dtype = draw(_dtypes(name))
        if short == "outer":
            return (_array(draw, name, (n,), dtype), _array(draw, name, (m,), dtype)), {}
        if short == "vecdot":
            shapes = draw(XPS.mutually_broadcastable_shapes(2, max_dims=2, max_side=5))
            return tuple(_array(draw, name, (*s, m), dtype) for s in shapes.input_shapes), {}
        a = _matrix(draw, name, n, m, dtype)
        k = draw(st.integers(0, 6))
        b = _matrix(draw, name, m, k, dtype)
        if short == "matmul":
            return (a, b), {}
        a, b = (make(ARRAY, v._data[(0,) * (v.ndim - 2)]) for v in (a, b))  # matrices
        axes = draw(st.sampled_from([0, 1, ([1], [0]), ([-1], [-2])]))
        if axes == 0 and a.size * b.size > MAX_ELEMENTS:  # an outer product of scaled matrices
            axes = 1
        return (a, b), {"axes": axes}
    raise KeyError(name)


LINALG = [
    "linalg." + n
    for n in (
        "cholesky cross det diagonal eig eigh eigvals eigvalsh inv matmul matrix_norm "
        "matrix_power matrix_rank matrix_transpose outer pinv qr slogdet solve svd svdvals "
        "tensordot trace vecdot vector_norm"
    ).split()
]


# -- fft -------------------------------------------------------------------------------------------

NORMS = st.sampled_from(["backward", "ortho", "forward"])


def _fft(draw: Any, name: str) -> tuple[tuple, dict]:
    short = name.removeprefix("fft.")
    if short in ("fftfreq", "rfftfreq"):
        kwargs: dict[str, Any] = {"d": draw(st.sampled_from([1.0, 0.5]))}
        if draw(st.booleans()):
            kwargs["dtype"] = draw(XPS.floating_dtypes())
        return (draw(st.integers(1, 40)),), kwargs
    real_in = short in ("rfft", "rfftn", "ihfft", "fftshift", "ifftshift")
    dtype = draw(XPS.floating_dtypes() if real_in else XPS.complex_dtypes())
    if short in ("fftshift", "ifftshift"):
        dtype = draw(XPS.floating_dtypes() | XPS.complex_dtypes())
    shape = draw(XPS.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=10))
    x = _array(draw, name, shape, dtype, elements=_bounded(dtype))
    if short in ("fftshift", "ifftshift"):
        axes = draw(st.sampled_from([None, _axis(draw, x, none=False), tuple(range(x.ndim))]))
        return (x,), {"axes": axes}
    kwargs = {"norm": draw(NORMS)}
    if short.endswith("n"):  # fftn, ifftn, rfftn, irfftn
        k = draw(st.integers(1, x.ndim))
        axes = draw(st.permutations(range(-x.ndim, 0)))[:k]
        if draw(st.booleans()):
            kwargs["axes"] = tuple(axes)
            if draw(st.booleans()):
                kwargs["s"] = tuple(draw(st.integers(1, 12)) for _ in axes)
        return (x,), kwargs
    kwargs["axis"] = _axis(draw, x, none=False)
    if draw(st.booleans()):
        kwargs["n"] = draw(st.integers(1, 16))
    return (x,), kwargs


FFT = [
    "fft." + n
    for n in (
        "fft ifft fftn ifftn rfft irfft rfftn irfftn hfft ihfft fftfreq rfftfreq fftshift ifftshift"
    ).split()
]


# -- the table -------------------------------------------------------------------------------------

UNARY = [n for n, p in REGISTRY.items() if p.kind == "unary"]
BINARY = [n for n, p in REGISTRY.items() if p.kind == "binary"]
SIGNATURES: dict[str, Callable[[Any, str], tuple[tuple, dict]]] = {
    **dict.fromkeys(UNARY, _unary),
    **dict.fromkeys(BINARY, _binary),
    **dict.fromkeys(["sum", "prod", "mean", "max", "min", "std", "var", "all", "any"], _reduction),
    **dict.fromkeys(["count_nonzero"], _reduction),
    **dict.fromkeys(["argmax", "argmin"], _argreduction),
    **dict.fromkeys(["sort", "argsort"], _along),
    **dict.fromkeys(["cumulative_sum", "cumulative_prod"], _cumulative),
    **dict.fromkeys(["unique_all", "unique_counts", "unique_inverse", "unique_values"], _unary),
    **dict.fromkeys(
        "flip roll expand_dims reshape permute_dims moveaxis tile repeat astype clip concat "
        "stack broadcast_to nonzero where take".split(),
        _special,
    ),
    "unstack": _unstack,
    "squeeze": _squeeze,
    "take_along_axis": _take_along_axis,
    "meshgrid": _meshgrid,
    "broadcast_arrays": _broadcast_arrays,
    "isin": _isin,
    "searchsorted": _searchsorted,
    "diff": _diff,
    **dict.fromkeys(["zeros", "ones", "empty", "full"], _creation),
    **dict.fromkeys(["zeros_like", "ones_like", "empty_like", "full_like"], _like),
    "eye": _eye,
    "asarray": _asarray,
    "arange": _arange,
    "linspace": _linspace,
    **dict.fromkeys(["tril", "triu"], _triangle),
    **dict.fromkeys(["matrix_transpose", "matmul", "vecdot", "tensordot"], _linalg),
    **dict.fromkeys(LINALG, _linalg),
    **dict.fromkeys(FFT, _fft),
}

# the report's categories
CREATION = set(
    "zeros ones empty full zeros_like ones_like empty_like full_like eye arange linspace "
    "tril triu meshgrid asarray".split()
)
CATEGORIES = {
    "elementwise": set(UNARY) | set(BINARY),
    "linalg": set(LINALG) | {"matrix_transpose", "matmul", "vecdot", "tensordot"},
    "fft": set(FFT),
    "creation": CREATION,
}


def category(name: str) -> str:
    for c, names in CATEGORIES.items():
        if name in names:
            return c
    if name in ("sum prod mean max min std var all any count_nonzero argmax argmin".split()):
        return "reduction"
    if name in ("cumulative_sum cumulative_prod sort argsort searchsorted isin diff".split()):
        return "searching, sorting, cumulative"
    return "manipulation"


def function(name: str) -> Callable[..., Any]:
    """The checking namespace's function ``name`` (``"linalg.solve"``)."""
    scope, _, short = name.rpartition(".")
    return getattr(getattr(XP, scope) if scope else XP, short)
