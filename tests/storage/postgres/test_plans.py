"""The plans of the statements that name jobs by id (ACK, the FAIL's read), on a namespace of thousands of jobs
the planner holds no statistics for, as in a broker's first minute on a fresh database (autovacuum has not
analyzed the table yet): each named job is one primary-key probe, never a read of the whole namespace or of
every ready or running job through an index (the planner's default guess for ``namespace = $1`` on such a
table is a few rows). Rows are of a pushed job's size: on a table of a few pages a scan of all of it is
cheaper than probes, and the planner rightly takes it."""
from __future__ import annotations

import re
from collections.abc import AsyncIterator

import asyncpg
import pytest

from bunqueue.broker import states
from bunqueue.storage.postgres import statements
from bunqueue.storage.postgres.migrations import migrate
from bunqueue.storage.postgres.ops import jobwaits, locks

READY_JOBS = 5000
RUNNING = 20
# A stored record of a small job (name, data, options), MessagePack.
RECORD = bytes(200)


@pytest.fixture
async def unanalyzed(postgres_url: str) -> AsyncIterator[asyncpg.Connection]:
    """A connection to a database whose jobs table holds READY_JOBS ready jobs and RUNNING running ones
    ('run-0' ... with tokens 'token-0' ...) in namespace 'n', with no statistics."""
    conn = await asyncpg.connect(postgres_url)
    try:
        await migrate(conn)
        # So that no analyze lands during the test.
        await conn.execute("ALTER TABLE bunqueue_jobs SET (autovacuum_enabled = false)")
        await conn.execute(
            "INSERT INTO bunqueue_jobs (namespace, id, queue, state, priority, lifo, run_at, created_at, record)"
            " SELECT 'n', 'ready-' || i, 'q', $1, 0, false, i, 0, $3 FROM generate_series(1, $2) i",
            states.READY, READY_JOBS, RECORD,
        )
        await conn.execute(
            "INSERT INTO bunqueue_jobs (namespace, id, queue, state, priority, lifo, run_at, created_at, record,"
            " attempts, lease_token, lease_expires_at, worker_id)"
            " SELECT 'n', 'run-' || i, 'q', $1, 0, false, i, 0, $3, 1, 'token-' || i, 9e15, 'worker'"
            " FROM generate_series(0, $2 - 1) i",
            states.ACTIVE, RUNNING, RECORD,
        )
        assert await conn.fetchval("SELECT reltuples FROM pg_class WHERE relname = 'bunqueue_jobs'") < 0
        yield conn
    finally:
        await conn.close()


def _job_scans(plan: str, alias: str) -> list[str]:
    """The scan lines of ``plan`` that read bunqueue_jobs under ``alias``."""
    return [line.strip() for line in plan.splitlines() if re.search(rf"Scan .*\bon bunqueue_jobs {alias}\b", line)]


async def _plan(conn: asyncpg.Connection, statement: str, *args: object) -> str:
    return "\n".join(row[0] for row in await conn.fetch("EXPLAIN " + statement, *args))


async def _generic_plan(conn: asyncpg.Connection, statement: str, literals: str) -> str:
    """The plan a prepared statement gets once it is cached for every execution (as asyncpg's are)."""
    await conn.execute("SET plan_cache_mode = force_generic_plan")
    prepared = await conn.prepare(statement)
    rows = await conn.fetch(f"EXPLAIN EXECUTE {prepared.get_name()}({literals})")
    await conn.execute("RESET plan_cache_mode")
    return "\n".join(row[0] for row in rows)


def _ids(prefix: str) -> list[str]:
    return [f"{prefix}-{i}" for i in range(RUNNING)]


def _array(values: list[str]) -> str:
    return "ARRAY[" + ",".join(f"'{value}'" for value in values) + "]::text[]"


def _assert_probes(plan: str, aliases: tuple[str, ...]) -> None:
    for alias in aliases:
        scans = _job_scans(plan, alias)
        assert scans, plan
        assert all(scan.startswith("->  Index Scan using bunqueue_jobs_pkey") for scan in scans), plan


async def test_an_ack_probes_each_job_by_its_key(unanalyzed: asyncpg.Connection) -> None:
    ids, tokens = _ids("run"), _ids("token")
    args = ("n", ids, tokens, [None] * RUNNING, [False] * RUNNING)
    _assert_probes(await _plan(unanalyzed, statements.ACK, *args), ("j", "j_1"))
    literals = (f"'n', {_array(ids)}, {_array(tokens)}, array_fill(NULL::bytea, ARRAY[{RUNNING}]),"
                f" array_fill(false, ARRAY[{RUNNING}])")
    _assert_probes(await _generic_plan(unanalyzed, statements.ACK, literals), ("j", "j_1"))
    # And it settles what it names, no more.
    rows = await unanalyzed.fetch(statements.ACK, *args)
    assert sorted(row[0] for row in rows) == sorted(ids)
    counts = dict(await unanalyzed.fetch("SELECT state, count(*) FROM bunqueue_jobs GROUP BY state"))
    assert counts == {states.READY: READY_JOBS, states.COMPLETED: RUNNING}


async def test_a_fail_reads_each_running_job_by_its_key(unanalyzed: asyncpg.Connection) -> None:
    ids, tokens = _ids("run"), _ids("token")
    _assert_probes(await _plan(unanalyzed, statements.LOSE_READ, "n", ids, tokens), ("j",))
    _assert_probes(
        await _generic_plan(unanalyzed, statements.LOSE_READ, f"'n', {_array(ids)}, {_array(tokens)}"), ("j",))
    async with unanalyzed.transaction():
        rows = await unanalyzed.fetch(statements.LOSE_READ, "n", [*ids, "ready-1"], [*tokens, "x"])
    assert sorted(row["id"] for row in rows) == sorted(ids)


async def test_a_heartbeat_renews_each_lease_by_its_key(unanalyzed: asyncpg.Connection) -> None:
    ids, tokens = _ids("run"), _ids("token")
    args = ("n", ids, tokens, [1000.0] * RUNNING, [True] * RUNNING)
    _assert_probes(await _plan(unanalyzed, locks.RENEW, *args), ("j",))
    literals = (f"'n', {_array(ids)}, {_array(tokens)}, array_fill(1000::float8, ARRAY[{RUNNING}]),"
                f" array_fill(true, ARRAY[{RUNNING}])")
    _assert_probes(await _generic_plan(unanalyzed, locks.RENEW, literals), ("j",))
    assert sorted(row["id"] for row in await unanalyzed.fetch(locks.RENEW, *args)) == sorted(ids)


async def test_a_wait_for_jobs_reads_each_by_its_key(unanalyzed: asyncpg.Connection) -> None:
    ids = [*_ids("run"), "ready-1", "missing"]
    _assert_probes(await _plan(unanalyzed, jobwaits.OUTCOMES, "n", ids), ("j",))
    _assert_probes(await _generic_plan(unanalyzed, jobwaits.OUTCOMES, f"'n', {_array(ids)}"), ("j",))
    rows = await unanalyzed.fetch(jobwaits.OUTCOMES, "n", ids)
    assert [(row["id"], row["present"]) for row in rows] == [(job_id, job_id != "missing") for job_id in ids]
