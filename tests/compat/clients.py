"""The published clients the compatibility tests drive, installed into git-ignored folders beside this file.

- Python SDK `bunqueue-client` in a virtual environment of its own: it installs the import name `bunqueue`,
  the same as this project, so it can never share an interpreter with the server under test.
- The TypeScript client (npm `bunqueue`) and the Bun runtime (npm `bun`), pinned by js/package-lock.json and
  installed with `npm ci` into js/node_modules. Two releases of the client sit side by side: the current
  line, and under an npm alias the oldest line still in use (`TS_CLIENTS`).

Each install is stamped with what it was built from and reused while the pins are unchanged, so only the
first run on a machine pays for it. Run this file as a script to install both ahead of the tests (CI does).
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

SDK_REQUIREMENT = "bunqueue-client==0.1.5"
BUN_VERSION = "1.4.5"
#: TypeScript client release -> its package name in js/package.json (what the scenarios import).
TS_CLIENTS = {"2.9.5": "bunqueue", "2.7.10": "bunqueue-2.7.10"}
HERE = Path(__file__).resolve().parent
SDK_VENV = HERE / ".venv-sdk"
JS_DIR = HERE / "js"
STAMP = ".compat-stamp"
INSTALL_TIMEOUT = 600


class ClientUnavailable(Exception):
    """The client cannot be installed here for a reason outside the project: no registry, no npm."""


@contextlib.contextmanager
def _install_lock() -> Iterator[None]:
    # Two pytest runs (or CI and a developer) starting together must not build the same folder at once.
    with open(HERE / ".install.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _unreachable(url: str) -> str | None:
    """Why `url` cannot be fetched, or None when it can (proxies from the environment apply)."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=10):
            return None
    except OSError as exc:  # URLError, timeouts and refused connections are all OSErrors
        return f"{type(exc).__name__}: {exc}"


def _run_install(cmd: list[str], cwd: Path, registry_url: str) -> None:
    """Run an installer; a failure becomes a skip reason only when the registry cannot be reached."""
    # Asked first as well, so that an offline machine skips in seconds rather than after the installer's
    # own retries.
    reason = _unreachable(registry_url)
    if reason is not None:
        raise ClientUnavailable(f"registry {registry_url} unreachable ({reason})")
    result = subprocess.run(
        cmd, check=False, cwd=cwd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    if result.returncode == 0:
        return
    reason = _unreachable(registry_url)
    if reason is not None:
        raise ClientUnavailable(f"registry {registry_url} unreachable ({reason}); `{' '.join(cmd)}` failed")
    raise RuntimeError(
        f"`{' '.join(cmd)}` failed with status {result.returncode}\n{result.stdout}\n{result.stderr}"
    )


def _stamp_matches(folder: Path, expected: str) -> bool:
    try:
        return (folder / STAMP).read_text() == expected
    except OSError:
        return False


# -- Python SDK ------------------------------------------------------------------------------------------


def _sdk_stamp() -> str:
    return f"{SDK_REQUIREMENT}\npython {platform.python_version()} {sys.base_prefix}\n"


def _pip_index() -> str:
    return os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple/").rstrip("/") + "/bunqueue-client/"


def ensure_sdk() -> Path:
    """The Python interpreter of the SDK's virtual environment, created on first use."""
    python = SDK_VENV / "bin" / "python"
    expected = _sdk_stamp()
    with _install_lock():
        if _stamp_matches(SDK_VENV, expected) and python.exists():
            return python
        shutil.rmtree(SDK_VENV, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(SDK_VENV)], check=True, timeout=INSTALL_TIMEOUT)
        _run_install(
            [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", SDK_REQUIREMENT],
            HERE, _pip_index(),
        )
        # The stamp goes last: an install interrupted half-way is redone, never reused.
        (SDK_VENV / STAMP).write_text(expected)
    return python


# -- TypeScript client and Bun ---------------------------------------------------------------------------


def _js_stamp() -> str:
    digest = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        digest.update((JS_DIR / name).read_bytes())
    return digest.hexdigest() + "\n"


def _npm() -> str:
    npm = shutil.which("npm")
    if npm is None:
        raise ClientUnavailable("npm not found on PATH: the TypeScript client is installed from npm")
    return npm


def _npm_registry(npm: str) -> str:
    cmd = [npm, "config", "get", "registry"]
    out = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=60)
    return out.stdout.strip() or "https://registry.npmjs.org/"


def bun_path() -> Path:
    return JS_DIR / "node_modules" / "bun" / "bin" / "bun.exe"


def _bun_version(bun: Path) -> str:
    try:
        out = subprocess.run([str(bun), "--version"], check=False, capture_output=True, text=True, timeout=60)
    except OSError:
        return ""
    return out.stdout.strip()


def ensure_js() -> Path:
    """The Bun binary in js/node_modules, beside the pinned TypeScript client; installed on first use."""
    modules = JS_DIR / "node_modules"
    expected = _js_stamp()
    with _install_lock():
        if _stamp_matches(modules, expected) and _bun_version(bun_path()) == BUN_VERSION:
            return bun_path()
        npm = _npm()
        # --prefer-offline: a machine that installed these before installs again from npm's own cache.
        _run_install(
            [npm, "ci", "--no-audit", "--no-fund", "--prefer-offline"], JS_DIR, _npm_registry(npm)
        )
        # bun's postinstall puts the platform binary in place; without it bun.exe is only a stub.
        version = _bun_version(bun_path())
        if version != BUN_VERSION:
            raise RuntimeError(f"npm ci finished but {bun_path()} is version {version!r}, not {BUN_VERSION}")
        for release, package in TS_CLIENTS.items():
            manifest = json.loads((modules / package / "package.json").read_text())
            if manifest.get("version") != release:
                raise RuntimeError(f"npm ci installed {package} {manifest.get('version')!r}, not {release}")
        (modules / STAMP).write_text(expected)
    return bun_path()


def main() -> int:
    for label, ensure in (("Python SDK", ensure_sdk), ("TypeScript client", ensure_js)):
        try:
            print(f"{label}: {ensure()}")
        except ClientUnavailable as exc:
            # Not an error: the tests that need this client skip, and say why.
            print(f"{label}: unavailable, its tests will skip: {exc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
