"""pycograd_xp.memory's API: specs, projections, limits, and what a projection is made of."""

from __future__ import annotations

import subprocess
import sys
import time
import tracemalloc

import numpy as np
import pytest

import pycograd_xp as pg
from pycograd_xp import memory

XP = pg.namespace(np)


def mlp_loss(params, x, y):
    h = x
    for W, b in params[:-1]:
        h = XP.tanh(h @ W + b)
    W, b = params[-1]
    return XP.mean((h @ W + b - y) ** 2)


def _specs(d, layers, batch, dtype="float32"):
    params = [(memory.spec((d, d), dtype), memory.spec(d, dtype)) for _ in range(layers)]
    return params, memory.spec((batch, d), dtype), memory.spec((batch, d), dtype)


def test_projection_from_specs_counts_what_the_step_holds():
    d, batch = 1000, 50
    p = memory.project(mlp_loss, *_specs(d, 3, batch, "float64"))
    params_bytes = 3 * (d * d + d) * 8
    act = batch * d * 8
    assert p.argument_bytes == params_bytes + 2 * act
    # the tape keeps, per hidden layer, tanh's output (its rule saves "out"); the last layer's
    # input too: at least 2 activations beyond the arguments
    assert 2 * act <= p.residual_bytes <= 8 * act
    # backward adds one gradient per parameter
    assert p.peak_bytes >= params_bytes * 2 + 2 * act
    assert p.forward_peak_bytes < p.peak_bytes
    assert p.peak_op[1] == "backward"
    phases = {r.phase for r in p.rows}
    assert phases == {"forward", "backward"}
    assert all(r.peak_bytes >= r.live_bytes for r in p.rows)


def test_a_billion_parameters_project_in_under_a_second_and_ten_megabytes():
    args = _specs(16384, 4, 64)  # 4 x 16384^2 = 1.07e9 parameters, 4.3 GB of float32
    t = time.perf_counter()
    p = memory.project(mlp_loss, *args)
    elapsed = time.perf_counter() - t
    tracemalloc.start()
    memory.project(mlp_loss, *args)
    allocated = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert p.argument_bytes > 4.29e9 and p.peak_bytes > 2 * p.argument_bytes - 1e8
    assert elapsed < 1.0, elapsed
    assert allocated < 10e6, allocated


def test_real_arrays_specs_and_pytrees_mix():
    w = XP.ones((4, 3))
    p1 = memory.project(lambda w, x: XP.sum((x @ w) ** 2), w, memory.spec((10, 4)))
    p2 = memory.project(lambda w, x: XP.sum((x @ w) ** 2), memory.spec((4, 3)), XP.ones((10, 4)))
    assert p1.peak_bytes == p2.peak_bytes
    p3 = memory.project(lambda t, k: XP.sum(t["a"] * t["b"][0] * k), {"a": w, "b": [w]}, 3)
    assert p3.argument_bytes == 2 * w.size * 8


def test_creation_functions_inside_the_function_do_not_allocate():
    def f(x):
        big = XP.zeros((20000, 20000))  # 3.2 GB, if it were real
        return XP.sum(big[0:1, 0:10] * x)

    tracemalloc.start()
    p = memory.project(f, XP.ones(10))
    allocated = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert p.forward_peak_bytes > 3.2e9 and allocated < 10e6


def test_check_refuses_a_step_over_the_limit_naming_the_op():
    p = memory.project(mlp_loss, *_specs(1000, 2, 10, "float64"))
    assert p.check(p.peak_bytes) is p
    assert p.check("1 TB") is p
    with pytest.raises(
        memory.MemoryLimitError,
        match=r"projected peak .* at \w+ \(row \d+, "
        r"(forward|backward|update)\) exceeds the limit 1\.0 MB .*remat",
    ):
        p.check("1MB")
    with pytest.raises(ValueError, match="cannot read 'lots'"):
        p.check("lots")
    for bad in ("2 GBytes", "1e", "12 parsecs", ""):
        with pytest.raises(ValueError, match="as a number of bytes"):
            p.check(bad)


@pytest.mark.parametrize(
    "text, n",
    [
        ("2GB", 2 * 10**9),
        ("512 MiB", 512 * 2**20),
        ("100kB", 10**5),
        (12345, 12345),
        ("7", 7),
        # Dask's parse_bytes reads these too
        ("100KB", 10**5),
        ("100 KiB", 100 * 1024),
        ("1e5", 10**5),
        ("150mb", 150 * 10**6),
        ("5k", 5000),
        ("1.5 GB", 1_500_000_000),
        (".5MiB", 2**19),
    ],
)
def test_parse_bytes(text, n):
    from pycograd_xp.memory._units import parse_bytes

    assert parse_bytes(text) == n


@pytest.mark.parametrize("amount", [-5, -1.0, float("nan"), float("inf")])
def test_a_negative_or_non_finite_size_is_refused_in_one_line(amount):
    """A budget of -5 bytes is a mistake, not a budget no schedule fits: memory.within, the CLI
    and allowed_mem all read sizes here."""
    from pycograd_xp.memory._units import parse_bytes

    with pytest.raises(ValueError, match="is not a number of bytes: give a size of 0 or more"):
        parse_bytes(amount)
    with pytest.raises(ValueError, match="is not a number of bytes"):
        memory.within(mlp_loss, amount, *_specs(100, 2, 10))


def test_projection_prints_one_line_per_op():
    p = memory.project(mlp_loss, *_specs(100, 2, 10))
    text = str(p)
    assert text.splitlines()[0].startswith("projected step: peak")
    assert len(text.splitlines()) == 2 + len(p.rows)
    assert "<- peak" in text and "matmul" in text and "backward" in text
    d = p.as_dict()
    assert d["peak_bytes"] == p.peak_bytes and len(d["rows"]) == len(p.rows)


