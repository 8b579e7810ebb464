"""The activation rows: ``_relu`` (beside the convolutions), and the transformer's ``_gelu``,
``_gelu_tanh``, ``_sigmoid``, ``_silu`` and ``_softplus`` (:mod:`pycograd_xp.nn`'s activations).

relu's VJP passes ``g`` where the output is positive, 0 elsewhere (0 at 0, as PyTorch's
``threshold_backward``), read from the output alone: the tape keeps no mask beside it; its JVP
the tangent where the output is positive. The transformer's activations keep their input and
evaluate block by block on a raw backend that writes in place (:mod:`.pieces`), each with its
derivative written once (``_d_gelu``, ...) for the VJP and the JVP.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from ..._primitive import Array, primitive
from .._rules.jvp import call
from .._rules.shapes import new, ufunc_buffers
from ..searching import select, where_memory
from .pieces import (
    FP,
    BlockConst,
    _activation_jvp,
    _activation_vjp,
    _exp_in_place,
    _into,
    _pieces_memory,
    _same_row,
    _same_shape,
    by_pieces,
    in_place,
)
from .windows import _like, _mask_blocks, _own, _raw, caps


def _relu_vjp(ns, g, out, x, /, *, owned=False):
    """``where(out > 0, g, 0)``; into ``g`` itself when the tape says only it holds ``g``
    (``owned``) on a raw backend that writes in place, block by block of the batch so that the
    mask (a quarter of the cotangent in bytes) never exists whole: no second array of the
    layer's size. Measured: the small CNN's step peaked here, at its first layer's saved
    output, cotangent, mask and result (2.8, 2.8, 0.7 and 2.8 MB); compile's trace is handed
    the cotangent as the eager run is (its replay checks the buffer first). Otherwise (a
    shared cotangent) one select."""
    if not (owned and _raw(ns) and caps(ns).views_alias and not caps(ns).chunked and g.ndim):
        return (select(ns, out > 0, g, 0),)
    for a, b in _mask_blocks(ns, g):
        block = g[a:b, ...]
        select(ns, out[a:b, ...] > 0, block, 0, out=block)
    return (g,)


def _relu_jvp(ns, t, out, x, /):
    return select(ns, out > 0, t[0], 0)


def _relu_memory(out, x, /):
    """The mask ``x > 0`` (one byte an element) beside the select's own transients."""
    mask = new(x.shape, np.bool_)
    return mask.nbytes + max(ufunc_buffers(mask, x, 0), where_memory(out, mask, x, 0))


# -- _relu ---------------------------------------------------------------------------------------


@primitive(FP, needs=())
def _relu(bk: Any, x: Array, /) -> Any:
    """``where(x > 0, x, 0)``: 0 at 0 and at NaN, +0 at -0. One comparison and one select
    with a Python zero (on NumPy a bitwise blend: faster than ``maximum``, and exact where
    ``maximum`` keeps NaN and -0). Its VJP reads only the output: no mask is kept."""
    own = _own(bk, "_relu")
    if own is not None:
        return own(x)
    return select(bk, x > 0, x, 0)


_relu.defvjp(_relu_vjp, saves=("out",), takes_owned=True)


_relu.defjvp(_relu_jvp)


_relu.defbatch(lambda ns, dims, x, /: ns._relu(x))


_relu.defshape(_same_shape, memory=_relu_memory)


# -- _gelu, _gelu_tanh ---------------------------------------------------------------------------

_SQRT_2_PI = math.sqrt(2 / math.pi)


_GELU_A = 0.044715


_INV_SQRT2 = 1 / math.sqrt(2.0)


_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)


_GELU_CA = _SQRT_2_PI * _GELU_A


# x is clipped to [-_GELU_X, _GELU_X] where u = sqrt(2/pi) (x + 0.044715 x^3) is formed, so
# that -2u stays within +-78.5 and its exponential finite: the sigmoid sigma(2u) is then 1
# exactly above the bound (the tanh GELU is x there, its derivative 1) and below 1e-34 under
# it (GELU below 1e-33 in magnitude, its derivative below 1e-29, where the true ones are
# nearer 0). Clipping x, not -2u, also keeps x^3 finite: a clip of -2u alone (at 80, as
# before) gave the derivative inf - inf = NaN from |x| = 1.2e13 in float32, and GELU
# x e^-80, -1.8e-5 at x = -1e30. Within the bound the values are those of the unclipped form.
_GELU_X = 9.6


