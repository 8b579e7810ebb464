# %% [markdown]
# # Training on chunked data with Cubed
#
# `cubed_plugin.fit` trains parameters held in memory on data that stays chunked in Zarr, every
# task of every step checked against Cubed's `allowed_mem` before it runs. At scale the data is
# far larger than memory; here it is a few MB in a temporary folder, so that this page (executed
# when the site was built) runs in seconds on the threads executor.

# %%
import math
import tempfile
from pathlib import Path

import cubed
import numpy as np
import zarr

import pycograd_xp as pg
from cubed_plugin import fit, plan_rows, row_loss
from cubed_plugin.train import synthetic
from pycograd_xp import optim

work = Path(tempfile.mkdtemp(prefix="pycograd_xp_tutorial_"))
rows, features, chunk = 40_000, 16, 1_600
synthetic(str(work), rows, features, chunk, "logreg")  # X.zarr (rows, features), y.zarr (rows,)
print(sorted(p.name for p in work.iterdir()))
print(zarr.open_array(str(work / "X.zarr")))

# %% [markdown]
# The data is opened lazily with a `cubed.Spec`: `allowed_mem` is the memory each task may
# use, its worker's own included (`reserved_mem`: what a worker holds before any data;
# `cubed.Spec` defaults it to 0). `make_spec` measures it on the executor (for threads, whose
# tasks run in this process: a fresh Python process with the same libraries) and adds 10%.
# The planner leaves 5% of it free besides (a worker whose baseline is a little higher, in
# another process, still fits the chunks it advises). Here each task gets 1 MB beyond that, and
# the whole X is five times that.
# (The chunks of 1,600 rows are what `plan_rows`, below, finds for this budget: with chunks of
# 4,000 rows `fit` refuses the first step before running, naming the op that would need about
# 2 MB per task, and proposes 1,600.)

# %%
from cubed_plugin import make_spec

reserved = make_spec(executor="threads").reserved_mem
spec = make_spec(
    reserved + math.ceil(0.05 * reserved) + 1_000_000, reserved, work_dir=str(work / "work")
)
X = cubed.from_zarr(str(work / "X.zarr"), spec=spec)
y = cubed.from_zarr(str(work / "y.zarr"), spec=spec)
print(
    f"reserved_mem {pg.memory.format_bytes(reserved)}, allowed_mem "
    f"{pg.memory.format_bytes(spec.allowed_mem)}; X {pg.memory.format_bytes(X.nbytes)} in "
    f"chunks of {X.chunks[0][0]} rows"
)

# %% [markdown]
# A loss declared per row (`row_loss`: it returns one value per row, `fit` takes their mean)
# lets `fit` run in one-pass mode: one task per row chunk runs the eager NumPy namespace
# forward and backward on its chunk; each chunk is read once.


# %%
@row_loss
def logreg(p, X, y):
    xp = X.__array_namespace__()
    z = X @ p["w"] + p["b"]
    return xp.log(1 + xp.exp(-xp.abs(z))) + xp.maximum(z, 0) - y * z


params = {"w": np.zeros(features), "b": np.zeros(())}
result = fit(
    logreg,
    params,
    (X, y),
    optim.adam(0.1),
    epochs=3,
    batch_rows=8_000,  # five row chunks per step, drawn by the key each epoch
    spec=spec,
    executor="threads",
    checkpoint_dir=str(work / "ckpt"),
    progress=False,
)
[round(v, 4) for v in result.history["loss"]]

# %% [markdown]
# The recorder compares each op's projected task memory with `allowed_mem` (the threads
# executor runs tasks in this process, so it measures none; `executor="processes"` runs each
# task in a worker process and records its own peak):

# %%
print(result.memory.table(int(spec.allowed_mem)))
print("largest projected task:", pg.memory.format_bytes(result.memory.max_projected()))

# %% [markdown]
# ## Checkpoints
#
# With `checkpoint_dir` the parameters, the optimizer state, the step and the key are saved
# atomically; a run that finds a checkpoint resumes from it. Asking for more epochs continues
# where the first run stopped:

