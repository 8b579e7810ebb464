"""Cubed-specific integration for pycograd_xp. The core package never imports Cubed; code that
needs it lives here and is imported only when a Cubed namespace is in use.

- ``cubed_plugin.random``: chunked random sampling, each block drawn lazily from its own key.

Memory projections against ``Spec.allowed_mem``, progress and measured-memory callbacks, chunk
planning and the chunked training driver are to come (see the issues).
"""
