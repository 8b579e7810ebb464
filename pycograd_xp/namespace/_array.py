"""The Array class.

Every namespace gets its own subclass of :class:`Array` (``type(x) is ns.Array`` is the fast
"is this ours?" test), holding one backend array in ``_data``. ``_node`` is the tape node that
produced it, or None for an array no gradient flows through.

Operators dispatch to the namespace's functions, so an operator and its function are one row
(bound per namespace by :mod:`._operators`). Mutation (``x[idx] = v``, ``x += y``) rebinds
``_data``/``_node`` of this object to the new value, keeping NumPy's aliasing between views
(:mod:`._writes`); on a mutable backend an array no gradient flows through is written in place.
The messages for what NumPy's, PyTorch's and JAX's users try first are :mod:`._messages`'s.
"""

from __future__ import annotations

import operator
import weakref
from typing import TYPE_CHECKING, Any

from .._host import HostScalar, NoValue
from .._state import STACK
from .._tape import Node, Select, is_leaf
from ._imperative import Imperative
from ._messages import METHOD_WAYS, numpy_refusal, scipy_hint
from ._writes import closed_write_error, rebind, rebind_level

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


class Array(Imperative, ArrayProtocol):
    """An array of a pycograd_xp namespace: a backend array plus its place on the tape.

    The runtime class of every array a namespace returns (each namespace has its subclass,
    ``type(x) is xp.Array``): use it with ``isinstance``. Annotate with
    :class:`pycograd_xp.typing.Array`, the protocol it satisfies. Arrays are made by the
    namespace's creation functions (``xp.asarray``), never by calling this class.
    """

    # ``_view``/``_views`` (basic indexing and ``_build.VIEW_ROWS`` on a writable backend): what
    # this array views (held, as NumPy's base), and the views of it, so a write that has to copy
    # keeps NumPy's aliasing (see :func:`rebind`)
    __slots__ = ("_data", "_node", "_view", "_views", "__weakref__")
    __array_priority__ = 1000
    _data: Any
    _node: Node | Select | None
    _view: tuple[Array, Any, Any] | None
    _views: list[weakref.ref[Array]]

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        # A namespace over NumPy answers with its functions (pycograd_xp/numpy_api/).
        # Elsewhere NumPy must not turn our arrays into ndarrays (that would drop gradients):
        # refuse, and say what to call instead (a function the namespace has).
        raise numpy_refusal(self._ns, ufunc, method)

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
            way = METHOD_WAYS.get(name)
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
            An array of this namespace holding the copy (this array on its own device).
        """
        from array_api_compat import to_device

        if stream is None and device == self.device:
            return self  # (the standard allows it: the tape, a trace and a batch keep it)
        return self._ns.asarray(to_device(self._concrete("to_device"), device, stream=stream))

    def __array_namespace__(self, /, *, api_version: str | None = None) -> Any:
        if api_version is not None and api_version not in self._ns._api_versions:
            raise ValueError(
                f"__array_namespace__: api_version {api_version!r} is not supported; "
                f"supported: {', '.join(self._ns._api_versions)}"
            )
        return self._ns

    # -- conversions (they compute on lazy backends) --------------------------------------------
    def _concrete(self, what: str) -> Any:
        if self._node is not None:
            raise TypeError(
                f"{what}: this array is being differentiated; converting it would drop its "
                "gradient. Use xp-level functions, or take the value with "
                "pycograd_xp.stop_gradient(x) / x.detach() first" + scipy_hint()
            )
        if isinstance(self._data, NoValue) and what in ("__array__", "__dlpack__"):
            raise TypeError(
                f"{what}: this array is traced ({NoValue.TRACED_BY}) and holds no values, so "
                "NumPy (or the library calling it) cannot convert it, and what that library "
                "computes cannot be projected. Call xp functions (pycograd_xp.special for "
                "scipy.special's), or compute that part outside the traced function and pass "
                "its result in as an argument" + scipy_hint(what)
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
        data = self._concrete("__index__")  # CuPy's arrays have no __index__: their value's
        return operator.index(
            data.item() if data.shape == () and not hasattr(data, "__index__") else data
        )

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
            # vmap: a batched result; this object now holds a value of that level (the name is
            # rebound, as for every in-place update here), as do the array it views and its views
            rebind_level(self, new)
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
