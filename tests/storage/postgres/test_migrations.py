"""The schema on a real PostgreSQL: created on an empty database, migrated once by racing brokers, and a
database migrated by a newer version refused."""
from __future__ import annotations

import asyncio

import asyncpg
import pytest

from bunqueue.broker import states
from bunqueue.storage.postgres import groupclaim
from bunqueue.storage.postgres.migrations import MIGRATIONS, SCHEMA_VERSION, SchemaTooNew, current_version, migrate

TABLES = {
    "bunqueue_schema_version", "bunqueue_broker_sessions", "bunqueue_jobs", "bunqueue_job_dependencies",
    "bunqueue_results", "bunqueue_job_logs", "bunqueue_dlq", "bunqueue_dedup", "bunqueue_queues",
    "bunqueue_groups", "bunqueue_crons", "bunqueue_webhooks", "bunqueue_workers", "bunqueue_worker_totals",
    "bunqueue_flow_failures",
}


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


async def test_the_claim_index_is_partial_on_ready_and_in_claim_order(postgres_url: str) -> None:
    conn = await asyncpg.connect(postgres_url)
    try:
        await migrate(conn)
        definition = await conn.fetchval("SELECT indexdef FROM pg_indexes WHERE indexname = 'bunqueue_jobs_claim'")
        assert "(namespace, queue, priority DESC, lifo_rank, run_at, seq)" in definition
        assert f"WHERE ((state = {states.READY}) AND (group_id IS NULL))" in definition
        # The claim reads the index in order and locks as it goes: no sort, no scan of other states.
        await conn.execute("SET enable_seqscan = off")
        plan = "\n".join(
            row[0] for row in await conn.fetch(
                f"""EXPLAIN SELECT id FROM bunqueue_jobs WHERE namespace = 'n' AND queue = 'q'
                    AND state = {states.READY} AND group_id IS NULL ORDER BY priority DESC, lifo_rank, run_at, seq
                    LIMIT 10 FOR UPDATE SKIP LOCKED"""
            )
        )
        assert "bunqueue_jobs_claim" in plan
        assert "Sort" not in plan
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
        rows = [  # id, priority, lifo, run_at
            ("fifo-late", 0, False, 20), ("fifo-early", 0, False, 10), ("lifo-1", 0, True, 10),
            ("lifo-2", 0, True, 10), ("urgent", 5, False, 30), ("fifo-early-2", 0, False, 10),
        ]
        for job_id, priority, lifo, run_at in rows:
            await conn.execute(
                "INSERT INTO bunqueue_jobs (namespace, id, queue, state, priority, lifo, run_at, created_at, record)"
                " VALUES ('n', $1, 'q', $2, $3, $4, $5, 0, '\\x00')",
                job_id, states.READY, priority, lifo, run_at,
            )
        order = await conn.fetch(
            f"SELECT id FROM bunqueue_jobs WHERE namespace = 'n' AND queue = 'q' AND state = {states.READY}"
            " ORDER BY priority DESC, lifo_rank, run_at, seq"
        )
        assert [row["id"] for row in order] == [
            "urgent", "lifo-2", "lifo-1", "fifo-early", "fifo-early-2", "fifo-late",
        ]
    finally:
        await conn.close()


async def test_brokers_migrating_at_once_all_succeed_with_one_schema(postgres_url: str) -> None:
    conns = [await asyncpg.connect(postgres_url) for _ in range(4)]
    try:
        versions = await asyncio.gather(*(migrate(conn) for conn in conns))
        assert versions == [SCHEMA_VERSION] * 4
        assert await _tables(conns[0]) == TABLES
        assert await conns[0].fetchval("SELECT count(*) FROM bunqueue_schema_version") == SCHEMA_VERSION
        indexes = await conns[0].fetchval("SELECT count(*) FROM pg_indexes WHERE indexname = 'bunqueue_jobs_claim'")
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
