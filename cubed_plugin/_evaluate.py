"""Evaluation without gradients on chunked data: a model's predictions (:func:`predict`) and the
sums over rows of per-row functions (:func:`row_sums`: ``fit``'s validation loss and metrics).

Both are one task per row chunk (Cubed's ``blockwise``) running the eager NumPy namespace on
that chunk, as one-pass mode's training tasks do, but forward only: no tape is recorded (the
parameters are plain arrays), so a task holds the chunk, the model's activations and its
output. Each task declares, as its extra projected memory, what ``pycograd_xp.memory`` projects
for the functions on one chunk, so Cubed's plan, and the check of it against ``allowed_mem``
before anything runs, counts what the task holds. A row chunk whose evaluation does not fit a
task's budget whole is evaluated in row slices inside its task (the most rows that fit: one
slice's activations at a time), and when not even one row fits the call is refused before
anything runs, naming what the chunk needs and the way out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import pycograd_xp as pg
from pycograd_xp import memory
from pycograd_xp.memory import MemoryLimitError, format_byte_pair, format_bytes
from pycograd_xp.tree import tree_flatten, tree_unflatten

from .steps import check_per_row, check_row_chunks, one_pass_fan_in

__all__ = ["predict", "row_sums"]

# the eager namespace every task computes in (as one-pass mode's: steps._NP)
_NP = pg.namespace(np)


def _host(params: Any) -> Any:
    return pg.tree_map(lambda a: np.asarray(pg.unwrap(a)), params)


def _chunk_rows(x: Any) -> int:
    return int(max(x.chunks[0])) if x.chunks[0] else 0


def _chunk_spec(x: Any, rows: int, cast: np.dtype | None = None) -> Any:
    """A chunk of ``rows`` rows of ``x`` as the task computes with it: in ``cast`` when the task
    casts it (``cubed_plugin._casting``)."""
    dtype = np.dtype(str(x.dtype)) if cast is None else cast
    return memory.spec((rows, *(int(s) for s in x.shape[1:])), dtype.name)


def _check_rows(data: Sequence[Any], where: str) -> tuple[int, ...]:
    """The row chunks of ``data`` (Cubed arrays chunked alike along their rows, whole along the
    other axes), or a ValueError naming the argument that is not."""
    import cubed

    if not data:
        raise ValueError(f"{where}: no data; give the data arrays, e.g. (X, y)")
    for i, x in enumerate(data):
        if not isinstance(pg.unwrap(x), cubed.Array):
            raise TypeError(
                f"{where}: data argument {i} is a {type(x).__qualname__}, not a Cubed array; "
                "give cubed.from_zarr(path, spec=spec), or cubed.from_array(x, chunks=..., "
                "spec=spec) for an array in memory"
            )
    return check_row_chunks(data, where)


def _fitting_rows(
    project: Callable[[int], int],
    data: Sequence[Any],
    out_bytes: Callable[[int], int],
    where: str,
    more_inputs: Sequence[int] = (),
) -> tuple[int | None, int]:
    """(slice rows, extra bytes): the rows each task evaluates at a time (None: its whole chunk)
    and the projection of that evaluation, so that Cubed's projected task memory (reserved, the
    chunk of every argument with its read buffers, ``more_inputs`` chunks of other arguments,
    the extra, the output chunk with its write buffers) fits ``allowed_mem``; a
    :class:`MemoryLimitError` when not even one row does."""
    from ._cubed_seam import projected_mem

    spec = data[0].spec
    rows = _chunk_rows(data[0])
    inputs = [_chunk_rows(x) * _row_bytes(x) for x in data] + list(more_inputs)
    allowed = int(spec.allowed_mem)

    def task(k: int) -> tuple[int, int]:
        extra = project(k)
        return projected_mem(spec, inputs, extra, out_bytes(rows)), extra

    need, extra = task(rows)
    if need <= allowed or rows <= 1:
        if need > allowed:
            _refuse(need, allowed, spec, rows, where)
        return None, extra
    lo, hi, best = 0, rows, None  # a slice of hi rows does not fit; of lo rows (0: none) does
    while hi - lo > 1:
        mid = (lo + hi) // 2
        need_mid, extra_mid = task(mid)
        if need_mid <= allowed:
            lo, best = mid, extra_mid
        else:
            hi = mid
    if best is None:
        _refuse(task(1)[0], allowed, spec, rows, where)
    assert best is not None
    return lo, best


def _row_bytes(x: Any) -> int:
    return (
        int(np.prod([int(s) for s in x.shape[1:]], dtype=np.int64))
        * np.dtype(str(x.dtype)).itemsize
    )


def _refuse(need: int, allowed: int, spec: Any, rows: int, where: str) -> None:
    need_s, have = format_byte_pair(need, allowed)
    raise MemoryLimitError(
        f"{where}: a task evaluating a row chunk of {rows:,} rows needs {need_s} even one row "
        f"at a time (reading the chunk with its buffers and one row's evaluation), over "
        f"allowed_mem {have} (of which reserved_mem "
        f"{format_bytes(int(spec.reserved_mem or 0))}); use smaller row chunks "
        "(rechunk the data) or a larger allowed_mem"
    )


def row_sums(
    fns: Sequence[Callable[..., Any]],
    params: Any,
    data: Sequence[Any],
    where: str = "row_sums",
    loss: Any = None,
) -> Any:
    """The lazy float64 vector of ``sum over rows of f(params, *rows)`` for each ``f`` of
    ``fns`` (each giving one value per row: a per-row loss, a metric), over the row chunks of
    ``data``, in one read of the data: one task per chunk computes every function's sum (in
    row slices when the chunk does not fit whole, see the module), then a tree sum.

    The values of each function are summed in float64 (booleans and integers too: a per-row
    "correct" flag sums to the count). Forward only: nothing is differentiated.

    Data stored as float16, and the arguments ``loss`` (a ``row_loss``) declares cast, are cast
    to the parameters' dtype in each task after the read, as in training
    (``cubed_plugin._casting``); the projection counts the copy."""
    import cubed

    from ._casting import casts, held_while_cast
    from ._cubed_seam import blockwise

    rows = _check_rows(data, where)
    host = _host(params)
    targets = casts(loss, host, [x.dtype for x in data])
    leaves, td = tree_flatten(host)
    width = len(fns)
    param_specs = pg.tree_map(lambda a: memory.spec(a.shape, a.dtype.name), host)

    def sums(p: Any, *chunk: Any) -> Any:
        xp = chunk[0].__array_namespace__()
        out = []
        for f in fns:
            v = f(p, *chunk)
            check_per_row(v, chunk, f)  # on abstract arrays: before anything runs
            out.append(xp.sum(xp.astype(v, xp.float64)))
        return out

    held = held_while_cast([pg.unwrap(x) for x in data], targets)  # the stored chunks cast

    def project(k: int) -> int:
        specs = [_chunk_spec(x, k, dt) for x, dt in zip(data, targets, strict=True)]
        return memory.project(sums, param_specs, *specs, argnums=()).peak_bytes + held

    # each task also reads its chunk of row numbers (int64)
    slice_rows, extra = _fitting_rows(project, data, lambda n: 8 * width, where, [8 * rows[0]])
    starts = list(np.cumsum((0,) + rows))

    def block(*chunks: np.ndarray) -> np.ndarray:
        *data_chunks, row_numbers = chunks
        n = starts.index(int(row_numbers[0]))
        out = _chunk_sums(fns, td, leaves, data_chunks, n, rows[0], slice_rows, targets)
        return out.reshape(1, width)

    args: list[Any] = []
    for x in data:
        x = pg.unwrap(x)
        args += [x, "i" + "jklmnop"[: x.ndim - 1]]
    # the row numbers last, as in one-pass mode's step (steps.one_pass_step)
    args += [cubed.arange(sum(rows), chunks=rows[0], spec=data[0].spec), "i"]
    parts = blockwise(
        block,
        "iz",
        *args,
        dtype=np.float64,
        adjust_chunks={"i": 1},
        new_axes={"z": width},
        extra_projected_mem=extra,
    )
    return cubed.sum(parts, axis=0, split_every=one_pass_fan_in(len(rows)))


def _chunk_sums(
    fns: Sequence[Callable[..., Any]],
    td: Any,
    leaves: Sequence[np.ndarray],
    chunks: Sequence[np.ndarray],
    number: int,
    chunk_rows: int,
    slice_rows: int | None,
    targets: Sequence[Any] = (),
) -> np.ndarray:
    """One task of :func:`row_sums`: each function's sum over the chunk, in float64, computed
    in slices of ``slice_rows`` rows (None: whole), each slice cast to ``targets`` (each data
    argument's compute dtype or None). An error names the chunk and its rows."""
    from ._casting import cast_chunk

    kinds = list(targets) + [None] * (len(chunks) - len(targets))
    p = tree_unflatten(td, [_NP.asarray(leaf) for leaf in leaves])
    n = int(chunks[0].shape[0]) if chunks and np.ndim(chunks[0]) else 0
    step = n if slice_rows is None else max(1, slice_rows)
    total = np.zeros(len(fns), dtype=np.float64)
    first = number * chunk_rows
    for start in range(0, max(n, 1), max(step, 1)):
        part = [
            _NP.asarray(cast_chunk(c[start : start + step], dt))
            for c, dt in zip(chunks, kinds, strict=True)
        ]
        try:
            for j, f in enumerate(fns):
                v = f(p, *part)
                total[j] += float(_NP.sum(_NP.astype(v, _NP.float64)))
        except Exception as e:  # said where, then raised as it is
            e.add_note(f"(in the task of row chunk {number}: rows {first} to {first + n - 1})")
            raise
        del part
    return total


def predict(model: Callable[..., Any], params: Any, X: Any, *, dtype: Any = None) -> Any:
    """``model(params, X_rows)`` applied to every row chunk of ``X``: a lazy Cubed array.

    ``model`` runs on NumPy (pycograd_xp's eager namespace) with one row chunk at a time, forward
    only, as ``fit``'s one-pass tasks run a loss. Each task's memory is projected from
    ``model`` (``pycograd_xp.memory.project``) and declared to Cubed, so Cubed's plan counts it
    and every task is checked against ``allowed_mem`` before anything runs; a chunk too large
    to evaluate whole is evaluated in row slices inside its task (the most rows that fit), and
    when not even one row fits the call raises :class:`~pycograd_xp.memory.MemoryLimitError`.
    Write the result with ``cubed.to_zarr(predictions, store)`` (a path or a URL), or compute
    it (``cubed_plugin.compute``).

    Parameters
    ----------
    model : callable
        ``model(params, X_rows)``: one output per row (its first axis the rows), e.g. logits
        of shape ``(rows, classes)`` or a prediction of shape ``(rows,)``.
    params : pytree of arrays
        The parameters (NumPy arrays or arrays of an eager namespace), e.g. ``fit(...).params``.
    X : cubed.Array
        The inputs, chunked along their rows and whole along the other axes (e.g.
        ``cubed.from_zarr``); arrays of ``namespace(cubed)`` too.
    dtype : dtype, optional
        The output's dtype (None: the model's, found by running it on zero rows).

    ``X`` stored as float16 is cast to the parameters' dtype in each task after the read (the
    copy projected), as in training (``cubed_plugin._casting``).

    Returns
    -------
    cubed.Array
        Rows by whatever a row of the model's output is, chunked as ``X``'s rows.

    Raises
    ------
    MemoryLimitError
        When a task cannot evaluate one row within ``allowed_mem``.
    ValueError
        When the model does not give one output per row, or ``X`` is chunked along an axis
        other than its rows.

    Examples
    --------
    >>> import tempfile
    >>> import numpy as np, cubed, cubed.array_api as cxp
    >>> from cubed_plugin import predict
    >>> spec = cubed.Spec(tempfile.mkdtemp(), allowed_mem="200MB", reserved_mem="100MB")
    >>> X = cxp.asarray(np.arange(12.0).reshape(6, 2), chunks=(4, 2), spec=spec)
    >>> out = predict(lambda p, x: x @ p["w"], {"w": np.array([1.0, -1.0])}, X)
    >>> out.shape, out.chunks
    ((6,), ((4, 2),))
    >>> np.asarray(out.compute())
    array([-1., -1., -1., -1., -1., -1.])
    """
    from ._cubed_seam import blockwise

    where = "predict"
    X = pg.unwrap(X)
    rows = _check_rows((X,), where)
    host = _host(params)
    p = pg.tree_map(_NP.asarray, host)
    from ._casting import cast_chunk, casts, held_while_cast

    (target,) = casts(None, host, [X.dtype])  # float16 inputs: computed in the parameters'
    held = held_while_cast([X], [target])
    computed = np.dtype(str(X.dtype)) if target is None else target
    probe = _NP.zeros((0, *X.shape[1:]), dtype=getattr(_NP, computed.name))
    out0 = np.asarray(pg.unwrap(model(p, probe)))
    if out0.ndim < 1 or out0.shape[0] != 0:
        raise ValueError(
            f"predict: the model gives shape {out0.shape} for 0 rows; it must give one output "
            "per row (its first axis the rows)"
        )
    out_dtype = np.dtype(dtype) if dtype is not None else out0.dtype
    out_row = int(np.prod(out0.shape[1:], dtype=np.int64)) * out_dtype.itemsize
    param_specs = pg.tree_map(lambda a: memory.spec(a.shape, a.dtype.name), host)

    def project(k: int) -> int:
        # the output chunk is counted by Cubed; a sliced task also holds the output it fills
        filled = rows[0] * out_row if k < rows[0] else 0
        chunk = _chunk_spec(X, k, target)
        return memory.project(model, param_specs, chunk, argnums=()).peak_bytes + filled + held

    slice_rows, extra = _fitting_rows(project, (X,), lambda n: n * out_row, where)

    def block(x: np.ndarray) -> np.ndarray:
        n = int(x.shape[0])
        if slice_rows is None or slice_rows >= n:
            return np.asarray(pg.unwrap(model(p, _NP.asarray(cast_chunk(x, target)))), out_dtype)
        out = np.empty((n, *out0.shape[1:]), dtype=out_dtype)
        for start in range(0, n, slice_rows):
            out[start : start + slice_rows] = np.asarray(
                pg.unwrap(model(p, _NP.asarray(cast_chunk(x[start : start + slice_rows], target))))
            )
        return out

    index = "i" + "jklmnopq"[: X.ndim - 1]
    out_index = "i" + "rstuvw"[: out0.ndim - 1]
    return blockwise(
        block,
        out_index,
        X,
        index,
        dtype=out_dtype,
        new_axes={c: int(n) for c, n in zip(out_index[1:], out0.shape[1:], strict=True)},
        extra_projected_mem=extra,
    )
