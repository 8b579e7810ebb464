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

Functions that need some axes whole (the transformed axes, the sorted axis, the two matrix axes)
rechunk their input so that those axes are one chunk when a block then fits one task's memory
(``allowed_mem``), and otherwise raise :class:`NotImplementedError` naming the chunking and
memory that would work (see :mod:`cubed_plugin._blocks`). Everything stays lazy.

``cubed_plugin.adapt`` puts this object in the :class:`~pycograd_xp.namespace.Backend` as
``xp``, so pycograd_xp's namespace rows and first-order VJP rules reach these functions.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any


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

    from . import _fft, _linalg, _sorting

    linalg = Forwarding("cubed.linalg", cubed.linalg,
                        "Cubed's linalg, completed by cubed_plugin._linalg.")  # fmt: skip
    for name in _linalg.__all__:
        setattr(linalg, name, getattr(_linalg, name))
    fft = ModuleType("cubed.fft", "The fft extension over Cubed (cubed_plugin._fft).")
    for name in _fft.__all__:
        setattr(fft, name, getattr(_fft, name))

    ns = Forwarding("cubed", cubed, cubed.__doc__)
    ns.__dict__.update(
        __array_api_version__=cubed.__array_api_version__,
        __array_namespace_info__=cubed.__array_namespace_info__,
        linalg=linalg,
        fft=fft,
    )
    for name in _sorting.__all__:
        setattr(ns, name, getattr(_sorting, name))
    return ns
