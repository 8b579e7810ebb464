"""L-BFGS: a full-batch quasi-Newton method with a strong-Wolfe line search, over pytrees of
arrays of any namespace (Cubed's lazy ones included: each evaluation computes the loss and the
gradient together)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any, NamedTuple

from .._api import enable_grad, no_grad
from ..memory._spec import Spec
from ..tree import tree_flatten, tree_leaves, tree_map, tree_unflatten
from ._transforms import _ns


class LineSearchInfo(NamedTuple):
    """What the line search of one L-BFGS step did along the direction ``d``.

    ``phi(t) = loss(params + t d)``, ``slope`` its derivative ``grad . d``.

    Attributes
    ----------
    step : float
        The accepted step length t (0.0: no point with sufficient decrease found).
    evals : int
        The evaluations (passes over the data) it took.
    value0 : float
        ``phi(0)``: the loss where the step started.
    slope0 : float
        ``phi'(0) < 0``.
    value : float
        ``phi(step)``.
    slope : float
        ``phi'(step)``.
    wolfe : bool
        Whether the strong Wolfe conditions hold at ``step`` (``c1`` and ``c2`` of the solver).
    """

    step: float  # the accepted step length t (0.0: no point with sufficient decrease found)
    evals: int  # the evaluations (passes over the data) it took
    value0: float  # phi(0): the loss where the step started
    slope0: float  # phi'(0) < 0
    value: float  # phi(step)
    slope: float  # phi'(step)
    wolfe: bool  # the strong Wolfe conditions hold at ``step`` (c1 and c2 of the solver)


STOP_REASONS = (
    "",
    "gradient small: max |grad| <= gtol",
    "loss change small: relative decrease <= ftol",
    "line search found no lower loss along the direction",
    "parameters change small: max |step| <= xtol",
)


class LBFGSState(NamedTuple):
    """The state of :class:`LBFGS` after ``iterations`` iterations.

    The loss and gradient at the current parameters and the last ``stored`` curvature pairs.
    Leaves are arrays and Python numbers only, in a structure fixed by the parameters and
    ``memory_size`` (so that ``checkpoint.save``/``load`` take it).

    Attributes
    ----------
    iterations : int
        Iterations done.
    evals : int
        Evaluations of the function in all (each one pass over the data).
    value : float
        The loss at the current parameters.
    grad : pytree of Array
        Its gradient (a pytree like the parameters).
    s : tuple
        ``memory_size`` parameter differences, oldest first; the last ``stored`` are real.
    y : tuple
        The gradient differences that go with them.
    rho : tuple
        ``1 / (s . y)`` of each pair.
    stored : int
        Pairs held (at most ``memory_size``).
    gamma : float
        The initial inverse-Hessian scale ``s.y / y.y`` of the newest pair.
    last : LineSearchInfo
        The line search of the last iteration.
    stop : int
        0 while running, else the index of the reason in ``STOP_REASONS``.
    """

    iterations: int  # iterations done
    evals: int  # evaluations of the function in all (each one pass over the data)
    value: float  # the loss at the current parameters
    grad: Any  # its gradient (a pytree like the parameters)
    s: tuple  # memory_size parameter differences, oldest first; the last ``stored`` are real
    y: tuple  # the gradient differences that go with them
    rho: tuple  # 1 / (s . y) of each pair
    stored: int  # pairs held (at most memory_size)
    gamma: float  # the initial inverse-Hessian scale s.y / y.y of the newest pair
    last: LineSearchInfo  # the line search of the last iteration
    stop: int  # 0 while running, else the index of the reason in STOP_REASONS

    @property
    def done(self) -> bool:
        """Whether the solver has stopped (``stop != 0``)."""
        return self.stop != 0

    @property
    def reason(self) -> str:
        """Why it stopped (``STOP_REASONS[stop]``; empty while running)."""
        return STOP_REASONS[self.stop]


def _vdot(a: Any, b: Any) -> float:
    """The dot product of two pytrees of one structure, as a Python float (added in float64
    over the leaves)."""
    total = 0.0
    for x, y in zip(tree_leaves(a), tree_leaves(b), strict=True):
        total += float(_ns(x).sum(x * y))
    return total


def _max_abs(tree: Any) -> float:
    return max((float(_ns(x).max(_ns(x).abs(x))) if x.size else 0.0) for x in tree_leaves(tree))


def _axpy(a: float, x: Any, y: Any) -> Any:
    """``y + a x`` leaf by leaf."""
    return tree_map(lambda xi, yi: yi + a * xi, x, y)


def _cubic_min(
    t1: float, f1: float, d1: float, t2: float, f2: float, d2: float, lo: float, hi: float
) -> float:
    """The minimizer in ``[lo, hi]`` of the cubic through ``(t1, f1)``, ``(t2, f2)`` with slopes
    ``d1``, ``d2`` (Nocedal & Wright eq. 3.59); the midpoint of ``[lo, hi]`` when the cubic
    has no minimum there or a value is not finite."""
    mid = 0.5 * (lo + hi)
    if not all(math.isfinite(v) for v in (f1, f2, d1, d2)) or t1 == t2:
        return mid
    e1 = d1 + d2 - 3.0 * (f1 - f2) / (t1 - t2)
    square = e1 * e1 - d1 * d2
    if square < 0:
        return mid
    e2 = math.sqrt(square)
    if t1 <= t2:
        den = d2 - d1 + 2.0 * e2
        t = t2 - (t2 - t1) * ((d2 + e2 - e1) / den) if den else mid
    else:
        den = d1 - d2 + 2.0 * e2
        t = t1 - (t1 - t2) * ((d1 + e2 - e1) / den) if den else mid
    return min(max(t, lo), hi) if math.isfinite(t) else mid


def _strong_wolfe(
    phi: Callable[[float], tuple[float, float, Any]],
    value0: float,
    slope0: float,
    t: float,
    c1: float,
    c2: float,
    max_evals: int,
    min_width: float,
) -> tuple[float, float, float, Any, LineSearchInfo]:
    """A step length along a descent direction satisfying the strong Wolfe conditions

        phi(t) <= phi(0) + c1 t phi'(0)      and      |phi'(t)| <= c2 |phi'(0)|,

    by bracketing then zooming with safeguarded cubic interpolation (Nocedal & Wright, Algorithms
    3.5 and 3.6, as PyTorch's ``_strong_wolfe``). ``phi(t) -> (value, slope, payload)`` is one
    evaluation; a value that is not finite counts as too far. After ``max_evals`` evaluations, or
    when the bracket is narrower than ``min_width``, it returns the lowest point found with
    sufficient decrease (``wolfe`` False), or t = 0 (payload None) when there is none.

    Returns ``(t, value, slope, payload, info)``."""
    evals = 0
    prev = (0.0, value0, slope0, None)
    lo = hi = prev
    bracketed = False
    while evals < max_evals:
        f, d, pay = phi(t)
        evals += 1
        cur = (t, f, d, pay)
        if not math.isfinite(f) or f > value0 + c1 * t * slope0 or (evals > 1 and f >= prev[1]):
            lo, hi, bracketed = prev, cur, True
            break
        if abs(d) <= -c2 * slope0:
            return t, f, d, pay, LineSearchInfo(t, evals, value0, slope0, f, d, True)
        if d >= 0:
            lo, hi, bracketed = cur, prev, True
            break
        # still going down: extrapolate, at least 1% and at most 10x further
        t_new = _cubic_min(prev[0], prev[1], prev[2], t, f, d, t + 0.01 * (t - prev[0]), 10 * t)
        prev, lo, t = cur, cur, t_new
    if bracketed:
        stuck = False
        while evals < max_evals and abs(hi[0] - lo[0]) > min_width:
            a, b = min(lo[0], hi[0]), max(lo[0], hi[0])
            t = _cubic_min(*lo[:3], *hi[:3], a, b)
            # safeguard: stay 10% of the bracket away from its ends, unless that was just done
            margin = 0.1 * (b - a)
            if min(b - t, t - a) < margin:
                if stuck or t >= b or t <= a:
                    t = b - margin if abs(t - b) < abs(t - a) else a + margin
                    stuck = False
                else:
                    stuck = True
            else:
                stuck = False
            f, d, pay = phi(t)
            evals += 1
            cur = (t, f, d, pay)
            if not math.isfinite(f) or f > value0 + c1 * t * slope0 or f >= lo[1]:
                hi = cur
            else:
                if abs(d) <= -c2 * slope0:
                    return t, f, d, pay, LineSearchInfo(t, evals, value0, slope0, f, d, True)
                if d * (hi[0] - lo[0]) >= 0:
                    hi = lo
                lo = cur
    t, f, d, pay = lo
    wolfe = pay is not None and abs(d) <= -c2 * slope0
    return t, f, d, pay, LineSearchInfo(t, evals, value0, slope0, f, d, wolfe)


class LBFGS:
    """L-BFGS (Nocedal & Wright, Algorithm 7.5) with a line search satisfying the strong Wolfe
    conditions, for full-batch (deterministic) objectives. Made by :func:`lbfgs`.

    L-BFGS is not a gradient transformation: each step evaluates the function several times
    (the line search), so the solver holds the function::

        solver = optim.lbfgs(loss)                 # loss(params) -> scalar
        params, state = solver.minimize(params)    # until a tolerance is met
        # or step by step:
        state = solver.init(params)                # 1 evaluation
        params, state = solver.step(params, state) # >= 1 evaluation each
        state.value, state.evals, state.done, state.reason

    An *evaluation* is one call of the function for the loss and its gradient together: on data
    too large for memory (``cubed_plugin.fit``) it is one pass over the data. ``init`` costs one
    (none when given ``value`` and ``grad``); each step costs its line search's evaluations,
    ``state.last.evals``: one when the first trial step (1, or ``1 / |grad|`` on the first
    iteration, as SciPy's L-BFGS-B) already satisfies the strong Wolfe conditions, which is the
    usual case once a curvature pair scales the direction; more while bracketing or zooming,
    at most ``max_linesearch``. The new point's loss and gradient are the next step's, never
    computed again. ``state.evals`` counts them all.

    The direction is the two-loop recursion over the last ``memory_size`` pairs ``(s, y)`` of
    parameter and gradient differences, scaled by ``gamma = s.y / y.y`` of the newest pair; a
    pair whose curvature ``s.y`` is at most ``curvature_eps * |g.s|`` is skipped. It stops
    (``state.done``, ``state.reason``) when ``max |grad| <= gtol``, when the loss decreased by at
    most ``ftol`` relative (``(f_old - f_new) / max(|f_old|, |f_new|, 1)``, SciPy's test), when the
    step moved no parameter by more than ``xtol``, or when the line search found no lower loss.

    Parameters are a pytree of arrays of any pycograd_xp namespace; the solver's vectors live
    in the parameters' namespace and dtype (float32 parameters stay float32), its scalars are
    Python floats. On a lazy backend (Cubed), the scalar decisions need values: each evaluation
    computes the loss and the gradient together in one computation (the backend's ``compute``
    capability; one pass over the data), and the solver's vectors live on the host as NumPy
    arrays (parameters are small); the parameters are handed to the function, and returned, in
    the backend.

    Parameters
    ----------
    fun : callable, optional
        The function minimized (see :func:`lbfgs` for this and the others).
    value_and_grad : bool, default False
        Whether ``fun`` returns ``(loss, grads)``.
    memory_size : int, default 10
        Curvature pairs kept.
    gtol : float, default 1e-5
        Stop when ``max |grad| <= gtol``.
    ftol : float, optional
        Stop when the loss decreases by at most this, relative.
    xtol : float, default 1e-9
        Stop when no parameter moves by more than this.
    c1, c2 : float, default 1e-4 and 0.9
        The strong Wolfe constants.
    max_linesearch : int, default 20
        Evaluations per line search at most.
    curvature_eps : float, optional
        Skip a pair with ``s.y <= curvature_eps * |g.s|``.
    """

    def __init__(
        self,
        fun: Callable[..., Any] | None = None,
        *,
        value_and_grad: bool = False,
        memory_size: int = 10,
        gtol: float = 1e-5,
        ftol: float | None = None,
        xtol: float = 1e-9,
        c1: float = 1e-4,
        c2: float = 0.9,
        max_linesearch: int = 20,
        curvature_eps: float | None = None,
    ) -> None:
        if not isinstance(memory_size, int) or memory_size < 1:
            raise ValueError(f"lbfgs: memory_size must be an integer >= 1, got {memory_size!r}")
        if not 0 < c1 < c2 < 1:
            raise ValueError(f"lbfgs: the Wolfe constants need 0 < c1 < c2 < 1, got {c1}, {c2}")
        if max_linesearch < 1:
            raise ValueError(f"lbfgs: max_linesearch must be >= 1, got {max_linesearch}")
        if fun is not None and not callable(fun):
            raise TypeError(f"lbfgs: fun must be callable, got {type(fun).__name__}")
        self.fun = fun
        self.value_and_grad = value_and_grad
        self.memory_size = memory_size
        self.gtol, self.ftol, self.xtol = gtol, ftol, xtol
        self.c1, self.c2 = c1, c2
        self.max_linesearch = max_linesearch
        self.curvature_eps = curvature_eps
        # on a lazy backend: the parameters last handed back and their host values
        self._handed: tuple[list, Any] = ([], None)

    # -- the function -----------------------------------------------------------------------
    def _vg(self, value_and_grad_fn: Callable[..., Any] | None) -> Callable[[Any], Any]:
        if value_and_grad_fn is not None:
            return value_and_grad_fn
        if self.fun is None:
            raise TypeError(
                "lbfgs: no function to minimize: give it to optim.lbfgs(fun) or as "
                "value_and_grad_fn= (returning (loss, grads))"
            )
        if self.value_and_grad:
            return self.fun
        from .._api import value_and_grad

        return value_and_grad(self.fun)

    def _evaluator(self, params: Any, vg: Callable[[Any], Any]) -> tuple[Any, Any, Any]:
        """(evaluate, to_solver, to_user): ``evaluate(x) -> (value, grads)`` at the solver's
        parameters ``x``; ``to_solver(params)`` and ``to_user(x)`` convert the user's
        parameters to the solver's and back (the identity but on lazy backends)."""
        from ..namespace import capabilities

        leaves, td = tree_flatten(params)
        if not leaves:
            raise ValueError("lbfgs: the parameters have no arrays")
        ns = _ns(leaves[0])
        try:
            caps = capabilities(ns)
        except TypeError:
            caps = None
        lazy = caps is not None and caps.lazy
        if lazy and caps is not None and caps.compute is None:
            raise TypeError(
                f"lbfgs: the parameters are arrays of the lazy backend {caps.name}, whose "
                "adapter gives no compute capability (several arrays computed in one go); "
                "the line search needs the loss's values"
            )

        def check(value: Any, grads: Any) -> tuple[float, Any]:
            shape = tuple(getattr(value, "shape", ()))
            if shape:
                raise ValueError(
                    f"lbfgs: the function returned a loss of shape {shape}; it must be a "
                    "scalar (reduce it with a sum or a mean)"
                )
            if tree_flatten(grads)[1] != td:
                raise TypeError(
                    f"lbfgs: the gradients have the structure {tree_flatten(grads)[1]!r}, "
                    f"the parameters {td!r}"
                )
            return float(value), grads

        if not lazy:
            return (lambda x: check(*vg(x))), (lambda p: p), (lambda x: x)

        assert caps is not None and caps.compute is not None
        import numpy as np

        from ..namespace import namespace

        host = namespace(np)
        like = caps.like_kwargs or (lambda a: {})
        raw = caps.xp
        compute = caps.compute

        def in_backend(x: Any) -> Any:
            return tree_map(
                lambda h, ref: ns.asarray(raw.asarray(h._data, **like(ref._data))), x, params
            )

        def to_user(x: Any) -> Any:
            out = in_backend(x)
            self._handed = (tree_leaves(out), x)  # its host values: no computation to get them
            return out

        def to_solver(p: Any) -> Any:
            handed, x = self._handed
            if len(handed) == len(leaves) and all(
                a is b for a, b in zip(handed, tree_leaves(p), strict=True)
            ):
                return x
            x = tree_map(host.asarray, tree_unflatten(td, list(compute(*tree_leaves(p)))))
            self._handed = (tree_leaves(p), x)
            return x

        def evaluate(x: Any) -> tuple[float, Any]:
            value, grads = vg(in_backend(x))
            computed = compute(value, *tree_leaves(grads))  # one computation: one pass
            return check(
                host.asarray(computed[0]),
                tree_unflatten(tree_flatten(grads)[1], [host.asarray(g) for g in computed[1:]]),
            )

        return evaluate, to_solver, to_user

    # -- the iteration ----------------------------------------------------------------------
    def init(
        self,
        params: Any,
        value_and_grad_fn: Callable[..., Any] | None = None,
        *,
        value: float | None = None,
        grad: Any = None,
    ) -> LBFGSState:
        """The state at ``params``: one evaluation, none when ``value`` and ``grad`` are given.

        Parameters
        ----------
        params : pytree of Array
            The starting parameters.
        value_and_grad_fn : callable, optional
            The function to minimize, when the solver was made without one (as :func:`lbfgs`'s
            ``fun``).
        value : float, optional
            The loss at ``params``, with ``grad``.
        grad : pytree of Array, optional
            The gradient at ``params``, in the solver's arrays.

        Returns
        -------
        LBFGSState
            The state at ``params``.
        """
        with no_grad():
            if value is None or grad is None:
                evaluate, to_solver, _ = self._evaluator(params, self._vg(value_and_grad_fn))
                x = to_solver(params)
                with enable_grad():
                    value, grad = evaluate(x)
                evals = 1
            else:
                value, evals = float(value), 0
            if not math.isfinite(value):
                raise FloatingPointError(
                    f"lbfgs: the loss at the starting parameters is {value}; start from "
                    "parameters where it is finite"
                )
            zero = tree_map(lambda g: g * 0.0, grad)
            m = self.memory_size
            done = _max_abs(grad) <= self.gtol
            return LBFGSState(
                iterations=0,
                evals=evals,
                value=value,
                grad=grad,
                s=(zero,) * m,
                y=(zero,) * m,
                rho=(0.0,) * m,
                stored=0,
                gamma=1.0,
                last=LineSearchInfo(0.0, 0, value, 0.0, value, 0.0, False),
                stop=1 if done else 0,
            )

    def direction(self, state: LBFGSState) -> Any:
        """``-H g``: the two-loop recursion over the stored pairs, ``H0 = gamma I``.

        Parameters
        ----------
        state : LBFGSState
            The current state.

        Returns
        -------
        pytree of Array
            The search direction, like the parameters.
        """
        q = state.grad
        m, k = self.memory_size, state.stored
        alphas = []
        for i in range(m - 1, m - 1 - k, -1):  # newest first
            a = state.rho[i] * _vdot(state.s[i], q)
            alphas.append(a)
            q = _axpy(-a, state.y[i], q)
        r = tree_map(lambda v: state.gamma * v, q) if k else q
        for j, i in enumerate(range(m - k, m)):  # oldest first
            b = state.rho[i] * _vdot(state.y[i], r)
            r = _axpy(alphas[k - 1 - j] - b, state.s[i], r)
        return tree_map(lambda v: -v, r)

    def step(
        self,
        params: Any,
        state: LBFGSState,
        value_and_grad_fn: Callable[..., Any] | None = None,
        *,
        max_evals: int | None = None,
    ) -> tuple[Any, LBFGSState]:
        """One iteration from ``params`` (where ``state`` was computed).

        A direction, then a line search along it (``state.last`` says what it did), then the new
        curvature pair. Costs ``state.last.evals`` evaluations, at most ``max_linesearch`` (and at
        most ``max_evals`` when given: the search then keeps its lowest point with sufficient
        decrease). A state that is ``done`` is returned as it is.

        Parameters
        ----------
        params : pytree of Array
            The current parameters.
        state : LBFGSState
            The state at ``params``.
        value_and_grad_fn : callable, optional
            The function, when the solver was made without one.
        max_evals : int, optional
            A cap on this step's evaluations.

        Returns
        -------
        params : pytree of Array
            The new parameters.
        state : LBFGSState
            The state there.
        """
        if state.done:
            return params, state
        with no_grad():
            evaluate, to_solver, to_user = self._evaluator(params, self._vg(value_and_grad_fn))
            x, g, f = to_solver(params), state.grad, state.value
            d = self.direction(state)
            slope0 = _vdot(g, d)
            if not slope0 < 0:  # not a descent direction (rounding): forget the pairs
                state = state._replace(stored=0, gamma=1.0)
                d = tree_map(lambda v: -v, g)
                slope0 = _vdot(g, d)
            # without pairs d = -g: a first step of length 1 (SciPy's); then the unit step
            t0 = 1.0 if state.stored else 1.0 / math.sqrt(-slope0)

            def phi(t: float) -> tuple[float, float, Any]:
                xt = _axpy(t, d, x)
                with enable_grad():
                    ft, gt = evaluate(xt)
                return ft, (_vdot(gt, d) if math.isfinite(ft) else math.nan), (xt, gt)

            budget = (
                self.max_linesearch if max_evals is None else min(max_evals, self.max_linesearch)
            )
            dmax = _max_abs(d)
            t, f_new, _, payload, info = _strong_wolfe(
                phi,
                f,
                slope0,
                t0,
                self.c1,
                self.c2,
                max(budget, 1),
                self.xtol / dmax if dmax else 0.0,
            )
            evals = state.evals + info.evals
            if payload is None:
                return params, state._replace(
                    iterations=state.iterations + 1, evals=evals, last=info, stop=3
                )
            x_new, g_new = payload
            s = tree_map(lambda v: t * v, d)
            y = tree_map(lambda a, b: a - b, g_new, g)
            sy = _vdot(s, y)
            eps = self.curvature_eps
            if eps is None:
                eps = _eps(tree_leaves(g)[0])
            pairs = state.s, state.y, state.rho, state.stored, state.gamma
            if sy > eps * abs(t * slope0):
                yy = _vdot(y, y)
                pairs = (
                    state.s[1:] + (s,),
                    state.y[1:] + (y,),
                    state.rho[1:] + (1.0 / sy,),
                    min(state.stored + 1, self.memory_size),
                    sy / yy,
                )
            ftol = (
                self.ftol if self.ftol is not None else max(2.2e-9, 4 * _eps(tree_leaves(g_new)[0]))
            )
            stop = 0
            if _max_abs(g_new) <= self.gtol:
                stop = 1
            elif (f - f_new) <= ftol * max(abs(f), abs(f_new), 1.0):
                stop = 2
            elif t * dmax <= self.xtol:
                stop = 4
            new_state = LBFGSState(
                iterations=state.iterations + 1,
                evals=evals,
                value=f_new,
                grad=g_new,
                s=pairs[0],
                y=pairs[1],
                rho=pairs[2],
                stored=pairs[3],
                gamma=pairs[4],
                last=info,
                stop=stop,
            )
            return to_user(x_new), new_state

    def minimize(
        self,
        params: Any,
        value_and_grad_fn: Callable[..., Any] | None = None,
        *,
        max_iter: int = 100,
        max_evals: int | None = None,
        state: LBFGSState | None = None,
        callback: Callable[[Any, LBFGSState], Any] | None = None,
    ) -> tuple[Any, LBFGSState]:
        """Iterate from ``params`` until a tolerance is met, ``max_iter`` or ``max_evals``.

        Parameters
        ----------
        params : pytree of Array
            The starting parameters.
        value_and_grad_fn : callable, optional
            The function, when the solver was made without one.
        max_iter : int, default 100
            Iterations at most.
        max_evals : int, optional
            Evaluations in all at most (the initial one included; the last line search is cut to
            fit).
        state : LBFGSState, optional
            A state to continue from (a checkpoint's), at ``params``.
        callback : callable, optional
            ``callback(params, state)`` after each iteration.

        Returns
        -------
        params : pytree of Array
            The final parameters.
        state : LBFGSState
            The final state (``state.done``, ``state.reason`` say why it stopped, when it did).
        """
        vg = self._vg(value_and_grad_fn)
        if state is None:
            state = self.init(params, vg)
        while not state.done and state.iterations < max_iter:
            left = None if max_evals is None else max_evals - state.evals
            if left is not None and left <= 0:
                break
            params, state = self.step(params, state, vg, max_evals=left)
            if callback is not None:
                callback(params, state)
        return params, state


def _leaf_bytes(leaf: Any) -> int:
    """The bytes a parameter-like leaf owns (an array or a ``memory.spec``; 0 for numbers)."""
    if isinstance(leaf, Spec):
        return leaf.nbytes
    data = getattr(leaf, "_data", leaf)
    return int(getattr(data, "nbytes", 0))


def _project_step(
    solver: LBFGS,
    params: Any,
    state: Any = None,
    value_and_grad_fn: Callable[..., Any] | None = None,
    **_: Any,
) -> Any:
    """``memory.project(solver.step, params, state)``: an L-BFGS step decides on the loss's
    values, which a projection does not have, so it is projected from what it runs. Its peak is
    during an evaluation of the function (projected as it is, at parameters of these shapes)
    while the step holds, beside its arguments: the direction and at most three of the line
    search's points (a parameter vector and its gradient each: the bracket's two ends and the
    last point), with the trial point the evaluation takes as its argument and two leaf-sized
    temporaries of the vector updates. The two-loop recursion before and the new curvature pair
    after hold less (at most three vectors and a point). ``init`` and ``minimize`` hold no more
    than a step does."""
    from ..memory import project

    vg = solver._vg(value_and_grad_fn)
    one = project(vg, params, argnums=())
    leaves = tree_leaves(params)
    vector = sum(_leaf_bytes(p) for p in leaves)
    leaf = max((_leaf_bytes(p) for p in leaves), default=0)
    arguments = vector + sum(_leaf_bytes(x) for x in tree_leaves(state))
    held = arguments + 7 * vector + 2 * leaf  # the direction and three points
    return dataclasses.replace(
        one,
        forward_peak_bytes=held + one.peak_bytes,
        peak_bytes=held + one.peak_bytes,
        traced_forward_peak_bytes=held + one.traced_peak_bytes,
        traced_peak_bytes=held + one.traced_peak_bytes,
        argument_bytes=arguments,
        residual_bytes=0,
        what="as is",
    )


for _method in (LBFGS.init, LBFGS.step, LBFGS.minimize):
    setattr(_method, "projects_as", _project_step)  # noqa: B010


def _eps(x: Any) -> float:
    """The machine epsilon of an array's floating dtype."""
    return float(_ns(x).finfo(x.dtype).eps)


def lbfgs(
    fun: Callable[..., Any] | None = None,
    *,
    value_and_grad: bool = False,
    memory_size: int = 10,
    gtol: float = 1e-5,
    ftol: float | None = None,
    xtol: float = 1e-9,
    c1: float = 1e-4,
    c2: float = 0.9,
    max_linesearch: int = 20,
    curvature_eps: float | None = None,
) -> LBFGS:
    """L-BFGS with a strong-Wolfe line search (:class:`LBFGS`) minimizing ``fun(params)``.

    For full-batch (deterministic) objectives; see :class:`LBFGS` for what a step costs and
    when it stops.

    Parameters
    ----------
    fun : callable, optional
        ``fun(params)``: a scalar loss (its gradient by ``value_and_grad``), or ``(loss,
        grads)`` with ``value_and_grad=True`` (one evaluation: one pass over the data where the
        data is large). It may instead be given to each call (``value_and_grad_fn=``), as
        ``cubed_plugin.fit`` does with ``fit(loss, params, data, optim.lbfgs(), ...)``.
    value_and_grad : bool, default False
        Whether ``fun`` returns ``(loss, grads)``.
    memory_size : int, default 10
        Curvature pairs kept (m, 10 as SciPy's and optax's).
    gtol : float, default 1e-5
        Stop when ``max |grad| <= gtol`` (SciPy's ``gtol``).
    ftol : float, optional
        Stop when the loss decreases by at most this, relative (None: SciPy's 2.2e-9, at least
        4 epsilons of the parameters' dtype: 4.8e-7 for float32).
    xtol : float, default 1e-9
        Stop when no parameter moves by more than this.
    c1, c2 : float, default 1e-4 and 0.9
        The strong Wolfe constants (as SciPy's, PyTorch's and optax's).
    max_linesearch : int, default 20
        Evaluations per line search at most.
    curvature_eps : float, optional
        Skip a pair with ``s.y <= curvature_eps * |g.s|`` (None: the dtype's epsilon, as
        L-BFGS-B).

    Returns
    -------
    LBFGS
        The solver: ``solver.minimize(params)``, or ``solver.init``/``solver.step``.

    Raises
    ------
    ValueError
        If ``memory_size`` is not an integer >= 1, or not ``0 < c1 < c2 < 1``.

    Examples
    --------
    >>> import numpy, pycograd_xp as pg
    >>> from pycograd_xp import optim
    >>> xp = pg.namespace(numpy)
    >>> def rosenbrock(p):
    ...     x, y = p["x"], p["y"]
    ...     return (1.0 - x) ** 2 + 100.0 * (y - x**2) ** 2
    >>> p0 = {"x": xp.asarray(-1.0), "y": xp.asarray(1.0)}
    >>> params, state = optim.lbfgs(rosenbrock).minimize(p0)
    >>> state.done, round(float(params["x"]), 4), round(float(params["y"]), 4)
    (True, 1.0, 1.0)
    """
    return LBFGS(
        fun,
        value_and_grad=value_and_grad,
        memory_size=memory_size,
        gtol=gtol,
        ftol=ftol,
        xtol=xtol,
        c1=c1,
        c2=c2,
        max_linesearch=max_linesearch,
        curvature_eps=curvature_eps,
    )
