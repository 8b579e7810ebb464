"""The Array class.

Every namespace gets its own subclass of :class:`Array` (``type(x) is ns.Array`` is the fast
"is this ours?" test), holding one backend array in ``_data``. ``_node`` is the tape node that
produced it, or None for an array no gradient flows through.

Operators dispatch to the namespace's functions, so an operator and its function are one row.
Mutation (``x[idx] = v``, ``x += y``) rebinds ``_data``/``_node`` of this object to the new
value; on a mutable backend an array no gradient flows through is written in place.
"""

from __future__ import annotations

import operator
import weakref
from typing import TYPE_CHECKING, Any

from .._host import HostScalar, NoValue
from .._primitive import REGISTRY
from .._state import STACK
from .._tape import Node, Select, backward, is_leaf, is_saved, leaf, note_write

# Python scalars an operator accepts beside an array (a HostScalar stands for a Python number
# argument of a function pycograd_xp.compile is tracing).
SCALARS = (bool, int, float, complex, HostScalar)
# Python values that pass to a backend unchanged (and that a tape keeps as they are).
PLAIN_TYPES = frozenset({bool, int, float, complex, str, type(None), slice, type(Ellipsis)})


def make(cls: type[Array], data: Any, node: Any = None) -> Any:
    """An array of class ``cls`` (one namespace's Array) holding backend ``data`` and ``node``:
    the one way the package builds arrays besides the namespace's own wrappers."""
    a = object.__new__(cls)
    a._data, a._node = data, node
    return a


def ours(ns: Any, a: Any) -> Any:
    """``a`` as arrays of namespace ``ns``: a backend array, or a backend scalar (NumPy's
    ``float64`` of a 0-d operation in a first-order rule), becomes one of ours; a list or tuple
    of them, a list or tuple of ours; anything else passes unchanged."""
    b = ns._backend
    if isinstance(a, b.array_type):
        return make(ns.Array, a)
    if b.scalar_type is not None and isinstance(a, b.scalar_type):
        return make(ns.Array, b.scalar_to_array(a))
    if type(a) is list or type(a) is tuple:
        return type(a)(ours(ns, e) for e in a)
    return a


def detach(a: Any) -> Any:
    """``a``'s value with no gradient: a new array object sharing the buffer (anything that is
    not one of our arrays passes unchanged)."""
    return make(type(a), a._data) if isinstance(a, Array) else a


if TYPE_CHECKING:
    # The operators are installed per namespace at run time (install_operators); to a type
    # checker the class declares them by subclassing the protocol users annotate with.
    from ..typing import Array as ArrayProtocol
else:
    ArrayProtocol = object


# The methods users of NumPy, PyTorch and JAX reach for, and the standard's way to each.
_METHOD_WAYS = {
    **{
        n: f"call the namespace's function: xp.{n}(x) (xp = x.__array_namespace__())"
        for n in (
            "sum",
            "mean",
            "max",
            "min",
            "prod",
            "std",
            "var",
            "reshape",
            "exp",
            "log",
            "abs",
            "sqrt",
            "clip",
            "all",
            "any",
            "argmax",
            "argmin",
            "cumsum",
        )
    },
    "astype": "call xp.astype(x, dtype) (xp = x.__array_namespace__())",
    "transpose": "use x.T or x.mT, or xp.permute_dims(x, axes)",
    "flatten": "call xp.reshape(x, (-1,))",
    "ravel": "call xp.reshape(x, (-1,))",
    "copy": "call xp.asarray(x, copy=True)",
    "item": "use float(x) or int(x) (on an array being differentiated: float(x.detach()))",
    "tolist": "use numpy.asarray(x).tolist() (on an array being differentiated: of x.detach())",
    "numpy": "use numpy.asarray(x) (on an array being differentiated: numpy.asarray(x.detach()))",
    "cpu": "arrays live on their backend's device; see x.device and x.to_device(...)",
}


