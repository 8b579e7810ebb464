"""Attention: scaled dot-product (a flash-style fused row) and multi-head attention."""

from __future__ import annotations

from typing import Any, cast

from ..typing import Array
from ._activations import linear
from ._common import _ns, _row


# -- attention ----------------------------------------------------------------------------------
def scaled_dot_product_attention(
    q: Array,
    k: Array,
    v: Array,
    mask: Array | None = None,
    is_causal: bool = False,
    scale: float | None = None,
    *,
    causal: bool | None = None,
) -> Array:
    """``softmax(q k^T * scale) v`` over the last two axes (PyTorch's layout).

    A boolean mask gives masked scores the dtype's lowest value, so a fully masked row stays
    finite (the mean of v); a float mask is added to the scaled scores, as PyTorch's (its dtype
    promotes with q, k and v's; differentiable; -inf excludes a key, and a row whose scores are
    all -inf gives 0). One row (``xp._attention``), flash-style: blocks of queries (and keys)
    within ``ops.nn.attention.ATTENTION_BLOCK_BYTES``, so no Lq x Lk array is made for the whole
    batch; the VJP keeps q, k, v, the output and each row's log-sum-exp, and recomputes the
    probabilities block by block.

    Parameters
    ----------
    q : Array
        Queries, (..., Lq, d).
    k : Array
        Keys, (..., Lk, d).
    v : Array
        Values, (..., Lk, dv).
    mask : Array, optional
        Broadcastable to (..., Lq, Lk): booleans, True where attention is allowed, or real
        floats added to the scaled scores.
    is_causal : bool, default False
        Add the lower-triangular mask (top-left aligned).
    scale : float, optional
        The score scale (None: ``1 / sqrt(d)``).
    causal : bool, optional
        The same as ``is_causal`` (keyword only).

    Returns
    -------
    Array
        (..., Lq, dv).
    """
    if causal is not None and is_causal and not causal:
        raise ValueError(
            "scaled_dot_product_attention(): is_causal=True and causal=False contradict each "
            "other (causal is another name for is_causal); pass one of them"
        )
    is_causal = is_causal if causal is None else causal
    xp = _attention_ns(q, k, v)
    q, k, v = (xp.expand_dims(a, axis=-2) for a in (q, k, v))  # one head: (..., L, 1, d)
    if mask is not None:  # (..., Lq, Lk) -> (..., 1, Lq, Lk)
        mask = xp.reshape(mask, (1,) * (2 - mask.ndim) + tuple(mask.shape))
        mask = xp.expand_dims(mask, axis=-3)
    out = _row(xp, "_attention")(q, k, v, mask, is_causal=is_causal, scale=scale)[0]
    return out[..., 0, :]


def _attention_ns(*xs: Any) -> Any:
    try:
        return _ns(*xs)
    except TypeError:  # vmap: arrays of two levels; the lower level's row hands the call up
        return _ns(xs[0])


def multi_head_attention(
    x: Array,
    params: dict[str, Any],
    num_heads: int,
    mask: Array | None = None,
    context: Array | None = None,
    causal: bool = False,
) -> Array:
    """Multi-head attention of ``x`` over ``context`` (default ``x``).

    The heads stay beside the features ((B, L, heads, D / heads), a view of each projection)
    through the attention row, whose output reshapes back to (B, L, D) without a copy.

    Parameters
    ----------
    x : Array
        The queries' input, (B, L, D).
    params : dict
        ``wq, wk, wv, wo`` (D, D) and optional biases ``bq, bk, bv, bo`` (D,).
    num_heads : int
        The number of heads (dividing D).
    mask : Array, optional
        Broadcastable to (B, heads, Lq, Lk): booleans, True where attention is allowed, or
        additive floats (as :func:`scaled_dot_product_attention`'s).
    context : Array, optional
        The keys' and values' input, (B, Lk, D) (None: ``x``).
    causal : bool, default False
        Add the causal mask.

    Returns
    -------
    Array
        (B, L, D).
    """
    xp = _ns(x)
    context = x if context is None else context
    b, lq, d = cast(tuple[int, int, int], x.shape)
    lk = cast(int, context.shape[1])
    if d % num_heads:
        raise ValueError(f"multi_head_attention: width {d} is not divisible by {num_heads} heads")
    hd = d // num_heads

    def heads(t: Any, w: str, bias: str, length: int) -> Any:
        return xp.reshape(linear(t, params[w], params.get(bias)), (b, length, num_heads, hd))

    q, k, v = (
        heads(x, "wq", "bq", lq),
        heads(context, "wk", "bk", lk),
        heads(context, "wv", "bv", lk),
    )
    out = _row(xp, "_attention")(q, k, v, mask, is_causal=causal)[0]
    return linear(xp.reshape(out, (b, lq, d)), params["wo"], params.get("bo"))
