"""The benchmarks' C load generators (``httpload.c``, ``tcpload.c``): compiled into ``benchmarks/.cache`` on
first use, and run as a child process whose CPU time is measured from its rusage.

A Python client spends more CPU per request than the servers it measures, and would set the pace instead of
them. Each generator prints what it collected (ids) on stdout and a JSON summary as the last line of stderr.
"""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


class GeneratorError(Exception):
    """No C compiler, a source that did not compile, or a run that printed no summary."""


def compiled(source_name: str) -> Path:
    """The program built from ``benchmarks/<source_name>``, built again when its source or a header is newer."""
    source = HERE / source_name
    binary = HERE / ".cache" / source.stem
    # The headers beside the sources are theirs too (``msgpack_cursor.h``).
    newest = max(path.stat().st_mtime for path in (source, *HERE.glob("*.h")))
    if binary.exists() and binary.stat().st_mtime >= newest:
        return binary
    compiler = shutil.which(os.environ.get("CC", "cc"))
    if compiler is None:
        raise GeneratorError(f"this workload needs a C compiler (cc, or CC) to build benchmarks/{source_name}")
    binary.parent.mkdir(parents=True, exist_ok=True)
    # Built under a temporary name and renamed: two runs building at once never execute a half-written file.
    partial = binary.with_name(f"{binary.name}.{os.getpid()}")
    built = subprocess.run([compiler, "-O2", "-o", str(partial), str(source)], capture_output=True, text=True,
                           check=False)
    if built.returncode != 0:
        raise GeneratorError(f"compiling {source_name} failed: {built.stderr.strip()[-500:]}")
    partial.replace(binary)
    return binary


class Run:
    """One run of a generator: its summary, the lines it printed on stdout, the CPU seconds it used, and
    the stderr lines before the summary (what went wrong, when something did)."""

    __slots__ = ("cpu", "lines", "messages", "returncode", "summary")

    def __init__(self, summary: dict[str, Any], lines: list[str], messages: list[str], returncode: int) -> None:
        self.summary = summary
        self.lines = lines
        self.messages = messages
        self.returncode = returncode
        self.cpu = 0.0


def _run(argv: list[str], env: dict[str, str]) -> Run:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    stdout, stderr = proc.communicate()
    lines = stderr.decode(errors="replace").strip().splitlines()
    try:
        summary = json.loads(lines[-1])
    except (IndexError, ValueError):
        raise GeneratorError(f"{Path(argv[0]).name} failed: {' '.join(lines)[-500:]}") from None
    return Run(summary, stdout.decode().split(), lines[:-1], proc.returncode)


async def run(source_name: str, args: list[str], env: dict[str, str | None] | None = None) -> Run:
    """Build (when needed) and run one generator in a thread, so the event loop stays free meanwhile.
    ``env`` is laid over this process's environment; a None value removes that variable."""
    argv = [str(compiled(source_name)), *args]
    merged = {**os.environ, **(env or {})}
    before = os.times()
    result = await asyncio.to_thread(_run, argv, {k: v for k, v in merged.items() if v is not None})
    # communicate() reaped the child: its CPU time is in this process's children usage now.
    after = os.times()
    result.cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return result
