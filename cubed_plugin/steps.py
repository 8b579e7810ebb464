"""Loss and gradients of a step on chunked data, in two modes.

- **Graph mode**: the loss written against ``namespace(cubed)``; forward and backward are lazy
  Cubed operations, loss and every gradient computed in one plan. General; the backward reads
  the residual inputs from storage again.
- **One-pass mode**, for losses that are means or sums over independent rows (declared with
  :func:`row_loss`): one task per row-chunk runs the eager NumPy namespace on that chunk,
  forward and backward, and returns its partial loss and gradients (one small row), followed by
  a sum: each chunk of data is read once. The task declares to Cubed, as its extra projected
  memory, what ``pycograd_xp.memory`` projects for one chunk's step, so Cubed's own check is
  sound.

Both give the gradient of the same function: the mean (or sum) over rows of the per-row loss.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import pycograd_xp as pg
from pycograd_xp import memory
from pycograd_xp.tree import tree_flatten, tree_unflatten

# the NumPy namespace each task of one-pass mode computes in, built when this module is imported
# (0.06 s): the workers of ``measuring_processes`` are forked from a server that imported it
_NP = pg.namespace(np)


@dataclass(frozen=True)
class RowLoss:
    """A loss that is a mean (or sum) over independent rows (made by :func:`row_loss`).

    ``per_row(params, *rows)`` gives one loss per row (a vector), in any namespace. Calling it,
    ``loss(params, *data)``, gives the reduced loss.

    Parameters
    ----------
    per_row : callable
        ``per_row(params, *rows) -> losses of shape (rows,)``.
    reduction : {"mean", "sum"}, default "mean"
        How the rows' losses are reduced.
    penalty : callable, optional
        ``penalty(params) -> scalar`` added to the reduced loss (once, not per row:
        :mod:`cubed_plugin.penalties`).
    cast : tuple of int, default ()
        The data arguments computed in the parameters' floating dtype whatever their stored
        dtype (``cubed_plugin._casting``; float16 data always is).
    """

    per_row: Callable[..., Any]
    reduction: str = "mean"
    penalty: Callable[[Any], Any] | None = None
    cast: tuple[int, ...] = ()

    @property
    def __name__(self) -> str:  # what grad's errors and the ops' labels call the loss
        return str(getattr(self.per_row, "__name__", "row_loss"))

    def __call__(self, params: Any, *data: Any) -> Any:
        from ._casting import casts

        targets = casts(self, params, [getattr(x, "dtype", "float64") for x in data])
        data = tuple(
            x if dt is None else _astype(x, dt) for x, dt in zip(data, targets, strict=True)
        )
        losses = self.per_row(params, *data)
        check_per_row(losses, data, self.per_row)
        xp = losses.__array_namespace__()
        total = xp.mean(losses) if self.reduction == "mean" else xp.sum(losses)
        return total if self.penalty is None else total + self.penalty(params)


def _astype(x: Any, dtype: np.dtype) -> Any:
    """``x`` (an array of any namespace) as ``dtype``, through its namespace."""
    xp = x.__array_namespace__()
    return xp.astype(x, getattr(xp, dtype.name))


def check_per_row(losses: Any, rows: Sequence[Any], per_row: Callable[..., Any]) -> None:
    """Refuse a per-row loss that is not one value per row of ``rows`` (the data arguments,
    rows along their first axis): labels of shape (n, 1) against predictions of shape (n,)
    broadcast to (n, n), whose sum is a wrong loss, not an error."""
    ndim: int = getattr(rows[0], "ndim", 0) if rows else 0
    n = int(rows[0].shape[0]) if ndim else None
    shape: tuple = tuple(getattr(losses, "shape", ()))
    if n is not None and shape != (n,):
        name = getattr(per_row, "__name__", "the loss")
        hint = (
            f"; a data argument of shape ({n}, 1) broadcasts against ({n},) to ({n}, {n}): "
            f"give it shape ({n},)"
            if shape == (n, n)
            else ""
        )
        raise ValueError(
            f"row_loss {name}: the per-row loss has shape {shape} for {n} rows; it must be "
            f"one loss per row, shape ({n},){hint}"
        )


def row_loss(
    per_row: Callable[..., Any] | None = None,
    *,
    reduction: str = "mean",
    penalty: Callable[[Any], Any] | None = None,
    cast: Sequence[int] = (),
) -> Any:
    """Declare ``per_row(params, *rows) -> losses of shape (rows,)`` row-separable, plus an
    optional ``penalty(params)`` on the parameters.

    A decorator, with or without arguments: the training driver (``fit``) may then use the
    one-pass mode. Calling the loss, and ``fit`` before anything runs, check that ``per_row``
    gives one loss per row, shape ``(rows,)``, and raise a ValueError otherwise: labels of
    shape ``(rows, 1)`` against predictions of shape ``(rows,)`` broadcast to a
    ``(rows, rows)`` matrix, whose mean is a wrong loss.

    The loss is ``reduction(per_row(params, *data)) + penalty(params)``. In one-pass mode the
    tasks compute the rows' sums only and ``fit``'s driver adds the penalty's value and
    gradient once per step, eagerly on the parameters (one pass over the data per step still);
    graph mode and a direct call compute the whole expression.

    Parameters
    ----------
    per_row : callable, optional
        The per-row loss (None: ``row_loss(reduction=...)`` returns the decorator).
    reduction : {"mean", "sum"}, default "mean"
        How the rows' losses are reduced.
    penalty : callable, optional
        ``penalty(params) -> scalar``, Array API code on the parameters, e.g.
        ``cubed_plugin.penalties.l2(1.0, on=lambda p: p["w"])``; a
        :class:`~cubed_plugin.penalties.Penalty` marked non-smooth (``penalties.l1``) is
        refused by ``optim.lbfgs``. scikit-learn's ``LogisticRegression(C=C)`` objective is
        ``row_loss(lambda p, X, y: C * logloss(p, X, y), reduction="sum",
        penalty=l2(1.0, on=lambda p: p["w"]))``.
    cast : sequence of int, default ()
        The positions among the data arguments (0: the first after the parameters) of those
        computed in the parameters' floating dtype whatever they are stored as: each task casts
        its chunk after reading it, and its projection counts the copy (integer-coded features
        such as uint8 images; labels and token ids stay integers unless named). Data stored as
        float16 is always cast so (the standard has no float16).

    Returns
    -------
    RowLoss
        The loss (a decorator making one, without ``per_row``).

    Raises
    ------
    ValueError
        If ``reduction`` is not "mean" or "sum".
    TypeError
        If ``penalty`` is not callable.

    Examples
    --------
    >>> from cubed_plugin import row_loss
    >>> @row_loss
    ... def squared_error(params, X, y):
    ...     return (X @ params["w"] - y) ** 2
    >>> squared_error.reduction
    'mean'
    """
    if reduction not in ("mean", "sum"):
        raise ValueError(f"row_loss: reduction must be 'mean' or 'sum', got {reduction!r}")
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in cast):
        raise TypeError(
            f"row_loss: cast must be the positions of data arguments (ints), got {cast!r}"
        )
    if penalty is not None and not callable(penalty):
        raise TypeError(
            f"row_loss: penalty must be a function of the parameters (penalty(params) -> "
            f"scalar, e.g. cubed_plugin.penalties.l2(1.0)), got {penalty!r}"
        )
    kept = tuple(cast)
    if per_row is None:
        return lambda f: RowLoss(f, reduction, penalty, kept)
    return RowLoss(per_row, reduction, penalty, kept)


def _host(tree: Any) -> Any:
    """Parameters as NumPy arrays (from our arrays of any eager namespace, or NumPy's)."""
    return pg.tree_map(lambda a: np.asarray(pg.unwrap(a)), tree)


def graph_fusion() -> Any:
    """The ``optimize_function`` graph mode computes with.

    1. Cheap elementwise producers with several consumers (up to eight) are copied into each
       consumer (:mod:`cubed_plugin._fusion`): Cubed fuses an op only into a single consumer,
       and a reverse-mode graph fans out everywhere (residuals read by forward and backward,
       cotangents handed to every branch of a sum), so those arrays were written to storage
       and read back.
    2. Cubed's multiple-input fusion, allowed 32 source arrays and 80 input blocks per fused
       task (defaults 4 and 10): the backward chains elementwise rules that read the forward
       residuals again, which overran the defaults (logistic regression, 400,000 x 100 rows in
       20 chunks: 274 tasks with the defaults, 139 with (32, 80), no fewer beyond).
    3. A producer is never fused into an op that reads several of its blocks per task when it
       is heavy (a matmul's partial products over the data) or would read over 1/16 of the
       task's budget, and every fused task's projection counts what it holds as Cubed runs it
       (all its input blocks at once); Cubed's own fused projection fell short of measured
       task peaks (``_fusion.multi_block_consumers``, ``_fusion.project_fused``).
    4. Each fused task opens each input array once and reads each input block once
       (``apply_blockwise_read_once``): the copies of step 1 read the same residual.

    Measured on that logistic regression (``benchmarks/bench_cubed.py``): 97 tasks and
    1.17-1.41x a hand-written Cubed gradient with step 2 alone; 63 tasks and 0.94x with all
    four (least squares 0.94x). Measured task peaks stay within the projections (processes
    executor, ``tests/test_cubed_training.py``), and the plan is checked against
    ``allowed_mem`` with this optimizer before it runs.

    Every public way to compute our arrays on Cubed uses it by default
    (``cubed_plugin.compute``, ``plan``, ``check``, ``fit`` in both modes,
    ``cubed_plugin.memory.project``/``plan_rows``, the command line). It is marked ``sound``
    (its projections count what a task holds); ``cubed_plugin.check`` warns, op by op, where a
    plan made with another optimizer projects less than that."""
    from functools import partial

    from ._fusion import duplicating_optimizer, single_block_fusion

    fuse = duplicating_optimizer(
        partial(single_block_fusion, max_total_source_arrays=32, max_total_num_input_blocks=80)
    )

    def optimize(dag: Any, array_names: Any) -> Any:
        return count_reads(fuse(dag, array_names=array_names))

    optimize.sound = True  # type: ignore[attr-defined]
    return optimize


# Reading one stored chunk holds three times the chunk (Zarr's compressed bytes, its decoded
# buffer, the array Cubed copies it into: docs/calibration.md#read-copies); Cubed's
# blockwise projection counts two copies of each input chunk, and nothing of it in its fusion.
READ_COPIES = 3


def read_peak(dag: Any, op: str) -> int:
    """What a task of ``op`` (an op of the optimized ``dag``) holds while it reads its stored
    blocks: reserved memory, every stored block it reads, and the buffers of the two largest
    reads, since a read's buffers can still be held while the next read runs
    (docs/calibration.md#read-copies: Zarr's pool threads let go of them only once they next
    hold the GIL); 0 for an op that reads nothing stored."""
    from ._cubed_seam import is_blockwise, is_stored, node_op
    from ._fusion import _blocks_read, _nbytes, apply_blockwise_read_once

    po = node_op(dag, op)
    if not is_blockwise(po, apply_blockwise_read_once):
        return 0
    blocks = _blocks_read(po)
    stored = {a for a in set(po.source_array_names) if is_stored(dag, a)}
    if not stored:
        return 0
    held = sum(_nbytes(dag, a) * blocks[a] for a in stored)
    # each block read once (apply_blockwise_read_once), in any order: the two largest reads'
    # buffers are the most that one read and the read before it can hold together
    reads = sorted((_read_buffers(dag, a) for a in stored for _ in range(blocks[a])), reverse=True)
    return po.reserved_mem + held + sum(reads[:2])


def _read_buffers(dag: Any, array: str) -> int:
    """The buffers beside the chunk that reading one chunk of the stored ``array`` holds: the
    READ_COPIES' two, and an object store's HTTP client's (``_storage.REMOTE_READ_COPIES``)."""
    from ._cubed_seam import node_target
    from ._fusion import _nbytes
    from ._storage import REMOTE_READ_COPIES, is_remote_array

    copies = READ_COPIES - 1
    if is_remote_array(node_target(dag, array)):
        copies += REMOTE_READ_COPIES
    return copies * _nbytes(dag, array)


def count_reads(dag: Any) -> Any:
    """``dag`` with each task's projection at least its :func:`read_peak`: an op that reads a
    large stored chunk and computes little with it (a matmul's product over the data) held
    more while reading than Cubed projects (measured 178 MB in tasks projected at 150 MB:
    graph-mode logistic regression, 36.4 MB chunks, reserved_mem 75.6 MB)."""
    from ._cubed_seam import op_nodes, replace_op, set_node_op

    for name, po in list(op_nodes(dag)):
        peak = read_peak(dag, name)
        if peak > po.projected_mem:
            set_node_op(dag, name, replace_op(po, projected_mem=peak))
    return dag


def graph_step(loss: Callable[..., Any], params: Any, data: tuple, spec: Any) -> tuple[Any, Any]:
    """Lazy (value, grads) of ``loss(params, *data)`` on namespace(cubed): ``params`` (NumPy) go
    in as Cubed arrays with ``spec`` (through the parameter store when over 1 MB)."""
    import cubed

    from ._casting import cast_lazily, casts

    xp = pg.namespace(cubed)
    store = ParameterStore(spec)
    host = _host(params)
    p = pg.tree_map(lambda a: xp.asarray(store.put(a)), host)
    targets = casts(loss, host, [x.dtype for x in data])  # float16 data: cast in the plan
    d = tuple(
        xp.asarray(cast_lazily(x, dt)) if not isinstance(x, pg.Array) else x
        for x, dt in zip(data, targets, strict=True)
    )
    return pg.value_and_grad(loss)(p, *d)


class ParameterStore:
    """Parameters as Cubed arrays: small ones in the plan (Cubed keeps in-memory arrays up to
    1 MB), larger ones written to Zarr in the Spec's work_dir (never ``from_array``, which
    pickles the whole array into every task, uncounted)."""

    LIMIT = 1_000_000

    def __init__(self, spec: Any) -> None:
        self.spec = spec
        self.n = 0

    def put(self, a: np.ndarray) -> Any:
        import cubed

        if a.nbytes <= self.LIMIT:
            return cubed.asarray(a, spec=self.spec)
        import os
        import tempfile
        import uuid

        import zarr

        root = self.spec.work_dir or tempfile.gettempdir()
        path = os.path.join(root, f"pycograd-params-{uuid.uuid4().hex}.zarr")
        z = zarr.open_array(path, mode="w", shape=a.shape, dtype=a.dtype, chunks=a.shape)
        z[...] = a
        self.n += 1
        return cubed.from_zarr(path, spec=self.spec)


@dataclass(frozen=True)
class Recompute:
    """A memory schedule of one chunk's step, as a one-pass task runs it
    (``pycograd_xp.memory.scheduled``): the numbers of the nodes whose outputs the backward pass
    makes again (``drop``) and the row of each node (``names``), chosen on the chunk's specs by
    ``pycograd_xp.memory.within`` (``cubed_plugin._chunk_plan``)."""

    drop: frozenset[int]
    names: tuple[str, ...]

    def __str__(self) -> str:
        return f"{len(self.drop)} of {len(self.names)} outputs made again in the backward pass"


def chunk_step(loss: RowLoss) -> Callable[..., Any]:
    """``f(params, *rows)``: the sum of the per-row losses of one chunk, the function whose
    ``value_and_grad`` step a one-pass task computes (:func:`chunk_sums`) and
    :func:`chunk_projection` projects."""

    def f(p: Any, *rows: Any) -> Any:
        losses = loss.per_row(p, *rows)
        check_per_row(losses, rows, loss.per_row)  # on abstract arrays: before anything runs
        return pg.namespace(np).sum(losses)

    f.__name__ = f.__qualname__ = f"{loss.__name__} (a chunk's step)"
    return f


def chunk_specs(
    loss: RowLoss, params: Any, data: tuple, slice_rows: int | None = None
) -> tuple[Any, list]:
    """The specs of one chunk's step (of one slice of ``slice_rows`` rows of it when given):
    the parameters', and each data argument's as the task computes it (cast to the compute
    dtype: the copy is an input)."""

    def rows(c: Any) -> int:
        n = max(c[0]) if c else 1
        return n if slice_rows is None else min(n, slice_rows)

    from ._casting import casts

    targets = casts(loss, _host(params), [x.dtype for x in data])
    specs = [
        memory.spec((rows(x.chunks), *x.shape[1:]), x.dtype if dt is None else dt)
        for x, dt in zip(data, targets, strict=True)
    ]
    return pg.tree_map(lambda a: memory.spec(a.shape, a.dtype), _host(params)), specs


def chunk_projection(
    loss: RowLoss,
    params: Any,
    data: tuple,
    slice_rows: int | None = None,
    recompute: Recompute | None = None,
) -> Any:
    """What ``pycograd_xp.memory`` projects for one chunk's eager value_and_grad step (for one
    slice of ``slice_rows`` rows of it when given: :func:`sliced_sums`; under the memory
    schedule ``recompute`` when given)."""
    param_specs, specs = chunk_specs(loss, params, data, slice_rows)
    f = chunk_step(loss)
    if recompute is not None:
        f = memory.scheduled(f, recompute.drop, recompute.names)
    return memory.project(f, param_specs, *specs, argnums=0)


# blocks of partial sums that one task of one-pass mode's tree sum adds
ONE_PASS_FAN_IN = 32


def one_pass_step(
    loss: RowLoss,
    params: Any,
    data: tuple,
    *,
    chunk_numbers: Sequence[int] | None = None,
    slice_rows: int | None = None,
    recompute: Recompute | None = None,
) -> tuple[Any, Any, Any]:
    """(lazy vector of [loss sum, flat gradient sums], treedef, leaf shapes) of ``loss`` over
    the row chunks of ``data`` (Cubed arrays with the same row chunking, whole along the other
    axes). The sums are float64 whatever the dtype of the data and the parameters (each chunk
    is computed in theirs).

    ``chunk_numbers``: when ``data`` is a mini-batch (:func:`._row_chunks.take_row_chunks`), the
    number of each of its row chunks in the whole data, so that an error names the chunk and its
    rows as the whole data numbers them.

    ``slice_rows``: each task computes its chunk in slices of that many rows, one slice's
    step at a time, and adds their sums (:func:`sliced_sums`); its projection counts the whole
    chunk read and one slice's step.

    ``recompute``: each task computes its chunk's step under that memory schedule (its
    backward pass makes the schedule's outputs again); its projection is the schedule's."""
    from ._cubed_seam import blockwise, op_counter
    from ._labels import fn_name, label_new

    since = op_counter()
    host = _host(params)
    leaves, td = tree_flatten(host)
    width = 1 + sum(leaf.size for leaf in leaves)
    rows = check_row_chunks(data, "one-pass step")
    from ._casting import casts, held_while_cast

    targets = casts(loss, host, [x.dtype for x in data])
    extra = chunk_projection(loss, params, data, slice_rows, recompute).peak_bytes
    extra += held_while_cast(data, targets)
    per_row = loss.per_row

    starts = list(np.cumsum((0,) + tuple(rows)))
    numbers = list(range(len(rows))) if chunk_numbers is None else list(chunk_numbers)
    if len(numbers) != len(rows):
        raise ValueError(
            f"one-pass step: {len(numbers)} chunk_numbers for data of {len(rows)} "
            "row chunks; give one number per row chunk"
        )

    def block(*chunks: np.ndarray) -> np.ndarray:
        *data_chunks, row_numbers = chunks
        n = numbers[starts.index(int(row_numbers[0]))]
        out = sliced_sums(
            per_row, td, leaves, data_chunks, n, rows[0], slice_rows, targets, recompute
        )
        return out.reshape(1, width)

    import cubed

    args: list[Any] = []
    for x in data:
        args += [x, "i" + "jklmnop"[: x.ndim - 1]]
    # each task learns which rows it has (to name them in errors) from the row numbers (last:
    # Cubed 0.27's blockwise fails to read a first argument without the contracted axes)
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

    # the partial rows are small and Cubed's reduction reads its blocks one at a time: a wide
    # fan-in sums 20 chunks' partials in one task instead of three rounds (5, 2, 1 tasks)
    fan_in = one_pass_fan_in(len(rows))
    sums = cubed.sum(parts, axis=0, split_every=fan_in)
    loss_name = fn_name(loss)

    how = "" if recompute is None else f", {recompute}"

    def label(func: str) -> str:
        part = {
            "blockwise": f"forward and backward of each row chunk{how}",
            "arange": "the row numbers of each chunk",
        }.get(func, "the sum of the chunks' partial loss and gradients")
        return f"{func} in the one-pass step of {loss_name} ({part})"

    label_new(since, sums, label)
    return sums, td, [leaf.shape for leaf in leaves]


def check_row_chunks(data: Sequence[Any], where: str) -> tuple[int, ...]:
    """The row chunks of ``data`` (Cubed arrays chunked alike along their rows and whole along
    the other axes, as a task per row chunk reads them), or a ValueError naming the argument
    that is not, after ``where``."""
    rows = data[0].chunks[0]
    for i, x in enumerate(data):
        if x.chunks[0] != rows:
            raise ValueError(
                f"{where}: data argument {i} is chunked {x.chunks[0]} along its rows, "
                f"argument 0 {rows}; chunk them alike"
            )
        if any(len(c) != 1 for c in x.chunks[1:]):
            raise ValueError(
                f"{where}: data argument {i} has several chunks along an axis other than the "
                f"rows ({x.chunks}); rechunk it whole there"
            )
    return tuple(int(r) for r in rows)


def sliced_sums(
    per_row: Callable[..., Any],
    td: Any,
    leaves: Sequence[np.ndarray],
    chunks: Sequence[np.ndarray],
    number: int,
    chunk_rows: int,
    slice_rows: int | None,
    casts: Sequence[Any] = (),
    recompute: Recompute | None = None,
) -> np.ndarray:
    """:func:`chunk_sums` of a chunk computed in row slices of ``slice_rows`` rows (None: whole):
    each slice a view of the chunk, its forward and backward let go before the next, the sums
    added in float64. A stored chunk too large for a task's budget then needs its read and one
    slice's activations, not the whole chunk's. ``casts``: the compute dtype of each data
    argument or None (``cubed_plugin._casting``), each slice cast on its own. ``recompute``:
    the memory schedule each step runs under, or None."""
    n = int(chunks[0].shape[0]) if chunks and np.ndim(chunks[0]) else 0
    if slice_rows is None or slice_rows >= n:
        return chunk_sums(per_row, td, leaves, chunks, number, chunk_rows, 0, casts, recompute)
    total = None
    for start in range(0, n, slice_rows):
        part = [c[start : start + slice_rows] for c in chunks]
        out = chunk_sums(per_row, td, leaves, part, number, chunk_rows, start, casts, recompute)
        total = out.astype(np.float64) if total is None else total + out
        del part, out
    assert total is not None
    return total


def chunk_sums(
    per_row: Callable[..., Any],
    td: Any,
    leaves: Sequence[np.ndarray],
    chunks: Sequence[np.ndarray],
    number: int,
    chunk_rows: int,
    offset: int = 0,
    casts: Sequence[Any] = (),
    recompute: Recompute | None = None,
) -> np.ndarray:
    """One task of one-pass mode: [loss sum, flat gradient sums] of ``per_row`` at the
    parameters ``leaves`` (of the tree ``td``) over one row chunk of every data argument
    (``chunks``: chunk ``number`` of the data, whose chunks have ``chunk_rows`` rows but the
    last), computed eagerly in the dtypes of the parameters and the data. An error names the
    chunk and its rows (``chunks`` being the rows from ``offset`` on of the chunk). ``casts``:
    each data argument's compute dtype (cast here, after the read) or None. ``recompute``: the
    memory schedule the step runs under (:func:`chunk_step`'s, chosen on the chunk's specs:
    the same nodes in the same order), or None."""
    np_xp = _NP
    first = number * chunk_rows + offset
    where = f"chunk {number} (rows {first} to {first + int(chunks[0].shape[0]) - 1})"
    p = tree_unflatten(td, [np_xp.asarray(leaf) for leaf in leaves])
    from ._casting import cast_chunk

    kinds = list(casts) + [None] * (len(chunks) - len(casts))
    rows_in = [np_xp.asarray(cast_chunk(c, dt)) for c, dt in zip(chunks, kinds, strict=True)]
    for i, r in enumerate(rows_in):
        if not np_xp.isdtype(r.dtype, ("real floating", "integral", "bool")):
            raise TypeError(
                f"data argument {i}, {where}: dtype {r.dtype}; training data must be real numbers"
            )

    # per_row's shape was checked once, when the step's projection ran it (chunk_projection)
    def step(p: Any) -> Any:
        return np_xp.sum(per_row(p, *rows_in))

    if recompute is not None:
        step = memory.scheduled(step, recompute.drop, recompute.names)
    value, grads = pg.value_and_grad(step)(p)
    parts = [np.asarray(pg.unwrap(value)).reshape(1)]
    parts += [np.asarray(pg.unwrap(g)).reshape(-1) for g in tree_flatten(grads)[0]]
    out = np.concatenate(parts)
    if not np.isfinite(out).all():  # only then read the chunk again, to say where
        _check_finite(rows_in, where)
    return out


@dataclass
class TaskConfig:
    """What the tasks of a planned one-pass step (``cubed_plugin._one_pass.PlannedStep``) read:
    the data's Zarr arrays and the loss (fixed), the parameters and the chunk of each task (set
    by the driver before each run)."""

    per_row: Callable[..., Any]
    arrays: tuple
    chunk_rows: int
    treedef: Any
    leaves: list = field(default_factory=list)
    picks: list = field(default_factory=list)
    chunks_per_task: int = 1
    slice_rows: int | None = None  # rows each chunk is computed in at a time (None: whole)
    recompute: Recompute | None = None  # the memory schedule each chunk's step runs under
    casts: tuple = ()  # each data argument's compute dtype, or None (cubed_plugin._casting)


def one_pass_task(b: int, config: TaskConfig) -> tuple[int, np.ndarray]:
    """Task ``b`` of a planned step (here, in a module that workers have imported: a task
    imports nothing): (b, the float64 rows of loss and gradient sums, one per chunk, of its
    chunks ``config.picks[b * k : (b + 1) * k]`` (``k`` the ``chunks_per_task``) of the data at
    ``config.leaves``).

    The chunks are read and computed one after the other, each once the last one's arrays are
    let go (:func:`._measuring.reads_let_go`), so a task of several chunks holds one chunk's
    arrays at a time, in the heap the last chunk freed."""
    from ._measuring import heap_in_use, reads_let_go

    size, k = config.chunk_rows, config.chunks_per_task
    rows, level = [], heap_in_use() if k > 1 else None
    for i, n in enumerate(config.picks[b * k : (b + 1) * k]):
        if i:
            level = reads_let_go(level)
        chunks = [z[n * size : (n + 1) * size] for z in config.arrays]
        rows.append(
            sliced_sums(
                config.per_row,
                config.treedef,
                config.leaves,
                chunks,
                n,
                size,
                config.slice_rows,
                config.casts,
                config.recompute,
            )
        )
        del chunks
    return b, np.stack(rows).astype(np.float64)


def tree_sum(rows: Sequence[np.ndarray], fan_in: int) -> np.ndarray:
    """The sum of ``rows`` (float64) added as Cubed's ``sum(parts, axis=0, split_every=fan_in)``
    adds the rows of one-pass mode's partial sums: a left fold over each run of ``fan_in``
    consecutive rows, then over runs of those, until one is left; so the driver's sum of the
    tasks' rows is, to the bit, the sum Cubed computed."""
    import functools
    import operator

    rows = list(rows)
    while True:
        rows = [
            functools.reduce(operator.add, rows[i : i + fan_in])
            for i in range(0, len(rows), fan_in)
        ]
        if len(rows) == 1:
            return rows[0]


def one_pass_fan_in(chunks: int) -> int:
    """The ``split_every`` of one-pass mode's sum over ``chunks`` partial rows."""
    return max(2, min(chunks, ONE_PASS_FAN_IN))


def _check_finite(rows: list, where: str) -> None:
    """Name the data argument with NaN or infinite values (called when a chunk's loss or
    gradient is not finite: checking every chunk up front would read it twice)."""
    for i, r in enumerate(rows):
        xp = r.__array_namespace__()
        if xp.isdtype(r.dtype, "real floating") and not bool(xp.all(xp.isfinite(r))):
            raise ValueError(
                f"data argument {i}, {where}: NaN or infinite values; clean the data first"
            )
    raise FloatingPointError(
        f"{where}: the loss or its gradient is not finite although the "
        "data is; lower the learning rate or check the loss"
    )


def finish_sums(
    total: np.ndarray,
    td: Any,
    shapes: list[tuple[int, ...]],
    count: int,
    loss: RowLoss,
    host_p: Any,
) -> tuple[float, Any]:
    """(loss, grads) of a one-pass step from its tasks' sums (:func:`unflatten_sums`), with
    ``loss.penalty``'s value and gradient at the parameters ``host_p`` added once: computed
    here, eagerly, with pycograd_xp's NumPy namespace (the parameters are small)."""
    value, grads = unflatten_sums(total, td, shapes, count, loss.reduction)
    if loss.penalty is None:
        return value, grads
    p = pg.tree_map(lambda a: _NP.asarray(np.asarray(pg.unwrap(a))), host_p)
    pv, pgrads = pg.value_and_grad(loss.penalty)(p)
    pvalue = float(np.asarray(pg.unwrap(pv)))
    return value + pvalue, pg.tree_map(
        lambda g, h: g + np.asarray(pg.unwrap(h), dtype=np.float64), grads, pgrads
    )


def unflatten_sums(
    total: np.ndarray, td: Any, shapes: list[tuple[int, ...]], count: int, reduction: str
) -> tuple[float, Any]:
    """(loss, grads) from the one-pass sums: divided by ``count`` rows for a mean."""
    scale = 1.0 / count if reduction == "mean" else 1.0
    grads, start = [], 1
    for shape in shapes:
        size = math.prod(shape)
        grads.append(total[start : start + size].reshape(shape) * scale)
        start += size
    return float(total[0]) * scale, tree_unflatten(td, grads)
