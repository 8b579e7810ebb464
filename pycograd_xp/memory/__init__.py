"""Memory, before anything runs: projected upper bounds for a function and its gradient step.

``project(f, *args)`` runs ``f`` and its ``value_and_grad`` step on abstract arrays (shape and
dtype, no data) through the same namespace rows, tape and VJP rules as a real step, and follows
every array's lifetime (see :mod:`pycograd_xp._abstract`): the result says the peak bytes
of the forward pass alone and of the whole step, what the tape holds between them, and at which
op the peak happens, op by op. ``measure(f, *args)`` runs the real step and measures it on the
same scale (tracemalloc on NumPy), so the two compare like with like.

With ``argnums=()`` both take ``f`` as it is, with no gradient added: a whole training step
(``train.make_step``'s steps and compiled functions are taken so by default), its optimizer's
update and state included, from specs too (``tx.init(param_specs)`` gives the state's specs);
a compiled function projects as the replay ``compile`` generates.

``within(f, budget, *args)`` returns ``f`` with what its step keeps and what its backward pass
recomputes chosen so that the step's projected peak fits ``budget`` (same values and gradients).
"""

from __future__ import annotations

from .._abstract import ABSTRACT, AbstractArray
from .._exports import module_dir as _module_dir
from ._batches import batch_mean, batch_sum
from ._budget import Budgeted, Schedule, scheduled, within
from ._measure import Measurement, measure
from ._project import before_backward, project
from ._report import MemoryLimitError, Projection, Row
from ._spec import Spec, spec
from ._units import format_byte_pair, format_bytes, parse_bytes

__all__ = [
    "ABSTRACT",
    "AbstractArray",
    "Budgeted",
    "Measurement",
    "MemoryLimitError",
    "Projection",
    "Row",
    "Schedule",
    "Spec",
    "batch_mean",
    "batch_sum",
    "before_backward",
    "format_byte_pair",
    "format_bytes",
    "measure",
    "parse_bytes",
    "project",
    "scheduled",
    "spec",
    "within",
]


# dir() lists the public names only (what completion offers)
__dir__ = _module_dir(globals())
