"""docs/calibration.md lists each measured constant once; its table must give the code's values,
and every comment that points to one of its sections must name a section that exists."""

from __future__ import annotations

import importlib
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "calibration.md").read_text()
ROWS = re.findall(r"^\| `(\w+)` \| `([\w/.]+)\.py` \| ([\d.]+) \|", DOC, re.M)


def test_the_table_lists_the_constants():
    assert len(ROWS) >= 9


@pytest.mark.parametrize(("name", "path", "value"), ROWS, ids=[r[0] for r in ROWS])
def test_each_value_is_the_codes(name, path, value):
    if path.startswith("cubed_plugin"):
        pytest.importorskip("cubed")
    module = importlib.import_module(path.replace("/", "."))
    assert getattr(module, name) == float(value)


def test_every_reference_names_a_section():
    sections = set(re.findall(r"^## ([\w-]+)$", DOC, re.M))
    cited = {
        m
        for pkg in ("pycograd_xp", "cubed_plugin")
        for p in (ROOT / pkg).rglob("*.py")
        for m in re.findall(r"docs/calibration\.md#([\w-]+)", p.read_text())
    }
    assert cited and cited <= sections, cited - sections
