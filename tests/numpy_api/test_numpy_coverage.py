"""The sweeps of ``test_numpy_ufuncs`` and ``test_numpy_functions`` cover every entry of the
NumPy frontend's tables, and ``python -m pycograd_xp.ops --numpy`` lists them."""

from __future__ import annotations

import subprocess
import sys

from test_numpy_functions import FCASES
from test_numpy_ufuncs import INTEGER, LDEXP, UFUNC_PARAMS

from pycograd_xp import numpy_api as protocols


def test_every_mapped_name_has_a_case():
    """Every ufunc and function of the tables is swept above (the coverage the doc lists)."""
    tested = {p.values[0] for p in UFUNC_PARAMS} | set(INTEGER) | {LDEXP}
    tested |= set(protocols.REDUCTIONS) | set(protocols.ACCUMULATIONS)
    cov = protocols.covered()
    ufuncs = {u.split(" ")[0] for u in cov["ufuncs"]}
    assert ufuncs - tested == set()
    described = {"shape", "ndim", "size", "result_type", "iscomplexobj", "isrealobj", "can_cast"}
    functions = {p.values[0] for p in FCASES} | described
    values = functions | {"allclose", "array_equal", "array_equiv", "min_scalar_type"}
    assert set(cov["functions"]) - functions == set()
    assert set(cov["values"]) - values == set()


def test_the_coverage_listing():
    cov = protocols.covered()
    assert "exp -> exp" in cov["ufuncs"] and "arctan2 -> atan2" in cov["ufuncs"]
    assert "add.reduce -> sum" in cov["ufunc.reduce"]
    assert {"einsum", "linalg.norm", "fft.rfft", "nanmean"} <= set(cov["functions"])
    out = subprocess.run(
        [sys.executable, "-m", "pycograd_xp.ops", "--numpy"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "numpy.einsum" in out and "numpy.add.reduce -> xp.sum" in out