def _bound_row(value: float) -> Any:
    """A clip's bound ``value`` as ``minimum``'s (``maximum``'s) second operand: a row of the
    operand's last axis where that axis is long (NumPy's minimum runs its vector loop on two
    arrays, twice as fast as against a number broadcast: measured 27 against 50 us a block of
    128K float32), else the number. The same values either way."""

    def operand(ns: Any, u: Any) -> Any:
        n = u.shape[-1] if u.ndim else 0
        if n < _ROW_MIN:
            return value
        return ns.full((n,), value, dtype=u.dtype, **_like(ns, u))

    return operand


# the shortest last axis for which a clip's bound is a row (_bound_row) or a block (_bound_block)
_ROW_MIN = 64


_floor, _ceiling = _bound_row(-_GELU_X), _bound_row(_GELU_X)


def _bound_block(bound: Any) -> Any:
    """A clip's bound ``bound(ns, dtype)`` (a number) as ``minimum``'s second operand for the
    blocks of one call: an array of a block's shape (no broadcast in ``minimum``, made once,
    :class:`BlockConst`), the number for a block whose last axis is too short to gain. GELU's
    clips and the sigmoid's."""
    held: list = []

    def operand(ns: Any, u: Any) -> Any:
        if u.ndim == 0 or u.shape[-1] < _ROW_MIN:
            return bound(ns, u.dtype)
        if not held:
            held.append(BlockConst(bound(ns, u.dtype)))
        return held[0](ns, u)

    return operand


def _gelu_bounds() -> dict[str, Any]:
    """GELU's clip bounds for the blocks of one call (:func:`_bound_block`), as the keywords of
    its value and derivative (:func:`_activation_vjp`'s ``per_call``)."""
    return {
        "floor": _bound_block(lambda ns, dtype: -_GELU_X),
        "ceiling": _bound_block(lambda ns, dtype: _GELU_X),
    }


def _gelu_tanh_f(
    bk: Any, x: Any, dst: Any = None, floor: Any = _floor, ceiling: Any = _ceiling
) -> Any:
    # 0.5 x (1 + tanh(u)) = x sigmoid(2u) = x / (1 + exp(-2u)), -2u = x (-2c - 2ca x^2): an
    # exponential is cheaper than tanh (and the sigmoid exact where 1 + tanh cancels); on a
    # backend that writes in place, two temporaries and eight passes, the last one into ``dst``
    # (by_pieces' block of the output) where the backend takes out=. Only the lower clip is
    # needed here (above the bound -2u is hugely negative, its exponential 0, the value x).
    if not in_place(bk):
        return 0.5 * x * (1 + bk.tanh(_SQRT_2_PI * (x + _GELU_A * x * x * x)))
    v = bk.maximum(x, floor(bk, x))
    u = v * v
    u *= -2 * _GELU_CA
    u += -2 * _SQRT_2_PI
    u *= v
    e = _exp_in_place(bk, u)
    e += 1
    return _into(bk, bk.divide, v, e, dst)


def _reciprocal_in_place(ns: Any, e: Any) -> Any:
    """``1 / e`` into ``e`` where the backend's divide takes ``out=`` (NumPy's), a new array
    elsewhere (the abstract backend's: a projection counts it); the same values."""
    c = caps(ns)
    if c.takes_out is not None and c.takes_out(ns.divide) and isinstance(e, c.array_type):
        return ns.divide(1.0, e, out=e)
    return 1.0 / e


def _d_gelu_tanh(ns: Any, x: Any, floor: Any = _floor, ceiling: Any = _ceiling) -> Any:
    # s (1 + x 2u' (1 - s)), s = sigmoid(2u) = 1 / (1 + exp(-2u)), x 2u' = x (2c + 6ca x^2),
    # x clipped at +-_GELU_X (above it s = 1 exactly and the derivative 1): the same operations
    # in the same order whether in place (fresh temporaries, a backend that writes in place) or
    # not (ours, for a higher order: remat's recompute pulls back there, and its gradients are
    # the plain step's to the bit)
    if not in_place(ns):
        v = ns.minimum(ns.maximum(x, _floor(ns, x)), _ceiling(ns, x))  # (rows: no item writes)
        x2 = v * v
        u = (x2 * (-2 * _GELU_CA) + (-2 * _SQRT_2_PI)) * v
        e = ns.exp(u) + 1
        sg = 1.0 / e
        w = (x2 * (6 * _GELU_CA) + 2 * _SQRT_2_PI) * v
        w = w - w * sg
        return (w + 1) * sg
    # in v's, u's and x2's buffers where the backend takes out= (a new array each on abstract
    # arrays: what a projection counts, an upper bound)
    v = ns.maximum(x, floor(ns, x))
    v = _into(ns, ns.minimum, v, ceiling(ns, v), v)
    x2 = v * v
    u = x2 * (-2 * _GELU_CA)
    u += -2 * _SQRT_2_PI
    u *= v
    e = _exp_in_place(ns, u)
    del u
    e += 1
    sg = _reciprocal_in_place(ns, e)
    del e
    x2 *= 6 * _GELU_CA
    x2 += 2 * _SQRT_2_PI
    x2 *= v  # x 2u'
    del v
    m = x2 * sg
    x2 -= m  # x 2u' (1 - s)
    del m
    x2 += 1
    x2 *= sg
    return x2


