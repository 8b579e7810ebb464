"""The primitive table: one row per function of the standard.

A row (:class:`Primitive`) says everything the package knows about one function: its spec name,
how to call the backend (``impl``), which dtypes its array arguments accept, and which backend
names it needs. The namespace factory turns every row into a public function of each namespace;
the autodiff engine reads the same row for the function's derivative.

Category modules declare rows with the decorators below:

* :func:`unary` / :func:`binary` for elementwise functions. Their public signatures are
  ``(x, /)`` and ``(x1, x2, /)``; they get a hand-tuned fast path because they are the hot ones.
* :func:`primitive` for everything else. The decorated ``impl(bk, ...)`` takes the backend
  namespace first and then exactly the spec signature; the public function has that signature
  minus ``bk``, and receives the backend arrays unwrapped.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# Dtype categories of the standard, as ``isdtype`` kinds.
CATEGORIES: dict[str, tuple[str, ...]] = {
    "all": ("bool", "integral", "real floating", "complex floating"),
    "numeric": ("numeric",),
    "real numeric": ("integral", "real floating"),
    "integer": ("integral",),
    "integer or boolean": ("integral", "bool"),
    "boolean": ("bool",),
    "real floating-point": ("real floating",),
    "complex floating-point": ("complex floating",),
    "floating-point": ("real floating", "complex floating"),
}


@dataclass(eq=False)
class Primitive:
    """One function of the standard.

    ``name`` is the spec name, qualified for extensions (``"linalg.cholesky"``). ``kind`` is
    ``"unary"``, ``"binary"`` or ``"general"``. ``impl(bk, *args, **kwargs)`` calls the backend
    ``bk`` on backend arrays; for elementwise rows it may be None, meaning "the backend function
    of the same name". ``dtypes`` is a key of :data:`CATEGORIES` that every array argument must
    satisfy (None: no check). ``needs`` are the backend attributes (dotted for extensions) the
    row calls; a backend missing one gets a function that raises NotImplementedError.
    ``axis_check`` validates an ``axis`` argument against the first argument's rank.
    """

    name: str
    kind: str
    impl: Callable[..., Any] | None
    dtypes: str | None
    needs: tuple[str, ...]
    axis_check: bool = False
    signature: inspect.Signature | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def scope(self) -> str:
        return self.name.rpartition(".")[0]

    @property
    def short_name(self) -> str:
        return self.name.rpartition(".")[2]


REGISTRY: dict[str, Primitive] = {}


def _register(prim: Primitive) -> Primitive:
    if prim.name in REGISTRY:
        raise RuntimeError(f"primitive {prim.name!r} declared twice")
    REGISTRY[prim.name] = prim
    return prim


def unary(name: str, dtypes: str, impl: Callable[..., Any] | None = None) -> Primitive:
    """Declare the elementwise function ``name(x, /)``."""
    return _register(Primitive(name, "unary", impl, dtypes, (name,)))


def binary(name: str, dtypes: str, impl: Callable[..., Any] | None = None) -> Primitive:
    """Declare the elementwise function ``name(x1, x2, /)``; either side may be a Python scalar."""
    return _register(Primitive(name, "binary", impl, dtypes, (name,)))


def primitive(
    dtypes: str | None = None,
    *,
    scope: str = "",
    needs: tuple[str, ...] | None = None,
    axis_check: bool = False,
) -> Callable[[Callable[..., Any]], Primitive]:
    """Declare a general function from its ``impl(bk, <spec signature>)``."""

    def declare(impl: Callable[..., Any]) -> Primitive:
        name = f"{scope}.{impl.__name__}" if scope else impl.__name__
        sig = inspect.signature(impl)
        params = list(sig.parameters.values())[1:]  # drop ``bk``
        return _register(
            Primitive(
                name,
                "general",
                impl,
                dtypes,
                needs if needs is not None else (name,),
                axis_check=axis_check,
                signature=sig.replace(parameters=params, return_annotation=sig.empty),
            )
        )

    return declare
