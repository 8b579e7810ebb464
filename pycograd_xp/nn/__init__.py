"""Functional neural-network layers, numerically stable, written in Array API code.

Every function takes arrays of any pycograd_xp namespace (it finds the namespace from its
inputs), so it is differentiable and runs on every backend. ``linear`` weights are (in, out),
applied as ``x @ w`` (JAX's and Flax's layout; PyTorch's ``nn.Linear`` stores (out, in));
convolutions and pooling follow PyTorch's layout: (N, C, L) / (N, C, H, W) inputs and
(O, C, K...) kernels. Random layers (dropout, initializers) take an explicit
:class:`pycograd_xp.random.Key`.
"""

from __future__ import annotations

from .._exports import module_dir as _module_dir
from ._activations import (
    elu,
    gelu,
    leaky_relu,
    linear,
    log_softmax,
    logsumexp,
    relu,
    sigmoid,
    silu,
    softmax,
    softplus,
    tanh,
)
from ._attention import multi_head_attention, scaled_dot_product_attention
from ._conv import avg_pool2d, conv1d, conv2d, max_pool2d
from ._init import glorot_normal, glorot_uniform, he_normal, he_uniform, normal, uniform
from ._layers import dropout, embedding
from ._losses import binary_cross_entropy_with_logits, cross_entropy, mse
from ._modules import Linear, Module, static
from ._norms import batch_norm, layer_norm, rms_norm

__all__ = [
    "Linear",
    "Module",
    "avg_pool2d",
    "batch_norm",
    "binary_cross_entropy_with_logits",
    "conv1d",
    "conv2d",
    "cross_entropy",
    "dropout",
    "elu",
    "embedding",
    "gelu",
    "glorot_normal",
    "glorot_uniform",
    "he_normal",
    "he_uniform",
    "layer_norm",
    "leaky_relu",
    "linear",
    "log_softmax",
    "logsumexp",
    "max_pool2d",
    "mse",
    "multi_head_attention",
    "normal",
    "relu",
    "rms_norm",
    "scaled_dot_product_attention",
    "sigmoid",
    "silu",
    "softmax",
    "softplus",
    "static",
    "tanh",
    "uniform",
]


# dir() lists the public names only (what completion offers)
__dir__ = _module_dir(globals())
