"""The command line (``python -m cubed_plugin.train``): ``--help`` shows every default, and a
run leaves nothing behind unless asked to (issue 22: the default run left 408 MB of Zarr in a
temporary folder without saying where)."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("cubed")
pytest.importorskip("zarr")

from cubed_plugin.__main__ import _parser
from cubed_plugin.train import main

TINY = ["--rows", "4000", "--features", "5", "--steps", "2", "--quiet"]
TINY += ["--allowed-mem", "150MB", "--reserved-mem", "100MB"]  # no ReservedMemWarning on threads


def test_help_shows_every_default():
    out = subprocess.run(
        [sys.executable, "-m", "cubed_plugin.train", "--help"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    text = " ".join(out.split())  # argparse wraps the lines
    for default in ("1000000", "logreg", "150MB", "threads", "in_memory", "2", "10", "auto"):
        assert f"(default: {default})" in text, default
    assert "(default: 0.5)" in text
    assert "--keep" in text and "removed at the end unless --keep" in text
    # every option says what happens without it: a default shown, or its help says so
    for action in _parser()._actions:
        if action.dest in ("help", "quiet", "keep"):
            continue
        if action.default is None:
            assert "default" in action.help, action.dest
        else:
            assert f"(default: {action.default})" in text, action.dest


def _work_dir(out: str) -> str:
    return re.search(r"^work directory (\S+) ", out, flags=re.M)[1]


@pytest.fixture
def temp_root(tmp_path, monkeypatch):
    """Temporary directories made during the test go under ``tmp_path``."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def test_the_default_work_directory_is_printed_and_removed(temp_root, capsys):
    main(TINY)
    out = capsys.readouterr().out
    work = _work_dir(out)
    assert work.startswith(str(temp_root)) and "removed at the end" in out
    assert f"removed the work directory {work} (" in out
    assert not any(temp_root.glob("pycograd-cubed-*")), list(temp_root.iterdir())


def test_keep_keeps_the_work_directory(temp_root, capsys):
    main([*TINY, "--keep"])
    out = capsys.readouterr().out
    work = _work_dir(out)
    assert f"kept the work directory {work} (" in out
    assert Path(work).joinpath("data", "X.zarr").is_dir() and Path(work).parent == temp_root


def test_a_work_directory_the_user_names_is_kept(tmp_path, temp_root, capsys):
    main([*TINY, "--work-dir", str(tmp_path / "w")])
    assert "--work-dir: kept" in capsys.readouterr().out
    assert (tmp_path / "w" / "data" / "X.zarr").is_dir()
    assert not any(temp_root.glob("pycograd-cubed-*"))


def test_a_failed_run_removes_its_work_directory_and_keeps_the_users_data(
    tmp_path, temp_root, capsys
):
    import zarr

    X = np.zeros((100, 3))
    zarr.create_array(str(tmp_path / "d" / "X.zarr"), shape=X.shape, dtype="f8")[:] = X
    zarr.create_array(str(tmp_path / "d" / "y.zarr"), shape=(100,), dtype="f8")[:] = 0.0
    with pytest.raises(ValueError, match="--features 5 does not match"):
        main([*TINY, "--data", str(tmp_path / "d")])
    assert "removed the work directory" in capsys.readouterr().out
    assert not any(temp_root.glob("pycograd-cubed-*"))
    assert (tmp_path / "d" / "X.zarr").is_dir() and (tmp_path / "d" / "y.zarr").is_dir()


