# %% [markdown]
# # Memory of a transformer step, before it runs
#
# `pycograd_xp.memory.project` runs a function and its `value_and_grad` step on abstract
# arrays (a shape and a dtype, no data) through the same rows, tape and VJP rules as a real
# step, and follows every array's lifetime: the peak bytes of `f` alone and of the whole step,
# what the tape holds between the passes, and the op at the peak. Here: a pre-LN transformer
# block (the one `benchmarks/bench_transformer.py` times, at a smaller size), projected, then
# measured. This page was executed when the site was built.

# %%
import numpy as np

import pycograd_xp as pg
from pycograd_xp import memory, nn

xp = pg.namespace(np)
B, L, D, HEADS, HIDDEN = 4, 128, 128, 4, 512


def block_loss(p, x):
    h = x + nn.multi_head_attention(nn.layer_norm(x, p["g1"]), p, HEADS, causal=True)
    h = h + nn.gelu(nn.layer_norm(h, p["g2"]) @ p["w1"]) @ p["w2"]
    return xp.mean(h * h)


f32 = xp.float32
param_specs = {
    **{w: memory.spec((D, D), f32) for w in ("wq", "wk", "wv", "wo")},
    "w1": memory.spec((D, HIDDEN), f32),
    "w2": memory.spec((HIDDEN, D), f32),
    "g1": memory.spec(D, f32),
    "g2": memory.spec(D, f32),
}
p = memory.project(block_loss, param_specs, memory.spec((B, L, D), f32))
print("\n".join(str(p).splitlines()[:8]))

# %% [markdown]
# The first line is the summary; then one line per backend call (phase, outputs, bytes, live,
# peak). The figures, in bytes:

# %%
for name in ("forward_peak_bytes", "peak_bytes", "residual_bytes", "argument_bytes"):
    print(f"{name:20s} {memory.format_bytes(getattr(p, name))}")
print("peak at", p.peak_op)
p.check("1GB")  # raises MemoryLimitError, before anything runs, if the step would not fit

# %% [markdown]
# ## Against a measurement
#
# `memory.measure` runs the real step with tracemalloc on; its peaks are on the scale of the
# projection's `traced_*` figures (what tracemalloc can see).

# %%
rng = np.random.default_rng(0)
params = {
    k: xp.asarray((rng.standard_normal(s.shape) * s.shape[0] ** -0.5).astype(np.float32))
    for k, s in param_specs.items()
    if k.startswith("w")
}
params["g1"] = params["g2"] = xp.ones(D, dtype=f32)
x = xp.asarray(rng.standard_normal((B, L, D)).astype(np.float32))
m = memory.measure(block_loss, params, x)
print(
    f"f alone: projected {memory.format_bytes(p.traced_forward_peak_bytes)}, "
    f"measured {memory.format_bytes(m.forward_peak_bytes)}\n"
    f"step:    projected {memory.format_bytes(p.traced_peak_bytes)}, "
    f"measured {memory.format_bytes(m.peak_bytes)} "
    f"(measured/projected {m.peak_bytes / p.traced_peak_bytes:.2f})"
)

# %% [markdown]
# `Projection.plot` draws `f` alone and the step on one scale, each beside its measured peak:

# %%
fig = p.plot(measured=m, title=f"transformer block, batch {B}, length {L}, width {D}, float32")

# %% [markdown]
# ## Where the bytes go: attention written out
#
# `nn.multi_head_attention` calls one flash-style row: it works in blocks of queries and keys
# and keeps each row's log-sum-exp, never a (B, heads, L, L) score matrix. The same block with
# attention written out of standard functions keeps the scores and the probabilities on the
# tape; the projection shows the difference before anything runs.


# %%
def written_out_attention(h, p):
    hd = D // HEADS

    def heads(w):
        return xp.permute_dims(xp.reshape(h @ p[w], (B, L, HEADS, hd)), (0, 2, 1, 3))

    q, k, v = heads("wq"), heads("wk"), heads("wv")
    s = q @ xp.matrix_transpose(k) / hd**0.5
    causal = xp.tril(xp.ones((L, L), dtype=xp.bool))
    s = xp.where(causal, s, -xp.inf)
    probs = xp.exp(s - xp.max(s, axis=-1, keepdims=True))
    probs = probs / xp.sum(probs, axis=-1, keepdims=True)
    o = xp.reshape(xp.permute_dims(probs @ v, (0, 2, 1, 3)), (B, L, D))
    return o @ p["wo"]


def written_out_loss(p, x):
    h = x + written_out_attention(nn.layer_norm(x, p["g1"]), p)
    h = h + nn.gelu(nn.layer_norm(h, p["g2"]) @ p["w1"]) @ p["w2"]
    return xp.mean(h * h)


q = memory.project(written_out_loss, param_specs, memory.spec((B, L, D), f32))
print(f"scores: (B, heads, L, L) float32 = {memory.format_bytes(B * HEADS * L * L * 4)} each")
for name, proj in (("nn rows", p), ("written out", q)):
    print(
        f"{name:12s} step peak {memory.format_bytes(proj.peak_bytes):>9s}, "
        f"tape {memory.format_bytes(proj.residual_bytes):>9s}"
    )
