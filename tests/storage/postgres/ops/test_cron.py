"""Crons on the PostgreSQL engine: Cron, CronGet, CronList and CronDelete answered as the memory engine
answers them (validation included), the jobs a cron spawns, and each run fired once across two brokers."""
from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest

from bunqueue import errors
from bunqueue._core.jobs import Job
from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.postgres import PostgresServer
from bunqueue._testbase.server import ServerProcess
from bunqueue._testbase.twins import Twins
from bunqueue.storage.schema import unpack
from tests.storage.postgres.ops.conftest import postgres_broker

pytestmark = pytest.mark.usefixtures("postgres")

Reply = dict[str, Any]
HOUR_MS = 3_600_000


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    """A memory server of this module's own: CronList shows every cron of a server."""
    proc = ServerProcess(env={"RATE_LIMIT_MAX_REQUESTS": "100000000"}).start()
    yield proc
    proc.stop()


def _namespace(pg_server: ServerProcess) -> str:
    return pg_server.env["BUNQUEUE_POSTGRES_NAMESPACE"]


async def _jobs(postgres: PostgresServer, namespace: str, queue: str) -> list[Job]:
    conn = await asyncpg.connect(postgres.url())
    try:
        rows = await conn.fetch("SELECT record FROM bunqueue_jobs WHERE namespace = $1 AND queue = $2 ORDER BY seq",
                                namespace, queue)
    finally:
        await conn.close()
    return [Job.from_record(unpack(row["record"])) for row in rows]


def test_cron_commands_answer_as_in_memory(twins: Twins) -> None:
    assert twins.same({"cmd": "CronList"}) == {"ok": True, "crons": []}
    twins.same({"cmd": "Cron", "name": "every-hour", "queue": "cron-q", "data": {"x": 1}, "repeatEvery": HOUR_MS})
    five = twins.same({"cmd": "Cron", "name": "five-min", "queue": "cron-q", "data": {"y": 2},
                       "schedule": "*/5 * * * *", "jobName": "tick", "timezone": "Europe/Rome", "priority": 3,
                       "maxLimit": 10})
    assert five["cron"]["nextRun"] % 300_000 == 0
    assert (five["cron"]["jobName"], five["cron"]["maxLimit"], five["cron"]["executions"]) == ("tick", 10, 0)
    twins.same({"cmd": "CronGet", "name": "five-min"})
    # A replaced cron keeps its place in the listing.
    twins.same({"cmd": "Cron", "name": "every-hour", "queue": "cron-q", "data": {"x": 2}, "repeatEvery": 2 * HOUR_MS,
                "jobName": "renamed"})
    listed = twins.same({"cmd": "CronList"})["crons"]
    assert [(c["name"], c["jobName"], c["repeatEvery"]) for c in listed] == [
        ("every-hour", "renamed", 2 * HOUR_MS), ("five-min", "tick", None)]
    assert twins.same({"cmd": "CronDelete", "name": "every-hour"}) == {"ok": True}
    for frame in ({"cmd": "CronDelete", "name": "every-hour"}, {"cmd": "CronGet", "name": "every-hour"},
                  {"cmd": "CronGet", "name": 5}, {"cmd": "CronDelete"}):
        assert twins.same(frame) == {"ok": False, "error": errors.CRON_NOT_FOUND}
    assert [c["name"] for c in twins.same({"cmd": "CronList"})["crons"]] == ["five-min"]
    assert twins.same({"cmd": "CronDelete", "name": "five-min"}) == {"ok": True}


def test_a_cron_named_with_what_postgresql_text_cannot_hold_answers_as_in_memory(twins: Twins) -> None:
    for name in ("c\x00", "c\\0"):
        twins.same({"cmd": "Cron", "name": name, "queue": "cron-nul", "repeatEvery": HOUR_MS})
    assert [c["name"] for c in twins.same({"cmd": "CronList"})["crons"]] == ["c\x00", "c\\0"]
    assert twins.same({"cmd": "CronGet", "name": "c\x00"})["cron"]["name"] == "c\x00"
    for name in ("c\x00", "c\\0"):
        assert twins.same({"cmd": "CronDelete", "name": name}) == {"ok": True}
    assert twins.same({"cmd": "CronGet", "name": "c\x00"}) == {"ok": False, "error": errors.CRON_NOT_FOUND}


@pytest.mark.parametrize("frame", [
    {"name": "c3", "queue": "cron-v", "data": {}},
    {"name": "c4", "queue": "cron-v", "schedule": "bogus"},
    {"name": "c5", "queue": "cron-v", "repeatEvery": -1},
    {"name": "c5", "queue": "cron-v", "repeatEvery": 1.5},
    {"name": "c5", "queue": "cron-v", "repeatEvery": "1000"},
    {"name": "seven", "queue": "cron-v", "schedule": "* * * * * * *"},
    {"name": "", "queue": "cron-v", "repeatEvery": 1000},
    {"queue": "cron-v", "repeatEvery": 1000},
    {"name": "c6", "repeatEvery": 1000},
    {"name": "c7", "queue": "cron-v", "repeatEvery": 1000, "jobOptions": {"maxAttempts": "x"}},
    {"name": "c8", "queue": "cron-v", "repeatEvery": 1000, "priority": "high"},
])
def test_a_cron_is_refused_as_in_memory(twins: Twins, frame: Reply) -> None:
    reply = twins.same({"cmd": "Cron", **frame})
    assert reply["ok"] is False and reply["error"]
    assert twins.same({"cmd": "CronList"}) == {"ok": True, "crons": []}


