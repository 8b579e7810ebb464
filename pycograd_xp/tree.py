"""Pytrees: nested dicts, lists, tuples, NamedTuples and dataclasses whose leaves are arrays.

``tree_flatten`` returns the leaves in a fixed order and a ``TreeDef`` that ``tree_unflatten``
rebuilds from new leaves. Dict keys are visited in sorted order when they sort (as in JAX), so
two dicts with the same keys flatten alike. None is an empty subtree, not a leaf. A dataclass
field declared with ``metadata={"static": True}`` (``pycograd_xp.nn.static()``) is part of the
structure, not a leaf.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from itertools import chain, islice
from operator import attrgetter, call
from typing import Any, Literal

from ._exports import module_dir as _module_dir

__all__ = ["TreeDef", "tree_flatten", "tree_leaves", "tree_map", "tree_structure", "tree_unflatten"]


# dir() lists the public names only (what completion offers)
__dir__ = _module_dir(globals())


@dataclasses.dataclass(frozen=True)
class TreeDef:
    """The structure of a pytree: a node kind, its static data and its children's structures.

    Made by :func:`tree_flatten`; compared with ``==``; printed as a tree.

    Parameters
    ----------
    kind : str
        ``"leaf"``, ``"none"``, ``"tuple"``, ``"list"``, ``"namedtuple"``, ``"dict"`` or
        ``"dataclass"``.
    meta : object, optional
        The NamedTuple or dataclass type, or the dict's keys.
    children : tuple of TreeDef, default ()
        The children's structures.
    """

    kind: str  # "leaf", "none", "tuple", "list", "namedtuple", "dict", "dataclass"
    meta: Any = None  # the NamedTuple/dataclass type, the dict keys
    children: tuple[TreeDef, ...] = ()

    @property
    def num_leaves(self) -> int:
        """The number of leaves a tree of this structure has."""
        n = self.__dict__.get("_num_leaves")  # (flattening stores it: unflattening asks)
        if n is None:
            n = 1 if self.kind == "leaf" else sum(c.num_leaves for c in self.children)
            self.__dict__["_num_leaves"] = n
        return n

    def __repr__(self) -> str:
        if self.kind == "leaf":
            return "*"
        if self.kind == "none":
            return "None"
        if self.kind == "dict":  # the keys: what tells two parameter dicts apart
            inner = ", ".join(
                f"{k!r}: {c!r}" for k, c in zip(self.meta, self.children, strict=True)
            )
            return f"{{{inner}}}"
        inner = ", ".join(map(repr, self.children))
        return f"{getattr(self.meta, '__name__', self.kind)}({inner})"


def _dict_keys(d: dict) -> list:
    try:
        return sorted(d)
    except TypeError:
        return list(d)


_DATACLASS_FIELDS: dict[type, tuple[tuple[str, ...], tuple[str, ...]]] = {}


def _dataclass_fields(cls: type) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(leaf field names, static field names) of a dataclass type, computed once per type."""
    cached = _DATACLASS_FIELDS.get(cls)
    if cached is None:
        fields = [f for f in dataclasses.fields(cls) if f.init]
        cached = (
            tuple(f.name for f in fields if not f.metadata.get("static")),
            tuple(f.name for f in fields if f.metadata.get("static")),
        )
        _DATACLASS_FIELDS[cls] = cached
        names, statics = cached
        # without static fields: the leaves' getter, the structure's meta (one object per
        # type) and whether __init__ takes the leaves positionally, in field order
        if not statics:
            getter = attrgetter(*names) if len(names) > 1 else lambda x: (getattr(x, names[0]),)
            positional = _takes_positionally(cls, names)
            _DATACLASS_PLAIN[cls] = (
                getter if names else lambda x: (),
                (cls, names, ()),
                positional,
            )
    return cached


