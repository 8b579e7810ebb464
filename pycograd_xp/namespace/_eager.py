"""The eager interpreter: the body of every public function of a namespace, written once.

The interpreter is :meth:`Eager.generic`, one closure per row, ``f(*args, **kw)``. It binds the
call by the row's signature (Python's TypeErrors for a wrong one), asks the interpreter stack
once (compile tracing this namespace, or memory projecting a creation call: the call leaves
through the choke point :func:`~pycograd_xp.namespace._dispatch.bind`), then passes each
argument that holds arrays (the row says which: ``Primitive.arrays``, from the impl's
annotations) through the row's per-argument step, :meth:`Eager.operand`: ``operand(x) -> (data,
tracked)``, which checks the dtype, unwraps, refuses a foreign array with a clear error, and
raises :class:`HandOver` for an array of a namespace above this one (abstract or batched: the
call moves there, through ``bind``). Then it calls the backend (its error restated with the
function's name, :func:`~pycograd_xp.namespace._signature.explain`), wraps the result, and
records a tape node when an argument is tracked and grad mode is on.

Four families of rows get a fast lane in front of it, by their signature (:func:`family`); the
lanes are :class:`~pycograd_xp.namespace._lanes.Lanes`'s (their module says what each takes).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType
from typing import Any, cast

from .._parts import enter, leave
from .._primitive import Primitive
from .._state import STACK
from ._array import PLAIN_TYPES, SCALARS, Array
from ._capabilities import Backend
from ._dispatch import SHAPE_CREATORS, HandOver, bind
from ._general_record import general_recorder
from ._lanes import Lanes
from ._no_elements import no_elements
from ._record import elementwise_recorder, one_array_recorder, record
from ._signature import Params, check_axis, dtype_error, explain

# Functions whose job is to take data from outside (foreign arrays are welcome there).
_CONVERTERS = frozenset({"asarray", "from_dlpack"})


def _taken(ns: ModuleType, creates: bool) -> bool:
    """Whether another interpreter takes a call of ``ns`` now (asked only while a Trace or an
    Abstract frame runs, ``STACK.redirect`` set): compile tracing ``ns``, or memory projecting
    a creation call (cases 2 and 3 of ``_dispatch.bind``)."""
    return STACK.closed is ns or (creates and STACK.redirect is not ns)


def runs_impl(prim: Primitive, backend: Backend) -> bool:
    """Whether ``backend`` runs row ``prim``'s impl rather than the backend function of its
    name: every impl, but one that only corrects special values some backends' kernels miss
    (``where_corrected``: ops/elementwise/_special_values.py), which runs where the backend
    names the row in ``Backend.corrects``, and on the abstract backends (a projection's or a
    trace's, which ask the backend they stand for)."""
    impl = prim.impl
    if impl is None:
        return False
    if not getattr(impl, "where_corrected", False):
        return True
    return backend.abstract or prim.name in backend.corrects


def _named(name: str) -> Callable[..., Any]:
    """The impl of an elementwise row that has none: the backend's function of its name."""

    def impl(bk: Any, *args: Any) -> Any:
        return getattr(bk, name)(*args)

    return impl


def family(prim: Primitive, params: Params) -> str:
    """The family whose fast lane makes the row's function (a method name of :class:`Eager`):
    ``unary``, ``binary``, ``one_array``, or ``generic`` (no lane)."""
    if prim.kind in ("unary", "binary"):
        return prim.kind
    if prim.name in _CONVERTERS:  # their argument is seldom our array: no lane
        return "generic"
    names, arrays = params.names, prim.arrays
    plain_after = (
        not params.var
        and not (arrays & params.keywords)
        and all(d is not params.empty for d in params.kwdefaults.values())
    )
    alone = plain_after and not params.keywords and not prim.axis_check and not prim.lists
    if alone and len(names) in (1, 2, 3) and set(names) == arrays == params.posonly:
        return ("unary", "binary", "ternary")[len(names) - 1]
    if (
        plain_after
        and len(names) in (1, 2)
        and names[0] in arrays
        and names[0] in params.posonly
        and not (arrays - {names[0]})
        and not prim.lists
        and (not prim.axis_check or "axis" in params.keywords)
    ):
        return "one_array"
    return "generic"


class Eager(Lanes):
    """The families of public functions, a part of the namespace builder
    (``namespace._build._Builder``), which provides the attributes below: the generic function
    of each row here, the fast lanes in :class:`Lanes`."""

    Arr: Any
    bk: Any
    backend: Any
    mod: ModuleType
    categories: dict[str, Any]
    wrap: Any
    unwrap: Any
    unwrap_foreign: Any
    lifted: Any

    def eager(self, prim: Primitive) -> tuple[Callable[..., Any], Callable[..., Any]]:
        """The public function of the row ``prim`` (its family's fast lane in front of its
        generic function, or the generic function alone), and the generic function."""
        params = Params(prim)
        slow = self.generic(prim, params)
        lane = family(prim, params)
        f: Any = slow if lane == "generic" else getattr(self, lane)(prim, params, slow)
        f._generic = slow  # (the tests call both)
        if prim.signature is not None:
            f.__signature__ = prim.signature  # read by inspect
        return f, slow

    def accepted(self, prim: Primitive) -> frozenset:
        """The dtypes of the row's arrays that the families' inlined first step lets through
        (every dtype of the backend where the row checks none; the others go through
        :meth:`operand`, which checks them)."""
        return self.categories[prim.dtypes or "all"]

    def operand(self, prim: Primitive, checked: bool = True, many: bool = False) -> Any:
        """The per-argument step of the row's function: ``operand(x) -> (data, tracked)``, the
        backend data of an argument that may hold arrays, and whether it holds one being
        differentiated. ``checked``: the argument's dtype must be one the row accepts (its
        positional-only arrays); ``many``: it may be a list of arrays (tracked when one is).

        Raises the row's dtype error, :class:`HandOver` for an array of a namespace above this
        one, and a TypeError for a foreign array. An elementwise row takes a Python scalar
        (``x * 2.0``; a unary row makes it a 0-d array, as NumPy's ufuncs) and refuses any
        other non-array.
        """
        name, Arr, kind, dtypes, mod = prim.name, self.Arr, prim.kind, prim.dtypes, self.mod
        allowed = self.categories[dtypes] if dtypes and checked else None
        unwrap = self.unwrap_foreign(name) if name in _CONVERTERS else self.unwrap(name)
        lifted, abstract = self.lifted, self.backend.abstract

        def ours(x: Any) -> tuple[Any, bool]:  # an array of this namespace
            d = x._data
            if allowed is not None and d.dtype not in allowed:
                raise dtype_error(name, d.dtype, dtypes)
            return d, x._node is not None

        def general(x: Any) -> tuple[Any, bool]:  # a general row's
            if type(x) is Arr:
                return ours(x)
            # HandOver, or a clear TypeError for another namespace's or library's array
            return unwrap(x), False

        def listed(x: Any) -> tuple[Any, bool]:  # a list or tuple of arrays (concat's), or one
            t = type(x)
            if t is not list and t is not tuple:
                if t is Arr:
                    return ours(x)
                return unwrap(x), isinstance(x, Array) and x._node is not None  # (a lower level's)
            data, held = [], False
            for e in x:
                if type(e) is Arr:  # (unwrap's first case, inlined: one pass, no call)
                    data.append(e._data)
                    held = held or e._node is not None
                else:
                    d, h = listed(e)
                    data.append(d)
                    held = held or h
            return (data if t is list else tuple(data)), held

        if kind == "general":
            return listed if many else general

        def operand(x: Any) -> tuple[Any, bool]:  # an elementwise row's
            if type(x) is Arr:
                return ours(x)
            if kind == "binary" and isinstance(x, SCALARS):
                return x, False
            d = unwrap(x)  # HandOver, or a clear TypeError for another namespace's array
            if lifted(x) or (kind == "binary" and abstract and isinstance(x, Array)):
                return d, False  # an array of a lower vmap level, or a constant from outside
            if kind == "unary" and isinstance(x, SCALARS):  # scipy.special's chdtrc passes one
                return operand(mod.asarray(x))
            what = "an array" if kind == "unary" else "an array or a Python scalar"
            raise TypeError(f"{name}(): expected {what}, got {type(x).__name__}")

        return operand

    def impl(self, prim: Primitive) -> Callable[..., Any]:
        """The row's ``impl(bk, *args, **kw)`` (an elementwise row without one, or whose impl
        this backend does not run: the backend's function of its name); on a backend that names
        the work it plans (``Backend.labeller``), run :func:`~pycograd_xp._parts.within` the
        part ``("row", name)``."""
        impl = prim.impl
        if impl is None or not runs_impl(prim, self.backend):
            impl = _named(prim.name)
        if self.backend.chunked:  # an empty operand Cubed fails on: NumPy's answer, if exact
            impl = _or_no_elements(impl, prim.name, self.backend)
        labeller = self.backend.labeller
        if labeller is None:
            return impl
        name = prim.name

        # (pycograd_xp._parts.within, written out: one frame between the user's call and the
        # backend's, so that a backend's own record of its caller's stack reaches the user)
        def in_part(bk: Any, *args: Any, **kw: Any) -> Any:
            prev = enter("row", name)
            try:
                mark = labeller.mark()
                value = impl(bk, *args, **kw)
                labeller.label(mark, value)
                return value
            finally:
                leave(prev)

        return in_part

    def call(self, prim: Primitive) -> Callable[..., Any]:
        """The row's backend call: its impl with the backend bound, or (an elementwise row
        without one, on a backend that names no parts) the backend's function of its name."""
        if not runs_impl(prim, self.backend) and self.backend.labeller is None:
            return cast(Callable[..., Any], getattr(self.bk, prim.name))
        return functools.partial(self.impl(prim), self.bk)

    def recorder(self, prim: Primitive) -> Callable[..., Any]:
        """``rec(out, *args)``: the node for the row applied to ``args`` (no keywords)."""
        if prim.kind != "general":
            floating = self.categories["floating-point"]
            chunked, abstract = self.backend.chunked, self.backend.abstract
            return elementwise_recorder(prim, self.mod, floating, chunked, abstract)
        ns, b = self.mod, self.backend
        if b.lift is None and not b.abstract:  # (a batched or abstract namespace: record's)
            floating = self.categories["floating-point"]
            return general_recorder(prim, ns, floating, b.chunked, self.Arr)

        def rec(out: Any, *args: Any) -> Any:
            return record(prim, ns, out, args, {})

        return rec

    def one_array_recorder(self, prim: Primitive) -> Callable[..., Any]:
        """``rec(out, args, kwargs)``: the node for a general row applied to one array and plain
        values (the one-array lane's call)."""
        ns, b = self.mod, self.backend
        if b.lift is None and not b.abstract:  # (a batched or abstract namespace: record's)
            floating = self.categories["floating-point"]
            return one_array_recorder(prim, ns, floating, b.chunked, self.Arr)

        def rec(out: Any, args: tuple, kwargs: dict) -> Any:
            return record(prim, ns, out, args, kwargs)

        return rec

    # -- the generic function and the fast lanes --------------------------------------------------
    def generic(self, prim: Primitive, params: Params) -> Callable[..., Any]:
        """The row's generic function ``f(*args, **kw)``: the eager interpreter (see the module
        docstring); every row's function is it, or a fast lane in front of it."""
        name, Arr, ns, bk, accepted = prim.name, self.Arr, self.mod, self.bk, self.accepted(prim)
        impl = self.impl(prim)
        T, new, wrap, lifted = self.backend.array_type, self.new(), self.wrap(), self.lifted
        abstract = self.backend.abstract

        def ours_outside(x: Any) -> bool:  # as an elementwise operand takes it (see operand)
            return lifted(x) or (abstract and isinstance(x, Array))

        kwdefaults, diff, axis_check = params.kwdefaults, prim.vjp is not None, prim.axis_check
        axis_default, names, npos = kwdefaults.get("axis"), params.names, len(params.names)
        creates, pair = name in SHAPE_CREATORS, prim.kind == "binary"
        plain = PLAIN_TYPES if prim.kind == "general" else ()  # (elementwise: see operand)
        # the operand of each positional parameter that holds arrays, by position (its dtype
        # checked where it is positional-only), then of each keyword-only one, by name
        operands = {
            i: self.operand(prim, checked=n in params.posonly, many=n in prim.lists)
            for i, n in enumerate(names)
            if n in prim.arrays
        }
        held_at = tuple(operands)
        var = params.var_name in prim.arrays  # each of the *args holds arrays
        var_operand = self.operand(prim, checked=False, many=True)
        keywords = tuple(
            (k, self.operand(prim, checked=False, many=k in prim.lists))
            for k in kwdefaults
            if k in prim.arrays
        )
        axis_at = None if "axis" in kwdefaults or not axis_check else names.index("axis")

        def f(*args: Any, **kw: Any) -> Any:
            if len(args) != npos:  # a positional parameter left out or given by keyword, *args
                args, kw = params.bind(args, kw)  # or Python's TypeError
            if STACK.redirect is not None and _taken(ns, creates):
                return bind(prim, ns, args, {**kwdefaults, **kw})
            # what the backend call gets: the arguments, as a list once one of them changes
            pos: Any = list(args) if var else args
            tracked, kwd = False, kw
            try:
                for i in held_at:
                    a = args[i]
                    if type(a) is Arr and (d := a._data).dtype in accepted:
                        pos = pos if pos is not args else list(args)
                        pos[i] = d  # (the first line of operand, inlined)
                        if a._node is not None:
                            tracked = True
                    elif type(a) not in plain:  # a general row's Python number or None: as it is
                        pos = pos if pos is not args else list(args)
                        pos[i], held = operands[i](a)
                        tracked = tracked or held
                if var:
                    for i in range(npos, len(args)):
                        pos[i], held = var_operand(args[i])
                        tracked = tracked or held
                if keywords:
                    kwd = {**kwdefaults, **kw}
                    for k, operand in keywords:
                        kwd[k], held = operand(kwd[k])
                        tracked = tracked or held
            except HandOver as over:  # an abstract or batched argument: the call moves there
                return bind(prim, ns, args, {**kwdefaults, **kw}, over.ns)
            if pair and type(args[0]) is not Arr and type(args[1]) is not Arr:
                if not (ours_outside(args[0]) or ours_outside(args[1])):
                    raise TypeError(
                        f"{name}(): at least one argument must be an array, got two scalars"
                    )
            if axis_check:
                axis = kw.get("axis", axis_default) if axis_at is None else args[axis_at]
                if axis is not None and (
                    type(axis) is not int or not -pos[0].ndim <= axis < pos[0].ndim
                ):
                    check_axis(name, axis, pos[0].ndim)  # a tuple, or an axis to refuse
            try:
                r = impl(bk, *pos, **kwd) if kwd else impl(bk, *pos)
                out = new(r) if type(r) is T else wrap(r)
            except (ValueError, TypeError, IndexError) as e:
                params.refuse(args, kw)
                raise explain(name, e, tuple(pos), {**kwdefaults, **kwd}) from e
            if tracked and diff and STACK.grad_enabled:
                return record(prim, ns, out, args, {**kwdefaults, **kw})
            return out

        return f


def _or_no_elements(impl: Callable[..., Any], name: str, backend: Backend) -> Callable[..., Any]:
    """``impl``, and where the backend refuses a call with an operand of no elements, the
    result read off NumPy (:mod:`._no_elements`), or the backend's error where it cannot be."""
    array_type, like_kwargs = backend.array_type, backend.like_kwargs

    @functools.wraps(impl)
    def call(bk: Any, *args: Any, **kw: Any) -> Any:
        try:
            return impl(bk, *args, **kw)
        except (ValueError, TypeError, IndexError, ZeroDivisionError):  # (Cubed's chunking of
            r = no_elements(name, array_type, like_kwargs, bk, args, kw)  # 0 divides by it)
            if r is None:
                raise
            return r

    return call
