"""pytest plugin loaded into the official suite: re-seed Python's ``random`` before every test.

One special-case test of array-api-tests draws with the global ``random``; without this the
pass count moves between runs even with ``--hypothesis-seed``.
"""

import random

import pytest


@pytest.fixture(autouse=True)
def _reseed_random() -> None:
    random.seed(0)