def _takes_positionally(cls: type, names: tuple[str, ...]) -> bool:
    """Whether ``cls(*values)`` passes ``values`` as ``names``: its ``__init__``'s parameters
    are exactly those, in that order, each positional (no keyword-only field, no ``InitVar``
    between them, no ``__init__`` of its own taking others)."""
    import inspect

    try:
        params = list(inspect.signature(cls).parameters.values())
    except (TypeError, ValueError):
        return False
    return tuple(p.name for p in params) == names and all(
        p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params
    )


# dataclass type -> (its leaves' getter, its TreeDef meta, __init__ takes them positionally),
# for dataclasses without static fields (a layer: Linear's w and b)
_DATACLASS_PLAIN: dict[type, tuple[Callable[[Any], Any], tuple, bool]] = {}


# The node kind of each type met, decided once per type (a type's kind never changes): the
# flattening of a step's parameter, gradient and state trees asks it for every node and leaf.
_KINDS: dict[type, str] = {}


def _kind_of(t: type) -> str:
    """The node kind of values of type ``t``: ``"leaf"``, ``"none"``, ``"tuple"``,
    ``"namedtuple"``, ``"list"``, ``"dict"`` or ``"dataclass"`` (subclasses of the builtins are
    their base's kind; a dataclass *type* itself is a leaf)."""
    if t is type(None):
        kind = "none"
    elif issubclass(t, tuple):
        kind = "namedtuple" if hasattr(t, "_fields") else "tuple"
    elif issubclass(t, list):
        kind = "list"
    elif issubclass(t, dict):
        kind = "dict"
    elif dataclasses.is_dataclass(t) and not issubclass(t, type):
        kind = "dataclass"
    else:
        kind = "leaf"
    if len(_KINDS) > 4096:  # types made on the fly: keep the table small
        _KINDS.clear()
        _LEAF_TYPES.clear()
    _KINDS[t] = kind
    if kind == "leaf":
        _LEAF_TYPES.add(t)
    return kind


_LEAF_TYPES: set[type] = set()  # the types of _KINDS whose kind is "leaf"


def _children(x: Any) -> tuple[str, Any, list] | None:
    t = type(x)
    kind = _KINDS.get(t) or _kind_of(t)
    if kind == "leaf":
        return None
    if kind == "dict":
        keys = _dict_keys(x)
        return "dict", tuple(keys), [x[k] for k in keys]
    if kind == "list" or kind == "tuple":
        return kind, None, list(x)
    if kind == "none":
        return "none", None, []
    if kind == "namedtuple":
        return "namedtuple", t, list(x)
    # fields marked static (metadata {"static": True}) are structure, not leaves
    names, static_names = _dataclass_fields(t)
    statics = tuple([(n, getattr(x, n)) for n in static_names]) if static_names else ()
    return "dataclass", (t, names, statics), [getattr(x, n) for n in names]


_LEAF = TreeDef("leaf")  # one for every leaf (equal structures then compare by identity)
LEAF = _LEAF  # the structure of a tree that is one leaf (``tree_flatten(a)[1] is LEAF``)
_new = object.__new__


def _node(kind: str, meta: Any, children: tuple[TreeDef, ...], n: int, flat: bool) -> TreeDef:
    """``TreeDef(kind, meta, children)`` of ``n`` leaves (``flat``: its children are all
    leaves) without the frozen dataclass's ``__init__`` (a ``object.__setattr__`` per field):
    flattening makes one per inner node."""
    td = _new(TreeDef)
    td.__dict__.update(kind=kind, meta=meta, children=children, _num_leaves=n, _flat=flat)
    return td


# The recursions below are module-level functions, not closures: a nested function that calls
# itself is a reference cycle (function -> cell -> function) holding everything it closes over,
# here the leaves, so arrays would wait for the garbage collector instead of being freed when
# the last reference goes (the memory model, and NumPy's peak, rely on the latter).


