"""The composed convolution and pooling that ``pycograd_xp.nn`` used before they became rows:
strided slices, a stack and a tensordot, all standard functions, so their gradients come from
the standard's rules. Kept as a reference: the rows are checked against it (values, gradients)
and ``benchmarks/bench_cnn.py`` times it beside them."""

from __future__ import annotations

from typing import Any

import array_api_compat


def _ns(*xs: Any) -> Any:
    return array_api_compat.array_namespace(*xs)


def _pad(xp: Any, x: Any, axis: int, before: int, after: int, value: float = 0.0) -> Any:
    if not before and not after:
        return x
    parts = []
    for n in (before, None, after):
        if n is None:
            parts.append(x)
        elif n:
            shape = list(x.shape)
            shape[axis] = n
            parts.append(xp.full(tuple(shape), value, dtype=x.dtype))
    return xp.concat(parts, axis=axis)


def _pair(v: Any, n: int) -> tuple[int, ...]:
    return tuple(v) if isinstance(v, tuple | list) else (v,) * n


def _patches(
    x: Any, kernel: tuple[int, ...], stride: tuple[int, ...], dilation: tuple[int, ...]
) -> Any:
    """Sliding windows of the trailing ``len(kernel)`` axes of ``x`` (already padded):
    shape ``x.shape[:-n] + kernel + out_sizes``, built from strided slices (differentiable)."""
    xp = _ns(x)
    n = len(kernel)
    spatial = x.shape[-n:]
    out = [(spatial[i] - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1 for i in range(n)]
    if min(out) < 1:
        raise ValueError(
            f"convolution/pooling: kernel {kernel} (dilation {dilation}) is larger "
            f"than the padded input {tuple(spatial)}"
        )
    windows = []
    for offsets in _grid(kernel):
        idx = [slice(None)] * (x.ndim - n)
        for i, o in enumerate(offsets):
            start = o * dilation[i]
            idx.append(slice(start, start + stride[i] * (out[i] - 1) + 1, stride[i]))
        windows.append(x[tuple(idx)])
    stacked = xp.stack(windows, axis=x.ndim - n)  # (..., prod(kernel), *out)
    return xp.reshape(stacked, (*x.shape[:-n], *kernel, *out))


def _grid(kernel: tuple[int, ...]) -> list[tuple[int, ...]]:
    grid: list[tuple[int, ...]] = [()]
    for k in kernel:
        grid = [g + (i,) for g in grid for i in range(k)]
    return grid


def _conv(x: Any, w: Any, b: Any, stride: Any, padding: Any, dilation: Any, n: int) -> Any:
    xp = _ns(x, w)
    stride, padding, dilation = _pair(stride, n), _pair(padding, n), _pair(dilation, n)
    for i in range(n):
        x = _pad(xp, x, x.ndim - n + i, padding[i], padding[i])
    cols = _patches(x, tuple(w.shape[2:]), stride, dilation)  # (N, C, *K, *out)
    # contract channels and kernel offsets: (N, *out, O)
    y = xp.tensordot(cols, w, axes=(list(range(1, 2 + n)), list(range(1, 2 + n))))
    y = xp.permute_dims(y, (0, y.ndim - 1, *range(1, y.ndim - 1)))
    if b is not None:
        y = y + xp.reshape(b, (1, -1) + (1,) * n)
    return y


def conv1d(
    x: Any, w: Any, b: Any = None, stride: int = 1, padding: int = 0, dilation: int = 1
) -> Any:
    """1-D convolution (cross-correlation, as PyTorch): x (N, C, L), w (O, C, K) -> (N, O, L')."""
    return _conv(x, w, b, stride, padding, dilation, 1)


def conv2d(
    x: Any, w: Any, b: Any = None, stride: Any = 1, padding: Any = 0, dilation: Any = 1
) -> Any:
    """2-D convolution: x (N, C, H, W), w (O, C, KH, KW) -> (N, O, H', W'). ``stride``,
    ``padding``, ``dilation``: an int or a pair."""
    return _conv(x, w, b, stride, padding, dilation, 2)


def _pool(x: Any, kernel: Any, stride: Any, padding: Any, how: str) -> Any:
    xp = _ns(x)
    kernel = _pair(kernel, 2)
    stride = _pair(kernel if stride is None else stride, 2)
    padding = _pair(padding, 2)
    fill = xp.finfo(x.dtype).min if how == "max" else 0.0
    for i in range(2):
        x = _pad(xp, x, x.ndim - 2 + i, padding[i], padding[i], fill)
    cols = _patches(x, kernel, stride, (1, 1))  # (N, C, KH, KW, H', W')
    reduce = xp.max if how == "max" else xp.mean
    return reduce(cols, axis=(2, 3))


def max_pool2d(x: Any, kernel: Any, stride: Any = None, padding: Any = 0) -> Any:
    """Max over windows of (N, C, H, W) (stride defaults to the kernel size)."""
    return _pool(x, kernel, stride, padding, "max")


def avg_pool2d(x: Any, kernel: Any, stride: Any = None, padding: Any = 0) -> Any:
    """Mean over windows (zero padding counts, as PyTorch's default)."""
    return _pool(x, kernel, stride, padding, "avg")
