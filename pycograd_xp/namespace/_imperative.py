"""The imperative face of the tape on every array, in PyTorch's names: ``x.requires_grad_()``
marks a leaf, ``loss.backward()`` accumulates into each leaf's ``.grad``, ``x.detach()``. The
functional face (``grad``, ``vjp``) is ``_api.py``'s; both run :func:`pycograd_xp._tape.backward`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Self, cast

from .._tape import Node, backward, is_leaf, leaf

if TYPE_CHECKING:
    from ..typing import Array as ArrayProtocol
    from ._array import Array


class Imperative:
    """The methods of :class:`~pycograd_xp.namespace._array.Array` that PyTorch users know."""

    __slots__ = ()
    _data: Any
    _node: Any
    _ns: Any
    _backend: Any
    shape: Any

    @property
    def requires_grad(self) -> bool:
        """Whether gradients flow to this array (a leaf marked with ``requires_grad_`` or any
        result computed from one).
        """
        return self._node is not None

    def requires_grad_(self, requires_grad: bool = True) -> Self:
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
        if g is None or isinstance(g, Imperative):  # (one of ours: a create_graph gradient)
            return cast("Array", g)
        return self._like(g)

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
                not isinstance(cotangent, Imperative)  # (the type checker's: the next implies it)
                or type(cotangent) is not type(self)
                or cotangent.shape != self.shape
            ):
                raise ValueError(
                    f"backward: the cotangent must be an array of {self._ns.__name__} with "
                    f"shape {self.shape}"
                )
            g = cotangent._data
        if create_graph:
            g = self._like(g, None if cotangent is None else cotangent._node)
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
        return self._like(self._data)

    def _like(self, data: Any, node: Any = None) -> Array:
        """An array of this array's namespace holding ``data`` (``_array.make``)."""
        a: Any = object.__new__(type(self))
        a._data, a._node = data, node
        return cast("Array", a)
