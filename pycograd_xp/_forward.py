"""Forward mode and the Jacobian transforms: ``jvp``, ``linearize``, ``jacfwd``, ``jacrev``,
``hessian`` (JAX's names and signatures).

``jvp`` runs ``f`` once with its primals tracked; as each primitive is recorded, a hook
computes the output's tangent from its inputs' tangents with the row's JVP rule
(``Primitive.jvp``, attached in :mod:`pycograd_xp.ops`), so tangents travel beside the values
and are freed with them. Contexts nest: each ``jvp`` pushes one, and the rule of a context runs
with only the outer contexts active, so an outer ``jvp`` sees (and differentiates) the tangent
computations of an inner one. A first-order ``jvp`` runs the rules on the raw backend; when the
primals or tangents are themselves being differentiated (``grad`` of ``jvp``, ``jvp`` of
``jvp``), on the differentiable namespace. ``grad`` inside ``jvp`` records its backward pass
(its inputs are tracked by the ``jvp``), so the tangents flow through the VJP rules too: that
is forward-over-reverse.

``jvp`` and ``vmap`` compose in both orders. Inside ``vmap``, primals and tangents of lower
levels are lifted to the batched level (batched tangents with shared primals: ``jacfwd``), and
each rule runs at its node's level, so a transform a rule starts (a derived rule tracks a
cotangent) stays there even while an inner ``vmap`` runs. Around ``vmap`` (``jvp`` of a
batched function, or the batched pullback inside ``jacrev`` inside ``jvp``: ``hessian``), the
batching rules call the lower level's namespace, whose recording carries the tangents.
``jacrev`` is the pullback ``vmap``-ed over an identity's rows and ``jacfwd`` is ``jvp``
``vmap``-ed over basis tangents: one batched pass each.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec

from . import _api, _buffers, _tape, _vjp, _vmap
from ._state import STACK, GradMode, Jvp, Vmap, interpreting, restore
from .namespace import of as namespace_of
from .namespace._array import Array, make, ours
from .namespace._no_elements import no_flow_forward, zero_tangents
from .ops._rules.batching import constant_like
from .ops._rules.jvp import TRANSPOSED
from .tree import tree_flatten, tree_unflatten

__all__ = ["hessian", "jacfwd", "jacrev", "jvp", "linearize"]

P = ParamSpec("P")


class _Context:
    """One running ``jvp``: the tangent of every node recorded inside it that has one."""

    __slots__ = ("tangents", "nested")

    def __init__(self, nested: bool) -> None:
        self.tangents: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.nested = nested


def _raw(a: Any) -> Any:
    if isinstance(a, Array):
        return a._data
    if type(a) is list:
        return [_raw(e) for e in a]
    if isinstance(a, tuple):  # named tuples of outputs become plain ones
        return tuple(_raw(e) for e in a)
    if type(a) is dict:
        return {k: _raw(v) for k, v in a.items()}
    return a


# The rules derived for the table's rows marked TRANSPOSED, made on their first use.
_TRANSPOSED: dict[Any, Any] = {}


def transposed_rule(prim: Any) -> Any:
    """The JVP of ``prim`` derived from its VJP rule: the rule is linear in the cotangent ``g``,
    so it is run on the differentiable namespace with ``g`` tracked, and a reverse pass through
    that recording, seeded with the input tangents, gives ``J t``. Exact (no differences); two
    rule evaluations."""

    def rule(ops: Any, tangents: tuple, out: Any, *args: Any, **kwargs: Any) -> Any:
        ns = namespace_of(ops)
        nested = ops is ns
        if not nested:
            args, kwargs, out = ours(ns, args), ours(ns, kwargs), ours(ns, out)
            tangents = ours(ns, tangents)
        multi = isinstance(out, list | tuple)
        outs = list(out) if multi else [out]
        floating = ns._floating
        with _api.enable_grad():
            gs, handles = [], []
            for o in outs:
                z = ns.zeros_like(o)
                if z._data.dtype in floating:
                    z, inp = _api._track(z, f"jvp of {prim.name}", "a cotangent")
                    handles.append(inp.node)
                else:
                    handles.append(None)
                gs.append(z)
            kw = dict(kwargs)
            if prim.takes_needs:
                kw["needs"] = tuple(i for i, t in enumerate(tangents) if t is not None)
            cts = prim.vjp(ns, gs if multi else gs[0], out, *args, **kw)
            pairs = []
            for ct, t in zip(cts, tangents, strict=False):
                if ct is None or t is None:
                    continue
                if type(t) is list or type(t) is tuple:
                    pairs += [
                        (c, u)
                        for c, u in zip(ct, t, strict=True)
                        if c is not None and u is not None
                    ]
                else:
                    pairs.append((ct, t))
            roots = []
            for ct, t in pairs:
                if not isinstance(ct, Array) or ct._node is None:
                    continue  # constant in g: no contribution
                if ct.shape != t.shape or ct.dtype != t.dtype:
                    ct = _tape._fit(ns, ct, t)
                roots.append((ct._node, t if nested else t._data))
            found = _tape.backward(  # no roots: nothing found
                roots,
                targets=[h for h in handles if h is not None],
                create_graph=nested,
                retain_graph=nested,
            )
        res = []
        for h in handles:
            r = found.get(id(h)) if h is not None else None
            if r is not None and not nested and isinstance(r, Array):
                r = r._data
            res.append(r)
        return res if multi else res[0]

    return rule


def _propagate(ctx: _Context, node: Any, out: Any, args: tuple, kwargs: dict) -> None:
    tans = ctx.tangents
    prim = node.prim
    tangents: list[Any] = [None] * (len(args) + len(prim.diff_kwargs))
    found = False
    for position, parent in node.parents:
        t = tans.get(parent)
        if t is None and type(parent) is _tape.Select:  # an output rebuilt for a backward pass
            outs = tans.get(parent.node)
            t = outs[parent.index] if outs is not None else None
        if t is None:
            continue
        found = True
        if type(position) is int:
            tangents[position] = t
        elif type(position) is tuple:
            i, j = position
            if tangents[i] is None:
                tangents[i] = [None] * len(args[i])
            tangents[i][j] = t
        else:
            tangents[len(args) + prim.diff_kwargs.index(position)] = t
    if not found:
        return
    rule = prim.jvp
    if rule is TRANSPOSED:
        rule = _TRANSPOSED.get(prim)
        if rule is None:  # made once per row (rows of the table live as long as the process)
            rule = _TRANSPOSED[prim] = transposed_rule(prim)
    elif rule is None:
        raise NotImplementedError(
            f"jvp: {prim.name} has no forward-mode rule; differentiate it with "
            "pycograd_xp.grad/vjp (reverse mode) instead"
        )
    if ctx.nested:
        ops, o = node.ns, out
    else:
        ops, args, kwargs, o = node.ns._backend.xp, _raw(args), _raw(kwargs), _raw(out)
    # The rule runs at its node's vmap level: a transform inside it (a derived rule tracks a
    # cotangent) must not lift its arrays to an inner vmap that happens to be running.
    level = node.ns if node.ns._backend.level else None
    try:
        if STACK.batch is level:
            t_out = rule(ops, tuple(tangents), o, *args, **kwargs)
        else:
            frames = STACK.frames
            restore(
                tuple(f for f in frames if type(f) is not Vmap) + ((Vmap(level),) if level else ())
            )
            try:
                t_out = rule(ops, tuple(tangents), o, *args, **kwargs)
            finally:
                restore(frames)
    except (ValueError, TypeError, IndexError, ZeroDivisionError):
        if not no_flow_forward(o, tangents):  # (Cubed: see namespace/_no_elements)
            raise
        t_out = zero_tangents(ops, o, None if ctx.nested else node.ns._backend.like_kwargs)
    if isinstance(out, tuple):
        fitted = [
            None if ti is None else _fit(ops, ti, ri) for ri, ti in zip(o, t_out, strict=True)
        ]
        for oi, ti in zip(out, fitted, strict=True):
            if isinstance(oi, Array) and oi._node is not None and ti is not None:
                tans[oi._node] = ti
        if node.saved is not None and "out" in node.saved:
            # The node saved its outputs for its VJP (a fused row's statistics: layer norm's
            # mean and rstd, cross-entropy's log-sum-exp). A backward pass recorded inside this
            # jvp (forward-over-reverse: hessian, jvp of grad) rebuilds them with fresh Select
            # handles, and the user may have dropped the originals: their tangents are kept
            # with the node, as long as it keeps the outputs, so the rebuilt ones find them.
            tans[node] = fitted
    elif t_out is not None:
        tans[out._node] = _fit(ops, t_out, o)


def _fit(ops: Any, t: Any, like: Any) -> Any:
    """A rule's tangent broadcast to its output's shape and cast to its dtype."""
    if tuple(t.shape) != tuple(like.shape):
        t = ops.broadcast_to(t, tuple(like.shape))
    if t.dtype != like.dtype:
        if ops.isdtype(t.dtype, "complex floating") and not ops.isdtype(
            like.dtype, "complex floating"
        ):
            t = ops.real(t)
        t = ops.astype(t, like.dtype)
    return t


def _lift(top: Any, a: Any) -> Any:
    """``a`` as an array of the batched namespace ``top`` if it is of a lower vmap level (its
    node kept: an outer transform still sees through it)."""
    if isinstance(a, Array) and a._backend.level < top._backend.level:
        return make(top.Array, top._backend.lift(a))
    return a


def _tracked(a: Any) -> bool:
    return isinstance(a, Array) and a._node is not None


def jvp(
    f: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any], has_aux: bool = False
) -> tuple[Any, ...]:
    """``(f(*primals), J tangents)``: the value of ``f`` and its directional derivative.

    One pass of ``f`` (forward mode); each primitive's tangent comes from its row's JVP rule.
    Composes with ``grad`` and ``vmap`` in both orders, and with itself.

    Parameters
    ----------
    f : callable
        The function, of ``len(primals)`` positional arguments, returning an array or a pytree
        of arrays (``(output, aux)`` with ``has_aux``).
    primals : tuple or list
        One entry per argument of ``f``: pytrees of floating-point arrays.
    tangents : tuple or list
        The same structure as ``primals``, each tangent shaped and typed like its primal.
    has_aux : bool, default False
        Whether ``f`` returns a pair ``(output, aux)``.

    Returns
    -------
    out : Array or pytree of Array
        ``f(*primals)``.
    tangent_out : Array or pytree of Array
        The output's tangent, of the output's structure (zeros where the output does not
        depend on the primals).
    aux : object
        With ``has_aux`` only: the ``aux`` ``f`` returned.

    Raises
    ------
    TypeError
        If ``primals``/``tangents`` are not tuples or lists, or a tangent is not an array of
        its primal's namespace.
    ValueError
        If the tangents' structure, a tangent's shape or its dtype differs from the primal's.

    Examples
    --------
    >>> import numpy, pycograd_xp as pg
    >>> xp = pg.namespace(numpy)
    >>> x = xp.asarray([0.0, 1.0])
    >>> out, t = pg.jvp(xp.sin, (x,), (xp.ones(2),))
    >>> t
    pycograd_xp.numpy.Array([1.        , 0.54030231], dtype=float64)
    """
    where = f"jvp({getattr(f, '__name__', 'f')})"
    if not isinstance(primals, tuple | list) or not isinstance(tangents, tuple | list):
        raise TypeError(
            f"{where}: primals and tangents must be tuples (one entry per "
            f"argument of f), got {type(primals).__name__} and "
            f"{type(tangents).__name__}"
        )
    p_leaves, p_td = tree_flatten(tuple(primals))
    t_leaves, t_td = tree_flatten(tuple(tangents))
    if p_td != t_td:
        raise ValueError(
            f"{where}: the tangents' structure {t_td!r} differs from the primals' {p_td!r}"
        )
    top = STACK.batch  # inside vmap: primals and tangents of lower levels enter unbatched
    if top is not None:
        p_leaves = [_lift(top, a) for a in p_leaves]
        t_leaves = [_lift(top, a) for a in t_leaves]
    for i, (p, t) in enumerate(zip(p_leaves, t_leaves, strict=True)):
        if not isinstance(t, Array) or type(t) is not type(p):
            raise TypeError(
                f"{where}: tangent {i} must be an array of the primal's namespace, "
                f"got {type(t).__name__}"
            )
        if t.shape != p.shape or t.dtype != p.dtype:
            raise ValueError(
                f"{where}: tangent {i} has shape {t.shape} and dtype {t.dtype}; "
                f"its primal has shape {p.shape} and dtype {p.dtype}"
            )
    nested = any(_tracked(a) for a in p_leaves) or any(_tracked(a) for a in t_leaves)
    tracked, inputs = [], []
    for i, p in enumerate(p_leaves):
        a, c = _api._track(p, where, f"primal leaf {i}")
        tracked.append(a)
        inputs.append(c)
    ctx = _Context(nested)
    for c, t in zip(inputs, t_leaves, strict=True):
        ctx.tangents[c.node] = t if nested else t._data
    frame = Jvp(ctx, _propagate, each_jvp)
    try:
        with interpreting(frame, GradMode(True)):
            res = f(*tree_unflatten(p_td, tracked))
    finally:  # each_jvp's cache holds the stack, the frame in it: no cycle left to the collector
        frame.outside = ((), ())
    out, aux = res if has_aux else (res, None)
    _api._check_out(out, where, scalar=False)
    out_leaves, out_td = tree_flatten(out)
    t_out = []
    for o in out_leaves:
        t = ctx.tangents.get(o._node) if o._node is not None else None
        if t is None:
            t = o._backend.xp.zeros_like(o._data)
        t_out.append(t if isinstance(t, Array) else make(type(o), t))
    tangent = tree_unflatten(out_td, t_out)
    value = _api._finish(out, nested)
    tangent = _api._finish(tangent, nested)
    if has_aux:
        return value, tangent, _api._finish(aux, nested)
    return value, tangent


def linearize(f: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple[Any, ...]:
    """``(f(*primals), f_jvp)``, as JAX's ``linearize``.

    ``f_jvp`` recomputes: each call is one ``jvp`` pass (``f`` with its tangents, about 2.5x
    ``f`` alone for an MLP), not a stored linear graph. The tape records the reverse direction
    only, so a stored linearization would cost two backward passes per call (the pullback
    recorded, then transposed) and hold every residual while ``f_jvp`` lives; recomputing holds
    nothing but the primals. ``f_jvp`` composes like ``jvp``: ``vmap(f_jvp)`` pushes a batch of
    tangents in one pass, ``grad`` through it is the transposed map.

    Parameters
    ----------
    f : callable
        The function, of ``len(primals)`` positional arguments (``(output, aux)`` with
        ``has_aux``).
    *primals : Array or pytree of Array
        The fixed point: floating-point arrays, or pytrees of them.
    has_aux : bool, default False
        Whether ``f`` returns a pair ``(output, aux)``.

    Returns
    -------
    out : Array or pytree of Array
        ``f(*primals)``.
    f_jvp : callable
        ``f_jvp(*tangents)``, one tangent pytree per primal, is ``jvp(f, primals,
        tangents)[1]``. It raises RuntimeError if a primal was modified in place since.
    aux : object
        With ``has_aux`` only: the ``aux`` ``f`` returned.

    Raises
    ------
    TypeError
        If a primal leaf is not an array of a pycograd_xp namespace.
    """
    where = f"linearize({getattr(f, '__name__', 'f')})"
    leaves, td = tree_flatten(primals)
    for i, a in enumerate(leaves):
        if not isinstance(a, Array):
            raise TypeError(
                f"{where}: primal leaf {i} is a {type(a).__name__}, not an array of "
                "a pycograd_xp namespace; convert it with xp.asarray(...)"
            )
    # Fresh array objects holding the values passed, their buffers protected as the tape's
    # residuals are: a later write while recording copies, one under no_grad is detected.
    # New ones for each pass, made from the values held now: f may write into its arguments
    # (rebinding the objects it was given), and each pass starts from the values passed.
    held = [(type(a), a._data, a._node) for a in leaves]

    def fixed() -> Any:
        return tree_unflatten(td, [make(*h) for h in held])

    for a in leaves:
        _tape.mark_saved(a._backend, a._data)
    seq = next(_buffers.SEQ)
    res = f(*fixed())
    out, aux = res if has_aux else (res, None)
    _api._check_out(out, where, scalar=False)

    def f_jvp(*tangents: Any) -> Any:
        if len(tangents) != len(primals):
            raise TypeError(
                f"{where}: f_jvp takes one tangent per primal ({len(primals)}), got {len(tangents)}"
            )
        for i, (a, (_, data, _)) in enumerate(zip(leaves, held, strict=True)):
            if _buffers.written_since(a._backend, data, seq):
                raise RuntimeError(
                    f"{where}: primal leaf {i} was modified in place after "
                    "linearize (e.g. under no_grad()), so f_jvp would use the "
                    "new value; linearize again, or modify a copy "
                    "(xp.asarray(x, copy=True))"
                )
        return jvp(f, fixed(), tangents, has_aux=has_aux)[1]

    return (out, f_jvp, aux) if has_aux else (out, f_jvp)


# -- Jacobians ------------------------------------------------------------------------------------
# One batched pass: ``vmap`` of the pullback over the rows of an identity (jacrev), of ``jvp``
# over the basis tangents (jacfwd). Where a row of the derivative cannot batch
# (:class:`~pycograd_xp._vmap.UnbatchableError`: a data-dependent shape, e.g. a custom rule calling
# ``nonzero``), one pass per basis vector in a Python loop instead.


def _basis_batch(x: Array, total: int, offset: int) -> Array:
    """Rows ``offset .. offset + x.size`` of the ``total``-square identity's columns, as a batch
    of ``total`` arrays shaped like ``x`` (of ``x``'s dtype)."""
    return constant_like(
        x,
        lambda bk, kw: bk.reshape(
            bk.eye(total, x.size, k=-offset, dtype=x.dtype, **kw), (total, *x.shape)
        ),
    )


def _basis(o: Array, k: int) -> Array:
    """The ``k``-th basis vector of ``o``'s flattened space, an array like ``o``."""
    e = constant_like(
        o,
        lambda bk, kw: bk.reshape(
            bk.eye(1, o.size if o.ndim else 1, k=k, dtype=o.dtype, **kw), o.shape
        ),
    )
    return _lift(o._ns, e) if o._backend.level else e


def _zeros(o: Array) -> Array:
    return make(type(o), o._backend.xp.zeros_like(o._data))


def _assemble(ns: Any, parts: list, out_shape: tuple, in_shape: tuple, rows: bool) -> Any:
    """Stack per-basis-vector results into the ``out_shape + in_shape`` Jacobian."""
    if not parts:  # an empty input or output
        return ns.zeros(out_shape + in_shape, dtype=ns.float64)
    flat = [ns.reshape(p, (-1,)) for p in parts]
    j = ns.stack(flat, axis=0 if rows else 1)
    return ns.reshape(j, out_shape + in_shape)


def _offsets(leaves: list) -> list[int]:
    """Where each leaf's elements start in the concatenation of all of them, and the total."""
    out = [0]
    for a in leaves:
        out.append(out[-1] + a.size)
    return out


def _diff_call(f: Callable[..., Any], args: tuple, nums: tuple[int, ...], kwargs: dict):
    def g(*diff: Any) -> Any:
        call = list(args)
        for i, d in zip(nums, diff, strict=True):
            call[i] = d
        return f(*call, **kwargs)

    return g


def _jac_tree(out_td: Any, per_out: list, in_tds: list, argnums: Any) -> Any:
    leaves = []
    for per_arg in per_out:
        trees = tuple(tree_unflatten(td, js) for td, js in zip(in_tds, per_arg, strict=True))
        leaves.append(trees[0] if isinstance(argnums, int) else trees)
    return tree_unflatten(out_td, leaves)


def _rev_batched(pull: Callable[..., Any], out_leaves: list, out_td: Any, in_flat: list) -> list:
    """Every block at once: the pullback ``vmap``-ed over the identity's rows."""
    offs = _offsets(out_leaves)
    cts = [_basis_batch(o, offs[-1], offs[i]) for i, o in enumerate(out_leaves)]
    rows = _vmap.vmap(lambda c: pull(tree_unflatten(out_td, c)))(cts)
    per_out = []
    for oi, o in enumerate(out_leaves):
        lo, hi = offs[oi], offs[oi + 1]
        per_out.append(
            [
                [
                    o._ns.reshape(r[lo:hi, ...], (*o.shape, *x.shape))
                    for r, x in zip(tree_flatten(rows[a])[0], leaves, strict=True)
                ]
                for a, (leaves, _) in enumerate(in_flat)
            ]
        )
    return per_out


def _rev_loop(pull: Callable[..., Any], out_leaves: list, out_td: Any, in_flat: list) -> list:
    """Every block by one pullback per output element (rows that cannot batch)."""
    per_out = []
    for oi, o in enumerate(out_leaves):
        rows = []
        for k in range(o.size):
            cts = [_basis(o, k) if j == oi else _zeros(q) for j, q in enumerate(out_leaves)]
            rows.append(pull(tree_unflatten(out_td, cts)))
        per_out.append(
            [
                [
                    _assemble(
                        o._ns,
                        [tree_flatten(r[a])[0][li] for r in rows],
                        tuple(o.shape),
                        tuple(x.shape),
                        rows=True,
                    )
                    for li, x in enumerate(leaves)
                ]
                for a, (leaves, _) in enumerate(in_flat)
            ]
        )
    return per_out


def jacrev(
    f: Callable[P, Any], argnums: int | Sequence[int] = 0, has_aux: bool = False
) -> Callable[P, Any]:
    """The Jacobian of ``f`` with respect to the ``argnums`` arguments, by reverse mode.

    One ``vjp``, its pullback ``vmap``-ed over the rows of an identity (one batched backward
    pass). Where a row of the backward pass cannot batch, one pullback per output element.

    Parameters
    ----------
    f : callable
        The function: real floating-point arrays (or pytrees of them) in and out
        (``(output, aux)`` with ``has_aux``).
    argnums : int or sequence of int, default 0
        The positional arguments to differentiate with respect to.
    has_aux : bool, default False
        Whether ``f`` returns a pair ``(output, aux)``.

    Returns
    -------
    callable
        A function of ``f``'s arguments returning the Jacobian (``(jacobian, aux)`` with
        ``has_aux``). Each output leaf of shape ``S`` and input leaf of shape ``T`` give a block
        of shape ``S + T``; blocks are nested as JAX nests them (output structure outside, the
        arguments' structure inside, a tuple when ``argnums`` is a sequence).

    See Also
    --------
    jacfwd : the same Jacobian by forward mode (fewer inputs than outputs).

    Examples
    --------
    >>> import numpy, pycograd_xp as pg
    >>> xp = pg.namespace(numpy)
    >>> pg.unwrap(pg.jacrev(lambda x: x**2)(xp.asarray([1.0, 2.0])))
    array([[2., 0.],
           [0., 4.]])
    """

    @functools.wraps(f)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> Any:
        nums = _api._argnums(argnums, len(args), f"jacrev({getattr(f, '__name__', 'f')})")
        g = _diff_call(f, args, nums, kwargs)
        res = _vjp.vjp(g, *[args[i] for i in nums], has_aux=has_aux)
        out, pull = res[0], res[1]
        out_leaves, out_td = tree_flatten(out)
        in_flat = [tree_flatten(args[i]) for i in nums]
        per_out = None
        if _offsets(out_leaves)[-1]:
            try:
                per_out = _rev_batched(pull, out_leaves, out_td, in_flat)
            except _vmap.UnbatchableError:
                pass
        if per_out is None:
            per_out = _rev_loop(pull, out_leaves, out_td, in_flat)
        jac = _jac_tree(out_td, per_out, [td for _, td in in_flat], argnums)
        # the batched backward is a differentiable one (create_graph): its nodes stay only for
        # an outer transform (hessian's jvp, an outer grad), as grad's result does
        nested = STACK.grad_depth > 0 or any(
            isinstance(x, Array) and x._node is not None for leaves, _ in in_flat for x in leaves
        )
        jac = _api._finish(jac, nested)
        return (jac, res[2]) if has_aux else jac

    return wrapped


def _fwd_batched(g: Callable[..., Any], primals: tuple, has_aux: bool) -> tuple:
    """Every column at once: ``jvp`` ``vmap``-ed over the basis tangents. Per input leaf (over
    all argnums) and output leaf, a block of shape ``(n, *out.shape)``; the output's structure
    and aux (blocks, output shapes, output structure, aux)."""
    p_leaves, p_td = tree_flatten(primals)
    offs = _offsets(p_leaves)
    ts = [_basis_batch(x, offs[-1], offs[i]) for i, x in enumerate(p_leaves)]

    def push(t_leaves: list) -> Any:
        res = jvp(g, primals, tree_unflatten(p_td, t_leaves), has_aux=has_aux)
        return (res[1], res[2]) if has_aux else res[1]

    res = _vmap.vmap(push, out_axes=(0, None) if has_aux else 0)(ts)
    tan, aux = res if has_aux else (res, None)
    t_leaves, out_td = tree_flatten(tan)
    columns = [[t[offs[li] : offs[li + 1], ...] for t in t_leaves] for li in range(len(p_leaves))]
    return columns, [tuple(t.shape[1:]) for t in t_leaves], out_td, aux


def _fwd_loop(g: Callable[..., Any], primals: tuple, has_aux: bool) -> tuple:
    """Every column by one ``jvp`` per input element (rows that cannot batch): blocks of
    shape ``(n, *out.shape)`` as :func:`_fwd_batched` gives them."""
    p_leaves, p_td = tree_flatten(primals)
    columns: list[list] = []
    out_td = aux = None
    out_leaves: list[Any] = []
    for li, x in enumerate(p_leaves):
        cols = []
        for k in range(x.size):
            ts = [_basis(x, k) if j == li else _zeros(q) for j, q in enumerate(p_leaves)]
            res = jvp(g, primals, tree_unflatten(p_td, ts), has_aux=has_aux)
            out_leaves, out_td = tree_flatten(res[1])
            aux = res[2] if has_aux else None
            cols.append(out_leaves)
        columns.append(cols)
    if out_td is None:  # no input element at all: evaluate once for the structure
        res = g(*primals)
        out, aux = res if has_aux else (res, None)
        out_leaves, out_td = tree_flatten(out)
    blocks = [
        [
            o._ns.stack([c[oi] for c in cols])
            if cols
            else o._ns.zeros((0, *o.shape), dtype=o.dtype)
            for oi, o in enumerate(out_leaves)
        ]
        for cols in columns
    ]
    return blocks, [tuple(o.shape) for o in out_leaves], out_td, aux


def jacfwd(
    f: Callable[P, Any], argnums: int | Sequence[int] = 0, has_aux: bool = False
) -> Callable[P, Any]:
    """The Jacobian of ``f`` with respect to the ``argnums`` arguments, by forward mode.

    ``jvp`` ``vmap``-ed over the basis tangents of the inputs (one batched forward pass). Where
    a row of the forward pass cannot batch, one ``jvp`` per input element.

    Parameters
    ----------
    f : callable
        The function: floating-point arrays (or pytrees of them) in and out (``(output, aux)``
        with ``has_aux``).
    argnums : int or sequence of int, default 0
        The positional arguments to differentiate with respect to.
    has_aux : bool, default False
        Whether ``f`` returns a pair ``(output, aux)``.

    Returns
    -------
    callable
        A function of ``f``'s arguments returning the Jacobian (``(jacobian, aux)`` with
        ``has_aux``), laid out as :func:`jacrev`'s.
    """

    @functools.wraps(f)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> Any:
        nums = _api._argnums(argnums, len(args), f"jacfwd({getattr(f, '__name__', 'f')})")
        g = _diff_call(f, args, nums, kwargs)
        primals = tuple(args[i] for i in nums)
        found = None
        if _offsets(tree_flatten(primals)[0])[-1]:
            try:
                found = _fwd_batched(g, primals, has_aux)
            except _vmap.UnbatchableError:
                pass
        columns, out_shapes, out_td, aux = found or _fwd_loop(g, primals, has_aux)
        in_flat = [tree_flatten(args[i]) for i in nums]
        per_out = []
        for oi, shape in enumerate(out_shapes):
            per_arg, start = [], 0
            for leaves, _ in in_flat:
                blocks = [columns[start + li][oi] for li in range(len(leaves))]
                per_arg.append(
                    [
                        b._ns.reshape(b._ns.moveaxis(b, 0, -1), (*shape, *x.shape))
                        for b, x in zip(blocks, leaves, strict=True)
                    ]
                )
                start += len(leaves)
            per_out.append(per_arg)
        jac = _jac_tree(out_td, per_out, [td for _, td in in_flat], argnums)
        return (jac, aux) if has_aux else jac

    return wrapped


def hessian(
    f: Callable[P, Any], argnums: int | Sequence[int] = 0, has_aux: bool = False
) -> Callable[P, Any]:
    """The Hessian of the real scalar function ``f``: forward over reverse, ``jacfwd(jacrev(f))``.

    Parameters
    ----------
    f : callable
        A function returning a real floating-point scalar array (``(scalar, aux)`` with
        ``has_aux``).
    argnums : int or sequence of int, default 0
        The positional arguments to differentiate with respect to.
    has_aux : bool, default False
        Whether ``f`` returns a pair ``(output, aux)``.

    Returns
    -------
    callable
        A function of ``f``'s arguments returning the Hessian: a block of shape ``T1 + T2`` per
        pair of input leaves of shapes ``T1`` and ``T2`` (``(hessian, aux)`` with ``has_aux``).

    Examples
    --------
    >>> import numpy, pycograd_xp as pg
    >>> xp = pg.namespace(numpy)
    >>> pg.unwrap(pg.hessian(lambda x: xp.sum(x**3))(xp.asarray([1.0, 2.0])))
    array([[ 6.,  0.],
           [ 0., 12.]])
    """
    return jacfwd(jacrev(f, argnums, has_aux=has_aux), argnums, has_aux=has_aux)


def each_jvp(node: Any, out: Any, args: tuple, kwargs: dict) -> None:
    """The hook the tape calls on every node recorded while a ``jvp`` runs
    (``STACK.jvp_hook``): each running jvp, outermost first, computes the output's tangent
    (its frame's ``propagate``) with only the jvp frames outside it on the stack, so that the
    calls its rule makes are seen by the outer jvps alone, as JAX processes a primitive at each
    level. The hot path of forward mode: of the derived view only ``jvp`` and ``jvp_hook``
    change, and each frame keeps its view for the stack it was made for."""
    d = STACK.__dict__
    frames, jvps, hook = d["frames"], d["jvp"], d["jvp_hook"]  # (hook: a schedule's, chained)
    try:
        for k, frame in enumerate(jvps):
            seen, view = frame.outside
            if seen is not frames:  # the same stack for every node of a jvp but nested ones
                inner = jvps[k:]
                outside = tuple(f for f in frames if f not in inner)
                view = outside, jvps[:k], each_jvp if k else None
                frame.outside = frames, view
            d["frames"], d["jvp"], d["jvp_hook"] = view
            frame.propagate(frame.context, node, out, args, kwargs)
    finally:
        d["frames"], d["jvp"], d["jvp_hook"] = frames, jvps, hook