def test_the_table_has_no_row_for_a_dtype_query_and_names_every_output():
    """``isdtype`` (nn's activations ask it) allocates nothing: no row, no slack. A row of
    several outputs too wide for its column shows the first and how many more, not a cut
    one."""
    from pycograd_xp import nn

    def loss(x, w):
        h = nn.gelu(nn.layer_norm(x) @ w)  # layer_norm: output, mean and 1 / std
        return XP.sum(XP.astype(h, XP.float64) if XP.isdtype(h.dtype, "real floating") else h)

    p = memory.project(loss, memory.spec((512, 784)), memory.spec((784, 1024)))
    assert all(r.op != "isdtype" for r in p.rows)
    ln = next(r for r in p.rows if r.op == "_layer_norm")
    assert len(ln.outputs) == 3
    line = next(t for t in str(p).splitlines() if " _layer_norm " in t)
    assert "float64[512, 784] +2 more" in line


def test_bad_specs_are_refused():
    with pytest.raises(ValueError, match="negative"):
        memory.spec((-1, 3))
    with pytest.raises(TypeError):
        memory.spec((3,), "not-a-dtype")


def _dtype_objects():
    """Every kind of dtype object a user may hold, with the NumPy dtype it names."""
    import array_api_strict as strict

    cases = [
        (XP.float32, "float32"),
        (XP.int16, "int16"),
        (np.float32, "float32"),
        (np.dtype("complex64"), "complex64"),
        ("float32", "float32"),
        ("uint8", "uint8"),
        (float, "float64"),
        (int, "int64"),
        (complex, "complex128"),
        (bool, "bool"),
        (strict.float32, "float32"),
        (strict.int8, "int8"),
        (strict.bool, "bool"),
        (pg.namespace(strict).complex128, "complex128"),
    ]
    try:
        import cubed
    except ImportError:
        return cases
    return [
        *cases,
        (cubed.float32, "float32"),
        (cubed.uint32, "uint32"),
        (pg.namespace(cubed).float64, "float64"),
    ]


@pytest.mark.parametrize("dtype, name", _dtype_objects(), ids=repr)
def test_spec_takes_every_dtype_a_user_holds(dtype, name):
    s = memory.spec((3, 4), dtype)
    assert isinstance(s.dtype, np.dtype) and s.dtype == np.dtype(name)
    assert s.nbytes == 12 * np.dtype(name).itemsize
    assert repr(s) == f"spec((3, 4), {name})"
    assert s == memory.spec((3, 4), name)
    p = memory.project(lambda x: XP.concat([XP.reshape(x, (-1,)), x[0]]), s, argnums=())
    assert p.argument_bytes == s.nbytes and p.peak_bytes > 2 * s.nbytes


@pytest.mark.parametrize("dtype", ["bfloat16", "U3", object, "not-a-dtype"])
def test_spec_refuses_what_is_no_standard_dtype(dtype):
    with pytest.raises(
        TypeError,
        match=r"spec: .* is not one of the standard's data types "
        r"\(bool, .*complex128\); pass one as your namespace",
    ):
        memory.spec((3,), dtype)


def test_values_cannot_be_branched_on_while_projecting():
    def f(x):
        return XP.sum(x) if float(XP.sum(x)) > 0 else -XP.sum(x)

    with pytest.raises(TypeError, match="being differentiated|no value"):
        memory.project(f, XP.ones(3))


def test_plot_draws_projected_beside_measured(tmp_path):
    pytest.importorskip("matplotlib")
    w = XP.ones((50, 50))
    f = lambda w, x: XP.sum(XP.tanh(x @ w) ** 2)
    x = XP.ones((20, 50))
    p, m = memory.project(f, w, x), memory.measure(f, w, x)
    fig = p.plot(str(tmp_path / "p.png"), measured=m)
    assert (tmp_path / "p.png").stat().st_size > 10_000
    # two panels on one scale, f alone and the step, each with its own peaks labelled for it
    # (one measured forward peak under the step's curve once read as the step's forward part)
    alone, step = ([t.get_text() for t in ax.get_legend().get_texts()] for ax in fig.axes)
    want = memory.format_bytes(p.forward_peak_bytes, decimals=1)
    assert f"projected peak of f alone, no tape {want}" in alone
    assert any(t.startswith("measured peak of f alone, no tape") for t in alone)
    assert any(t.startswith("projected peak of value_and_grad step") for t in step)
    assert any(t.startswith("measured peak of value_and_grad step") for t in step)
    assert fig.axes[0].get_ylim() == fig.axes[1].get_ylim()
    # f taken as it is: one panel, the call
    q = memory.project(f, w, x, argnums=())
    fig = q.plot(str(tmp_path / "q.png"))
    assert len(fig.axes) == 1
    assert fig.axes[0].get_title(loc="left") == "one call of f, as it is"


def test_a_special_functions_first_call_measures_no_import():
    """scipy.special is imported on a special function's first call (NumPy's erf, for gelu's
    exact form): 3.5 MB of Python objects tracemalloc counted as the function's, so the first
    measure in a process read 100 times the projection. measure imports it before tracing."""
    pytest.importorskip("scipy")
    code = (
        "import numpy as np, pycograd_xp as pg\n"
        "from pycograd_xp import memory, nn\n"
        "xp = pg.namespace(np)\n"
        "x = xp.asarray(np.float32(0.3))\n"
        "f = lambda x: xp.sum(nn.gelu(x, approximate=False))\n"
        "print(memory.measure(f, x, argnums=()).peak_bytes,"
        " memory.project(f, x, argnums=()).traced_peak_bytes)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    measured, projected = int(out[0]), int(out[1])
    assert measured <= projected
