"""The official conformance suite, when a checkout of it is given in ARRAY_API_TESTS_DIR.

Marked ``official`` and skipped without the checkout (CI has no network to fetch it). With it,
each backend must pass everything but the failures its xfails file owns.
"""

from __future__ import annotations

import pytest

from conformance import run_official

pytestmark = pytest.mark.official


@pytest.mark.parametrize("backend", ["numpy", "strict", "cubed", "memory"])
def test_official_suite(backend):
    if run_official.suite_dir() is None:
        pytest.skip("ARRAY_API_TESTS_DIR does not point at a checkout of array-api-tests")
    if backend == "cubed":
        pytest.importorskip("cubed")
    res = run_official.run(backend)
    print(res.line())
    assert not res.failed, res.failed
