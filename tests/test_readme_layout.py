"""The README's layout (the code block under "How it is built") names what the tree holds:
every path it names exists, and every module and package of ``pycograd_xp`` and
``cubed_plugin`` is named there (as a path, or as a bare name beside one)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _layout() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("## How it is built", 1)[1].split("\n## ", 1)[0]
    return section.split("```", 2)[1]


def test_every_path_the_layout_names_exists():
    for line in _layout().splitlines():
        first = line.split(" ", 1)[0]
        if not first:
            continue
        brace = re.fullmatch(r"(.*)\{(.*)\}(.*)", first)
        names = [brace[1] + n + brace[3] for n in brace[2].split(",")] if brace else [first]
        for name in names:
            assert (ROOT / name).exists(), f"README layout names {name}, which is not in the tree"


def test_every_module_is_in_the_layout():
    layout = _layout()
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", layout))
    missing = []
    for package in ("pycograd_xp", "cubed_plugin"):
        for path in sorted((ROOT / package).iterdir()):
            if path.name.startswith("__") or path.name == "py.typed":
                continue
            stem = path.stem if path.suffix == ".py" else path.name
            if path.suffix not in (".py", "") or stem in words:
                continue
            missing.append(f"{package}/{path.name}")
    assert not missing, f"modules the README's layout does not name: {missing}"
