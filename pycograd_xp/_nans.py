"""``debug_nans`` (JAX's ``jax_debug_nans``): stop at the first NaN a differentiated computation
makes, naming the op. The block pushes a :class:`~pycograd_xp._state.DebugNans` frame; the
recording of each op (``namespace/_record.py``) and each VJP rule of a backward pass
(``_tape.py``) then call :func:`check_nans`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ._state import Block, DebugNans

__all__ = ["check_nans", "debug_nans"]

F = TypeVar("F", bound=Callable[..., Any])


def _has_nan(backend: Any, d: Any) -> bool:
    """Whether backend array ``d`` holds a NaN (False where the values cannot be read: lazy,
    abstract or batched arrays)."""
    if backend.lazy or backend.abstract or backend.level or not hasattr(d, "dtype"):
        return False
    xp = backend.xp
    if not xp.isdtype(d.dtype, ("real floating", "complex floating")):
        return False
    return bool(xp.any(xp.isnan(d)))


def check_nans(what: str, backend: Any, results: list, inputs: list) -> None:
    """``debug_nans``: raise if a result holds a NaN and no input did (``what`` made it)."""
    if not any(_has_nan(backend, r) for r in results):
        return
    if any(_has_nan(backend, a) for a in inputs):
        return  # passed on, not made here
    raise FloatingPointError(
        f"debug_nans: {what} made a NaN from inputs without one; the traceback shows the call "
        "(the forward op, or the backward rule of the op named). Look for 0 / 0, inf - inf, "
        "log or sqrt of a negative number, or an overflow before it"
    )


class debug_nans(Block):  # JAX's name (its jax_debug_nans option)
    """Stop at the first NaN a differentiated computation makes, naming the op (a context
    manager, also a decorator).

    Inside the block, every op recorded on the tape (a computation with an array being
    differentiated) and every VJP rule of a backward pass checks its results, and raises
    :class:`FloatingPointError` where one holds a NaN that none of its inputs held: the
    traceback ends at the call that made it, and the message names the op (or the op whose
    VJP made it). Values are read, so each recorded op costs a pass over its output; nothing is
    checked on lazy, abstract or batched arrays (Cubed, ``memory.project``, inside ``vmap``).
    ``train.fit(..., nan="debug")`` runs its steps inside it.

    Parameters
    ----------
    enabled : bool, default True
        Check (False: a block that turns an outer one off).

    Examples
    --------
    >>> import numpy, pycograd_xp as pg
    >>> xp = pg.namespace(numpy)
    >>> x = xp.asarray([0.0, 1.0])
    >>> with pg.debug_nans():
    ...     pg.grad(lambda x: xp.sum(x / x))(x)
    Traceback (most recent call last):
    FloatingPointError: debug_nans: divide() made a NaN from inputs without one; ...
    """

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled

    def _frame(self) -> DebugNans:
        return DebugNans(self.enabled)
