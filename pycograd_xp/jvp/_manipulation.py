"""JVP rules of the manipulation functions: all linear (they move, copy or join elements)."""

from ..ops._rules.jvp import linear_rows

linear_rows("broadcast_arrays", "broadcast_to", "concat", "expand_dims", "flip", "moveaxis",
       "permute_dims", "repeat", "reshape", "roll", "squeeze", "stack", "tile", "unstack")
