"""The fused rows behind :mod:`pycograd_xp.nn`, a module per kind: convolution (:mod:`.conv`),
pooling (:mod:`.pool`), the linear layer (:mod:`.dense`), activations (:mod:`.activations`:
relu and the transformer's gelu, silu, softplus), normalisations (:mod:`.norms`), the loss
(:mod:`.losses`: cross-entropy) and attention (:mod:`.attention`), with what they share: the
windows of convolution and pooling and the backend's capabilities (:mod:`.windows`),
evaluation block by block (:mod:`.pieces`). softmax, log_softmax and logsumexp are rows of
``special.py``.

These rows are not names of the Array API standard, so they are private attributes of each
namespace (``xp._conv2d``): the standard surface stays exactly the standard's, and the abstract
backend (``pycograd_xp.memory``), vmap's batched backends and ``compile`` still see them as
ordinary rows, because each of those builds one function per row of the table whatever its
name. :mod:`pycograd_xp.nn` is their public face. Each module says its rows' conventions (what
they save, their derivatives, batching and memory) beside them.
"""

from __future__ import annotations

# importing each declares its rows and attaches their rules
from . import activations, attention, conv, dense, losses, norms, pieces, pool, windows

__all__ = [
    "activations",
    "attention",
    "conv",
    "dense",
    "losses",
    "norms",
    "pieces",
    "pool",
    "windows",
]
