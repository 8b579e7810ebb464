"""Statistical functions: reductions and cumulative reductions.

Reductions batch by shifting their axes past the batch axis. Their shape rules give the reduced
shape and NumPy's dtype for it; a reduction that casts (``sum(x, dtype=float64)`` of float32)
buffers its input, ``std``/``var`` allocate the deviations from the mean (one input-sized
temporary, and a buffer to broadcast the mean), ``cumulative_*`` with ``include_initial``
concatenates a zero slice to the result (one output-sized temporary, in array-api-compat).
"""

from . import cumulative, moments, reductions

__all__ = ["cumulative", "moments", "reductions"]
