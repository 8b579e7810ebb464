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


def test_digits_reaches_95_percent():
    import pytest

    pytest.importorskip("sklearn")
    import importlib.util

    spec = importlib.util.spec_from_file_location("digits", EXAMPLES / "digits.py")
    digits = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(digits)
    result = digits.main(epochs=30, compare_torch=False)
    assert result["test_accuracy"] >= 0.95
