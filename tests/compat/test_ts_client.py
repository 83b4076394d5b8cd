"""The published TypeScript client (npm `bunqueue`), unchanged and under Bun, against this broker over TCP.

Each scenario is a script in js/scenarios/; see the script for what it checks. Every scenario runs with
each client release in `clients.TS_CLIENTS`: the current line and the oldest line still in use, which
sends every unset option as msgpack's `undefined`. A call that an older release lacks is left out for that
release only, and the script says so on stderr.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.compat.brokers import Broker
from tests.compat.clients import JS_DIR, TS_CLIENTS
from tests.compat.runner import run_scenario

# A first run installs Bun and the client with npm inside the first test.
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(params=list(TS_CLIENTS))
def client(request: pytest.FixtureRequest) -> dict[str, str]:
    """The environment that makes a scenario import this release of the client."""
    return {"COMPAT_CLIENT": TS_CLIENTS[request.param]}


@pytest.mark.parametrize(
    "scenario",
    [
        "add_and_query", "worker_concurrency", "retries", "dedup_options", "progress_logs", "pause_resume",
        "dlq_retry", "queue_events", "groups", "job_schedulers", "flows",
    ],
)
def test_scenario(scenario: str, client: dict[str, str], bun: Path, broker: Broker) -> None:
    run_scenario([str(bun), f"scenarios/{scenario}.ts"], JS_DIR, broker, client)


def test_auth_with_token(client: dict[str, str], bun: Path, auth_broker: Broker) -> None:
    run_scenario([str(bun), "scenarios/auth.ts"], JS_DIR, auth_broker, client)


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
