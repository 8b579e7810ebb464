"""User code that annotates its arrays, checked by ``mypy --strict`` in CI (``.ci/run``).

    python examples/typed_user_code.py
    mypy --strict --follow-imports=silent examples/typed_user_code.py

Arrays are annotated with :class:`pycograd_xp.typing.Array` (the protocol every array of a
pycograd_xp namespace satisfies), the namespace with :data:`pycograd_xp.typing.Namespace`.
``grad`` and ``value_and_grad`` keep the signature of the function they differentiate, so a
call with the wrong arguments is a type error; the namespace's functions are ``Any`` to mypy,
so their results are annotated where they are bound.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, assert_type

import numpy as np

import pycograd_xp as pg
from pycograd_xp import optim
from pycograd_xp.typing import Array, DType, Namespace

xp: Namespace = pg.namespace(np)


class Params(NamedTuple):
    w: Array
    b: Array


def predict(params: Params, x: Array) -> Array:
    """Logits of a linear model: ``x @ w + b`` (``x`` of shape (n, d))."""
    return x @ params.w + params.b


def loss(params: Params, x: Array, y: Array) -> Array:
    """Mean logistic loss of labels ``y`` in {0, 1}."""
    logits = predict(params, x)
    out: Array = xp.mean(xp.logaddexp(0.0, logits) - y * logits)
    return out


def per_example_grads(params: Params, x: Array, y: Array) -> Params:
    """One gradient per row of ``x``: ``vmap`` of ``grad`` over the rows."""
    one = pg.vmap(pg.grad(loss), in_axes=(None, 0, 0))
    grads: Params = one(params, x[:, None, :], y[:, None])
    return grads


def train(x: Array, y: Array, steps: int = 100) -> tuple[Params, float]:
    """Adam on the full batch; the final parameters and loss."""
    dtype: DType = x.dtype
    params = Params(w=xp.zeros(x.shape[1], dtype=dtype), b=xp.asarray(0.0, dtype=dtype))
    tx = optim.adam(0.1)
    state = tx.init(params)
    step = pg.value_and_grad(loss)
    value: Array = xp.asarray(0.0)
    for _ in range(steps):
        value, grads = step(params, x, y)
        updates, state = tx.update(grads, state, params)
        params = optim.apply_updates(params, updates)
    return params, float(value)


def imperative(x: Array, y: Array) -> Array | None:
    """The same gradient, PyTorch's way: mark, backward, read ``.grad``."""
    w: Array = xp.zeros(x.shape[1])
    w.requires_grad_()
    params = Params(w=w, b=xp.asarray(0.0))
    loss(params, x, y).backward()
    return w.grad


def static_checks(params: Params, x: Array, y: Array) -> None:
    """What mypy verifies here (``assert_type`` does nothing at run time): operators keep the
    array type, the runtime class satisfies the protocol, and the transforms keep the
    differentiated function's signature."""
    assert_type(2.0 * x + x**2 - x / 2, Array)
    assert_type(x.T @ x, Array)
    assert_type(x > 0, Array)
    assert_type(x.grad, Array | None)
    assert_type(pg.stop_gradient(x), Array)
    concrete: pg.Array = xp.asarray(1.0)
    _annotated: Array = concrete
    if TYPE_CHECKING:  # errors mypy must report (warn_unused_ignores fails an ignore that isn't)
        pg.grad(loss)(params, x)  # type: ignore[call-arg]
        pg.value_and_grad(loss)(params, x, "y")  # type: ignore[arg-type]
        x + "1"  # type: ignore[operator]


def main() -> None:
    rng = np.random.default_rng(0)
    features = rng.standard_normal((64, 3))
    x: Array = xp.asarray(features)
    y: Array = xp.asarray((features @ np.asarray([1.0, -2.0, 0.5]) > 0).astype(np.float64))
    params, final = train(x, y)
    print(f"loss after training: {final:.4f}")
    grads = per_example_grads(params, x, y)
    print(f"per-example gradients: {grads.w.shape}")
    g = imperative(x, y)
    assert g is not None
    print(f"gradient at zero: {pg.unwrap(g)}")
    static_checks(params, x, y)


if __name__ == "__main__":
    main()
