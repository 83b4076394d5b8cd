#!/usr/bin/env bash
# Create a virtual environment, install the project with its test extras (this compiles the Cython core)
# and run the test suite, including the conformance scenarios when ../shared/conformance is present and the
# compatibility tests, which drive the published Python and TypeScript clients (installed below).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${BUNQUEUE_VENV:-.venv}"
PYTHON="${PYTHON:-python3}"

echo "== python: $($PYTHON --version)"
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
# Tools that other tools run by name (cython-lint runs pycodestyle) must come from this venv, not from
# whatever the machine happens to have installed.
export PATH="$(cd "$VENV/bin" && pwd):$PATH"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
echo "== installing bunqueue[test] (compiles the extensions)"
"$VENV/bin/python" -m pip install --quiet -e ".[test]"

echo "== PostgreSQL for tests/storage (Debian's postgresql package, installed when missing)"
# The tests start their own server from these binaries, as the postgres user when run as root; with CI=true
# a server that cannot start fails them instead of skipping them.
"$VENV/bin/python" -m bunqueue._testbase.postgres --install

echo "== published clients for tests/compat (pip and npm, into git-ignored folders there; reused while pinned)"
# A client that cannot be installed because its registry is unreachable is reported here and its tests skip
# with that reason; any other install failure stops the run.
"$VENV/bin/python" tests/compat/clients.py

echo "== Chromium for tests/ui (Debian's package; Playwright drives it and downloads no browser of its own)"
if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium > /dev/null
  else
    echo "not root: tests/ui skip without /usr/bin/chromium (apt-get install chromium)"
  fi
fi

echo "== SQLite's header for tests/reliability/test_powerloss.py (Debian's libsqlite3-dev, installed when missing)"
# The power-loss test compiles its SQLite VFS (bunqueue/_testbase/powercut.c) against it; with CI=true a
# missing header fails that test instead of skipping it.
if [ ! -f /usr/include/sqlite3.h ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libsqlite3-dev > /dev/null
  else
    echo "not root: tests/reliability/test_powerloss.py skips without /usr/include/sqlite3.h (apt-get install libsqlite3-dev)"
  fi
fi

echo "== lint (ruff, mypy, cython-lint)"
"$VENV/bin/python" -m pip install --quiet ruff mypy cython-lint
"$VENV/bin/ruff" check bunqueue tests benchmarks
"$VENV/bin/mypy" bunqueue
"$VENV/bin/cython-lint" bunqueue/_core/*.pyx bunqueue/_core/*.pxd bunqueue/storage/*.pyx \
    bunqueue/broker/transitions/*.pyx bunqueue/server/http/*.pyx bunqueue/server/http/*.pxd

echo "== binary wheel: build it, install it where no compiler can run, serve a round trip from it"
# Its own virtual environments (.venv-wheel for the build tools, build/wheel-venv for the install); pip's
# cache is shared with the steps above.
PYTHON="$PYTHON" bash ci/test-wheel.sh

echo "== tests"
# The editable install builds the extensions in place, so the tree under test is the one installed. The
# slowest tests are listed at the end: the run has 30 minutes on machines whose speed varies.
"$VENV/bin/python" -m pytest -q -p no:cacheprovider --durations=20