# %%
more = fit(
    logreg,
    params,
    (X, y),
    optim.adam(0.1),
    epochs=4,
    batch_rows=8_000,
    spec=spec,
    executor="threads",
    checkpoint_dir=str(work / "ckpt"),
    progress=False,
    log=None,
)
result.step, more.step

# %% [markdown]
# ## Full batch, quasi-Newton
#
# `optim.lbfgs()` runs L-BFGS with each evaluation of the loss and gradient one computation
# over all the data (one pass in one-pass mode); `epochs` is then a budget of passes.

# %%
lbfgs = fit(
    logreg,
    params,
    (X, y),
    optim.lbfgs(),
    epochs=10,
    spec=spec,
    executor="threads",
    progress=False,
    log=None,
)
print(f"loss {lbfgs.history['loss'][-1]:.5f} after {int(lbfgs.history['passes'][-1])} passes")

# %% [markdown]
# ## Images: a CNN on image chunks, validated, then predictions to Zarr
#
# The same `fit` trains a convolutional network on images stored as `(rows, channels, height,
# width)` Zarr chunks: a row is an image. `examples/cubed_images.py` writes 16x16 images of a
# bar in one of four orientations; the model is conv-relu-pool twice and a linear layer
# (`pycograd_xp.nn`). With `validation=` and `metrics=`, `fit` computes the held-out accuracy
# after each epoch (no gradients, one read of the validation chunks, every task within the
# budget), and `EarlyStopping` keeps the best parameters. `predict` applies the model to every
# chunk lazily; `cubed.to_zarr` writes the result.

# %%
import sys

import cubed_plugin
from cubed_plugin import EarlyStopping, predict

# the example's module, from the repository the site is built from
sys.path.insert(0, str(Path(cubed_plugin.__file__).resolve().parents[1] / "examples"))
import cubed_images

for part, n, seed in (("train", 6_000, 0), ("val", 1_500, 1)):
    cubed_images.write(str(work / "images" / part), n, 250, seed)
image_spec = make_spec(reserved + 200_000_000, reserved, work_dir=str(work / "work"))
Xi, yi, Xiv, yiv = (
    cubed.from_zarr(str(work / "images" / part / f"{n}.zarr"), spec=image_spec)
    for part in ("train", "val")
    for n in ("X", "y")
)
cnn = fit(
    row_loss(cubed_images.per_image_loss),
    cubed_images.init_params(pg.random.key(0)),
    (Xi, yi),
    optim.adam(1e-2),
    epochs=3,
    batch_rows=250,
    spec=image_spec,
    executor="threads",
    validation=(Xiv, yiv),
    metrics={"accuracy": cubed_images.correct},
    early_stopping=EarlyStopping(patience=2, monitor="val_accuracy", mode="max"),
    progress=False,
    log=None,
)
print("validation accuracy by epoch:", [round(a, 3) for a in cnn.history["val_accuracy"]])
classes = predict(cubed_images.predicted_class, cnn.params, Xiv)  # lazy: a task per chunk
cubed.to_zarr(classes, str(work / "images" / "predicted.zarr"))
stored = zarr.open_array(str(work / "images" / "predicted.zarr"))[:]
print(
    f"{stored.shape[0]} predicted classes written; {np.mean(stored == yiv.compute()):.3f} correct"
)

# %% [markdown]
# ## Choosing the chunks
#
# `plan_rows` picks the largest row chunks for which every task of `fit`'s step fits a budget,
# from shapes alone, with the projection of that step:

# %%
chunk_rows, projection = plan_rows(
    logreg,
    params,
    pg.memory.spec((rows, features)),
    pg.memory.spec(rows),
    rows=rows,
    data=(1, 2),
    mode="one-pass",
    batch_rows=8_000,
    backend=spec,
)
print(
    f"{chunk_rows} rows per chunk: largest task {pg.memory.format_bytes(projection.max_task_bytes)}"
    f" ({projection.max_task_part}), {projection.num_tasks} tasks"
)

# %%
import shutil

shutil.rmtree(work)  # the data, the checkpoints and Cubed's intermediate storage
