"""Checkpoints: a pytree (parameters, optimizer state, step, random key, ...) in one ``.npz``
file, without pickle, written atomically.

``save(path, tree)`` stores every leaf as an array and the tree's structure as text;
``load(path, like)`` rebuilds the tree in the structure, namespaces and types of ``like`` (a
freshly initialized tree of the same kind) and refuses a file whose structure, shapes or
dtypes differ, saying where.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from .namespace._array import Array
from .random import Key
from .tree import tree_flatten, tree_unflatten

__all__ = ["load", "save"]


def _encode(leaf: Any, i: int) -> tuple[str, np.ndarray]:
    if isinstance(leaf, Array):
        return "array", np.asarray(leaf._data)
    if isinstance(leaf, Key):
        return "key", np.asarray(leaf.data, dtype=np.int64)
    if isinstance(leaf, bool | int | float):
        return type(leaf).__name__, np.asarray(leaf)
    if isinstance(leaf, np.ndarray):
        return "numpy", leaf
    raise TypeError(
        f"checkpoint.save: leaf {i} is a {type(leaf).__name__}; checkpoints hold "
        "arrays, Python numbers and random keys"
    )


def save(path: str | os.PathLike, tree: Any) -> None:
    """Write ``tree`` to ``path`` (an ``.npz`` file), replacing it atomically.

    Parameters
    ----------
    path : str or os.PathLike
        The file.
    tree : pytree
        Parameters, optimizer state, step, random key, ...: every leaf is stored as an array
        and the structure as text (no pickle).
    """
    leaves, td = tree_flatten(tree)
    kinds, arrays = [], {}
    for i, leaf in enumerate(leaves):
        kind, arr = _encode(leaf, i)
        kinds.append(kind)
        arrays[f"leaf_{i}"] = arr
    meta = json.dumps({"structure": repr(td), "kinds": kinds})
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, __meta__=np.asarray(meta), **arrays)  # type: ignore[arg-type]  # numpy's stub types **kwds as savez's own flags
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load(path: str | os.PathLike, like: Any) -> Any:
    """Read the tree saved at ``path`` in the shape of ``like``.

    Parameters
    ----------
    path : str or os.PathLike
        A file :func:`save` wrote.
    like : pytree
        A freshly initialized tree of the same kind: its structure, namespaces and types are the
        result's.

    Returns
    -------
    pytree
        The saved tree; arrays come back in the namespace of the corresponding leaf of ``like``.

    Raises
    ------
    ValueError
        If the file's structure, shapes or dtypes differ from ``like``'s, saying where.
    """
    like_leaves, td = tree_flatten(like)
    with np.load(path, allow_pickle=False) as f:
        meta = json.loads(str(f["__meta__"]))
        if meta["structure"] != repr(td):
            raise ValueError(
                f"checkpoint.load({str(path)!r}): the file holds the structure "
                f"{meta['structure']}, but {td!r} was expected; load it with a `like` tree of "
                "the same kind"
            )
        leaves = []
        for i, (kind, ref) in enumerate(zip(meta["kinds"], like_leaves, strict=True)):
            arr = f[f"leaf_{i}"]
            leaves.append(_decode(kind, arr, ref, i, path))
    return tree_unflatten(td, leaves)


def _decode(kind: str, arr: np.ndarray, ref: Any, i: int, path: Any) -> Any:
    if kind == "key":
        return Key(tuple(int(v) for v in arr))
    if kind in ("int", "float", "bool"):
        return {"int": int, "float": float, "bool": bool}[kind](arr)
    if kind == "numpy":
        return arr
    if not isinstance(ref, Array):
        raise ValueError(
            f"checkpoint.load({str(path)!r}): leaf {i} is an array in the file but "
            f"a {type(ref).__name__} in `like`"
        )
    out = ref._ns.asarray(arr)
    if out.shape != ref.shape or out.dtype != ref.dtype:
        raise ValueError(
            f"checkpoint.load({str(path)!r}): leaf {i} has shape {tuple(arr.shape)} and dtype "
            f"{arr.dtype} in the file, but {ref.shape} and {ref.dtype} in `like`"
        )
    return out
