"""The published TypeScript client (npm `bunqueue`), unchanged and under Bun, against this broker over TCP.

Each scenario is a script in js/scenarios/; see the script for what it checks.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from brokers import Broker
from clients import JS_DIR
from runner import run_scenario

# A first run installs Bun and the client with npm inside the first test.
pytestmark = pytest.mark.timeout(600)


@pytest.mark.parametrize(
    "scenario",
    [
        "add_and_query", "worker_concurrency", "retries", "progress_logs", "pause_resume", "dlq_retry", "queue_events",
        "groups",
    ],
)
def test_scenario(scenario: str, bun: Path, broker: Broker) -> None:
    run_scenario([str(bun), f"scenarios/{scenario}.ts"], JS_DIR, broker)


def test_auth_with_token(bun: Path, auth_broker: Broker) -> None:
    run_scenario([str(bun), "scenarios/auth.ts"], JS_DIR, auth_broker)


def test_worker_drain_benchmark_script(bun: Path, broker: Broker) -> None:
    # benchmarks/ts_worker_drain.ts, small: the measured path keeps working between benchmark runs.
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "ts_worker_drain.ts"
    client = JS_DIR / "node_modules" / "bunqueue" / "dist" / "client" / "index.js"
    result = subprocess.run(
        [str(bun), str(script), str(client), str(broker.port), "500", "50"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert result.returncode == 0, result.stderr
    row = json.loads(result.stdout.strip().splitlines()[-1])
    assert row["jobs"] == 500 and row["rate"] > 0, row
