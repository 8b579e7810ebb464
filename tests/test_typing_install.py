"""The typed API as a user sees it: a module of theirs, checked by ``mypy --strict`` from a
directory outside the repository (none of the repository's settings apply there), against the
package as the README installs it. ``tests/typing/user_model.py`` passes; each line of
``tests/typing/user_mistakes.py`` marked ``MISTAKE`` is reported, with its error code."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent / "typing"
README_INSTALL = 'pip install -e ".[test,cubed,xarray]" --config-settings editable_mode=compat'


def _mypy(tmp_path: Path, name: str) -> subprocess.CompletedProcess:
    pytest.importorskip("mypy")
    shutil.copy(HERE / name, tmp_path / name)
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_typed_user_module_passes_from_outside_the_repository(tmp_path):
    r = _mypy(tmp_path, "user_model.py")
    assert "Cannot find implementation or library stub" not in r.stdout, (
        "mypy cannot see pycograd_xp from outside the repository: install it as the README "
        f"says ({README_INSTALL}); setuptools' default editable finder is invisible to type "
        f"checkers\n{r.stdout}"
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_users_mistakes_are_reported(tmp_path):
    r = _mypy(tmp_path, "user_mistakes.py")
    lines = (HERE / "user_mistakes.py").read_text().splitlines()
    want = {
        (i, m.group(1))
        for i, line in enumerate(lines, 1)
        if (m := re.search(r"# MISTAKE ([\w-]+)", line))
    }
    got = {
        (int(m.group(1)), m.group(2))
        for m in re.finditer(r"user_mistakes\.py:(\d+): error: .*\[([\w-]+)\]", r.stdout)
    }
    assert len(want) == 3
    assert got == want, r.stdout
