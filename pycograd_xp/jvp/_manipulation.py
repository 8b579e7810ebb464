"""JVP rules of the manipulation functions: all linear (they move, copy or join elements)."""

from ._helpers import linear

linear("broadcast_arrays", "broadcast_to", "concat", "expand_dims", "flip", "moveaxis",
       "permute_dims", "repeat", "reshape", "roll", "squeeze", "stack", "tile", "unstack")
