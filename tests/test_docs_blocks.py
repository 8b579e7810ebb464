"""Every Python block of README.md and docs/**/*.md runs as written.

A page's blocks run in order in one fresh interpreter (so a block may use what an earlier block
of its page defined, as a reader does), with ``SCIPY_ARRAY_API=1`` set before anything imports
SciPy, matplotlib's Agg backend, and a temporary working directory. Tracebacks name the page
and its line. Blocks in another language (``bash``, ``text``, none) are not run; a Python
block that is an excerpt, not a program, starts with the line ``# not run: <why>``. Pages
whose blocks train on Cubed (tens of seconds each) are marked slow: ``.ci/run`` runs them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+|~~~+)(?P<info>.*)$")
PYTHON = {"python", "py", "python3"}
NOT_RUN = "# not run:"

# Runs the blocks given as JSON on stdin: [[page, first line, source], ...].
DRIVER = """
import json, sys
for page, line, source in json.load(sys.stdin):
    code = compile("\\n" * (line - 1) + source, page, "exec")
    exec(code, globals())
"""


def blocks(path: Path) -> list[tuple[int, str, str]]:
    """(line of the block's first code line, language, source) of every fenced block."""
    out: list[tuple[int, str, str]] = []
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence = m["indent"], m["fence"]
        lang = m["info"].strip().split(" ")[0].strip("{.}").lower()
        body, j = [], i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j])
            j += 1
        if j == len(lines):
            raise ValueError(f"{path}:{i + 1}: a fence that is never closed")
        out.append((i + 2, lang, "\n".join(body) + "\n"))
        i = j + 1
    return out


def python_blocks(path: Path) -> list[tuple[int, str]]:
    return [
        (line, src)
        for line, lang, src in blocks(path)
        if lang in PYTHON and not src.lstrip().startswith(NOT_RUN)
    ]


def test_the_collector_finds_the_blocks():
    readme = python_blocks(ROOT / "README.md")
    assert len(readme) >= 3
    # a block marked as an excerpt is not run, and is the only kind left out
    excerpt = [
        src
        for _, lang, src in blocks(ROOT / "docs" / "architecture.md")
        if lang in PYTHON and src.startswith(NOT_RUN)
    ]
    assert excerpt, "docs/architecture.md's excerpt of a row's block is marked '# not run'"


def _cases() -> list:
    cases = []
    for page in PAGES:
        todo = python_blocks(page)
        if not todo:
            continue
        slow = any("import cubed" in src for _, src in todo)
        marks = [pytest.mark.slow] if slow else []
        cases.append(pytest.param(page, marks=marks, id=str(page.relative_to(ROOT))))
    return cases


@pytest.mark.parametrize("page", _cases())
def test_the_python_blocks_of_a_page_run(page, tmp_path):
    todo = python_blocks(page)
    name = str(page.relative_to(ROOT))
    env = dict(
        os.environ,
        SCIPY_ARRAY_API="1",
        MPLBACKEND="Agg",
        PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    )
    done = subprocess.run(
        [sys.executable, "-c", DRIVER],
        input=json.dumps([[name, line, src] for line, src in todo]),
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"a Python block of {name} failed:\n{done.stderr[-4000:]}"
