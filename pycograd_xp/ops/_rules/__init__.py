"""Kits of rules shared by the ops: each written once, imported by the op blocks that use it.

``vjp`` (axes, broadcasting undone, scatter-adds), ``jvp`` (None-aware sums, ``linear(row)``,
the ``TRANSPOSED`` marker), ``batching`` (axis shifting, ``reduction(row)``, constants made at
the right vmap level), ``shapes`` (abstract arrays, NumPy's dtype and memory-order rules, the
buffers a backend call allocates)."""