def _walk(x: Any, leaves: list[Any]) -> TreeDef:
    t = type(x)
    kind = _KINDS.get(t) or _kind_of(t)
    if kind == "leaf":
        leaves.append(x)
        return _LEAF
    start = len(leaves)
    if kind == "dict":  # (the common inner nodes inline: _children's cases)
        keys = _dict_keys(x)
        meta: Any = tuple(keys)
        kids = [x[k] for k in keys]
    elif kind == "dataclass":
        names, static_names = _DATACLASS_FIELDS.get(t) or _dataclass_fields(t)
        if static_names:
            statics = tuple([(n, getattr(x, n)) for n in static_names])
            meta, kids = (t, names, statics), [getattr(x, n) for n in names]
        else:
            getter, meta, _ = _DATACLASS_PLAIN[t]
            kids = getter(x)
    else:
        parts = _children(x)
        assert parts is not None
        kind, meta, kids = parts
    if _LEAF_TYPES.issuperset(map(type, kids)):  # leaves only (a layer's w and b): at once
        leaves.extend(kids)
        return _node(kind, meta, (_LEAF,) * len(kids), len(kids), True)
    children = []
    flat = True
    for k in kids:  # (a leaf child here, not by a call: most children are leaves)
        t = type(k)
        if (_KINDS.get(t) or _kind_of(t)) == "leaf":
            leaves.append(k)
            children.append(_LEAF)
        else:
            children.append(_walk(k, leaves))
            flat = False
    return _node(kind, meta, tuple(children), len(leaves) - start, flat)


def tree_flatten(tree: Any) -> tuple[list[Any], TreeDef]:
    """The leaves of ``tree`` (depth first) and its structure.

    Parameters
    ----------
    tree : pytree
        Nested dicts (keys in sorted order when they sort, as in JAX), lists, tuples, NamedTuples
        and dataclasses; None is an empty subtree, anything else a leaf.

    Returns
    -------
    leaves : list
        The leaves, in a fixed order.
    treedef : TreeDef
        The structure, for :func:`tree_unflatten`.
    """
    t = type(tree)
    if t is dict or t is list or t is tuple or t in _DATACLASS_PLAIN:
        plan = _shallow(tree, t)
        if plan is not None:
            return plan
    leaves: list[Any] = []
    return leaves, _walk(tree, leaves)


# -- shallow trees: a model's parameters ----------------------------------------------------------
# A dict, list, tuple or plain dataclass (no static field) whose children are leaves, None,
# NamedTuples or plain dataclasses of leaves (a dict of layers, a layer, a model of layers) is
# flattened by a plan made once per signature (the container's type, its keys, its children's
# types): its children's fields read by their getters into one list, then one check that all of
# them are leaves; the structure is the plan's, one object for all such trees (a comparison of
# two is then ``is``). Unflattening such a structure builds the children directly (a builder kept
# on the structure). Anything else (a child dict, a field holding a subtree) takes the walk.

# (container type, keys or None, children's types) -> (structure, one getter per child: a
# function of the child returning its leaves; None where every child is a leaf), or False: a
# signature whose trees are walked
_PLANS: dict[tuple, tuple[TreeDef, tuple | None] | Literal[False]] = {}


def _shallow(tree: Any, t: type) -> tuple[list[Any], TreeDef] | None:
    """``tree_flatten(tree)`` by the plan of its signature (``t``: its type, a dict, list,
    tuple or plain dataclass), or None where it has none (a walk then flattens it)."""
    if t is dict:
        try:
            keys: Any = tuple(sorted(tree))
        except TypeError:
            return None
        kids = list(map(tree.__getitem__, keys))
    elif t is list or t is tuple:
        keys, kids = None, tree
    else:
        keys, kids = None, _DATACLASS_PLAIN[t][0](tree)
    sig = (t, keys, tuple(map(type, kids)))
    plan = _PLANS.get(sig)
    if plan is None:
        return _first(tree, sig)
    if plan is False:
        return None
    td, getters = plan
    if getters is None:  # leaves only (the signature says so)
        return list(kids), td
    # (the getters called from C: one per child, the signature holding one type per child)
    leaves = list(chain.from_iterable(map(call, getters, kids)))
    if not _LEAF_TYPES.issuperset(map(type, leaves)):  # a field holding a subtree: walk it
        return None
    return leaves, td


def _none(_: Any) -> tuple:
    return ()


