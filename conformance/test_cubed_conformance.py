"""Every gradient-conformance case (``conformance/grad_cases.py``) on namespace(cubed), at four
chunkings (chunks of 1, chunks that do not divide the axis, one chunk, chunks of 1 along the last
axis; the operands of one call chunked differently), values and VJPs against namespace(numpy)
(:func:`conformance.cubed_oracle.compare`). A fixed sample in the default run, every case at
every chunking with ``-m slow``.

A case that Cubed cannot run as the standard says is listed in :data:`REFUSED` with the
documented reason (docs/guides/backends.md), and must raise the documented error.
"""

from __future__ import annotations

import warnings
import zlib

import numpy as np
import pytest

from conformance.cubed_oracle import NAMES, compare
from conformance.grad_cases import cases

cubed = pytest.importorskip("cubed")

# One in SAMPLE of the (case, chunking) pairs runs by default, chosen by a hash of its id.
SAMPLE = 80

# (row, case label or None for every case) -> (the exception, a fragment of its message):
# what Cubed cannot do, refused before computing and documented in docs/guides/backends.md
# ("On Cubed"): no data-dependent shapes.
_MASK = (NotImplementedError, "boolean mask: the result's shape depends on the data")
REFUSED: dict[tuple[str, str | None], tuple[type[BaseException], str]] = {
    ("__getitem__", "mask"): _MASK,
    **{
        (f"unique_{kind}", None): (NotImplementedError, f"does not implement unique_{kind}")
        for kind in ("all", "counts", "inverse", "values")
    },
}


def _params() -> list:
    out = []
    for name, cs in cases().items():
        for case in cs:
            if "numpy" not in case.backends:
                continue
            for chunking in NAMES:
                pid = f"{name}-{case.label}-{chunking}"
                sample = zlib.crc32(pid.encode()) % SAMPLE == 0
                marks = () if sample else (pytest.mark.slow,)
                out.append(pytest.param(name, case, chunking, id=pid, marks=marks))
    return out


@pytest.mark.parametrize("name, case, chunking", _params())
def test_values_and_vjps_on_cubed_are_numpys(name, case, chunking):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # Cubed's own numpy.core import
        refused = REFUSED.get((name, case.label)) or REFUSED.get((name, None))
        if refused is not None:
            with pytest.raises(refused[0], match=refused[1]):
                compare(case.f, case.args, chunking)
            return
        with np.errstate(all="ignore"):
            compare(case.f, case.args, chunking)


def test_the_backends_guide_lists_every_refusal():
    """docs/guides/backends.md's "On Cubed" section names every refused case's function."""
    from pathlib import Path

    guide = (Path(__file__).resolve().parents[1] / "docs/guides/backends.md").read_text()
    section = guide.split("## On Cubed", 1)[1].split("\n## ", 1)[0]
    assert "test_cubed_conformance.py" in section and "test_cubed_differential.py" in section
    missing = [name for name, _ in REFUSED if f"`{name.rpartition('.')[2]}`" not in section]
    assert not missing, f"refused on Cubed but not in the guide: {missing}"
