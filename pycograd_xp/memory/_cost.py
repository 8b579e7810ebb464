"""The time model that chooses between a budgeted step's two ways to fit: recomputing outputs
in the backward pass, or running the batch in micro-batches (row slices). Each way is costed
by what it adds to the step as it is: the outputs made again (their work at a product's or an
elementwise row's rate, and a call each), or the extra micro-batches (a step call of so many
nodes each, and the gradients made and summed). A declared loss's eager step
(``memory.within``) and a one-pass Cubed task whose chunk does not fit
(``cubed_plugin._chunk_plan``) both take the way projected faster.

The constants are measured by ``benchmarks/bench_chunk_choice.py``
(docs/calibration.md#chunk-choice).
"""

from __future__ import annotations

import math
from typing import Any

from ..tree import tree_flatten

__all__ = ["faster", "recompute_microseconds", "slices_microseconds"]

# The cost model's constants, measured by benchmarks/bench_chunk_choice.py
# (docs/calibration.md#chunk-choice).
CALL_MICROSECONDS = 60  # a chunk step's call, beside its nodes' (chunk_sums)
NODE_MICROSECONDS = 16  # a node of a step: its forward call recorded, its VJP run
GRADIENT_ELEMENTS_PER_MICROSECOND = 260  # a slice's gradients: made, flattened, added
REDO_MICROSECONDS = 33  # an output made again in the backward pass: its forward call
PRODUCT_OPS_PER_MICROSECOND = 28000  # a product's work (2 m n k) per microsecond
ELEMENT_OPS_PER_MICROSECOND = 2100  # other rows' work (elements read and written) per µs

# rows whose work runs at a product's rate
_PRODUCTS = ("matmul", "tensordot", "vecdot", "conv")


def recompute_microseconds(schedule: Any) -> float:
    """The time a chunk's step under ``schedule`` is projected to take beyond the step itself:
    the work of the outputs its backward pass makes again (``Schedule.recompute_cost``, split
    by kind as the dropped outputs' work is) and a call per output made again."""
    dropped = schedule.recomputed
    total = sum(r.cost for r in dropped)
    if not total or not schedule.recompute_cost:
        return 0.0
    made = schedule.recompute_cost / total  # (a dropped output no rule reads is not made)
    us = 0.0
    for r in dropped:
        product = any(k in r.name for k in _PRODUCTS)
        rate = PRODUCT_OPS_PER_MICROSECOND if product else ELEMENT_OPS_PER_MICROSECOND
        us += made * (REDO_MICROSECONDS + r.cost / rate)
    return us


def slices_microseconds(nodes: int, parameters: int, rows: int, slice_rows: int) -> float:
    """The time a chunk of ``rows`` rows computed in slices of ``slice_rows`` rows is projected
    to take beyond its step whole: per slice beyond the first, a step call of ``nodes`` nodes
    and its gradients of ``parameters`` elements (made, flattened and added to the sums)."""
    slices = -(-rows // slice_rows)
    gradients = parameters / GRADIENT_ELEMENTS_PER_MICROSECOND
    return (slices - 1) * (CALL_MICROSECONDS + nodes * NODE_MICROSECONDS + gradients)


def faster(whole: Any, split: Any, args: tuple, nums: Any) -> Any:
    """Of a declared loss's two schedules that fit, ``whole`` (the whole batch, recomputing:
    bit for bit) and ``split`` (micro-batches, each maybe recomputing), the one projected
    faster: the outputs ``whole`` makes again against ``split``'s extra micro-batches (their
    calls, nodes and the sums of the gradients of the arguments ``nums``) and its own
    recomputing in each; ``whole`` on a tie."""
    parameters = sum(  # (the differentiated arguments: their gradients are summed)
        math.prod(tuple(leaf.shape))
        for i in ((nums,) if isinstance(nums, int) else nums)
        for leaf in tree_flatten(args[i])[0]
        if hasattr(leaf, "shape")
    )
    split_us = slices_microseconds(
        len(split.nodes), parameters, split.batch_rows, split.slice_rows
    ) + split.slices * recompute_microseconds(split)
    return split if split_us < recompute_microseconds(whole) else whole
