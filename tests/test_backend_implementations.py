"""A backend's own implementations of rows are found from the row (issue 18: "Cubed's block
implementations of an op sit with the Cubed adapter but are found from the op").

``row.implement(backend, fn)`` registers them in ``pycograd_xp._primitive.IMPLEMENTATIONS``;
Cubed's completed namespace is built from that table, nothing completes it by name, and
``python -m pycograd_xp.ops --matrix`` shows them in a column per backend.
"""

from __future__ import annotations

import inspect
import os
import pathlib
import subprocess
import sys
import types

import pytest

from pycograd_xp import _primitive
from pycograd_xp._primitive import IMPLEMENTATIONS, implementations, implemented_backends
from pycograd_xp.ops import REGISTRY

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture
def plugin():
    """cubed_plugin imported (which registers its implementations; Cubed is not imported)."""
    return pytest.importorskip("cubed_plugin")


def _own_functions(ns: types.ModuleType, prefix: str = "") -> dict[str, object]:
    """The functions ``ns`` holds itself (not forwarded to Cubed), by backend attribute."""
    return {
        prefix + k: v
        for k, v in vars(ns).items()
        if callable(v) and (getattr(v, "__module__", "") or "").startswith("cubed_plugin")
    }


def test_every_function_cubed_gets_from_the_plugin_is_registered_against_its_row(plugin):
    cubed = pytest.importorskip("cubed")
    from cubed_plugin import _fft, _linalg, _sorting
    from cubed_plugin.namespace import augmented

    xp = augmented()
    got = {
        **_own_functions(xp),
        **_own_functions(xp.linalg, "linalg."),
        **_own_functions(xp.fft, "fft."),
    }
    registered = {i.attribute: i for i in implementations("cubed")}
    assert got.keys() == registered.keys()
    for attribute, fn in got.items():
        impl = registered[attribute]
        # each under cubed_plugin._operands.aligned (one Spec, compatible chunks)
        assert fn.__wrapped__ is impl.fn and impl.row.needs == (attribute,), attribute
        assert IMPLEMENTATIONS[(impl.row, "cubed")] is impl
    # and every public function of the completing modules is one of them: nothing by name
    for mod in (_fft, _linalg, _sorting):
        assert not hasattr(mod, "__all__"), mod.__name__
        public = {
            f
            for name, f in vars(mod).items()
            if inspect.isfunction(f) and f.__module__ == mod.__name__ and not name.startswith("_")
        }
        assert public <= {i.fn for i in registered.values()}, mod.__name__
    assert not hasattr(cubed, "sort")  # Cubed's own module untouched


def test_a_second_registration_of_a_row_for_a_backend_raises(plugin):
    sort = REGISTRY["sort"]
    first = IMPLEMENTATIONS[(sort, "cubed")]

    def sort_again(x, /, *, axis=-1, descending=False, stable=True):
        return x

    with pytest.raises(
        RuntimeError, match=r"sort: a 'cubed' implementation is registered twice"
    ) as e:
        sort.implement("cubed", sort_again)
    assert first.site in str(e.value) and "test_backend_implementations.py:" in str(e.value)
    assert IMPLEMENTATIONS[(sort, "cubed")] is first


def test_adapters_register_on_frozen_rows_once_per_backend(monkeypatch):
    monkeypatch.setattr(_primitive, "IMPLEMENTATIONS", {})
    row = REGISTRY["linalg.inv"]
    assert row._frozen

    @row.implement("toy")
    def inv(x, /):
        return x

    impl = _primitive.IMPLEMENTATIONS[(row, "toy")]
    assert impl.fn is inv and impl.attribute == "linalg.inv"
    assert impl.site.endswith(f"test_backend_implementations.py:{inv.__code__.co_firstlineno}")
    assert _primitive.implementations("toy") == [impl]
    assert _primitive.implemented_backends() == ("toy",)
    row.implement("other", inv)  # another backend: its own entry
    with pytest.raises(RuntimeError, match="linalg.inv: a 'toy' implementation is registered"):
        row.implement("toy", inv)
    with pytest.raises(ValueError, match="__getitem__: the row calls 0 backend functions"):
        REGISTRY["__getitem__"].implement("toy", inv)
    stray = _primitive.Primitive("linalg.inv", "general", None, None, ("linalg.inv",))
    with pytest.raises(ValueError, match="not a row of the table"):
        stray.implement("toy", inv)


def test_the_matrix_has_a_column_of_cubed_implementations_with_their_sites(plugin):
    from pycograd_xp.ops.__main__ import matrix

    assert "cubed" in implemented_backends()
    lines = matrix(("row", "cubed")).splitlines()
    assert lines[0].split() == ["op", "row", "cubed"]
    cells = {line.split()[0]: line.split()[2:] for line in lines[1:]}
    impls = implementations("cubed")
    # every @implements(...) line of the plugin is one implementation in the table
    declared = sum(
        line.startswith('@implements("')
        for path in (ROOT / "cubed_plugin").glob("*.py")
        for line in path.read_text().splitlines()
    )
    assert len(impls) == declared and declared >= 51, (len(impls), declared)
    for impl in impls:
        assert cells[impl.row.name] == [impl.site]
        path, _, line = impl.site.rpartition(":")
        assert path.startswith("cubed_plugin/_"), impl.site
        text = (ROOT / path).read_text().splitlines()[int(line) - 1]
        assert text == f'@implements("{impl.row.name}")', impl.site
    assert cells["sum"] == []  # Cubed's own: blank


def test_python_m_ops_matrix_loads_the_installed_adapters_without_cubed():
    """The column shows without importing cubed_plugin first (its entry point is loaded), and
    Cubed itself stays unimported."""
    pytest.importorskip("cubed_plugin")
    code = (
        "import sys; from pycograd_xp.ops.__main__ import main; main(['--matrix']); "
        "assert 'cubed' not in sys.modules, 'cubed imported'"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    ).stdout.splitlines()
    assert out[0].split()[-1] == "cubed"
    inv = next(line for line in out if line.startswith("linalg.inv "))
    assert inv.split()[-1].startswith("cubed_plugin/_linalg.py:")
