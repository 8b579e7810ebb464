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