@primitive(FP, needs=())
def _gelu_tanh(bk: Any, x: Array, /) -> Any:
    """GELU's tanh approximation ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``, block by
    block, as ``x sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3))`` (the same function; one exp, no
    tanh) on a backend that writes in place; its VJP keeps only x."""
    own = _own(bk, "_gelu_tanh")
    if own is not None:
        return own(x)
    return by_pieces(bk, functools.partial(_gelu_tanh_f, **_gelu_bounds()), x)


_gelu_tanh.defvjp(_activation_vjp(_d_gelu_tanh, _gelu_bounds), saves=("x",), takes_owned=True)


_gelu_tanh.defjvp(_activation_jvp(_d_gelu_tanh))


_gelu_tanh.defbatch(_same_row(_gelu_tanh))


_gelu_tanh.defshape(_same_shape, memory=_pieces_memory(3))


def _gelu_f(bk: Any, x: Any, dst: Any = None) -> Any:
    # 0.5 x (1 + erf(x / sqrt 2)), erf the backend's (scipy.special's on NumPy)
    return 0.5 * x * (1 + call(bk, "_erf", x * _INV_SQRT2))


def _d_gelu(ns: Any, x: Any) -> Any:
    # Phi(x) + x phi(x)
    return 0.5 * (1 + call(ns, "_erf", x * _INV_SQRT2)) + x * (_INV_SQRT_2PI * ns.exp(-0.5 * x * x))


@primitive(FP, needs=())
def _gelu(bk: Any, x: Array, /) -> Any:
    """GELU ``x Phi(x) = 0.5 x (1 + erf(x / sqrt 2))`` with the backend's erf (scipy.special's
    on NumPy); a backend without erf raises NotImplementedError (``pycograd_xp.nn.gelu`` then
    composes its approximation). Its VJP keeps only x."""
    own = _own(bk, "_gelu")
    if own is not None:
        return own(x)
    return by_pieces(bk, _gelu_f, x)


_gelu.defvjp(_activation_vjp(_d_gelu), saves=("x",), takes_owned=True)


_gelu.defjvp(_activation_jvp(_d_gelu))


_gelu.defbatch(_same_row(_gelu))


_gelu.defshape(_same_shape, memory=_pieces_memory(3))


# -- _sigmoid ------------------------------------------------------------------------------------


def _exp_limit(ns: Any, dtype: Any) -> float:
    """1 less than the largest argument whose exponential is finite in ``dtype`` (87.7 in
    float32, 708.8 in float64): the bound the sigmoid clips ``-x`` at."""
    return math.log(float(ns.finfo(dtype).max)) - 1.0


def _limit_block() -> Any:
    """The sigmoid's bound for the blocks of one call (:func:`_bound_block`)."""
    return _bound_block(_exp_limit)


def _sigmoid_f(bk: Any, x: Any, dst: Any = None, limit: Any = None) -> Any:
    # 1 / (1 + exp(-x)) with -x clipped at the exponential's limit (it never overflows; below
    # -87.7 in float32 the sigmoid is subnormal, given as its value there): a few ulp of
    # relative error in both tails. (tanh(x / 2) + 1) / 2 loses the negative one to the
    # cancellation in tanh + 1: 2e-4 relative error at -10 in float32, 0 for 2e-9 below -17.5.
    if not in_place(bk):
        return 1.0 / (1.0 + bk.exp(bk.minimum(-x, _exp_limit(bk, x.dtype))))
    u = x * -1.0
    bound = _exp_limit(bk, u.dtype) if limit is None else limit(bk, u)
    u = _into(bk, bk.minimum, u, bound, u)
    e = _exp_in_place(bk, u)
    e += 1
    c = caps(bk)
    if dst is not None and dst.dtype == e.dtype and c.takes_out is not None:
        if c.takes_out(bk.divide) and isinstance(dst, c.array_type):
            return bk.divide(1.0, e, out=dst)  # by_pieces' block of the output
    return _reciprocal_in_place(bk, e)


def _sigmoid_vjp(ns, g, out, x, /, *, owned=False):
    """``g s (1 - s)`` from the output s, as PyTorch's ``sigmoid_backward`` and JAX's logistic
    (no exponential again); into ``g`` itself where only the backward pass holds it."""
    t = 1.0 - out
    t *= out
    if owned:
        g *= t
        return (g,)
    return (g * t,)


