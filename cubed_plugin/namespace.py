"""Cubed's namespace, completed: every attribute of ``cubed`` plus what Cubed 0.27 lacks.

:func:`augmented` returns one module-like object (created once, the same object every time)
named ``cubed`` that forwards every attribute to the ``cubed`` module and adds:

- ``sort``, ``argsort``, ``take_along_axis``: one NumPy call per block holding the sorted axis
  whole (:mod:`cubed_plugin._sorting`);
- ``fft``: the whole ``fft`` extension (:mod:`cubed_plugin._fft`);
- ``linalg``: Cubed's own ``linalg`` plus ``inv``, ``solve``, ``cholesky``, ``det``,
  ``slogdet``, ``eigh``, ``eigvalsh``, ``eig``, ``eigvals``, ``pinv``, ``matrix_power``,
  ``matrix_rank``, ``cross``, ``matrix_norm``, ``vector_norm``, ``trace``, ``diagonal``, and
  ``svd``/``svdvals`` for stacks (:mod:`cubed_plugin._linalg`).

Each of these is registered against its row (``@implements("linalg.inv")``,
:func:`cubed_plugin._blocks.implements`), and the namespace is built from the table's
implementations for ``"cubed"`` (``pycograd_xp._primitive.IMPLEMENTATIONS``), each at the
backend attribute its row calls: the row is where its Cubed implementation is found, and
``python -m pycograd_xp.ops --matrix`` shows it in the ``cubed`` column.

Every backend function a row calls (its ``needs``) is wrapped by
:func:`cubed_plugin._operands.aligned`: its Cubed operands are brought to one ``Spec`` (a
constant made with Cubed's default takes the user's) and, for ``stack`` and ``concat``, whose
Cubed implementations trust one operand's chunks for the others, to one chunking.

Functions that need some axes whole (the transformed axes, the sorted axis, the two matrix axes)
rechunk their input so that those axes are one chunk when a block then fits one task's memory
(``allowed_mem``), and otherwise raise :class:`NotImplementedError` naming the chunking and
memory that would work (see :mod:`cubed_plugin._blocks`). Everything stays lazy.

``cubed_plugin.adapt`` puts this object in the :class:`~pycograd_xp.namespace.Backend` as
``xp``, so pycograd_xp's namespace rows and first-order VJP rules reach these functions.

Making it also starts :func:`label_ops`: every Cubed op a row or a VJP rule makes says which part
of the user's program built it ("matmul in mlp_loss (backward of tanh)",
:mod:`cubed_plugin._labels`), so that a refusal or a measured overrun can name it; Cubed's own
names (``op-007``) change from one build to the next.
"""

from __future__ import annotations

import functools
from types import FunctionType, ModuleType
from typing import Any

from pycograd_xp.namespace import REGISTRY, implementations

# importing them registers their functions as Cubed's implementations of rows (they import
# NumPy, not Cubed)
from . import _fft, _indexing, _linalg, _reshape, _sorting, _standard  # noqa: F401
from ._blocks import BACKEND
from ._labels import LABEL, watch
from ._operands import aligned

__all__ = ["LABEL", "Forwarding", "augmented", "label_ops"]


class Forwarding(ModuleType):
    """A module holding its own functions and forwarding every other attribute to ``base``."""

    def __init__(self, name: str, base: Any, doc: str | None = None) -> None:
        super().__init__(name, doc)
        self.__dict__["_base"] = base

    def __getattr__(self, name: str) -> Any:  # called only for names not set on self
        if name == "_base":
            raise AttributeError(name)
        return getattr(self.__dict__["_base"], name)

    def __dir__(self) -> list[str]:
        return sorted(set(dir(self.__dict__["_base"])) | set(self.__dict__))

    def __repr__(self) -> str:
        return f"<namespace {self.__name__!r} (cubed, completed by cubed_plugin)>"


@functools.cache
def augmented() -> ModuleType:
    """The completed Cubed namespace (one object per process)."""
    import cubed

    linalg = Forwarding(
        "cubed.linalg", cubed.linalg, "Cubed's linalg, completed by cubed_plugin._linalg."
    )
    fft = ModuleType("cubed.fft", "The fft extension over Cubed (cubed_plugin._fft).")
    ns = Forwarding("cubed", cubed, cubed.__doc__)
    ns.__dict__.update(
        __array_api_version__=cubed.__array_api_version__,
        __array_namespace_info__=cubed.__array_namespace_info__,
        linalg=linalg,
        fft=fft,
    )
    scopes = {"": ns, "linalg": linalg, "fft": fft}
    bases = {"": cubed, "linalg": cubed.linalg, "fft": None}
    functions = {impl.attribute: impl.fn for impl in implementations(BACKEND)}
    # every function a row calls gets its operands on one Spec and, where Cubed needs it, one
    # chunking (cubed_plugin._operands)
    for attribute in sorted({a for row in REGISTRY.values() for a in row.needs}):
        scope, _, name = attribute.rpartition(".")
        fn = functions.get(attribute) or getattr(bases[scope], name, None)
        if isinstance(fn, FunctionType):
            functions[attribute] = aligned(attribute, fn)
    for attribute, fn in functions.items():
        scope, _, name = attribute.rpartition(".")
        setattr(scopes[scope], name, fn)
    label_ops()
    return ns


def label_ops() -> None:
    """From now on, label every op the completed namespace makes with the part of the user's
    program that built it (:mod:`cubed_plugin._labels`; read by
    :func:`cubed_plugin.memory.part_of`)."""
    watch()
