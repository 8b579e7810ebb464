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


def test_a_tree_whose_keys_differ_is_refused_naming_them(xp, tmp_path):
    """Two trees of the same shape of structure and leaves but other keys: the leaves loaded by
    position into the other names (w_in's values into a, w_out's into b) without a word."""
    path = tmp_path / "ckpt.npz"
    checkpoint.save(path, {"w_in": xp.ones(3), "w_out": xp.zeros(3)})
    with pytest.raises(
        ValueError,
        match=r"only the file has \['w_in'\], \['w_out'\]; only `like` has \['a'\], \['b'\]",
    ):
        checkpoint.load(path, like={"a": xp.zeros(3), "b": xp.zeros(3)})
    with pytest.raises(ValueError, match=r"leaf 1 \(\['w_out'\]\) has shape \(3,\)"):
        checkpoint.load(path, like={"w_in": xp.zeros(3), "w_out": xp.zeros(4)})
    # named tuples and dataclasses are named by their fields
    s = state(xp)
    checkpoint.save(path, s)
    with pytest.raises(ValueError, match=r"\['params'\]\['layer'\]\.w\) has shape \(3, 2\)"):
        k = random.key(0)
        resized = {**state(xp), "params": {"layer": nn.Linear.init(k, 4, 2, xp=xp)}}
        resized["opt"] = s["opt"]
        checkpoint.load(path, like=resized)


def test_a_checkpoint_from_before_the_paths_were_saved_still_loads(xp, tmp_path):
    import json

    path = tmp_path / "ckpt.npz"
    s = state(xp)
    checkpoint.save(path, s)
    with np.load(path, allow_pickle=False) as f:
        arrays = {k: f[k] for k in f.files}
    meta = json.loads(str(arrays["__meta__"]))
    del meta["paths"]
    arrays["__meta__"] = np.asarray(json.dumps(meta))
    np.savez(path, **arrays)
    assert checkpoint.load(path, like=state(xp, seed=3))["step"] == 7
