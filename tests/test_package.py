"""The package's attributes: submodules imported on first use, a namespace per installed array
backend, and nothing else (no arbitrary module imported by a typo or a ``hasattr``)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest

import pycograd_xp as pg
from pycograd_xp import _modules
from pycograd_xp.namespace import _backend

SUBMODULES = [
    "checkpoint",
    "data",
    "memory",
    "nn",
    "optim",
    "random",
    "special",
    "train",
    "tree",
    "typing",
]


def _run(code: str) -> None:
    """Run ``code`` in a fresh interpreter (what is imported there is what the package did)."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_submodules_are_attributes_imported_on_first_use():
    _run(
        """
        import sys
        import pycograd_xp as pg

        for name in ("optim", "nn", "train", "data", "checkpoint"):
            assert f"pycograd_xp.{name}" not in sys.modules, name
        xp = pg.numpy
        w = xp.asarray([1.0, -2.0])
        opt = pg.optim.adam(0.1)
        state = opt.init(w)
        g = pg.grad(lambda w: xp.sum(w * w))(w)
        updates, state = opt.update(g, state, w)
        w = pg.optim.apply_updates(w, updates)
        assert float(w[0]) < 1.0
        for name in ("optim", "nn", "train", "data", "checkpoint", "random", "memory"):
            assert getattr(pg, name) is sys.modules[f"pycograd_xp.{name}"], name
        """
    )


@pytest.mark.parametrize("name", SUBMODULES)
def test_submodule_attribute_is_the_module(name):
    import importlib

    assert getattr(pg, name) is importlib.import_module(f"pycograd_xp.{name}")


def test_dir_lists_submodules_and_installed_backends():
    names = dir(pg)
    assert set(SUBMODULES) <= set(names)
    assert {"numpy", "array_api_strict", "grad", "namespace", "__version__"} <= set(names)
    assert "sys" not in names and "annotations" not in names and "_modules" not in names
    assert names == sorted(names)
    for missing in ("dpnp", "ndonnx", "mparray"):  # known backends, installed in no CI
        if _modules._installed(missing):
            continue
        assert missing not in names


def test_backend_attributes_are_namespaces():
    import array_api_strict

    assert pg.numpy is pg.namespace(np)
    assert pg.array_api_strict is pg.namespace(array_api_strict)
    from pycograd_xp import array_api_strict as xs

    assert xs is pg.namespace(array_api_strict)
    import pycograd_xp.numpy.linalg as la

    assert la is pg.namespace(np).linalg


def test_unknown_attribute_suggests_a_close_name():
    with pytest.raises(AttributeError, match=r"has no attribute 'gard'; did you mean 'grad'\?"):
        pg.gard  # noqa: B018
    with pytest.raises(AttributeError, match="did you mean 'optim'"):
        pg.optimm  # noqa: B018
    with pytest.raises(AttributeError, match="did you mean 'numpy'"):
        pg.nmupy  # noqa: B018
    with pytest.raises(AttributeError) as e:
        pg.__wrapped__  # noqa: B018
    assert e.value.name == "__wrapped__"


def test_other_names_import_nothing():
    _run(
        """
        import sys
        import pycograd_xp as pg

        before = set(sys.modules)
        try:
            pg.this
        except AttributeError as e:
            assert "not known to be an array backend" in str(e), e
        else:
            raise AssertionError("pg.this")
        assert not hasattr(pg, "sklearn")
        assert not hasattr(pg, "json")
        try:
            import pycograd_xp.this
        except ModuleNotFoundError:
            pass
        else:
            raise AssertionError("import pycograd_xp.this")
        try:
            from pycograd_xp import sklearn
        except ImportError:
            pass
        else:
            raise AssertionError("from pycograd_xp import sklearn")
        dir(pg)
        new = set(sys.modules) - before
        assert not {"this", "sklearn", "json"} & new, new
        assert not [m for m in new if m.split(".")[0] in ("jax", "dask", "torch")], new
        """
    )


def test_known_backend_not_installed(monkeypatch):
    monkeypatch.setitem(_modules.BACKENDS, "nonexistent_backend_xyz", "nonexistent_backend_xyz")
    with pytest.raises(AttributeError, match="'nonexistent_backend_xyz', which is not installed"):
        pg.nonexistent_backend_xyz  # noqa: B018
    with pytest.raises(ModuleNotFoundError):
        import pycograd_xp.nonexistent_backend_xyz  # noqa: F401
    assert "nonexistent_backend_xyz" not in dir(pg)


def test_what_counts_as_a_backend(monkeypatch):
    assert _modules.backend_module("numpy") == "numpy"
    assert _modules.backend_module("dask_array") == "dask.array"
    assert _modules.backend_module("cubed") == "cubed"  # also cubed_plugin's entry point
    assert _modules.backend_module("json") is None
    assert _modules.backend_module("_private") is None
    # a module already imported that implements the standard
    fake = types.ModuleType("my_array_lib")
    monkeypatch.setitem(sys.modules, "my_array_lib", fake)
    assert _modules.backend_module("my_array_lib") is None
    fake.__array_api_version__ = "2025.12"
    fake.asarray = np.asarray
    assert _modules.backend_module("my_array_lib") == "my_array_lib"
    # a backend an adapter is registered for at run time
    monkeypatch.setitem(_backend._ADAPTERS, "other_array_lib", lambda b: b)
    assert _modules.backend_module("other_array_lib") == "other_array_lib"
    assert "other_array_lib" not in dir(pg)  # registered, but not installed


def test_pickled_function_finds_its_namespace_in_a_fresh_process(tmp_path):
    cloudpickle = pytest.importorskip("cloudpickle")
    import array_api_strict

    xs = pg.namespace(array_api_strict)

    def f(x):
        return xs.sum(xs.linalg.vecdot(x, x))

    path = tmp_path / "f.pkl"
    path.write_bytes(cloudpickle.dumps(f))
    _run(
        f"""
        import pickle
        import sys

        f = pickle.loads(open({str(path)!r}, "rb").read())
        assert "array_api_strict" in sys.modules
        import pycograd_xp as pg

        x = pg.array_api_strict.asarray([1.0, 2.0])
        assert [float(v) for v in pg.grad(f)(x)] == [2.0, 4.0]
        """
    )


@pytest.mark.parametrize("name", SUBMODULES)
def test_a_submodule_s_dir_lists_its_public_names_not_its_imports(name):
    import importlib

    mod = importlib.import_module(f"pycograd_xp.{name}")
    names = dir(mod)
    public = [n for n in names if not n.startswith("_")]
    assert public == sorted(mod.__all__), set(public) ^ set(mod.__all__)
    assert "__name__" in names and "__doc__" in names
    assert all(hasattr(mod, n) for n in names)
