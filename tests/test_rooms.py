"""Rooms a newcomer can live in (issue 34): no module over 800 lines but the flat catalogues that
docs/architecture.md names with their reason, and no rule function named ``_`` (a traceback
through a rule names it)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 800


def _exceptions() -> set[str]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = re.search(r"<!-- rooms: longer modules -->\n(.*?)<!-- end: rooms -->", text, re.S)
    assert block, "docs/architecture.md lost its list of the longer modules"
    return set(re.findall(r"^- `([^`]+\.py)`: \S", block[1], flags=re.M))


def _modules() -> list[Path]:
    return sorted(
        p
        for package in ("pycograd_xp", "cubed_plugin")
        for p in (ROOT / package).rglob("*.py")
        if "__pycache__" not in p.parts
    )


def test_no_module_over_the_limit_but_the_named_catalogues():
    allowed = _exceptions()
    long = {
        p.relative_to(ROOT).as_posix(): n
        for p in _modules()
        if (n := len(p.read_text().splitlines())) > LIMIT
    }
    unnamed = {p: n for p, n in long.items() if p not in allowed}
    assert not unnamed, (
        f"modules over {LIMIT} lines that docs/architecture.md does not name: {unnamed}; "
        "split them into rooms (or, for a flat catalogue of ops, name it there with its reason)"
    )
    stale = allowed - set(long)
    assert not stale, f"docs/architecture.md names modules no longer over {LIMIT} lines: {stale}"


def test_no_rule_function_is_named_underscore():
    found = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in _modules()
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if line.startswith("def _(")
    ]
    assert not found, f"rule functions named _ (name them after their op: tan_vjp): {found}"


def test_the_named_catalogues_are_the_long_ones():
    assert _exceptions() == {"pycograd_xp/ops/linalg.py", "pycograd_xp/ops/special.py"}
    assert all(len(p.read_text().splitlines()) > LIMIT for p in map(ROOT.joinpath, _exceptions()))


# 2,402 when issue 34 closed; budgeted steps (issue 36: the Remat frame, the resolution of
# recomputed residuals in _run_rule, grad's budget=) and issue 35's fast paths add to the path;
# then 5 lines of _run_rule: a rule told when two of its positions are one parent (Shared: two
# inputs over one backend array had x * x's cotangent), none run for an output with no element;
# and 2 of Array.to_device (its own device: the array itself, the tape kept); then 3 of
# Array.__index__ (CuPy's arrays have none) and 4 of Backend.device (a GPU's: whole arrays in
# the nn rows, and CuPy's product of stacks copying its operands in the memory model); then 4 of
# Backend.corrects and 7 in trigonometric.py (tanh and acosh putting right the special values
# CuPy's kernels miss); then 85 for _reductions.py (issue 35: NumPy's reductions without
# NumPy's Python layers, which the sum row now calls); then 6 in tanh's VJP (a large array
# block by block: the deep MLP anchor's step peaked at the square of a whole array); then 15 for
# _rules.vjp.kept (a reduction's result with its axes kept, which max, min, var and prod's VJPs
# broadcast in their ops instead of broadcast_to: the max rule of a log-softmax in half the time);
# then 17: 16 for _state.py's ``unwritable`` (remat's untaped forward pass on the arguments'
# buffers copies what it writes: per-thread state, so on the stack, the only place it may live,
# test_dispatch), 1 for _reductions.mean freeing its sum before NumPy's mean of no elements;
# then 16 in _tape.py: a rule that raises where every input it flows to holds no element is the
# zero map (Cubed 0.27's rechunk fails the rules' own operators on an empty axis); then 25:
# _reductions.broadcast_to (sum's and mean's cotangent as NumPy's view without NumPy's nditer:
# 4.3 us a call less) and _rules.vjp.raw reading a module's dict (a miss through NumPy's module
# __getattr__ cost 1.8 us, and rules ask it several times a step)
READING_BUDGET = 2739


def test_reading_grad_through_tanh_end_to_end_stays_within_its_budget():
    """A newcomer reading ``grad`` through ``tanh`` end to end reads the whole files a warm
    ``grad(lambda v: xp.sum(xp.tanh(v)))(x)`` runs code of (each file of the package that
    Python's profiler sees a call in) at most READING_BUDGET lines in all (it was 5,577 before
    the rooms renovation and 4,910 before its last step)."""
    import sys

    import numpy as np

    import pycograd_xp as pg
    from pycograd_xp import _parts

    xp = pg.namespace(np)
    x = xp.asarray(np.linspace(-1.0, 1.0, 8))
    f = pg.grad(lambda v: xp.sum(xp.tanh(v)))
    f(x)  # warm: the namespace built, the caches filled
    home = Path(pg.__file__).resolve().parent  # (installed or in the checkout)
    package = str(home)
    seen: set[str] = set()

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(package):
            seen.add(frame.f_code.co_filename)

    previous, watched = sys.getprofile(), _parts.WATCHED[0]
    _parts.WATCHED[0] = False  # a NumPy program's path (a Cubed namespace built earlier in this
    sys.setprofile(profile)  # process would add _parts.py, its labelling of Cubed's ops)
    try:
        f(x)
    finally:
        sys.setprofile(previous)
        _parts.WATCHED[0] = watched
    lines = {
        Path(p).relative_to(home.parent).as_posix(): len(Path(p).read_text().splitlines())
        for p in seen
    }
    assert "pycograd_xp/ops/elementwise/trigonometric.py" in lines, lines  # (the profiler saw it)
    assert sum(lines.values()) <= READING_BUDGET, sorted(lines.items(), key=lambda kv: -kv[1])
