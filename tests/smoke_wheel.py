"""The release's smoke test (.ci/run), not collected by pytest.

    python tests/smoke_wheel.py --contents dist/pycograd_xp-*.whl   # in the source tree
    python /path/to/tests/smoke_wheel.py                             # where the wheel is installed

``--contents``: the wheel holds every file of the two packages (their package data too), the
license and the entry point, and nothing else. Without it: run from a virtual environment that
has the wheel installed with the ``cubed`` extra and a working directory outside the source tree,
it checks that the installed package (not the source) imports, reports its version, takes a
gradient, steps ``optim.adam``, projects a step's memory and runs the command line with tiny
sizes, which leaves no work directory behind.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

SOURCE = Path(__file__).resolve().parent.parent
PACKAGES = ("pycograd_xp", "cubed_plugin")


def check_contents(wheel: str) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {
        p.relative_to(SOURCE).as_posix()
        for package in PACKAGES
        for p in (SOURCE / package).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }
    missing = expected - names
    assert not missing, f"{wheel} lacks {sorted(missing)}"
    info = {n for n in names if ".dist-info/" in n}
    extra = names - expected - info
    assert not extra, f"{wheel} holds files of no package: {sorted(extra)}"
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in info), sorted(info)
    entry_points = next(n for n in info if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "[pycograd_xp.adapters]" in text and "cubed = cubed_plugin:adapt" in text, text
    print(f"{Path(wheel).name}: {len(expected)} package files, the license, the entry point")


def smoke() -> None:
    import importlib.metadata

    import numpy as np

    import pycograd_xp as pg

    installed = Path(pg.__file__).resolve()
    assert SOURCE not in installed.parents, f"imported the source tree: {installed}"
    assert pg.__version__ == importlib.metadata.version("pycograd-xp") != "0+unknown"
    assert {"optim", "nn", "memory", "numpy", "cubed"} <= set(dir(pg))

    xp = pg.numpy
    w = xp.asarray([0.1, -0.2, 0.3])
    x = xp.asarray(np.arange(6.0).reshape(2, 3))

    def loss(w, x):
        return xp.mean(xp.tanh(x @ w) ** 2)

    g = pg.grad(loss)(w, x)
    z = np.tanh(np.arange(6.0).reshape(2, 3) @ np.array([0.1, -0.2, 0.3]))
    expected = np.arange(6.0).reshape(2, 3).T @ (z * (1 - z**2))  # mean of 2 rows of t^2
    np.testing.assert_allclose(np.asarray(pg.unwrap(g)), expected, rtol=1e-10)

    tx = pg.optim.adam(0.1)
    state = tx.init(w)
    updates, state = tx.update(g, state, w)
    w2 = pg.optim.apply_updates(w, updates)
    assert float(loss(w2, x)) < float(loss(w, x))

    p = pg.memory.project(loss, pg.memory.spec((3,)), pg.memory.spec((1000, 3)))
    assert p.peak_bytes >= 1000 * 3 * 8, p

    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            [sys.executable, "-m", "cubed_plugin.train", "--rows", "4000", "--features", "5"]
            + ["--steps", "2", "--quiet", "--allowed-mem", "150MB", "--reserved-mem", "100MB"],
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "TMPDIR": tmp},
        )
        assert out.returncode == 0, out.stdout + out.stderr
        assert "trained 2 steps" in out.stdout, out.stdout
        work = re.search(r"^work directory (\S+) ", out.stdout, flags=re.M)[1]
        assert work.startswith(tmp) and not os.path.exists(work), out.stdout
        assert not os.listdir(tmp), os.listdir(tmp)
    print(
        f"pycograd_xp {pg.__version__} from {installed.parent}: import, grad, optim.adam, "
        "memory.project and python -m cubed_plugin.train work"
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--contents"]:
        check_contents(sys.argv[2])
    else:
        smoke()
