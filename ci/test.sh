#!/usr/bin/env bash
# Create a virtual environment, install the project with its test extras (this compiles the Cython core)
# and run the test suite, including the conformance scenarios when ../shared/conformance is present.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${BUNQUEUE_VENV:-.venv}"
PYTHON="${PYTHON:-python3}"

echo "== python: $($PYTHON --version)"
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
echo "== installing bunqueue[test] (compiles the extensions)"
"$VENV/bin/python" -m pip install --quiet -e ".[test]"

echo "== tests"
# The editable install builds the extensions in place, so the tree under test is the one installed.
"$VENV/bin/python" -m pytest -q -p no:cacheprovider
