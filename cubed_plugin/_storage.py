"""Where a run keeps what it writes and reads: local paths and fsspec URLs (``s3://``,
``gs://``, ``memory://``, ...) alike, for the training data, Cubed's ``work_dir`` and ``fit``'s
checkpoints.

Storage options (credentials, an endpoint) come the ways fsspec users give them: the cloud
SDK's own environment (``AWS_*``, ``GOOGLE_APPLICATION_CREDENTIALS``), fsspec's configuration
(``FSSPEC_S3='{"endpoint_url": ...}'``, ``~/.config/fsspec/s3.json``), which reaches every
process (Cubed's workers and its intermediate arrays, which Cubed 0.27 opens without
``Spec.storage_options``), or ``Spec.storage_options`` for what the plugin itself opens (the
data through :func:`open_zarr`, the checkpoints). The command line's ``--storage-option
KEY=VALUE`` sets fsspec's configuration (:func:`configure`).

Checkpoints (:class:`Checkpoints`) are atomic everywhere: a local directory gets
``checkpoint.npz`` replaced by a rename; elsewhere (an object store, where a rename is a copy)
each checkpoint is written under a key of its own, then a small pointer, ``checkpoint.json``,
naming it is written last: a reader follows the pointer, so it sees the previous checkpoint or
the new one whole, never half of one; a killed writer leaves at most an unreferenced payload,
removed by the next save.
"""

from __future__ import annotations

import io
import json
import os
import uuid
from pathlib import Path
from typing import Any

from pycograd_xp import checkpoint

# Reading a chunk from an object store (over HTTP) holds, beside Zarr's compressed bytes, the
# HTTP client's buffers of the body: the pieces as received and the bytes they are joined into,
# each the compressed chunk (at most the chunk, for data that does not compress), and the
# pieces, small blocks of the heap, are not returned to the system when freed
# (docs/calibration.md#remote-read-copies). Added to READ_COPIES for a chunk read so.
REMOTE_READ_COPIES = 2

POINTER = "checkpoint.json"  # an object store's pointer to its latest checkpoint
LOCAL_NAME = "checkpoint.npz"  # a local directory's checkpoint (replaced by a rename)


def is_url(path: Any) -> bool:
    """Whether ``path`` is an fsspec URL of a store other than the local disk."""
    s = str(path)
    return "://" in s and not s.startswith("file://")


def filesystem(path: str, storage_options: dict | None = None) -> tuple[Any, str]:
    """``(fs, path within fs)`` for a URL, as fsspec resolves it (its configuration applied)."""
    try:
        import fsspec
    except ImportError as e:  # pragma: no cover - fsspec comes with zarr
        raise ImportError(
            f"{path!r} is a URL: install fsspec and the store's filesystem (s3fs for s3://, "
            "gcsfs for gs://), e.g. pip install 'pycograd_xp[s3]'"
        ) from e
    return fsspec.core.url_to_fs(path, **(storage_options or {}))


def join(base: str, *parts: str) -> str:
    """``base`` and ``parts`` joined with ``/`` (a URL) or the local separator."""
    if is_url(base):
        return "/".join([base.rstrip("/"), *parts])
    return os.path.join(base, *parts)


def exists(path: str, storage_options: dict | None = None) -> bool:
    """Whether ``path`` (a local path or a URL) exists (for a Zarr store: its metadata)."""
    if not is_url(path):
        return os.path.exists(path)
    fs, p = filesystem(path, storage_options)
    return bool(fs.exists(p))


def is_zarr(path: str, storage_options: dict | None = None) -> bool:
    """Whether a Zarr array or group is stored at ``path`` (Zarr 3's or 2's metadata)."""
    return any(
        exists(join(path, meta), storage_options) for meta in ("zarr.json", ".zarray", ".zgroup")
    )


def remove(path: str, storage_options: dict | None = None) -> None:
    """Delete ``path`` and everything under it, if it exists."""
    if not is_url(path):
        import shutil

        shutil.rmtree(path, ignore_errors=True)
        return
    fs, p = filesystem(path, storage_options)
    try:
        fs.rm(p, recursive=True)
    except FileNotFoundError:
        pass


def size(path: str, storage_options: dict | None = None) -> int:
    """The bytes stored under ``path``."""
    if not is_url(path):
        total = 0
        for root, _, files in os.walk(path):
            for name in files:
                try:
                    total += os.lstat(os.path.join(root, name)).st_size
                except OSError:  # removed meanwhile
                    pass
        return total
    fs, p = filesystem(path, storage_options)
    try:
        return int(fs.du(p, total=True))
    except FileNotFoundError:
        return 0


def is_remote_array(target: Any) -> bool:
    """Whether a stored array (a ``zarr.Array``, or Cubed's lazily created intermediate array
    at a path or URL) is read from a store other than the local disk or memory: an fsspec
    store over a remote filesystem, an object store (obstore), a URL."""
    store = getattr(target, "store", None)
    if isinstance(store, str | os.PathLike):
        return is_url(store)
    while store is not None and hasattr(store, "_store") and not hasattr(store, "fs"):
        store = store._store  # a wrapper (cubed_plugin._row_chunks' view): the store it reads
    fs = getattr(store, "fs", None)
    if fs is not None:  # zarr's FsspecStore
        protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
        return protocol not in ("file", "local", "memory")
    return type(store).__name__ == "ObjectStore"  # zarr's obstore store: S3, GCS, Azure


