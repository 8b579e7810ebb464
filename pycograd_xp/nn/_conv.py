"""Convolution and pooling: PyTorch's layouts, each one row of the table."""

from __future__ import annotations

from typing import Any

from ..typing import Array
from ._common import _ints, _ns, _pair, _row


# -- convolution and pooling --------------------------------------------------------------------
# Each is one row of the primitive table (pycograd_xp.ops.nn): one im2col and one matrix
# product on NumPy, a backward that is itself a convolution, shape and memory rules.
def _conv_padding(
    padding: Any, kernel: tuple[int, ...], stride: tuple[int, ...], dilation: tuple[int, ...]
) -> tuple[tuple[int, int], ...]:
    """A convolution's ``(before, after)`` zeros per spatial axis, from PyTorch's ways to say
    them: an int, one per axis, "valid" (none) or "same" (the output as long as the input, at
    stride 1: ``dilation * (kernel - 1)`` zeros, the odd one after); or, beyond PyTorch, a
    ``(before, after)`` pair per axis."""
    n, fname = len(kernel), f"conv{len(kernel)}d"
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0),) * n
        if padding != "same":
            raise ValueError(
                f"{fname}: padding must be 'same', 'valid' or numbers; got {padding!r}"
            )
        if any(s != 1 for s in stride):
            raise ValueError(
                f"{fname}: padding='same' needs stride 1 (got stride={stride}), as in PyTorch; "
                "give the padding in numbers"
            )
        total = [d * (k - 1) for d, k in zip(dilation, kernel, strict=True)]
        return tuple((t // 2, t - t // 2) for t in total)
    sides = padding if isinstance(padding, tuple | list) else (padding,) * n
    if n == 1 and len(sides) == 2 and not isinstance(sides[0], tuple | list):
        sides = (sides,)  # conv1d's (before, after)
    if len(sides) == n and all(isinstance(p, tuple | list) for p in sides):
        pairs = (_ints(p, 2, "each axis' padding pair", fname) for p in sides)
        return tuple((before, after) for before, after in pairs)
    return tuple((p, p) for p in _ints(padding, n, "padding", fname))


def _conv(
    x: Any, w: Any, b: Any, stride: Any, padding: Any, dilation: Any, groups: int, n: int
) -> Any:
    try:
        xp = _ns(x, w)
    except TypeError:  # vmap: arrays of two levels; the lower level's row hands the call up
        xp = _ns(x)
    args = (x, w) if b is None else (x, w, b)  # the bias added inside the row
    stride = _ints(stride, n, "stride", f"conv{n}d", least=1)
    dilation = _ints(dilation, n, "dilation", f"conv{n}d", least=1)
    return _row(xp, f"_conv{n}d")(
        *args,
        stride=stride,
        dilation=dilation,
        padding=_conv_padding(padding, tuple(w.shape[2:]), stride, dilation),
        groups=groups,
    )


def conv1d(
    x: Array,
    w: Array,
    b: Array | None = None,
    stride: int = 1,
    padding: int = 0,
    dilation: int = 1,
    groups: int = 1,
) -> Array:
    """1-D convolution (cross-correlation, as PyTorch). Differentiable in ``x``, ``w`` and ``b``.

    Parameters
    ----------
    x : Array
        The input, (N, C, L).
    w : Array
        The kernel, (O, C / groups, K).
    b : Array, optional
        The bias, (O,).
    stride : int, default 1
        The step between windows.
    padding : int, "same", "valid" or a pair of int, default 0
        Zeros added at each end (a pair: before and after); "same" (stride 1 only) keeps the
        length, as PyTorch (``dilation * (K - 1)`` zeros, the odd one at the end).
    dilation : int, default 1
        The spacing of the kernel's taps.
    groups : int, default 1
        Splits the channels into independent convolutions.

    Returns
    -------
    Array
        (N, O, L').
    """
    return _conv(x, w, b, stride, padding, dilation, groups, 1)


def conv2d(
    x: Array,
    w: Array,
    b: Array | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Array:
    """2-D convolution (cross-correlation, as PyTorch). Differentiable in ``x``, ``w`` and ``b``.

    Parameters
    ----------
    x : Array
        The input, (N, C, H, W).
    w : Array
        The kernel, (O, C / groups, KH, KW).
    b : Array, optional
        The bias, (O,).
    stride : int or pair of int, default 1
        The step between windows.
    padding : int, pair of int, "same", "valid" or pair of pairs, default 0
        Zeros added on each side (pairs of pairs: ``((top, bottom), (left, right))``); "same"
        (stride 1 only) keeps H and W, as PyTorch (``dilation * (K - 1)`` zeros per axis, the
        odd one at the end).
    dilation : int or pair of int, default 1
        The spacing of the kernel's taps.
    groups : int, default 1
        Splits the channels into independent convolutions.

    Returns
    -------
    Array
        (N, O, H', W').
    """
    return _conv(x, w, b, stride, padding, dilation, groups, 2)


def _pool(x: Any, kernel: Any, stride: Any, padding: Any, how: str) -> Any:
    kernel = _pair(kernel, 2)
    stride = _pair(kernel if stride is None else stride, 2)
    padding = tuple((p, p) for p in _pair(padding, 2))
    return _row(_ns(x), f"_{how}_pool2d")(x, kernel=kernel, stride=stride, padding=padding)


def max_pool2d(x: Array, kernel: Any, stride: Any = None, padding: Any = 0) -> Array:
    """Max over windows of the last two axes of (..., H, W).

    The gradient of a window goes to its first maximum in row-major order, as PyTorch's.

    Parameters
    ----------
    x : Array
        The input, (..., H, W).
    kernel : int or pair of int
        The window.
    stride : int or pair of int, optional
        The step between windows (None: the kernel size).
    padding : int or pair of int, default 0
        Padding on each side (it never wins the max).

    Returns
    -------
    Array
        (..., H', W').
    """
    return _pool(x, kernel, stride, padding, "max")


def avg_pool2d(x: Array, kernel: Any, stride: Any = None, padding: Any = 0) -> Array:
    """Mean over windows of the last two axes (zero padding counts, as PyTorch's default).

    Parameters
    ----------
    x : Array
        The input, (..., H, W).
    kernel : int or pair of int
        The window.
    stride : int or pair of int, optional
        The step between windows (None: the kernel size).
    padding : int or pair of int, default 0
        Zeros added on each side.

    Returns
    -------
    Array
        (..., H', W').
    """
    return _pool(x, kernel, stride, padding, "avg")
