"""The crash load in PostgreSQL mode: two brokers in one namespace, kills alternating between a broker
(SIGKILL) and PostgreSQL itself (``pg_ctl stop -m immediate``). Every acknowledged push is there and worked,
no job completes twice or comes back after its acknowledged ACK, every acknowledged PUSHF graph is whole, no
parent is pulled before its children completed, the cron outlives every kill, the brokers answer within their
limit while the database is away and serve again by themselves once it is back, and no job row is left in a
state no command leaves it in.

CI runs a few kills of each kind; ``BUNQUEUE_CRASH_KILLS=100`` (or ``python tests/reliability/crashload.py
--postgres --kills 100``) runs many.
"""
from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from bunqueue._testbase.postgres import PostgresServer
from tests.conftest import start_postgres
from tests.reliability.crashload import run_on
from tests.reliability.crashtargets import RECONNECT_LIMIT_S, REPLY_LIMIT_S, PostgresTarget


@pytest.fixture
def crashable_postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server of the test's own: it is crashed, and keeps every commit it acknowledged."""
    server = start_postgres(PostgresServer(durable_commits=True))
    yield server
    server.stop()


async def test_broker_and_postgres_kills_under_load_lose_nothing_acknowledged(
    crashable_postgres: PostgresServer,
) -> None:
    kills = int(os.environ.get("BUNQUEUE_CRASH_KILLS", "8"))
    verdict = await run_on(PostgresTarget(crashable_postgres), kills, seed=7)
    assert verdict.kills == kills and verdict.postgres_kills == kills // 2
    assert verdict.durable_pushed > 0 and verdict.buffered_pushed > 0 and verdict.acked > 0, "the load did not run"
    assert all(verdict.pushed_by.get(kind, 0) > 0 for kind in ("PUSH", "PUSHB", "PUSHF")), verdict.pushed_by
    assert verdict.fewest_round_pushes > 0 and verdict.fewest_round_completions > 0, "a round did no work"
    assert verdict.single_pushes > 0 and verdict.failed > 0 and verdict.delayed_pushed > 0, verdict
    assert verdict.failed_then_completed > 0, verdict
    # A reply leaves after its commit: no acknowledged push may be lost, durable or not.
    assert verdict.durable_missing == 0 and verdict.buffered_missing == 0, verdict
    assert verdict.unworked == 0, verdict
    assert verdict.redelivered_after_ack == 0 and verdict.double_completed == 0, verdict
    assert verdict.failures_lost == 0, verdict
    assert verdict.cron_completed > 0 and verdict.cron_alive, verdict
    flows = verdict.flows
    assert flows is not None and flows.graphs_acked > 0, "no flow graph was pushed"
    assert flows.partial == 0 and flows.acked_missing == 0, flows
    assert flows.stuck_parents == 0 and flows.orphan_pulls == 0, flows
    assert flows.parents_completed > 0 and flows.early_parents == 0, flows
    # The database's outages were seen and answered in time; the brokers found it again by themselves.
    assert verdict.unavailable_replies > 0, verdict
    assert verdict.hangs == 0 and verdict.slowest_reply_s < REPLY_LIMIT_S, verdict
    assert verdict.slowest_reconnect_s < RECONNECT_LIMIT_S, verdict
    assert verdict.integrity == "ok", verdict
    assert verdict.passed, verdict
