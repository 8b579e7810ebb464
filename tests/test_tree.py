"""Pytrees: flatten/unflatten round trips for every container kind, tree_map, errors."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import pytest

from pycograd_xp import nn
from pycograd_xp.tree import tree_flatten, tree_leaves, tree_map, tree_structure, tree_unflatten


class P(NamedTuple):
    a: object
    b: object


@dataclasses.dataclass
class D:
    x: object
    name: str = nn.static("d")


TREE = {"z": [1, (2, 3)], "a": P(4, None), "d": D({"k": 5}, "cfg")}


def test_round_trip_and_order():
    leaves, td = tree_flatten(TREE)
    assert leaves == [4, 5, 1, 2, 3]  # dict keys sorted; None is an empty subtree
    rebuilt = tree_unflatten(td, leaves)
    assert rebuilt == TREE and rebuilt["d"].name == "cfg"
    assert tree_leaves(TREE) == leaves and tree_structure(TREE) == td
    assert repr(td).startswith("{'a': ")  # a dict shows its keys


def test_tree_map_over_several_trees():
    doubled = tree_map(lambda x, y: x + y, TREE, TREE)
    assert tree_leaves(doubled) == [8, 10, 2, 4, 6] and doubled["a"].b is None
    with pytest.raises(ValueError, match="structures differ"):
        tree_map(lambda x, y: x, {"a": 1}, {"b": 1})
    with pytest.raises(ValueError, match="has 5 leaves, got 2"):
        tree_unflatten(tree_structure(TREE), [1, 2])


class Sub(dict):
    pass


class Pair(tuple):  # a tuple subclass without _fields: a plain tuple's node
    pass


@dataclasses.dataclass
class Layer:
    w: object
    b: object = None
    nested: object = None


def test_every_node_kind_round_trips_through_the_per_type_table():
    """Each kind is decided once per type (tree._KINDS): subclasses of the builtins, a
    dataclass whose children mix leaves, None and subtrees, a dataclass *type* as a leaf."""
    tree = [
        Sub(b=1, a=2),
        Pair((3, 4)),
        Layer(5, None, {"k": (6,)}),
        Layer(7, 8),
        D,  # a dataclass type is a leaf, not a node
        P(9, [10]),
    ]
    for _ in range(2):  # the second time from the table
        leaves, td = tree_flatten(tree)
        assert leaves == [2, 1, 3, 4, 5, 6, 7, 8, D, 9, 10]
        rebuilt = tree_unflatten(td, leaves)
        assert rebuilt[0] == {"a": 2, "b": 1} and type(rebuilt[1]) is tuple
        assert rebuilt[2] == Layer(5, None, {"k": (6,)}) and rebuilt[3] == Layer(7, 8)
        assert rebuilt[4] is D and rebuilt[5] == P(9, [10])
        assert td.num_leaves == 11 == tree_structure(tree).num_leaves
        assert td == tree_structure(tree) and hash(td) == hash(tree_structure(tree))
    # a structure made by hand counts its leaves as one from flattening
    leaf = type(td.children[0].children[0])("leaf")
    made = type(td)("list", None, (leaf, type(td)("none"), leaf))
    assert made.num_leaves == 2 and tree_unflatten(made, ["x", "y"]) == ["x", None, "y"]


@dataclasses.dataclass
class WithInitVar:
    a: object
    scale: dataclasses.InitVar[float] = 1.0
    b: object = None


@dataclasses.dataclass
class KeywordOnly:
    a: object
    b: object = dataclasses.field(default=None, kw_only=True)


def test_dataclasses_are_rebuilt_by_their_fields_names_where_positions_would_misplace_them():
    """A layer (fields in order) is rebuilt positionally; an InitVar between the fields or a
    keyword-only field takes the keyword way (a position would land in the InitVar)."""
    for tree in (Layer(1, 2, 3), WithInitVar(1, 2.0, 3), KeywordOnly(1, b=2)):
        leaves, td = tree_flatten(tree)
        assert tree_unflatten(td, leaves) == tree
    leaves, td = tree_flatten(WithInitVar(1, 5.0, 3))
    assert leaves == [1, 3] and tree_unflatten(td, ["x", "y"]) == WithInitVar("x", 1.0, "y")


@dataclasses.dataclass
class Two:
    w: object
    b: object


def _walked(tree):
    """tree_flatten by the general walk (no plan)."""
    from pycograd_xp import tree as tree_module

    leaves = []
    return leaves, tree_module._walk(tree, leaves)


def test_shallow_trees_flatten_by_plan_as_the_walk_does_and_fall_back_where_it_differs():
    """A model's parameters (a dict, list, tuple or dataclass of layers, leaves, None and
    NamedTuples) take a plan per signature (tree._PLANS); the same leaves and an equal
    structure as the walk, one structure object per signature, and the walk again where a
    field of the same types holds a subtree or None."""
    shallow = [
        {"l2": Two(3, 4), "l1": Two(1, 2)},
        {"w": 1, "b": 2.0},
        [Two(1, 2), None, 3, P(4, 5)],
        (Two(1, 2),),
        Two(Two.__name__, 7),  # a dataclass of leaves at the top
        Layer(1, 2, 3),
        [],
    ]
    for tree in shallow:
        want_leaves, want_td = _walked(tree)
        first = tree_flatten(tree)
        second = tree_flatten(tree)  # by the plan
        assert first[0] == second[0] == want_leaves
        assert first[1] == want_td and second[1] is first[1]
        assert tree_unflatten(second[1], second[0]) == tree
        assert tree_unflatten(second[1], list(range(len(want_leaves)))) == tree_unflatten(
            want_td, list(range(len(want_leaves)))
        )
    # the same signature with a field that is not a leaf: walked, its own structure
    for tree in ({"l1": Two(1, {"k": 2}), "l2": Two(3, 4)}, {"l1": Two(1, None), "l2": Two(3, 4)}):
        leaves, td = tree_flatten(tree)
        assert (leaves, td) == _walked(tree) and tree_unflatten(td, leaves) == tree
    # keys differ: another signature, another structure
    assert tree_structure({"a": Two(1, 2)}) != tree_structure({"b": Two(1, 2)})
    # children a plan does not take (a dict, a list, static fields): the walk, every time
    for tree in ({"a": {"b": 1}}, [[1, 2]], {"d": D(1, "cfg")}, Sub(a=Two(1, 2))):
        for _ in range(2):
            leaves, td = tree_flatten(tree)
            assert (leaves, td) == _walked(tree) and tree_unflatten(td, leaves) == tree
