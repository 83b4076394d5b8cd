"""The schema on a real PostgreSQL: created on an empty database, migrated once by racing brokers, and a
database migrated by a newer version refused."""
from __future__ import annotations

import asyncio

import asyncpg
import pytest

from bunqueue.broker import states
from bunqueue.storage.postgres import groupclaim, statements
from bunqueue.storage.postgres.migrations import MIGRATIONS, SCHEMA_VERSION, SchemaTooNew, current_version, migrate
from bunqueue.storage.postgres.ops import queries

TABLES = {
    "bunqueue_schema_version", "bunqueue_broker_sessions", "bunqueue_jobs", "bunqueue_job_dependencies",
    "bunqueue_results", "bunqueue_job_logs", "bunqueue_dlq", "bunqueue_dedup", "bunqueue_queues",
    "bunqueue_groups", "bunqueue_crons", "bunqueue_webhooks", "bunqueue_workers", "bunqueue_worker_totals",
    "bunqueue_flow_failures",
}


_ORDER_ROWS = [  # id, priority, lifo, run_at
    ("fifo-late", 0, False, 20), ("fifo-early", 0, False, 10), ("lifo-1", 0, True, 10),
    ("lifo-2", 0, True, 10), ("urgent", 5, False, 30), ("fifo-early-2", 0, False, 10),
]
_CLAIM_ORDER = ["urgent", "lifo-2", "lifo-1", "fifo-early", "fifo-early-2", "fifo-late"]


async def _insert_ready(conn: asyncpg.Connection, job_id: str, priority: float, lifo: bool, run_at: int) -> None:
    await conn.execute(
        "INSERT INTO bunqueue_jobs (namespace, id, queue, state, priority, lifo, run_at, created_at, record)"
        " VALUES ('n', $1, 'q', $2, $3, $4, $5, 0, '\\x00')",
        job_id, states.READY, priority, lifo, run_at,
    )


async def _tables(conn: asyncpg.Connection) -> set[str]:
    rows = await conn.fetch("SELECT tablename FROM pg_tables WHERE tablename LIKE 'bunqueue%'")
    return {row["tablename"] for row in rows}


async def test_an_empty_database_gets_every_table_and_the_version(postgres_url: str) -> None:
    conn = await asyncpg.connect(postgres_url)
    try:
        assert await current_version(conn) == 0
        assert await migrate(conn) == SCHEMA_VERSION
        assert await _tables(conn) == TABLES
        versions = await conn.fetch("SELECT version FROM bunqueue_schema_version ORDER BY version")
        assert [row["version"] for row in versions] == list(range(1, SCHEMA_VERSION + 1))
        # Every table is scoped by namespace: it leads each primary key.
        keys = await conn.fetch(
            """SELECT c.relname, a.attname FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
               JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
               WHERE i.indisprimary AND c.relname LIKE 'bunqueue%' AND c.relname <> 'bunqueue_schema_version'"""
        )
        assert {row["relname"] for row in keys} == TABLES - {"bunqueue_schema_version"}
        assert {row["attname"] for row in keys} == {"namespace"}
        # A second start finds the schema current and changes nothing.
        assert await migrate(conn) == SCHEMA_VERSION
        assert await conn.fetchval("SELECT count(*) FROM bunqueue_schema_version") == SCHEMA_VERSION
    finally:
        await conn.close()


async def _plan(conn: asyncpg.Connection, statement: str, *args: object) -> str:
    return "\n".join(row[0] for row in await conn.fetch("EXPLAIN " + statement, *args))


