"""Our server at another git revision, built beside the tree under test, as a third server ("base").

A before/after comparison is only fair when both sides run in the same rounds on the same machine,
alternating with the Bun original; this gives the "before" side a launcher like the others. The
revision is exported with `git archive` into benchmarks/.cache/baseline/<sha>/ and its extensions are
compiled in place with the running interpreter; an export that already built is reused.
"""
from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
from importlib import metadata
from pathlib import Path

from .install import InstallError
from .servers import REPO_ROOT, OursLauncher

CACHE = REPO_ROOT / "benchmarks" / ".cache" / "baseline"
BUILT_MARK = ".built"


def _resolve(rev: str) -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--verify", f"{rev}^{{commit}}"], cwd=REPO_ROOT,
                             capture_output=True, text=True, timeout=30, check=True)
    except subprocess.CalledProcessError as exc:
        raise InstallError(f"--baseline {rev}: not a commit of this repository") from exc
    return out.stdout.strip()


def _export(sha: str, dest: Path) -> None:
    archive = subprocess.run(["git", "archive", "--format=tar", sha], cwd=REPO_ROOT,
                             capture_output=True, timeout=120, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")


def _setuptools_needed() -> int:
    """The major version of pyproject.toml's build-system requirement ("setuptools>=N")."""
    with open(REPO_ROOT / "pyproject.toml", "rb") as f:
        requires: list[str] = tomllib.load(f)["build-system"]["requires"]
    floor = next(req for req in requires if req.startswith("setuptools>="))
    return int(floor.removeprefix("setuptools>=").split(".")[0])


def _check_build_tools() -> None:
    """setup.py reads pyproject.toml's metadata, which an older setuptools refuses (its license field)."""
    needed = _setuptools_needed()
    try:
        major = int(metadata.version("setuptools").split(".")[0])
    except (metadata.PackageNotFoundError, ValueError):
        major = 0
    if major < needed:
        raise InstallError(f"--baseline builds with this environment's setuptools, which must be {needed} "
                           "or newer: pip install -e '.[bench]'")


def _build(dest: Path) -> None:
    result = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=dest,
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        tail = "\n".join(result.stderr.strip().splitlines()[-5:])
        raise InstallError(f"building the baseline failed with status {result.returncode}:\n{tail}")


def ensure_baseline(rev: str, cache: Path = CACHE) -> OursLauncher:
    """Export and build `rev` when missing; return a launcher named "base" for it."""
    sha = _resolve(rev)
    dest = cache / sha[:12]
    if not (dest / BUILT_MARK).is_file():
        _check_build_tools()
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        print(f"building baseline {rev} ({sha[:12]}) in {dest.relative_to(REPO_ROOT)} ...",
              file=sys.stderr, flush=True)
        started = time.monotonic()
        _export(sha, dest)
        _build(dest)
        (dest / BUILT_MARK).write_text(sha + "\n")
        print(f"built in {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
    return OursLauncher(name="base", root=dest, source=f"{rev} ({sha[:12]})")