def _one(x: Any) -> tuple:
    return (x,)


def _first(tree: Any, sig: tuple) -> tuple[list[Any], TreeDef] | None:
    """The first tree of signature ``sig``: its plan made (see :data:`_PLANS`) and ``tree``
    flattened by a walk; None (the plan False) where its children are not all leaves, None,
    NamedTuples or plain dataclasses. A tree whose fields hold subtrees is walked and makes
    no plan (its structure is not its signature's)."""
    getters: list[Any] = []
    for kt in sig[2]:
        kind = _KINDS.get(kt) or _kind_of(kt)
        if kind == "leaf":
            getters.append(_one)
        elif kind == "none":
            getters.append(_none)
        elif kind == "namedtuple":
            getters.append(tuple)
        elif kind == "dataclass" and not _dataclass_fields(kt)[1]:
            getters.append(_DATACLASS_PLAIN[kt][0])
        else:  # a list, a dict, a dataclass with static fields: a walk
            break
    if len(_PLANS) > 1024:  # signatures made on the fly: keep the table small
        _PLANS.clear()
    if len(getters) < len(sig[2]):
        _PLANS[sig] = False
        return None
    leaves: list[Any] = []
    td = _walk(tree, leaves)
    if _LEAF_TYPES.issuperset(map(type, leaves)):
        _PLANS[sig] = (td, None if all(g is _one for g in getters) else tuple(getters))
    return leaves, td


def _builder(td: TreeDef) -> Any:
    """A function of a list of leaves that builds a tree of structure ``td``, where ``td`` is
    a dict, list, tuple or plain dataclass whose children are leaves, None, NamedTuples of
    leaves or plain dataclasses of leaves taking them positionally; else False. Kept on
    ``td``."""
    steps: list[tuple[Any, int, int]] = []  # per child: (what makes it, its leaves' slice)
    if td.kind == "dataclass":
        cls, names, statics = td.meta
        plain = _DATACLASS_PLAIN.get(cls)
        ok = not statics and plain is not None and plain[2] and len(names) == len(td.children)
    else:
        ok = td.kind in ("dict", "list", "tuple")
    i = 0
    for c in td.children if ok else ():
        if c.kind == "leaf":
            steps.append((_same, i, i + 1))
        elif c.kind == "none":
            steps.append((_nothing, i, i))
        elif c.kind not in ("namedtuple", "dataclass") or not c.__dict__.get("_flat"):
            ok = False
        elif c.kind == "namedtuple":
            steps.append((c.meta, i, i + len(c.children)))
        else:
            cls, names, statics = c.meta
            plain = _DATACLASS_PLAIN.get(cls)
            if statics or plain is None or not plain[2] or len(names) != len(c.children):
                ok = False
            steps.append((cls, i, i + len(names)))
        i = steps[-1][2] if steps else i
    if not ok:
        td.__dict__["_builder"] = False
        return False
    kind, meta = td.kind, td.meta
    leaves_only = all(m is _same for m, _, _ in steps)
    make = {"dict": dict, "list": list, "tuple": tuple}.get(kind)

    def build(leaves: list[Any]) -> Any:
        kids = leaves if leaves_only else [m(*leaves[a:b]) for m, a, b in steps]
        if make is dict:
            return dict(zip(meta, kids, strict=True))
        if make is not None:
            return make(kids)
        return meta[0](*kids)

    td.__dict__["_builder"] = build
    return build


def _same(x: Any) -> Any:
    return x


def _nothing() -> None:
    return None


def _build(td: TreeDef, it: Any) -> Any:
    kind = td.kind
    if kind == "leaf":
        return next(it)
    children = td.children
    if td.__dict__.get("_flat"):  # leaves only (a layer's parameters): no recursion
        kids = list(islice(it, len(children)))
    else:
        kids = [next(it) if c is _LEAF else _build(c, it) for c in children]
    if kind == "dict":
        return dict(zip(td.meta, kids, strict=True))
    if kind == "none":
        return None
    if kind == "tuple":
        return tuple(kids)
    if kind == "list":
        return kids
    if kind == "namedtuple":
        return td.meta(*kids)
    cls, names, statics = td.meta
    if statics:
        return cls(**dict(zip(names, kids, strict=True)), **dict(statics))
    plain = _DATACLASS_PLAIN.get(cls)
    if plain is not None and plain[2] and len(kids) == len(names):
        return cls(*kids)
    return cls(**dict(zip(names, kids, strict=True)))


