"""MkDocs hooks (``mkdocs.yml``: ``hooks:``) and the generated sections of the Markdown.

- A block ``<!-- generated: NAME -->`` ... ``<!-- end: NAME -->`` in a page holds the output of
  the generator ``NAME`` below (the NumPy functions with a rule, the benchmarks' recorded
  results, the command's ``--help``, the cases the Cubed conformance run expects refused),
  written into the tracked Markdown so that the pages read the same on GitHub as on the site:
  ``python tools/docs_hooks.py`` rewrites every block, and ``tests/test_generated_docs.py``
  fails while one differs from what its generator gives. The site's build replaces each block
  with a fresh output too;
- the memory pictures are drawn by the build (``examples/memory_projection.py``,
  ``examples/memory_budget.py``, and ``examples/cubed_task_memory.py`` for the Cubed guide)
  and added to the site as generated files, never committed.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"<!-- generated: ([a-z_-]+) -->\n.*?<!-- end: \1 -->", re.S)
# the pages that hold generated blocks (the site's and GitHub's)
PAGES = (
    "docs/benchmarks.md",
    "docs/guides/backends.md",
    "docs/guides/cubed.md",
    "docs/guides/numpy-protocols.md",
)


def _load(relative: str, name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / relative)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _memory_picture() -> bytes:
    """The MLP step of examples/memory_projection.py: f alone and the step, each with its
    measured peak."""
    example = _load("examples/memory_projection.py", "_docs_memory_projection")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "memory_projection.png")
        with contextlib.redirect_stdout(io.StringIO()):
            example.main(out)
        return Path(out).read_bytes()


def _budget_picture() -> bytes:
    """examples/memory_budget.py: an MLP step fitted to 60 % of its peak, the recomputed calls
    marked, its measured peak beside."""
    example = _load("examples/memory_budget.py", "_docs_memory_budget")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "memory_budget.png")
        with contextlib.redirect_stdout(io.StringIO()):
            example.main(out)
        return Path(out).read_bytes()


def _cubed_picture() -> bytes:
    """examples/cubed_task_memory.py: a graph-mode step's plan on the processes executor, each
    op's task memory projected against measured. Run as a program: the executor's workers import
    its main script again, which must be the example's own (guarded), not mkdocs'."""
    import subprocess

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cubed_task_memory.png")
        run = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "cubed_task_memory.py"), "--out", out],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if run.returncode:
            raise RuntimeError(f"examples/cubed_task_memory.py failed:\n{run.stderr[-4000:]}")
        return Path(out).read_bytes()


def on_files(files, config):
    from mkdocs.structure.files import File

    files.append(File.generated(config, "guides/memory_projection.png", content=_memory_picture()))
    files.append(File.generated(config, "guides/memory_budget.png", content=_budget_picture()))
    files.append(File.generated(config, "guides/cubed_task_memory.png", content=_cubed_picture()))
    return files


def _cell(text: str) -> str:
    """A --matrix cell as a table cell: what the row has, its file and line in code."""
    site = re.search(r"(\S+\.py:\d+)$", text)
    words = text[: site.start()].strip() if site else text
    if site and not words:
        return f"`{site[1]}`"
    return f"{words} `{site[1]}`" if site else words


def ops_matrix() -> str:
    from pycograd_xp.namespace._backend import load_adapters
    from pycograd_xp.ops.__main__ import matrix

    load_adapters()
    lines = matrix().splitlines()
    header = lines[0].split()
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    starts = [lines[0].index(h) for h in header]
    for line in lines[1:]:
        cells = [
            line[a:b].strip() for a, b in zip(starts, [*starts[1:], len(line) + 1], strict=True)
        ]
        out.append("| " + " | ".join([f"`{cells[0]}`", *(_cell(c) for c in cells[1:])]) + " |")
    return f"{len(lines) - 1} rows.\n\n" + "\n".join(out)


def numpy_coverage() -> str:
    from pycograd_xp.ops.__main__ import numpy_table

    return "```text\n" + numpy_table() + "\n```"


def cli_help() -> str:
    from cubed_plugin.__main__ import main

    out = io.StringIO()
    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal: one width everywhere
    try:
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            main(["--help"], prog="python -m cubed_plugin.train")
    finally:
        if columns is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = columns
    return "```text\n" + out.getvalue().rstrip() + "\n```"


def _columns(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


def _bar(value: float, scale: float, width: int = 24) -> str:
    """A bar of ``value`` against ``scale`` (a chart readable in plain Markdown, on GitHub as on
    the site); a value past the scale is drawn to the end with a ``▸``."""
    if not scale or value != value or value <= 0:  # nothing to compare, NaN, or none
        return ""
    n = max(1, round(width * min(value, scale) / scale))
    return "`" + "█" * n + ("▸" if value > scale else "") + "`"


def _scale(values: list[float]) -> float:
    """The value a table's full bar stands for: its largest, or four times its median where
    an outlier (JAX eager's 200x) would flatten every other bar."""
    if not values:
        return 0.0
    ordered = sorted(values)
    median = ordered[len(ordered) // 2]
    return min(ordered[-1], 4 * median) if median > 0 else ordered[-1]


# a table's cell other than its first: a number (with a unit or a sign), a range ("0.81-0.98"),
# a pair of quartiles ("(0.920, 1.093)"), or a dash for none
_CELL = re.compile(r"-|[-+]?[\d.,]+\s?(?:x|%|ms|MB|MiB|s)?|[\d.]+-[\d.]+|\([-\d., ]+\)")


def _row(line: str, width: int) -> list[str] | None:
    """``line``'s cells when it is a row of a table ``width`` columns wide: a name, then cells
    that are all numbers (:data:`_CELL`); None otherwise."""
    cells = _columns(line)
    if len(cells) != width or len(cells) < 2:
        return None
    return cells if all(_CELL.fullmatch(c) for c in cells[1:]) else None


def _number(cell: str) -> float:
    m = re.match(r"[-+]?\d[\d.,]*", cell)
    return float(m[0].replace(",", "")) if m else float("nan")


def _bar_column(head: list[str]) -> int:
    """The column a table's bars draw: its ratio (a header with "/" or "ratio"), else its last."""
    for j, h in enumerate(head[1:], 1):
        if "ratio" in h or h.startswith("/") or " / " in h:
            return j
    return len(head) - 1


def benchmark_tables(output: str) -> str:
    """A benchmark's printed report as Markdown: each of its tables (a header line starting
    with ``contender`` or ``case``, then a row per contender whose other columns are numbers)
    as a table with a bar per row (its ratio column, or its last, against the table's largest),
    Markdown a benchmark prints itself (tables, ``#`` titles) as it is, the other lines as text
    beside them."""
    lines = output.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("|"):  # a Markdown table the benchmark printed
            out.append(line)
            if i + 1 == len(lines) or not lines[i + 1].startswith("|"):
                out.append("")
            i += 1
            continue
        if line.startswith("#"):  # a Markdown title
            if out and out[-1]:
                out.append("")
            out.append(f"**{line.lstrip('#').strip()}**\n")
            i += 1
            continue
        head = _columns(line) if line.strip() else []
        if head and head[0] in ("contender", "case"):
            rows = []
            i += 1
            while i < len(lines) and (cells := _row(lines[i], len(head))) is not None:
                rows.append(cells)
                i += 1
            bar = _bar_column(head)
            scale = _scale([_number(r[bar]) for r in rows])
            out.append("| " + " | ".join([*head, f"{head[bar]}, as a bar"]) + " |")
            out.append("|" + "---|" + "---:|" * (len(head) - 1) + "---|")
            for r in rows:
                name = f"**{r[0]}**" if r[0].startswith("pycograd_xp") else r[0]
                out.append("| " + " | ".join([name, *r[1:], _bar(_number(r[bar]), scale)]) + " |")
            out.append("")
            continue
        if line.strip():
            title = (
                not line.startswith(" ")
                and i + 1 < len(lines)
                and (_columns(lines[i + 1]) or [""])[0] in ("contender", "case")
            )
            if title and out and out[-1]:
                out.append("")
            out.append(f"**{line.strip()}**\n" if title else f"- {line.strip()}")
            if not title and (i + 1 == len(lines) or not lines[i + 1].strip()):
                out.append("")
        i += 1
    return "\n".join(out).rstrip() + "\n"


def benchmarks() -> str:
    parts = []
    for path in sorted((ROOT / "docs" / "benchmarks").glob("*.json")):
        r = json.loads(path.read_text())
        m = r["machine"]
        load = r.get("load")
        busy = (
            f"; load average {load['before']:.2f} before the run and {load['after']:.2f} after"
            f"{'' if load['quiet'] else ' (not a quiet machine: read the ratios with care)'}"
            if load
            else "; load not recorded"
        )
        parts.append(
            f"## {r['benchmark']}\n\n"
            f"`{r['command']}` ({r['configuration']}), run {r['date']} at commit "
            f"`{r['commit']}` on {m['cpu']}, {m['cores']} cores, Python "
            f"{m['python']}, NumPy {m['numpy']}{busy}; {r['seconds']} s.\n\n"
            + benchmark_tables(r["output"])
        )
    if not parts:
        raise RuntimeError("docs/benchmarks/ holds no results: run tools/bench_snapshot.py")
    return "\n".join(parts)


def cubed_refusals() -> str:
    """The cases the Cubed conformance run expects refused (``REFUSED`` in
    ``conformance/test_cubed_conformance.py``): each function, its cases, the error it raises."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # Cubed's own numpy.core import
        run = _load("conformance/test_cubed_conformance.py", "_docs_cubed_conformance")
    out = ["| function | cases | raises |", "|---|---|---|"]
    for (name, label), (error, fragment) in run.REFUSED.items():
        case = "every case" if label is None else f"case {label!r}"
        out.append(f'| `{name}` | {case} | `{error.__name__}`: "{fragment}" |')
    return "\n".join(out)


GENERATORS: dict[str, Callable[[], str]] = {
    "ops-matrix": ops_matrix,
    "numpy-coverage": numpy_coverage,
    "cli-help": cli_help,
    "benchmarks": benchmarks,
    "cubed-refusals": cubed_refusals,
}


def generate(markdown: str, where: str) -> str:
    """``markdown`` with each generated block holding its generator's output now."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))

    def replace(m: re.Match) -> str:
        if m[1] not in GENERATORS:
            raise KeyError(f"{where}: no generator named {m[1]!r} ({list(GENERATORS)})")
        return f"<!-- generated: {m[1]} -->\n{GENERATORS[m[1]]()}\n<!-- end: {m[1]} -->"

    return MARKER.sub(replace, markdown)


def on_page_markdown(markdown: str, page, config, files) -> str:
    return generate(markdown, page.file.src_uri)


def main() -> None:
    """Rewrite the generated blocks of the tracked pages (:data:`PAGES`)."""
    for page in PAGES:
        path = ROOT / page
        old = path.read_text()
        new = generate(old, page)
        if new != old:
            path.write_text(new)
            print(f"rewrote {page}")


if __name__ == "__main__":
    main()
