"""Modules: small models as dataclasses whose array fields are parameters (pytree leaves)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from .. import random
from ..tree import tree_flatten
from ._activations import linear
from ._common import _ns
from ._init import glorot_uniform


# -- modules ------------------------------------------------------------------------------------
class Module:
    """Base for small models as dataclasses: array fields are parameters (pytree leaves),
    nested modules nest, fields declared with ``static()`` (sizes, flags) are not leaves.
    ``grad`` and the optimizers take a module wherever they take a pytree.

    Subclasses are dataclasses (``@dataclasses.dataclass``); their fields are their
    parameters, as in :class:`Linear`."""

    def named_parameters(self) -> dict[str, Any]:
        """The parameters by dotted name, in tree order.

        Returns
        -------
        dict
            ``{"layer1.w": array, ...}``.
        """
        out: dict[str, Any] = {}

        def walk(obj: Any, prefix: str) -> None:
            if isinstance(obj, Module):
                for f in dataclasses.fields(obj):  # type: ignore[arg-type]  # subclasses are dataclasses
                    if not f.metadata.get("static"):
                        walk(getattr(obj, f.name), f"{prefix}{f.name}.")
            elif isinstance(obj, dict):
                for k, v in obj.items():
                    walk(v, f"{prefix}{k}.")
            elif isinstance(obj, list | tuple):
                for i, v in enumerate(obj):
                    walk(v, f"{prefix}{i}.")
            elif obj is not None:
                out[prefix[:-1]] = obj

        walk(self, "")
        return out

    def num_parameters(self) -> int:
        """The number of scalar parameters (the sizes of all leaves).

        Returns
        -------
        int
            The total.
        """
        return sum(math.prod(p.shape) for p in tree_flatten(self)[0])


def static(default: Any = dataclasses.MISSING) -> Any:
    """A dataclass field of a :class:`Module` that is configuration, not a parameter.

    Its value (a size, a flag, an activation function) is part of the module's tree structure,
    not one of its leaves: ``grad`` gives it no gradient and optimizers leave it alone.

    Parameters
    ----------
    default : optional
        The field's default value (none: the field must be given).

    Returns
    -------
    dataclasses.Field
        The field, for a dataclass attribute: ``heads: int = nn.static(4)``.

    Examples
    --------
    >>> import dataclasses
    >>> import numpy as np
    >>> import pycograd_xp as pg
    >>> from pycograd_xp import nn
    >>> @dataclasses.dataclass
    ... class Scale(nn.Module):
    ...     w: object
    ...     power: int = nn.static(2)
    ...     def __call__(self, x):
    ...         return self.w * x**self.power
    >>> xp = pg.namespace(np)
    >>> m = Scale(xp.asarray(3.0))
    >>> g = pg.grad(lambda m: m(xp.asarray(2.0)))(m)
    >>> float(g.w), g.power
    (4.0, 2)
    """
    return dataclasses.field(default=default, metadata={"static": True})


@dataclasses.dataclass
class Linear(Module):
    """A linear layer ``x @ w + b`` as a :class:`Module` (a dataclass and a pytree).

    Parameters
    ----------
    w : Array
        The weight, (in, out).
    b : Array, optional
        The bias, (out,).

    Examples
    --------
    >>> import numpy, pycograd_xp as pg
    >>> from pycograd_xp import nn, random
    >>> layer = nn.Linear.init(random.key(0), 3, 2, xp=pg.namespace(numpy))
    >>> layer.w.shape, layer.num_parameters()
    ((3, 2), 8)
    """

    w: Any
    b: Any = None

    @classmethod
    def init(
        cls,
        key: random.Key,
        n_in: int,
        n_out: int,
        *,
        xp: Any = None,
        dtype: Any = None,
        bias: bool = True,
    ) -> Linear:
        """A layer with Glorot-uniform weights and zero bias.

        Parameters
        ----------
        key : pycograd_xp.random.Key
            The randomness.
        n_in : int
            The input features.
        n_out : int
            The output features.
        xp : namespace, optional
            The namespace (None: ``namespace(numpy)``).
        dtype : dtype, optional
            A real floating dtype (None: float64).
        bias : bool, default True
            Whether the layer has a bias.

        Returns
        -------
        Linear
            The layer.
        """
        w = glorot_uniform(key, (n_in, n_out), xp=xp, dtype=dtype)
        b = _ns(w).zeros((n_out,), dtype=w.dtype) if bias else None
        return cls(w, b)

    def __call__(self, x: Any) -> Any:
        return linear(x, self.w, self.b)
