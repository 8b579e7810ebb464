"""The xarray front door: training data from an ``xarray.Dataset`` whose variables are Cubed
arrays (opened from Zarr with ``cubed-xarray``), and predictions back as a Dataset.

:func:`from_xarray` stacks the feature variables of a Dataset as the columns of a design matrix
and its target variable as the matching rows, lazily (nothing is read until ``fit`` computes a
step), in the layout ``fit`` takes: rows chunked along the first axis, every row chunk whole
along the other axes. The sample dimensions (``sample_dims``) are flattened, C order, into the
rows; the Dataset's other dimensions are kept as axes of every row (a per-gridpoint model keeps
``lat`` and ``lon``; a pooled model flattens them into the rows too)::

    ds = xr.open_zarr(path, chunked_array_type="cubed", from_array_kwargs={"spec": spec})
    data = cubed_plugin.from_xarray(ds, ["tas", "hus", "ps"], "pr", sample_dims=("time",))
    result = cubed_plugin.fit(loss, params, data.arrays, optim.lbfgs(), epochs=30)
    data.write(path, pr_predicted=data.predict(model, result.params))

How it rechunks: a row chunk of the stacked rows is a slab of whole chunks of the sample
dimensions after the first, so every variable is rechunked (``Array.rechunk``, Cubed's bounded-
memory rechunk) to whole chunks along every dimension but the first, and to one chunking along
the first (``rows`` rows per chunk when given; else the target's own chunks when they already
are whole elsewhere; else chunks of about the bytes of the target's stored chunks). Variables
already chunked so are not rechunked. One op then reads one chunk of every variable per task and
writes one chunk of the matrix; flattening the sample dimensions then is a reshape whose chunks
are aligned (no data moves). Every op of that plan is checked against ``allowed_mem`` before
anything runs (:func:`from_xarray` refuses naming the op and its projection), and ``fit`` checks
each step, the stacking included, again.

With ``store=`` the matrix and the target are written to Zarr once (in the budget, one chunk per
task) and read from there: each pass of ``fit`` then reads the stored matrix instead of every
variable and a rechunk again, and mini-batches take stored chunks without a copy.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import pycograd_xp as pg
from pycograd_xp.memory import format_bytes

__all__ = ["XarrayData", "from_xarray"]


@dataclass(frozen=True)
class XarrayData:
    """Training data taken from a Dataset (:func:`from_xarray`): the Cubed arrays ``X``
    (rows × kept dims × features) and ``y`` (rows × kept dims), and what it takes to put values
    of the rows back in the Dataset's coordinates (:meth:`to_dataset`, :meth:`write`).

    Made by :func:`from_xarray`, not by hand.

    Parameters
    ----------
    X : cubed.Array
        The features, (rows, *kept dims, features), chunked along the rows only.
    y : cubed.Array
        The target, (rows, *kept dims), chunked as ``X``'s rows.
    features : tuple of str
        The Dataset's variables stacked as ``X``'s last axis, in that order.
    target : str
        The Dataset's variable ``y`` holds.
    sample_dims : tuple of str
        The dims flattened into the rows, in that order.
    kept_dims : tuple of str
        The dims each row keeps.
    template : xarray.DataArray
        The target variable, lazily: its dims and coordinates, for writing values back.
    max_projected_mem : int
        The largest projected task memory of the plan that builds ``X`` and ``y``, in bytes.
    """

    X: Any
    y: Any
    features: tuple[str, ...]
    target: str
    sample_dims: tuple[str, ...]
    kept_dims: tuple[str, ...]
    template: Any  # the target DataArray (its dims and coordinates)
    max_projected_mem: int  # the largest task of the plan that builds X and y

    @property
    def arrays(self) -> tuple[Any, Any]:
        """``(X, y)``: the data arguments of ``fit(loss, params, data.arrays, ...)``."""
        return self.X, self.y

    @property
    def sample_shape(self) -> tuple[int, ...]:
        """The sizes of the sample dims, whose product is the number of rows."""
        return tuple(int(self.template.sizes[d]) for d in self.sample_dims)

    def summary(self) -> str:
        """One line on the layout (for logs).

        Returns
        -------
        str
            The shapes, the row chunks, what a row is, and the largest task.
        """
        X = self.X
        chunk = math.prod(X.chunksize) * np.dtype(X.dtype).itemsize
        kept = f", kept {', '.join(self.kept_dims)}" if self.kept_dims else ""
        return (
            f"X {tuple(X.shape)} {X.dtype} in {len(X.chunks[0])} row chunks of "
            f"{X.chunks[0][0]:,} rows ({format_bytes(chunk)} each); rows = "
            f"{' x '.join(self.sample_dims)}{kept}; largest task "
            f"{format_bytes(self.max_projected_mem)}"
        )

    def predict(self, model: Callable[..., Any], params: Any) -> Any:
        """``model(params, X_rows)`` applied to every row chunk of ``X``, lazily
        (:func:`cubed_plugin.predict`: each task's memory projected from ``model`` and checked
        against ``allowed_mem`` before anything runs; a chunk too large evaluated in row slices).

        Parameters
        ----------
        model : callable
            ``model(params, X_rows)``: one output per row (its first axis the rows).
        params : pytree of arrays
            The parameters (NumPy arrays or arrays of an eager namespace), e.g.
            ``fit(...).params``.

        Returns
        -------
        cubed.Array
            The rows by whatever a row of the model's output is (for :meth:`write`: shaped
            as ``y``).
        """
        from ._evaluate import predict

        return predict(model, params, self.X)

    def to_dataset(self, **values: Any) -> Any:
        """Values of the rows as a lazy ``xarray.Dataset`` in the target's dims and coordinates.

        Parameters
        ----------
        **values : cubed.Array
            One variable per keyword: the rows by the kept dims (shaped as ``y``, e.g. from
            :meth:`predict`).

        Returns
        -------
        xarray.Dataset
            Each variable in the target's dims, in its order, with its coordinates.
        """
        import xarray as xr

        kept_shape = tuple(int(self.template.sizes[d]) for d in self.kept_dims)
        out = {}
        for name, v in values.items():
            v = pg.unwrap(v)
            if tuple(v.shape) != (math.prod(self.sample_shape), *kept_shape):
                raise ValueError(
                    f"XarrayData.to_dataset: {name} has shape {tuple(v.shape)}; it must be "
                    f"the rows by the kept dims, {tuple(self.y.shape)} (the shape of y)"
                )
            grid = _reshape_rows(v, self.sample_shape)
            da = xr.DataArray(
                grid, dims=(*self.sample_dims, *self.kept_dims), coords=self.template.coords
            )
            out[name] = da.transpose(*self.template.dims)
        return xr.Dataset(out)

    def write(
        self,
        path: str,
        *,
        executor: Any = None,
        mode: str = "w",
        consolidated: bool | None = None,
        **values: Any,
    ) -> Any:
        """Write :meth:`to_dataset` of ``values`` to Zarr, every task checked first.

        Parameters
        ----------
        path : str
            The Zarr store to write.
        executor : executor or str, optional
            Where Cubed computes it (an executor or its name; None: the Spec's, else Cubed's
            default).
        mode : str, default "w"
            ``Dataset.to_zarr``'s mode.
        consolidated : bool, optional
            ``Dataset.to_zarr``'s: whether to write consolidated metadata (None, xarray's
            default: where the format allows; Zarr warns that format 3 does not specify it).
            False writes none: read it back with ``xr.open_zarr(path, consolidated=False)``.
        **values : cubed.Array
            As :meth:`to_dataset`.

        Returns
        -------
        xarray.Dataset
            The Dataset written (lazy).

        Raises
        ------
        MemoryLimitError
            If a task of the plan exceeds ``allowed_mem``, before anything runs.
        """
        from ._compute import SOUND, refuse
        from ._compute import plan as plan_of

        ds = self.to_dataset(**values)
        arrays = [ds[k].data for k in ds.data_vars]
        refuse(
            plan_of(*arrays, optimize_function=SOUND),
            f"XarrayData.write({path!r}) is refused before running",
        )
        ds.to_zarr(
            path,
            mode=mode,
            consolidated=consolidated,
            chunkmanager_store_kwargs=_store_kwargs(executor),
        )
        return ds


def _cubed_data(ds: Any, name: str) -> Any:
    import cubed

    if name not in ds.data_vars:
        have = ", ".join(map(str, ds.data_vars))
        raise KeyError(f"from_xarray: no data variable {name!r} in the Dataset (it has {have})")
    a = ds[name].data
    if not isinstance(a, cubed.Array):
        raise TypeError(
            f"from_xarray: variable {name!r} holds a {type(a).__module__}.{type(a).__name__}, "
            "not a Cubed array; open the Dataset with Cubed chunks (pip install cubed-xarray; "
            "xr.open_zarr(path, chunked_array_type='cubed', from_array_kwargs={'spec': spec})) "
            "or chunk it so (ds.chunk(chunks, chunked_array_type='cubed', "
            "from_array_kwargs={'spec': spec}))"
        )
    return a


def _row_chunk(
    target: Any, sample_shape: tuple[int, ...], whole: tuple[int, ...], rows: int | None
) -> int:
    """Entries of the first sample dim per row chunk (see the module's docstring)."""
    per = math.prod(sample_shape[1:])
    if rows is not None:
        if rows < per or rows % per:
            raise ValueError(
                f"from_xarray: rows={rows} must be a multiple of the {per} rows of one entry "
                "of the first sample dimension (a row chunk is whole entries of it)"
            )
        return min(rows // per, sample_shape[0])
    first = int(target.chunks[0][0])
    if all(len(c) == 1 for c in target.chunks[1:]):
        return first
    stored = math.prod(int(c[0]) for c in target.chunks)
    return max(1, min(sample_shape[0], stored // math.prod(whole)))


def _reshape_rows(a: Any, shape: tuple[int, ...]) -> Any:
    """``a`` (its first axis the rows) with its first axis made ``shape`` or, when ``shape``
    is the rows, its leading ``len(a.shape)`` axes flattened; chunks stay aligned: no data
    moves (the row chunks are slabs of whole entries of the other sample dims)."""
    import cubed

    if len(shape) == 1:
        return a
    out = cubed.reshape(a, (*shape, *a.shape[1:]))
    if tuple(out.chunks[0]) != tuple(c // math.prod(shape[1:]) for c in a.chunks[0]):
        raise AssertionError(f"from_xarray: a reshape moved data ({a.chunks} -> {out.chunks})")
    return out


def _flatten_rows(a: Any, n: int) -> Any:
    import cubed

    if n == 1:
        return a
    rows = math.prod(a.shape[:n])
    out = cubed.reshape(a, (rows, *a.shape[n:]))
    per = math.prod(a.shape[1:n])
    if tuple(out.chunks[0]) != tuple(c * per for c in a.chunks[0]):
        raise AssertionError(f"from_xarray: a reshape moved data ({a.chunks} -> {out.chunks})")
    return out


def _stack(blocks: Sequence[np.ndarray], dtype: np.dtype) -> np.ndarray:
    return np.stack([np.asarray(b, dtype=dtype) for b in blocks], axis=-1)


def from_xarray(
    ds: Any,
    features: Sequence[str],
    target: str,
    *,
    sample_dims: Sequence[str] | None = None,
    rows: int | None = None,
    store: str | None = None,
    executor: Any = None,
    dtype: Any = None,
) -> XarrayData:
    """Training data from a Dataset of Cubed arrays, without loading it.

    The variables ``features`` are stacked as the columns of ``X`` and the variable ``target``
    is ``y``; every variable has the target's dims (in any order). The ``sample_dims`` are
    flattened (C order) into the rows, the others kept as axes of each row: for
    ``(time, lat, lon)`` variables, ``sample_dims=("time",)`` gives ``X`` of shape
    ``(time, lat, lon, features)`` and ``y`` ``(time, lat, lon)`` (a per-gridpoint model);
    ``("time", "lat", "lon")`` gives ``(time*lat*lon, features)`` and ``(time*lat*lon,)``.
    ``X``'s dtype is the features' common one (NumPy's promotion), or ``dtype``; ``y`` keeps its
    own, or ``dtype`` too when it is floating. How the variables are rechunked is in the
    module's docstring (:mod:`cubed_plugin._xarray`).

    CF-packed variables (integers with ``scale_factor``/``add_offset``, which xarray decodes
    lazily, chunk by chunk, usually to float64): give ``dtype`` the parameters' dtype (e.g.
    ``"float32"``) and each task that stacks the rows reads the packed chunks, decodes and casts
    them to it (its copies in the task's projection, checked before anything runs); ``X``
    (and ``store``'s copy) is then in the dtype ``fit`` computes in, not float64.

    Parameters
    ----------
    ds : xarray.Dataset
        Variables backed by Cubed arrays with one Spec, e.g. ``xr.open_zarr(path,
        chunked_array_type="cubed", from_array_kwargs={"spec": spec})`` (``cubed-xarray``).
    features : sequence of str
        The feature variables, in the order of ``X``'s columns.
    target : str
        The target variable.
    sample_dims : sequence of str, optional
        The dims whose entries are samples (None: all the target's dims, a pooled model).
    rows : int, optional
        Rows per chunk: a multiple of the rows one entry of the first sample dim makes
        (None: the target's chunks, or chunks of about their bytes when they must change).
    store : str, optional
        A directory or an fsspec URL (``"s3://bucket/design"``, opened with the Spec's
        ``storage_options``) to write ``X.zarr`` and ``y.zarr`` to, once, and read them from
        afterwards (each pass of ``fit`` then reads them rather than stacking again).
    executor : executor or str, optional
        Where ``store`` is written.
    dtype : dtype or str, optional
        A floating dtype for ``X`` (and a floating ``y``), cast chunk by chunk in the tasks
        that stack them (None: the variables' own, as decoded).

    Returns
    -------
    XarrayData
        ``data.arrays`` for ``fit``; ``data.predict`` and ``data.write`` for predictions
        back in the Dataset's coordinates.

    Raises
    ------
    MemoryLimitError
        If a task of the plan that builds ``X`` and ``y`` exceeds the Spec's ``allowed_mem``
        (checked before anything runs), naming the op.
    TypeError, KeyError, ValueError
        For a variable that is not a Cubed array (naming how to open the Dataset), a missing
        variable, dims that differ from the target's, bad ``sample_dims`` or ``rows``.
    """
    import cubed

    from ._compute import SOUND, refuse
    from ._compute import plan as plan_of
    from ._cubed_seam import blockwise

    features = tuple(features)
    if not features:
        raise ValueError("from_xarray: give at least one feature variable")
    if target in features:
        raise ValueError(f"from_xarray: the target {target!r} is also among the features")
    y_full = _cubed_data(ds, target)
    template = ds[target]
    dims = tuple(str(d) for d in template.dims)
    sample = tuple(sample_dims) if sample_dims is not None else dims
    unknown = [d for d in sample if d not in dims]
    if not sample or unknown or len(set(sample)) != len(sample):
        raise ValueError(
            f"from_xarray: sample_dims {sample} must be distinct dims of {target!r}, which has "
            f"dims {dims}"
        )
    kept = tuple(d for d in dims if d not in sample)
    order = (*sample, *kept)
    arrays = []
    for name in (*features, target):
        _cubed_data(ds, name)
        if set(ds[name].dims) != set(dims):
            raise ValueError(
                f"from_xarray: variable {name!r} has dims {tuple(ds[name].dims)}, the target "
                f"{target!r} {dims}; give every variable the target's dims (e.g. "
                f"ds[{name!r}].broadcast_like(ds[{target!r}]))"
            )
        arrays.append(ds[name].transpose(*order).data)
    spec = y_full.spec
    if any(a.spec != spec for a in arrays):
        raise ValueError(
            "from_xarray: the variables were opened with different Cubed Specs; open them "
            "with one (from_array_kwargs={'spec': spec})"
        )
    shape = tuple(int(s) for s in arrays[-1].shape)
    sample_shape = shape[: len(sample)]
    first = _row_chunk(arrays[-1], sample_shape, shape[1:], rows)
    chunks = (first, *shape[1:])
    arrays = [a if a.chunksize == chunks else a.rechunk(chunks) for a in arrays]

    if dtype is not None:
        wanted = np.dtype(str(dtype))
        if wanted.kind != "f":
            raise TypeError(
                f"from_xarray: dtype must be a floating dtype (the parameters', e.g. "
                f"'float32'), got {dtype!r}"
            )
        if np.dtype(arrays[-1].dtype).kind == "f" and arrays[-1].dtype != wanted:
            arrays[-1] = cubed.astype(arrays[-1], wanted)  # decoded and cast per chunk
    dtype = (
        np.result_type(*(np.dtype(a.dtype) for a in arrays[:-1]))
        if dtype is None
        else np.dtype(str(dtype))
    )
    letters = "abcdefghijklmnop"[: len(shape)]
    pairs: list[Any] = []
    for a in arrays[:-1]:
        pairs += [a, letters]
    X = blockwise(
        lambda *blocks: _stack(blocks, dtype),
        letters + "z",
        *pairs,
        dtype=dtype,
        new_axes={"z": len(features)},
    )
    X, y = _flatten_rows(X, len(sample)), _flatten_rows(arrays[-1], len(sample))
    p = plan_of(X, y, optimize_function=SOUND)
    refuse(
        p,
        f"from_xarray: stacking {', '.join(features)} and {target} is refused before running",
        lambda: (
            f"rows per chunk: {X.chunks[0][0]:,} (rows= sets it); a smaller rows= or a larger "
            "allowed_mem"
        ),
    )
    if store is not None:
        from ._storage import is_url, join, open_zarr

        if not is_url(store):
            os.makedirs(store, exist_ok=True)
        xs, ys = join(store, "X.zarr"), join(store, "y.zarr")
        options = spec.storage_options if is_url(store) else None
        cubed.store(
            [X, y],
            [_zarr_like(xs, X, options), _zarr_like(ys, y, options)],
            **_store_kwargs(executor),
        )
        X, y = open_zarr(xs, spec=spec), open_zarr(ys, spec=spec)
    return XarrayData(X, y, features, target, sample, kept, template, int(p.max_projected_mem))


def _store_kwargs(executor: Any) -> dict:
    """``cubed.store``'s keywords: the plan made as it was checked (``graph_fusion``), on
    ``executor`` (an executor or its name; None: the Spec's, else Cubed's default)."""
    from ._compute import SOUND, _optimizer
    from ._executors import executor_of

    kwargs: dict = {"optimize_function": _optimizer(SOUND)}
    if executor is not None:
        kwargs["executor"] = executor_of(executor)
    return kwargs


def _zarr_like(path: str, a: Any, storage_options: dict | None = None) -> Any:
    import zarr

    return zarr.open_array(
        path,
        mode="w",
        shape=a.shape,
        dtype=a.dtype,
        chunks=a.chunksize,
        storage_options=storage_options or None,
    )
