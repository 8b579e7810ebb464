"""The package's shape: no import cycles, no layer importing a layer above it, and every op's
rules declared beside its row (issue 18: "one op, one place").

The import graph is read from the source (every import statement, function-local ones too;
``importlib`` calls are not seen), so the test needs nothing imported to check the layering.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

from pycograd_xp.ops import REGISTRY

ROOT = pathlib.Path(__file__).resolve().parents[1]

# Lowest first. A module may import its own layer and the layers below, never one above.
LAYERS = (
    (
        "the table and the tape",
        (
            "typing",
            "_exports",
            "_host",
            "tree",
            "_tape",
            "_primitive",
            "_state",
            "_parts",
            "_buffers",
            "_nans",
            "_recompute",
            "_reductions",
        ),
    ),
    ("arrays and namespaces", ("namespace",)),
    ("the ops and abstract values", ("_abstract", "ops")),
    (
        "the transforms",
        (
            "_api",
            "_vjp",
            "_forward",
            "_vmap",
            "_custom",
            "_remat",
            "_schedule",
            "_compile",
            "memory",
        ),
    ),
    (
        "the toolkit",
        (
            "nn",
            "special",
            "optim",
            "train",
            "data",
            "random",
            "checkpoint",
            "numpy_api",
            "_modules",
            "__init__",
        ),
    ),
)
# A package's ``__main__`` (``python -m pycograd_xp.ops --numpy``) is a command-line entry point
# that nothing imports: it sits on the top layer, whatever package it lives in, and may report on
# any layer (the ops' matrix lists the NumPy frontend's tables).
ENTRY_POINT = "__main__"


def _modules(package: str) -> dict[str, pathlib.Path]:
    mods = {}
    for path in (ROOT / package).rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    return mods


def _statements(tree: ast.Module) -> list[ast.AST]:
    """Every import statement, function-local ones too (a local import is a dependency all the
    same), except those under ``if TYPE_CHECKING``."""
    out, stack = [], list(tree.body)
    while stack:
        node = stack.pop()
        out.append(node)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        stack += list(ast.iter_child_nodes(node))
    return out


def import_graph(package: str) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, at import time or later (a submodule import
    counts as importing each package above it too, as Python does)."""
    mods = _modules(package)
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        is_pkg = path.name == "__init__.py"
        deps: set[str] = set()
        for node in _statements(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name in mods}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if is_pkg else name.split(".")[:-1]
                    base = base[: len(base) - node.level + 1]
                    src = ".".join(base + ([node.module] if node.module else []))
                else:
                    src = node.module or ""
                for a in node.names:
                    full = f"{src}.{a.name}"
                    deps.add(full if full in mods else src)
        closed = set()
        for d in deps & mods.keys():
            parts = d.split(".")
            closed |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
        graph[name] = {
            d for d in closed & mods.keys() if d != name and not name.startswith(d + ".")
        }
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return found


@pytest.mark.parametrize("package", ["pycograd_xp", "cubed_plugin"])
def test_no_import_cycles(package):
    assert cycles(import_graph(package)) == []


def _layer(module: str) -> int:
    if module.rpartition(".")[2] == ENTRY_POINT:
        return len(LAYERS) - 1
    top = module.split(".")[1] if "." in module else "__init__"
    for i, (_, tops) in enumerate(LAYERS):
        if top in tops:
            return i
    raise AssertionError(f"{module}: in no layer of tests/test_layers.py; add it to LAYERS")


def test_no_layer_imports_one_above_it():
    upward = [
        f"{m} ({LAYERS[_layer(m)][0]}) imports {d} ({LAYERS[_layer(d)][0]})"
        for m, deps in import_graph("pycograd_xp").items()
        for d in deps
        if d != "pycograd_xp" and _layer(d) > _layer(m)
    ]
    assert upward == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_rule_of_an_op_is_declared_beside_its_row(name):
    """``grep`` of an op's name finds all of it in one file: the row and each of its rules."""
    prim = REGISTRY[name]
    home = prim.sites["row"].rpartition(":")[0]
    assert home.startswith("ops/") and not home.startswith("ops/_rules/"), home
    elsewhere = {k: s for k, s in prim.sites.items() if s.rpartition(":")[0] != home}
    assert elsewhere == {}, f"{name} is declared in {home}"
    assert {"row", "vjp", "batch", "shape"} <= prim.sites.keys()
    assert prim.nondiff or "jvp" in prim.sites


def test_rows_are_frozen():
    prim = REGISTRY["sum"]
    with pytest.raises(AttributeError, match="sum: rows are frozen"):
        prim.vjp = None
    assert prim.vjp is not None
    with prim.replaced(vjp=None):
        assert prim.vjp is None
    assert prim.vjp is not None


def test_the_core_imports_neither_cubed_nor_its_adapter():
    """The core knows Cubed's adapter by its entry point and its implementations of rows by a
    label (``row.implement("cubed", fn)``), never by importing them. (CuPy's adapter is in the
    core, ``namespace/_cupy.py``, and imports CuPy when used.)"""
    foreign = ("cubed", "cubed_plugin")
    found = []
    for name, path in _modules("pycograd_xp").items():
        for node in _statements(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                mods = [node.module or ""]
            else:
                continue
            found += [f"{name} imports {m}" for m in mods if m.split(".")[0] in foreign]
    assert found == []


def test_nothing_imports_an_entry_point():
    """What lets a ``__main__`` sit on the top layer (``ENTRY_POINT``): no module imports it."""
    found = [
        f"{m} imports {d}"
        for m, deps in import_graph("pycograd_xp").items()
        for d in deps
        if d.rpartition(".")[2] == ENTRY_POINT
    ]
    assert found == []


def test_every_rule_is_named_after_its_row():
    """A traceback through a rule names the row: a lambda or a kit's ``rule`` attached to a row
    is renamed ``<row>.<kind>`` (``tan.vjp``); no rule keeps an anonymous name."""
    import traceback

    anonymous = {"<lambda>", "_", "rule", "vjp", "jvp", "batch", "shape"}
    found = [
        f"{row.name}.{kind}"
        for row in REGISTRY.values()
        for kind in ("vjp", "jvp", "batch", "shape")
        if getattr(getattr(row, kind), "__code__", None) is not None
        and getattr(row, kind).__code__.co_name in anonymous
    ]
    assert found == [], found
    rule = REGISTRY["tan"].vjp
    assert rule.__name__ == "tan.vjp"
    try:
        rule(None, None, None, None)  # (no namespace, no values: the rule's body fails at once)
    except TypeError as e:
        frames = [f.name for f in traceback.extract_tb(e.__traceback__)]
    assert "tan.vjp" in frames, frames
