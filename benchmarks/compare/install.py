"""Bun and the reference bunqueue from npm, installed into benchmarks/.cache/bun when missing.

Both versions are pinned so that a result file names exactly what it was measured against. Nothing
outside the cache folder is touched: npm runs with --prefix and --no-save, and no global install.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .servers import REPO_ROOT, BunLauncher

BUN_VERSION = "1.4.5"
BUNQUEUE_VERSION = "2.9.5"
CACHE = REPO_ROOT / "benchmarks" / ".cache" / "bun"


class InstallError(Exception):
    """npm is missing or the install did not produce a working Bun and bunqueue."""


@dataclass(frozen=True)
class BunInstall:
    bun: Path
    cli: Path
    bun_version: str
    bunqueue_version: str

    def launcher(self) -> BunLauncher:
        return BunLauncher(self.bun, self.cli)


def _shown(path: Path) -> str:
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


def _package_version(prefix: Path, package: str) -> str | None:
    try:
        meta = json.loads((prefix / "node_modules" / package / "package.json").read_text())
    except (OSError, ValueError):
        return None
    return str(meta.get("version"))


def _paths(prefix: Path) -> tuple[Path, Path]:
    modules = prefix / "node_modules"
    return modules / "bun" / "bin" / "bun.exe", modules / "bunqueue" / "dist" / "cli" / "index.js"


def _is_installed(prefix: Path) -> bool:
    bun, cli = _paths(prefix)
    return (
        bun.is_file()
        and cli.is_file()
        and _package_version(prefix, "bun") == BUN_VERSION
        and _package_version(prefix, "bunqueue") == BUNQUEUE_VERSION
    )


def _npm_install(prefix: Path) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise InstallError("npm not found: install Node.js and npm, or run with --only ours")
    prefix.mkdir(parents=True, exist_ok=True)
    cmd = [
        npm, "install", "--no-save", "--no-audit", "--no-fund", "--prefix", str(prefix),
        f"bun@{BUN_VERSION}", f"bunqueue@{BUNQUEUE_VERSION}",
    ]
    print(f"installing bun@{BUN_VERSION} and bunqueue@{BUNQUEUE_VERSION} into "
          f"{_shown(prefix)} (npm) ...", file=sys.stderr, flush=True)
    started = time.monotonic()
    # npm's own output goes to stderr so that --json output on stdout stays machine-readable.
    result = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=sys.stderr.fileno(), check=False)
    if result.returncode != 0:
        raise InstallError(f"npm install failed with status {result.returncode}")
    print(f"installed in {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)


def _bun_version(bun: Path) -> str:
    try:
        out = subprocess.run([str(bun), "--version"], capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        raise InstallError(f"{bun} does not run: {exc}") from exc
    return out.stdout.strip()


def ensure_bun(prefix: Path = CACHE) -> BunInstall:
    """Install when missing or at another version, then check that the binary runs."""
    if _is_installed(prefix):
        print(f"using cached bun@{BUN_VERSION} and bunqueue@{BUNQUEUE_VERSION} in "
              f"{_shown(prefix)}", file=sys.stderr, flush=True)
    else:
        _npm_install(prefix)
        if not _is_installed(prefix):
            raise InstallError(f"npm finished but {prefix} lacks bun {BUN_VERSION} "
                               f"or bunqueue {BUNQUEUE_VERSION}")
    bun, cli = _paths(prefix)
    return BunInstall(bun, cli, _bun_version(bun), BUNQUEUE_VERSION)
