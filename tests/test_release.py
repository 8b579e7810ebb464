"""Release habits: one version number (pyproject.toml's), read back from the installed metadata;
a license, a changelog with that version, a citation file (issue 22, point 6). The wheel itself
is built, installed and smoke-tested by .ci/run (tests/smoke_wheel.py)."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import pycograd_xp
from pycograd_xp import _modules

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_the_version_is_the_installed_metadatas_and_pyprojects():
    installed = importlib.metadata.version("pycograd-xp")
    assert pycograd_xp.__version__ == installed
    assert installed == PYPROJECT["version"], (
        f"pyproject.toml says {PYPROJECT['version']}, the installed metadata {installed}: "
        "reinstall (pip install -e .)"
    )


def test_the_version_is_written_nowhere_else():
    pattern = re.compile(r"^\s*__version__\s*=|^version:", flags=re.M)
    for path in [*ROOT.glob("pycograd_xp/**/*.py"), *ROOT.glob("cubed_plugin/**/*.py")]:
        assert not pattern.search(path.read_text()), path
    assert not pattern.search((ROOT / "CITATION.cff").read_text())


def test_the_version_without_metadata(monkeypatch):
    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert _modules.version() == "0+unknown"


def test_license_changelog_and_citation():
    assert PYPROJECT["license"] == "MIT" and PYPROJECT["license-files"] == ["LICENSE"]
    license_text = (ROOT / "LICENSE").read_text()
    assert license_text.startswith("MIT License") and "the pycograd_xp authors" in license_text
    changelog = (ROOT / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", changelog, flags=re.M)
    assert headings[0] == ("Unreleased", ""), headings
    assert all(date for _, date in headings[1:]), headings
    assert PYPROJECT["version"] in [v for v, _ in headings], (
        f"CHANGELOG.md has no section for {PYPROJECT['version']}"
    )
    citation = (ROOT / "CITATION.cff").read_text()
    for key in ("cff-version: 1.2.0", "message:", "title:", "authors:"):
        assert re.search(rf"^{key}", citation, flags=re.M), key


def test_each_release_is_tagged_where_the_checkout_has_tags():
    """The scheme the changelog states: release X.Y.Z is the annotated tag vX.Y.Z on main. A
    clone without tags (CI's checkout of main) has nothing to compare."""
    import subprocess

    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert "tagged `vX.Y.Z` (an annotated tag" in changelog
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "tag", "--list", "v*"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except OSError:
        return
    tags = set(out.stdout.split()) if out.returncode == 0 else set()
    if not tags:
        return
    released = re.findall(r"^## \[(\d+\.\d+\.\d+)\]", changelog, flags=re.M)
    assert tags == {f"v{v}" for v in released}, (tags, released)
