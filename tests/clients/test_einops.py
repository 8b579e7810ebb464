"""einops' Array API interface (``einops.array_api``: rearrange, reduce, repeat, pack, unpack,
asnumpy) on pycograd_xp arrays: values against einops on NumPy, gradients against finite
differences. (``einops.array_api`` has no einsum; einops' top-level functions do not take Array
API objects, see the last tests.)"""

from __future__ import annotations

import numpy as np
import pytest
from _clients_common import XF, Case, apply_xfail, frozen, grad_fd, make_tests

import pycograd_xp
from conformance.gradcheck import to_numpy

einops = pytest.importorskip("einops")
ea = pytest.importorskip("einops.array_api")

R = np.random.default_rng(20240603)
X = R.standard_normal((2, 3, 4))
Y = R.standard_normal((2, 5))
M = R.standard_normal((4, 6))
DISTINCT = R.permutation(24).reshape(2, 3, 4) * 0.1 - 1.0  # no ties for max/min
POS = R.uniform(0.5, 1.5, (2, 3, 4))
frozen(globals())


def reshaping(call: str) -> XF:
    """einops builds the target shape of xp.reshape as a list; the standard (and
    array-api-strict) take a tuple."""
    return XF(
        f"einops.array_api.{call} calls xp.reshape(tensor, shape) with shape a list; the "
        "Array API standard takes a tuple of ints and array-api-strict raises TypeError",
        backends=("array_api_strict",),
        raises=TypeError,
    )


def _pack(xp, x, y):
    packed, shapes = ea.pack([x, y], "b *")
    return packed, xp.asarray([int(np.prod(s)) for s in shapes])


def _pack_unpack(xp, x, y):
    packed, shapes = ea.pack([x, y], "b *")
    a, b = ea.unpack(packed * 2.0, shapes, "b *")
    return a, b


def _unpack(xp, m):
    return tuple(ea.unpack(m, [(2,), (1, 3), ()], "b *"))


CASES: dict[str, Case] = {
    "rearrange-transpose": Case(lambda xp, x: ea.rearrange(x, "b h w -> w b h"), (X,)),
    "rearrange-merge": Case(
        lambda xp, x: ea.rearrange(x, "b h w -> b (h w)"),
        (X,),
        value_xfail=reshaping("rearrange 'b h w -> b (h w)'"),
    ),
    "rearrange-split": Case(
        lambda xp, m: ea.rearrange(m, "b (h w) -> b h w", h=2),
        (M,),
        value_xfail=reshaping("rearrange 'b (h w) -> b h w'"),
    ),
    "rearrange-newaxis": Case(
        lambda xp, x: ea.rearrange(x, "b h w -> b 1 h w"),
        (X,),
        value_xfail=reshaping("rearrange 'b h w -> b 1 h w'"),
    ),
    "rearrange-ellipsis": Case(lambda xp, x: ea.rearrange(x, "b ... -> ... b"), (X,)),
    "rearrange-list": Case(
        lambda xp, x, y: ea.rearrange([x[0, :], y[1, :]], "n w -> w n"), (Y, Y[::-1])
    ),
    "reduce-sum": Case(lambda xp, x: ea.reduce(x, "b h w -> b w", "sum"), (X,)),
    "reduce-mean": Case(lambda xp, x: ea.reduce(x, "b h w -> h", "mean"), (X,)),
    "reduce-max": Case(lambda xp, x: ea.reduce(x, "b h w -> b h", "max"), (DISTINCT,)),
    "reduce-min": Case(lambda xp, x: ea.reduce(x, "b h w -> w", "min"), (DISTINCT,)),
    "reduce-prod": Case(lambda xp, x: ea.reduce(x, "b h w -> b", "prod"), (POS,)),
    "reduce-maxpool": Case(
        lambda xp, x: ea.reduce(x, "b h (w 2) -> b h w", "max"),
        (DISTINCT,),
        value_xfail=reshaping("reduce 'b h (w 2) -> b h w'"),
    ),
    "reduce-keepdim": Case(
        lambda xp, x: ea.reduce(x, "b h w -> b () w", "mean"),
        (X,),
        value_xfail=reshaping("reduce 'b h w -> b () w'"),
    ),
    "reduce-any": Case(lambda xp, x: ea.reduce(x > 0, "b h w -> b w", "any"), (X,), grad=False),
    "reduce-all": Case(lambda xp, x: ea.reduce(x > -1, "b h w -> h", "all"), (X,), grad=False),
    "repeat-newaxis": Case(lambda xp, m: ea.repeat(m, "h w -> h w c", c=3), (M,)),
    "repeat-tile": Case(
        lambda xp, m: ea.repeat(m, "h w -> (2 h) w"),
        (M,),
        value_xfail=reshaping("repeat 'h w -> (2 h) w'"),
    ),
    "repeat-upsample": Case(
        lambda xp, m: ea.repeat(m, "h w -> (h a) (w b)", a=2, b=2),
        (M,),
        value_xfail=reshaping("repeat 'h w -> (h a) (w b)'"),
    ),
    "pack": Case(_pack, (X, Y)),
    "pack-unpack": Case(_pack_unpack, (X, Y)),
    "unpack": Case(_unpack, (M,)),
}

test_value, test_grad, test_xfail_list_is_current = make_tests(CASES, __file__)


def test_asnumpy(xp):
    np.testing.assert_array_equal(ea.asnumpy(xp.asarray(X)), X)


def test_asnumpy_refuses_an_array_being_differentiated(xp):
    def f(x):
        ea.asnumpy(x)
        return xp.sum(x)

    with pytest.raises(TypeError, match="stop_gradient|detach"):
        pycograd_xp.grad(f)(xp.asarray(X))


def test_einops_pipeline_gradient(xp, request):
    """A small attention-like block written with einops.array_api, differentiated end to end."""
    apply_xfail(request, xp, reshaping("rearrange 'b (h d) -> b h d'"))
    w = R.standard_normal((6, 6))

    def f(x):
        q = ea.rearrange(x @ xp.asarray(w), "b (h d) -> b h d", h=2)
        s = ea.reduce(q * q, "b h d -> b h", "sum")
        return xp.sum(ea.repeat(s, "b h -> b h r", r=2) * 0.5)

    grad_fd(xp, f, M)


@pytest.mark.xfail(
    reason="einops' top-level functions (einops.rearrange, einops.einsum) find "
    "a backend by the array's type only and know no Array API objects: "
    "RuntimeError 'Tensor type unknown to einops'",
    strict=True,
    raises=RuntimeError,
)
@pytest.mark.parametrize("fn", ["rearrange", "einsum"])
def test_top_level_einops(xp, fn):
    x = xp.asarray(X)
    if fn == "rearrange":
        out = einops.rearrange(x, "b h w -> w h b")
        np.testing.assert_array_equal(to_numpy(out), einops.rearrange(X, "b h w -> w h b"))
    else:
        out = einops.einsum(x, x, "b h w, b h w -> b")
        np.testing.assert_allclose(to_numpy(out), einops.einsum(X, X, "b h w, b h w -> b"))