@primitive(FP, needs=())
def _sigmoid(bk: Any, x: Array, /) -> Any:
    """The logistic sigmoid ``1 / (1 + exp(-x))``, block by block; its VJP keeps the output."""
    own = _own(bk, "_sigmoid")
    if own is not None:
        return own(x)
    return by_pieces(bk, functools.partial(_sigmoid_f, limit=_limit_block()), x)


_sigmoid.defvjp(_sigmoid_vjp, saves=("out",), takes_owned=True)


_sigmoid.defjvp(lambda ns, t, out, x, /: t[0] * (out * (1.0 - out)))


_sigmoid.defbatch(_same_row(_sigmoid))


_sigmoid.defshape(_same_shape, memory=_pieces_memory(3))


# -- _silu ---------------------------------------------------------------------------------------


def _silu_f(bk: Any, x: Any, dst: Any = None, limit: Any = None) -> Any:
    # x sigmoid(x), the sigmoid as pycograd_xp.nn.sigmoid's (both tails to a few ulp), as
    # (-u) s from the sigmoid's clipped u = min(-x, limit): x where x is above -limit (the same
    # product to the bit, both factors negated), -limit below it, where x s grew with x (-2.7
    # at float32's largest, for a true -0)
    if not in_place(bk):
        u = bk.minimum(-x, _exp_limit(bk, x.dtype))
        return (-u) * (1.0 / (1.0 + bk.exp(u)))
    u = x * -1.0
    u = _into(bk, bk.minimum, u, _exp_limit(bk, u.dtype) if limit is None else limit(bk, u), u)
    e = bk.exp(u)
    e += 1
    e = _reciprocal_in_place(bk, e)  # s
    u *= -1.0
    return _into(bk, bk.multiply, u, e, u if dst is None else dst)


def _d_silu(ns: Any, x: Any, limit: Any = None) -> Any:
    # s (1 + x (1 - s)), x clipped below at -limit as in _silu_f (the derivative there below
    # 1e-36, where x s (1 - s) grew with x): the same operations in place or not
    if not in_place(ns):
        u = ns.minimum(-x, _exp_limit(ns, x.dtype))
        s = 1.0 / (1.0 + ns.exp(u))
        return s * (1 - u * (1 - s))
    u = x * -1.0
    u = _into(ns, ns.minimum, u, _exp_limit(ns, u.dtype) if limit is None else limit(ns, u), u)
    e = ns.exp(u)
    e += 1
    s = _reciprocal_in_place(ns, e)
    t = 1 - s
    t *= u
    del u
    t *= -1.0
    t += 1
    t *= s
    return t


def _limits() -> dict[str, Any]:
    """A call's keywords for the sigmoid inside SiLU's and softplus' derivatives."""
    return {"limit": _limit_block()}


@primitive(FP, needs=())
def _silu(bk: Any, x: Array, /) -> Any:
    """SiLU (swish) ``x sigmoid(x)``, block by block; its VJP keeps only x."""
    own = _own(bk, "_silu")
    if own is not None:
        return own(x)
    return by_pieces(bk, functools.partial(_silu_f, limit=_limit_block()), x)


_silu.defvjp(_activation_vjp(_d_silu, _limits), saves=("x",), takes_owned=True)


_silu.defjvp(_activation_jvp(_d_silu))


_silu.defbatch(_same_row(_silu))


_silu.defshape(_same_shape, memory=_pieces_memory(3))


# -- _softplus -----------------------------------------------------------------------------------


def _softplus_f(bk: Any, x: Any, dst: Any = None) -> Any:
    # log(1 + exp(x)) as logaddexp(0, x): stable at both ends
    return bk.logaddexp(bk.zeros_like(x), x)


def _d_softplus(ns: Any, x: Any, limit: Any = None) -> Any:
    return _sigmoid_f(ns, x, limit=limit)  # the sigmoid, nn.sigmoid's


@primitive(FP, needs=())
def _softplus(bk: Any, x: Array, /) -> Any:
    """softplus ``log(1 + exp(x))`` (logaddexp), block by block; its VJP keeps only x."""
    own = _own(bk, "_softplus")
    if own is not None:
        return own(x)
    return by_pieces(bk, _softplus_f, x)


_softplus.defvjp(_activation_vjp(_d_softplus, _limits), saves=("x",), takes_owned=True)


_softplus.defjvp(_activation_jvp(_d_softplus))


_softplus.defbatch(_same_row(_softplus))


_softplus.defshape(_same_shape, memory=_pieces_memory(2))