async def test_the_claim_reads_the_queue_order_index_in_order(postgres_url: str) -> None:
    conn = await asyncpg.connect(postgres_url)
    try:
        await migrate(conn)
        definition = await conn.fetchval(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'bunqueue_jobs_queue_order'")
        assert ("(namespace, queue, state, ((group_id IS NULL)), priority DESC, lifo_rank, run_at, seq)"
                in definition)
        assert "WHERE" not in definition
        # The claim reads the index in order and locks as it goes: no sort, no scan of other states or of
        # grouped jobs (the index condition holds the queue, READY and ungrouped).
        await conn.execute("SET enable_seqscan = off")
        plan = await _plan(conn, statements.CLAIM, "n", "q", "b", 1, ["w"] * 10, [1000.0] * 10, False)
        ready_scan = plan[plan.index("Subquery Scan on ready"):plan.index("Subquery Scan on due")]
        assert "Index Scan using bunqueue_jobs_queue_order" in ready_scan
        assert f"(state = {states.READY}) AND ((group_id IS NULL) = true)" in ready_scan
        assert "Sort" not in ready_scan
        assert "Seq Scan on bunqueue_jobs" not in plan
    finally:
        await conn.close()


async def test_counts_by_state_read_the_queue_range_of_the_queue_order_index(postgres_url: str) -> None:
    """What bunqueue_jobs_queue_state and bunqueue_jobs_active served before version 2: a queue's jobs in
    given states, and its running jobs (the concurrency limit), among other queues' jobs."""
    conn = await asyncpg.connect(postgres_url)
    try:
        await migrate(conn)
        for queue, state, count in (("q", states.ACTIVE, 50), ("busy", states.ACTIVE, 5000),
                                    ("q", states.READY, 2000), ("busy", states.READY, 20000)):
            await conn.execute(
                "INSERT INTO bunqueue_jobs (namespace, id, queue, state, run_at, created_at, record,"
                " lease_expires_at) SELECT 'n', $1 || g, $1, $2, 0, 0, '\\x00', g FROM generate_series(1, $3) g",
                f"{queue}-{state}-", state, count,
            )
        await conn.execute("ANALYZE bunqueue_jobs")
        for statement in (
            queries.COUNT_QUEUED,
            f"SELECT count(*) FROM bunqueue_jobs WHERE namespace = $1 AND queue = $2 AND state = {states.ACTIVE}",
        ):
            plan = await _plan(conn, statement, "n", "q")
            assert "bunqueue_jobs_queue_order" in plan, plan
            assert "Index Cond: ((namespace = 'n'::text) AND (queue = 'q'::text)" in plan, plan
    finally:
        await conn.close()


async def test_a_version_1_database_with_jobs_migrates_and_claims_in_the_same_order(postgres_url: str) -> None:
    conn = await asyncpg.connect(postgres_url)
    try:
        async with conn.transaction():
            await conn.execute("CREATE TABLE bunqueue_schema_version (version integer PRIMARY KEY,"
                               " applied_at timestamptz NOT NULL DEFAULT now())")
            for statement in MIGRATIONS[1]:
                await conn.execute(statement)
            await conn.execute("INSERT INTO bunqueue_schema_version (version) VALUES (1)")
        for job_id, priority, lifo, run_at in _ORDER_ROWS:
            await _insert_ready(conn, job_id, priority, lifo, run_at)
        assert await migrate(conn) == SCHEMA_VERSION
        rows = await conn.fetch("SELECT indexname FROM pg_indexes WHERE tablename = 'bunqueue_jobs'")
        names = {row[0] for row in rows}
        assert "bunqueue_jobs_queue_order" in names
        assert not names & {"bunqueue_jobs_claim", "bunqueue_jobs_queue_state", "bunqueue_jobs_active"}
        claimed = await conn.fetch(statements.CLAIM, "n", "q", "b", 1, ["w"] * 10, [1000.0] * 10, False)
        assert [row["id"] for row in claimed] == []  # no session row: a broker without one claims nothing
        await conn.execute("INSERT INTO bunqueue_broker_sessions VALUES ('n', 'b', 1, 0, 0, 9e15)")
        claimed = await conn.fetch(statements.CLAIM, "n", "q", "b", 1, ["w"] * 10, [1000.0] * 10, False)
        assert [row["id"] for row in sorted(claimed, key=lambda row: row["slot"])] == _CLAIM_ORDER
    finally:
        await conn.close()


async def test_the_group_claim_probes_each_group_and_reads_lanes_in_order(postgres_url: str) -> None:
    conn = await asyncpg.connect(postgres_url)
    try:
        await migrate(conn)
        await conn.execute("SET enable_seqscan = off")
        plan = "\n".join(row[0] for row in await conn.fetch(
            "EXPLAIN " + groupclaim.CLAIM, "n", "q", "b", 1, ["w"] * 10, [1000] * 10, 0, 0, 0, None))
        # Groups by a skip scan of the heads index, each lane's jobs from the lane index: no scan of the jobs.
        assert "bunqueue_jobs_group_heads" in plan and "bunqueue_jobs_group_ready" in plan
        assert "Seq Scan on bunqueue_jobs" not in plan
    finally:
        await conn.close()


async def test_claim_order_is_the_memory_heap_order(postgres_url: str) -> None:
    """Priority first, then LIFO jobs newest first, then FIFO jobs by run_at and admission order."""
    conn = await asyncpg.connect(postgres_url)
    try:
        await migrate(conn)
        for job_id, priority, lifo, run_at in _ORDER_ROWS:
            await _insert_ready(conn, job_id, priority, lifo, run_at)
        order = await conn.fetch(
            f"SELECT id FROM bunqueue_jobs WHERE namespace = 'n' AND queue = 'q' AND state = {states.READY}"
            " ORDER BY priority DESC, lifo_rank, run_at, seq"
        )
        assert [row["id"] for row in order] == _CLAIM_ORDER
    finally:
        await conn.close()


async def test_brokers_migrating_at_once_all_succeed_with_one_schema(postgres_url: str) -> None:
    conns = [await asyncpg.connect(postgres_url) for _ in range(4)]
    try:
        versions = await asyncio.gather(*(migrate(conn) for conn in conns))
        assert versions == [SCHEMA_VERSION] * 4
        assert await _tables(conns[0]) == TABLES
        assert await conns[0].fetchval("SELECT count(*) FROM bunqueue_schema_version") == SCHEMA_VERSION
        indexes = await conns[0].fetchval(
            "SELECT count(*) FROM pg_indexes WHERE indexname = 'bunqueue_jobs_queue_order'")
        assert indexes == 1
    finally:
        for conn in conns:
            await conn.close()


async def test_a_database_from_a_newer_version_is_refused_untouched(postgres_url: str) -> None:
    conn = await asyncpg.connect(postgres_url)
    try:
        await migrate(conn)
        await conn.execute("INSERT INTO bunqueue_schema_version (version) VALUES ($1)", SCHEMA_VERSION + 1)
        with pytest.raises(SchemaTooNew) as raised:
            await migrate(conn)
        assert str(raised.value) == (
            f"PostgreSQL schema version {SCHEMA_VERSION + 1} is newer than supported version {SCHEMA_VERSION};"
            " upgrade bunqueue or use another database"
        )
        assert await current_version(conn) == SCHEMA_VERSION + 1
    finally:
        await conn.close()


def test_every_version_up_to_the_current_one_has_its_migration() -> None:
    assert sorted(MIGRATIONS) == list(range(1, SCHEMA_VERSION + 1))
