"""Checkpoints: a pytree (parameters, optimizer state, step, random key, ...) in one ``.npz``
file, without pickle, written atomically.

``save(path, tree)`` stores every leaf as an array and the tree's structure as text;
``load(path, like)`` rebuilds the tree in the structure, namespaces and types of ``like`` (a
freshly initialized tree of the same kind) and refuses a file whose structure, shapes or
dtypes differ, saying where.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ._exports import module_dir as _module_dir
from .namespace._array import Array
from .random import Key
from .tree import TreeDef, tree_flatten, tree_unflatten

__all__ = ["load", "save"]


# dir() lists the public names only (what completion offers)
__dir__ = _module_dir(globals())


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


def save(path: str | os.PathLike | BinaryIO, tree: Any) -> None:
    """Write ``tree`` to ``path`` (an ``.npz`` file), replacing it atomically.

    Parameters
    ----------
    path : str, os.PathLike or binary file
        The file, written in NumPy's ``.npz`` format at exactly this path (no suffix added,
        unlike ``numpy.savez``): ``load(path)`` reads it back. A local file is written beside
        and renamed into place; an fsspec URL (``"s3://bucket/run/ckpt.npz"``; fsspec's
        configuration and the store's environment give the credentials) is written in one
        put of the whole file, which an object store shows whole or not at all. An open binary
        file (an ``io.BytesIO``) is written as it is: making that atomic is the caller's part
        (``cubed_plugin``'s checkpoints on object storage write it under a key of its own,
        then a pointer to it).
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
    meta = json.dumps({"structure": repr(td), "paths": _paths(td), "kinds": kinds})
    if hasattr(path, "write"):
        np.savez(path, __meta__=np.asarray(meta), **arrays)  # type: ignore[arg-type]  # numpy's stub types **kwds as savez's own flags
        return
    if _is_url(path):  # one PUT of the whole file: an object store shows all of it or none
        buf = io.BytesIO()
        np.savez(buf, __meta__=np.asarray(meta), **arrays)  # type: ignore[arg-type]  # as above
        fs, key = _filesystem(str(path), "save")
        fs.pipe_file(key, buf.getvalue())
        return
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, __meta__=np.asarray(meta), **arrays)  # type: ignore[arg-type]  # numpy's stub types **kwds as savez's own flags
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load(path: str | os.PathLike | BinaryIO, like: Any) -> Any:
    """Read the tree saved at ``path`` in the shape of ``like``.

    Parameters
    ----------
    path : str, os.PathLike or binary file
        A file :func:`save` wrote: a path, an fsspec URL, or the file open for reading.
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
    if _is_url(path):
        fs, key = _filesystem(str(path), "load")
        path = io.BytesIO(fs.cat_file(key))
    with np.load(path, allow_pickle=False) as f:
        meta = json.loads(str(f["__meta__"]))
        want = _paths(td)
        have = meta.get("paths")  # None: a file from before the paths were saved
        if meta["structure"] != repr(td) or (have is not None and have != want):
            raise ValueError(
                f"checkpoint.load({str(path)!r}): the file holds the structure "
                f"{meta['structure']}, but {td!r} was expected"
                + (_path_difference(have, want) if have is not None else "")
                + "; load it with a `like` tree of the same kind"
            )
        leaves = []
        for i, (kind, ref) in enumerate(zip(meta["kinds"], like_leaves, strict=True)):
            arr = f[f"leaf_{i}"]
            leaves.append(_decode(kind, arr, ref, f"leaf {i} ({want[i]})", path))
    return tree_unflatten(td, leaves)


def _is_url(path: Any) -> bool:
    """Whether ``path`` is an fsspec URL of a store other than the local disk."""
    return isinstance(path, str) and "://" in path and not path.startswith("file://")


def _filesystem(url: str, caller: str) -> tuple[Any, str]:
    try:
        import fsspec
    except ImportError as e:
        raise ImportError(
            f"checkpoint.{caller}({url!r}): a URL needs fsspec and the store's filesystem "
            "(s3fs for s3://, gcsfs for gs://): pip install 'pycograd-xp[s3]'"
        ) from e
    return fsspec.core.url_to_fs(url)


def _decode(kind: str, arr: np.ndarray, ref: Any, leaf: str, path: Any) -> Any:
    if kind == "key":
        return Key(tuple(int(v) for v in arr))
    if kind in ("int", "float", "bool"):
        return {"int": int, "float": float, "bool": bool}[kind](arr)
    if kind == "numpy":
        return arr
    if not isinstance(ref, Array):
        raise ValueError(
            f"checkpoint.load({str(path)!r}): {leaf} is an array in the file but "
            f"a {type(ref).__name__} in `like`"
        )
    out = ref._ns.asarray(arr)
    if out.shape != ref.shape or out.dtype != ref.dtype:
        raise ValueError(
            f"checkpoint.load({str(path)!r}): {leaf} has shape {tuple(arr.shape)} and dtype "
            f"{arr.dtype} in the file, but {ref.shape} and {ref.dtype} in `like`"
        )
    return out


def _paths(td: TreeDef) -> list[str]:
    """Where each leaf of a tree of structure ``td`` sits, as an index expression from the root
    (``['w']``, ``[0].mu['b']``): a checkpoint records them, so that a tree whose keys differ
    is refused even where its structure and shapes match (its leaves would load by position
    into other names)."""
    out: list[str] = []
    _collect_paths(td, "", out)
    return out


def _collect_paths(td: TreeDef, prefix: str, out: list[str]) -> None:
    if td.kind == "leaf":
        out.append(prefix or "(the root)")
        return
    if td.kind == "dict":
        names = [f"[{k!r}]" for k in td.meta]
    elif td.kind == "namedtuple":
        names = [f".{f}" for f in td.meta._fields]
    elif td.kind == "dataclass":
        names = [f".{f}" for f in td.meta[1]]
    else:  # tuple, list
        names = [f"[{j}]" for j in range(len(td.children))]
    for name, child in zip(names, td.children, strict=True):
        _collect_paths(child, prefix + name, out)


def _path_difference(have: list[str], want: list[str]) -> str:
    """What the file's leaves and ``like``'s differ in, by path."""
    only_file = [p for p in have if p not in want]
    only_like = [p for p in want if p not in have]
    parts = []
    if only_file:
        parts.append(f"only the file has {', '.join(only_file[:5])}")
    if only_like:
        parts.append(f"only `like` has {', '.join(only_like[:5])}")
    return " (" + "; ".join(parts) + ")" if parts else ""
