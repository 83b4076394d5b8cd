"""The shared conformance scenarios, replayed against our server (a fresh server per scenario), in memory
mode and in PostgreSQL mode (a namespace per scenario, in a database of this run's own).

Scenarios tagged ``quirk`` (accidental reference behaviour) and ``spec-divergent`` (the reference predates
the spec) are informational and skipped; everything else in the listed files must pass.
"""
from __future__ import annotations

import asyncio
import os
import random
import shlex
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from bunqueue._testbase.postgres import PostgresServer

SHARED = Path(os.environ.get("BUNQUEUE_SHARED", Path(__file__).resolve().parents[3] / "shared"))
RUNNER = SHARED / "conformance" / "runner.py"
SCENARIOS = SHARED / "conformance" / "public"

# Scenario files this version serves in full.
# 04_dlq's dlq-and-stall-config needs SetStallConfig and 06_control's extend-locks needs ExtendLock(s).
FULL_FILES = [
    "01_protocol.json", "02_push.json", "03_pull_ack.json", "04_dlq.json", "05_query.json", "06_control.json",
    "07_flow.json", "08_groups.json", "09_limits.json", "10_cron.json", "12_events.json", "13_persistence.json",
    "15_http.json",
]
# Scenarios of files this version serves in part: file -> scenario names.
# 11_monitoring's stats-and-metrics differs in one field: Metrics.activeConnections counts the open client
# connections here; 2.9.5's Metrics handler answers a literal 0 (as it does sqliteSizeMb) and counts its TCP
# connections only for /health, which reports them as this server does.
PARTIAL_FILES = {
    "11_monitoring.json": [
        "queue-metrics-and-trim-events", "prometheus-storage-compact", "workers-register-heartbeat-list",
        "webhooks-crud", "job-logs", "job-heartbeats", "dashboard-views", "logs-hundred-cap",
    ],
}
# Spec scenarios of 14_spec_rules.json about the commands this version serves.
SPEC_SCENARIOS = [
    "spec-push-numeric-strings",
    "spec-push-violations-name-the-field",
    "spec-push-ungrouped-priority",
    "spec-push-max-attempts",
    "spec-push-negative-delay",
    "spec-push-durations-unbounded",
    "spec-push-backoff-object",
    "spec-push-group-priority",
    "spec-pushb-same-rules",
    "spec-pull-lockttl",
    "spec-count-queued-only",
    "spec-ack-fail-remove-per-call",
    "spec-ackb-batch",
    "spec-job-counts-paused",
    "spec-change-delay",
    "spec-clear-logs-keeplogs",
    "spec-get-logs-pagination",
    "spec-extend-lock-duration",
    "spec-children-values-keys",
    "spec-get-state-values",
]

pytestmark = pytest.mark.skipif(not RUNNER.exists(), reason=f"conformance runner not found at {RUNNER}")


MODES = ("memory", "postgres")


@pytest.fixture(scope="module")
def postgres_database(postgres: PostgresServer) -> Iterator[str]:
    """A database for the PostgreSQL-mode runs of this module."""
    name = f"conformance_{uuid.uuid4().hex[:12]}"

    async def admin(statement: str) -> None:
        conn = await asyncpg.connect(postgres.url())
        try:
            await conn.execute(statement)
        finally:
            await conn.close()

    asyncio.run(admin(f'CREATE DATABASE "{name}"'))
    yield postgres.url(name)
    asyncio.run(admin(f'DROP DATABASE "{name}" WITH (FORCE)'))


@pytest.fixture(params=MODES)
def server_cmd(request: pytest.FixtureRequest) -> str:
    python = shlex.quote(sys.executable)
    start = f"{python} -m bunqueue start --host 127.0.0.1 --tcp-port {{port}} --http-port {{http_port}}"
    if request.param == "memory":
        return start
    url = request.getfixturevalue("postgres_database")
    # The runner gives each scenario its own data folder: its name is the scenario's namespace (a restart
    # in the same folder finds its jobs again), and no data path reaches a PostgreSQL broker.
    return (f"env -u DATA_PATH -u BUNQUEUE_DATA_PATH BUNQUEUE_POSTGRES_URL={shlex.quote(url)}"
            f" BUNQUEUE_POSTGRES_NAMESPACE={{data_dir}} {start}")


def _ports() -> str:
    """A port range of this run's own: the runner's default range is shared by every runner on the host,
    and two runs in it at once talk to each other's servers. Below the kernel's ephemeral ports."""
    base = random.randrange(20_000, 32_000, 20)
    return f"{base}-{base + 17}"


def _run(server_cmd: str, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable, str(RUNNER), "check", *args, "-q",
        "--skip-tag", "quirk", "--skip-tag", "spec-divergent",
        "--server-cmd", server_cmd, "--ports", _ports(),
    ]
    return subprocess.run(cmd, cwd=RUNNER.parent, capture_output=True, text=True, timeout=900, check=False)


@pytest.mark.parametrize("scenario_file", FULL_FILES)
def test_scenario_file_passes(server_cmd: str, scenario_file: str) -> None:
    result = _run(server_cmd, str(SCENARIOS / scenario_file))
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert " 0 failed" in result.stdout


@pytest.mark.parametrize("scenario_file", sorted(PARTIAL_FILES))
def test_served_scenarios_of_partial_files_pass(server_cmd: str, scenario_file: str) -> None:
    names = PARTIAL_FILES[scenario_file]
    filters: list[str] = []
    for name in names:
        filters += ["--filter", name]
    result = _run(server_cmd, str(SCENARIOS / scenario_file), *filters)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert f"{len(names)} passed, 0 failed" in result.stdout


def test_spec_rules_for_served_commands_pass(server_cmd: str) -> None:
    filters: list[str] = []
    for name in SPEC_SCENARIOS:
        filters += ["--filter", name]
    result = _run(server_cmd, str(SCENARIOS / "14_spec_rules.json"), *filters)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert f"{len(SPEC_SCENARIOS)} passed, 0 failed" in result.stdout
