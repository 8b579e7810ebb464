"""Checkpoints: round trip of params, optimizer state, step and key; atomic writes; clear errors
on a tree that does not match."""

from __future__ import annotations

import numpy as np
import pytest

import pycograd_xp
from pycograd_xp import checkpoint, nn, optim, random


def state(xp, seed=0):
    k = random.key(seed)
    params = {"layer": nn.Linear.init(k, 3, 2, xp=xp)}
    return {"params": params, "opt": optim.adam(1e-3).init(params), "step": 7, "key": k, "lr": 0.5}


def test_round_trip(xp, tmp_path):
    s = state(xp)
    path = tmp_path / "ckpt.npz"
    checkpoint.save(path, s)
    got = checkpoint.load(path, like=state(xp, seed=99))
    assert got["step"] == 7 and got["lr"] == 0.5 and got["key"] == s["key"]
    np.testing.assert_array_equal(
        np.asarray(pycograd_xp.unwrap(got["params"]["layer"].w)),
        np.asarray(pycograd_xp.unwrap(s["params"]["layer"].w)),
    )
    assert type(got["params"]["layer"].w) is xp.Array
    assert got["opt"]["count"] == 0 and isinstance(got["params"]["layer"], nn.Linear)
    with np.load(path, allow_pickle=False) as f:  # no pickle anywhere in the file
        assert "__meta__" in f.files


def test_atomic_write_keeps_the_old_file_on_failure(xp, tmp_path):
    path = tmp_path / "ckpt.npz"
    checkpoint.save(path, state(xp))
    before = path.read_bytes()
    with pytest.raises(TypeError, match="leaf .* is a object"):
        checkpoint.save(path, {"bad": object()})
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.npz"]  # no temporary left behind


def test_mismatched_tree_is_refused(xp, tmp_path):
    path = tmp_path / "ckpt.npz"
    checkpoint.save(path, state(xp))
    wrong = state(xp)
    wrong["extra"] = xp.ones(2)
    with pytest.raises(ValueError, match="holds the structure .* but .* was expected"):
        checkpoint.load(path, like=wrong)
    k = random.key(0)
    resized = {**state(xp), "params": {"layer": nn.Linear.init(k, 4, 2, xp=xp)}}
    resized["opt"] = optim.adam(1e-3).init(resized["params"])
    with pytest.raises(ValueError, match=r"shape \(3, 2\) .* in the file, but \(4, 2\)"):
        checkpoint.load(path, like=resized)
