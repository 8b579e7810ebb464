"""The generated sections of the pages (``<!-- generated: NAME -->`` blocks: the command's
``--help``, the NumPy functions with a rule, the benchmarks' recorded results) are written into
the tracked Markdown, so they read on GitHub as on the site; each must equal what its generator
gives now (``python tools/docs_hooks.py`` rewrites them)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("_docs_hooks", ROOT / "tools" / "docs_hooks.py")
hooks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hooks)


@pytest.mark.parametrize("page", hooks.PAGES)
def test_generated_sections_are_current(page):
    pytest.importorskip("cubed")  # the command's --help needs cubed_plugin's extra
    text = (ROOT / page).read_text()
    assert hooks.MARKER.search(text), f"{page} has no generated block"
    assert hooks.generate(text, page) == text, (
        f"{page}: a generated section is stale; run python tools/docs_hooks.py"
    )