class Array(ArrayProtocol):
    """An array of a pycograd_xp namespace: a backend array plus its place on the tape.

    The runtime class of every array a namespace returns (each namespace has its subclass,
    ``type(x) is xp.Array``): use it with ``isinstance``. Annotate with
    :class:`pycograd_xp.typing.Array`, the protocol it satisfies. Arrays are made by the
    namespace's creation functions (``xp.asarray``), never by calling this class.
    """

    # ``_view``/``_views`` (set only by basic indexing on a writable backend): what this array is
    # a view of, and the views taken of it, so a write that has to copy keeps NumPy's aliasing
    # (see :func:`rebind`).
    __slots__ = ("_data", "_node", "_view", "_views", "__weakref__")
    __array_priority__ = 1000
    _data: Any
    _node: Node | Select | None
    _view: tuple[weakref.ref[Array], Any, Any] | None
    _views: list[weakref.ref[Array]]

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        # A namespace over NumPy answers with its functions (pycograd_xp/numpy_api/).
        # Elsewhere NumPy must not turn our arrays into ndarrays (that would drop gradients):
        # refuse, and say what to call instead (a function the namespace has).
        name = ufunc.__name__ if method == "__call__" else f"{ufunc.__name__}.{method}"
        ours = _NUMPY_NAMES.get(name, ufunc.__name__ if method == "__call__" else None)
        ns = self._ns.__name__
        if ours is not None and callable(getattr(self._ns, ours, None)):
            way = (
                f"Use {ns}.{ours}(...) (xp.{ours}), and convert NumPy arrays with "
                "xp.asarray(...) first"
            )
        else:
            way = (
                f"{ns} has no function for it: compute it with xp functions, or on the values "
                "with numpy.asarray(pycograd_xp.stop_gradient(x)) (no gradient)"
            )
        raise TypeError(
            f"numpy.{name}() was given an array of {ns}; NumPy functions do not take these "
            f"arrays. {way}"
        )

    # Set on each namespace's subclass.
    _ns: Any
    _backend: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            f"{type(self).__name__}: arrays are created with the namespace's creation "
            "functions, e.g. xp.asarray(data)"
        )

    if not TYPE_CHECKING:  # (to a type checker a __getattr__ would make every name exist)

        def __getattr__(self, name: str) -> Any:
            # Only for an attribute the class lacks: the methods NumPy, PyTorch and JAX users
            # try first get the standard's way in the message (hasattr stays False for them)
            way = _METHOD_WAYS.get(name)
            if way is None:
                raise AttributeError(name)
            raise AttributeError(
                f"'{type(self).__name__}' object has no attribute '{name}': the standard's "
                f"arrays have no methods besides their operators; {way}"
            )

    # -- attributes ---------------------------------------------------------------------------
    @property
    def dtype(self) -> Any:
        """The data type of the elements (the backend's dtype object)."""
        return self._data.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape: one int per dimension. Shapes are static on every backend (the standard
        allows None for a size a lazy backend does not know; none of ours has one), so
        ``x.shape[1]`` is an ``int`` to a type checker too."""
        return tuple(self._data.shape)

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return self._data.ndim

    @property
    def size(self) -> int:
        """The number of elements."""
        return self._data.size

    @property
    def device(self) -> Any:
        """The device the data lives on (the backend's device object)."""
        from array_api_compat import device

        return device(self._data)

    @property
    def T(self) -> Array:  # the standard's name
        """The transpose of a 2-D array (for others: ``xp.matrix_transpose``,
        ``xp.permute_dims``)."""
        if self.ndim != 2:
            raise ValueError(
                f"Array.T: only defined for 2-D arrays, got shape {self.shape}; "
                "use xp.matrix_transpose or xp.permute_dims"
            )
        return self._ns.permute_dims(self, (1, 0))

    @property
    def mT(self) -> Array:  # the standard's name
        """The transpose of the last two dimensions (``xp.matrix_transpose``)."""
        return self._ns.matrix_transpose(self)

    def to_device(self, device: Any, /, *, stream: Any = None) -> Array:
        """This array's values on ``device``.

        Parameters
        ----------
        device : object
            A device of the backend.
        stream : object, optional
            The backend's stream argument, passed through.

        Returns
        -------
        Array
            An array of this namespace holding the copy.
        """
        from array_api_compat import to_device

        return self._ns.asarray(to_device(self._data, device, stream=stream))

    def __array_namespace__(self, /, *, api_version: str | None = None) -> Any:
        if api_version is not None and api_version not in self._ns._api_versions:
            raise ValueError(
                f"__array_namespace__: api_version {api_version!r} is not supported; "
                f"supported: {', '.join(self._ns._api_versions)}"
            )
        return self._ns

    # -- autodiff, imperative face (PyTorch's names) -------------------------------------------
    @property
    def requires_grad(self) -> bool:
        """Whether gradients flow to this array (a leaf marked with ``requires_grad_`` or any
        result computed from one).
        """
        return self._node is not None

    def requires_grad_(self, requires_grad: bool = True) -> Array:
        """Mark this array as a leaf whose ``.grad`` ``backward()`` fills (PyTorch's name).

        Parameters
        ----------
        requires_grad : bool, default True
            False makes a leaf stop requiring gradients.

        Returns
        -------
        Array
            This array (marked in place).

        Raises
        ------
        TypeError
            If the dtype is not floating-point.
        RuntimeError
            For ``requires_grad_(False)`` on an array that is not a leaf (use ``x.detach()``).
        """
        if requires_grad:
            if not self._backend.xp.isdtype(
                self._data.dtype, ("real floating", "complex floating")
            ):
                raise TypeError(
                    f"requires_grad_: dtype {self._data.dtype} cannot require gradients; only "
                    "floating-point arrays can (cast with xp.astype)"
                )
            if self._node is None:
                self._node = leaf(self._ns)
        elif self._node is not None:
            if not is_leaf(self._node):
                raise RuntimeError(
                    "requires_grad_(False): only leaves can stop requiring grad; use "
                    "x.detach() for a copy without gradient"
                )
            self._node = None
        return self

    @property
    def grad(self) -> Array | None:
        """The gradient accumulated by ``backward()`` (leaves only); assign None to reset."""
        node = self._node
        g = node.grad if isinstance(node, Node) and is_leaf(node) else None
        if g is None or isinstance(g, Array):
            return g
        return make(type(self), g)

    @grad.setter
    def grad(self, value: Array | None) -> None:
        node = self._node
        if not isinstance(node, Node) or not is_leaf(node):
            raise RuntimeError("grad can only be set on a leaf that requires grad")
        node.grad = None if value is None else value._data

    def backward(
        self,
        cotangent: ArrayProtocol | None = None,
        retain_graph: bool = False,
        create_graph: bool = False,
    ) -> None:
        """Accumulate d(self)/d(leaf) into ``leaf.grad`` for every leaf this array depends on.

        Parameters
        ----------
        cotangent : Array, optional
            Required for a non-scalar array: an array of this namespace and shape (the vector of the
            vector-Jacobian product).
        retain_graph : bool, default False
            Keep the graph's saved values, so that backward can run through it again (they are freed
            otherwise).
        create_graph : bool, default False
            Record the backward pass itself (for higher-order gradients).

        Raises
        ------
        RuntimeError
            If this array depends on no array that requires grad, or is non-scalar without a
            ``cotangent``.
        ValueError
            If the cotangent is not an array of this namespace and shape.

        Examples
        --------
        >>> import numpy, pycograd_xp as pg
        >>> xp = pg.namespace(numpy)
        >>> w = xp.asarray([1.0, 2.0]).requires_grad_()
        >>> xp.sum(w**2).backward()
        >>> w.grad
        pycograd_xp.numpy.Array([2., 4.], dtype=float64)
        """
        if self._node is None:
            raise RuntimeError(
                "backward: this array does not depend on any array that requires grad; mark "
                "the inputs with x.requires_grad_() first"
            )
        if cotangent is None:
            if self.shape != ():
                raise RuntimeError(
                    f"backward: the array has shape {self.shape}; a non-scalar needs a "
                    "cotangent of that shape: x.backward(cotangent)"
                )
            g = self._backend.xp.ones_like(self._data)
        else:
            if (
                not isinstance(cotangent, Array)  # (for the type checker: the next test implies it)
                or type(cotangent) is not type(self)
                or cotangent.shape != self.shape
            ):
                raise ValueError(
                    f"backward: the cotangent must be an array of {self._ns.__name__} with "
                    f"shape {self.shape}"
                )
            g = cotangent._data
        if create_graph:
            g = make(type(self), g, None if cotangent is None else cotangent._node)
        backward(
            [(self._node, g)], retain_graph=retain_graph or create_graph, create_graph=create_graph
        )

    def detach(self) -> Array:
        """The same values, with no gradient (``pycograd_xp.stop_gradient``).

        Returns
        -------
        Array
            A new array object sharing this array's buffer.
        """
        return detach(self)

    # -- conversions (they compute on lazy backends) --------------------------------------------
    def _concrete(self, what: str) -> Any:
        if self._node is not None:
            raise TypeError(
                f"{what}: this array is being differentiated; converting it would drop its "
                "gradient. Use xp-level functions, or take the value with "
                "pycograd_xp.stop_gradient(x) / x.detach() first" + _scipy_hint()
            )
        if isinstance(self._data, NoValue) and what in ("__array__", "__dlpack__"):
            raise TypeError(
                f"{what}: this array is traced ({NoValue.TRACED_BY}) and holds no values, so "
                "NumPy (or the library calling it) cannot convert it, and what that library "
                "computes cannot be projected. Call xp functions (pycograd_xp.special for "
                "scipy.special's), or compute that part outside the traced function and pass "
                "its result in as an argument" + _scipy_hint(what)
            )
        return self._data

    def __bool__(self) -> bool:
        return bool(self._concrete("__bool__"))

    def __int__(self) -> int:
        return int(self._concrete("__int__"))

    def __float__(self) -> float:
        return float(self._concrete("__float__"))

    def __complex__(self) -> complex:
        return complex(self._concrete("__complex__"))

    def __index__(self) -> int:
        return operator.index(self._concrete("__index__"))

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> Any:
        import numpy as np

        data = self._concrete("__array__")
        if copy is False:
            return np.asarray(data, dtype=dtype, copy=False)
        return np.asarray(data, dtype=dtype)

    def __dlpack__(
        self,
        /,
        *,
        stream: Any = None,
        max_version: Any = None,
        dl_device: Any = None,
        copy: bool | None = None,
    ) -> Any:
        data = self._concrete("__dlpack__")
        if not hasattr(data, "__dlpack__") and self._backend.lazy:
            import numpy as np

            data = np.asarray(data)  # a lazy backend's (Cubed's) values: computed, on the host
        kwargs = {
            k: v
            for k, v in (("max_version", max_version), ("dl_device", dl_device), ("copy", copy))
            if v is not None
        }
        return data.__dlpack__(stream=stream, **kwargs)

    def __dlpack_device__(self, /) -> tuple[Any, int]:
        if not hasattr(self._data, "__dlpack_device__") and self._backend.lazy:
            return (1, 0)  # DLPack's CPU: where a lazy backend's computed values land
        return self._data.__dlpack_device__()

    def __repr__(self) -> str:
        name = self._ns.__name__
        dtype = getattr(self.dtype, "name", self.dtype)
        tail = ", grad_fn=" + self._node.name if self._node is not None else ""
        if self._backend.lazy:
            chunks = getattr(self._data, "chunks", None)
            chunk_txt = f", chunks={chunks}" if chunks is not None else ""
            return f"{name}.Array(<lazy>, shape={self.shape}, dtype={dtype}{chunk_txt}{tail})"
        try:
            import numpy as np

            # continuation lines line up under the first element, after the whole prefix
            prefix = f"{name}.Array("
            body = np.array2string(np.asarray(self._data), separator=", ", prefix=prefix)
        except Exception:  # a backend whose data NumPy cannot read (e.g. on a GPU)
            body = f"<shape={self.shape}>"
        return f"{name}.Array({body}, dtype={dtype}{tail})"

    __str__ = __repr__

    # -- indexing ----------------------------------------------------------------------------
    def __getitem__(self, key: Any, /) -> Array:
        return self._ns._getitem(self, key)

    def __setitem__(self, key: Any, value: Any, /) -> None:
        self._ns._setitem(self, key, value)

    def _rebind(self, new: Array, what: str) -> Array:
        """Make this object hold ``new``'s value (in-place operators and setitem)."""
        if new._backend.abstract and not self._backend.abstract:  # traced into a closed-over
            raise closed_write_error(what, self)
        if type(new) is not type(self) and not is_leaf(self._node):
            # vmap: a batched result; this object now holds a value of that level (the name
            # is rebound, as it is for every in-place update here)
            self.__class__ = type(new)
            self._data, self._node = new._data, new._node
            return self
        if new.dtype != self.dtype:
            raise TypeError(
                f"{what}: the result has dtype {new.dtype}, but an in-place operation must keep "
                f"this array's dtype {self.dtype}; use the out-of-place operator instead"
            )
        if new.shape != self.shape:
            raise ValueError(
                f"{what}: the result has shape {new.shape}, but an in-place operation must keep "
                f"this array's shape {self.shape}; use the out-of-place operator instead"
            )
        if is_leaf(self._node):  # a leaf that requires grad
            if STACK.grad_enabled:
                raise RuntimeError(
                    f"{what}: this array is a leaf that requires grad; updating it in place "
                    "would lose its gradient. Do it under pycograd_xp.no_grad() (as optimizer "
                    "steps do), or on a copy"
                )
            self._data = new._data  # stays a leaf, keeps its .grad
            return self
        rebind(self, new._data, new._node)
        return self


def note_view(view: Array, base: Array, key: Any) -> None:
    """Remember that ``view`` is ``base[key]`` (basic indexing: NumPy shares the memory)."""
    view._view = (weakref.ref(base), key, base._backend.buffer(base._data))
    views = getattr(base, "_views", None)
    if views is None:
        base._views = [weakref.ref(view)]
    else:
        if len(views) >= 8:  # drop the views that are gone
            views[:] = [r for r in views if r() is not None]
        views.append(weakref.ref(view))


def rebind(a: Array, data: Any, node: Any) -> None:
    """Make ``a`` hold a new value that was computed into a new buffer (a write that had to
    copy because a tape can see it), keeping NumPy's aliasing: the array ``a`` is a view of
    gets the new values written into it (functionally, so the tape sees that too), and views
    of ``a`` become views of the new value. Without this, ``v = c[0]; v[0] = 1`` would leave
    ``c`` unchanged while recording, and differently from NumPy (and from no_grad) silently.
    """
    buffer = a._backend.buffer
    old = buffer(a._data)
    a._data, a._node = data, node
    view = getattr(a, "_view", None)
    if view is not None:
        base_ref, key, base_buffer = view
        base = base_ref()
        if base is not None and buffer(base._data) is base_buffer:
            base[key] = a  # the base gets the new values (and refreshes its other views)
            fresh = base[key]  # ``a`` becomes a view of the base's new value again
            a._data, a._node = fresh._data, fresh._node
            a._view = (base_ref, key, buffer(base._data))
        else:
            a._view = None  # the base is gone or holds other memory now: ``a`` stands alone
    for ref in getattr(a, "_views", None) or ():
        v = ref()
        if (
            v is not None
            and v is not a
            and getattr(v, "_view", None) is not None
            and buffer(v._data) is old
        ):
            _, key, _ = v._view
            fresh = a[key]
            v._data, v._node = fresh._data, fresh._node
            v._view = (weakref.ref(a), key, buffer(a._data))


# NumPy ufunc (and reduction) names whose Array API name differs.
_NUMPY_NAMES = {
    "add.reduce": "sum",
    "multiply.reduce": "prod",
    "maximum.reduce": "max",
    "minimum.reduce": "min",
    "logical_and.reduce": "all",
    "logical_or.reduce": "any",
    "add.accumulate": "cumulative_sum",
    "multiply.accumulate": "cumulative_prod",
    "true_divide": "divide",
    "power": "pow",
    "absolute": "abs",
    "arctan2": "atan2",
    "arcsin": "asin",
    "arccos": "acos",
    "arctan": "atan",
    "arcsinh": "asinh",
    "arccosh": "acosh",
    "arctanh": "atanh",
    "conjugate": "conj",
    "invert": "bitwise_invert",
    "left_shift": "bitwise_left_shift",
    "right_shift": "bitwise_right_shift",
    "mod": "remainder",
}

BINARY_OPERATORS = {
    "add": "add",
    "sub": "subtract",
    "mul": "multiply",
    "truediv": "divide",
    "floordiv": "floor_divide",
    "mod": "remainder",
    "pow": "pow",
    "matmul": "matmul",
    "and": "bitwise_and",
    "or": "bitwise_or",
    "xor": "bitwise_xor",
    "lshift": "bitwise_left_shift",
    "rshift": "bitwise_right_shift",
}
COMPARISONS = {
    "lt": "less",
    "le": "less_equal",
    "gt": "greater",
    "ge": "greater_equal",
    "eq": "equal",
    "ne": "not_equal",
}
UNARY_OPERATORS = {"neg": "negative", "pos": "positive", "abs": "abs", "invert": "bitwise_invert"}


def install_backend_operators(cls: type, function: Any, inplace: Any) -> None:
    """Operators for a backend array class that pycograd_xp itself builds (the abstract and the
    batched backends): each calls ``function(self, fname)``, that backend's function of the
    standard's name; ``inplace(fname)`` makes the in-place operators."""

    def binary(fname: str, reflected: bool) -> Any:
        def op(self: Any, other: Any) -> Any:
            f = function(self, fname)
            return f(other, self) if reflected else f(self, other)

        return op

    for op, fname in BINARY_OPERATORS.items():
        setattr(cls, f"__{op}__", binary(fname, False))
        setattr(cls, f"__r{op}__", binary(fname, True))
        setattr(cls, f"__i{op}__", inplace(fname))
    for op, fname in COMPARISONS.items():
        setattr(cls, f"__{op}__", binary(fname, False))
    for op, fname in UNARY_OPERATORS.items():
        setattr(cls, f"__{op}__", lambda self, fname=fname: function(self, fname)(self))


def _operator(
    cls: type[Array], f: Any, name: str, reflected: bool = False, constants: tuple = ()
) -> Any:
    def op(self: Array, other: Any, /) -> Any:
        if type(other) is not cls and not isinstance(other, SCALARS):
            if isinstance(other, constants):  # NumPy's: its reflected operator calls the ufunc,
                return NotImplemented  # which hands the call to our __array_ufunc__
            if isinstance(other, Array):
                # vmap: the function lifts; an abstract array (memory.project, compile): the
                # function hands the call over to the abstract namespace
                if (
                    other._backend.level != self._backend.level
                    or other._backend.abstract
                    or self._backend.abstract
                ):
                    return f(other, self) if reflected else f(self, other)
                raise TypeError(
                    f"{name}: cannot mix arrays of {self._ns.__name__} and "
                    f"{other._ns.__name__}; convert one with the other's asarray"
                )
            if hasattr(other, "__array_namespace__") or hasattr(other, "__array__"):
                raise TypeError(
                    f"{name}: got a {type(other).__module__}.{type(other).__name__}, not an "
                    f"array of {self._ns.__name__}; convert it with "
                    f"{self._ns.__name__}.asarray(...) first"
                )
            return NotImplemented
        return f(other, self) if reflected else f(self, other)

    op.__name__ = name
    return op


def closed_write_error(what: str, x: Array) -> TypeError:
    """The error for a traced function that writes into an array it closes over."""
    return TypeError(
        f"{what}: the function writes into an array it closes over (shape {x.shape}, dtype "
        f"{x.dtype}); compile and memory.project trace it without running it, so the write "
        "would happen once or never instead of at each call. Pass the array as an argument "
        "(a compiled function may write into its arguments), or return the new value"
    )


def _inplace(
    cls: type[Array], f: Any, name: str, *, raw: bool = True, constants: tuple = ()
) -> Any:
    forward = _operator(cls, f, name, constants=constants)
    raw_inplace = getattr(operator, name.strip("_"))  # operator.isub for "__isub__", ...
    binary = getattr(operator, "__" + name.strip("_")[1:] + "__")  # operator.__sub__ for __isub__

    def op(self: Array, other: Any, /) -> Any:
        if STACK.closed is self._ns:  # compile is tracing: this array is closed over
            raise closed_write_error(name, self)
        # On a backend whose arrays are writable, write the buffer in place when no tape can see
        # it (under no_grad, as optimizer steps do; or nothing here is being differentiated
        # and the tape saved nothing of it); elsewhere compute the new value and rebind to it.
        if (
            (
                not STACK.grad_enabled
                or (
                    self._node is None
                    and getattr(other, "_node", None) is None
                    and not is_saved(self._backend, self._data)
                )
            )
            and self._backend.mutable
            and (
                type(other) is cls
                and other._data.dtype == self._data.dtype
                and other._data.shape == self._data.shape
                or isinstance(other, SCALARS)
            )
            and self._data.dtype in self._ns._floating
        ):
            if raw:
                self._data = raw_inplace(self._data, other._data if type(other) is cls else other)
            else:  # the namespace's function honours special cases the backend operator misses
                self._data[...] = forward(self, other)._data
            note_write(self._backend, self._data)
            return self
        new = forward(self, other)
        if new is NotImplemented:
            if not isinstance(other, constants):
                return new
            new = binary(self, other)  # x += ndarray: NumPy's reflected operator, then rebind
        return self._rebind(new, name)

    op.__name__ = name
    return op


def _unary_operator(f: Any, name: str) -> Any:
    def op(self: Array, /) -> Any:
        return f(self)

    op.__name__ = name
    return op


def install_operators(cls: type[Array], ns: Any, constants: tuple = ()) -> None:
    """Bind every operator of ``cls`` (one namespace's Array class) to that namespace's function.

    Binding per namespace, to the function object itself, keeps the operator as cheap as a call
    of the function. An operand of a type in ``constants`` (NumPy's arrays and scalars, for a
    namespace over NumPy) is left to its own reflected operator, which calls NumPy's ufunc,
    which hands the call to our ``__array_ufunc__``: ``x * mask`` is ``mask * x``, with NumPy's
    promotion, the NumPy operand a constant; other foreign arrays refuse.
    """
    for op, fname in BINARY_OPERATORS.items():
        f = getattr(ns, fname)
        setattr(cls, f"__{op}__", _operator(cls, f, f"__{op}__", constants=constants))
        setattr(
            cls,
            f"__r{op}__",
            _operator(cls, f, f"__r{op}__", reflected=True, constants=constants),
        )
        # A row with an impl honours special cases the backend misses (floor_divide): its
        # in-place operator writes that result, not the backend operator's.
        raw = REGISTRY[fname].impl is None
        setattr(cls, f"__i{op}__", _inplace(cls, f, f"__i{op}__", raw=raw, constants=constants))
    for op, fname in COMPARISONS.items():
        setattr(
            cls, f"__{op}__", _operator(cls, getattr(ns, fname), f"__{op}__", constants=constants)
        )
    for op, fname in UNARY_OPERATORS.items():
        setattr(cls, f"__{op}__", _unary_operator(getattr(ns, fname), f"__{op}__"))
    cls.__hash__ = None  # type: ignore[assignment]


def _scipy_hint(what: str = "") -> str:
    """Where SciPy (without its array API mode) is converting a differentiated array, what
    makes it take the array as it is; else nothing. Only on the error's path: it walks up to 16
    frames."""
    import os
    import sys

    if os.environ.get("SCIPY_ARRAY_API") == "1":
        return ""
    frame: Any = sys._getframe(2)
    for _ in range(16):
        if frame is None:
            break
        if str(frame.f_globals.get("__name__", "")).startswith("scipy."):
            if what:  # a traced array: the same switch lets SciPy call our namespace's functions
                return (
                    ". SciPy converts it here: its functions that support the array API "
                    "(scipy.special's, logsumexp) take pycograd_xp arrays as they are, and so "
                    "can be projected, when SCIPY_ARRAY_API=1 is set before SciPy is first "
                    "imported"
                )
            return (
                ". SciPy converts it here: its functions that support the array API "
                "(scipy.special's, logsumexp, some of scipy.stats) take pycograd_xp arrays as "
                "they are when SCIPY_ARRAY_API=1 is set before SciPy is first imported; the "
                "others (scipy.stats' distributions) always convert"
            )
        frame = frame.f_back
    return ""
