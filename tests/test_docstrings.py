"""Docstrings and comments name only what exists (issue 18: "docstrings naming methods that no
longer exist").

Every Sphinx role (``:func:`x```, ``:class:`~a.B```, ...) in the source of pycograd_xp and
cubed_plugin must resolve, from the module it is written in, to a live object; so must every
dotted name under ``pycograd_xp.``/``cubed_plugin.`` written in double backquotes.
"""

from __future__ import annotations

import builtins
import importlib
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
ROLE = re.compile(r":(?:mod|func|class|data|meth|attr|exc):`~?([^`]+)`")
DOTTED = re.compile(r"``((?:pycograd_xp|cubed_plugin)(?:\.[A-Za-z_][A-Za-z0-9_]*)+)``")
# Dotted names that are not Python objects.
NOT_OBJECTS = {"pycograd_xp.adapters"}  # the entry-point group backends' adapters register in
FILES = sorted(p for pkg in ("pycograd_xp", "cubed_plugin") for p in (ROOT / pkg).rglob("*.py"))


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve_dotted(name: str) -> bool:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for attr in parts[i:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return False
        return True
    return False


def resolves(target: str, module: str) -> bool:
    """Whether ``target`` (as written in a role) names something from ``module``."""
    target = target.removesuffix("()")
    if target.startswith("."):  # relative to the module's package
        package = (
            module
            if (ROOT / module.replace(".", "/") / "__init__.py").exists()
            else (module.rpartition(".")[0])
        )
        level = len(target) - len(target.lstrip("."))
        base = package.split(".")[: len(package.split(".")) - level + 1]
        return _resolve_dotted(".".join(base) + "." + target.lstrip("."))
    head, _, rest = target.partition(".")
    mod = importlib.import_module(module)
    if hasattr(mod, head):
        obj = getattr(mod, head)
        try:
            for attr in rest.split(".") if rest else ():
                obj = getattr(obj, attr)
        except AttributeError:
            return False
        return True
    if not rest and hasattr(builtins, head):
        return True
    if not rest and any(
        isinstance(c, type) and c.__module__ == module and hasattr(c, head)
        for c in vars(mod).values()
    ):
        return True  # a method or attribute of a class of the module, named from inside it
    return _resolve_dotted(target) or _resolve_dotted(f"{module}.{target}")


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_names_in_docstrings_exist(path):
    text, module = path.read_text(), _module_name(path)
    if module.startswith("cubed_plugin"):
        pytest.importorskip("cubed")
    missing = sorted(
        {t for t in ROLE.findall(text) if not resolves(t, module)}
        | {t for t in DOTTED.findall(text) if t not in NOT_OBJECTS and not _resolve_dotted(t)}
    )
    assert missing == [], f"{path.relative_to(ROOT)} names what does not exist: {missing}"


def test_the_checker_sees_a_missing_name():
    assert resolves("pycograd_xp.ops.REGISTRY", "pycograd_xp.ops")
    assert not resolves("pycograd_xp.namespace._ops.REGISTRY", "pycograd_xp.ops")
    assert not resolves("no_such_function", "pycograd_xp.tree")
    assert resolves("tree_map", "pycograd_xp.tree")
