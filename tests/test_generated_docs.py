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


def test_a_benchmarks_report_becomes_tables_with_bars():
    """Each printed table (a ``contender``/``case`` header, a row per contender ending in a
    number) becomes a Markdown table whose last column is also drawn as a bar, ours in bold;
    a far outlier is drawn to the end with a mark, so it does not flatten the others."""
    report = "\n".join(
        [
            "step, batch 8",
            "  contender            ms    ratio",
            "  numpy by hand     1.000     1.00",
            "  pycograd_xp (numpy)  2.000     2.00",
            "  JAX eager       100.000   100.00",
            "  pycograd_xp / numpy: 2.00",
        ]
    )
    md = hooks.benchmark_tables(report).splitlines()
    assert md[0] == "**step, batch 8**"
    assert md[2] == "| contender | ms | ratio | ratio, as a bar |"
    assert md[4] == "| numpy by hand | 1.000 | 1.00 | `███` |"
    assert md[5] == "| **pycograd_xp (numpy)** | 2.000 | 2.00 | `██████` |"
    assert md[6] == "| JAX eager | 100.000 | 100.00 | `████████████████████████▸` |"
    assert md[8] == "- pycograd_xp / numpy: 2.00"


def test_each_recorded_benchmark_says_its_load():
    import json

    for path in sorted((ROOT / "docs" / "benchmarks").glob("*.json")):
        r = json.loads(path.read_text())
        assert {"date", "commit", "machine", "output"} <= set(r), path
        if "load" in r:
            assert {"before", "after", "quiet"} <= set(r["load"]), path


def test_a_report_with_ranges_quartiles_and_markdown_keeps_its_columns():
    """Rows whose cells are ranges, quartile pairs or dashes stay tables; the bar draws the ratio
    column, not the last; Markdown a benchmark prints (a table, a ``##`` title) passes as is."""
    report = "\n".join(
        [
            "block step",
            "  contender      CPU ms   CPU / PyTorch    (quartiles)",
            "  pycograd_xp     184.2            0.97      0.81-0.98",
            "  PyTorch eager   188.9            1.00      1.00-1.00",
            "epoch",
            "  contender   ms/epoch  /PyTorch eager        (q1, q3)  bytecodes",
            "  pycograd_xp    17.52           1.021  (0.920, 1.093)     314326",
            "  PyTorch         -              1.000  (1.000, 1.000)      74520",
            "## MLP, budgets",
            "| budget | measured |",
            "|---|---|",
            "| 50% | 47.6 MB |",
        ]
    )
    md = hooks.benchmark_tables(report).splitlines()
    assert md[2] == "| contender | CPU ms | CPU / PyTorch | (quartiles) | CPU / PyTorch, as a bar |"
    assert md[4] == "| **pycograd_xp** | 184.2 | 0.97 | 0.81-0.98 | `███████████████████████` |"
    assert md[5] == "| PyTorch eager | 188.9 | 1.00 | 1.00-1.00 | `████████████████████████` |"
    assert md[11].startswith("| **pycograd_xp** | 17.52 | 1.021 | (0.920, 1.093) | 314326 |")
    assert md[12].startswith("| PyTorch | - | 1.000 | (1.000, 1.000) | 74520 |")
    assert "**MLP, budgets**" in md
    assert md[-1] == "| 50% | 47.6 MB |"
