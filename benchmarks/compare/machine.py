"""Facts about the machine and the software under test, printed in the header and kept in the JSON."""
from __future__ import annotations

import hashlib
import os
import platform
import subprocess
from typing import Any

import bunqueue

from .install import BunInstall
from .servers import REPO_ROOT


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


# What decides our server's behaviour; a change to any of these between two runs makes them
# measurements of different code.
SOURCE_PATHS = ("bunqueue", "setup.py", "pyproject.toml")


def _git(*args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, timeout=30, check=True).stdout


def source_fingerprint() -> str | None:
    """HEAD plus a hash of uncommitted and untracked changes to our server's source, e.g. 1a2b3c4+9f8e7d6c.

    Taken at every start of our server, so a result file shows when the tree changed mid-run.
    """
    try:
        rev = _git("rev-parse", "--short", "HEAD").decode().strip()
        digest = hashlib.sha1(_git("diff", "HEAD", "--binary", "--", *SOURCE_PATHS))
        untracked = _git("ls-files", "--others", "--exclude-standard", "-z", "--", *SOURCE_PATHS)
        for name in sorted(filter(None, untracked.split(b"\0"))):
            digest.update(name + b"\0" + (REPO_ROOT / name.decode()).read_bytes())
    except (OSError, subprocess.SubprocessError):
        return None
    clean = digest.hexdigest() == hashlib.sha1().hexdigest()
    return rev if clean else f"{rev}+{digest.hexdigest()[:8]}"


def _uvloop_version() -> str | None:
    try:
        import uvloop
    except ImportError:
        return None
    return str(uvloop.__version__)


def facts(bun: BunInstall | None) -> dict[str, Any]:
    return {
        "nproc": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "cpu_model": cpu_model(),
        "kernel": platform.release(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "uvloop": _uvloop_version(),
        "ours": {"version": bunqueue.__version__, "source": source_fingerprint()},
        "bun": None if bun is None else {"bun": bun.bun_version, "bunqueue": bun.bunqueue_version},
    }


def header(info: dict[str, Any], plan_text: str) -> str:
    bun = info["bun"]
    bun_text = f"bunqueue {bun['bunqueue']} on Bun {bun['bun']}" if bun else "not run"
    source = info["ours"]["source"]
    return "\n".join([
        f"machine: nproc {info['nproc']} ({info['cpus_usable']} usable), {info['cpu_model']}, "
        f"Linux {info['kernel']}, load average {' '.join(map(str, info['load_average']))} at start",
        f"client:  {info['python']}, uvloop {info['uvloop'] or 'not installed'}",
        f"ours:    bunqueue {info['ours']['version']} (Python){f', source {source}' if source else ''}",
        f"bun:     {bun_text}",
        f"plan:    {plan_text}",
    ])