def tree_unflatten(treedef: TreeDef, leaves: list[Any] | tuple[Any, ...]) -> Any:
    """Rebuild a tree of structure ``treedef`` from ``leaves``.

    Parameters
    ----------
    treedef : TreeDef
        A structure from :func:`tree_flatten`.
    leaves : list or tuple
        As many leaves as ``treedef`` has, in :func:`tree_flatten`'s order.

    Returns
    -------
    pytree
        The tree.
    """
    leaves = list(leaves)
    known = treedef.__dict__  # (flattening stores the count: no property call)
    build = known.get("_builder")
    if build and len(leaves) == known["_num_leaves"]:  # (a builder: the count is known)
        return build(leaves)
    if len(leaves) != (known.get("_num_leaves") or treedef.num_leaves):
        raise ValueError(
            f"tree_unflatten: the structure {treedef!r} has {treedef.num_leaves} leaves, "
            f"got {len(leaves)}"
        )
    build = known.get("_builder")
    if build is None:
        build = _builder(treedef)
    if build is not False:
        return build(leaves)
    return _build(treedef, iter(leaves))


def same_structure(a: TreeDef, b: TreeDef) -> bool:
    """Whether two structures match, taking NamedTuples of the same name and fields as the same
    (two backends' ``SlogdetResult`` classes, say, or a compiled function's and its caller's)."""
    if a == b:
        return True
    if a.kind != b.kind or len(a.children) != len(b.children):
        return False
    if a.kind == "namedtuple":
        if (a.meta.__name__, a.meta._fields) != (b.meta.__name__, b.meta._fields):
            return False
    elif a.meta != b.meta:
        return False
    return all(same_structure(x, y) for x, y in zip(a.children, b.children, strict=True))


def tree_leaves(tree: Any) -> list[Any]:
    """The leaves of ``tree``, in :func:`tree_flatten`'s order.

    Parameters
    ----------
    tree : pytree
        Any pytree.

    Returns
    -------
    list
        Its leaves.
    """
    return tree_flatten(tree)[0]


def tree_structure(tree: Any) -> TreeDef:
    """The structure of ``tree``.

    Parameters
    ----------
    tree : pytree
        Any pytree.

    Returns
    -------
    TreeDef
        Its structure (``tree_flatten(tree)[1]``).
    """
    return tree_flatten(tree)[1]


def tree_map(f: Callable[..., Any], tree: Any, *rest: Any) -> Any:
    """Apply ``f`` leafwise to ``tree`` and trees of the same structure ``rest``.

    Parameters
    ----------
    f : callable
        Called as ``f(leaf, *rest_leaves)`` for each leaf.
    tree : pytree
        The tree whose structure the result has.
    *rest : pytree
        Trees of the same structure, whose leaves are passed beside ``tree``'s.

    Returns
    -------
    pytree
        ``tree``'s structure with ``f``'s results as leaves.

    Raises
    ------
    ValueError
        If a tree of ``rest`` has another structure.

    Examples
    --------
    >>> import pycograd_xp as pg
    >>> pg.tree_map(lambda a, b: a + b, {"w": 1, "b": 2}, {"w": 10, "b": 20})
    {'b': 22, 'w': 11}
    """
    leaves, td = tree_flatten(tree)
    others = []
    for r in rest:
        r_leaves, r_td = tree_flatten(r)
        if r_td != td:
            raise ValueError(f"tree_map: structures differ: {td!r} and {r_td!r}")
        others.append(r_leaves)
    return tree_unflatten(td, [f(*xs) for xs in zip(leaves, *others, strict=True)])
