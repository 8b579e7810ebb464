"""Shared fixtures: the namespaces under test, one per installed backend."""

from __future__ import annotations

import os
import tempfile

import pytest

import pycograd_xp

# the worker baselines the tests measure are kept in a file of this run's own (and its child
# processes'), not in the user's cache (cubed_plugin._baseline.cache_path)
os.environ.setdefault(
    "PYCOGRAD_XP_BASELINE_CACHE",
    os.path.join(tempfile.mkdtemp(prefix="pycograd-test-baselines-"), "worker_baselines.json"),
)

EAGER_BACKENDS = ["numpy", "array_api_strict"]


def backend_module(name: str):
    return pytest.importorskip(name)


@pytest.fixture(params=EAGER_BACKENDS)
def xp(request):
    """A pycograd_xp namespace over each eager backend."""
    return pycograd_xp.namespace(backend_module(request.param))


@pytest.fixture
def cxp():
    """The namespace over Cubed (skips without the cubed extra)."""
    cubed = backend_module("cubed")
    return pycograd_xp.namespace(cubed)


@pytest.fixture(autouse=True, scope="module")
def _no_dask_cluster_outlives_its_module():
    """Close the process-wide LocalCluster a module's ``executor="dask"`` runs started: its
    event loop's thread allocates now and then, and tracemalloc counts that in later modules'
    measured peaks (small steps measured above their projections, depending on timing)."""
    yield
    import sys

    executors = sys.modules.get("cubed_plugin._executors")
    if executors is not None:
        executors.close_local_dask_clusters()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test that fails on a child process's exit (``subprocess.run(..., check=True,
    capture_output=True)``) shows the child's stderr: its traceback is what says why, and
    pytest would print only the exit status."""
    import subprocess

    outcome = yield
    report = outcome.get_result()
    error = call.excinfo.value if call.excinfo is not None else None
    if isinstance(error, subprocess.CalledProcessError) and error.stderr:
        text = error.stderr
        if isinstance(text, bytes):
            text = text.decode(errors="replace")
        report.sections.append(("child process stderr (last 8000 characters)", text[-8000:]))
