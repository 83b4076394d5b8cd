#!/usr/bin/env bash
# Build the wheel (ci/build-wheel.sh), then install it into a fresh virtual environment where no C compiler
# can run (--only-binary :all:, CC=/bin/false, a PATH without cc/gcc), run `pip check`, and start that
# environment's `bunqueue` for a push/pull/ack round trip (ci/wheel_roundtrip.py).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
TOOLS="${BUNQUEUE_TOOLS_VENV:-.venv-wheel}"
started=$SECONDS

bash ci/build-wheel.sh

wheel=(dist/bunqueue-*-manylinux*.whl)
sdist=(dist/bunqueue-*.tar.gz)
[ -f "${wheel[0]}" ] && [ -f "${sdist[0]}" ] || { echo "dist/ lacks the wheel or the sdist" >&2; exit 1; }
# The tag auditwheel finds in the shipped files must be one the file name claims.
shown="$("$TOOLS/bin/auditwheel" show "${wheel[0]}")"
tag="$(printf '%s\n' "$shown" | grep -oE '"manylinux_[0-9]+_[0-9]+_[a-z0-9_]+"' | head -n 1 | tr -d '"')"
[ -n "$tag" ] || { echo "auditwheel show reports no manylinux tag" >&2; exit 1; }
case "$(basename "${wheel[0]}")" in
  *"$tag"*) echo "== auditwheel show: $tag ($(du -k "${wheel[0]}" | cut -f1) KiB)" ;;
  *) echo "auditwheel show reports $tag, not in the file name ${wheel[0]}" >&2; exit 1 ;;
esac

# A PATH with the interpreter's own folder and basic tools only, linked one by one, so no compiler is found.
VENV="$(pwd)/build/wheel-venv"
NOCC="$(pwd)/build/no-compiler-bin"
rm -rf "$VENV" "$NOCC"
mkdir -p "$NOCC"
for tool in sh bash env uname ls cat rm mkdir; do
  ln -s "$(command -v "$tool")" "$NOCC/$tool"
done
"$PYTHON" -m venv "$VENV"
export PATH="$VENV/bin:$NOCC" CC=/bin/false CXX=/bin/false LDSHARED=/bin/false
for compiler in cc gcc clang c++ g++ zig; do
  if command -v "$compiler" > /dev/null; then
    echo "a compiler is still on PATH: $(command -v "$compiler")" >&2
    exit 1
  fi
done

echo "== pip install --only-binary :all: ${wheel[0]} (no compiler on PATH, CC=/bin/false)"
"$VENV/bin/python" -m pip install --quiet --only-binary :all: "${wheel[0]}"
"$VENV/bin/python" -m pip check
# From outside the source tree, in isolated mode, so the installed package is the one imported.
(cd "$NOCC" && "$VENV/bin/python" -I "$OLDPWD/ci/wheel_roundtrip.py")
echo "== binary wheel step took $((SECONDS - started)) s"
