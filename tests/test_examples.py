"""The examples run and do what they say."""

from __future__ import annotations

import runpy
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_quickstart_trains_and_agrees_across_backends(capsys):
    runpy.run_path(str(EXAMPLES / "quickstart.py"), run_name="__main__")
    out = capsys.readouterr().out
    last_loss = float(out.split("step 200  loss ")[1].split()[0])
    assert last_loss < 0.15
    assert "pycograd_xp.array_api_strict: same gradient as NumPy" in out