def test_an_engine_whose_extra_is_missing_is_refused_in_one_line(temp_root, capsys, monkeypatch):
    from cubed_plugin import _executors

    monkeypatch.setitem(_executors._NEEDS, "dask", "no_such_module_here")
    with pytest.raises(SystemExit) as exit_:
        main(["--executor", "dask"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.splitlines()[-1].endswith(
        "error: --executor dask: the 'dask' executor needs no_such_module_here: "
        "pip install 'pycograd-xp[dask]'"
    )
    assert list(temp_root.iterdir()) == []  # no work directory made


@pytest.mark.parametrize(
    "args, says",
    [
        (["--rows", "0"], "--rows must be at least 1, got 0"),  # was an IndexError
        (["--steps", "0"], "--steps must be at least 1, got 0"),  # was an IndexError
        (["--features", "0"], "--features must be at least 1, got 0"),  # trained a bias alone
        (["--workers", "0"], "--workers must be at least 1, got 0"),
        (["--retries", "-1"], "--retries must be at least 0, got -1"),
        (["--batch-rows", "0"], "--batch-rows must be at least 1, got 0"),
        (["--lr", "-0.1"], "--lr must be positive, got -0.1"),
        (["--chunks-per-task", "0"], "--chunks-per-task must be at least 1, got 0"),
        (
            ["--chunks-per-task", "2", "--mode", "graph"],
            "--chunks-per-task 2 takes one-pass mode, which --mode graph --executor threads does",
        ),
        (["--allowed-mem", "lots"], "--allowed-mem 'lots' is not an amount of memory"),
        (["--reserved-mem", "1 GBytes"], "--reserved-mem '1 GBytes' is not an amount of memory"),
        (["--data", "/nonexistent/dir"], "--data /nonexistent/dir: no X.zarr there"),
        # chunks of at most 7 rows: 142,858 Zarr files made before the first step
        (
            ["--batch-rows", "7"],
            "142,858 chunks of 1,000,000 rows, a file and a task each; "
            "give --batch-rows at least 100",
        ),
    ],
)
def test_options_it_cannot_run_with_are_refused_before_anything_is_made(
    args, says, temp_root, capsys
):
    with pytest.raises(SystemExit) as exit_:
        main(args)
    assert exit_.value.code == 2
    assert says in " ".join(capsys.readouterr().err.split())
    assert list(temp_root.iterdir()) == []  # no work directory made


def test_chunks_per_task_makes_fewer_tasks_and_the_same_losses(tmp_path, temp_root, capsys):
    """``--chunks-per-task 3`` on data in 8 chunks: the plan shown has 3 one-pass tasks, not 8,
    and the losses are the one-chunk run's."""
    import zarr

    rng = np.random.default_rng(0)
    X = rng.standard_normal((4000, 5)).astype("float32")
    y = (X @ rng.standard_normal(5) > 0).astype("float32")
    zarr.open_array(str(tmp_path / "X.zarr"), mode="w", shape=X.shape, chunks=(500, 5), dtype="f4")[
        ...
    ] = X
    zarr.open_array(str(tmp_path / "y.zarr"), mode="w", shape=y.shape, chunks=(500,), dtype="f4")[
        ...
    ] = y
    args = [*TINY, "--data", str(tmp_path)]
    outs = []
    for extra in ([], ["--chunks-per-task", "3"]):
        main([*args, *extra])
        outs.append(capsys.readouterr().out)
    trained = [re.search(r"^trained .*$", out, flags=re.M)[0] for out in outs]
    assert trained[0] == trained[1]
    tasks = [int(re.search(r"largest task .*; (\d+) tasks$", out, flags=re.M)[1]) for out in outs]
    assert tasks == [8, 3], tasks


def test_a_data_directory_without_labels_is_refused(tmp_path, temp_root, capsys):
    import zarr

    zarr.open_array(str(tmp_path / "X.zarr"), mode="w", shape=(4, 2), dtype="f8")
    with pytest.raises(SystemExit) as exit_:
        main(["--data", str(tmp_path)])
    assert exit_.value.code == 2
    assert f"--data {tmp_path}: no y.zarr there" in " ".join(capsys.readouterr().err.split())
    (tmp_path / "y.zarr").mkdir()  # a directory that holds no Zarr array is none either
    with pytest.raises(SystemExit):
        main(["--data", str(tmp_path)])
    assert f"--data {tmp_path}: no y.zarr there" in " ".join(capsys.readouterr().err.split())


@pytest.mark.parametrize("amount", ["100KB", "100 KiB", "1e8", "150mb"])
def test_amounts_read_as_dasks_parse_bytes_reads_them(amount):
    from cubed_plugin.__main__ import _check_args

    ap = _parser("cli")
    a = ap.parse_args(["--allowed-mem", amount])
    _check_args(ap, a)
    from pycograd_xp.memory import parse_bytes

    assert a.allowed_mem == parse_bytes(amount) > 0


def test_an_amount_without_a_unit_is_read_as_bytes_with_a_warning(capsys):
    from cubed_plugin.__main__ import _check_args

    ap = _parser("cli")
    a = ap.parse_args(["--allowed-mem", "100"])
    _check_args(ap, a)
    assert a.allowed_mem == 100
    err = " ".join(capsys.readouterr().err.split())
    assert "warning: --allowed-mem 100 has no unit: read as 100 bytes" in err


def test_a_budget_below_the_workers_baseline_says_so(temp_root, capsys):
    """Not "shrink the model": no model fits when a worker alone holds more than the budget."""
    with pytest.raises(SystemExit) as exit_:
        main(["--allowed-mem", "50MB", "--reserved-mem", "100MB", "--rows", "100"])
    assert exit_.value.code == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--allowed-mem 50.0 MB is below what a worker of --executor threads holds" in err
    assert list(temp_root.iterdir()) == []  # the work directory removed


def test_the_lbfgs_summary_starts_from_the_initial_loss(capsys):
    """L-BFGS' history holds the loss each iteration ends at; the summary starts from the loss
    it printed before its first iteration (it started from step 1's)."""
    main([*TINY, "--optimizer", "lbfgs"])
    out = capsys.readouterr().out
    initial = re.search(r"initial loss ([\d.]+)", out)[1]
    first = re.search(r"step 1/2  loss ([\d.]+)", out)[1]
    last = re.search(r"step 2/2  loss ([\d.]+)", out)[1]
    summary = re.search(r"^trained 2 steps: loss ([\d.]+) -> ([\d.]+)$", out, flags=re.M)
    assert (float(summary[1]), float(summary[2])) == pytest.approx(
        (float(initial), float(last)), abs=1e-4
    )
    assert float(first) < float(initial)
