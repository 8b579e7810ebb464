"""What a backend can do: the :class:`Backend` record the rules and the engine ask (never a module
name), and :func:`capabilities`, the record behind a namespace. Resolving what the user passed to
``namespace()`` into one, and the adapters that refine it, are ``namespace/_backend.py``'s."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def _base(d: Any) -> Any:
    """The array that owns ``d``'s memory: NumPy-style ``.base`` chains, else ``d`` itself."""
    while getattr(d, "base", None) is not None:
        d = d.base
    return d


def _owns_buffer(d: Any) -> bool:
    return d.base is None


@dataclass(frozen=True)
class Backend:
    """A conforming namespace plus what it can do."""

    xp: Any  # the conforming namespace all calls go to (and first-order rules run on)
    name: str  # short, unique, used for our module's ``__name__`` ("numpy", "cubed", ...)
    array_type: type  # the backend's array class
    lazy: bool = False  # values are computed on demand: never print or branch on them
    chunked: bool = False  # arrays have ``.chunks``; ``broadcast_to`` takes ``chunks=``
    mutable: bool = False  # ``x[idx] = v`` writes the backend array in place
    # A write into a view (a slice or a reshape of ``a``) changes ``a`` too, as NumPy's views
    # do: rules may fill a buffer through its views. False where ``x[idx] = v`` rebinds ``x``
    # alone (vmap's batched arrays): a write into a view never reaches its base there.
    views_alias: bool = False
    # Arrays with a shape and a dtype and no data (pycograd_xp.memory): a function of another
    # namespace given one of its arrays hands the call over to it.
    abstract: bool = False
    # Duplicate integer indices in ``x[idx] = v``: the last write wins, deterministically.
    # Where False, a differentiated write with duplicates is refused (which one lands is
    # unspecified, so no gradient can say which value survived).
    ordered_writes: bool = False
    # ``index_add(size, flat_index, values)``: a length-``size`` vector with ``values`` summed
    # at ``flat_index``, exact and fast (NumPy's ``add.at``); None: a sort-based segment sum.
    index_add: Callable[..., Any] | None = None
    # ``windows(x, window_shape, axis)``: every window of ``x`` along ``axis`` as one strided
    # view, shape ``x.shape`` with ``axis`` shrunk, then ``window_shape`` (NumPy's
    # ``sliding_window_view``); convolutions take their columns from it with one copy. None:
    # the columns are a stack of strided slices.
    windows: Callable[..., Any] | None = None
    # ``select(condition, x1, x2, out=None)``: ``where`` with the same values bit for bit,
    # faster where the backend's own ``where`` branches per element (NumPy: a random mask costs
    # it a mispredicted branch per element, 10x a bitwise blend), written into ``out`` when
    # given (no overlap with the operands). None: the backend's ``where``.
    select: Callable[..., Any] | None = None
    # ``matmul_into(x1, x2, out)``: ``matmul(x1, x2)`` written into ``out`` (of the result's
    # shape and dtype; a strided view whose last axis is contiguous: a BLAS leading dimension),
    # returned (NumPy's ``out=``): a product straight into part of a larger buffer. None: none.
    matmul_into: Callable[..., Any] | None = None
    # ``block_sampler(xp, shape, chunks, dtype, draw_block)``: a lazy array whose block at
    # offset ``i`` is ``draw_block(i, block_shape)`` (random numbers on a chunked backend).
    block_sampler: Callable[..., Any] | None = None
    # ``like_kwargs(a, *more)``: keyword arguments that make a new constant (``zeros``, ``eye``,
    # ``asarray``) of the backend's own namespace belong with array ``a`` (and ``more``, the
    # other operands of a call: Cubed gives the Spec they meet on, since arrays of two Specs
    # cannot meet); None: none needed.
    like_kwargs: Callable[..., dict] | None = None
    # A GPU's (CuPy's): each call is a kernel launch, so the nn rows work on whole arrays, never
    # block by block through the CPU's caches (ops/nn/pieces.py); a product of stacks copies
    # each operand that is not C-ordered (its batched GEMM), which memory.project charges there.
    device: bool = False
    # The rows whose backend kernels miss special values the standard names (CuPy's
    # ``remainder``, complex ``log``): their impls put those right (ops/elementwise/
    # _special_values.py).
    corrects: frozenset[str] = frozenset()
    # ``device_peak(run)``: the peak bytes the backend's own allocator hands out while ``run()``
    # runs (CuPy: its memory pool); None: host memory, measured with tracemalloc.
    device_peak: Callable[[Callable[[], Any]], int] | None = None
    # ``projector(f, *args, argnums=, backend=, **kwargs)``: per-task memory projections of a
    # gradient step in the chunked backend's own terms (pycograd_xp.memory.project hands over).
    projector: Callable[..., Any] | None = None
    # The object that owns an array's memory (a view's base): in-place writes are tracked per
    # buffer, so a write through one view is seen by every array sharing the memory.
    buffer: Callable[[Any], Any] = _base
    # NumPy returns scalars (np.float64, ...) from 0-d operations: their type and the fast way
    # back to a 0-d array. None where the backend always returns arrays.
    scalar_type: type | None = None
    scalar_to_array: Any = None
    # vmap's batched namespaces (pycograd_xp._vmap): their nesting level (0: an ordinary
    # backend). A function given an array of a higher level hands the call over to that
    # level's namespace; ``lift(a)`` makes an array ``a`` of a lower level one of this backend's
    # arrays (unbatched).
    level: int = 0
    lift: Callable[[Any], Any] | None = None
    # pycograd_xp.compile: ``owns_buffer(a)``, whether array ``a`` owns its memory (is no view);
    # with no other reference to it (its reference count says so), a dead temporary's buffer
    # can take an elementwise result in place. None: never written in place. ``takes_out(f)``:
    # whether backend function ``f`` accepts ``out=`` (NumPy's ufuncs).
    owns_buffer: Callable[[Any], bool] | None = None
    takes_out: Callable[[Any], bool] | None = None
    # ``special(name)``: scipy.special's function ``name`` over the backend's arrays (same
    # signature; ``polygamma(n, x)`` with a Python int ``n``), or None where the backend has
    # none (NumPy without scipy). NumPy: scipy.special's; CuPy: cupyx.scipy.special's; Cubed:
    # one NumPy call per block (cubed_plugin). None: no special functions at all (the rows of
    # ``ops/special.py`` then compose what the standard allows and refuse the rest).
    special: Callable[[str], Callable[..., Any] | None] | None = None
    # NumPy's own ufuncs and functions given our arrays dispatch to the namespace's functions
    # (``__array_ufunc__``/``__array_function__``, pycograd_xp/numpy_api/): NumPy's
    # arrays, and the levels built over them (vmap's, compile's tracing namespace).
    numpy_functions: bool = False
    # ``compute(*arrays)``: the values of a lazy backend's arrays (its own, not ours) as NumPy
    # arrays, all computed in one computation (Cubed: one plan, shared inputs read once); what
    # ``optim.lbfgs`` needs for the scalar decisions of its line search. None: eager, or none.
    compute: Callable[..., Any] | None = None
    # ``getitem(x, key)``: ``x[key]`` for a backend array, where the backend's own indexing
    # lacks part of the standard's (Cubed: negative slice steps; an integer-array index as
    # long as its axis). None: ``x[key]``.
    getitem: Callable[[Any, Any], Any] | None = None
    # ``labeller``: the backend's adapter names the work it plans by the part of the program
    # that built it (:mod:`pycograd_xp._parts`): ``labeller.mark()`` before a row's forward
    # call or a VJP rule, ``labeller.label(mark, outputs)`` after it, with the part on the stack
    # (cubed_plugin._labels: Cubed's op counter, then a label on each op made since). None:
    # nothing is named (the functions' fast paths).
    labeller: Any = None


# The Backend of every resolved namespace, by the id of its ``xp`` (see :func:`capabilities`).
_BY_XP: dict[int, Backend] = {}


def capabilities(ns: Any) -> Backend:
    """The :class:`Backend` behind ``ns``: one of our namespaces, or a backend namespace that
    one of them wraps (what a first-order VJP rule receives)."""
    b = _BY_XP.get(id(ns))  # (a rule's backend namespace first: most calls pass one)
    if b is None:
        b = getattr(ns, "_backend", None)
    if b is None:
        raise TypeError(f"{getattr(ns, '__name__', ns)!r} is not a namespace pycograd_xp wraps")
    return b