def protocol_of(target: Any) -> str:
    """The protocol of a remote stored array's store (``"s3"``; see :func:`is_remote_array`)."""
    store = getattr(target, "store", None)
    if isinstance(store, str | os.PathLike):
        return str(store).split("://", 1)[0]
    while store is not None and hasattr(store, "_store") and not hasattr(store, "fs"):
        store = store._store
    fs = getattr(store, "fs", None)
    if fs is not None:
        return fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    return type(store).__name__


def open_zarr(url: str, *, spec: Any = None, storage_options: dict | None = None) -> Any:
    """``cubed.from_zarr`` on the Zarr array at ``url``, a local path or an fsspec URL, opened
    with ``storage_options`` (default: ``spec.storage_options``; Cubed 0.27's ``from_zarr``
    takes none and opens a URL with fsspec's configuration only).

    Parameters
    ----------
    url : str
        The array: ``"s3://bucket/X.zarr"``, ``"gs://..."``, a local directory.
    spec : cubed.Spec, optional
        The spec of the Cubed array (default: Cubed's).
    storage_options : dict, optional
        fsspec's options for the store (``{"endpoint_url": ..., "anon": True}``, ...).

    Returns
    -------
    cubed.Array
        The stored array, read chunk by chunk by the tasks that use it.
    """
    import cubed

    options = storage_options
    if options is None and spec is not None:
        options = spec.storage_options
    store: Any = url
    if is_url(url) and options:
        from zarr.storage import FsspecStore

        store = FsspecStore.from_url(url, storage_options=options, read_only=True)
    return cubed.from_zarr(store, spec=spec)


def configure(urls: list[str], options: dict) -> None:
    """Give ``options`` to fsspec for the protocols of ``urls`` (the command line's
    ``--storage-option``): in fsspec's configuration of this process and, as
    ``FSSPEC_<PROTOCOL>`` (fsspec's own variable), in the environment of the processes it
    starts, Cubed's workers included."""
    import fsspec.config

    for proto in sorted({u.split("://", 1)[0] for u in urls if is_url(u)}):
        merged = {**fsspec.config.conf.get(proto, {}), **options}
        fsspec.config.conf[proto] = merged
        os.environ[f"FSSPEC_{proto.upper()}"] = json.dumps(merged)


def parse_option(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` as fsspec takes it: the value read as JSON when it is JSON (``true``,
    ``3``, ``{"endpoint_url": "http://..."}``), else the string."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(
            f"--storage-option {text!r} is not KEY=VALUE (e.g. anon=true, "
            "endpoint_url=http://127.0.0.1:9000)"
        )
    try:
        return key.strip(), json.loads(value)
    except json.JSONDecodeError:
        return key.strip(), value


class Checkpoints:
    """``fit``'s ``checkpoint_dir`` (a local directory or a URL): the latest checkpoint, read
    and replaced atomically (the module's docstring says how).

    Parameters
    ----------
    directory : str or os.PathLike
        Where the checkpoints go; made if missing.
    storage_options : dict, optional
        fsspec's options for a URL.
    """

    def __init__(self, directory: str | os.PathLike, storage_options: dict | None = None):
        self.directory = str(directory)
        self.remote = is_url(self.directory)
        self.options = storage_options or {}
        if self.remote:
            self.fs, self.root = filesystem(self.directory, self.options)
            self.fs.makedirs(self.root, exist_ok=True)
        else:
            Path(self.directory).mkdir(parents=True, exist_ok=True)

    def __str__(self) -> str:
        """The checkpoint a run resumes from (a local file, or an object store's pointer)."""
        return join(self.directory, POINTER if self.remote else LOCAL_NAME)

    def _key(self, name: str) -> str:
        return f"{self.root.rstrip('/')}/{name}"

    def _latest(self) -> str | None:
        """The key of the checkpoint the pointer names (a directory copied from a local one:
        its ``checkpoint.npz``), None when there is none."""
        try:
            pointer = json.loads(self.fs.cat_file(self._key(POINTER)))
        except FileNotFoundError:
            legacy = self._key(LOCAL_NAME)
            return legacy if self.fs.exists(legacy) else None
        return self._key(str(pointer["payload"]))

    def exists(self) -> bool:
        """Whether the directory holds a checkpoint."""
        if not self.remote:
            return (Path(self.directory) / LOCAL_NAME).exists()
        return self._latest() is not None

    def load(self, like: Any) -> Any:
        """The latest checkpoint in the shape of ``like`` (:func:`pycograd_xp.checkpoint.load`)."""
        if not self.remote:
            return checkpoint.load(Path(self.directory) / LOCAL_NAME, like)
        key = self._latest()
        if key is None:
            raise FileNotFoundError(f"no checkpoint in {self.directory!r}")
        return checkpoint.load(io.BytesIO(self.fs.cat_file(key)), like)

    def save(self, tree: Any) -> None:
        """Replace the latest checkpoint by ``tree``, atomically."""
        if not self.remote:
            checkpoint.save(Path(self.directory) / LOCAL_NAME, tree)
            return
        buf = io.BytesIO()
        checkpoint.save(buf, tree)
        previous = self._latest()
        name = f"checkpoint-{uuid.uuid4().hex}.npz"
        self.fs.pipe_file(self._key(name), buf.getvalue())  # the payload, under a new key
        self.fs.pipe_file(self._key(POINTER), json.dumps({"payload": name}).encode())  # last
        # the payloads no pointer names any more (a reader that followed the previous pointer
        # may still be reading its payload: kept until the next save)
        keep = {self._key(name), previous}
        for key in self.fs.glob(self._key("checkpoint-*.npz")):
            if key not in keep:
                self.fs.rm_file(key)
