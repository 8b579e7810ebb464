#!/usr/bin/env bash
# The GPU run (issue 35, point 4): make a venv with the project, CuPy (cupy-cuda12x) and PyTorch
# from PyPI, then run tools/gpu_check.py there (its checks, under eight minutes, and the summary
# file: see its docstring).
#
#   tools/gpu_check.sh [--venv DIR] [--suite DIR] [--out PATH] [other gpu_check.py options]
#   tools/gpu_check.sh --dry-run [...]   # no venv, no installs: this Python, NumPy for CuPy
#
# --suite (or ARRAY_API_TESTS_DIR): a checkout of data-apis/array-api-tests (not on PyPI) with
# the spec stubs of data-apis/array-api inside it as array-api/, e.g.
#   git clone --recursive https://github.com/data-apis/array-api-tests
# --venv: where the venv goes (default: .gpu-venv in the repository; reused when it exists).
# PYTHON: the interpreter that makes the venv (default python3; the project needs >= 3.11).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.gpu-venv"
dry=0
args=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --venv) venv="$2"; shift 2 ;;
        --venv=*) venv="${1#--venv=}"; shift ;;
        --dry-run) dry=1; args+=("$1"); shift ;;
        -h|--help) sed -n '2,13p' "$0"; exec "${PYTHON:-python3}" "$root/tools/gpu_check.py" --help ;;
        *) args+=("$1"); shift ;;
    esac
done

if [[ $dry -eq 1 ]]; then
    exec "${PYTHON:-python3}" "$root/tools/gpu_check.py" "${args[@]}"
fi

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
if [[ ! -x "$venv/bin/python" ]]; then
    "${PYTHON:-python3}" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip
# the project with its test tools (pytest, hypothesis, pytest-json-report, ndindex: the official
# suite's too), CuPy for CUDA 12 and PyTorch's CUDA build (PyPI's Linux wheel)
"$venv/bin/python" -m pip install --quiet -e "$root[test,cupy]" torch
exec "$venv/bin/python" "$root/tools/gpu_check.py" "${args[@]}"
