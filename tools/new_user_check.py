"""Try the project as a new user would, from a fresh clone in a fresh virtual environment, and
print what failed.

    python tools/new_user_check.py            # about five minutes: install, README, guides, errors
    python tools/new_user_check.py --tests    # and the README's test command (the whole suite)

Steps, each reported PASS or FAIL with what it printed when it failed:

1. ``git clone`` of this repository's HEAD into a temporary directory, a new venv there, and the
   install line of the README's "The two commands" block, as written;
2. the README's main job (``python -m cubed_plugin.train``, its defaults);
3. every guide's Python blocks (``tests/test_docs_blocks.py``) and a typed user module checked
   by ``mypy --strict`` from outside the clone (``tests/test_typing_install.py``);
4. the first-day cases of issue 37: each bad input answered in one line (exit status 2 for the
   command), nothing silent;
5. with ``--tests``, the README's test command.

Nothing here needs the network beyond the package registry the install reads.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# (what, python code run in the clone's venv from an empty directory, a regex its combined
# output must match, the exit status it must end with)
CASES = [
    (
        "CLI: --data that does not exist is one line, exit 2",
        "import subprocess, sys; r = subprocess.run([sys.executable, '-m', 'cubed_plugin.train',"
        " '--data', '/nonexistent'], capture_output=True, text=True); "
        "print(r.stderr.strip().splitlines()[-1]); sys.exit(r.returncode)",
        r"error: --data /nonexistent: no X\.zarr there",
        2,
    ),
    (
        "CLI: --allowed-mem without a unit warns",
        "from cubed_plugin.__main__ import _parser, _check_args; ap = _parser('cli'); "
        "a = ap.parse_args(['--allowed-mem', '100']); _check_args(ap, a)",
        r"warning: --allowed-mem 100 has no unit: read as 100 bytes",
        0,
    ),
    (
        "CLI: Dask's byte strings",
        "from pycograd_xp.memory import parse_bytes; "
        "print([parse_bytes(s) for s in ('100KB', '100 KiB', '1e5', '150mb')])",
        r"\[100000, 102400, 100000, 150000000\]",
        0,
    ),
    (
        "processes executor without the __main__ guard: one line",
        "import pathlib, subprocess, sys; p = pathlib.Path('unguarded.py'); "
        "p.write_text('from cubed_plugin import make_executor\\nmake_executor(\"processes\")\\n'); "
        "r = subprocess.run([sys.executable, str(p)], capture_output=True, text=True); "
        "print(r.stderr.strip().splitlines()[-1])",
        r"RuntimeError: the processes executor's workers import .* again",
        0,
    ),
    (
        "x.sum() says the standard's way",
        "import numpy, pycograd_xp as pg; x = pg.namespace(numpy).ones(3)\n"
        "try:\n    x.sum()\nexcept AttributeError as e:\n    print(e)",
        r"xp\.sum\(x\)",
        0,
    ),
    (
        "contradicting attention arguments are refused",
        "import numpy, pycograd_xp as pg; from pycograd_xp import nn; xp = pg.namespace(numpy)\n"
        "q = xp.ones((3, 4))\ntry:\n    nn.scaled_dot_product_attention(q, q, q, is_causal=True,"
        " causal=False)\nexcept ValueError as e:\n    print(e)",
        r"contradict",
        0,
    ),
    (
        "an optimizer's update checks its trees",
        "import numpy, pycograd_xp as pg; from pycograd_xp import optim; xp = pg.namespace(numpy)"
        "\nw = xp.ones(3); tx = optim.adam(0.1)\ntry:\n    tx.update({'a': w}, tx.init({'b': w}),"
        " {'a': w})\nexcept ValueError as e:\n    print(e)",
        r"structure \{'a': \*\} differs",
        0,
    ),
    (
        "a NaN loss in the eager fit warns",
        "import warnings, numpy as np, pycograd_xp as pg; from pycograd_xp import optim, train\n"
        "xp = pg.namespace(np); tx = optim.sgd(0.1)\n"
        "step = train.make_step(lambda w, x: xp.mean((x @ w) ** 2), tx)\n"
        "b = [(xp.asarray(np.full((2, 3), np.nan)),)]; w = xp.zeros(3)\n"
        "with warnings.catch_warnings(record=True) as got:\n    warnings.simplefilter('always')\n"
        "    train.fit(step, w, tx.init(w), b, epochs=1, progress=False, log=None)\n"
        "print([str(g.message) for g in got])",
        r"the loss is nan at step 1 of epoch 1",
        0,
    ),
    (
        "grad's errors say grad",
        "import numpy, pycograd_xp as pg; xp = pg.namespace(numpy)\n"
        "try:\n    pg.grad(lambda w: w * 2)(xp.ones(2))\nexcept TypeError as e:\n    print(e)",
        r"^grad\(<lambda>\)",
        0,
    ),
]


def _run(cmd: list[str] | str, cwd: Path, timeout: int = 3600) -> tuple[int, str]:
    r = subprocess.run(
        cmd,
        cwd=cwd,
        shell=isinstance(cmd, str),
        capture_output=True,
        text=True,
        timeout=timeout,
        executable="/bin/bash" if isinstance(cmd, str) else None,
    )
    return r.returncode, (r.stdout + r.stderr)


def _readme_commands() -> tuple[str, str]:
    """The install line and the test command of the README's "The two commands" block."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"## The two commands.*?```bash\n(.*?)```", text, re.S)
    if block is None:
        raise SystemExit("README.md: no 'The two commands' block with a bash fence")
    lines = [ln for ln in block[1].splitlines() if ln.strip() and not ln.startswith("#")]
    install = next(ln for ln in lines if "pip install" in ln)
    test = next(ln for ln in lines if "pytest" in ln)
    return install, test


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tests", action="store_true", help="also run the README's test command")
    ap.add_argument("--keep", action="store_true", help="keep the clone and its venv")
    a = ap.parse_args()
    results: list[tuple[str, bool, str]] = []

    def step(what: str, ok: bool, output: str) -> bool:
        results.append((what, ok, output))
        print(f"{'PASS' if ok else 'FAIL'}  {what}", flush=True)
        if not ok:
            print(textwrap.indent(output.strip()[-3000:], "      "), flush=True)
        return ok

    base = Path(tempfile.mkdtemp(prefix="pycograd-new-user-"))
    clone = base / "clone"
    code, out = _run(["git", "clone", "--quiet", str(ROOT), str(clone)], base)
    if not step("git clone of HEAD", code == 0, out):
        raise SystemExit(1)
    install, test = _readme_commands()
    # the README's line, as a new user pastes it (its venv made here, then its pip install)
    line = install.replace("python -m venv .venv && . .venv/bin/activate && ", "")
    line = line.split(" && python -m cubed_plugin.train")[0]
    activate = ". .venv/bin/activate && "
    code, out = _run(f"{sys.executable} -m venv .venv && {activate}{line}", clone)
    if not step(f"README install: {line}", code == 0, out):
        raise SystemExit(1)
    code, out = _run(activate + "python -m cubed_plugin.train", clone)
    step("README main job: python -m cubed_plugin.train", code == 0, out)
    code, out = _run(
        activate + "python -m pytest -q tests/test_docs_blocks.py tests/test_typing_install.py",
        clone,
    )
    step("the guides' Python blocks; a typed user module (mypy --strict, outside)", code == 0, out)
    python = clone / ".venv" / "bin" / "python"
    for what, source, expect, status in CASES:
        scratch = Path(tempfile.mkdtemp(dir=base))
        code, out = _run([str(python), "-c", source], scratch)
        step(what, code == status and re.search(expect, out, re.M) is not None, out)
    if a.tests:
        code, out = _run(activate + test, clone)
        step(f"README tests: {test}", code == 0, out)
    failed = [w for w, ok, _ in results if not ok]
    print(f"\n{len(results) - len(failed)} passed, {len(failed)} failed")
    if not a.keep:
        subprocess.run(["rm", "-rf", str(base)], check=False)
    else:
        print(f"kept {base}")
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