def test_a_cron_run_immediately_pushes_the_job_memory_pushes(
    twins: Twins, postgres: PostgresServer, pg_server: ServerProcess,
) -> None:
    frame = {"cmd": "Cron", "name": "now", "queue": "cron-now", "data": {"i": 1}, "repeatEvery": HOUR_MS,
             "immediately": True, "jobName": "kick", "priority": 2, "preventOverlap": False,
             "jobOptions": {"maxAttempts": 7, "timeout": 5000}}
    twins.same(frame)
    for client in (twins.memory, twins.postgres):
        client.poll({"cmd": "CronGet", "name": "now"}, lambda r: r["cron"]["executions"] == 1)
    assert twins.same({"cmd": "CronGet", "name": "now"})["cron"]["executions"] == 1
    jobs = asyncio.run(_jobs(postgres, _namespace(pg_server), "cron-now"))
    assert len(jobs) == 1
    job = jobs[0]
    assert (job.name, job.data, job.priority, job.max_attempts, job.timeout, job.unique_key) == (
        "kick", {"i": 1}, 2, 7, 5000, None)
    twins.same({"cmd": "CronDelete", "name": "now"})


def test_a_cron_stops_at_its_max_limit_as_in_memory(
    twins: Twins, postgres: PostgresServer, pg_server: ServerProcess,
) -> None:
    twins.same({"cmd": "Cron", "name": "twice", "queue": "cron-max", "repeatEvery": 150, "maxLimit": 2,
                "preventOverlap": False})
    for client in (twins.memory, twins.postgres):
        client.poll({"cmd": "CronGet", "name": "twice"}, lambda r: r["ok"] is False)
    assert len(asyncio.run(_jobs(postgres, _namespace(pg_server), "cron-max"))) == 2


def test_a_cron_that_needs_a_worker_skips_runs_without_one(twins: Twins, postgres: PostgresServer,
                                                          pg_server: ServerProcess) -> None:
    pg = twins.postgres
    first = pg.ok({"cmd": "Cron", "name": "needy", "queue": "cron-needy", "repeatEvery": 100,
                   "skipIfNoWorker": True, "preventOverlap": False})["cron"]
    moved = pg.poll({"cmd": "CronGet", "name": "needy"}, lambda r: r["cron"]["nextRun"] > first["nextRun"] + 150)
    assert moved["cron"]["executions"] == 0
    assert asyncio.run(_jobs(postgres, _namespace(pg_server), "cron-needy")) == []
    pg.ok({"cmd": "RegisterWorker", "queues": ["cron-needy"], "workerId": "cron-needy-worker"})
    pg.poll({"cmd": "CronGet", "name": "needy"}, lambda r: r["cron"]["executions"] >= 1)
    pg.ok({"cmd": "CronDelete", "name": "needy"})
    pg.ok({"cmd": "UnregisterWorker", "workerId": "cron-needy-worker"})
    assert len(asyncio.run(_jobs(postgres, _namespace(pg_server), "cron-needy"))) >= 1


async def test_two_brokers_fire_each_run_of_a_cron_once(postgres: PostgresServer) -> None:
    namespace = f"cron-{uuid.uuid4().hex[:12]}"
    brokers = [postgres_broker(postgres, namespace), postgres_broker(postgres, namespace)]
    client = RawClient(brokers[0].addr)
    conn = await asyncpg.connect(postgres.url())
    try:
        started = time.monotonic()
        client.ok({"cmd": "Cron", "name": "tick", "queue": "ticks", "repeatEvery": 1000, "immediately": True,
                   "preventOverlap": False})
        await asyncio.sleep(3.3)
        # One snapshot: a run's count and its job are committed together.
        row = await conn.fetchrow(
            """SELECT executions, (SELECT count(*) FROM bunqueue_jobs WHERE namespace = $1 AND queue = 'ticks') AS jobs
               FROM bunqueue_crons WHERE namespace = $1 AND name = 'tick'""", namespace)
        elapsed = time.monotonic() - started
        client.ok({"cmd": "CronDelete", "name": "tick"})
    finally:
        client.close()
        await conn.close()
        for broker in brokers:
            broker.stop()
    assert row is not None
    # Runs at 0, 1, 2 and 3 s: one job each, never two for one run.
    assert row["jobs"] == row["executions"]
    assert 3 <= row["executions"] <= int(elapsed) + 1, (row, elapsed)


async def test_a_run_missed_while_no_broker_was_up_is_skipped_unless_the_cron_says_otherwise(
    postgres: PostgresServer,
) -> None:
    namespace = f"cron-{uuid.uuid4().hex[:12]}"
    first = postgres_broker(postgres, namespace)
    client = RawClient(first.addr)
    for name, catch_up in (("skips", True), ("catches-up", False)):
        client.ok({"cmd": "Cron", "name": name, "queue": name, "repeatEvery": 2500, "preventOverlap": False,
                   "skipMissedOnRestart": catch_up})
    created = time.monotonic()
    client.close()
    first.stop()
    await asyncio.sleep(max(0.0, created + 3.0 - time.monotonic()))
    second = postgres_broker(postgres, namespace)
    client = RawClient(second.addr)
    try:
        client.poll({"cmd": "CronGet", "name": "catches-up"}, lambda r: r["cron"]["executions"] == 1)
        skipped = client.poll({"cmd": "CronGet", "name": "skips"},
                              lambda r: r["cron"]["nextRun"] > time.time() * 1000)["cron"]
        assert skipped["executions"] == 0
        assert [len(await _jobs(postgres, namespace, name)) for name in ("skips", "catches-up")] == [0, 1]
    finally:
        client.close()
        second.stop()
