"""Running one scenario script as a subprocess, in an environment that points it at the broker only."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.compat.brokers import Broker

# Set by the scenarios themselves, or read by the TypeScript client from the environment: a value
# inherited from the caller would point it elsewhere (a token, an in-process broker, another import path).
SCRUBBED_ENV = (
    "BQ_TOKEN", "BUNQUEUE_TOKEN", "BUNQUEUE_EMBEDDED", "BUNQUEUE_DATA_PATH", "BQ_DATA_PATH", "DATA_PATH",
    "SQLITE_PATH", "PYTHONPATH", "PYTHONHOME", "COMPAT_HOST", "COMPAT_PORT", "COMPAT_TOKEN", "COMPAT_CLIENT",
    "COMPAT_SERVER",
)
SCENARIO_TIMEOUT = 90.0


def run_scenario(cmd: list[str], cwd: Path, broker: Broker, extra_env: dict[str, str] | None = None) -> None:
    """Run one scenario script; it prints `ok` last when every check held."""
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
    env.update(broker.env())
    env.update(extra_env or {})
    try:
        result = subprocess.run(
            cmd, check=False, cwd=cwd, env=env, capture_output=True, text=True, timeout=SCENARIO_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{cmd[-1]} ran longer than {SCENARIO_TIMEOUT:.0f} s\n{_report(exc.stdout, exc.stderr)}",
                    pytrace=False)
    if result.returncode != 0 or result.stdout.strip().splitlines()[-1:] != ["ok"]:
        pytest.fail(f"{cmd[-1]} exited with {result.returncode}\n{_report(result.stdout, result.stderr)}",
                    pytrace=False)
    # Checks a scenario left out for an older client release (shown by `pytest -rP`).
    for line in result.stderr.splitlines():
        if line.startswith("skipped for "):
            print(line)


def _report(stdout: str | bytes | None, stderr: str | bytes | None) -> str:
    def text(value: str | bytes | None) -> str:
        return value.decode(errors="replace") if isinstance(value, bytes) else value or ""

    return f"--- stdout\n{text(stdout)}\n--- stderr\n{text(stderr)}"
